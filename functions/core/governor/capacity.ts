/**
 * Thread arithmetic: what the plan leaves this fleet, the ceiling a cap allows, and how a total
 * ceiling splits over the lanes. Pure.
 */
import { MAPPING_MIN_CONCURRENCY } from '../settings.js';
import type { CarriedThreads, GovernorConfig, GovernorSignals, Lane, LaneSignals } from './types.js';

/** Threads the plan leaves this fleet: plan threads − threads reserved for other users of the key. */
export function planCap(config: GovernorConfig): number {
  return config.planThreads - config.reservedThreads;
}

/** Lowest total ceiling while not paused: the configured minimum, never under the mapping floor. */
export function minimumCeiling(config: GovernorConfig): number {
  return Math.max(MAPPING_MIN_CONCURRENCY, config.minConcurrency);
}

/** Lowest effective cap: the threads the minimum ceiling uses (the fleet cannot run on fewer without pausing). */
export function capFloor(config: GovernorConfig): number {
  return minimumCeiling(config) * config.tasksPerInvocation;
}

/**
 * Total ceiling (invocations, summed over lanes) an effective cap allows:
 * ⌊cap ÷ tasksPerInvocation⌋ clamped to [minimum, maxConcurrency], so ceiling × tasksPerInvocation ≤ cap.
 */
export function ceilingFor(effectiveCap: number, config: GovernorConfig): number {
  const byThreads = Math.floor(effectiveCap / config.tasksPerInvocation);
  return Math.max(minimumCeiling(config), Math.min(config.maxConcurrency, byThreads));
}

/** Invocations that `messages` in flight take. */
export function invocations(messages: number, tasksPerInvocation: number): number {
  return Math.ceil(messages / tasksPerInvocation);
}

export function clamp(value: number, low: number, high: number): number {
  return Math.max(low, Math.min(high, value));
}

/** The lanes' ceilings as they stand. */
export interface Current {
  ceilings: Record<Lane, number>;
  enabled: Record<Lane, boolean>;
  /** Sum of the enabled lanes' ceilings. */
  total: number;
}

/** Per-lane ceilings and enabled flags. */
export interface LaneSplit {
  ceilings: Record<Lane, number>;
  enabled: Record<Lane, boolean>;
}

/** What the split needs to know besides the total. */
export interface SplitInputs {
  signals: GovernorSignals;
  config: GovernorConfig;
  lanes: readonly Lane[];
  current: Current;
  /** Holding (a signal is missing): the high lane keeps what it has rather than being sized. */
  hold: boolean;
}

/**
 * Split a total ceiling over the lanes. The high lane gets what its in-flight, backlog and
 * arrival rate need first (at least the mapping floor); normal the rest. A lane without work
 * (high) or without room (normal, under the floor) is disabled, so the enabled ceilings never
 * sum above the total.
 */
export function splitOverLanes(total: number, inputs: SplitInputs): LaneSplit {
  const { signals, config, lanes, current, hold } = inputs;
  const floor = MAPPING_MIN_CONCURRENCY;
  const keptHigh = Math.max(floor, current.ceilings.high);
  const normalOnly: LaneSplit = { ceilings: { normal: total, high: keptHigh }, enabled: { normal: true, high: false } };
  const high = signals.lanes.high;
  if (!lanes.includes('high') || high === undefined) return normalOnly;
  let highNeed: number;
  if (hold) {
    if (!current.enabled.high) return normalOnly;
    highNeed = current.ceilings.high;
  } else {
    const need = highLaneNeed(high, signals.meanSolveMs, config.tasksPerInvocation);
    if (need === undefined) return normalOnly;
    highNeed = need;
  }
  // Work the high lane has (waiting or in flight) may take the whole total, the normal lane then
  // waiting; arrivals it only expects leave the normal lane its floor. Their estimate, one tick's
  // queue change plus the lane's share of the completions by its in flight, is noisy, and one
  // that covered the total disabled the normal lane: its in flight drained, the completions went
  // to the high lane's estimate, and threads sat idle with normal tasks waiting (docs/governor.md,
  // "Priority lane": 14 of 30 threads held at the least with `--high-share 0.3`).
  const present = invocations(workOf(high), config.tasksPerInvocation);
  const expectedOnly = !hold && present <= total - floor && total - floor >= floor;
  const room = expectedOnly ? total - floor : total;
  const highCeiling = Math.min(room, Math.max(floor, highNeed));
  const rest = total - highCeiling;
  // Under twice the floor the lanes take turns, and the high lane's turn is for tasks waiting to
  // start: its in flight alone may be messages hidden (a crashed holder's, waiting out its
  // visibility and the orphan wait) or parked, which need no invocation. Before, two such hidden
  // messages held the turn for 40 s with 76 normal tasks waiting and no thread held (seed 19024).
  if (rest < floor && total < 2 * floor && !hold && (high.backlog ?? 0) === 0) return normalOnly;
  if (rest < floor) {
    return {
      ceilings: { normal: Math.max(floor, current.ceilings.normal), high: Math.max(floor, total) },
      enabled: { normal: false, high: true },
    };
  }
  return { ceilings: { normal: rest, high: highCeiling }, enabled: { normal: true, high: true } };
}

/** The work a lane has: its backlog and its in flight (unknown read as none). */
function workOf(lane: LaneSignals): number {
  return (lane.backlog ?? 0) + (lane.inFlight ?? 0);
}

/** Invocations the high lane's queued and arriving work needs; undefined when it has none. */
function highLaneNeed(
  high: LaneSignals,
  meanSolveMs: number | undefined,
  tasksPerInvocation: number,
): number | undefined {
  const queued = workOf(high);
  let arriving = 0;
  if (high.arrivalRate !== undefined && meanSolveMs !== undefined) arriving = (high.arrivalRate * meanSolveMs) / 1000;
  else if ((high.arrivalRate ?? 0) > 0) arriving = 1;
  if (queued === 0 && arriving === 0) return undefined;
  return Math.ceil((queued + arriving) / tasksPerInvocation - 1e-9);
}

/**
 * Threads the solves an outage paused still hold at `now` (OverCapEstimate.carried): none from
 * `until` on, and between `since` and `until` a straight line from all of them to none. The line
 * is an upper bound: each of those solves was caught at a random point of its run, so the time it
 * has left has a density that never rises (the chance that it outlasts t is P(solve > t) / mean),
 * its share still running is convex in t and lies under the line from 1 at `since` to about 0 at
 * `until` (twice the p95 solve, or a lease). Counting all of them until `until`, as before, held a
 * plan that had been full at the outage at half of it or less for up to two p95 solves after every
 * long outage, while most of those solves had ended within one.
 */
export function carriedThreads(carried: CarriedThreads | undefined, now: number): number {
  if (carried === undefined || now >= carried.until) return 0;
  const { since, until, threads } = carried;
  if (since === undefined || now <= since || until <= since) return threads;
  return Math.min(threads, Math.ceil((threads * (until - now)) / (until - since)));
}
