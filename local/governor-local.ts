/**
 * The governor inside `npm start`: the same loop and decide() as the Lambda, on a timer. It
 * reads the local queues through the same SQS adapter, the consumer's metrics from the local
 * metrics store (instead of CloudWatch), the balance through the solver client, and moves the
 * local pollers (instead of event source mappings) and the shared concurrency pool (instead of
 * reserved concurrency). State lives where it is given: the local runtime passes the same
 * DynamoDB store as AWS (on the local governor table), so `captcha-fleet status --local` reads
 * the last decision from another process; memory by default.
 */
import type { SQSClient } from '@aws-sdk/client-sqs';
import { createMemoryGovernorState } from '../functions/adapters/governor-state.js';
import { createQueueSignals } from '../functions/adapters/queue-signals.js';
import { SERVICES, METRICS } from '../functions/core/metric-names.js';
import type { SolverPort } from '../functions/core/ports.js';
import type { StoreSample } from '../functions/core/store-health.js';
import type { RefusalHoldLifter, SpendGrantWriter, ThreadLedgerReader } from '../functions/core/thread-ledger.js';
import type { FleetSettings } from '../functions/core/settings.js';
import { MAPPING_MIN_CONCURRENCY, MAPPING_MAX_CONCURRENCY } from '../functions/core/settings.js';
import { governorConfigFrom } from '../functions/core/governor/policy.js';
import {
  overflowConfigFrom,
  type OverflowConfig,
  type OverflowDecision,
  type OverflowReasonCode,
} from '../functions/core/governor/overflow.js';
import type { GovernorStateStore, LaneActuator, MetricsReader } from '../functions/core/governor/ports.js';
import type { MetricsWindow } from '../functions/core/governor/signals.js';
import type { Decision, GovernorConfig, Lane, ReasonCode } from '../functions/core/governor/types.js';
import { createOverflowBalance, createProbingBalance, tickBalanceTtlMs } from '../functions/governor/balance-probe.js';
import type { ThreadProbe, TickOptions } from '../functions/governor/loop.js';
import type { ThreadProbeStats } from '../functions/governor/thread-probe.js';
import {
  createGovernorLoop,
  type GovernorLog,
  type OverflowLoopOptions,
  type TickRecord,
} from '../functions/governor/loop.js';
import { type LeasedLane, withLeaseLimits } from '../functions/governor/lease-step.js';
import type { ParkedWatch, ParkedWatchStats } from '../functions/governor/parked-watch.js';
import { recheckSolverAfter } from '../functions/governor/outage-recheck.js';
import { sleep } from '../functions/core/helpers/time.js';
import type { MetricsStore } from './metrics-store.js';

/** What the governor moves locally: a poller (local/poller.ts fits). */
export interface LocalLane {
  readonly maxConcurrency: number;
  readonly enabled: boolean;
  setMaxConcurrency(value: number): void;
  setEnabled(value: boolean): void;
}

/** The function's concurrency shared by the pollers (local/poller.ts ConcurrencyPool fits). */
export interface LocalPool {
  limit: number;
}

