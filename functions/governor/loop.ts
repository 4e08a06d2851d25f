/**
 * One governor control loop: read signals, decide every lane at once (decideTick), persist, act,
 * report. The Lambda handler, the CLI (`governor --once`) and the local runtime all run this;
 * they differ only in the readers and the actuators they pass.
 *
 * The state store is one of the fleet's dependencies. When its read fails, the tick still decides
 * from the state this loop last held (or the first tick's), with `governor-state` reported down;
 * once that has lasted `outageTicks` ticks the decision pauses and the loop disables the mappings
 * without saving (disabling is safe without the conditional write). Any other decision on an
 * unread state is not acted on (fail static).
 *
 * The fleet's stores (DynamoDB, SQS) are dependencies too (`stores`): each tick the loop probes
 * them and reads the consumers' store calls, judges them (functions/core/store-health.ts) and
 * reports them in `signals.dependencies`; the availability stage pauses after `outageTicks` down
 * ticks, probes every tick and resumes at the pre-outage ceiling, as for a solver outage (on trial
 * first: only the consumers' calls since the resume are read then, and they pass or fail it). With
 * DynamoDB down the state cannot be saved: a pause is still acted on (disabling needs no
 * conditional write), and the loop decides from the state it holds in memory until a save
 * succeeds again, so the outage's record survives the store it is about.
 */
import type { Clock } from '../core/ports.js';
import {
  consumerCallsView,
  type StoreCallsWant,
  type StoreSample,
  storeCallsWant,
  storeDependencies,
} from '../core/store-health.js';
import type { RefusalHoldLifter, SpendGrant, SpendGrantWriter, ThreadLedgerReader } from '../core/thread-ledger.js';
import { decideTick, initialState } from '../core/governor/policy.js';
import type { OverflowDecision, OverflowSignals } from '../core/governor/overflow.js';
import { assembleSignals, METRICS_READ_MS, type QueueReading } from '../core/governor/signals.js';
import {
  GovernorStateConflictError,
  type BalanceReader,
  type GovernorStateStore,
  type LaneActuator,
  type MetricsReader,
  type QueueReader,
} from '../core/governor/ports.js';
import type {
  Decision,
  DependencyHealth,
  GovernorConfig,
  GovernorSignals,
  GovernorState,
  TickDecision,
} from '../core/governor/types.js';
import type { MetricsWindow } from '../core/governor/signals.js';
import {
  createOverflowStep,
  type OverflowLoopOptions,
  type OverflowReading,
  type OverflowStep,
} from './overflow-step.js';

export type { OverflowLoopOptions } from './overflow-step.js';

