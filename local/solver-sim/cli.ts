/**
 * `npm run solver-sim -- [flags]`: run the solver simulator on its own until SIGINT/SIGTERM,
 * then print its counters. A bad flag names the problem, prints the usage and exits 2.
 */
import { Command, CommanderError, Option } from 'commander';
import { DIALECTS } from '../../functions/core/solver-protocol.js';
import { decimal, integer, outageWindow } from '../cli-values.js';
import {
  createSolverSimulator,
  type OutageWindow,
  SolverSimConfigError,
  type SolverSimOptions,
  type SolverSimulator,
} from './index.js';

/** A well-formed key (32 hex characters) for the printed examples; any such key is accepted. */
const EXAMPLE_KEY = '0123456789abcdef'.repeat(2);

function buildProgram(): Command {
  return new Command('solver-sim')
    .description(
      'Protocol-faithful solver API simulator: in.php / res.php (2captcha, CaptchaAI) and the JSON task API (createTask / getTaskResult / getBalance: 2captcha v2, Anti-Captcha, CapMonster, CapSolver) on one port; GET /stats',
    )
    .option('--port <n>', 'port to listen on (0 = any free port)', integer(0, 65_535), 8080)
    .option('--host <address>', 'address to bind', '127.0.0.1')
    .option('--threads <n>', 'plan threads (concurrent tasks allowed)', integer(0, 10_000), 50)
    .option('--foreign-threads <n>', 'threads held by other users of the key', integer(0, 10_000), 0)
    .option('--balance <usd>', 'starting balance, USD', decimal(0, 1_000_000), 10)
    .option('--price <usd>', 'price per solved task, USD', decimal(0, 100), 0.001)
    .option(
      '--latency-ms <ms>',
      'median solve time for every method, ms (default: per-method medians)',
      decimal(0, 600_000),
    )
    .option('--latency-scale <x>', 'multiply every solve time', decimal(0, 1000), 1)
    .option('--error-rate <share>', 'share of requests answered with a transient failure', decimal(0, 1, 'a share'), 0)
    .option('--unsolvable-rate <share>', 'share of tasks ending ERROR_CAPTCHA_UNSOLVABLE', decimal(0, 1, 'a share'), 0)
    .addOption(new Option('--dialect <name>', 'which service the codes mean').choices(DIALECTS).default('captchaai'))
    .option('--seed <n>', 'seed of every random draw', integer(0, 2 ** 31 - 1), 1)
    .option('--bad-key', 'answer ERROR_KEY_DOES_NOT_EXIST to every request', false)
    .option('--valid-keys <keys>', 'comma-separated 32-character keys to accept (default: any 32-character key)')
    .option('--ban-after <n>', 'ban an IP after n requests with a rejected key', integer(1, 1_000_000))
    .option(
      '--outage <start:duration>',
      'be down (HTTP 503) from START s for DURATION s after start; repeatable',
      outageWindow,
      [] as OutageWindow[],
    )
    .showHelpAfterError()
    .exitOverride();
}

interface CliFlags {
  port: number;
  host: string;
  threads: number;
  foreignThreads: number;
  balance: number;
  price: number;
  latencyMs?: number;
  latencyScale: number;
  errorRate: number;
  unsolvableRate: number;
  dialect: (typeof DIALECTS)[number];
  seed: number;
  badKey: boolean;
  validKeys?: string;
  banAfter?: number;
  outage: OutageWindow[];
}

function optionsFrom(flags: CliFlags): SolverSimOptions {
  const options: SolverSimOptions = {
    seed: flags.seed,
    dialect: flags.dialect,
    planThreads: flags.threads,
    foreignThreads: flags.foreignThreads,
    balance: flags.balance,
    pricePerSolve: flags.price,
    latencyScale: flags.latencyScale,
    transientErrorRate: flags.errorRate,
    unsolvableRate: flags.unsolvableRate,
    badKey: flags.badKey,
    outages: flags.outage,
  };
  if (flags.latencyMs !== undefined) options.medianMs = flags.latencyMs;
  if (flags.validKeys !== undefined)
    options.validKeys = flags.validKeys
      .split(',')
      .map((key) => key.trim())
      .filter(Boolean);
  if (flags.banAfter !== undefined) options.banAfterBadKeyRequests = flags.banAfter;
  return options;
}

async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  try {
    program.parse(argv);
  } catch (error) {
    if (error instanceof CommanderError) {
      // Help and version exit 0; every parse problem has been printed with the usage already.
      return error.exitCode === 0 ? 0 : 2;
    }
    throw error;
  }
  let simulator: SolverSimulator;
  try {
    simulator = createSolverSimulator(optionsFrom(program.opts<CliFlags>()));
  } catch (error) {
    if (error instanceof SolverSimConfigError) {
      process.stderr.write(`${error.message}\n\n${program.helpInformation()}`);
      return 2;
    }
    throw error;
  }
  const flags = program.opts<CliFlags>();
  const { url } = await simulator.listen(flags.port, flags.host);
  // Never echo a configured key: it may be a copy of a real one. Without one, any well-formed
  // key works, so the examples show one (the services refuse a key that is not 32 characters).
  const key = flags.validKeys === undefined ? EXAMPLE_KEY : '<one-of-your-valid-keys>';
  process.stdout.write(
    [
      `solver-sim listening at ${url} (dialect ${flags.dialect}, ${flags.threads} threads, balance $${flags.balance}, seed ${flags.seed})`,
      `  in.php:  ${url}/in.php    res.php: ${url}/res.php    createTask: ${url}/createTask    stats: ${url}/stats`,
      ...flags.outage.map(
        (window) => `  outage: down (HTTP 503) from ${window.startMs / 1000} s for ${window.durationMs / 1000} s`,
      ),
      'try:',
      `  curl -s '${url}/in.php?key=${key}&method=userrecaptcha&googlekey=6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-&pageurl=https://example.com&json=1'`,
      `  curl -s '${url}/res.php?key=${key}&action=get&id=<id>&json=1'`,
      `  curl -s ${url}/createTask -d '{"clientKey":"${key}","task":{"type":"RecaptchaV2TaskProxyless","websiteURL":"https://example.com","websiteKey":"6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"}}'`,
      `  curl -s ${url}/getTaskResult -d '{"clientKey":"${key}","taskId":<taskId>}'`,
      `  curl -s '${url}/stats'`,
      'Ctrl-C prints the final stats.',
      '',
    ].join('\n'),
  );
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    process.once('SIGINT', () => resolve('SIGINT'));
    process.once('SIGTERM', () => resolve('SIGTERM'));
  });
  await simulator.close();
  process.stdout.write(`\n${signal}: final stats\n${JSON.stringify(simulator.stats(), null, 2)}\n`);
  return 0;
}

main(process.argv).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(
      `solver-sim failed: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}\n`,
    );
    process.exitCode = 1;
  },
);