export interface LocalGovernorOptions {
  settings: FleetSettings;
  /** Overrides of the derived governor configuration (e.g. a shorter probe cooldown). */
  config?: Partial<GovernorConfig>;
  pollers: { normal: LocalLane; high?: LocalLane | undefined };
  /** Kept at the sum of the lanes' ceilings, as reserved concurrency is in AWS. */
  pool?: LocalPool;
  sqs: SQSClient;
  queueUrls: { normal: string; high?: string | undefined };
  metricsStore: Pick<MetricsStore, 'sum' | 'mean' | 'percentile'>;
  solver: Pick<SolverPort, 'getBalance'>;
  /** @default settings.tickMs */
  tickMs?: number;
  /** Window of the consumer's metrics the governor reads. @default the probe cooldown */
  metricsWindowMs?: number;
  logger?: GovernorLog;
  clock?: () => number;
  /** Called after every decision (the live view). */
  onDecision?: (record: TickRecord) => void;
  /** Where the state lives between ticks. @default in memory (createMemoryGovernorState) */
  state?: GovernorStateStore;
  /** The consumer's thread ledger (over-cap answers and held threads); without it, the metric window's over-cap answers. */
  threadLedger?: ThreadLedgerReader;
  /** Where the governor's spend grant goes (the same ledger item), as in AWS. Absent: no grant. */
  spendGrant?: SpendGrantWriter;
  /** Where the parked fleet's held test lifts the refusals' hold (the same ledger item), as in AWS. */
  refusalHold?: RefusalHoldLifter;
  /**
   * The parked design (solveMode `park`): the lane's thread leases (the slots each decision opens;
   * `threadLedger` is then the leased reader, functions/governor/lease-step.ts) and the watch that
   * hands parked tasks back once their answers are ready, run every `pollMs` beside the ticks as
   * the Lambda runs it between them.
   */
  parked?: { lane: LeasedLane; watch: ParkedWatch };
  /** The fleet's stores as dependencies (local/store-watch.ts): probed every tick. Absent: not watched. */
  stores?: { read(since?: number): Promise<StoreSample[]> };
  /**
   * The governor's own probe submission (functions/governor/thread-probe.ts), made on a tick
   * that asks for one: while others hold all but fewer threads than the mapping's floor, the
   * mappings are disabled and the fleet probes once a tick, as in AWS. Without it the decision
   * runs at the floor instead (it could never learn that the threads came back).
   */
  probe?: ThreadProbe & { stats?(): ThreadProbeStats };
  /**
   * The overflow lane, when `settings.overflow` is set: its poller (on the normal queue, beside the
   * primary's), its own concurrency (the overflow function's), the overflow solver (its balance)
   * and the overflow consumer's ledger (its threads held, its solves). Its metrics come from the
   * same store under the `consumer-overflow` service.
   */
  overflow?: {
    lane: LocalLane;
    /** Its poller on the high queue (opened only while the primary is paused), sharing the lane's pool. */
    highLane?: LocalLane;
    pool?: LocalPool;
    solver: Pick<SolverPort, 'getBalance'>;
    /** Without it the lane's in flight is unknown: the lane stays closed (and the primary's normal in flight is unknown too). */
    ledger?: ThreadLedgerReader;
    /** Overrides of the derived overflow policy config (e.g. a shorter `minSolveMs` for a fast simulator). */
    config?: Partial<Omit<OverflowConfig, 'provider'>>;
  };
}

/** The overflow lane over the run (with an overflow provider). */
export interface LocalOverflowStats {
  decisions: number;
  /** Decisions that left the lane open. */
  openDecisions: number;
  /** Widest ceiling an open decision set. */
  maxCeiling: number;
  /** Overflow reason code → decisions. */
  reasons: Partial<Record<OverflowReasonCode, number>>;
  /** Spend of the current UTC hour and day at the last decision, USD. */
  lastSpendHourUsd: number | undefined;
  lastSpendDayUsd: number | undefined;
  /** The price per solve the last decision used, USD, and whether it was learned from the balance. */
  priceUsd: number | undefined;
  priceLearned: boolean;
}

/** One lane's ceilings over the run (what the decisions set, enabled or not). */
export interface LaneCeilingStats {
  startCeiling: number | undefined;
  maxCeiling: number | undefined;
  /** Decisions that left this lane consuming. */
  enabledDecisions: number;
}

export interface LocalGovernorStats {
  decisions: number;
  /** Total ceiling (enabled lanes) the first decision set. */
  startCeiling: number | undefined;
  maxCeiling: number | undefined;
  /** Time spent paused, ms. */
  pausedMs: number;
  /** Reason code → decisions. */
  reasons: Partial<Record<ReasonCode, number>>;
  failedTicks: number;
  /** Per lane: the ceilings the decisions set. */
  lanes: Record<Lane, LaneCeilingStats>;
  /** The overflow lane, when one is configured. */
  overflow?: LocalOverflowStats;
  /** The parked design's watch (solveMode `park`): its rounds and the parked tasks it polled and recorded. */
  watch?: ParkedWatchStats;
  /** The governor's own probe submissions (while others hold the plan), when its probe counts them. */
  threadProbes?: ThreadProbeStats;
}

export interface LocalGovernor {
  stop(): Promise<void>;
  stats(): LocalGovernorStats;
  readonly lastDecision: Decision | undefined;
  readonly config: GovernorConfig;
  /** Resolves after the first tick (the ceilings are set at once, before any wait). */
  readonly ready: Promise<void>;
  /** Run one tick now (tests); ticks never overlap. */
  /** One tick now, after any under way (`{ probe: false }`: a tick the probe's acceptance woke, no probe of its own). */
  tickNow(options?: TickOptions): Promise<TickRecord | undefined>;
}

/**
 * Reads a consumer's EMF metrics from the local store over a sliding window.
 * @param service the consumer's service dimension (`consumer`, or `consumer-overflow` for the overflow lane)
 */