/** Structured log sink (Powertools Logger fits). */
export interface GovernorLog {
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** Per-lane age of the oldest message and sent rate (CloudWatch AWS/SQS in AWS). */
export interface QueueMetricsReader {
  readQueues(): Promise<{
    normal: { oldestAgeSeconds: number | undefined; sentRate: number | undefined };
    high?: { oldestAgeSeconds: number | undefined; sentRate: number | undefined };
  }>;
}

export interface GovernorLoopOptions {
  config: GovernorConfig;
  queues: QueueReader;
  metrics: MetricsReader;
  /** Optional: oldest-message age and sent rate, read on the metrics cadence. */
  queueMetrics?: QueueMetricsReader;
  balance: BalanceReader;
  /** Optional: the consumer's thread ledger, read every tick (the estimate of others' threads). */
  threadLedger?: ThreadLedgerReader;
  actuator: LaneActuator;
  state: GovernorStateStore;
  clock?: Clock;
  /** How often to re-read the (lagging, rate-limited) metrics, ms: a minute in AWS, every tick locally. @default METRICS_READ_MS (60 000) */
  metricsEveryMs?: number;
  /** Decide and report but do not act. */
  dryRun?: boolean;
  log?: GovernorLog;
  /**
   * The overflow lane (only with an overflow provider configured): read with the primary's
   * signals, decided in the same decideTick(), saved with the state, moved after the primary's
   * lanes. Absent: the loop is the primary's alone.
   */
  overflow?: OverflowLoopOptions;
  /**
   * The governor's own probe submission, made on a tick whose decision asks for one (others hold
   * all but fewer threads than the mapping's floor): it records its answer in the thread ledger
   * like a consumer. Absent: no probe (the fleet then waits for the estimate to widen).
   */
  probe?: ThreadProbe;
  /**
   * The fleet's stores as dependencies: the governor's own probe of DynamoDB and SQS and the
   * consumers' store calls over the metric window, read every tick (never throws).
   * Absent: the stores are not watched (only the governor's state read is).
   */
  stores?: { read(since?: number, want?: StoreCallsWant): Promise<StoreSample[]> };
  /**
   * Where the decision's spend grant goes (the thread ledger item): written when it changes (set,
   * renewed, or cleared), once on the loop's first tick. Absent: no grant reaches the consumers
   * (the money pauses by the projection alone).
   */
  spendGrant?: SpendGrantWriter;
  /**
   * Where the decision's held test lifts the refusals' hold (the thread ledger item's `liftedAt`),
   * after the actuator opened the one invocation more (and cleared the lease shards' hold-offs).
   * Absent: the hold lapses by itself, a minute after its refusal.
   */
  refusalHold?: RefusalHoldLifter;
}

/** The stores judged this tick, reading the consumers' calls the view allows; undefined when not watched or unread. */
async function readStores(
  stores: GovernorLoopOptions['stores'],
  view: ReturnType<typeof consumerCallsView>,
): Promise<DependencyHealth[] | undefined> {
  const samples = await stores?.read(view.read ? view.since : undefined, storeCallsWant(view)).catch(() => undefined);
  return samples === undefined ? undefined : storeDependencies(samples, { consumersStale: !view.read });
}

/** One probe submission of the governor's own; its answer goes to the thread ledger. Never throws. */
export interface ThreadProbe {
  submit(now: number): Promise<void>;
  /**
   * Hand back a task the probe keeps for its next submission (probe-carrier.ts): called on a tick
   * whose fleet is no longer starved and when the invocation ends. Never throws.
   */
  release?(): Promise<void>;
}

/** What one tick saw and did. */
export interface TickRecord {
  signals: GovernorSignals;
  /** The primary's part of the tick's decision. */
  decision: Decision;
  /** The tick's whole decision, every lane, as decideTick returned it. */
  tick: TickDecision;
  /** False on a dry run. */
  applied: boolean;
  /** Calls the actuators made, in words (empty when nothing changed). */
  changes: string[];
  /** The overflow lane's decision, when an overflow provider is configured. */
  overflow?: OverflowDecision;
  /** The overflow provider's signals that decision read. */
  overflowSignals?: OverflowSignals;
}

/** What one tick may do beyond deciding and acting. */
export interface TickOptions {
  /**
   * false: no probe submission this tick, whatever the decision asks (a tick the last probe's
   * acceptance woke: one probe a tick, never more). @default true
   */
  probe?: boolean;
}

export interface GovernorLoop {
  /**
   * One tick. Throws when the state or an actuator fails (the overflow mapping's read or write
   * too): the caller keeps the last ceilings (fail static). An unknown signal never throws.
   */
  tick(options?: TickOptions): Promise<TickRecord>;
  /**
   * A new invocation begins (runTicks calls it first): the state is read again at the next tick and
   * the actuator writes its whole decision. The loop is built once per cold start and kept by the
   * environment's later invocations; with two warm environments taking alternate minutes (the
   * relay's overlap), each one's saved version was two minutes old, and the first tick of every
   * invocation from the third minute on failed on a conflict with no other writer.
   */
  beginInvocation(): void;
  /**
   * The invocation ends (runTicks calls it last): a task the probe keeps for its next submission
   * goes back at once, for the next invocation (another environment, maybe) to find. Never throws.
   */
  endInvocation?(): Promise<void>;
  readonly lastDecision: Decision | undefined;
}

/** The one log line per decision: the reason first, then the numbers behind it. */
export function decisionLogFields(record: TickRecord): Record<string, unknown> {
  const { decision: d, signals: s } = record;
  return {
    reason: d.reason.code,
    why: d.reason.message,
    paused: d.paused,
    ceilings: d.ceilings,
    // The parked design's mapping maxima, when they differ from the thread ceilings (the leases).
    ...(d.submitters !== undefined ? { submitters: d.submitters } : {}),
    enabled: d.enabled,
    freeThreads: d.freeThreads,
    neededThreads: d.neededThreads,
    shortfall: d.shortfall,
    shortfallWarning: d.shortfallWarning,
    drainSeconds: d.drainSeconds === Number.POSITIVE_INFINITY ? 'never' : d.drainSeconds,
    effectiveCap: d.state.overCap.effectiveCap,
    stages: d.stages.filter((stage) => stage.changed).map((stage) => `${stage.stage}: ${stage.code} ${stage.value}`),
    probe: d.probe,
    backlog: { normal: s.lanes.normal.backlog, high: s.lanes.high?.backlog },
    inFlight: { normal: s.lanes.normal.inFlight, high: s.lanes.high?.inFlight },
    balance: s.balance,
    p95SolveMs: s.p95SolveMs,
    errorRate: s.errorRate,
    overCapAnswers: s.overCapAnswers,
    threadsHeld: s.threadLedger?.held,
    threadsLeftOver: s.threadLedger?.leftover,
    neighbours: d.state.overCap.neighbours,
    applied: record.applied,
    changes: record.changes,
    ...(record.overflow ? { overflow: overflowLogFields(record.overflow, record.overflowSignals) } : {}),
  };
}

/** The overflow lane in the decision's log line: its reason first, then its numbers and its spend. */
function overflowLogFields(d: OverflowDecision, s: OverflowSignals | undefined): Record<string, unknown> {
  return {
    reason: d.reason.code,
    why: d.reason.message,
    enabled: d.enabled,
    ceiling: d.ceiling,
    excess: d.excess,
    affordable: d.affordable,
    priceUsd: d.priceUsd,
    priceLearned: d.priceLearned,
    spendHourUsd: d.state.spend.hourUsd,
    spendDayUsd: d.state.spend.dayUsd,
    balance: s?.provider.balance,
    inFlight: s?.provider.lanes.normal.inFlight,
    solvesSinceLastRead: s?.solvesSinceLastRead,
  };
}

/** Whether a lane has no earlier read to take its arrival rate from (a cold start, a failed read). */
function needsQueueMetrics(previous: { normal?: QueueReading; high?: QueueReading } | undefined): boolean {
  return (
    previous?.normal?.visible === undefined || (previous.high !== undefined && previous.high.visible === undefined)
  );
}

/** Fill what GetQueueAttributes does not give (oldest age, sent rate) from the CloudWatch reads. */
function withQueueMetrics(
  queues: { normal: QueueReading; high?: QueueReading },
  extra: Awaited<ReturnType<QueueMetricsReader['readQueues']>> | undefined,
): void {
  for (const lane of ['normal', 'high'] as const) {
    const reading = queues[lane];
    const more = extra?.[lane];
    if (reading && more) {
      reading.oldestAgeSeconds ??= more.oldestAgeSeconds;
      reading.sentRate ??= more.sentRate;
    }
  }
}

/** Two grants are the same write (absent and absent included). */
function sameGrant(a: SpendGrant | undefined, b: SpendGrant | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.limit === b.limit && a.until === b.until);
}

