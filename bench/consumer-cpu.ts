/**
 * `npm run bench:consumer-cpu` — what the parked consumer costs in CPU, not a test.
 *
 * Lambda gives a function CPU in proportion to its memory (one vCPU at 1 769 MB): at 128 MB an
 * invocation's CPU takes 13.8 times its one-core time, at 256 MB 6.9 times. The lab times the
 * consumer with these figures (lab/model.ts: `consumerCpuSeconds`, `consumerInitCpuSeconds`,
 * `consumerReadCpuSeconds`; functions/core/function-sizing.ts, CONSUMER_CPU). Measured with the
 * real code and the real AWS SDK against the emulators (in a child process: only the consumer's
 * side of every call is counted), on this machine's one core:
 *
 * - import: the consumer's deployed bundle (lib/handler-bundle.ts) imported by a fresh Node.js
 *   process, the CPU of the import alone (a cold start's share that is the code's);
 * - invocations: tasks parked one an invocation through the consumer's handler, as the mapping
 *   delivers them, the CPU of each handler call (the first ones pay the clients' first requests);
 * - reads: a waiting invocation's round over the leases (`views` of the lane's shards: one Query
 *   each), with the shard empty, a quarter full and full.
 *
 * Plain HTTP to the emulators: Lambda's TLS to AWS comes on top (most of it in a cold start's
 * first requests), and an arm64 core is not this machine's.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Command } from 'commander';
import { integer } from '../local/cli-values.js';
import { ENV } from '../functions/core/environment.js';
import { CONSUMER_CPU, FUNCTION_SIZING, lambdaCpuSeconds } from '../functions/core/function-sizing.js';
import { writeHandlerBundle } from '../lib/handler-bundle.js';
import { type Built, cpuMs, type Fleet, parkAll, parkedFleet, startHost } from './lib/parked-fleet.js';

/** One shard of the lease table holds this many slots: a plan of this many threads reads one full shard. */
const PLAN = 64;

interface Spread {
  n: number;
  min: number;
  median: number;
  p90: number;
  max: number;
}

interface Figures {
  /** CPU of importing the consumer's bundle in a fresh process, ms (one per run). */
  importMs: Spread;
  /** CPU of the first and second invocation of a process, ms. */
  firstInvocationMs: number;
  secondInvocationMs: number;
  /** CPU of the invocations after the second, ms. */
  warmInvocationMs: Spread;
  /** CPU of one round over the leases (one shard) by the live slots it read, ms. */
  readMs: { live: number; cpu: Spread }[];
}

function spread(values: readonly number[]): Spread {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? Number.NaN;
  return { n: sorted.length, min: sorted[0] ?? Number.NaN, median: at(0.5), p90: at(0.9), max: at(1) };
}

/** The consumer's environment as the stack sets it (names only matter: the import makes no call). */
const QUEUE = 'https://sqs.us-east-1.amazonaws.com/123456789012/bench';
const DEPLOYED_ENV = {
  AWS_REGION: 'us-east-1',
  [ENV.config]: JSON.stringify({ prefix: 'bench' }),
  [ENV.normalQueueUrl]: `${QUEUE}-tasks`,
  [ENV.highQueueUrl]: `${QUEUE}-high`,
  [ENV.dlqUrl]: `${QUEUE}-dlq`,
  [ENV.resultsTable]: 'bench-results',
  [ENV.governorTable]: 'bench-governor',
  [ENV.leasesTable]: 'bench-leases',
  [ENV.solverKeySecretArn]: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:bench-solver-key',
  [ENV.eventBusName]: 'bench-events',
};

/** The CPU a fresh Node.js process spends importing the consumer's bundle, ms, `runs` times. */
function importCpu(runs: number): number[] {
  // Inside node_modules/.cache so the bundle's external @aws-sdk/* resolve from the checkout's node_modules.
  const cache = join(process.cwd(), 'node_modules', '.cache');
  mkdirSync(cache, { recursive: true });
  const dir = mkdtempSync(join(cache, 'consumer-cpu-'));
  try {
    const [file] = writeHandlerBundle('consumer', dir).filter((path) => path.endsWith('.mjs'));
    const script = `const u0 = process.cpuUsage(); await import(${JSON.stringify(file)}); const u = process.cpuUsage(u0); process.stdout.write(String((u.user + u.system) / 1000));`;
    return Array.from({ length: runs }, () => {
      const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
        encoding: 'utf8',
        env: { ...process.env, ...DEPLOYED_ENV },
      });
      if (child.status !== 0) throw new Error(`importing the consumer's bundle failed: ${child.stderr.slice(-2000)}`);
      return Number(child.stdout);
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** CPU of each of `n` rounds over the lane's shards, ms. */
async function readCpu(built: Built, n: number): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const before = cpuMs();
    await built.leases.views(built.shards);
    out.push(cpuMs() - before);
  }
  return out;
}