export function createStoreMetricsReader(
  store: LocalGovernorOptions['metricsStore'],
  windowMs: number,
  clock: () => number = Date.now,
  service: string = SERVICES.consumer,
): MetricsReader {
  const consumer = { service };
  return {
    async read(): Promise<MetricsWindow> {
      const now = clock();
      const sum = (name: string) => store.sum(name, windowMs, now, consumer);
      return {
        windowMs,
        submissions: sum(METRICS.submissions),
        resultRequests: sum(METRICS.resultRequests),
        overCapAnswers: sum(METRICS.overCapAnswers),
        transientErrors: sum(METRICS.transientErrors),
        taskErrors: sum(METRICS.taskErrors),
        accountErrors: sum(METRICS.accountErrors),
        solved: sum(METRICS.solved),
        meanSolveMs: store.mean(METRICS.solveDuration, windowMs, now, consumer),
        p95SolveMs: store.percentile(METRICS.solveDuration, 95, windowMs, now, consumer),
      };
    },
  };
}

/**
 * Moves local pollers and the shared pool; only on change, like the Lambda actuator.
 * @param label what the changes call the lanes and the pool (the overflow lane's: "overflow")
 */
export function createPollerActuator(
  pollers: LocalGovernorOptions['pollers'],
  pool?: LocalPool,
  label?: string,
): LaneActuator {
  const lanes: Lane[] = pollers.high ? ['normal', 'high'] : ['normal'];
  const name = (lane: Lane) => (label ? (lanes.length > 1 ? `${label} ${lane}` : label) : lane);
  const poolName = label ? `${label} pool` : 'pool';
  const clamp = (n: number) => Math.max(MAPPING_MIN_CONCURRENCY, Math.min(MAPPING_MAX_CONCURRENCY, Math.round(n)));
  return {
    async read() {
      const one = (p: LocalLane) => ({ ceiling: p.maxConcurrency, enabled: p.enabled });
      return pollers.high ? { normal: one(pollers.normal), high: one(pollers.high) } : { normal: one(pollers.normal) };
    },
    async apply(decision) {
      const changes: string[] = [];
      const total = lanes.reduce((sum, lane) => sum + (decision.enabled[lane] ? clamp(decision.ceilings[lane]) : 0), 0);
      // Lower the pool first when shrinking, raise it last when growing: the sum never exceeds it.
      if (pool && total < pool.limit && total > 0) {
        changes.push(`${poolName} ${pool.limit} → ${total}`);
        pool.limit = total;
      }
      for (const lane of lanes) {
        const poller = pollers[lane] as LocalLane;
        const ceiling = clamp(decision.ceilings[lane]);
        if (poller.maxConcurrency !== ceiling) {
          changes.push(`${name(lane)} ceiling ${poller.maxConcurrency} → ${ceiling}`);
          poller.setMaxConcurrency(ceiling);
        }
        if (poller.enabled !== decision.enabled[lane]) {
          changes.push(`${name(lane)} ${decision.enabled[lane] ? 'enabled' : 'disabled'}`);
          poller.setEnabled(decision.enabled[lane]);
        }
      }
      if (pool && total > pool.limit) {
        changes.push(`${poolName} ${pool.limit} → ${total}`);
        pool.limit = total;
      }
      return { changes };
    },
  };
}

/** Add one decision to the run's counters: ceilings set (a disabled lane counts as 0) and its reason. */
function countDecision(stats: LocalGovernorStats, d: Decision): void {
  const total = (d.enabled.normal ? d.ceilings.normal : 0) + (d.enabled.high ? d.ceilings.high : 0);
  stats.decisions += 1;
  stats.startCeiling ??= total;
  stats.maxCeiling = Math.max(stats.maxCeiling ?? 0, total);
  stats.reasons[d.reason.code] = (stats.reasons[d.reason.code] ?? 0) + 1;
  for (const lane of ['normal', 'high'] as const) {
    const laneStat = stats.lanes[lane];
    // A disabled lane consumes nothing, whatever ceiling it keeps for when it resumes.
    const ceiling = d.enabled[lane] ? d.ceilings[lane] : 0;
    laneStat.startCeiling ??= ceiling;
    laneStat.maxCeiling = Math.max(laneStat.maxCeiling ?? 0, ceiling);
    if (d.enabled[lane]) laneStat.enabledDecisions += 1;
  }
}

