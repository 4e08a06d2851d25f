/**
 * The free-threads estimator: how many of the plan's threads this fleet may hold beside others on
 * the key ("neighbours"), from the thread ledger the consumer writes (functions/core/thread-ledger.ts).
 * One estimator, read every tick; a ledger that cannot be read keeps the last estimate. Pure.
 *
 * - A refusal while the fleet held h threads: at most h are ours to hold now. The estimate drops
 *   to the room the consumers leave themselves after it (`roomLimit`: h, halved per refusal of a
 *   run with no acceptance between, as others take what the fleet frees), and its climbing step
 *   goes back to one invocation.
 * - While that refusal holds the consumers to its count (until an acceptance at or above it, or
 *   its hold-off), the estimate does not climb: invocations above it would only wait for room.
 * - An acceptance while the fleet held h − 1, with h at the estimate (the fleet filled it) and no
 *   refusal since: the estimate was right, and may be low. It climbs by its step, and the step
 *   doubles: threads a neighbour hands back are found in a few ticks however long it held them,
 *   and without waiting on acceptances a throttled fleet cannot earn.
 * - A climb that overshoots costs refusals. Each step is bounded by a refusal budget: 1.5 % of the
 *   accepted submissions, less the refusals that followed a climb (within two ticks of it), so the
 *   refusals climbing costs stay under 2 % of the submissions. Below the mapping's floor (others
 *   hold nearly all the plan) the climb is not budgeted: the fleet then probes one submission a
 *   tick (the neighbours stage), and each accepted probe climbs.
 */
import { acceptedSinceRefusal, roomLimit, type ThreadLedgerReading } from '../thread-ledger.js';
import type { NeighbourEstimate } from './types.js';

/** Share of accepted submissions the climbs may spend on refusals. */
export const CLIMB_BUDGET_SHARE = 0.015;
/** Refusals one invocation above the free threads can cost (its submission and its waits: the consumer's over-cap waiting). */
export const REFUSALS_PER_EXCESS_INVOCATION = 4;

/** The plan's size and an invocation's threads, as the estimator needs them. */
export interface EstimateShape {
  /** Threads the plan leaves this fleet (plan − reserved). */
  planCap: number;
  /** Threads one invocation takes (tasks per invocation). */
  spare: number;
  /** Threads the mapping's floor needs (the minimum ceiling × tasks per invocation). */
  floor: number;
  /** Time between ticks, ms (refusals within two of a climb are charged to it). */
  tickMs: number;
}

/** The estimate before any answer: the whole plan is ours until a refusal says otherwise. */
export function initialEstimate(shape: EstimateShape, now: number): NeighbourEstimate {
  return { free: shape.planCap, step: shape.spare, budget: 0, seen: { refusals: 0, acceptances: 0 }, updatedAt: now };
}

/** What a reading changed. */
export type EstimateChange = 'down' | 'up' | undefined;

/**
 * Fold a ledger reading into the estimate. Only answers recorded since the last reading count (a
 * counter that changed either way, as after the ledger item was recreated, is a new answer).
 * @param probeRefusals refusals of the governor's own probe since the last reading (not the budget's)
 */
export function updateEstimate(
  estimate: NeighbourEstimate,
  reading: ThreadLedgerReading,
  shape: EstimateShape,
  now: number,
): { estimate: NeighbourEstimate; change: EstimateChange } {
  const seen = estimate.seen;
  const accepted = Math.max(0, reading.acceptances - seen.acceptances);
  const refused = Math.max(0, reading.refusals - seen.refusals);
  const refusal = reading.refusals !== seen.refusals ? reading.lastRefusal : undefined;
  const acceptance = reading.acceptances !== seen.acceptances ? reading.lastAcceptance : undefined;
  const charged =
    refusal !== undefined && estimate.climbedAt !== undefined && refusal.at - estimate.climbedAt <= 2 * shape.tickMs
      ? refused
      : 0;
  const maxBudget = REFUSALS_PER_EXCESS_INVOCATION * shape.planCap;
  const budget = Math.min(maxBudget, estimate.budget + CLIMB_BUDGET_SHARE * accepted - charged);
  const next: NeighbourEstimate = {
    ...estimate,
    budget,
    seen: { refusals: reading.refusals, acceptances: reading.acceptances },
  };
  if (refusal !== undefined) {
    next.updatedAt = Math.max(estimate.updatedAt, refusal.at);
    next.step = shape.spare;
  }
  // While a refusal holds the consumers to a count, that count is the estimate: down at once, and
  // up again once an acceptance ends a run (a higher ceiling would only wait for room, a lower one
  // idle threads the consumers would use).
  const room = clamp(roomLimit(reading, shape.planCap, now), 0, shape.planCap);
  if (room < shape.planCap) {
    const free = acceptedSinceRefusal(reading) ? room : Math.min(room, estimate.free);
    const change: EstimateChange = free < estimate.free ? 'down' : undefined;
    return { estimate: { ...next, free }, change };
  }
  if (acceptance === undefined) return { estimate: next, change: undefined };
  next.updatedAt = Math.max(estimate.updatedAt, acceptance.at);
  // The fleet held the estimate (less one invocation) when the solver accepted: the estimate is tested.
  const filled = acceptance.held + shape.spare >= estimate.free;
  if (!filled || estimate.free >= shape.planCap) return { estimate: next, change: undefined };
  const starved = estimate.free < shape.floor;
  const affordable = starved
    ? Number.POSITIVE_INFINITY
    : Math.floor(Math.max(0, budget) / REFUSALS_PER_EXCESS_INVOCATION) * shape.spare;
  if (affordable < shape.spare) return { estimate: next, change: undefined };
  const step = Math.max(shape.spare, Math.min(estimate.step, affordable));
  const free = Math.min(shape.planCap, estimate.free + step);
  return {
    estimate: { ...next, free, step: Math.min(2 * step, shape.planCap), climbedAt: acceptance.at },
    change: 'up',
  };
}

function clamp(value: number, low: number, high: number): number {
  return Math.max(low, Math.min(high, value));
}
