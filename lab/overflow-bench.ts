/**
 * `npm run bench:overflow` — the overflow lane in the lab: on the surge traces and the traces
 * with a solver outage, the governor without overflow, the governor with overflow at several
 * spend caps, and the clairvoyant oracle without overflow; p95, the solves split between the
 * providers, the DLQ and receives, and total spend (thread plan + overflow + the AWS bill, lab/cost.ts). Exits 1
 * when any run spent a cent past its cap (the lane's own per-hour and per-day sums,
 * lab/overflow.ts) or started a solve under the overflow provider's pause level.
 */
import { Command, InvalidArgumentError } from 'commander';
import { SOLVE_MODES, type SolveMode } from '../functions/core/settings.js';
import { shippedTraces } from './bench.js';
import { costOfRun } from './cost.js';
import { parsePositive, parseSeed, parseWhole } from './flags.js';
import { DEFAULT_OVERFLOW, governorOverflowPolicy } from './overflow.js';
import { createPolicy } from './policies.js';
import { type Policy, simulate, type RunResult } from './sim.js';
import { type Trace, withSolveMode } from './trace.js';

interface Options {
  trace?: string;
  caps: number[];
  dayCapHours: number;
  price: number;
  priceHint: number;
  threads: number;
  overflowBalance: number;
  solveFactor: number;
  planUsdPerThreadHour: number;
  target: number;
  seed: number;
  solveMode?: SolveMode;
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
  deadLettered: number;
  maxReceives: number;
  planUsd: number;
  overflowUsd: number;
  computeUsd: number;
  /** What the run would have cost on AWS (every charge, lab/cost.ts), and by service. */
  awsUsd: number;
  awsByService: Record<string, number>;
  totalUsd: number;
  worstHourUsd: number;
  capUsdPerHour: number | null;
  capBreaches: number;
  /** Ticks the overflow provider's own guard kept the lane closed. */
  guardClosedTicks: number;
  /** The overflow provider's lowest balance, USD, and solves it started under its pause level. */
  overflowLowestUsd: number | null;
  startedPastPause: number;
  /** Ticks the lane was open, and the ticks per overflow reason (JSON only). */
  openTicks: number;
  overflowReasons: Record<string, number>;
  /** UpdateEventSourceMapping calls the lane's changes would have made. */
  mappingUpdates: number;
}

function rowOf(trace: Trace, run: RunResult, options: Options): Row {
  const planUsd = trace.settings.planThreads * (trace.durationSeconds / 3600) * options.planUsdPerThreadHour;
  const overflowUsd = run.overflow?.spentUsd ?? 0;
  const aws = costOfRun(trace, run);
  return {
    trace: trace.name,
    policy: run.policy,
    p95: run.latency.p95,
    solved: run.solved,
    arrivals: run.arrivals,
    overflowSolved: run.overflow?.solved ?? 0,
    deadLettered: run.deadLettered,
    maxReceives: run.maxReceives,
    planUsd,
    overflowUsd,
    computeUsd: run.computeUsd,
    awsUsd: aws.awsUsd,
    awsByService: { ...aws.byService },
    totalUsd: planUsd + overflowUsd + run.solverUsd + aws.awsUsd,
    worstHourUsd: run.overflow?.worstHourUsd ?? 0,
    capUsdPerHour: run.overflow?.capUsdPerHour ?? null,
    capBreaches: run.overflow?.capBreaches ?? 0,
    guardClosedTicks: run.overflow?.guardClosedTicks ?? 0,
    overflowLowestUsd: run.overflow?.lowestBalanceUsd ?? null,
    startedPastPause: run.overflow?.startedPastPause ?? 0,
    openTicks: run.overflow?.openTicks ?? 0,
    overflowReasons: run.overflow?.reasons ?? {},
    mappingUpdates: run.overflow?.mappingUpdates ?? 0,
  };
}

