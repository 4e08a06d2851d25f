/**
 * One governor control loop: read signals, decide, persist, act, report. The Lambda handler,
 * the CLI (`governor --once`) and the local runtime all run this; they differ only in the
 * readers and the actuator they pass.
 */
import type { Clock } from '../core/ports.js';
import type { ThreadLedgerReader } from '../core/thread-ledger.js';
import { decide, initialState } from '../core/governor/policy.js';
import { assembleSignals, type QueueReading } from '../core/governor/signals.js';
import { governorStatusOf } from '../core/governor/status.js';
import type {
  BalanceReader,
  GovernorStateStore,
  LaneActuator,
  MetricsReader,
  QueueReader,
} from '../core/governor/ports.js';
import type { Decision, GovernorConfig, GovernorSignals, GovernorState } from '../core/governor/types.js';
import type { MetricsWindow } from '../core/governor/signals.js';

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
  /** How often to re-read the (lagging, rate-limited) metrics, ms: a minute in AWS, every tick locally. @default 60_000 */
  metricsEveryMs?: number;
  /** Decide and report but do not act. */
  dryRun?: boolean;
  log?: GovernorLog;
}

/** What one tick saw and did. */
export interface TickRecord {
  signals: GovernorSignals;
  decision: Decision;
  /** False on a dry run. */
  applied: boolean;
  /** Calls the actuator made, in words (empty when nothing changed). */
  changes: string[];
}

export interface GovernorLoop {
  /** One tick. Throws when the state or the actuator fails: the caller keeps the last ceilings (fail static). */
  tick(): Promise<TickRecord>;
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
    enabled: d.enabled,
    freeThreads: d.freeThreads,
    neededThreads: d.neededThreads,
    shortfall: d.shortfall,
    shortfallWarning: d.shortfallWarning,
    drainSeconds: d.drainSeconds === Number.POSITIVE_INFINITY ? 'never' : d.drainSeconds,
    effectiveCap: d.state.overCap.effectiveCap,
    backlog: { normal: s.lanes.normal.backlog, high: s.lanes.high?.backlog },
    inFlight: { normal: s.lanes.normal.inFlight, high: s.lanes.high?.inFlight },
    balance: s.balance,
    p95SolveMs: s.p95SolveMs,
    errorRate: s.errorRate,
    overCapAnswers: s.overCapAnswers,
    threadsHeld: s.threadLedger?.held,
    neighbours: d.state.overCap.neighbours,
    applied: record.applied,
    changes: record.changes,
  };
}

/** Build the loop. State lives in the store; the loop keeps only the previous queue reads and the metric cache. */
export function createGovernorLoop(options: GovernorLoopOptions): GovernorLoop {
  const clock = options.clock ?? Date.now;
  const metricsEveryMs = options.metricsEveryMs ?? 60_000;
  let previousQueues: { normal?: QueueReading; high?: QueueReading } | undefined;
  let metricsCache: { window: MetricsWindow | undefined; at: number } | undefined;
  let queueMetricsCache: Awaited<ReturnType<QueueMetricsReader['readQueues']>> | undefined;
  let persisted: { state: GovernorState; version: number | undefined } | undefined;
  let lastDecision: Decision | undefined;

  const readMetrics = async (now: number) => {
    // A failed read is retried next tick rather than a minute later.
    if (metricsCache === undefined || metricsCache.window === undefined || now - metricsCache.at >= metricsEveryMs) {
      const [window, queues] = await Promise.all([options.metrics.read(), options.queueMetrics?.readQueues()]);
      metricsCache = { window, at: now };
      if (queues) queueMetricsCache = queues;
    }
    return metricsCache.window;
  };

  // An unreadable ledger is unknown this tick (the metric window's over-cap answers stand in), never empty.
  const readLedger = async () => {
    try {
      return await options.threadLedger?.read();
    } catch (error) {
      options.log?.warn('thread ledger read failed; over-cap answers from the metric window this tick', {
        error: (error as Error).message,
      });
      return undefined;
    }
  };

  return {
    get lastDecision() {
      return lastDecision;
    },
    async tick() {
      const now = clock();
      const [queues, metrics, balance, settings, loaded, threadLedger] = await Promise.all([
        options.queues.read(),
        readMetrics(now),
        options.balance.read(),
        options.actuator.read(),
        persisted === undefined ? options.state.load() : Promise.resolve(undefined),
        readLedger(),
      ]);
      if (persisted === undefined)
        persisted = loaded ?? { state: initialState(options.config, now), version: undefined };
      for (const lane of ['normal', 'high'] as const) {
        const reading = queues[lane];
        const extra = queueMetricsCache?.[lane];
        if (reading && extra) {
          reading.oldestAgeSeconds ??= extra.oldestAgeSeconds;
          reading.sentRate ??= extra.sentRate;
        }
      }
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
      });
      previousQueues = queues;
      const decision = decide(signals, persisted.state, options.config);
      // Saved with the state, so `captcha-fleet status` can show the last decision.
      decision.state.lastDecision = governorStatusOf(signals, decision);
      let changes: string[] = [];
      if (!options.dryRun) {
        try {
          const version = await options.state.save(decision.state, persisted.version);
          persisted = { state: decision.state, version };
        } catch (error) {
          // Another writer (or a failed write): reload next tick, act on nothing now.
          persisted = undefined;
          throw error;
        }
        changes = (await options.actuator.apply(decision)).changes;
      }
      lastDecision = decision;
      const record: TickRecord = { signals, decision, applied: !options.dryRun, changes };
      options.log?.info('governor decision', decisionLogFields(record));
      return record;
    },
  };
}
