/**
 * `npm run bench:sweep` — `npm start` on drawn flags, not a test. Each run draws its flags from its
 * seed over the axes of `start` (bench/lib/sweep-draw.ts: plans of 2–50 threads, the plan the
 * governor is told and the threads it keeps for others, batches, both designs, neighbours, low
 * balances with halt and pause levels, solver errors, unsolvable captchas, latencies and outages, a
 * rejected key, both protocols and every dialect, crashes, fault mixes on SQS and DynamoDB, short
 * and long visibility, rates, the overflow lane with its outages, protocol and dialect, the high
 * lane, the governor's cadence), runs the CLI itself (`captcha-fleet start … --json`, a child
 * process: the flags go through the same parsing and configuration checks a user's do) and reads
 * its summary. A run is broken when it shows what no run may (bench/lib/judge.ts: a task lost
 * or unknown, paid twice beyond the ids lost in crashes or in answers an outage held past their
 * request, a valid task in the DLQ, a second DLQ copy SQS could have kept from repeating, a solved
 * task unannounced); it may end with tasks waiting where `start` says why (paused on money or for
 * threads others hold, cut by --max-duration), and a configuration `start` refuses is reported with
 * its message. Each row gives the balance at the end and, under the pause level, by how many
 * solves (reported, not judged: the governor's pause allows about one). Exit 1 when any run is
 * broken.
 * `--seed N --runs 1` repeats run N of a longer sweep; each row prints its flags, to rerun it with
 * `npm start -- <flags>`.
 */
import { spawn } from 'node:child_process';
import { Command } from 'commander';
import { integer } from '../local/cli-values.js';
import { MAX_DEFAULT_DURATION_S, startCommand } from '../bin/commands/start/options.js';
import type { DemoSummary } from '../local/demo.js';
import { judge } from './lib/judge.js';
import { drawStartRun } from './lib/sweep-draw.js';

interface Options {
  runs: number;
  seed: number;
  jobs: number;
  json?: boolean;
}

/** One run as it ended: its summary and verdict, or the CLI's refusal. */
interface SweepRun {
  seed: number;
  flags: string[];
  exitCode: number | null;
  seconds: number;
  summary?: DemoSummary;
  broken: string[];
  bounded: string[];
  /** What the CLI printed last on stderr when it gave no summary: a refused configuration, or a run that broke. */
  refused?: string;
}

/**
 * A run that hangs past this is killed and reported broken: five minutes past the longest a run
 * without --max-duration waits for its work (the drawn outages end well before it), so a small
 * plan's long but working run is not taken for a hang.
 */
const RUN_LIMIT_MS = (MAX_DEFAULT_DURATION_S + 5 * 60) * 1000;

function runOne(seed: number): Promise<SweepRun> {
  const { flags } = drawStartRun(seed);
  const started = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bin/captcha-fleet.ts', 'start', ...flags, '--json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4_000);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), RUN_LIMIT_MS);
    child.on('close', (exitCode) => {
      clearTimeout(timer);
      const seconds = (Date.now() - started) / 1000;
      const last = stdout.trim().split('\n').at(-1) ?? '';
      let summary: DemoSummary | undefined;
      try {
        summary = last.startsWith('{') ? (JSON.parse(last) as DemoSummary) : undefined;
      } catch {
        summary = undefined;
      }
      if (summary !== undefined) {
        resolve({ seed, flags, exitCode, seconds, summary, ...judge(summary, { queuedBreaks: false }) });
        return;
      }
      const refusal = refusalOf(stderr);
      // The CLI's usage or configuration errors exit 2 with their message; anything else is broken.
      resolve({
        seed,
        flags,
        exitCode,
        seconds,
        broken: exitCode === 2 ? [] : [`no summary (exit ${exitCode}): ${refusal}`],
        bounded: [],
        refused: refusal,
      });
    });
  });
}

/** The error lines of a run that printed no summary. */
function refusalOf(stderr: string): string {
  const lines = stderr
    .trim()
    .split('\n')
    .filter((line) => !line.startsWith('['));
  return lines.slice(-3).join(' ').slice(0, 400);
}