/** Add one overflow decision to the run's overflow counters. */
function countOverflow(stats: LocalOverflowStats, d: OverflowDecision): void {
  stats.decisions += 1;
  if (d.enabled) {
    stats.openDecisions += 1;
    stats.maxCeiling = Math.max(stats.maxCeiling, d.ceiling);
  }
  stats.reasons[d.reason.code] = (stats.reasons[d.reason.code] ?? 0) + 1;
  stats.lastSpendHourUsd = d.state.spend.hourUsd;
  stats.lastSpendDayUsd = d.state.spend.dayUsd;
  stats.priceUsd = d.priceUsd;
  stats.priceLearned = d.priceLearned;
}

/**
 * The loop's overflow option locally: the lane's poller (and its own pool) as the actuator, the
 * overflow solver's balance, its ledger, and its metrics from the same store under
 * `consumer-overflow`. Undefined without an overflow block in the settings or a lane to move.
 */
function localOverflowOption(
  options: LocalGovernorOptions,
  primary: GovernorConfig,
  local: { tickMs: number; windowMs: number; clock: () => number },
): OverflowLoopOptions | undefined {
  const overflow = options.overflow;
  if (overflow === undefined) return undefined;
  const settings = { ...options.settings, tickMs: local.tickMs };
  const derived = overflowConfigFrom(settings, { ...options.config, metricsSpanMs: primary.metricsSpanMs });
  if (derived === undefined) return undefined;
  const log = options.logger;
  if (overflow.ledger === undefined)
    log?.warn('overflow lane without its ledger: its in flight is unknown, so it stays closed');
  return {
    config: { ...derived, ...overflow.config },
    balance: createOverflowBalance(overflow.solver, {
      tickMs: local.tickMs,
      clock: local.clock,
      ...(log ? { warn: (message, fields) => log.warn(message, fields) } : {}),
    }),
    ...(overflow.ledger ? { ledger: overflow.ledger } : {}),
    metrics: createStoreMetricsReader(options.metricsStore, local.windowMs, local.clock, SERVICES.overflowConsumer),
    actuator: createPollerActuator(
      { normal: overflow.lane, ...(overflow.highLane ? { high: overflow.highLane } : {}) },
      overflow.pool,
      'overflow',
    ),
    highMapping: overflow.highLane !== undefined,
  };
}

/** The run's counters before the first tick (an overflow lane's with one). */
function initialStats(withOverflow: boolean): LocalGovernorStats {
  const laneStats = (): LaneCeilingStats => ({ startCeiling: undefined, maxCeiling: undefined, enabledDecisions: 0 });
  return {
    decisions: 0,
    startCeiling: undefined,
    maxCeiling: undefined,
    pausedMs: 0,
    reasons: {},
    failedTicks: 0,
    lanes: { normal: laneStats(), high: laneStats() },
    ...(withOverflow
      ? {
          overflow: {
            decisions: 0,
            openDecisions: 0,
            maxCeiling: 0,
            reasons: {},
            lastSpendHourUsd: undefined,
            lastSpendDayUsd: undefined,
            priceUsd: undefined,
            priceLearned: false,
          },
        }
      : {}),
  };
}