/**
 * Writes the decision's spend grant to the ledger when it differs from the last one written; the
 * first tick writes whatever it decided (a cold start clears a grant a previous run left). A
 * failed write is logged and tried again next tick; the grant lapses by itself if none succeeds.
 */
function createGrantKeeper(writer: SpendGrantWriter | undefined, log: GovernorLog | undefined) {
  let written: { grant: SpendGrant | undefined } | undefined;
  return async (grant: SpendGrant | undefined): Promise<string[]> => {
    if (writer === undefined || (written !== undefined && sameGrant(written.grant, grant))) return [];
    try {
      await writer.setGrant(grant);
      written = { grant };
      return grant === undefined
        ? []
        : [`spend grant: up to ${grant.limit} on the ledger's count (reservations, or acceptances)`];
    } catch (error) {
      written = undefined;
      log?.warn('spend grant not written; tried again next tick', { error: (error as Error).message });
      return [];
    }
  };
}

/**
 * Lifts the hold of the refusals at or before `refusedAt` for the decision's held test (after the
 * actuator opened the invocation it tests). A failed write is logged: the hold lapses by itself.
 */
async function liftHold(
  lifter: RefusalHoldLifter | undefined,
  refusedAt: number | undefined,
  log: GovernorLog | undefined,
): Promise<string[]> {
  if (lifter === undefined || refusedAt === undefined) return [];
  try {
    await lifter.liftHold(refusedAt);
    return ['refusal hold lifted: testing one invocation more'];
  } catch (error) {
    log?.warn('refusal hold not lifted; it lapses by itself', { error: (error as Error).message });
    return [];
  }
}

/** The state this tick decides from: the store's, or (when its read fails) the loop's own with the store reported down. */
interface LoadedState {
  state: GovernorState;
  version: number | undefined;
  /** The store could not be read this tick: nothing is saved, only a pause is acted on. */
  unread?: DependencyHealth;
}