/** How the run ended, in a few words: `complete`, `paused (PAUSE_LOW_BALANCE)`, `max_duration, 12 queued`. */
function endOf(run: SweepRun): string {
  const s = run.summary;
  if (s === undefined) return 'refused';
  const queued = s.stillQueued > 0 ? `, ${s.stillQueued} queued` : '';
  const reason = s.endedBy === 'complete' ? '' : ` (${s.governor?.lastReason?.code ?? 'no governor'})`;
  return `${s.endedBy}${reason}${queued}`;
}

/** `OK`, `OK within the protocols' bound: …`, `BROKEN: …`. */
function verdictOf(run: SweepRun): string {
  if (run.broken.length > 0) return `BROKEN: ${run.broken.join('; ')}`;
  if (run.refused !== undefined) return `refused: ${run.refused}`;
  if (run.bounded.length > 0) return `OK within the protocols' bound: ${run.bounded.join('; ')}`;
  return 'OK';
}

/**
 * The balance at the end, and where it is under the pause level, by how many solves: the governor
 * stops starting solves there, so a run may end at most about one solve under (docs/governor.md).
 */
function moneyOf(run: SweepRun, s: DemoSummary): string {
  const command = startCommand().exitOverride();
  command.parse(run.flags, { from: 'user' });
  const { pauseBalance, solverPrice } = command.opts();
  const end = s.solver.balanceEnd;
  const left = `$${end.toFixed(3)} left`;
  if (end >= pauseBalance || solverPrice <= 0) return left;
  const under = Math.ceil((pauseBalance - end) / solverPrice - 1e-9);
  return `${left}, ${under} solve(s) under the $${pauseBalance} pause level`;
}

function row(run: SweepRun): string {
  const s = run.summary;
  const counts =
    s === undefined
      ? '–'
      : `${s.solved}/${s.submitted} solved, ${s.failed} failed, ${s.inDlq} DLQ, ${s.solver.submissions} submissions (${s.solver.accepted} accepted, ${s.solver.overCapRejections} over-cap), ${moneyOf(run, s)}`;
  return `| ${run.seed} | \`${run.flags.join(' ')}\` | ${endOf(run)} | ${counts} | ${run.seconds.toFixed(0)} s | ${verdictOf(run)} |`;
}

async function main(): Promise<void> {
  const options = new Command('bench:sweep')
    .option('--runs <n>', 'runs, each on its own drawn flags', integer(1, 10_000), 12)
    .option('--seed <n>', 'seed of the first run (the next runs take the next seeds)', integer(1, 2 ** 31 - 1), 1)
    .option('--jobs <n>', 'runs at once (each run starts its own emulators and simulators)', integer(1, 16), 2)
    .option('--json', 'print one JSON object')
    .parse()
    .opts<Options>();
  const seeds = Array.from({ length: options.runs }, (_, i) => options.seed + i);
  const results: SweepRun[] = [];
  let next = 0;
  const worker = async () => {
    while (next < seeds.length) {
      const seed = seeds[next++] as number;
      const run = await runOne(seed);
      results.push(run);
      process.stderr.write(`seed ${seed}: ${endOf(run)} · ${verdictOf(run)} (${run.seconds.toFixed(0)} s)\n`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.jobs, seeds.length) }, worker));
  results.sort((a, b) => a.seed - b.seed);
  if (options.json) process.stdout.write(`${JSON.stringify({ options, results })}\n`);
  else {
    const broken = results.filter((r) => r.broken.length > 0).length;
    process.stdout.write(
      [
        `${options.runs} runs, seeds ${options.seed}–${options.seed + options.runs - 1}: ${broken} broken`,
        '',
        '| seed | flags (after `npm start --`) | ended | tasks | wall | verdict |',
        '|---|---|---|---|---|---|',
        ...results.map(row),
      ].join('\n') + '\n',
    );
  }
  process.exitCode = results.some((r) => r.broken.length > 0) ? 1 : 0;
}

await main();
