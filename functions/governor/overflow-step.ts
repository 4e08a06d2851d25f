/**
 * The overflow lane's part of a governor tick (docs/governor.md, "Overflow"). Alongside the
 * primary's signals it reads the overflow provider's balance, the overflow consumer's ledger
 * (threads held, solves counted) and metric window, and the overflow mapping. Both mappings read
 * the normal queue, so the lane's in flight and completions are handed to the primary's signal
 * assembly (`shared`) before decide(). After decide(), the provider's signals are built the same
 * way as the primary's and decideOverflow() runs; after the state is saved, the overflow mapping
 * (and the overflow function's reservation) follows its decision.
 *
 * A reader that fails is unknown this tick, never zero: an unknown balance or in flight closes
 * the lane (OVERFLOW_MISSING_SIGNAL) and the primary's tick goes on. Only the mapping's read and
 * write fail the tick, as the primary's do (fail static: the lanes keep their last ceilings).
 */
import {
  decideOverflow,
  initialOverflowState,
  type OverflowConfig,
  type OverflowDecision,
  type OverflowSignals,
  type OverflowState,
} from '../core/governor/overflow.js';
import type { BalanceReader, LaneActuator, MetricsReader } from '../core/governor/ports.js';
import {
  assembleSignals,
  completionRateOf,
  type LaneSetting,
  type MetricsWindow,
  type QueueReading,
  type SharedLane,
} from '../core/governor/signals.js';
import type { BalanceError, Decision, GovernorSignals } from '../core/governor/types.js';
import { MAPPING_MIN_CONCURRENCY } from '../core/settings.js';
import type { ThreadLedgerReader, ThreadLedgerReading } from '../core/thread-ledger.js';

/** Log sink (the loop's GovernorLog fits). */
interface StepLog {
  warn(message: string, fields?: Record<string, unknown>): void;
}

/** The overflow lane, as the governor loop reads and moves it. */
export interface OverflowLoopOptions {
  /** The policy's config (`overflowConfigFrom(settings, overrides)`). */
  config: OverflowConfig;
  /**
   * The overflow provider's balance (`createProbingBalance` on its solver). Read it afresh every
   * tick (a cache shorter than the tick): each drop is priced by the solves counted since the last read.
   */
  balance: BalanceReader;
  /**
   * The overflow consumer's thread ledger (OVERFLOW_LEDGER_ID): `held` is the lane's in flight,
   * the rise of `solved` between reads its solves. Without it both are unknown: the lane stays
   * closed, and the normal lane's in flight is unknown to the primary as well.
   */
  ledger?: ThreadLedgerReader;
  /** The overflow consumer's metric window (service `consumer-overflow`): its errors, outage signs, solve times. */
  metrics: MetricsReader;
  /**
   * The overflow function's mappings: the normal queue's as the `normal` lane, the high queue's
   * (when the stack has one) as `high`, and the function's reservation.
   */
  actuator: LaneActuator;
  /** Whether the overflow function has a mapping on the high queue (opened only while the primary is paused). */
  highMapping?: boolean;
}

/** What the overflow lane's readers gave this tick. */
export interface OverflowReading {
  balance: number | undefined;
  balanceError: BalanceError | undefined;
  ledger: ThreadLedgerReading | undefined;
  metrics: MetricsWindow | undefined;
  /** The overflow lane as it stands: open when either mapping is, its ceiling the enabled mappings' sum. */
  setting: LaneSetting;
}

/** The overflow lane's decision and the provider's signals it read. */
export interface OverflowTick {
  decision: OverflowDecision;
  signals: OverflowSignals;
  /** The decision's ceiling split over the overflow function's mappings (see `splitOverflowCeiling`). */
  mappings: OverflowMappings;
}

/** What the overflow function's mappings are set to: the `normal` queue's, and the `high` queue's when there is one. */
export interface OverflowMappings {
  ceilings: { normal: number; high: number };
  enabled: { normal: boolean; high: boolean };
}

/**
 * The lane's ceiling over the overflow function's two mappings. The plan serves the high lane
 * first, so overflow takes the normal queue; only while the primary is paused (an outage, its
 * money, its key) does it take the high queue too, or priority tasks would wait behind the pause
 * while normal ones are solved. Then the high mapping gets its share of the ceiling by backlog
 * (rounded up; each enabled mapping at least the floor), or all of it when the ceiling cannot
 * feed two mappings. The two maxima never sum past the decision's ceiling.
 */
export function splitOverflowCeiling(
  decision: Pick<OverflowDecision, 'ceiling' | 'enabled'>,
  primaryPaused: boolean,
  backlog: { normal: number | undefined; high: number | undefined },
  hasHighMapping: boolean,
): OverflowMappings {
  const floor = MAPPING_MIN_CONCURRENCY;
  const normalOnly: OverflowMappings = {
    ceilings: { normal: decision.ceiling, high: floor },
    enabled: { normal: decision.enabled, high: false },
  };
  const high = backlog.high ?? 0;
  if (!decision.enabled || !primaryPaused || !hasHighMapping || high <= 0) return normalOnly;
  const total = decision.ceiling;
  if (total < 2 * floor) return { ceilings: { normal: floor, high: total }, enabled: { normal: false, high: true } };
  const normal = backlog.normal ?? 0;
  const share = Math.ceil((total * high) / (high + normal));
  const highCeiling = Math.min(total - floor, Math.max(floor, share));
  return {
    ceilings: { normal: total - highCeiling, high: highCeiling },
    enabled: { normal: true, high: true },
  };
}

