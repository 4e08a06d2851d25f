/**
 * The free-threads estimator (neighbours.ts) and the neighbours stage: a refusal drops the
 * estimate to the threads held then; a filled estimate climbs, doubling, within the refusal
 * budget; below the mapping's floor the mappings are disabled and one probe a tick climbs it.
 * Properties: never above the plan nor above the threads held at the newest refusal; a
 * neighbour's departure is found within a few ticks however long it held the plan.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { capFloor } from '../../functions/core/governor/capacity.js';
import { decide, governorConfigFrom, initialState, planCap } from '../../functions/core/governor/policy.js';
import { estimateShape as estimateShapeOf } from '../../functions/core/governor/stage-threads.js';
import { LEASE_FREEING_LAG_MS } from '../../functions/core/thread-leases.js';
import {
  borrowLimit,
  CLIMB_BORROW_LIMIT,
  CLIMB_BORROW_SHARE,
  CLIMB_BUDGET_SHARE,
  FOLLOWING_CLIMB_TICKS,
  type EstimateShape,
  HELD_TEST_HORIZON_MS,
  HELD_TEST_RAMP_MS,
  HELD_TEST_TICKS,
  initialEstimate,
  lagThreads,
  PATIENT_CLIMB_TICKS,
  PATIENT_DRAIN_MS,
  REFUSALS_PER_EXCESS_INVOCATION,
  REFUSALS_PER_PARKED_CLIMB,
  updateEstimate,
} from '../../functions/core/governor/neighbours.js';
import type {
  Decision,
  GovernorConfig,
  GovernorState,
  NeighbourEstimate,
} from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { REFUSAL_HOLD_OFF_MS, type ThreadLedgerReading } from '../../functions/core/thread-ledger.js';
import { governorSignals, priceLearned, T0 } from '../helpers/governor.js';

const PLAN = 20;
const shape: EstimateShape = { planCap: PLAN, spare: 1, floor: 2, tickMs: 1000 };

function reading(overrides: Partial<ThreadLedgerReading>): ThreadLedgerReading {
  return { held: 0, refusals: 0, acceptances: 0, ...overrides };
}

/** An estimate with a budget for `refusals` refused submissions of climbing. */
function withBudget(estimate: NeighbourEstimate, refusals: number): NeighbourEstimate {
  return { ...estimate, budget: refusals };
}