/** Start the local governor: one tick at once, then every `tickMs`. */
export function startLocalGovernor(options: LocalGovernorOptions): LocalGovernor {
  const clock = options.clock ?? Date.now;
  const tickMs = options.tickMs ?? options.settings.tickMs;
  const highLane = options.pollers.high !== undefined && options.queueUrls.high !== undefined;
  const config = governorConfigFrom(
    { ...options.settings, tickMs },
    { highLane, probeSubmissions: options.probe !== undefined, ...options.config },
  );
  const windowMs = options.metricsWindowMs ?? config.probeCooldownMs;
  // The local store answers at once (no CloudWatch lag): its window reaches back only its own
  // length, so a shrink that lands short may follow the first one window later, not two.
  config.metricsSpanMs ??= windowMs;
  const log = options.logger;
  const overflow = localOverflowOption(options, config, { tickMs, windowMs, clock });
  const parked = options.parked;
  const actuator = createPollerActuator(highLane ? options.pollers : { normal: options.pollers.normal }, options.pool);
  const balance = createProbingBalance(options.solver, {
    ttlMs: tickBalanceTtlMs(tickMs),
    clock,
    onError: (error) =>
      log?.warn('balance read failed; treating the balance as unknown', { error: (error as Error).message }),
  });
  const loop = createGovernorLoop({
    config,
    queues: createQueueSignals({
      sqs: options.sqs,
      queueUrls: { normal: options.queueUrls.normal, ...(highLane ? { high: options.queueUrls.high } : {}) },
      clock,
      onError: (lane, error) =>
        log?.warn('queue attributes read failed; backlog unknown', { lane, error: (error as Error).message }),
    }),
    metrics: createStoreMetricsReader(options.metricsStore, windowMs, clock),
    // The local store is fresh: read it every tick.
    metricsEveryMs: 0,
    balance,
    ...(options.threadLedger ? { threadLedger: options.threadLedger } : {}),
    ...(options.spendGrant ? { spendGrant: options.spendGrant } : {}),
    ...(options.refusalHold ? { refusalHold: options.refusalHold } : {}),
    ...(options.stores ? { stores: options.stores } : {}),
    ...(options.probe ? { probe: options.probe } : {}),
    actuator: parked ? withLeaseLimits(actuator, parked.lane, log, clock) : actuator,
    state: options.state ?? createMemoryGovernorState(),
    ...(overflow ? { overflow } : {}),
    clock,
    ...(log ? { log } : {}),
  });

  const stats = initialStats(overflow !== undefined);
  let pausedSince: number | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<TickRecord | undefined> | undefined;
  let stopRecheck: () => void = () => undefined;

  const tickOnce = async (tickOptions?: TickOptions): Promise<TickRecord | undefined> => {
    stopRecheck();
    try {
      // As in AWS (functions/governor/run.ts): the watch's recorded solves counted before the tick reads the ledger.
      await parked?.watch.countSolvedNow();
      const record = await loop.tick(tickOptions);
      // Paused for the solver's outage: a balance read between ticks wakes a tick at its first answer (as in AWS).
      stopRecheck = recheckSolverAfter(record, {
        read: (signal) => balance.readFresh(signal),
        sleep,
        wake: () => void tickNow({ probe: false }),
      });
      const d = record.decision;
      countDecision(stats, d);
      if (stats.overflow && record.overflow) countOverflow(stats.overflow, record.overflow);
      const now = record.signals.now;
      if (d.paused) pausedSince ??= now;
      else if (pausedSince !== undefined) {
        stats.pausedMs += now - pausedSince;
        pausedSince = undefined;
      }
      options.onDecision?.(record);
      return record;
    } catch (error) {
      // Fail static: the pollers keep their ceilings.
      stats.failedTicks += 1;
      log?.error('governor tick failed; keeping the last ceilings', { error: (error as Error).message });
      return undefined;
    }
  };

  const tickNow = (tickOptions?: TickOptions): Promise<TickRecord | undefined> => {
    // A stopped governor ticks no more (a probe answered after the run's end wakes nothing).
    if (stopped) return Promise.resolve(undefined);
    const once = () => tickOnce(tickOptions);
    running = (running ?? Promise.resolve(undefined)).then(once, once);
    return running;
  };

  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      void tickNow().then(schedule);
    }, tickMs);
    timer.unref?.();
  };

  const ready = tickNow().then(() => {
    schedule();
  });
  const watching = parked === undefined ? undefined : watchUntil(parked.watch, () => stopped);

  return {
    config,
    ready,
    tickNow,
    get lastDecision() {
      return loop.lastDecision;
    },
    stats() {
      const open = pausedSince !== undefined ? clock() - pausedSince : 0;
      return {
        ...stats,
        reasons: { ...stats.reasons },
        pausedMs: stats.pausedMs + open,
        lanes: { normal: { ...stats.lanes.normal }, high: { ...stats.lanes.high } },
        ...(stats.overflow ? { overflow: { ...stats.overflow, reasons: { ...stats.overflow.reasons } } } : {}),
        ...(parked ? { watch: { ...parked.watch.stats } } : {}),
        ...(options.probe?.stats ? { threadProbes: options.probe.stats() } : {}),
      };
    },
    async stop() {
      stopped = true;
      stopRecheck();
      if (timer) clearTimeout(timer);
      await running?.catch(() => undefined);
      // A task the probe keeps for its next submission goes back at once, as at an invocation's end in AWS.
      await options.probe?.release?.();
      await watching;
    },
  };
}

/** The watch's own run, as in AWS (its answers recorded beside its rounds, the last waited for at its end), until `stopped()`. */
function watchUntil(watch: ParkedWatch, stopped: () => boolean): Promise<void> {
  return watch.run(() => Number.POSITIVE_INFINITY, 0, stopped);
}
