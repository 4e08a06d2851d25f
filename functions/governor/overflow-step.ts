/**
 * The overflow lane's part of a governor tick (docs/governor.md, "Overflow"). Alongside the
 * primary's signals it reads the overflow provider's balance, the overflow consumer's ledger
 * (threads held, solves counted) and metric window, and the overflow mapping. Both mappings read
 * the normal queue, so the lane's in flight and completions are handed to the primary's signal
 * assembly (`shared`). The provider's signals are built the same way as the primary's and go into
 * the tick's decideTick() with the primary's; after the state is saved, the overflow mapping (and
 * the overflow function's reservation) follows the lane's part of that decision.
 *
 * A reader that fails is unknown this tick, never zero: an unknown balance or in flight closes
 * the lane (OVERFLOW_MISSING_SIGNAL) and the primary's tick goes on. Only the mapping's read and
 * write fail the tick, as the primary's do (fail static: the lanes keep their last ceilings).
 */
import type { OverflowConfig, OverflowSignals } from '../core/governor/overflow.js';
import type { OverflowTick } from '../core/governor/tick.js';
import type { OverflowMappings } from '../core/governor/types.js';

export { splitOverflowCeiling } from '../core/governor/overflow.js';
export type { OverflowMappings } from '../core/governor/types.js';
import type { BalanceReader, LaneActuator, MetricsReader } from '../core/governor/ports.js';
import {
  assembleSignals,
  completionRateOf,
  type LaneSetting,
  type MetricsWindow,
  type QueueReading,
  type SharedLane,
} from '../core/governor/signals.js';
import type { BalanceError, GovernorSignals } from '../core/governor/types.js';
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

export interface OverflowStep {
  readonly config: OverflowConfig;
  /** Read the lane's signals. @throws when the overflow mapping cannot be read (as the primary's read does) */
  read(now: number): Promise<OverflowReading>;
  /** What the lane holds and completes of the normal queue, for the primary's signals. */
  shared(reading: OverflowReading): SharedLane;
  /** The lane's inputs to this tick's decideTick: the provider's signals, the queues' backlogs, its mappings. */
  tickInput(input: OverflowStepInput): OverflowTick;
  /** The state with this reading is saved: its solve count is the base of the next tick's solves. */
  saved(reading: OverflowReading): void;
  /** The state was not saved (a conflict, a failed write): the next solves since the last read are unknown. */
  forget(): void;
  /** Move the overflow mappings (and reservation) to the tick's split; returns what changed, in words. */
  apply(mappings: OverflowMappings): Promise<string[]>;
}

export interface OverflowStepInput {
  now: number;
  /** The primary's signals this tick (the provider's arrivals are the queue's). */
  primarySignals: GovernorSignals;
  /** The normal queue as read this tick (its backlog is the lane's too). */
  normal: QueueReading | undefined;
  /** The high queue as read this tick (the lane takes it too while the primary is paused). */
  high?: QueueReading | undefined;
  reading: OverflowReading;
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
 * error and metric window are its own. The stores are not: both lanes claim in the same results
 * table and hand back through the same queues, so the stores as the loop found them this tick
 * (`dependencies`) are the provider's too, and its guard pauses the lane for a store outage (and
 * resumes it on trial) as the primary's does: a paused primary must not send the whole backlog
 * through the overflow lane into the store that paused it.
 */
export function overflowSignalsOf(input: OverflowStepInput, solvesSinceLastRead: number | undefined): OverflowSignals {
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
    ...(primarySignals.dependencies !== undefined ? { dependencies: primarySignals.dependencies } : {}),
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
    tickInput(input) {
      const { reading } = input;
      // Solves are priced against the balance drop since the last read: without a read, none are counted.
      const solves = reading.balance === undefined ? undefined : counterRise(reading.ledger?.solved, solvedAtLastRead);
      return {
        config: options.config,
        signals: overflowSignalsOf(input, solves),
        backlog: { normal: input.normal?.visible, high: input.high?.visible },
        highMapping: options.highMapping === true,
      };
    },
    saved(reading) {
      // The spend's last read moves only with a balance read; so does the base of the solves.
      if (reading.balance !== undefined) solvedAtLastRead = reading.ledger?.solved;
    },
    forget() {
      solvedAtLastRead = undefined;
    },
    async apply(mappings) {
      const { changes } = await options.actuator.apply(mappings);
      return changes;
    },
  };
}