describe('the free-threads estimator', () => {
  it('drops at once to the threads held at a refusal, and resets its step', () => {
    // Act
    const { estimate, change } = updateEstimate(
      { ...initialEstimate(shape, T0), step: 8 },
      reading({ refusals: 1, lastRefusal: { at: T0, held: 6 } }),
      shape,
      T0,
    );
    // Assess
    expect(change).toBe('down');
    expect(estimate.free).toBe(6);
    expect(estimate.step).toBe(1);
  });

  it('drops to half the threads held at a refusal that follows another with no acceptance between (a run)', () => {
    // Act: others take what the fleet frees: refused at 14, then at 13.
    const { estimate, change } = updateEstimate(
      initialEstimate(shape, T0),
      reading({ refusals: 2, refusalRun: 2, lastRefusal: { at: T0, held: 13 } }),
      shape,
      T0,
    );
    // Assess
    expect(change).toBe('down');
    expect(estimate.free).toBe(6);
  });

  it('comes back to the refused count once an acceptance ends the run (the consumers hold themselves there)', () => {
    // Prepare: halved to 6 by a run at 13.
    const halved = updateEstimate(
      initialEstimate(shape, T0),
      reading({ refusals: 2, refusalRun: 2, lastRefusal: { at: T0, held: 13 } }),
      shape,
      T0,
    ).estimate;
    // Act: accepted while the fleet held 5.
    const { estimate } = updateEstimate(
      halved,
      reading({
        refusals: 2,
        refusalRun: 0,
        lastRefusal: { at: T0, held: 13 },
        acceptances: 1,
        lastAcceptance: { at: T0 + 500, held: 5 },
      }),
      shape,
      T0 + 1000,
    );
    // Assess
    expect(estimate.free).toBe(13);
  });

  it("comes back to the refused count when the acceptance that ends the run comes after the refusal's hold-off", () => {
    // Before: a few threads on long solves answer minutes apart; the hold lapsed first and the
    // halved estimate stayed until the budget paid for a climb (53 minutes at 2 of 6 threads).
    // Prepare: halved to 6 by a run at 13; the hold lapses with no acceptance.
    const run = reading({ refusals: 2, refusalRun: 2, lastRefusal: { at: T0, held: 13 } });
    const halved = updateEstimate(initialEstimate(shape, T0), run, shape, T0).estimate;
    const lapsed = updateEstimate(halved, run, shape, T0 + REFUSAL_HOLD_OFF_MS + 1).estimate;
    const later = T0 + 3 * REFUSAL_HOLD_OFF_MS;
    // Act: accepted while the fleet held 5, long after the hold-off, no budget for a climb.
    const { estimate } = updateEstimate(
      withBudget(lapsed, 0),
      reading({
        refusals: 2,
        refusalRun: 0,
        lastRefusal: { at: T0, held: 13 },
        acceptances: 1,
        lastAcceptance: { at: later, held: 5 },
      }),
      shape,
      later,
    );
    // Assess: back at the refused count, not above it (above is a climb the budget pays for)
    expect(halved.free).toBe(6);
    expect(lapsed.free).toBe(6);
    expect(estimate.free).toBe(13);
  });

  it('does not climb while a refusal holds the consumers to its count; climbs once its hold-off has passed', () => {
    // Prepare: refused at 10, the fleet filled it again since (accepted at 9).
    const e = withBudget({ ...initialEstimate(shape, T0), free: 10 }, 100);
    const r = reading({
      refusals: 1,
      refusalRun: 0,
      lastRefusal: { at: T0, held: 10 },
      acceptances: 50,
      lastAcceptance: { at: T0 + 5000, held: 9 },
    });
    // Act
    const held = updateEstimate({ ...e, seen: { refusals: 1, acceptances: 0 } }, r, shape, T0 + 5000);
    const later = updateEstimate(
      { ...e, seen: { refusals: 1, acceptances: 0 } },
      r,
      shape,
      T0 + REFUSAL_HOLD_OFF_MS + 1,
    );
    // Assess
    expect(held.estimate.free).toBe(10);
    expect(held.change).toBeUndefined();
    expect(later.change).toBe('up');
    expect(later.estimate.free).toBe(11);
  });

  it('climbs when an acceptance finds the fleet at the estimate, doubling its step each time', () => {
    // Prepare
    let e = withBudget({ ...initialEstimate(shape, T0), free: 4 }, 100);
    const frees: number[] = [];
    // Act: each tick, an acceptance while the fleet held all but one of the estimate.
    for (let i = 1; i <= 4; i++) {
      e = updateEstimate(
        e,
        reading({ acceptances: i, lastAcceptance: { at: T0 + i, held: e.free - 1 } }),
        shape,
        T0 + i,
      ).estimate;
      frees.push(e.free);
    }
    // Assess
    expect(frees).toEqual([5, 7, 11, 19]);
  });

  it('does not climb on acceptances under the estimate (nothing was tested)', () => {
    // Act
    const { estimate, change } = updateEstimate(
      withBudget({ ...initialEstimate(shape, T0), free: 10 }, 100),
      reading({ acceptances: 5, lastAcceptance: { at: T0, held: 3 } }),
      shape,
      T0,
    );
    // Assess
    expect(change).toBeUndefined();
    expect(estimate.free).toBe(10);
  });

  it('climbs only as far as the refusal budget pays for an overshoot', () => {
    // Prepare: a budget of 8 refusals pays for 2 invocations of overshoot.
    const e = withBudget({ ...initialEstimate(shape, T0), free: 4, step: 16 }, 2 * REFUSALS_PER_EXCESS_INVOCATION);
    // Act
    const { estimate } = updateEstimate(e, reading({ acceptances: 1, lastAcceptance: { at: T0, held: 3 } }), shape, T0);
    // Assess
    expect(estimate.free).toBe(6);
  });

  it('in the parked design climbs its whole step once the budget pays for one refused climb, none before', () => {
    // Prepare: the parked design (a refused climb costs a refusal or two whatever its size: the
    // refusal room holds the rest of it), a step of 16.
    const parked: EstimateShape = { ...shape, parked: true };
    const e = { ...initialEstimate(parked, T0), free: 4, step: 16 };
    const accepted = reading({ acceptances: 1, lastAcceptance: { at: T0, held: 3 } });
    // Act
    const paid = updateEstimate(withBudget(e, REFUSALS_PER_PARKED_CLIMB), accepted, parked, T0).estimate;
    const unpaid = updateEstimate(withBudget(e, REFUSALS_PER_PARKED_CLIMB - 0.5), accepted, parked, T0).estimate;
    const waiting = updateEstimate(withBudget(e, REFUSALS_PER_PARKED_CLIMB), accepted, shape, T0).estimate;
    // Assess: the whole step (4 + 16), where the waiting design's same budget pays for none
    expect(paid.free).toBe(20);
    expect(paid.step).toBe(PLAN);
    expect(unpaid.free).toBe(4);
    expect(waiting.free).toBe(4);
  });

  it('earns its budget from acceptances and spends it on the refusals that follow a climb', () => {
    // Prepare
    const e0 = { ...initialEstimate(shape, T0), free: 10 };
    // Act: 1000 acceptances, then a climb, then 3 refusals a tick later.
    const earned = updateEstimate(
      e0,
      reading({ acceptances: 1000, lastAcceptance: { at: T0, held: 9 } }),
      shape,
      T0,
    ).estimate;
    const spent = updateEstimate(
      earned,
      reading({ acceptances: 1000, refusals: 3, lastRefusal: { at: T0 + 1000, held: 11 } }),
      shape,
      T0 + 1000,
    ).estimate;
    // Assess
    expect(earned.budget).toBeCloseTo(1000 * CLIMB_BUDGET_SHARE);
    expect(earned.free).toBeGreaterThan(10);
    expect(spent.budget).toBeCloseTo(1000 * CLIMB_BUDGET_SHARE - 3);
  });

  describe('a patient climb (a backlog minutes long, a budget too small)', () => {
    // 10 s ticks: a patient climb's turn (90 s) is longer than a refusal's hold-off (60 s).
    const slow: EstimateShape = { ...shape, tickMs: 30_000 };
    const turn = PATIENT_CLIMB_TICKS * slow.tickMs;
    // A fleet held at 4 threads with 10 s solves: 200 queued tasks are 500 s of its threads.
    const backlogWork = 200 * 10_000;
    const longAgo = T0 - 10 * REFUSAL_HOLD_OFF_MS;
    // 2,000 acceptances so far: the borrowing is at its limit (0.5 % of them is more than 8).
    const sofar = 2000;
    const filledAt = (at: number, acceptances = sofar) =>
      reading({ acceptances, lastAcceptance: { at, held: 3 }, refusals: 1, lastRefusal: { at: longAgo, held: 5 } });
    const held = (budget: number, free = 4): NeighbourEstimate => ({
      ...initialEstimate(slow, T0),
      free,
      budget,
      climbedAt: T0,
      seen: { refusals: 1, acceptances: sofar - 1 },
    });
    it('borrows one invocation ahead of the budget once its turn has come, never before', () => {
      // Act
      const early = updateEstimate(held(0), filledAt(T0 + turn - 1), slow, T0 + turn - 1, backlogWork);
      const due = updateEstimate(held(0), filledAt(T0 + turn), slow, T0 + turn, backlogWork);
      const funded = updateEstimate(held(REFUSALS_PER_EXCESS_INVOCATION), filledAt(T0 + 1), slow, T0 + 1, 0);
      // Assess: one invocation (one thread) more; a budget that pays for it climbs at once, backlog or not.
      expect(early.change).toBeUndefined();
      expect(due.change).toBe('up');
      expect(due.estimate.free).toBe(5);
      expect(funded.estimate.free).toBe(5);
    });

    it('does not borrow for a short backlog, past its debt limit, early in a run, or for a fleet not throttled', () => {
      // Act
      const short = updateEstimate(held(0), filledAt(T0 + turn), slow, T0 + turn, PATIENT_DRAIN_MS * 4 - 1);
      const indebted = updateEstimate(
        held(REFUSALS_PER_EXCESS_INVOCATION - CLIMB_BORROW_LIMIT - 0.1),
        filledAt(T0 + turn),
        slow,
        T0 + turn,
        backlogWork,
      );
      // 100 acceptances so far: 0.5 % of them (0.5 refusals) does not pay for an invocation.
      const early = updateEstimate(
        { ...held(0), seen: { refusals: 1, acceptances: 99 } },
        filledAt(T0 + turn, 100),
        slow,
        T0 + turn,
        backlogWork,
      );
      // Others hold less than half the plan: the fleet earns its budget at its own pace.
      const roomy = updateEstimate(held(0, PLAN / 2 + 1), filledAt(T0 + turn), slow, T0 + turn, 100 * backlogWork);
      // Assess
      expect(short.change).toBeUndefined();
      expect(indebted.change).toBeUndefined();
      expect(borrowLimit(100)).toBeCloseTo(100 * CLIMB_BORROW_SHARE);
      expect(early.change).toBeUndefined();
      expect(roomy.change).toBeUndefined();
    });

    it('borrows for a fleet others hold under half the plan when its own acceptances would fund the climb only after its turn', () => {
      // Prepare: others hold 9 of the 20 threads; the fleet fills its 11 (accepted with 10 held)
      // with a backlog of minutes. Its 4 refusals' climb costs 267 acceptances at 1.5 % each: 24
      // solves a thread, 51 minutes of 126-s solves (after its 90-s turn), 49 s of 2-s ones (before).
      const roomy = held(0, PLAN / 2 + 1);
      const filled = reading({
        acceptances: sofar,
        lastAcceptance: { at: T0 + turn, held: PLAN / 2 },
        refusals: 1,
        lastRefusal: { at: longAgo, held: PLAN / 2 + 2 },
      });
      const work = 4 * backlogWork;
      // Act
      const longSolves = updateEstimate(roomy, filled, slow, T0 + turn, work, false, 126_000);
      const early = updateEstimate(
        roomy,
        { ...filled, lastAcceptance: { at: T0 + turn - 1, held: PLAN / 2 } },
        slow,
        T0 + turn - 1,
        work,
        false,
        126_000,
      );
      const shortSolves = updateEstimate(roomy, filled, slow, T0 + turn, work, false, 2_000);
      const unknown = updateEstimate(roomy, filled, slow, T0 + turn, work, false);
      // Assess: one invocation more at its turn, never before; a fleet that earns the climb sooner
      // (or whose solves are not known yet) waits for its budget.
      expect(longSolves.change).toBe('up');
      expect(longSolves.estimate.free).toBe(PLAN / 2 + 2);
      expect(early.change).toBeUndefined();
      expect(shortSolves.change).toBeUndefined();
      expect(unknown.change).toBeUndefined();
    });

    it('waits twice as long after each climb that failed, until the fleet fills the failed level', () => {
      // Prepare: a patient climb to 5, refused a tick later: the climb failed at 5.
      const climbed = updateEstimate(held(0), filledAt(T0 + turn), slow, T0 + turn, backlogWork).estimate;
      const refusedAt = T0 + turn + slow.tickMs;
      const refusal = { refusals: 2, lastRefusal: { at: refusedAt, held: 4 } };
      const failed = updateEstimate(
        climbed,
        reading({ acceptances: sofar, lastAcceptance: { at: T0 + turn, held: 3 }, ...refusal }),
        slow,
        refusedAt,
        backlogWork,
      ).estimate;
      const filledAfter = (ms: number, held = 3) =>
        updateEstimate(
          failed,
          reading({ acceptances: sofar + 1, lastAcceptance: { at: refusedAt + ms, held }, ...refusal }),
          slow,
          refusedAt + ms,
          backlogWork,
        );
      // Assess
      expect(failed.failed).toMatchObject({ count: 1, level: 5 });
      expect(failed.free).toBe(4);
      expect(failed.budget).toBeLessThan(0);
      expect(filledAfter(2 * turn - 1).change).toBeUndefined();
      expect(filledAfter(2 * turn).change).toBe('up');
      // Filling the failed level (5, the climb to it funded) forgives the failure.
      const refilled = updateEstimate(
        { ...failed, free: 5, budget: REFUSALS_PER_EXCESS_INVOCATION },
        reading({ acceptances: sofar + 1, lastAcceptance: { at: refusedAt + turn, held: 4 }, ...refusal }),
        slow,
        refusedAt + turn,
        backlogWork,
      ).estimate;
      expect(refilled.failed).toBeUndefined();
    });

    it("does not charge a starved climb's refusals to the budget (the probes pay for them)", () => {
      // Prepare: a starved climb from 1 to 2, refused a tick later.
      const climbed = updateEstimate(
        { ...initialEstimate(shape, T0), free: 1, budget: 0 },
        reading({ acceptances: 1, lastAcceptance: { at: T0, held: 0 } }),
        shape,
        T0,
      ).estimate;
      // Act
      const refused = updateEstimate(
        climbed,
        reading({ acceptances: 1, refusals: 1, lastRefusal: { at: T0 + shape.tickMs, held: 1 } }),
        shape,
        T0 + shape.tickMs,
      ).estimate;
      // Assess
      expect(climbed.climbedStarved).toBe(true);
      expect(refused.budget).toBeCloseTo(CLIMB_BUDGET_SHARE);
      expect(refused.failed).toBeUndefined();
    });
  });

  it('climbs below the mapping floor without a budget (the starved probes pay for themselves)', () => {
    // Act: starved at 0; a probe is accepted while nothing is held.
    const { estimate } = updateEstimate(
      { ...initialEstimate(shape, T0), free: 0, budget: 0 },
      reading({ acceptances: 1, lastAcceptance: { at: T0, held: 0 } }),
      shape,
      T0,
    );
    // Assess
    expect(estimate.free).toBe(1);
  });
});

