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
 * - Parked, the climb after one the fleet filled (within `FOLLOWING_CLIMB_TICKS`) goes to the whole
 *   plan: the first tested that others handed threads back, and an overshoot costs a refusal or two
 *   whatever its size (the refusal room holds the rest, and the refusal's count becomes the
 *   estimate). A big plan climbs back to what a neighbour freed in two ticks. That climb is not
 *   budgeted: a fleet others throttle earns the next climb's budget in tens of minutes.
 * - A climb that overshoots costs refusals. Each step is bounded by a refusal budget: 1.5 % of the
 *   accepted submissions, less the refusals that followed a climb (within two ticks of it), so the
 *   refusals climbing costs stay under 2 % of the submissions. Below the mapping's floor (others
 *   hold nearly all the plan) the climb is not budgeted: the fleet then probes one submission a
 *   tick (the neighbours stage), and each accepted probe climbs.
 * - Held (the parked design): while a refusal holds the fleet to a room it fills and tasks wait,
 *   a test (`heldTest`): one invocation more with the hold lifted (the decision's `liftHold`),
 *   every `HELD_TEST_TICKS` ticks in a hold's first minute and while the budget pays that many
 *   over `HELD_TEST_HORIZON_MS`, further apart as it runs low (`heldTestSpacingMs`), so a
 *   neighbour's departure is found in about two ticks, and late in a long hold within the hold's
 *   minute, not when the budget has earned a test again.
 * - Out of a starved spell (an accepted starved probe: others handed threads back), the spell
 *   ends where it began in the parked design: the estimate goes back at once to the level the
 *   fleet stood at before it (`standing`: the estimate at its last acceptance above the floor,
 *   outside a refusal's hold), as an outage's end restores the ceiling held before it. Where
 *   others handed back less, the first refusal brings it to what they did (a refusal or two: the
 *   refusal room holds the rest of the overshoot). The waiting design climbs from one. From there
 *   the climbs are not budgeted either until the first refusal: each level the fleet fills doubles
 *   the step, and the failures counted before the spell are forgotten (they failed against a hold
 *   the neighbour no longer has). A neighbour that held the whole plan and hands it back is found
 *   at the next tick, one that hands half of it back in a handful.
 * - A patient climb: a fleet that earns its budget slowly (others hold half the plan or more, or
 *   its own acceptances would fund a climb later than the patient turn comes: a few threads on
 *   long solves), while a backlog waits that its threads would take minutes to drain
 *   (`PATIENT_DRAIN_MS`), may borrow ahead of the budget (the rest of the
 *   2 %: 0.5 % of its acceptances, at most two invocations' refusals), one climb every few
 *   ticks, the wait doubling with each climb that failed since the fleet last filled the failed
 *   level. A neighbour that left is found in minutes at any size; one that stays costs a bounded
 *   debt, repaid from the acceptances before the budget funds a climb again.
 */
import { LEASE_FREEING_LAG_MS } from '../thread-leases.js';
import {
  acceptedSinceRefusal,
  REFUSAL_HOLD_OFF_MS,
  roomLimit,
  runRoom,
  type ThreadLedgerReading,
} from '../thread-ledger.js';
import type { NeighbourEstimate } from './types.js';

/** Share of accepted submissions the climbs may spend on refusals. */
export const CLIMB_BUDGET_SHARE = 0.015;
/** Refusals one invocation above the free threads can cost (its submission and its waits: the consumer's over-cap waiting). */
export const REFUSALS_PER_EXCESS_INVOCATION = 4;
/**
 * Refusals a patient climb may borrow ahead of the budget: the rest of the target's 2 % (0.5 % of
 * the acceptances so far), at most two excess invocations' worth.
 */
export const CLIMB_BORROW_SHARE = 0.005;
export const CLIMB_BORROW_LIMIT = 2 * REFUSALS_PER_EXCESS_INVOCATION;
/**
 * Refusals a climb that overshoots costs in the parked design, whatever its size: the first refused
 * submission sets the refusal room every consumer reads before it takes a lease, so the rest of
 * the climb waits for room instead of submitting (the lab, neighbour traces: 1.0 refusals a failed
 * climb of up to 8 threads, 1.1 above). A climb is affordable whole once the budget pays this.
 */
export const REFUSALS_PER_PARKED_CLIMB = 2;
/** A patient climb is for a fleet others hold to at most this share of the plan (a throttled fleet)… */
export const PATIENT_SHARE_OF_PLAN = 0.5;
/** …with a backlog the estimate's threads would take this long to drain, ms. */
export const PATIENT_DRAIN_MS = 5 * 60_000;
/** Ticks from the newest refusal or climb to a patient climb; each failed climb doubles them… */
export const PATIENT_CLIMB_TICKS = 3;
/** …at most this many times (3 × 2^4 ticks: 8 minutes at 10 s ticks). */
export const PATIENT_MAX_DOUBLINGS = 4;
/**
 * Parked: a climb within this many ticks of one the fleet filled without a refusal goes to the
 * whole plan (the first climb tests that others handed threads back, the next takes them).
 */
export const FOLLOWING_CLIMB_TICKS = 3;

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
  /** The parked design: an overshooting climb costs a refusal or two whatever its size (`REFUSALS_PER_PARKED_CLIMB`). */
  parked?: boolean;
}

/** The estimate before any answer: the whole plan is ours until a refusal says otherwise. */
export function initialEstimate(shape: EstimateShape, now: number): NeighbourEstimate {
  return {
    free: shape.planCap,
    planCap: shape.planCap,
    step: shape.spare,
    budget: 0,
    seen: { refusals: 0, acceptances: 0 },
    updatedAt: now,
  };
}

/**
 * The estimate on the plan as configured now. One made on another plan (planThreads or
 * reservedThreads changed by a redeploy) keeps what others were seen to hold and moves with the
 * plan: before, a fleet raised from 10 to 50 threads stayed at 10 for good without demand (the
 * saved estimate read as a refusal's), and a 600-thread plan at 10. A state saved before the plan
 * was kept: without a refusal ever seen the estimate is its old plan; with one, it is kept, within
 * the new plan.
 */
export function onPlan(estimate: NeighbourEstimate, shape: EstimateShape): NeighbourEstimate {
  if (estimate.planCap === shape.planCap) return estimate;
  const madeOn = estimate.planCap ?? (estimate.seen.refusals === 0 ? estimate.free : undefined);
  if (madeOn === undefined)
    return { ...estimate, free: Math.min(estimate.free, shape.planCap), planCap: shape.planCap };
  const others = Math.max(0, madeOn - estimate.free);
  return { ...estimate, free: Math.max(0, shape.planCap - others), planCap: shape.planCap };
}

/** What a reading changed. */
export type EstimateChange = 'down' | 'up' | undefined;

/** Ticks from a held test (or any climb) to the next held test, at least. */
export const HELD_TEST_TICKS = 2;

/**
 * The span a held fleet spreads its tests' budget over: the tests come every `HELD_TEST_TICKS`
 * ticks while the budget (above a refused climb's reserve) and what the fleet earns in this span
 * pay for that many, further apart as it runs low (`heldTestSpacingMs`), so a neighbour that holds
 * for many minutes is still tested near its departure (spent every two ticks, a budget of 17
 * lasted five minutes and the next test came when the fleet had earned one: an 11-thread plan's
 * neighbour found 4 minutes after it left, gen-s15-558-neighbours).
 */
export const HELD_TEST_HORIZON_MS = 10 * 60_000;

/**
 * The age of a run of held tests at which their spacing is the budget's whole share: before it,
 * that share × the run's age ÷ this, so a hold's first tests come every `HELD_TEST_TICKS` ticks
 * as before and a neighbour that leaves a tick or two after the first is found in two ticks
 * (spread from the first test, a 40-thread fleet held at 2 threads on a budget of 7 had not
 * found it 20 s after it left, test/integration/held-test.test.ts).
 */
export const HELD_TEST_RAMP_MS = 60_000;

/**
 * Fold a ledger reading into the estimate. Only answers recorded since the last reading count (a
 * counter that changed either way, as after the ledger item was recreated, is a new answer).
 * @param queuedWorkMs the solve time the tasks waiting in the queues need in all (a patient
 *   climb may borrow ahead of the budget for a backlog the estimate would take minutes to drain)
 * @param testable the parked fleet may test a refusal's hold this tick (`heldTest`: tasks wait,
 *   the money is not at its halt level, the fleet's own answers free under a thread in the lag)
 * @param meanSolveMs the mean solve (how fast the fleet's acceptances earn the budget; unknown:
 *   only a fleet others hold to half the plan counts as slow to earn it)
 */
export function updateEstimate(
  estimate: NeighbourEstimate,
  reading: ThreadLedgerReading,
  shape: EstimateShape,
  now: number,
  queuedWorkMs = 0,
  testable = false,
  meanSolveMs?: number,
): { estimate: NeighbourEstimate; change: EstimateChange; lift?: number } {
  const seen = estimate.seen;
  const accepted = Math.max(0, reading.acceptances - seen.acceptances);
  const refused = Math.max(0, reading.refusals - seen.refusals);
  const refusal = reading.refusals !== seen.refusals ? reading.lastRefusal : undefined;
  const acceptance = reading.acceptances !== seen.acceptances ? reading.lastAcceptance : undefined;
  // A climb below the floor is the starved probes' (one refusal a tick at most), not the budget's.
  const charged =
    refusal !== undefined &&
    estimate.climbedAt !== undefined &&
    estimate.climbedStarved !== true &&
    refusal.at - estimate.climbedAt <= 2 * shape.tickMs
      ? refused
      : 0;
  const maxBudget = REFUSALS_PER_EXCESS_INVOCATION * shape.planCap;
  const budget = Math.min(maxBudget, estimate.budget + CLIMB_BUDGET_SHARE * accepted - charged);
  const next: NeighbourEstimate = {
    ...estimate,
    budget,
    seen: { refusals: reading.refusals, acceptances: reading.acceptances },
  };
  // A refusal charged to a climb: the climb failed at the level it reached.
  if (charged > 0 && refusal !== undefined && estimate.climbedHeld !== true)
    next.failed = { count: (estimate.failed?.count ?? 0) + 1, level: estimate.free };
  if (refusal !== undefined) {
    next.updatedAt = Math.max(estimate.updatedAt, refusal.at);
    next.step = shape.spare;
    next.releasing = undefined;
  }
  // While a refusal holds the consumers to a count, that count is the estimate: down at once, and
  // up again once an acceptance ends a run (a higher ceiling would only wait for room, a lower one
  // idle threads the consumers would use).
  const room = clamp(roomLimit(reading, shape.planCap, now), 0, shape.planCap);
  if (room < shape.planCap) {
    const free = acceptedSinceRefusal(reading) ? room : Math.min(room, estimate.free);
    const change: EstimateChange = free < estimate.free ? 'down' : undefined;
    const held = { ...next, free };
    if (change === undefined && testable && heldTest(held, reading, shape, now, room, meanSolveMs))
      return {
        estimate: {
          ...held,
          free: Math.min(shape.planCap, room + shape.spare),
          climbedAt: now,
          climbedStarved: false,
          climbedHeld: true,
          heldSince: heldRunStart(estimate, now, shape.tickMs) ?? now,
        },
        change: 'up',
        lift: reading.lastRefusal?.at,
      };
    return { estimate: held, change };
  }
  // …and an acceptance after a run lifts the estimate the run halved back to the newest refusal's
  // count however long after the hold-off it comes (a few threads on long solves answer minutes
  // apart): before, it stayed halved until the budget paid for a climb (6 threads of 2-minute
  // solves: at 2 for 53 minutes after a neighbour had held 2 of them for 2 minutes).
  const newest = reading.lastRefusal;
  const halved = newest !== undefined && estimate.free <= runRoom(newest.held) && estimate.free < newest.held;
  if (halved && acceptedSinceRefusal(reading))
    return { estimate: { ...next, free: Math.min(shape.planCap, newest.held) }, change: undefined };
  if (acceptance === undefined) return { estimate: next, change: undefined };
  next.updatedAt = Math.max(estimate.updatedAt, acceptance.at);
  const starved = estimate.free < shape.floor;
  if (!starved) next.standing = estimate.free;
  // The fleet held the estimate (less one invocation) when the solver accepted: the estimate is tested.
  const filled = acceptance.held + shape.spare >= estimate.free;
  if (!filled || estimate.free >= shape.planCap) return { estimate: next, change: undefined };
  // The fleet filled the level its newest failed climb reached: the failures are behind it.
  if (next.failed !== undefined && estimate.free >= next.failed.level) next.failed = undefined;
  // Out of a starved spell: others handed threads back; the climbs that failed before failed
  // against a hold they no longer have, and each filled level doubles until the first refusal.
  if (starved) next.failed = undefined;
  const releasing = starved || next.releasing === true;
  // Parked: a climb that follows one the fleet filled without a refusal (within a few ticks) goes
  // to the whole plan: others handed threads back, how many is unknown, and an overshoot costs a
  // refusal or two whatever its size (the refusal room holds the rest; the refusal's count is then
  // the estimate). A big plan climbs back in two ticks, not log₂(plan) of doubling steps. It is
  // not budgeted: the climb it follows (budgeted or patient) found others handing threads back,
  // and a fleet others throttle earns the budget for the next in tens of minutes (a 4-thread plan
  // a neighbour held half of for an hour stayed at 3 for 14 minutes after it had handed both back).
  const following =
    shape.parked === true &&
    !starved &&
    estimate.climbedAt !== undefined &&
    acceptance.at - estimate.climbedAt <= FOLLOWING_CLIMB_TICKS * shape.tickMs;
  let affordable = releasing || following ? Number.POSITIVE_INFINITY : affordableThreads(budget, shape);
  // A patient climb is for a fleet that earns its budget slowly: others hold half the plan or
  // more, or its own acceptances (few threads, long solves) would fund the climb later than a
  // patient climb's turn comes (4 threads on 126-s solves earn a parked climb's 2 refusals in
  // 70 minutes).
  const slow = () =>
    estimate.free <= shape.planCap * PATIENT_SHARE_OF_PLAN || fundedAfterTurn(next, shape, meanSolveMs);
  const draining = queuedWorkMs / Math.max(1, estimate.free) >= PATIENT_DRAIN_MS;
  if (affordable < shape.spare && draining && slow() && patient(next, reading, shape, now))
    affordable = affordableThreads(budget + borrowLimit(reading.acceptances), shape);
  if (affordable < shape.spare) return { estimate: next, change: undefined };
  const step = following ? shape.planCap : Math.max(shape.spare, Math.min(estimate.step, affordable));
  // A starved spell ends where it began: back at once to the level the fleet stood at before it
  // (parked: an overshoot costs a refusal or two, the refusal room holds the rest of it).
  const back = starved && shape.parked === true ? (next.standing ?? 0) : 0;
  const free = Math.min(shape.planCap, Math.max(estimate.free + step, back));
  return {
    estimate: {
      ...next,
      free,
      // Releasing, each filled level doubles the estimate (from the level the spell ended at).
      step: Math.min(shape.planCap, releasing ? Math.max(2 * step, free) : 2 * step),
      climbedAt: acceptance.at,
      climbedStarved: starved,
      climbedHeld: false,
      heldSince: undefined,
      ...(releasing ? { releasing: true } : {}),
    },
    change: 'up',
  };
}

/**
 * A held test's turn (the parked design): a refusal holds the fleet to the `room` it fills (its
 * held threads within the room less those its own answers free in the lease-freeing lag,
 * `lagThreads`: a big fleet's count dips by that much between its answers and its next takes,
 * and a test on its dips alone came a tick or two late), an acceptance of its own has followed
 * the refusal (a refusal right after another halves the room),
 * the refusal is a tick old, no climb or test came in the last `HELD_TEST_TICKS` ticks, and the
 * budget pays for the test's refusal and a refused climb after it. The test opens one invocation
 * more and lifts the hold (the ledger's `liftedAt`) instead of waiting out its minute: the next
 * submission is a task's own, at the room's count plus one. Accepted there, it lifts the room for
 * good (an acceptance at the refused count) and, a climb the fleet filled, makes the next one go
 * to the whole plan (the following climb); refused, its refusal is charged to the budget (not
 * counted as a failed climb: `climbedHeld`).
 */
function heldTest(
  estimate: NeighbourEstimate,
  reading: ThreadLedgerReading,
  shape: EstimateShape,
  now: number,
  room: number,
  meanSolveMs?: number,
): boolean {
  const refusal = reading.lastRefusal;
  if (shape.parked !== true || refusal === undefined || room < 1) return false;
  if (reading.held + lagThreads(room, meanSolveMs) < room) return false;
  // A refused test (one refusal) leaves the budget a refused climb's worth: the climb after the
  // hold lapses stays funded (tests that spent it all left a 12-thread plan's neighbour's
  // departure to a patient climb 3.5 minutes late, gen-s11-295-neighbours).
  if (!acceptedSinceRefusal(reading) || estimate.budget < REFUSALS_PER_PARKED_CLIMB + 1) return false;
  const start = heldRunStart(estimate, now, shape.tickMs);
  const age = start !== undefined ? now - start : 0;
  const spacing = heldTestSpacingMs(estimate.budget, room, shape.tickMs, meanSolveMs, age);
  return now - refusal.at >= shape.tickMs && now - (estimate.climbedAt ?? 0) >= spacing;
}

/**
 * Epoch ms of the first test of the run a held test at `now` would continue, or undefined (it
 * starts one): the last climb was a held test of the run, at most a refusal's hold-off and
 * `HELD_TEST_TICKS` ticks ago. The spacing is never longer than the hold-off, so a hold's next
 * test comes within that; one later tests another hold (the last one lapsed or was lifted with no
 * climb between), and its first tests come every `HELD_TEST_TICKS` ticks again.
 */
function heldRunStart(estimate: NeighbourEstimate, now: number, tickMs: number): number | undefined {
  if (estimate.climbedHeld !== true || estimate.climbedAt === undefined) return undefined;
  if (now - estimate.climbedAt > REFUSAL_HOLD_OFF_MS + HELD_TEST_TICKS * tickMs) return undefined;
  return estimate.heldSince;
}

/**
 * Time from a held test (or any climb) to the next, ms: `HELD_TEST_TICKS` ticks, or the
 * `HELD_TEST_HORIZON_MS` shared among the tests the budget pays for above a refused climb's
 * reserve and those a fleet holding `room` threads earns in the horizon (its acceptances, one a
 * mean solve a thread; none counted with the mean unknown), when they are fewer than a test every
 * `HELD_TEST_TICKS` ticks; never longer than the refusal's hold itself (`REFUSAL_HOLD_OFF_MS`: at
 * its lapse one submission tests the count anyway, and a climb after it is charged to the same
 * budget). A run of held tests younger than `HELD_TEST_RAMP_MS` (`runAgeMs`: from its first test)
 * gets that share × its age ÷ the ramp.
 */
export function heldTestSpacingMs(
  budget: number,
  room: number,
  tickMs: number,
  meanSolveMs?: number,
  runAgeMs = HELD_TEST_RAMP_MS,
): number {
  const earned =
    meanSolveMs !== undefined && meanSolveMs > 0 ? budgetEarnedPerMs(room, meanSolveMs) * HELD_TEST_HORIZON_MS : 0;
  const tests = Math.max(0, budget - REFUSALS_PER_PARKED_CLIMB) + earned;
  const spread = tests > 0 ? HELD_TEST_HORIZON_MS / tests : Number.POSITIVE_INFINITY;
  const ramp = Math.min(1, Math.max(0, runAgeMs) / HELD_TEST_RAMP_MS);
  return Math.max(HELD_TEST_TICKS * tickMs, Math.min(REFUSAL_HOLD_OFF_MS, spread) * ramp);
}

/**
 * Threads of `held` whose answers are ready at the solver and whose leases are not yet taken again,
 * at most (`LEASE_FREEING_LAG_MS` of `held` threads' answers, one every `meanSolveMs` each); 0 with
 * the mean unknown.
 */
export function lagThreads(held: number, meanSolveMs?: number): number {
  if (meanSolveMs === undefined || meanSolveMs <= 0) return 0;
  return Math.ceil(lagShare(held, meanSolveMs) - 1e-9);
}

/** The answers `held` threads give in `LEASE_FREEING_LAG_MS`, one every `meanSolveMs` each (a fraction of a thread or more). */
export function lagShare(held: number, meanSolveMs: number): number {
  return (held * LEASE_FREEING_LAG_MS) / meanSolveMs;
}

/** Refusals a patient climb may borrow after `acceptances` accepted submissions. */
export function borrowLimit(acceptances: number): number {
  return Math.min(CLIMB_BORROW_LIMIT, CLIMB_BORROW_SHARE * acceptances);
}

/**
 * Threads a climb may add on `budget` refusals: whole invocations, each at its refusals' cost; in
 * the parked design any step once the budget pays for one refused climb.
 */
function affordableThreads(budget: number, shape: EstimateShape): number {
  const climb = smallestClimbRefusals(shape);
  if (shape.parked === true) return budget >= climb ? shape.planCap : 0;
  return Math.floor(Math.max(0, budget) / climb) * shape.spare;
}

/** Refusals the smallest climb may cost: one invocation's; parked, one refused climb whatever its size. */
function smallestClimbRefusals(shape: EstimateShape): number {
  return shape.parked === true ? REFUSALS_PER_PARKED_CLIMB : REFUSALS_PER_EXCESS_INVOCATION;
}

/**
 * A patient climb's turn: `PATIENT_CLIMB_TICKS` ticks since the newest refusal (a failed climb's
 * included) or climb, doubled per failed climb (at most `PATIENT_MAX_DOUBLINGS` times).
 */
function patient(estimate: NeighbourEstimate, reading: ThreadLedgerReading, shape: EstimateShape, now: number) {
  const last = Math.max(estimate.climbedAt ?? 0, reading.lastRefusal?.at ?? 0);
  return now - last >= patientWaitMs(estimate, shape);
}

/** A patient climb's wait from the newest refusal or climb, ms. */
function patientWaitMs(estimate: NeighbourEstimate, shape: EstimateShape): number {
  const failures = Math.min(PATIENT_MAX_DOUBLINGS, estimate.failed?.count ?? 0);
  return PATIENT_CLIMB_TICKS * shape.tickMs * 2 ** failures;
}

/**
 * Whether the fleet's own acceptances would fund its next climb (one invocation's refusals; parked,
 * `REFUSALS_PER_PARKED_CLIMB`) later than a patient climb's turn comes: the fleet at the estimate,
 * one acceptance a thread every `meanSolveMs`, each earning `CLIMB_BUDGET_SHARE` of a refusal.
 * The mean unknown: no.
 */
function fundedAfterTurn(estimate: NeighbourEstimate, shape: EstimateShape, meanSolveMs?: number): boolean {
  if (meanSolveMs === undefined || meanSolveMs <= 0) return false;
  const climb = smallestClimbRefusals(shape);
  const fundedIn = Math.max(0, climb - estimate.budget) / budgetEarnedPerMs(Math.max(1, estimate.free), meanSolveMs);
  return fundedIn > patientWaitMs(estimate, shape);
}

/** Refusals a ms the budget earns from `threads` busy threads' acceptances (one a mean solve each, `CLIMB_BUDGET_SHARE` of a refusal per acceptance). */
function budgetEarnedPerMs(threads: number, meanSolveMs: number): number {
  return (CLIMB_BUDGET_SHARE * threads) / meanSolveMs;
}

function clamp(value: number, low: number, high: number): number {
  return Math.max(low, Math.min(high, value));
}
