/**
 * Signal assembly: raw readings (queue attributes, the consumer's metric window, the balance,
 * the mappings as they stand) → GovernorSignals. Pure, shared by the Lambda, the local runtime
 * and the CLI so all three feed decide() the same way; only the readers differ.
 */
import type { ThreadLedgerReading } from '../thread-ledger.js';
import type { BalanceError, DependencyHealth, GovernorSignals, Lane, LaneSignals, ProbeOutcome } from './types.js';

/**
 * How long a balance read serves the governor loop, ms: half a tick, so every tick reads afresh
 * (each drop priced by the solves counted since the last read, the spend grant sized on the
 * balance of that tick) and the reads within one tick share it. A tick's cache (`tickMs`) served
 * the last tick's balance to the next in AWS: the ticks keep to their cadence (functions/governor/run.ts)
 * and the read is stamped when it returns, so the cache was a read's round trip short of expiring.
 */
export function tickBalanceTtlMs(tickMs: number): number {
  return Math.max(1, Math.floor(tickMs / 2));
}

/** One GetQueueAttributes read of a lane's queue; a field is undefined when it could not be read. */
export interface QueueReading {
  /** Epoch ms of the read. */
  at: number;
  visible: number | undefined;
  notVisible: number | undefined;
  delayed: number | undefined;
  /** Age of the oldest message, seconds (CloudWatch in AWS; estimated or absent elsewhere). */
  oldestAgeSeconds?: number | undefined;
  /** Messages sent per second from another source (CloudWatch NumberOfMessagesSent), used when no earlier read exists. */
  sentRate?: number | undefined;
}

/** The metric window the governor reads in AWS: two full minutes, so one late minute does not empty it. */
export const DEFAULT_METRICS_WINDOW_MS = 2 * 60_000;
/** How late CloudWatch shows EMF datapoints, roughly; the window ends at the last full minute. */
export const CLOUDWATCH_LAG_MS = 60_000;

/**
 * How often the governor in AWS reads the consumer's metric window (GetMetricData, billed per
 * metric): once a minute, at the first tick of each invocation, and the window stands until then.
 */
export const METRICS_READ_MS = 60_000;

/**
 * The consumer's metrics over a recent window. Counts are sums over the window (0 when the
 * query succeeded and nothing happened); the whole window is undefined when it could not be read.
 */
export interface MetricsWindow {
  /** Length of the window, ms. */
  windowMs: number;
  /** in.php submissions, accepted or not. */
  submissions: number;
  /**
   * res.php result requests (the consumer's `ResultRequests`). With adaptive polling a task
   * makes several, and each can answer a transient error, so the error rate is taken per
   * request: submissions + result requests. A source without the count (the policy lab, whose
   * solver answers no errors) leaves it out, and the rate is then per submission.
   */
  resultRequests?: number;
  overCapAnswers: number;
  transientErrors: number;
  taskErrors: number;
  accountErrors: number;
  solved: number;
  /** Terminal failures recorded (they took a thread until they failed). */
  failed?: number;
  meanSolveMs: number | undefined;
  p95SolveMs: number | undefined;
  /** Latest account error code, when the source keeps it. */
  accountErrorCode?: string | undefined;
}

/** What a mapping (or the local poller) is set to now. */
export interface LaneSetting {
  ceiling: number;
  enabled: boolean;
}

export interface SignalInputs {
  now: number;
  queues: { normal: QueueReading | undefined; high?: QueueReading | undefined };
  /** The previous tick's reads, for arrival rates from successive reads. */
  previous?: { normal?: QueueReading | undefined; high?: QueueReading | undefined };
  metrics: MetricsWindow | undefined;
  balance: number | undefined;
  /** Why the balance read failed, when it did and the reader can tell (the outage detector uses it). */
  balanceError?: BalanceError | undefined;
  settings: { normal: LaneSetting; high?: LaneSetting };
  /** The thread ledger as read this tick (absent: none, or unreadable). */
  threadLedger?: ThreadLedgerReading | undefined;
  /**
   * Another consumer on the normal queue (the overflow lane's mapping reads it too): its in flight
   * is part of the queue's NotVisible, and its completions leave the queue. The normal lane's in
   * flight is then NotVisible less `inFlight` (never below 0; unknown when either is), and its
   * arrivals count `completionRate` among what left (unknown when it is).
   */
  sharedNormal?: SharedLane | undefined;
  /** The fleet's stores as the loop found them this tick (a failed read of one is its outage evidence). */
  dependencies?: readonly DependencyHealth[] | undefined;
  /** The governor's own probe submission's outcome since the last tick. */
  probe?: ProbeOutcome | undefined;
}

/** What another consumer on a lane's queue holds and completes. */
export interface SharedLane {
  inFlight: number | undefined;
  /** Tasks it completes per second (its metric window). */
  completionRate: number | undefined;
}

/** Share of `part` in `whole`, with 0/0 read as 0 (nothing happened) and capped at 1. */
function share(part: number, whole: number): number {
  if (whole <= 0) return part > 0 ? 1 : 0;
  return Math.min(1, part / whole);
}