// ---- decide: the neighbours stage -----------------------------------------------------------------

const cfg: GovernorConfig = governorConfigFrom(resolveSettings({ tickMs: 1000, planThreads: PLAN }), {
  probeSubmissions: true,
});

function tick(state: GovernorState, now: number, ledger: ThreadLedgerReading, ceiling: number, enabled: boolean) {
  return decide(
    governorSignals(now, { threadLedger: ledger }, { ceiling, enabled, inFlight: ledger.held }),
    state,
    cfg,
  );
}

describe('decide: others hold (nearly) the whole plan', () => {
  it('disables the mappings while others hold the whole plan, and asks for one probe a tick once the refusals that showed it are paid for', () => {
    // Act: refused while the fleet held nothing; then a quiet tick.
    const first = tick(
      initialState(cfg, T0),
      T0,
      reading({ held: 0, refusals: 1, refusalRun: 1, lastRefusal: { at: T0, held: 0 } }),
      20,
      true,
    );
    const second = tick(
      first.state,
      T0 + 1000,
      reading({ held: 0, refusals: 1, refusalRun: 1, lastRefusal: { at: T0, held: 0 } }),
      20,
      false,
    );
    // Assess
    expect(first.reason.code).toBe('WAIT_FOR_THREADS');
    expect(first.paused).toBe(true);
    expect(first.enabled).toEqual({ normal: false, high: false });
    expect(first.probe).toBe(false);
    expect(second.paused).toBe(true);
    expect(second.probe).toBe(true);
  });

  it('runs at the mapping’s floor on the one thread others leave (the consumers’ hold keeps them to it), no probe', () => {
    // Act: refused while the fleet held 1 thread: one is free for it.
    const d = tick(
      initialState(cfg, T0),
      T0,
      reading({ held: 1, refusals: 1, refusalRun: 1, lastRefusal: { at: T0, held: 1 } }),
      20,
      true,
    );
    // Assess
    expect(d.reason.code).toBe('FEW_THREADS');
    expect(d.paused).toBe(false);
    expect(d.ceilings.normal).toBe(2);
    expect(d.enabled.normal).toBe(true);
    expect(d.probe).toBe(false);
  });

  it('charges a refused probe once: one probe a tick while others hold the whole plan', () => {
    // Act: starved for 10 ticks, every probe refused (its refusal shows in the next tick's reading).
    let state = tick(
      initialState(cfg, T0),
      T0,
      reading({ refusals: 1, refusalRun: 1, lastRefusal: { at: T0, held: 0 } }),
      2,
      false,
    ).state;
    let r = reading({ refusals: 1, refusalRun: 1, lastRefusal: { at: T0, held: 0 } });
    let probes = 0;
    for (let i = 1; i <= 10; i++) {
      const d = tick(state, T0 + i * 1000, r, 2, false);
      state = d.state;
      if (d.probe) {
        probes++;
        r = {
          ...r,
          refusals: r.refusals + 1,
          refusalRun: (r.refusalRun ?? 0) + 1,
          lastRefusal: { at: T0 + i * 1000 + 5, held: 0 },
        };
      }
    }
    // Assess: a probe every tick (not every other), and no more refusals than ticks.
    expect(probes).toBe(10);
    expect(r.refusals).toBeLessThanOrEqual(11);
  });

  it('runs at the floor instead where no probe adapter is wired (it could never learn the threads came back)', () => {
    // Act
    const d = decide(
      governorSignals(
        T0,
        { threadLedger: reading({ held: 1, refusals: 1, lastRefusal: { at: T0, held: 1 } }) },
        { ceiling: 20 },
      ),
      initialState(cfg, T0),
      { ...cfg, probeSubmissions: false },
    );
    // Assess
    expect(d.paused).toBe(false);
    expect(d.ceilings.normal).toBe(2);
    expect(d.probe).toBe(false);
  });

  it('probes no more than once a tick: a burst of refusals uses up the probes it leaves room for', () => {
    // Act: 5 refusals in the tick the neighbour arrived, then quiet ticks.
    let state = initialState(cfg, T0);
    const probes: boolean[] = [];
    let r = reading({ held: 0, refusals: 5, lastRefusal: { at: T0, held: 0 } });
    for (let i = 0; i < 8; i++) {
      const d = tick(state, T0 + i * 1000, r, 2, false);
      probes.push(d.probe);
      state = d.state;
      // Each probe the tick made is refused.
      if (d.probe) r = { ...r, refusals: r.refusals + 1, lastRefusal: { at: T0 + i * 1000 + 10, held: 0 } };
    }
    // Assess: never more than one refusal per starved tick in all (5 + probes ≤ ticks + 1).
    const made = probes.filter(Boolean).length;
    expect(5 + made).toBeLessThanOrEqual(probes.length + 1);
  });

  it('resumes once the probes find threads again, and climbs to the plan within a few ticks', () => {
    // Prepare: starved at 0 for an hour.
    let state = tick(
      initialState(cfg, T0),
      T0,
      reading({ refusals: 1, lastRefusal: { at: T0, held: 0 } }),
      2,
      false,
    ).state;
    let r: ThreadLedgerReading = reading({ refusals: 1, lastRefusal: { at: T0, held: 0 }, acceptances: 5000 });
    let d: Decision | undefined;
    const hour = T0 + 3_600_000;
    let held = 0;
    let ticks = 0;
    // Act: the neighbour left; every probe and every invocation is accepted with the fleet at its ceiling.
    for (; ticks < 20; ticks++) {
      const now = hour + ticks * 1000;
      r = { ...r, acceptances: r.acceptances + 1, lastAcceptance: { at: now, held: Math.max(0, held - 1) } };
      d = tick(state, now, r, Math.max(2, held), !(d?.paused ?? true));
      state = d.state;
      held = d.paused ? held + 1 : d.ceilings.normal;
      if (!d.paused && d.ceilings.normal >= PLAN) break;
    }
    // Assess
    expect(d?.ceilings.normal).toBe(PLAN);
    expect(ticks).toBeLessThanOrEqual(8);
  });
});

// ---- decide: the held test (parked) ---------------------------------------------------------------

