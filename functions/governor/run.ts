/**
 * Tick until shortly before the invocation's timeout (the schedule fires once a minute; the
 * ticks happen inside). A failing tick keeps the last ceilings (fail static: nothing is
 * applied), is logged and counted (TickFailed); the invocation then ends in an error so the
 * function's Errors alarm fires.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '@aws-lambda-powertools/metrics';
import { MetricUnit } from '@aws-lambda-powertools/metrics';
import { sleep as wait } from '../core/helpers/time.js';
import { GOVERNOR_METRICS } from '../core/metric-names.js';
import type { Redactor } from '../core/redaction.js';
import type { GovernorLog, GovernorLoop, TickRecord } from './loop.js';
import { recheckSolverAfter } from './outage-recheck.js';
import type { ParkedWatch } from './parked-watch.js';
import type { TickWake } from './tick-wake.js';

type LogAttributes = Parameters<Logger['appendKeys']>[0];

/**
 * The governor's log on a Powertools Logger (structured JSON, one line per call), each line
 * redacted with `redactor`: the solver keys it learns as they are read (the governor's balance
 * reads, probes and watch speak to the solver, and what it answers is untrusted).
 */
export function governorLogFrom(logger: Pick<Logger, 'info' | 'warn' | 'error'>, redactor?: Redactor): GovernorLog {
  const line =
    (write: (message: string, attributes: LogAttributes) => void) =>
    (message: string, fields?: Record<string, unknown>) =>
      redactor === undefined
        ? write(message, (fields ?? {}) as LogAttributes)
        : write(redactor.redact(message), redactor.redactValue(fields ?? {}) as LogAttributes);
  return {
    info: line((message, attributes) => logger.info(message, attributes)),
    warn: line((message, attributes) => logger.warn(message, attributes)),
    error: line((message, attributes) => logger.error(message, attributes)),
  };
}

/** One or more ticks of an invocation failed. */
export class GovernorTickError extends Error {
  override readonly name = 'GovernorTickError';
  constructor(
    readonly failures: number,
    readonly ticks: number,
    options: { cause?: unknown } = {},
  ) {
    super(`${failures} of ${ticks} governor tick(s) failed; the fleet kept its last ceilings`, options);
  }
}

/** Publish one decision's metrics (service dimension `governor`; Decision also by Reason). */
export function emitDecisionMetrics(metrics: Metrics, record: TickRecord): void {
  const { decision: d, signals: s } = record;
  const total = (d.enabled.normal ? d.ceilings.normal : 0) + (d.enabled.high ? d.ceilings.high : 0);
  metrics.addMetric(GOVERNOR_METRICS.ceiling, MetricUnit.Count, total);
  metrics.addMetric(GOVERNOR_METRICS.freeThreads, MetricUnit.Count, d.freeThreads);
  metrics.addMetric(GOVERNOR_METRICS.paused, MetricUnit.Count, d.paused ? 1 : 0);
  // Unknown signals are left out rather than published as zero. The backlog, the messages in
  // flight, the solve-time p95 and the error rate are not republished: SQS's own metrics (free)
  // and the consumer's SolveDuration and counters hold them, the dashboard and the alarms read
  // those, and the decision's log line and saved status carry the values the governor used.
  const optional: Array<[string, number | undefined, (typeof MetricUnit)[keyof typeof MetricUnit]]> = [
    [GOVERNOR_METRICS.needed, d.neededThreads, MetricUnit.Count],
    [GOVERNOR_METRICS.balance, s.balance, MetricUnit.NoUnit],
    [GOVERNOR_METRICS.threadsHeld, s.threadLedger?.held, MetricUnit.Count],
  ];
  for (const [name, value, unit] of optional)
    if (value !== undefined && Number.isFinite(value)) metrics.addMetric(name, unit, value);
  const single = metrics.singleMetric();
  single.addDimension('Reason', d.reason.code);
  single.addMetric(GOVERNOR_METRICS.decision, MetricUnit.Count, 1);
  if (record.overflow) emitOverflowMetrics(metrics, record);
  metrics.publishStoredMetrics();
}

/**
 * The overflow lane's metrics (only with an overflow provider): its ceiling (0 while closed), the
 * excess asked, the spend this UTC hour and day, the price the budget used, the provider's balance
 * when read, whether the cap holds the lane narrower than the backlog asks (the alarm's signal),
 * and one OverflowDecision by Reason.
 */
export function emitOverflowMetrics(metrics: Metrics, record: TickRecord): void {
  const o = record.overflow;
  if (o === undefined) return;
  const spend = o.state.spend;
  metrics.addMetric(GOVERNOR_METRICS.overflowCeiling, MetricUnit.Count, o.enabled ? o.ceiling : 0);
  metrics.addMetric(GOVERNOR_METRICS.overflowExcess, MetricUnit.Count, o.excess);
  metrics.addMetric(GOVERNOR_METRICS.overflowSpendHour, MetricUnit.NoUnit, spend.hourUsd);
  metrics.addMetric(GOVERNOR_METRICS.overflowSpendDay, MetricUnit.NoUnit, spend.dayUsd);
  metrics.addMetric(GOVERNOR_METRICS.overflowPrice, MetricUnit.NoUnit, o.priceUsd);
  const capReached = o.reason.code === 'OVERFLOW_CAP' && o.excess > 0;
  metrics.addMetric(GOVERNOR_METRICS.overflowCapReached, MetricUnit.Count, capReached ? 1 : 0);
  // An unread balance is left out rather than published as zero.
  const balance = record.overflowSignals?.provider.balance;
  if (balance !== undefined && Number.isFinite(balance))
    metrics.addMetric(GOVERNOR_METRICS.overflowBalance, MetricUnit.NoUnit, balance);
  const single = metrics.singleMetric();
  single.addDimension('Reason', o.reason.code);
  single.addMetric(GOVERNOR_METRICS.overflowDecision, MetricUnit.Count, 1);
}