/** Park `tasks` one an invocation, the CPU of each handler call, ms. */
async function invocationCpu(fleet: Fleet, built: Built, tasks: number, from: number): Promise<number[]> {
  const out: number[] = [];
  const handler: Built['handler'] = async (event, context) => {
    const before = cpuMs();
    try {
      return await built.handler(event, context);
    } finally {
      out.push(cpuMs() - before);
    }
  };
  await parkAll(fleet, built, tasks, { batchSize: 1, maxConcurrency: 1, handler, from });
  return out;
}

async function measure(flags: { imports: number; reads: number }): Promise<Figures> {
  const importMs = spread(importCpu(flags.imports));
  // Solves that never finish within the run: every parked task keeps its slot.
  const { endpoints, stop } = await startHost(3_600_000);
  const fleet = parkedFleet(endpoints, PLAN);
  try {
    const built = await fleet.build();
    const readMs: Figures['readMs'] = [];
    readMs.push({ live: 0, cpu: spread(await readCpu(built, flags.reads)) });
    const quarter = PLAN / 4;
    const first = await invocationCpu(fleet, built, quarter, 0);
    readMs.push({ live: quarter, cpu: spread(await readCpu(built, flags.reads)) });
    const rest = await invocationCpu(fleet, built, PLAN - quarter, quarter);
    readMs.push({ live: PLAN, cpu: spread(await readCpu(built, flags.reads)) });
    const all = [...first, ...rest];
    return {
      importMs,
      firstInvocationMs: all[0] ?? Number.NaN,
      secondInvocationMs: all[1] ?? Number.NaN,
      warmInvocationMs: spread(all.slice(2)),
      readMs,
    };
  } finally {
    await fleet.close();
    stop();
  }
}

const ms = (value: number) => value.toFixed(1);
const row = (what: string, s: Spread) =>
  `| ${what} | ${s.n} | ${ms(s.min)} | ${ms(s.median)} | ${ms(s.p90)} | ${ms(s.max)} |`;

async function main(): Promise<void> {
  const program = new Command('bench:consumer-cpu')
    .description("The parked consumer's CPU: its bundle's import, its invocations, its reads of the leases")
    .option('--imports <n>', 'fresh processes importing the bundle', integer(1, 50), 5)
    .option('--reads <n>', 'rounds over the leases measured at each fill', integer(1, 10_000), 200)
    .option('--json', 'print one JSON object');
  program.parse();
  const flags = program.opts<{ imports: number; reads: number; json?: boolean }>();
  const figures = await measure(flags);
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
    return;
  }
  const warm = figures.warmInvocationMs.median / 1000;
  const lines = [
    `Node.js ${process.version}, ${process.arch}: CPU on one core, ms`,
    '',
    '| what | n | min | median | p90 | max |',
    '|---|---|---|---|---|---|',
    row("import of the consumer's bundle (fresh process)", figures.importMs),
    `| first invocation / second | 1 | ${ms(figures.firstInvocationMs)} / ${ms(figures.secondInvocationMs)} | | | |`,
    row('invocations after the second (each parks its task)', figures.warmInvocationMs),
    ...figures.readMs.map((r) => row(`a round over the leases, ${r.live} of ${PLAN} slots live`, r.cpu)),
    '',
    `The lab assumes ${CONSUMER_CPU.warmSeconds * 1000} ms a warm invocation, ${CONSUMER_CPU.initSeconds * 1000} ms a cold start adds, ${CONSUMER_CPU.readSeconds * 1000} ms a round over the leases (functions/core/function-sizing.ts, CONSUMER_CPU).`,
    `At the median here a warm invocation's CPU takes ${[128, FUNCTION_SIZING.parkedConsumer.memoryMb, FUNCTION_SIZING.consumer.memoryMb].map((mb) => `${ms(lambdaCpuSeconds(warm, mb) * 1000)} ms at ${mb} MB`).join(', ')} (the parked consumer is deployed at ${FUNCTION_SIZING.parkedConsumer.memoryMb} MB).`,
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