describe('decide: a refusal holds the parked fleet while tasks wait (the held test)', () => {
  const TICK = 10_000;
  /** The helper's signals: solves of 10 s on average. */
  const MEAN_SOLVE_MS = governorSignals(T0).meanSolveMs ?? 0;
  const parkedCfg = (plan: number): GovernorConfig =>
    governorConfigFrom(resolveSettings({ tickMs: TICK, planThreads: plan, solveMode: 'park' }), {
      probeSubmissions: true,
    });
  const jsonTaskCfg = (plan: number): GovernorConfig =>
    governorConfigFrom(
      resolveSettings({
        tickMs: TICK,
        planThreads: plan,
        solveMode: 'park',
        solverProtocol: 'create-task',
        dialect: 'anti-captcha',
      }),
      { probeSubmissions: true },
    );
  /** A state whose estimate stands at the `own` threads a refusal left, with `budget` refusals to spend. */
  const heldState = (config: GovernorConfig, own: number, budget: number, seen: ThreadLedgerReading) =>
    withNeighbours(priceLearned(initialState(config, T0)), {
      ...initialEstimate(estimateShapeOf(config), T0),
      free: own,
      step: 1,
      budget,
      seen: { refusals: seen.refusals, acceptances: seen.acceptances },
    });
  const heldTick = (config: GovernorConfig, state: GovernorState, now: number, r: ThreadLedgerReading, backlog = 100) =>
    decide(
      governorSignals(now, { threadLedger: r }, { ceiling: r.held, enabled: true, inFlight: r.held, backlog }),
      state,
      config,
    );
  /** The fleet fills the `own` threads a refusal at T0 left; an acceptance of its own (below the count) followed. */
  const heldReading = (own: number, acceptances = 1000): ThreadLedgerReading =>
    reading({
      held: own,
      refusals: 10,
      acceptances,
      refusalRun: 0,
      lastRefusal: { at: T0, held: own },
      lastAcceptance: { at: T0 + 1, held: own - 1 },
    });

  const budgetOf = (state: GovernorState) => (state.overCap.neighbours as NeighbourEstimate).budget;
  /**
   * Ticks from a held test to the next: HELD_TEST_TICKS, or the horizon shared among the tests the
   * budget pays above a refused climb's reserve and those `room` threads of 10-s solves earn in it,
   * at most the refusal's hold-off, × the run's age ÷ HELD_TEST_RAMP_MS until that age (a short
   * hold is tested every HELD_TEST_TICKS ticks).
   */
  const spacingTicks = (budget: number, room: number, runAgeMs = HELD_TEST_RAMP_MS) => {
    const earned = (CLIMB_BUDGET_SHARE * room * HELD_TEST_HORIZON_MS) / MEAN_SOLVE_MS;
    const paid = Math.max(0, budget - REFUSALS_PER_PARKED_CLIMB) + earned;
    const share =
      Math.min(REFUSAL_HOLD_OFF_MS, HELD_TEST_HORIZON_MS / paid) * Math.min(1, runAgeMs / HELD_TEST_RAMP_MS);
    return Math.max(HELD_TEST_TICKS, Math.ceil(share / TICK - 1e-9));
  };

  /**
   * A 20-thread plan's fleet held at the 6 threads a refusal left (`heldReading(6)`, `budget` to
   * spend), ticked at tick numbers `k`: each test's submission is refused at the room's count, an
   * acceptance of the fleet's own threads follows it within the tick; `update` changes the ledger
   * between ticks, `testTicks` are the ticks that tested.
   */
  const refusedTests = (budget: number) => {
    const config = parkedCfg(20);
    let r = heldReading(6);
    let state = heldState(config, 6, budget, r);
    const testTicks: number[] = [];
    return {
      testTicks,
      update(change: (reading: ThreadLedgerReading) => ThreadLedgerReading) {
        r = change(r);
      },
      tick(k: number) {
        const at = T0 + k * TICK;
        const d = heldTick(config, state, at, r);
        state = d.state;
        if (d.liftHold === undefined) return;
        testTicks.push(k);
        r = { ...r, liftedAt: d.liftHold, refusals: r.refusals + 1, lastRefusal: { at: at + 5, held: 6 } };
        r = { ...r, acceptances: r.acceptances + 1, refusalRun: 0, lastAcceptance: { at: at + 9, held: 5 } };
      },
    };
  };

  it('opens one invocation more than the room and lifts the hold of the refusal that set it', () => {
    // Prepare: a 20-thread plan; others hold 14, a refusal 20 s ago holds the fleet to its 6.
    const config = parkedCfg(20);
    const r = heldReading(6);
    // Act
    const d = heldTick(config, heldState(config, 6, 5, r), T0 + 2 * TICK, r);
    // Assess
    expect(d.liftHold).toBe(T0);
    expect(d.ceilings.normal).toBe(7);
    expect(d.reason.code).toBe('OVER_CAP_PROBE');
    expect(d.probe).toBe(false);
  });

  it('tests a short hold every HELD_TEST_TICKS ticks on a small budget, and spreads the tests once the run is HELD_TEST_RAMP_MS old', () => {
    // Prepare: a 20-thread plan; others hold 14, a refusal holds the fleet to its 6 threads of
    // 10-s solves; a budget of 8 pays a test a minute over the horizon (6 above the reserve, 5.4
    // earned in it).
    const run = refusedTests(8);
    const { testTicks } = run;
    // Act: every test's submission is refused at the room's count, an acceptance of the fleet's
    // own threads follows it within the tick.
    for (let k = 2; k <= 30; k++) run.tick(k);
    // Assess: the first two tests HELD_TEST_TICKS apart (a neighbour that leaves within a tick or
    // two of the first test is found as before), the later ones further apart as the run ages, at
    // most the refusal's hold-off.
    expect(testTicks[1]! - testTicks[0]!).toBe(HELD_TEST_TICKS);
    const gaps = testTicks.slice(1).map((k, i) => k - testTicks[i]!);
    expect(Math.max(...gaps)).toBeGreaterThan(HELD_TEST_TICKS);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(REFUSAL_HOLD_OFF_MS / TICK);
    expect(gaps.at(-1)).toBeGreaterThanOrEqual(gaps[0]!);
  });

  it("tests a later hold every HELD_TEST_TICKS ticks again: a run of tests ends when its last test is more than a refusal's hold-off old, with no climb between", () => {
    // Prepare: a 20-thread plan; others hold 14, a refusal holds the fleet to its 6 threads of
    // 10-s solves, with a budget of 8 (its tests spread once their run is a minute old).
    const run = refusedTests(8);
    const { testTicks } = run;
    // Act: the first hold tested for two minutes (its run past its ramp)…
    for (let k = 2; k <= 14; k++) run.tick(k);
    const firstHold = testTicks.length;
    // …then the work thins out: the hold lapses, the fleet's acceptances come at 3 threads (it
    // fills nothing, so nothing climbs), for five minutes…
    for (let k = 15; k <= 45; k++) {
      run.update((r) => ({
        ...r,
        held: 3,
        acceptances: r.acceptances + 1,
        lastAcceptance: { at: T0 + k * TICK - 1, held: 3 },
      }));
      run.tick(k);
    }
    // …and a burst meets the neighbour again: refused at 6, an acceptance of its own after it.
    const again = T0 + 46 * TICK;
    run.update((r) => ({
      ...r,
      held: 6,
      refusals: r.refusals + 1,
      lastRefusal: { at: again, held: 6 },
      acceptances: r.acceptances + 1,
      lastAcceptance: { at: again + 1, held: 5 },
    }));
    for (let k = 47; k <= 60; k++) run.tick(k);
    // Assess: the first hold's run spread its tests; nothing was tested between the holds; the
    // later hold's first two tests come HELD_TEST_TICKS apart (a neighbour that leaves just after
    // its first test is found as quickly as in the first hold), not at the old run's spacing.
    const first = testTicks.slice(0, firstHold);
    expect(Math.max(...first.slice(1).map((k, i) => k - first[i]!))).toBeGreaterThan(HELD_TEST_TICKS);
    const later = testTicks.slice(firstHold);
    expect(later[0]).toBeGreaterThanOrEqual(47);
    expect(later[1]! - later[0]!).toBe(HELD_TEST_TICKS);
  });

  it("charges a refused test's refusal to the budget, but does not count it as a failed climb (the patient climb's wait does not double)", () => {
    // Prepare: the estimator held at 6 of 20 with a budget of 5; the held test this tick.
    const s: EstimateShape = { planCap: 20, spare: 1, floor: 2, tickMs: TICK, parked: true };
    let r = heldReading(6);
    const start: NeighbourEstimate = {
      ...initialEstimate(s, T0),
      free: 6,
      step: 1,
      budget: 5,
      seen: { refusals: 10, acceptances: 1000 },
    };
    const tested = updateEstimate(start, r, s, T0 + 2 * TICK, 0, true);
    expect(tested.lift).toBe(T0);
    expect(tested.estimate.free).toBe(7);
    // Act: the test's submission is refused at the room's count.
    r = { ...r, refusals: 11, refusalRun: 1, lastRefusal: { at: T0 + 2 * TICK + 500, held: 6 } };
    const after = updateEstimate(tested.estimate, r, s, T0 + 3 * TICK, 0, true).estimate;
    // Assess
    expect(after.budget).toBeCloseTo(4);
    expect(after.failed).toBeUndefined();
    expect(after.free).toBe(6);
  });

  it.each([
    ['no task waits', { backlog: 0 }],
    ['the budget cannot pay the test and a refused climb after it', { budget: REFUSALS_PER_PARKED_CLIMB + 0.5 }],
    ['no acceptance has followed the refusal (another refusal now would halve the room)', { run: 1 }],
    ['the fleet does not fill the room', { held: 3 }],
    ['the refusal is under a tick old', { at: T0 + TICK / 2 }],
    ['a climb or test came in the last HELD_TEST_TICKS ticks', { climbed: T0 + TICK }],
    ['the waiting design (its overshoots cost invocations)', { waiting: true }],
    ['the balance is under the halt level', { balance: 0.5 }],
    [
      "the JSON task API's watch asks each submission every few seconds and the fleet's own answers free a thread or more in the lease-freeing lag (10 threads on 10-s solves)",
      { room: 10, jsonTaskApi: true },
    ],
  ] as const)('does not test the hold when %s', (_why, change: Record<string, number | boolean>) => {
    // Prepare: a 20-thread plan; others hold 14, the refusal holds the fleet to 6.
    const base = change.jsonTaskApi === true ? jsonTaskCfg(20) : parkedCfg(20);
    const config = change.waiting === true ? { ...base, parked: false } : base;
    const own = typeof change.room === 'number' ? change.room : 6;
    const r = heldReading(own);
    const ledger: ThreadLedgerReading = {
      ...r,
      held: typeof change.held === 'number' ? change.held : r.held,
      refusalRun: typeof change.run === 'number' ? change.run : 0,
      ...(change.run !== undefined ? { lastAcceptance: { at: T0 - 1, held: own - 1 } } : {}),
    };
    const now = typeof change.at === 'number' ? change.at : T0 + 2 * TICK;
    let state = heldState(config, own, typeof change.budget === 'number' ? change.budget : 5, ledger);
    if (typeof change.climbed === 'number')
      state = withNeighbours(state, { ...(state.overCap.neighbours as NeighbourEstimate), climbedAt: change.climbed });
    const signals = governorSignals(
      now,
      { threadLedger: ledger, ...(typeof change.balance === 'number' ? { balance: change.balance } : {}) },
      {
        ceiling: own,
        enabled: true,
        inFlight: own,
        backlog: typeof change.backlog === 'number' ? change.backlog : 100,
      },
    );
    // Act
    const d = decide(signals, state, config);
    const six = heldReading(6);
    const control = heldTick(base, heldState(base, 6, 5, six), T0 + 2 * TICK, six);
    // Assess: the same tick without the change tests (the case is the change's, not another's).
    expect(control.liftHold).toBe(T0);
    expect(d.liftHold).toBeUndefined();
    expect(d.ceilings.normal).toBeLessThanOrEqual(own);
  });

  it('tests the hold of a fleet whose own answers free threads in the lease-freeing lag on res.php, its count dipping by as many under the room, no more', () => {
    // Prepare: a 100-thread plan; others hold 60, a refusal holds the fleet to its 40 threads of
    // 10-s solves: 4 answers a second, 4 threads freed at the solver before their leases are.
    const config = parkedCfg(100);
    expect(MEAN_SOLVE_MS).toBe(10_000);
    expect(lagThreads(40, MEAN_SOLVE_MS)).toBe(Math.ceil((40 * LEASE_FREEING_LAG_MS) / MEAN_SOLVE_MS));
    const lag = lagThreads(40, MEAN_SOLVE_MS);
    const tick = (held: number) => {
      const r = { ...heldReading(40), held };
      return heldTick(config, heldState(config, 40, 5, r), T0 + 2 * TICK, r);
    };
    // Act
    const filled = tick(40);
    const dipped = tick(40 - lag);
    const under = tick(40 - lag - 1);
    // Assess: filled, and dipped by the lag's threads, it opens one invocation more and lifts the
    // hold (before, neither: 40 threads × 1 s ≥ a 10-s solve); below that it does not fill the room.
    expect(filled.liftHold).toBe(T0);
    expect(filled.ceilings.normal).toBe(41);
    expect(dipped.liftHold).toBe(T0);
    expect(under.liftHold).toBeUndefined();
    expect(under.ceilings.normal).toBeLessThanOrEqual(40);
  });

  it("parked: finds threads a neighbour hands back while a refusal holds the fleet within a test's spacing + 2 ticks (HELD_TEST_TICKS while the budget pays a test that often over the horizon), at any plan size, and tests no more often than its budget pays", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 1000 }),
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 1, max: 60 }),
        fc.integer({ min: 0, max: 3 }),
        (plan, ownDrawn, budget, stay, accepts) => {
          const config = parkedCfg(plan);
          // Any room under the plan (res.php: before issue 17's twenty-third round, only rooms whose
          // own answers free under a thread in the lease-freeing lag, under 10 threads of 10-s solves).
          const own = 1 + (ownDrawn % (plan - 1));
          let r = heldReading(own);
          let state = heldState(config, own, budget, r);
          // Act 1: the neighbour stays `stay` ticks; each test's submission is refused at the room's
          // count, and `accepts` acceptances of the fleet's own threads follow it within the tick.
          let tests = 0;
          let tickAt = T0;
          let lastTest: number | undefined;
          let firstTest: number | undefined;
          for (let k = 1; k <= stay; k++) {
            tickAt = T0 + k * TICK;
            const d = heldTick(config, state, tickAt, r);
            state = d.state;
            expect(d.freeThreads).toBeLessThanOrEqual(Math.max(own + 1, capFloor(config)));
            if (d.liftHold === undefined) continue;
            tests++;
            // Never sooner than the spacing the budget pays for at the run's age (HELD_TEST_TICKS at least).
            firstTest ??= tickAt;
            if (lastTest !== undefined)
              expect(tickAt - lastTest).toBeGreaterThanOrEqual(
                spacingTicks(budgetOf(state), own, tickAt - firstTest) * TICK,
              );
            lastTest = tickAt;
            expect(d.liftHold).toBe(r.lastRefusal?.at);
            r = {
              ...r,
              liftedAt: d.liftHold,
              refusals: r.refusals + 1,
              refusalRun: 1,
              lastRefusal: { at: tickAt + 5, held: own },
            };
            if (accepts > 0)
              r = {
                ...r,
                acceptances: r.acceptances + accepts,
                refusalRun: 0,
                lastAcceptance: { at: tickAt + 9, held: own - 1 },
              };
          }
          // Assess 1: each refused test was paid for (the budget, and what the acceptances since
          // earned), at most one every HELD_TEST_TICKS ticks.
          const earned = CLIMB_BUDGET_SHARE * (r.acceptances - 1000);
          // A test leaves the budget a refused climb's worth: at most budget − REFUSALS_PER_PARKED_CLIMB tests.
          expect(tests).toBeLessThanOrEqual(Math.max(0, Math.floor(budget + earned) - REFUSALS_PER_PARKED_CLIMB));
          expect(tests).toBeLessThanOrEqual(Math.ceil(stay / HELD_TEST_TICKS));
          if (budget + earned - tests < REFUSALS_PER_PARKED_CLIMB + 1 || accepts === 0) return;
          // Act 2: the neighbour leaves; the next test's submission is accepted at the room's count,
          // and from then on the fleet's invocations fill each ceiling and are accepted.
          const floor = capFloor(config);
          const turn = spacingTicks(budgetOf(state), own);
          const bound = own >= floor ? turn + 2 : turn + Math.ceil(Math.log2(plan)) + 3;
          let found = 0;
          let lifted = false;
          for (let k = 1; k <= bound + 4 && found === 0; k++) {
            const at = tickAt + k * TICK;
            const d = heldTick(config, state, at, r);
            state = d.state;
            if (d.freeThreads >= plan) found = k;
            else if (d.liftHold !== undefined) {
              lifted = true;
              r = { ...r, liftedAt: d.liftHold };
              r = { ...r, acceptances: r.acceptances + 1, refusalRun: 0, lastAcceptance: { at: at + 5, held: own } };
            } else if (lifted) {
              const held = Math.max(own, d.freeThreads - 1);
              r = { ...r, held, acceptances: r.acceptances + 1, lastAcceptance: { at: at + 5, held } };
            }
          }
          // Assess 2: the plan within a test's turn, the tick that sees its acceptance and the next
          // (from fewer threads than the mapping's floor, a starved spell's end: filled levels double).
          expect(found).toBeGreaterThan(0);
          expect(found).toBeLessThanOrEqual(bound);
        },
      ),
      { numRuns: 400 },
    );
  });
});