/**
 * The state's side of a tick: load it (or, when the store cannot be read, the loop's last state
 * with the store reported down), then save it conditionally and move the lanes; on an unread
 * store only a pause is acted on, without saving.
 */
function createStateKeeper(
  options: GovernorLoopOptions,
  clock: () => number,
  overflow: OverflowStep | undefined,
  lastState: () => GovernorState | undefined,
) {
  let persisted: { state: GovernorState; version: number | undefined } | undefined;
  /**
   * The last decision could not be saved (the store down, not another writer): the stored state
   * is older than the loop's, so the next load keeps the loop's state (on the stored version).
   */
  let unsaved = false;
  const writeGrant = createGrantKeeper(options.spendGrant, options.log);
  /** Move the primary's lanes, write its spend grant and lift a held fleet's hold for its test. */
  const applyPrimary = async (primary: Decision) => [
    ...(await options.actuator.apply(primary)).changes,
    ...(await writeGrant(primary.spendGrant)),
    ...(await liftHold(options.refusalHold, primary.liftHold, options.log)),
  ];
  const loadState = async (now: number): Promise<LoadedState> => {
    if (persisted !== undefined) return persisted;
    try {
      const loaded = await options.state.load();
      const held = unsaved ? lastState() : undefined;
      persisted =
        held !== undefined
          ? { state: held, version: loaded?.version }
          : (loaded ?? { state: initialState(options.config, now), version: undefined });
      unsaved = false;
      return persisted;
    } catch (error) {
      const detail = `${(error as Error).name}: ${(error as Error).message}`;
      options.log?.warn('governor state read failed; deciding from the last state, acting only on a pause', {
        error: detail,
      });
      unsaved = true;
      return {
        state: lastState() ?? initialState(options.config, now),
        version: undefined,
        unread: { name: 'governor-state', down: true, detail },
      };
    }
  };

  /** Save the state (conditional on the version read), then move the primary's lanes, then the overflow lane. */
  const persistAndApply = async (
    tick: TickDecision,
    loaded: LoadedState,
    reading?: OverflowReading,
    probing = true,
  ) => {
    if (loaded.unread !== undefined) {
      // The store is down: disabling the mappings needs no conditional write; anything else waits (fail static).
      if (!tick.primary.paused)
        throw new Error(`governor state unreadable (${loaded.unread.detail}); keeping the last ceilings`);
      return applyPrimary(tick.primary);
    }
    try {
      const version = await options.state.save(tick.state, loaded.version);
      persisted = { state: tick.state, version };
    } catch (error) {
      // Another writer (or a failed write): reload next tick, act on nothing now.
      persisted = undefined;
      overflow?.forget();
      const conflict = error instanceof GovernorStateConflictError;
      unsaved = !conflict;
      // The store is down (not another writer) and the decision pauses: disabling is safe without the save.
      if (!conflict && tick.primary.paused) {
        options.log?.warn('governor state save failed; acting on the pause without it', {
          error: `${(error as Error).name}: ${(error as Error).message}`,
        });
        return applyPrimary(tick.primary);
      }
      throw error;
    }
    if (tick.overflow && reading) overflow?.saved(reading);
    const changes = await applyPrimary(tick.primary);
    if (tick.overflow && overflow) changes.push(...(await overflow.apply(tick.overflow.mappings)));
    if (tick.primary.probe && probing && options.probe) await options.probe.submit(clock());
    // No longer starved (the mappings take tasks again): a task the probe kept goes back at once.
    else if (tick.primary.reason.code !== 'WAIT_FOR_THREADS') await options.probe?.release?.();
    return changes;
  };

  return {
    load: loadState,
    persistAndApply,
    /** Read the store again at the next load (what this process saved may be older than the store's). */
    forget() {
      persisted = undefined;
    },
  };
}

/**
 * `Promise.all`, but every read settles before the tick goes on or fails with the first failure:
 * a read that failed at once (the actuator's, an endpoint refusing) no longer leaves the others
 * running past the failed tick, their warnings logged after `governor --once --json` had printed.
 */
async function allSettled<T extends readonly unknown[] | []>(
  reads: T,
): Promise<{ -readonly [K in keyof T]: Awaited<T[K]> }> {
  const settled = (await Promise.allSettled(reads)) as PromiseSettledResult<unknown>[];
  const failed = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  return settled.map((result) => (result as PromiseFulfilledResult<unknown>).value) as {
    -readonly [K in keyof T]: Awaited<T[K]>;
  };
}