export interface OverflowStep {
  readonly config: OverflowConfig;
  /** Read the lane's signals. @throws when the overflow mapping cannot be read (as the primary's read does) */
  read(now: number): Promise<OverflowReading>;
  /** What the lane holds and completes of the normal queue, for the primary's signals. */
  shared(reading: OverflowReading): SharedLane;
  /** The lane's decision for this tick, after the primary's. */
  decide(input: OverflowStepInput): OverflowTick;
  /** The state with this reading is saved: its solve count is the base of the next tick's solves. */
  saved(reading: OverflowReading): void;
  /** The state was not saved (a conflict, a failed write): the next solves since the last read are unknown. */
  forget(): void;
  /** Move the overflow mappings (and reservation) to the tick's split; returns what changed, in words. */
  apply(tick: OverflowTick): Promise<string[]>;
}

export interface OverflowStepInput {
  now: number;
  /** The primary's decision this tick and the signals it read. */
  primary: Decision;
  primarySignals: GovernorSignals;
  /** The normal queue as read this tick (its backlog is the lane's too). */
  normal: QueueReading | undefined;
  /** The high queue as read this tick (the lane takes it too while the primary is paused). */
  high?: QueueReading | undefined;
  reading: OverflowReading;
  /** What the last saved tick left (undefined before the first). */
  state: OverflowState | undefined;
}

/** The lane as one: open when either mapping is; its ceiling the open mappings' sum (the normal one's while closed). */
function laneSetting(settings: { normal: LaneSetting; high?: LaneSetting }): LaneSetting {
  const open = [settings.normal, settings.high].filter((s): s is LaneSetting => s?.enabled === true);
  if (open.length === 0) return settings.normal;
  return { ceiling: open.reduce((sum, s) => sum + s.ceiling, 0), enabled: true };
}

/** Rise of a counter between two reads; unknown when either is, or when it fell (a reset item). */
export function counterRise(now: number | undefined, before: number | undefined): number | undefined {
  if (now === undefined || before === undefined || now < before) return undefined;
  return now - before;
}

/**
 * The overflow provider as a governor sees it, through the same signal assembly as the primary:
 * its lane is the normal queue (the backlog both lanes draw from, arriving at the rate the
 * primary's signals measured) with the lane's own in flight from its ledger; its balance, balance
 * error and metric window are its own.
 */
export function overflowSignalsOf(
  input: Omit<OverflowStepInput, 'primary' | 'state'>,
  solvesSinceLastRead: number | undefined,
): OverflowSignals {
  const { now, normal, reading, primarySignals } = input;
  const provider = assembleSignals({
    now,
    queues: {
      normal: {
        at: now,
        visible: normal?.visible,
        notVisible: reading.ledger?.held,
        delayed: normal?.delayed,
        oldestAgeSeconds: normal?.oldestAgeSeconds,
        sentRate: primarySignals.lanes.normal.arrivalRate,
      },
    },
    metrics: reading.metrics,
    balance: reading.balance,
    balanceError: reading.balanceError,
    settings: { normal: reading.setting },
  });
  return { provider, solvesSinceLastRead };
}

/** Build the overflow step of the loop. @param metricsEveryMs the metric window's cadence (the primary's) */
export function createOverflowStep(options: OverflowLoopOptions, metricsEveryMs: number, log?: StepLog): OverflowStep {
  let metricsCache: { window: MetricsWindow | undefined; at: number } | undefined;
  // The ledger's solve count at the last saved balance read: unknown after a cold start.
  let solvedAtLastRead: number | undefined;

  const soft = async <T>(what: string, read: () => Promise<T | undefined>): Promise<T | undefined> => {
    try {
      return await read();
    } catch (error) {
      log?.warn(`overflow ${what} read failed; unknown this tick`, { error: (error as Error).message });
      return undefined;
    }
  };
  const readMetrics = async (now: number) => {
    // A failed read is retried next tick rather than a metric period later.
    if (metricsCache === undefined || metricsCache.window === undefined || now - metricsCache.at >= metricsEveryMs)
      metricsCache = { window: await soft('metrics', () => options.metrics.read()), at: now };
    return metricsCache.window;
  };

  return {
    config: options.config,
    async read(now) {
      const [balance, ledger, metrics, settings] = await Promise.all([
        soft('balance', () => options.balance.read()),
        options.ledger ? soft('ledger', () => (options.ledger as ThreadLedgerReader).read()) : undefined,
        readMetrics(now),
        options.actuator.read(),
      ]);
      const balanceError = balance === undefined ? options.balance.lastError?.() : undefined;
      return { balance, balanceError, ledger, metrics, setting: laneSetting(settings) };
    },
    shared(reading) {
      return { inFlight: reading.ledger?.held, completionRate: completionRateOf(reading.metrics) };
    },
    decide(input) {
      const { reading } = input;
      // Solves are priced against the balance drop since the last read: without a read, none are counted.
      const solves = reading.balance === undefined ? undefined : counterRise(reading.ledger?.solved, solvedAtLastRead);
      const signals = overflowSignalsOf(input, solves);
      const state = input.state ?? initialOverflowState(options.config, input.now);
      const decision = decideOverflow(input.primary, input.primarySignals, signals, state, options.config);
      const mappings = splitOverflowCeiling(
        decision,
        input.primary.paused,
        { normal: input.normal?.visible, high: input.high?.visible },
        options.highMapping === true,
      );
      return { decision, signals, mappings };
    },
    saved(reading) {
      // The spend's last read moves only with a balance read; so does the base of the solves.
      if (reading.balance !== undefined) solvedAtLastRead = reading.ledger?.solved;
    },
    forget() {
      solvedAtLastRead = undefined;
    },
    async apply(tick) {
      const { changes } = await options.actuator.apply(tick.mappings);
      return changes;
    },
  };
}