// ---- properties -------------------------------------------------------------------------------

const eventArb = fc.oneof(
  fc.record({ kind: fc.constant('refused' as const), held: fc.nat(PLAN + 5) }),
  fc.record({
    kind: fc.constant('accepted' as const),
    held: fc.nat(PLAN + 5),
    count: fc.integer({ min: 1, max: 200 }),
  }),
  fc.record({ kind: fc.constant('quiet' as const) }),
);

/** A state whose estimator stands at `estimate` (an earlier tick's). */
function withNeighbours(state: GovernorState, estimate: NeighbourEstimate): GovernorState {
  return { ...state, overCap: { ...state.overCap, effectiveCap: estimate.free, neighbours: estimate } };
}

describe('decide: a plan changed under a saved estimate', () => {
  /** A config on a plan of `threads`. */
  const on = (threads: number) =>
    governorConfigFrom(resolveSettings({ tickMs: 1000, planThreads: threads }), { probeSubmissions: true });
  const quiet = (state: GovernorState, config: GovernorConfig, now: number) =>
    decide(
      governorSignals(now, { threadLedger: reading({}) }, { ceiling: 10, enabled: true, backlog: 0 }),
      state,
      config,
    );

  it('moves with the plan, keeping what others were seen to hold (a raised plan is used at once, without demand)', () => {
    // Before: a fleet redeployed from 10 to 50 threads kept its saved estimate of 10 (read as a
    // refusal's) and stayed at 10 for good while no task came; 10 → 600 the same.
    const ten = quiet(initialState(on(10), T0), on(10), T0).state;
    expect(ten.overCap.neighbours).toMatchObject({ free: 10, planCap: 10 });
    const fifty = quiet(ten, on(50), T0 + 1000);
    expect(fifty.state.overCap.neighbours).toMatchObject({ free: 50, planCap: 50 });
    expect(fifty.state.overCap.effectiveCap).toBe(50);
    // Others seen holding 4 of 20: on 50 they still hold 4; on 6, 2 are left to the fleet.
    const seen: GovernorState = {
      ...ten,
      overCap: {
        ...ten.overCap,
        neighbours: {
          ...(ten.overCap.neighbours as NeighbourEstimate),
          free: 16,
          planCap: 20,
          seen: { refusals: 3, acceptances: 40 },
        },
      },
    };
    expect(quiet(seen, on(50), T0 + 2000).state.overCap.neighbours).toMatchObject({ free: 46, planCap: 50 });
    expect(quiet(seen, on(6), T0 + 2000).state.overCap.neighbours).toMatchObject({ free: 2, planCap: 6 });
  });

  it('reads a state saved before the plan was kept: never refused, its estimate is its old plan', () => {
    const ten = quiet(initialState(on(10), T0), on(10), T0).state;
    const { planCap: _dropped, ...legacy } = ten.overCap.neighbours as NeighbourEstimate;
    const saved: GovernorState = { ...ten, overCap: { ...ten.overCap, neighbours: legacy } };
    expect(quiet(saved, on(600), T0 + 1000).state.overCap.neighbours).toMatchObject({ free: 600, planCap: 600 });
    // Refused once, what the estimate knew is kept (within the plan): no way to tell the old plan.
    const refused: GovernorState = {
      ...saved,
      overCap: { ...saved.overCap, neighbours: { ...legacy, free: 7, seen: { refusals: 1, acceptances: 9 } } },
    };
    expect(quiet(refused, on(600), T0 + 1000).state.overCap.neighbours).toMatchObject({ free: 7, planCap: 600 });
    expect(quiet(refused, on(5), T0 + 1000).state.overCap.neighbours).toMatchObject({ free: 5, planCap: 5 });
  });
});