/** Build the loop. State lives in the store; the loop keeps only the previous queue reads and the metric cache. */
export function createGovernorLoop(options: GovernorLoopOptions): GovernorLoop {
  const clock = options.clock ?? Date.now;
  const metricsEveryMs = options.metricsEveryMs ?? METRICS_READ_MS;
  const overflow: OverflowStep | undefined = options.overflow
    ? createOverflowStep(options.overflow, metricsEveryMs, options.log)
    : undefined;
  let previousQueues: { normal?: QueueReading; high?: QueueReading } | undefined;
  let metricsCache: { window: MetricsWindow | undefined; at: number } | undefined;
  let queueMetricsCache: Awaited<ReturnType<QueueMetricsReader['readQueues']>> | undefined;
  /** What the loop decided last, kept to decide from while the store cannot be read. */
  let lastState: GovernorState | undefined;
  let lastDecision: Decision | undefined;

  const readMetrics = async (now: number) => {
    // A failed read is retried next tick rather than a minute later.
    if (metricsCache === undefined || metricsCache.window === undefined || now - metricsCache.at >= metricsEveryMs) {
      // The queues' CloudWatch metrics (billed per metric) only while a lane has no earlier read:
      // their sent rate stands in for the arrival rate until two reads give it; nothing else reads them.
      const queueMetrics = needsQueueMetrics(previousQueues) ? options.queueMetrics?.readQueues() : undefined;
      const [window, queues] = await Promise.all([options.metrics.read(), queueMetrics]);
      metricsCache = { window, at: now };
      if (queues) queueMetricsCache = queues;
    }
    return metricsCache.window;
  };

  // An unreadable ledger is unknown this tick (the last estimate stands), never empty.
  const readLedger = async () => {
    try {
      return await options.threadLedger?.read();
    } catch (error) {
      options.log?.warn('thread ledger read failed; the last estimate of the free threads stands this tick', {
        error: (error as Error).message,
      });
      return undefined;
    }
  };

  const keeper = createStateKeeper(options, clock, overflow, () => lastState);

  return {
    get lastDecision() {
      return lastDecision;
    },
    beginInvocation() {
      keeper.forget();
      overflow?.forget();
      options.actuator.forget?.();
    },
    async endInvocation() {
      await options.probe?.release?.();
    },
    async tick(tickOptions = {}) {
      const now = clock();
      const loading = keeper.load(now);
      const [queues, metrics, balance, settings, loaded, threadLedger, overflowReading, stores] = await allSettled([
        options.queues.read(),
        readMetrics(now),
        options.balance.read(),
        options.actuator.read(),
        loading,
        readLedger(),
        overflow?.read(now),
        // Which consumer calls count depends on the state (paused, or since a resume).
        loading.then((l) => readStores(options.stores, consumerCallsView(l.state, now, options.config))),
      ]);
      const dependencies = [...(loaded.unread ? [loaded.unread] : []), ...(stores ?? [])];
      withQueueMetrics(queues, queueMetricsCache);
      const balanceError = balance === undefined ? options.balance.lastError?.() : undefined;
      const signals = assembleSignals({
        now,
        queues,
        previous: previousQueues ?? {},
        metrics,
        balance,
        balanceError,
        settings,
        threadLedger,
        ...(dependencies.length > 0 ? { dependencies } : {}),
        // Both mappings read the normal queue: what the overflow lane holds is not the primary's.
        ...(overflow && overflowReading ? { sharedNormal: overflow.shared(overflowReading) } : {}),
      });
      previousQueues = queues;
      const lane =
        overflow && overflowReading
          ? overflow.tickInput({
              now,
              primarySignals: signals,
              normal: queues.normal,
              high: queues.high,
              reading: overflowReading,
            })
          : undefined;
      const tick = decideTick(signals, loaded.state, options.config, lane);
      lastState = tick.state;
      const changes = options.dryRun
        ? []
        : await keeper.persistAndApply(tick, loaded, overflowReading, tickOptions.probe ?? true);
      lastDecision = tick.primary;
      const record: TickRecord = {
        signals,
        decision: tick.primary,
        tick,
        applied: !options.dryRun,
        changes,
        ...(tick.overflow ? { overflow: tick.overflow.decision, overflowSignals: tick.overflow.signals } : {}),
      };
      options.log?.info('governor decision', decisionLogFields(record));
      return record;
    },
  };
}