/** What the watch did since the last tick, added to the tick's metrics (published with them). */
function emitWatchMetrics(
  metrics: Metrics,
  stats: ParkedWatch['stats'],
  last: { recorded: number; failedRounds: number },
): void {
  metrics.addMetric(GOVERNOR_METRICS.parkedRecorded, MetricUnit.Count, stats.recorded - last.recorded);
  // Failed rounds only when there were some: a watch whose rounds all work pays for no stream
  // (CloudWatch bills a metric in the hours it receives data; the dashboard reads none as none).
  const failed = stats.failedRounds - last.failedRounds;
  if (failed > 0) metrics.addMetric(GOVERNOR_METRICS.watchFailedRounds, MetricUnit.Count, failed);
  last.recorded = stats.recorded;
  last.failedRounds = stats.failedRounds;
}

export interface RunTicksOptions {
  loop: GovernorLoop;
  /**
   * The parked design's watch, running beside the ticks: its recorded answers are counted in the
   * ledger before each tick reads it (`countSolvedNow`), and what it did since the last tick goes
   * out with each tick's metrics (ParkedRecorded, WatchFailedRounds).
   */
  watch?: Pick<ParkedWatch, 'stats' | 'countSolvedNow'>;
  tickMs: number;
  /** Milliseconds the invocation has left (Lambda's context.getRemainingTimeInMillis). */
  remainingMs: () => number;
  /** Stop ticking when less than this remains after the next wait, ms. @default min(5000, tickMs) */
  marginMs?: number;
  metrics?: Metrics;
  log?: GovernorLog;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  clock?: () => number;
  /**
   * Cuts the wait between ticks short: the probe's acceptance wakes the loop (tick-wake.ts) for a
   * tick at once, out of the cadence and without a probe of its own. Absent: ticks keep the cadence.
   */
  wake?: TickWake;
  /**
   * A fresh read of the solver's balance (not the tick's cached one): while a tick left the fleet
   * paused for the solver's outage, the wait reads it every `OUTAGE_RECHECK_MS` and wakes the loop
   * at the first answer (outage-recheck.ts). With `wake` only.
   */
  solverRead?: (signal: AbortSignal) => Promise<unknown>;
}

/** Tick every `tickMs` while time remains. @throws GovernorTickError when any tick failed. */
export async function runTicks(
  options: RunTicksOptions,
): Promise<{ ticks: number; failures: number; records: TickRecord[] }> {
  const clock = options.clock ?? Date.now;
  const sleep = options.sleep ?? wait;
  const margin = options.marginMs ?? Math.min(5000, options.tickMs);
  const records: TickRecord[] = [];
  let ticks = 0;
  let failures = 0;
  let lastError: unknown;
  const start = clock();
  const watched = {
    recorded: options.watch?.stats.recorded ?? 0,
    failedRounds: options.watch?.stats.failedRounds ?? 0,
  };
  /** Ticks of the cadence run so far (a woken tick is not one of them). */
  let due = 0;
  let woken = false;
  options.loop.beginInvocation();
  for (;;) {
    ticks += 1;
    if (!woken) due += 1;
    let record: TickRecord | undefined;
    try {
      // The solves the watch recorded are counted before the tick sets them against the balance's drop.
      await options.watch?.countSolvedNow();
      record = await options.loop.tick(woken ? { probe: false } : undefined);
      records.push(record);
      if (options.metrics && options.watch) emitWatchMetrics(options.metrics, options.watch.stats, watched);
      if (options.metrics) emitDecisionMetrics(options.metrics, record);
    } catch (error) {
      failures += 1;
      lastError = error;
      options.log?.error('governor tick failed; keeping the last ceilings', { error: describe(error) });
      if (options.metrics) {
        options.metrics.addMetric(GOVERNOR_METRICS.tickFailed, MetricUnit.Count, 1);
        options.metrics.publishStoredMetrics();
      }
    }
    const wait = Math.max(0, start + due * options.tickMs - clock());
    // The next tick must have `margin` left to read, decide and act before the timeout.
    if (options.remainingMs() - wait < margin) break;
    if (options.wake) {
      const wake = options.wake;
      // Paused for the solver's outage: the solver read between ticks wakes the loop once it answers.
      const stopRecheck = recheckSolverAfter(record, { read: options.solverRead, sleep, wake: () => wake.wake() });
      woken = await wake.wait(wait, sleep);
      stopRecheck();
    } else await sleep(wait);
  }
  await options.loop.endInvocation?.();
  if (failures > 0) throw new GovernorTickError(failures, ticks, { cause: lastError });
  return { ticks, failures, records };
}

function describe(error: unknown): Record<string, unknown> {
  const e = error as Error & { cause?: unknown };
  return {
    name: e?.name,
    message: e?.message,
    cause: e?.cause instanceof Error ? `${e.cause.name}: ${e.cause.message}` : undefined,
  };
}