describe('decide: a halted fleet keeps the refusals’ count', () => {
  // Between the pause ($0.10) and the halt ($1) levels: no scale-up until funded.
  const HALTED = 0.9;
  const run2 = (at: number, held: number) =>
    reading({
      held,
      refusals: 2,
      refusalRun: 2,
      acceptances: 50,
      lastRefusal: { at, held },
      lastAcceptance: { at: at - 500, held: held + 1 },
    });
  const at12 = (now: number, ledger: ThreadLedgerReading, balance: number, state: GovernorState, ceiling = 12) =>
    decide(
      governorSignals(
        now,
        { threadLedger: ledger, balance },
        { ceiling, enabled: true, inFlight: ledger.held, backlog: 400 },
      ),
      state,
      cfg,
    );

  it('halved by a run of refusals only while it lasts when funded; halted, held at the newest refusal’s count instead', () => {
    // Prepare: a fleet at 12 threads; a neighbour steps up and two submissions are refused in a row at 12 held.
    const state = withBudget(initialEstimate({ ...shape, parked: true }, T0), 0);
    const base = withNeighbours(priceLearned(initialState(cfg, T0)), {
      ...state,
      free: 12,
      seen: { refusals: 0, acceptances: 50 },
    });
    // Act
    const funded = at12(T0 + 1000, run2(T0 + 900, 12), 50, base);
    const halted = at12(T0 + 1000, run2(T0 + 900, 12), HALTED, base);
    // Assess: funded, the run halves it (an acceptance lifts it back: the next test); halted, the
    // ceiling could never come back, so it stays at the count the refusals show.
    expect(funded.ceilings.normal).toBe(6);
    expect(halted.reason.code).toBe('HALT_LOW_BALANCE');
    expect(halted.ceilings.normal).toBe(12);
    expect(halted.state.overCap.effectiveCap).toBe(12);
  });

  it('follows the refusals down while halted, never up', () => {
    // Prepare
    const base = withNeighbours(priceLearned(initialState(cfg, T0)), {
      ...initialEstimate({ ...shape, parked: true }, T0),
      free: 12,
      seen: { refusals: 0, acceptances: 50 },
    });
    // Act: tick 1, a run at 12 held; tick 2, an acceptance at 9 held (the run ends); tick 3, refused at 10 held.
    const t1 = at12(T0 + 1000, run2(T0 + 900, 12), HALTED, base);
    const accepted: ThreadLedgerReading = {
      ...run2(T0 + 900, 12),
      held: 9,
      acceptances: 51,
      refusalRun: 0,
      lastAcceptance: { at: T0 + 1500, held: 9 },
    };
    const t2 = at12(T0 + 2000, accepted, HALTED, t1.state, t1.ceilings.normal);
    const refused: ThreadLedgerReading = {
      ...accepted,
      held: 10,
      refusals: 3,
      refusalRun: 1,
      lastRefusal: { at: T0 + 2500, held: 10 },
    };
    const t3 = at12(T0 + 3000, refused, HALTED, t2.state, t2.ceilings.normal);
    // Assess: 12, 12, then the newest refusal's 10; never above where it stood.
    expect([t1.ceilings.normal, t2.ceilings.normal, t3.ceilings.normal]).toEqual([12, 12, 10]);
  });

  it('still starves (mappings disabled, one probe a tick) when others leave the halted fleet nothing', () => {
    // Act: refused while the fleet held nothing, halted.
    const d = at12(
      T0 + 1000,
      reading({ held: 0, refusals: 3, refusalRun: 3, lastRefusal: { at: T0 + 900, held: 0 } }),
      HALTED,
      initialState(cfg, T0),
    );
    // Assess
    expect(d.reason.code).toBe('WAIT_FOR_THREADS');
    expect(d.paused).toBe(true);
  });
});

