/**
 * `npm run bench:overflow` — the overflow lane in the lab: on the surge traces, the governor
 * without overflow, the governor with overflow at several spend caps, and the clairvoyant oracle
 * without overflow; p95 and total spend (thread plan + overflow + compute). Exits 1 when any
 * run spent a cent past its cap (the lane's own per-hour and per-day sums, lab/overflow.ts).
 */
import { Command, InvalidArgumentError } from 'commander';
import { shippedTraces } from './bench.js';
import { DEFAULT_OVERFLOW, governorOverflowPolicy } from './overflow.js';
import { createPolicy } from './policies.js';
import { type Policy, simulate, type RunResult } from './sim.js';
import type { Trace } from './trace.js';

interface Options {
  trace?: string;
  caps: number[];
  dayCapHours: number;
  price: number;
  priceHint: number;
  threads: number;
  solveFactor: number;
  planUsdPerThreadHour: number;
  target: number;
  seed: number;
  json?: boolean;
}

/** One row of the table. */
interface Row {
  trace: string;
  policy: string;
  p95: number | null;
  solved: number;
  arrivals: number;
  overflowSolved: number;
  planUsd: number;
  overflowUsd: number;
  computeUsd: number;
  totalUsd: number;
  worstHourUsd: number;
  capUsdPerHour: number | null;
  capBreaches: number;
}

function rowOf(trace: Trace, run: RunResult, options: Options): Row {
  const planUsd = trace.settings.planThreads * (trace.durationSeconds / 3600) * options.planUsdPerThreadHour;
  const overflowUsd = run.overflow?.spentUsd ?? 0;
  return {
    trace: trace.name,
    policy: run.policy,
    p95: run.latency.p95,
    solved: run.solved,
    arrivals: run.arrivals,
    overflowSolved: run.overflow?.solved ?? 0,
    planUsd,
    overflowUsd,
    computeUsd: run.computeUsd,
    totalUsd: planUsd + overflowUsd + run.solverUsd + run.computeUsd,
    worstHourUsd: run.overflow?.worstHourUsd ?? 0,
    capUsdPerHour: run.overflow?.capUsdPerHour ?? null,
    capBreaches: run.overflow?.capBreaches ?? 0,
  };
}

function policiesFor(trace: Trace, options: Options): Policy[] {
  const withOverflow = options.caps.map((cap) =>
    governorOverflowPolicy(trace.settings, {
      ...DEFAULT_OVERFLOW,
      pricePerSolveUsd: options.price,
      priceHintUsd: options.priceHint,
      threads: options.threads,
      solveFactor: options.solveFactor,
      latencyTargetMs: options.target * 1000,
      capUsdPerHour: cap,
      capUsdPerDay: cap * options.dayCapHours,
    }),
  );
  return [createPolicy('governor', trace.settings), ...withOverflow, createPolicy('oracle', trace.settings)];
}

function format(rows: Row[]): string {
  const head = [
    'trace',
    'policy',
    'p95 s',
    'solved',
    'overflow solves',
    'plan $',
    'overflow $',
    'compute $',
    'total $',
    'worst hour $',
    'cap $/h',
    'breaches',
  ];
  const body = rows.map((r) => [
    r.trace,
    r.policy,
    r.p95 === null ? '—' : r.p95.toFixed(1),
    `${r.solved}/${r.arrivals}`,
    String(r.overflowSolved),
    r.planUsd.toFixed(2),
    r.overflowUsd.toFixed(2),
    r.computeUsd.toFixed(2),
    r.totalUsd.toFixed(2),
    r.worstHourUsd.toFixed(2),
    r.capUsdPerHour === null ? '—' : r.capUsdPerHour.toFixed(2),
    String(r.capBreaches),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
  return [line(head), ...body.map(line)].join('\n');
}

function main(options: Options): void {
  const names = options.trace?.split(',').map((n) => n.trim()) ?? undefined;
  const traces = shippedTraces().filter((t) => (names === undefined ? t.surge : names.includes(t.name)));
  const rows: Row[] = [];
  for (const trace of traces) {
    for (const policy of policiesFor(trace, options)) {
      const run = simulate(trace, policy, { seed: options.seed });
      rows.push(rowOf(trace, run, options));
      process.stderr.write(`  ${trace.name} / ${run.policy}: ${run.wallMs.toFixed(0)} ms\n`);
    }
  }
  process.stdout.write(options.json ? `${JSON.stringify(rows, null, 2)}\n` : `${format(rows)}\n`);
  const breached = rows.filter((r) => r.capBreaches > 0);
  if (breached.length > 0) {
    process.stderr.write(`FAIL: spend past the cap in ${breached.map((r) => `${r.trace} / ${r.policy}`).join(', ')}\n`);
    process.exitCode = 1;
  } else process.stderr.write('Cap check: no run spent a cent past its hourly or daily cap.\n');
}

function positive(value: string): number {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('a positive number');
  return n;
}

function caps(value: string): number[] {
  return value.split(',').map((v) => positive(v.trim()));
}

new Command()
  .name('bench:overflow')
  .description('The governor with and without an overflow lane on the surge traces, p95 and spend per cap.')
  .option('--trace <names>', 'traces, comma-separated (default: the surge traces)')
  .option('--caps <usd>', 'overflow spend caps, USD per hour, comma-separated', caps, [1, 2, 3])
  .option('--day-cap-hours <n>', 'the daily cap is this many hourly caps', positive, 8)
  .option('--price <usd>', "the overflow provider's true price per solve", positive, DEFAULT_OVERFLOW.pricePerSolveUsd)
  .option(
    '--price-hint <usd>',
    'the price per solve the policy assumes until it learns one',
    positive,
    DEFAULT_OVERFLOW.priceHintUsd,
  )
  .option('--threads <n>', "the overflow provider's threads", positive, DEFAULT_OVERFLOW.threads)
  .option('--solve-factor <x>', "the overflow provider's solve times relative to the primary's", positive, 1)
  .option('--plan-usd-per-thread-hour <usd>', 'what the thread plan costs per thread-hour', positive, 0.0025)
  .option('--target <s>', 'latency target: p95 of queue wait, seconds', positive, 30)
  .option('--seed <n>', 'random seed', (v) => Number.parseInt(v, 10), 1)
  .option('--json', 'print the rows as JSON')
  .action((options: Options) => main(options))
  .parse();