/**
 * Assemble the policy's signals.
 *
 * Arrival rate per lane: (change of visible + in flight + delayed) ÷ elapsed + the lane's share
 * (by in flight) of the completion rate, since completed messages leave the queue; without an
 * earlier read, the CloudWatch sent rate if given; otherwise unknown.
 */
export function assembleSignals(input: SignalInputs): GovernorSignals {
  const m = input.metrics;
  const completionRate = completionRateOf(m);
  const errors = m ? m.transientErrors + m.taskErrors : undefined;
  // Every solver request can answer an error: in.php submissions and res.php result requests.
  const requests = m ? m.submissions + (m.resultRequests ?? 0) : undefined;

  const lanesPresent: Lane[] =
    input.queues.high !== undefined || input.settings.high !== undefined ? ['normal', 'high'] : ['normal'];
  const shared = (lane: Lane) => (lane === 'normal' ? input.sharedNormal : undefined);
  const ownInFlight = (lane: Lane) => inFlightOwn(input.queues[lane]?.notVisible, shared(lane));
  const totalInFlight = lanesPresent.reduce((sum, lane) => sum + (ownInFlight(lane) ?? 0), 0);

  const laneSignals = (lane: Lane): LaneSignals => {
    const reading = input.queues[lane];
    const before = input.previous?.[lane];
    const setting = input.settings[lane] ?? { ceiling: 2, enabled: false };
    const own = ownInFlight(lane);
    return {
      backlog: reading?.visible,
      inFlight: own,
      delayed: reading?.delayed,
      oldestAgeSeconds: reading?.oldestAgeSeconds,
      arrivalRate: arrivalRate(reading, before, { completionRate, totalInFlight, own, shared: shared(lane) }),
      ceiling: setting.ceiling,
      enabled: setting.enabled,
    };
  };

  return {
    now: input.now,
    lanes: lanesPresent.includes('high')
      ? { normal: laneSignals('normal'), high: laneSignals('high') }
      : { normal: laneSignals('normal') },
    completionRate,
    meanSolveMs: m?.meanSolveMs,
    p95SolveMs: m?.p95SolveMs,
    errorRate: m ? share(errors as number, requests as number) : undefined,
    transientErrorRate: m ? share(m.transientErrors, requests as number) : undefined,
    overCapRate: m ? share(m.overCapAnswers, m.submissions) : undefined,
    overCapAnswers: m?.overCapAnswers,
    accountErrors: m?.accountErrors,
    accountErrorCode: m?.accountErrorCode,
    balance: input.balance,
    balanceError: input.balance === undefined ? input.balanceError : undefined,
    ...(input.threadLedger !== undefined ? { threadLedger: input.threadLedger } : {}),
    ...(input.dependencies !== undefined && input.dependencies.length > 0 ? { dependencies: input.dependencies } : {}),
    ...(input.probe !== undefined ? { probe: input.probe } : {}),
  };
}

/** Tasks completed per second over a metric window (solved and failed); undefined when the window is. */
export function completionRateOf(m: MetricsWindow | undefined): number | undefined {
  if (m === undefined || !(m.windowMs > 0)) return undefined;
  return (m.solved + (m.failed ?? m.taskErrors)) / (m.windowMs / 1000);
}

/** A lane's own in flight: the queue's NotVisible less what another consumer holds of it. */
function inFlightOwn(notVisible: number | undefined, shared: SharedLane | undefined): number | undefined {
  if (shared === undefined || notVisible === undefined) return notVisible;
  return shared.inFlight === undefined ? undefined : Math.max(0, notVisible - shared.inFlight);
}

function queued(reading: QueueReading | undefined): number | undefined {
  if (reading === undefined || reading.visible === undefined || reading.notVisible === undefined) return undefined;
  return reading.visible + reading.notVisible + (reading.delayed ?? 0);
}

interface Leaving {
  /** The fleet's completions per second, split over its lanes by their in flight. */
  completionRate: number | undefined;
  totalInFlight: number;
  /** This lane's own in flight (the queue's less another consumer's). */
  own: number | undefined;
  /** Another consumer on this lane's queue, whose completions leave it too. */
  shared: SharedLane | undefined;
}

function arrivalRate(
  reading: QueueReading | undefined,
  before: QueueReading | undefined,
  leaving: Leaving,
): number | undefined {
  const nowQueued = queued(reading);
  const thenQueued = queued(before);
  const { completionRate, totalInFlight, own, shared } = leaving;
  // With another consumer on the queue, what it holds and completes must be known to split the change.
  const sharedKnown = shared === undefined || (own !== undefined && shared.completionRate !== undefined);
  if (
    reading !== undefined &&
    nowQueued !== undefined &&
    before !== undefined &&
    thenQueued !== undefined &&
    reading.at > before.at &&
    sharedKnown
  ) {
    const laneShare = totalInFlight > 0 ? (own as number) / totalInFlight : 0;
    const left = (completionRate === undefined ? 0 : completionRate * laneShare) + (shared?.completionRate ?? 0);
    return Math.max(0, (nowQueued - thenQueued) / ((reading.at - before.at) / 1000) + left);
  }
  return reading?.sentRate;
}