function policiesFor(trace: Trace, options: Options): Policy[] {
  const withOverflow = options.caps.map((cap) =>
    governorOverflowPolicy(trace.settings, {
      ...DEFAULT_OVERFLOW,
      pricePerSolveUsd: options.price,
      priceHintUsd: options.priceHint,
      threads: options.threads,
      initialBalanceUsd: options.overflowBalance,
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
    'primary',
    'overflow',
    'DLQ',
    'max rcv',
    'plan $',
    'overflow $',
    'aws $',
    'total $',
    'worst hour $',
    'breaches',
    'past pause',
    'guard closed',
    'ovf low $',
    'updates',
  ];
  const body = rows.map((r) => [
    r.trace,
    r.policy,
    r.p95 === null ? '—' : r.p95.toFixed(1),
    `${r.solved}/${r.arrivals}`,
    String(r.solved - r.overflowSolved),
    String(r.overflowSolved),
    String(r.deadLettered),
    String(r.maxReceives),
    r.planUsd.toFixed(2),
    r.overflowUsd.toFixed(2),
    r.awsUsd.toFixed(2),
    r.totalUsd.toFixed(2),
    r.capUsdPerHour === null ? '—' : `${r.worstHourUsd.toFixed(2)}/${r.capUsdPerHour.toFixed(2)}`,
    String(r.capBreaches),
    r.capUsdPerHour === null ? '—' : String(r.startedPastPause),
    r.capUsdPerHour === null ? '—' : String(r.guardClosedTicks),
    r.overflowLowestUsd === null ? '—' : r.overflowLowestUsd.toFixed(2),
    r.capUsdPerHour === null ? '—' : String(r.mappingUpdates),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((b) => (b[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i] ?? 0)).join('  ');
  return [line(head), ...body.map(line)].join('\n');
}

function main(options: Options): void {
  const names = options.trace
    ?.split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  const shipped = shippedTraces();
  // An unknown name ran nothing and printed "no run spent a cent past its cap" over an empty table.
  const unknown = (names ?? []).filter((name) => !shipped.some((t) => t.name === name));
  if (names !== undefined && (names.length === 0 || unknown.length > 0)) {
    process.stderr.write(
      `${unknown.length > 0 ? `Unknown trace ${unknown.join(', ')}` : '--trace names no trace'}. Shipped traces: ${shipped.map((t) => t.name).join(', ')}.\n`,
    );
    process.exit(2);
  }
  const traces = shipped
    .map((t) => withSolveMode(t, options.solveMode))
    .filter((t) => (names === undefined ? t.surge || t.outages.length > 0 : names.includes(t.name)));
  const rows: Row[] = [];
  for (const trace of traces) {
    for (const policy of policiesFor(trace, options)) {
      const run = simulate(trace, policy, { seed: options.seed });
      rows.push(rowOf(trace, run, options));
      process.stderr.write(`  ${trace.name} / ${run.policy}: ${run.wallMs.toFixed(0)} ms\n`);
    }
  }
  process.stdout.write(options.json ? `${JSON.stringify(rows, null, 2)}\n` : `${format(rows)}\n`);
  const breached = rows.filter((r) => r.capBreaches > 0 || r.startedPastPause > 0);
  if (breached.length > 0) {
    const runs = breached.map((r) => `${r.trace} / ${r.policy}`).join(', ');
    process.stderr.write(`FAIL: spend past the cap or under the overflow pause level in ${runs}\n`);
    process.exitCode = 1;
  } else
    process.stderr.write(
      'Cap check: no run spent a cent past its hourly or daily cap, nor started a solve under the overflow pause level.\n',
    );
}

function solveMode(value: string): SolveMode {
  if (!(SOLVE_MODES as readonly string[]).includes(value))
    throw new InvalidArgumentError(`one of ${SOLVE_MODES.join(', ')}`);
  return value as SolveMode;
}

function caps(value: string): number[] {
  return value.split(',').map((v) => parsePositive(v.trim()));
}

new Command()
  .name('bench:overflow')
  .description('The governor with and without an overflow lane on the surge and outage traces, p95 and spend per cap.')
  .option('--trace <names>', 'traces, comma-separated (default: the surge traces and those with an outage)')
  .option('--caps <usd>', 'overflow spend caps, USD per hour, comma-separated', caps, [1, 2, 3, 6])
  .option('--day-cap-hours <n>', 'the daily cap is this many hourly caps', parsePositive, 8)
  .option(
    '--price <usd>',
    "the overflow provider's true price per solve",
    parsePositive,
    DEFAULT_OVERFLOW.pricePerSolveUsd,
  )
  .option(
    '--price-hint <usd>',
    'the price per solve the policy assumes until it learns one',
    parsePositive,
    DEFAULT_OVERFLOW.priceHintUsd,
  )
  .option('--threads <n>', "the overflow provider's threads", parseWhole, DEFAULT_OVERFLOW.threads)
  .option(
    '--overflow-balance <usd>',
    `the overflow account's balance at the start (its guard halts under $${DEFAULT_OVERFLOW.haltBalanceUsd}, closes the lane under $${DEFAULT_OVERFLOW.pauseBalanceUsd})`,
    parsePositive,
    DEFAULT_OVERFLOW.initialBalanceUsd,
  )
  .option('--solve-factor <x>', "the overflow provider's solve times relative to the primary's", parsePositive, 1)
  .option('--plan-usd-per-thread-hour <usd>', 'what the thread plan costs per thread-hour', parsePositive, 0.0025)
  .option('--target <s>', 'latency target: p95 of queue wait, seconds', parsePositive, 30)
  .option('--seed <n>', 'random seed', parseSeed, 1)
  .option('--solve-mode <mode>', "the primary's solveMode (park or wait; default: the trace's, park)", solveMode)
  .option('--json', 'print the rows as JSON')
  .action((options: Options) => main(options))
  .parse();