describe('the estimator: properties', () => {
  it('never exceeds the plan nor the newest refusal’s count (half of it in a run), and rises only on an acceptance', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { minLength: 1, maxLength: 60 }), (events) => {
        let e = initialEstimate(shape, T0);
        let r = reading({ refusalRun: 0 });
        events.forEach((event, i) => {
          const at = T0 + i * 1000;
          if (event.kind === 'refused')
            r = {
              ...r,
              refusals: r.refusals + 1,
              refusalRun: (r.refusalRun ?? 0) + 1,
              lastRefusal: { at, held: event.held },
            };
          if (event.kind === 'accepted')
            r = {
              ...r,
              acceptances: r.acceptances + event.count,
              refusalRun: 0,
              lastAcceptance: { at, held: event.held },
            };
          const before = e.free;
          e = updateEstimate(e, r, shape, at).estimate;
          expect(e.free).toBeLessThanOrEqual(PLAN);
          expect(e.free).toBeGreaterThanOrEqual(0);
          if (event.kind !== 'accepted') expect(e.free).toBeLessThanOrEqual(before);
          if (event.kind === 'refused') {
            const count = (r.refusalRun ?? 0) >= 2 ? Math.floor(event.held / 2) : event.held;
            expect(e.free).toBeLessThanOrEqual(Math.min(PLAN, count));
          }
          // While the newest refusal holds the consumers (no acceptance at or above its count), never above it.
          const refusal = r.lastRefusal;
          if (
            refusal !== undefined &&
            at - refusal.at <= REFUSAL_HOLD_OFF_MS &&
            !(r.refusalRun === 0 && (r.lastAcceptance?.held ?? -1) >= refusal.held)
          )
            expect(e.free).toBeLessThanOrEqual(refusal.held);
        });
      }),
      { numRuns: 2000 },
    );
  });

  it("finds a neighbour's departure within log2(plan) + 3 ticks of demand, however long it held the plan", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 1000 }),
        fc.integer({ min: 1, max: 20_000 }),
        fc.integer({ min: 300, max: 2000 }),
        (plan, holdTicks, perThread) => {
          // A fleet that ran a while before (300 or more solves per plan thread) has the budget for doubling steps.
          const acceptancesBefore = perThread * plan;
          // Prepare: the fleet ran (earning its budget), then others took the whole plan for holdTicks ticks.
          const s: EstimateShape = { planCap: plan, spare: 1, floor: 2, tickMs: 10_000 };
          let e = initialEstimate(s, T0);
          let r = reading({ acceptances: acceptancesBefore, lastAcceptance: { at: T0, held: plan - 1 } });
          e = updateEstimate(e, r, s, T0).estimate;
          const gone = T0 + holdTicks * 10_000;
          r = { ...r, refusals: 1, lastRefusal: { at: T0 + 10_000, held: 0 } };
          e = updateEstimate(e, r, s, T0 + 10_000).estimate;
          // Act: after it leaves, each tick's acceptances come with the fleet at its estimate.
          let ticks = 0;
          while (e.free < plan && ticks < 100) {
            ticks++;
            r = {
              ...r,
              acceptances: r.acceptances + e.free + 1,
              lastAcceptance: { at: gone + ticks * 10_000, held: Math.max(0, e.free - 1) },
            };
            e = updateEstimate(e, r, s, gone + ticks * 10_000).estimate;
          }
          // Assess
          expect(e.free).toBe(plan);
          expect(ticks).toBeLessThanOrEqual(Math.ceil(Math.log2(plan)) + 3);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("parked: finds a departed neighbour's threads within two ticks at any plan size once the budget pays one refused climb, however few the fleet's acceptances (a climb, then the whole plan)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 1000 }),
        fc.double({ min: 0.05, max: 0.95, noNaN: true }),
        fc.integer({ min: 0, max: 400 }),
        (plan, othersShare, extra) => {
          // Prepare: others held most of the plan, the parked fleet ran on what they left (at least
          // the floor) with just enough acceptances for one refused climb's budget, then they left.
          const s: EstimateShape = { planCap: plan, spare: 1, floor: 2, tickMs: 10_000, parked: true };
          const own = Math.max(s.floor, plan - Math.round(plan * othersShare));
          const acceptances = Math.ceil(REFUSALS_PER_PARKED_CLIMB / CLIMB_BUDGET_SHARE) + extra;
          let e: NeighbourEstimate = {
            ...initialEstimate(s, T0),
            free: own,
            step: 1,
            seen: { refusals: 1, acceptances: 0 },
          };
          let r = reading({
            acceptances,
            refusals: 1,
            lastRefusal: { at: T0 - REFUSAL_HOLD_OFF_MS - 1, held: own },
            lastAcceptance: { at: T0, held: own - 1 },
          });
          e = updateEstimate(e, r, s, T0).estimate;
          // Act: after they leave, each tick's acceptances come with the fleet at its estimate.
          let ticks = 0;
          while (e.free < plan && ticks < 100) {
            ticks++;
            const at = T0 + ticks * 10_000;
            r = { ...r, acceptances: r.acceptances + 1, lastAcceptance: { at, held: Math.max(0, e.free - 1) } };
            e = updateEstimate(e, r, s, at).estimate;
          }
          // Assess: the first climb (at T0) tested one thread more; the one that followed took the
          // plan (before FOLLOWING_CLIMB_TICKS, doubling steps: log₂(plan) + 3 ticks at most)
          expect(e.free).toBe(plan);
          expect(ticks).toBeLessThanOrEqual(2);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('parked: the climb after one the fleet filled takes the plan whatever the budget owes (a throttled fleet earns the next one in tens of minutes)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 1000 }),
        fc.double({ min: 0.1, max: 0.9, noNaN: true }),
        fc.double({ min: -10, max: 1.9, noNaN: true }),
        fc.integer({ min: 1, max: FOLLOWING_CLIMB_TICKS * 10 }),
        (plan, share, budget, afterSeconds) => {
          // Prepare: a patient (or budgeted) climb took the estimate one step up from what a
          // neighbour left; the budget is in debt, or short of a refused climb's cost.
          const s: EstimateShape = { planCap: plan, spare: 1, floor: 2, tickMs: 10_000, parked: true };
          const level = Math.min(plan - 1, Math.max(3, Math.round(plan * share)));
          const e: NeighbourEstimate = {
            ...initialEstimate(s, T0),
            free: level,
            step: 2,
            budget,
            standing: level - 1,
            climbedAt: T0 - afterSeconds * 1000,
            seen: { refusals: 1, acceptances: 500 },
          };
          // Act: the fleet fills the level it climbed to, without a refusal (others handed threads back).
          const r = reading({
            acceptances: 501,
            refusals: 1,
            lastRefusal: { at: T0 - REFUSAL_HOLD_OFF_MS - 60_000, held: level - 1 },
            lastAcceptance: { at: T0, held: level - 1 },
          });
          const { estimate, change } = updateEstimate(e, r, s, T0);
          // Assess: before, it waited for the budget (a 4-thread plan at 3 of 4 for 14 minutes).
          expect(change).toBe('up');
          expect(estimate.free).toBe(plan);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('parked: a climb long after the last one the fleet filled takes its step, not the plan (a test, not a jump)', () => {
    const s: EstimateShape = { ...shape, parked: true, tickMs: 10_000 };
    const e = { ...withBudget(initialEstimate(s, T0), 10), free: 6, step: 1, climbedAt: T0 - 4 * 10_000 };
    const { estimate } = updateEstimate(e, reading({ acceptances: 1, lastAcceptance: { at: T0, held: 5 } }), s, T0);
    expect(estimate.free).toBe(7);
    const soon = { ...e, climbedAt: T0 - FOLLOWING_CLIMB_TICKS * 10_000 };
    expect(
      updateEstimate(soon, reading({ acceptances: 1, lastAcceptance: { at: T0, held: 5 } }), s, T0).estimate.free,
    ).toBe(PLAN);
    // The waiting design keeps its doubling steps.
    const waiting = { ...soon };
    expect(
      updateEstimate(
        waiting,
        reading({ acceptances: 1, lastAcceptance: { at: T0, held: 5 } }),
        { ...s, parked: false },
        T0,
      ).estimate.free,
    ).toBeLessThan(PLAN);
  });

  it('finds what a neighbour that held the whole plan hands back within log2 of it + 3 ticks, whatever the budget and the failures before, at one refusal at most', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 1000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: -8, max: 3.9, noNaN: true }),
        fc.integer({ min: 0, max: 8 }),
        (plan, share, budget, failures) => {
          // Prepare: others hold the whole plan (starved: the estimate at 0, its step reset by the
          // refusals), the budget cannot pay for a climb, `failures` climbs failed before the spell.
          const s: EstimateShape = { planCap: plan, spare: 1, floor: 2, tickMs: 10_000 };
          const back = Math.max(1, Math.round(plan * share));
          const failed = failures > 0 ? { count: failures, level: plan } : undefined;
          let e: NeighbourEstimate = {
            ...initialEstimate(s, T0),
            free: 0,
            step: 1,
            budget,
            seen: { refusals: 40, acceptances: 1600 },
            ...(failed ? { failed } : {}),
          };
          let r = reading({
            acceptances: 1600,
            refusals: 40,
            refusalRun: 0,
            lastRefusal: { at: T0 - REFUSAL_HOLD_OFF_MS - 1, held: 0 },
          });
          // Act: the neighbour hands `back` threads back; each tick the fleet fills its estimate
          // where the threads are free (an acceptance), or is refused where they are not.
          let ticks = 0;
          let refusals = 0;
          while (e.free < back && ticks < 100) {
            ticks++;
            const at = T0 + ticks * s.tickMs;
            if (e.free <= back)
              r = {
                ...r,
                acceptances: r.acceptances + Math.max(1, e.free),
                refusalRun: 0,
                lastAcceptance: { at, held: Math.max(0, e.free - 1) },
              };
            e = updateEstimate(e, r, s, at).estimate;
            if (e.free > back) {
              refusals++;
              r = { ...r, refusals: r.refusals + 1, refusalRun: 1, lastRefusal: { at: at + 1, held: back } };
              e = updateEstimate(e, r, s, at + 1).estimate;
            }
          }
          // Assess
          expect(e.free).toBe(back);
          expect(ticks).toBeLessThanOrEqual(Math.ceil(Math.log2(back + 1)) + 3);
          expect(refusals).toBeLessThanOrEqual(1);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('parked: ends a starved spell where it began: the first accepted probe restores the level the fleet stood at, one refusal brings it to what was handed back', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 1000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (plan, standShare, backShare) => {
          const s: EstimateShape = { planCap: plan, spare: 1, floor: 2, tickMs: 10_000, parked: true };
          const stood = Math.max(s.floor, Math.round(plan * standShare));
          const back = Math.max(1, Math.round(plan * backShare));
          // Prepare: the fleet stood at `stood` (an acceptance there), then others took the whole
          // plan: a run of refusals left the estimate at 0.
          let r = reading({ acceptances: 500, lastAcceptance: { at: T0, held: 1 } });
          let e = updateEstimate(
            { ...initialEstimate(s, T0), free: stood, seen: { refusals: 0, acceptances: 499 } },
            r,
            s,
            T0,
          ).estimate;
          expect(e.standing).toBe(stood);
          r = { ...r, refusals: 30, refusalRun: 30, lastRefusal: { at: T0 + 1, held: 0 } };
          e = updateEstimate(e, r, s, T0 + 1).estimate;
          expect(e.free).toBe(0);
          // Act: past the refusal's hold-off, a starved probe is accepted (`back` threads came back).
          const at = T0 + REFUSAL_HOLD_OFF_MS + s.tickMs;
          r = { ...r, acceptances: r.acceptances + 1, refusalRun: 0, lastAcceptance: { at, held: 0 } };
          const waiting = updateEstimate(e, r, { ...s, parked: false }, at).estimate;
          e = updateEstimate(e, r, s, at).estimate;
          // Assess: the waiting design climbs from one thread (its overshoots cost up to four
          // refusals an invocation), the parked design is back at the level it stood at (or one
          // more thread, if that was below it)…
          expect(waiting.free).toBe(1);
          expect(e.free).toBe(Math.min(plan, Math.max(1, stood)));
          // …and where fewer came back, the first refusal brings it down to them.
          if (back < e.free) {
            r = { ...r, refusals: r.refusals + 1, refusalRun: 1, lastRefusal: { at: at + 1, held: back } };
            e = updateEstimate(e, r, s, at + 1).estimate;
            expect(e.free).toBe(back);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it("finds a departed neighbour's first thread within the patient wait, whatever a throttled fleet's budget", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 1000 }),
        fc.double({ min: 0.01, max: 0.5, noNaN: true }),
        fc.double({ min: REFUSALS_PER_EXCESS_INVOCATION - CLIMB_BORROW_LIMIT, max: 3.9, noNaN: true }),
        fc.integer({ min: 0, max: 8 }),
        (plan, share, budget, failures) => {
          // Prepare: others held all but `free` threads (at least the floor, at most half the plan)
          // and a refusal at T0 said so; the fleet's budget cannot pay for a climb; `failures`
          // climbs failed since it last filled the level above; 1 600 acceptances so far (the
          // borrowing at its limit); a backlog of 100 solves a plan thread. The neighbour has left.
          const s: EstimateShape = { planCap: plan, spare: 1, floor: 2, tickMs: 10_000 };
          const free = Math.max(2, Math.floor(plan * share));
          const acceptances = 1600;
          const failed = failures > 0 ? { count: failures, level: free + 1 } : undefined;
          let e: NeighbourEstimate = {
            ...initialEstimate(s, T0),
            free,
            budget,
            climbedAt: T0 - 1,
            seen: { refusals: 1, acceptances },
            ...(failed ? { failed } : {}),
          };
          const backlog = 100 * plan * 10_000;
          // Act: every tick an acceptance finds the fleet at its estimate.
          let ticks = 0;
          while (e.free <= free && ticks < 200) {
            ticks++;
            const at = T0 + ticks * s.tickMs;
            const r = reading({
              acceptances: acceptances + ticks,
              lastAcceptance: { at, held: free - 1 },
              refusals: 1,
              lastRefusal: { at: T0, held: free },
            });
            e = updateEstimate(e, r, s, at, backlog).estimate;
          }
          // Assess: after the refusal's hold-off and the patient wait, doubled per failure (at most 4 times).
          const wait = PATIENT_CLIMB_TICKS * 2 ** Math.min(failures, 4);
          expect(e.free).toBeGreaterThan(free);
          expect(ticks).toBeLessThanOrEqual(Math.max(REFUSAL_HOLD_OFF_MS / s.tickMs, wait) + 1);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('keeps decide within the plan whatever the ledger says', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { minLength: 1, maxLength: 30 }), (events) => {
        let state = initialState(cfg, T0);
        let r = reading({});
        let ceiling = PLAN;
        let enabled = true;
        events.forEach((event, i) => {
          const at = T0 + i * 1000;
          if (event.kind === 'refused') r = { ...r, refusals: r.refusals + 1, lastRefusal: { at, held: event.held } };
          if (event.kind === 'accepted')
            r = { ...r, acceptances: r.acceptances + event.count, lastAcceptance: { at, held: event.held } };
          const d = tick(state, at, r, ceiling, enabled);
          const total = (d.enabled.normal ? d.ceilings.normal : 0) + (d.enabled.high ? d.ceilings.high : 0);
          expect(total).toBeLessThanOrEqual(planCap(cfg));
          expect(d.probe ? d.paused : true).toBe(true);
          state = d.state;
          ceiling = d.ceilings.normal;
          enabled = d.enabled.normal;
        });
      }),
      { numRuns: 1000 },
    );
  });
});
