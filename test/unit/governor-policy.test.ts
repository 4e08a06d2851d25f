import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  capFloor,
  ceilingFor,
  decide,
  governorConfigFrom,
  initialState,
  planCap,
} from '../../functions/core/governor/policy.js';
import type {
  GovernorConfig,
  GovernorSignals,
  GovernorState,
  LaneSignals,
  PauseReason,
} from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { balanceReadBefore, governorSignals, laneSignals, priceLearned, T0 } from '../helpers/governor.js';
import { laneArb, maybe } from '../helpers/governor-arbitraries.js';

function signals(overrides: Partial<GovernorSignals> = {}, normal: Partial<LaneSignals> = {}): GovernorSignals {
  return governorSignals(T0 + 10_000, overrides, normal);
}

function config(
  overrides: Partial<GovernorConfig> = {},
  fleet: Parameters<typeof resolveSettings>[0] = { planThreads: 8 },
): GovernorConfig {
  return governorConfigFrom(resolveSettings({ tickMs: 1000, ...fleet }), overrides);
}

const total = (d: ReturnType<typeof decide>) =>
  (d.enabled.normal ? d.ceilings.normal : 0) + (d.enabled.high ? d.ceilings.high : 0);

/** The state with some of its groups replaced (tests build earlier ticks' states this way). */
function withState(
  base: GovernorState,
  groups: {
    overCap?: Partial<GovernorState['overCap']>;
    spend?: Partial<GovernorState['spend']>;
    probe?: Partial<GovernorState['probe']>;
  },
): GovernorState {
  return {
    ...base,
    overCap: { ...base.overCap, ...groups.overCap },
    spend: { ...base.spend, ...groups.spend },
    probe: { ...base.probe, ...groups.probe },
  };
}

describe('decide: the free threads', () => {
  const cfg = config();
  const state0 = initialState(cfg, T0);

  it('starts at the free threads at once, not trailing demand', () => {
    // Prepare: a small current ceiling and a fresh backlog.
    const tick = signals({}, { ceiling: 2, inFlight: 2, backlog: 300 });
    // Act
    const d = decide(tick, state0, cfg);
    // Assess
    expect(d.reason.code).toBe('FREE_THREADS');
    expect(d.ceilings.normal).toBe(8);
    expect(d.enabled.normal).toBe(true);
    expect(d.paused).toBe(false);
  });

  it('subtracts reserved threads and divides by tasks per invocation', () => {
    // Prepare
    const c = config({}, { planThreads: 50, reservedThreads: 10, tasksPerInvocation: 3 });
    // Act
    const d = decide(signals({}, { ceiling: 2 }), initialState(c, T0), c);
    // Assess
    expect(d.ceilings.normal).toBe(13); // ⌊40 / 3⌋
    expect(d.ceilings.normal * 3).toBeLessThanOrEqual(40);
    expect(d.freeThreads).toBe(39);
  });

  it('stays at the free threads while idle and says so', () => {
    // Act
    const d = decide(signals({}, { backlog: 0, inFlight: 0, arrivalRate: 0, ceiling: 8 }), state0, cfg);
    // Assess
    expect(d.reason.code).toBe('IDLE');
    expect(d.ceilings.normal).toBe(8);
  });
});

describe('decide: halt on a low balance', () => {
  const cfg = config();
  const state0 = priceLearned(initialState(cfg, T0));
  /** The crossing (ceiling 5 of the 8 free, 3 in flight), a dip in use, then a backlog: the three halted ticks. */
  const halted = () => {
    const crossing = decide(signals({ balance: 0.5 }, { ceiling: 5, inFlight: 3 }), state0, cfg);
    const dip = decide(signals({ now: T0 + 20_000, balance: 0.45 }, { ceiling: 5, inFlight: 1 }), crossing.state, cfg);
    const up = decide(
      signals({ now: T0 + 30_000, balance: 0.4 }, { ceiling: 5, inFlight: 5, backlog: 500 }),
      dip.state,
      cfg,
    );
    return { crossing, dip, up };
  };

  it('freezes the ceiling where it stands at the crossing, not at the use (an idle ceiling costs nothing)', () => {
    // Act
    const { crossing } = halted();
    // Assess
    expect(crossing.reason.code).toBe('HALT_LOW_BALANCE');
    expect(crossing.ceilings.normal).toBe(5);
    expect(crossing.state.spend.haltCeiling).toBe(5);
  });

  it('does not ratchet the hold down on a dip in use', () => {
    // Act
    const { dip } = halted();
    // Assess
    expect(dip.ceilings.normal).toBe(5);
    expect(dip.reason.message).toMatch(/held/);
  });

  it('does not raise the hold on a backlog', () => {
    // Act
    const { up } = halted();
    // Assess: 8 threads are free, the hold stays at 5.
    expect(up.ceilings.normal).toBe(5);
    expect(up.reason.message).toMatch(/halt/i);
  });

  it('holds where the ceiling stands, not at 0 or the minimum, when nothing is in flight at the crossing', () => {
    // Act
    const low = decide(signals({ balance: 0.5 }, { ceiling: 4, inFlight: 0 }), state0, cfg);
    // Assess
    expect(low.ceilings.normal).toBe(4);
  });

  it('goes back to the free threads and forgets the hold when topped up over the halt level', () => {
    // Prepare
    const { up } = halted();
    // Act
    const topped = decide(signals({ now: T0 + 40_000, balance: 5 }, { ceiling: 5 }), up.state, cfg);
    // Assess
    expect(topped.ceilings.normal).toBe(8);
    expect(topped.state.spend.haltCeiling).toBeUndefined();
  });

  describe('with no price per solve learned yet (a fleet that starts under the halt level)', () => {
    const fresh = initialState(cfg, T0);

    it('holds the minimum, not the ceiling that stands, and says it waits for the price', () => {
      // Act: the mappings stand at the whole plan (8), 300 tasks wait, $0.05 above the pause level.
      const d = decide(signals({ balance: 0.15 }, { ceiling: 8, inFlight: 0, backlog: 300 }), fresh, cfg);
      // Assess
      expect(d.paused).toBe(false);
      expect(d.reason.code).toBe('HALT_LOW_BALANCE');
      expect(total(d)).toBe(2);
      expect(d.state.spend.haltCeiling).toBe(2);
      expect(d.reason.message).toMatch(/minimum until the price per solve is learned/);
    });

    it('lowers a hold taken before the price was learned to the minimum', () => {
      // Prepare: a hold of 5 in the state, no price.
      const held = withState(fresh, { spend: { haltCeiling: 5 } });
      // Act
      const d = decide(signals({ balance: 0.5 }, { ceiling: 5, inFlight: 3, backlog: 40 }), held, cfg);
      // Assess
      expect(total(d)).toBe(2);
    });

    it('an account told its price (an overflow provider’s list price) is frozen where it stands, as before', () => {
      // Prepare
      const told = config({ priceHintUsd: 0.003 });
      // Act
      const d = decide(
        signals({ balance: 0.5 }, { ceiling: 5, inFlight: 3, backlog: 40 }),
        initialState(told, T0),
        told,
      );
      // Assess
      expect(total(d)).toBe(5);
      expect(d.reason.message).toMatch(/frozen where it stands/);
    });

    it('is unchanged above the halt level: a fleet with no price starts at the free threads', () => {
      // Act
      const d = decide(signals({ balance: 5 }, { ceiling: 2, inFlight: 0, backlog: 300 }), fresh, cfg);
      // Assess
      expect(total(d)).toBe(8);
    });

    it('never rises under the halt level once the price is learned, whatever the use and backlog (property)', () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 2, max: 40 }),
          fc.integer({ min: 2, max: 40 }),
          fc.array(fc.record({ inFlight: fc.nat(40), backlog: fc.nat(5_000) }), { minLength: 2, maxLength: 12 }),
          fc.integer({ min: 1, max: 11 }),
          (plan, standing, ticks, learnedAt) => {
            const c = config({}, { planThreads: plan });
            let state = initialState(c, T0);
            let ceiling = Math.min(plan, standing);
            ticks.forEach((t, i) => {
              // The first tick has no price; it comes to be known at a later one (or never, within the run).
              if (i === learnedAt) state = priceLearned(state, 0.002);
              const sig = signals(
                { now: T0 + (i + 1) * 1000, balance: 0.9 - i * 1e-6 },
                { ceiling, inFlight: Math.min(t.inFlight, ceiling), backlog: t.backlog },
              );
              const d = decide(sig, state, c);
              expect(d.paused).toBe(false);
              expect(total(d)).toBe(2);
              state = d.state;
              ceiling = d.ceilings.normal;
            });
          },
        ),
        { numRuns: 300 },
      );
    });
  });
});

describe('decide: pause on a low balance', () => {
  const cfg = config();
  const state0 = initialState(cfg, T0);
  /** Paused at $0.05, then still low a second later. */
  const stillPaused = () => {
    const paused = decide(signals({ balance: 0.05 }), state0, cfg);
    const still = decide(signals({ now: T0 + 11_000, balance: 0.05 }, { enabled: false }), paused.state, cfg);
    return { paused, still };
  };

  it('pauses under the pause level: every lane disabled', () => {
    // Act
    const { paused } = stillPaused();
    // Assess
    expect(paused.paused).toBe(true);
    expect(paused.enabled).toEqual({ normal: false, high: false });
    expect(paused.reason.code).toBe('PAUSE_LOW_BALANCE');
  });

  it('stays paused while the balance stays low', () => {
    // Act
    const { still } = stillPaused();
    // Assess
    expect(still.paused).toBe(true);
  });

  it('resumes at the free threads on the first read over the halt level (no cooldown, no doubling)', () => {
    // Prepare
    const { still } = stillPaused();
    // Act
    const resumed = decide(signals({ now: T0 + 12_000, balance: 20 }, { enabled: false }), still.state, cfg);
    // Assess
    expect(12_000 - 10_000).toBeLessThan(cfg.probeCooldownMs);
    expect(resumed.paused).toBe(false);
    expect(resumed.reason.code).toBe('PROBE_RESUME');
    expect(resumed.ceilings.normal).toBe(8);
    expect(resumed.state.probe.recovery).toBeUndefined();
  });

  it('resumes at the minimum with scaling halted when topped up over the pause level only', () => {
    // Prepare
    const { still } = stillPaused();
    // Act
    const part = decide(signals({ now: T0 + 12_000, balance: 0.5 }, { enabled: false }), still.state, cfg);
    const next = decide(
      signals({ now: T0 + 13_000, balance: 0.5 }, { ceiling: 2, inFlight: 2, backlog: 300 }),
      part.state,
      cfg,
    );
    // Assess
    expect(part.paused).toBe(false);
    expect(part.ceilings.normal).toBe(2);
    expect(next.reason.code).toBe('HALT_LOW_BALANCE');
    expect(next.ceilings.normal).toBe(2);
  });

  it('resumes at the minimum when funds are back but the answers are failing', () => {
    // Prepare
    const { still } = stillPaused();
    // Act
    const failing = decide(
      signals({ now: T0 + 12_000, balance: 20, errorRate: 0.5 }, { enabled: false }),
      still.state,
      cfg,
    );
    // Assess
    expect(failing.paused).toBe(false);
    expect(failing.ceilings.normal).toBe(2);
  });
});

describe('decide: the spend rate', () => {
  const c = config({}, { planThreads: 8, tickMs: 10_000 });
  const s0 = withState(priceLearned(initialState(c, T0)), { spend: { lastRead: { at: T0, usd: 0.2 } } });

  it('spends the money above the pause level at the share of the use it pays for, when that is at least the minimum', () => {
    // Prepare: $0.005/s at 8 in flight; two ticks ahead $0.15 projects to $0.05. Of the $0.05 over
    // the pause level, the solves in flight (2 s mean) will still be charged $0.01; the $0.04 left
    // pays for 40 % of those two ticks: 3 of the 8 invocations.
    const tick = signals({ now: T0 + 10_000, balance: 0.15, meanSolveMs: 2_000 }, { ceiling: 8, inFlight: 8 });
    // Act
    const budgeted = decide(tick, s0, c);
    // Assess
    expect(budgeted.paused).toBe(false);
    expect(budgeted.reason.code).toBe('HALT_LOW_BALANCE');
    expect(budgeted.reason.message).toMatch(/Spending the rest/);
    expect(total(budgeted)).toBe(3);
  });

  it('pauses one tick early when the spend rate says the balance will cross the pause level before the next tick', () => {
    // Prepare: $0.05 in 10 s: $0.005/s, so two ticks ahead the $0.15 balance projects to $0.05 < $0.10;
    // at 2 in flight the money above the pause level pays for 1 invocation, under the minimum.
    const tick = signals({ now: T0 + 10_000, balance: 0.15 }, { inFlight: 2 });
    // Act
    const fast = decide(tick, s0, c);
    // Assess
    expect(fast.paused).toBe(true);
    expect(fast.reason.code).toBe('PAUSE_LOW_BALANCE');
    expect(fast.reason.message).toMatch(/by the next tick/);
    expect(fast.state.spend.perSecond).toBeCloseTo(0.005, 6);
  });

  it('does not pause on slow spending at the same balance (the halt guard applies instead)', () => {
    // Act
    const slow = decide(
      signals({ now: T0 + 10_000, balance: 0.15 }),
      withState(s0, { spend: { lastRead: { at: T0, usd: 0.151 } } }),
      c,
    );
    // Assess
    expect(slow.paused).toBe(false);
    expect(slow.reason.code).toBe('HALT_LOW_BALANCE');
  });

  it('holds on a missing balance, never projects it from zero, and keeps the last read', () => {
    // Act
    const missing = decide(signals({ now: T0 + 10_000, balance: undefined }), s0, c);
    // Assess
    expect(missing.paused).toBe(false);
    expect(missing.reason.code).toBe('HOLD_MISSING_SIGNAL');
    expect(missing.state.spend.lastRead).toEqual({ at: T0, usd: 0.2 });
  });

  it('freezes the rate that paused the fleet: the same balance does not resume it', () => {
    // Prepare
    const fast = decide(signals({ now: T0 + 10_000, balance: 0.15 }, { inFlight: 2 }), s0, c);
    // Act
    const again = decide(signals({ now: T0 + 20_000, balance: 0.15 }, { enabled: false }), fast.state, c);
    // Assess
    expect(again.paused).toBe(true);
  });
});

describe('decide: pause on account errors', () => {
  const cfg = config();
  const state0 = initialState(cfg, T0);
  const later = T0 + 10_000 + cfg.probeCooldownMs;
  const pausedOnKey = () =>
    decide(signals({ accountErrors: 3, accountErrorCode: 'ERROR_WRONG_USER_KEY' }), state0, cfg);
  /** Resumed after the cooldown, then one tick later (inside the grace). */
  const resumedOnKey = () => {
    const resumed = decide(signals({ now: later, accountErrors: 3 }, { enabled: false }), pausedOnKey().state, cfg);
    const next = decide(signals({ now: later + 1000, accountErrors: 3 }, { ceiling: 2 }), resumed.state, cfg);
    return { resumed, next };
  };

  it('pauses and names the code it saw', () => {
    // Act
    const d = pausedOnKey();
    // Assess
    expect(d.reason.code).toBe('PAUSE_ACCOUNT');
    expect(d.reason.message).toContain('ERROR_WRONG_USER_KEY');
  });

  it('stays paused while the balance cannot be read', () => {
    // Act
    const unreadable = decide(
      signals({ now: later, balance: undefined, accountErrors: 3 }, { enabled: false }),
      pausedOnKey().state,
      cfg,
    );
    // Assess
    expect(unreadable.paused).toBe(true);
    expect(unreadable.reason.message).toMatch(/cannot be read/);
  });

  it('resumes on a balance read after the cooldown, small, with the slow probe', () => {
    // Act: the old window's account errors do not re-pause right after the resume.
    const { resumed } = resumedOnKey();
    // Assess: key and IP troubles keep the slow probe: back at the minimum, doubling per cooldown.
    expect(resumed.paused).toBe(false);
    expect(resumed.ceilings.normal).toBe(2);
    expect(resumed.state.probe.recovery?.reason).toBe('resume');
  });

  it("ignores the old window's account errors during the grace after a resume", () => {
    // Act
    const { next } = resumedOnKey();
    // Assess
    expect(next.paused).toBe(false);
  });

  it('pauses again on fresh account errors after the grace', () => {
    // Prepare
    const { next } = resumedOnKey();
    // Act
    const again = decide(
      signals({ now: later + cfg.probeCooldownMs + 1, accountErrors: 1 }, { ceiling: 2 }),
      next.state,
      cfg,
    );
    // Assess
    expect(again.reason.code).toBe('PAUSE_ACCOUNT');
  });
});

describe("decide: the governor's own balance reads refused for the account", () => {
  const cfg = config();
  // A running fleet: its balance read before, its consumers' metric window showing no account error yet.
  const state0 = balanceReadBefore(initialState(cfg, T0));
  const refused = { balance: undefined, balanceError: { kind: 'account' as const, code: 'ERROR_KEY_DOES_NOT_EXIST' } };
  const tick = (at: number, over: Partial<GovernorSignals>, state: GovernorState) =>
    decide(signals({ now: T0 + at * 10_000, accountErrors: 0, ...over }, { ceiling: 6 }), state, cfg);

  it('pauses on the second refusal in a row, naming the code, not on the first', () => {
    // Act
    const first = tick(1, refused, state0);
    const second = tick(2, refused, first.state);
    // Assess
    expect(first.paused).toBe(false);
    expect(first.reason.code).toBe('HOLD_MISSING_SIGNAL');
    expect(second.reason.code).toBe('PAUSE_ACCOUNT');
    expect(second.reason.message).toContain("refused the governor's last 2 balance reads");
    expect(second.reason.message).toContain('key rejected (ERROR_KEY_DOES_NOT_EXIST)');
  });

  it('counts a refusal seen again by a tick woken within half a tick as the same read, not a second', () => {
    // The balance reader keeps a read for half a tick: a tick woken early sees the same refusal.
    const first = tick(1, refused, state0);
    const woken = decide(
      signals({ now: T0 + 10_000 + (cfg.tickMs ?? 1000) / 4, accountErrors: 0, ...refused }, { ceiling: 6 }),
      first.state,
      cfg,
    );
    const next = tick(2, refused, woken.state);
    expect(woken.paused).toBe(false);
    expect(next.reason.code).toBe('PAUSE_ACCOUNT');
  });

  it('starts the count again after a read that works, and after a read that got no answer keeps it', () => {
    // Act
    const first = tick(1, refused, state0);
    const read = tick(2, { balance: 5 }, first.state);
    const again = tick(3, refused, read.state);
    const noAnswer = tick(
      4,
      { balance: undefined, balanceError: { kind: 'unreachable', code: 'TIMEOUT' } },
      again.state,
    );
    const last = tick(5, refused, noAnswer.state);
    // Assess: refused, read, refused: no pause; refused, no answer, refused: two refusals in a row.
    expect(read.state.spend.refusedReads).toBeUndefined();
    expect(again.paused).toBe(false);
    expect(noAnswer.reason.code).not.toBe('PAUSE_ACCOUNT');
    expect(last.reason.code).toBe('PAUSE_ACCOUNT');
  });

  it('keeps saying the cause that paused it once the key works again, until the cooldown ends', () => {
    // Prepare
    const paused = tick(2, refused, tick(1, refused, state0).state);
    // Act: the key fixed: the next read works and the window carries no code.
    const within = T0 + 20_000 + cfg.probeCooldownMs / 2;
    const fixed = decide(signals({ now: within, accountErrors: 0 }, { enabled: false }), paused.state, cfg);
    // Assess
    expect(fixed.paused).toBe(true);
    expect(fixed.reason.message).toContain('key rejected (ERROR_KEY_DOES_NOT_EXIST); probing again in');
    expect(fixed.reason.message).not.toContain('no error code seen');
  });
});

describe('decide: errors', () => {
  const cfg = config();
  const state0 = initialState(cfg, T0);

  it('does not increase while the error rate is over the threshold', () => {
    // Act
    const d = decide(signals({ errorRate: 0.2 }, { ceiling: 4 }), state0, cfg);
    // Assess
    expect(d.reason.code).toBe('HIGH_ERROR_RATE');
    expect(d.ceilings.normal).toBe(4);
  });
  // Outages pause (PAUSE_OUTAGE) rather than step down: test/unit/governor-outage.test.ts.
});

describe('decide: missing signals', () => {
  const cfg = config();
  // A running fleet (its balance read before): a fresh one whose first read fails starts paused.
  const state0 = balanceReadBefore(initialState(cfg, T0));

  it.each([{ balance: undefined }, { errorRate: undefined }, { accountErrors: undefined }])(
    'holds on a missing signal instead of reading it as zero: %o',
    (missing) => {
      // Act
      const d = decide(signals(missing, { ceiling: 3 }), state0, cfg);
      // Assess
      expect(d.reason.code).toBe('HOLD_MISSING_SIGNAL');
      expect(d.ceilings.normal).toBe(3);
    },
  );

  it("does not need the metric window's over-cap answers (the thread ledger sets the free threads)", () => {
    // Act
    const d = decide(signals({ overCapAnswers: undefined }, { ceiling: 3 }), state0, cfg);
    // Assess
    expect(d.reason.code).toBe('FREE_THREADS');
    expect(d.ceilings.normal).toBe(8);
  });

  it.each([
    // Resumed: a money pause at the free threads; an outage at the ceiling held before it (the
    // mappings' first, 3); an account pause after its cooldown, at the minimum, doubling after.
    {
      read: 'fails with no reason',
      error: undefined,
      code: 'PAUSE_LOW_BALANCE',
      says: 'has not been read yet',
      after: 2000,
      resumedAt: 8,
    },
    {
      read: 'gets no answer (an outage from the first tick)',
      error: { kind: 'unreachable' as const, code: 'HTTP_503' },
      code: 'PAUSE_OUTAGE',
      says: 'HTTP_503',
      after: 2000,
      resumedAt: 3,
    },
    {
      read: 'is refused (the key)',
      error: { kind: 'account' as const, code: 'ERROR_WRONG_USER_KEY' },
      code: 'PAUSE_ACCOUNT',
      says: 'key rejected',
      after: 1000 + cfg.probeCooldownMs,
      resumedAt: cfg.minConcurrency,
    },
  ])(
    'starts paused when its first balance read $read, and resumes on the first read that works',
    ({ error, code, says, after, resumedAt }) => {
      // Act
      const fresh = decide(
        signals({ balance: undefined, ...(error ? { balanceError: error } : {}) }, { ceiling: 3 }),
        initialState(cfg, T0),
        cfg,
      );
      // (signals() ticks at T0 + 10 s.)
      const still = decide(
        governorSignals(T0 + 11_000, { balance: undefined }, { ceiling: 3, enabled: false }),
        fresh.state,
        cfg,
      );
      const read = decide(governorSignals(T0 + 10_000 + after, {}, { ceiling: 3, enabled: false }), still.state, cfg);
      // Assess
      expect(fresh.paused).toBe(true);
      expect(fresh.reason.code).toBe(code);
      expect(fresh.reason.message).toContain(says);
      expect(still.paused).toBe(true);
      expect(read.paused).toBe(false);
      expect(read.enabled.normal).toBe(true);
      expect(read.ceilings.normal).toBe(resumedAt);
    },
  );

  it('holds on a missing backlog and names it', () => {
    // Act
    const noBacklog = decide(signals({}, { ceiling: 3, backlog: undefined }), state0, cfg);
    // Assess
    expect(noBacklog.reason.code).toBe('HOLD_MISSING_SIGNAL');
    expect(noBacklog.reason.message).toContain('normal backlog');
  });
});

describe('decide: capacity shortfall', () => {
  const cfg = config();
  const state0 = initialState(cfg, T0);

  it('reports the shortfall and warns past the usual thresholds', () => {
    // Prepare: 2 tasks/s × 10 s = 20 threads for arrivals + 600 queued × 10 s / 60 s = 100 more.
    const tick = signals({ meanSolveMs: 10_000 }, { arrivalRate: 2, backlog: 600, inFlight: 8 });
    // Act
    const d = decide(tick, state0, cfg);
    // Assess
    expect(d.neededThreads).toBe(120);
    expect(d.shortfall).toBe(112);
    expect(d.shortfallWarning).toBe(true);
    expect(d.drainSeconds).toBe(Number.POSITIVE_INFINITY); // 0.8 solves/s < 2 arrivals/s
  });

  it('reports no shortfall and a finite drain when the free threads suffice', () => {
    // Act
    const fine = decide(signals({ meanSolveMs: 10_000 }, { arrivalRate: 0.1, backlog: 10, inFlight: 2 }), state0, cfg);
    // Assess
    expect(fine.shortfall).toBe(0);
    expect(fine.shortfallWarning).toBe(false);
    expect(fine.drainSeconds).toBeCloseTo(10 / 0.7, 5);
  });
});

describe('decide: two lanes', () => {
  const c2 = config({ highLane: true }, { planThreads: 20 });
  const s0 = priceLearned(initialState(c2, T0));
  const two = (
    high: Partial<LaneSignals>,
    normal: Partial<LaneSignals> = {},
    extra: Partial<GovernorSignals> = {},
  ) => ({
    ...signals(extra, { ceiling: 20, ...normal }),
    lanes: {
      normal: laneSignals({ ceiling: 20, ...normal }),
      high: laneSignals({ ceiling: 2, enabled: false, ...high }),
    },
  });

  it('gives the normal lane everything while the high lane is empty', () => {
    // Act
    const d = decide(two({ backlog: 0, inFlight: 0, arrivalRate: 0 }), s0, c2);
    // Assess
    expect(d.enabled).toEqual({ normal: true, high: false });
    expect(d.ceilings.normal).toBe(20);
  });

  it('gives the high lane what its work needs first, normal the rest', () => {
    // Act
    const d = decide(two({ backlog: 5, inFlight: 0, arrivalRate: 0 }), s0, c2);
    // Assess
    expect(d.enabled).toEqual({ normal: true, high: true });
    expect(d.ceilings.high).toBe(5);
    expect(d.ceilings.normal).toBe(15);
  });

  it('gives the high lane at least the mapping floor', () => {
    // Act
    const floor = decide(two({ backlog: 1, inFlight: 0, arrivalRate: 0 }), s0, c2);
    // Assess
    expect(floor.ceilings.high).toBe(2);
  });

  it('disables the normal lane when the high lane needs everything', () => {
    // Act
    const all = decide(two({ backlog: 50, inFlight: 0, arrivalRate: 0 }), s0, c2);
    // Assess
    expect(all.ceilings.high).toBe(20);
    expect(all.enabled.normal).toBe(false);
  });

  it('leaves the normal lane its floor for arrivals the high lane only expects', () => {
    // Arrange: nothing waits on the high lane, 5 in flight, 3 a second expected over 10 s solves.
    const expected = two({ backlog: 0, inFlight: 5, arrivalRate: 3 }, { backlog: 200, inFlight: 10 });
    // Act
    const d = decide(expected, s0, c2);
    // Assess: the expectation (35) covers the plan, but only work the lane has may take all of it.
    expect(d.enabled).toEqual({ normal: true, high: true });
    expect(d.ceilings.high).toBe(18);
    expect(d.ceilings.normal).toBe(2);
  });

  it('leaves the normal lane its floor when the high lane’s own work is exactly the total less that floor', () => {
    // Arrange: in flight alone is 18 (the total 20 less the floor), nothing waits, arrivals expected.
    const edge = decide(two({ backlog: 0, inFlight: 18, arrivalRate: 3 }, { backlog: 200, inFlight: 2 }), s0, c2);
    // Assess: before, the expected arrivals took the whole total at the boundary (a 4-thread plan's
    // normal lane off for 5 ticks with 2 high tasks in flight, none waiting, and 35 normal waiting).
    expect(edge.enabled).toEqual({ normal: true, high: true });
    expect(edge.ceilings.high).toBe(18);
    expect(edge.ceilings.normal).toBe(2);
  });

  it('gives the high lane the whole total once its own work fills it', () => {
    // Act: in flight alone (19) is more than the total less the normal lane's floor (18).
    const inFlight = decide(two({ backlog: 0, inFlight: 19, arrivalRate: 3 }, { backlog: 200 }), s0, c2);
    // Assess
    expect(inFlight.ceilings.high).toBe(20);
    expect(inFlight.enabled.normal).toBe(false);
  });

  it('gives the turn of a total under twice the floor to the normal lane while nothing waits on the high lane', () => {
    // Arrange: a plan of 10 in batches of 5 (a total of 2 invocations: the lanes take turns).
    const small = { ...c2, planThreads: 10, tasksPerInvocation: 5 };
    // Act: 2 high messages in flight but none waiting (hidden after a crash, or parked); 76 normal waiting.
    const hidden = decide(two({ backlog: 0, inFlight: 2, arrivalRate: 0 }, { backlog: 76 }), s0, small);
    // …and a high task waiting to start.
    const waiting = decide(two({ backlog: 1, inFlight: 2, arrivalRate: 0 }, { backlog: 76 }), s0, small);
    // Assess: before, the high lane held the turn on its in flight alone (normal off for 40 s).
    expect(hidden.enabled).toEqual({ normal: true, high: false });
    expect(hidden.ceilings.normal).toBe(2);
    expect(waiting.enabled).toEqual({ normal: false, high: true });
  });

  it('keeps the high lane share first when scaling halts', () => {
    // Act
    const d = decide(
      // The high lane at 10 holds every thread that stands enabled when the balance crosses.
      two({ backlog: 10, inFlight: 3, enabled: false, ceiling: 3 }, { ceiling: 10, inFlight: 7 }, { balance: 0.5 }),
      s0,
      c2,
    );
    // Assess
    expect(d.reason.code).toBe('HALT_LOW_BALANCE');
    expect(total(d)).toBe(10);
    expect(d.ceilings.high).toBe(10);
    expect(d.enabled.normal).toBe(false);
  });
});

// ---- properties -------------------------------------------------------------------------------

const signalsArb = fc.record({
  now: fc.integer({ min: T0, max: T0 + 3_600_000 }),
  lanes: fc.record({ normal: laneArb, high: maybe(laneArb) }),
  completionRate: maybe(fc.double({ min: 0, max: 100, noNaN: true })),
  meanSolveMs: maybe(fc.double({ min: 1, max: 300_000, noNaN: true })),
  p95SolveMs: maybe(fc.double({ min: 1, max: 600_000, noNaN: true })),
  errorRate: maybe(fc.double({ min: 0, max: 1, noNaN: true })),
  transientErrorRate: maybe(fc.double({ min: 0, max: 1, noNaN: true })),
  overCapRate: maybe(fc.double({ min: 0, max: 1, noNaN: true })),
  overCapAnswers: maybe(fc.nat(100)),
  accountErrors: maybe(fc.nat(5)),
  accountErrorCode: maybe(fc.constantFrom('ERROR_WRONG_USER_KEY', 'IP_BANNED')),
  balance: maybe(fc.double({ min: 0, max: 100, noNaN: true })),
  threadLedger: maybe(
    fc.record({
      held: fc.nat(400),
      refusals: fc.nat(1100),
      acceptances: fc.nat(110_000),
      leftover: maybe(fc.nat(50)),
      lastRefusal: maybe(fc.record({ at: fc.integer({ min: T0, max: T0 + 3_600_000 }), held: fc.nat(400) })),
      lastAcceptance: maybe(fc.record({ at: fc.integer({ min: T0, max: T0 + 3_600_000 }), held: fc.nat(400) })),
    }),
  ),
}) as fc.Arbitrary<GovernorSignals>;

const configArb = fc
  .record({
    planThreads: fc.integer({ min: 4, max: 300 }),
    reservedPart: fc.double({ min: 0, max: 0.5, noNaN: true }),
    tasksPerInvocation: fc.integer({ min: 1, max: 3 }),
    haltBalance: fc.double({ min: 0.5, max: 5, noNaN: true }),
    pauseShare: fc.double({ min: 0, max: 1, noNaN: true }),
    highLane: fc.boolean(),
    tickMs: fc.integer({ min: 100, max: 10_000 }),
  })
  .filter((c) => Math.floor((c.planThreads - Math.floor(c.planThreads * c.reservedPart)) / c.tasksPerInvocation) >= 2)
  .map((c) =>
    config(
      { highLane: c.highLane },
      {
        planThreads: c.planThreads,
        reservedThreads: Math.floor(c.planThreads * c.reservedPart),
        tasksPerInvocation: c.tasksPerInvocation,
        haltBalance: c.haltBalance,
        pauseBalance: c.haltBalance * c.pauseShare,
        tickMs: c.tickMs,
      },
    ),
  );

/** A state some earlier ticks may have left: shrunk caps, pauses, probes, outages, estimates. */
const stateArb = (cfg: GovernorConfig) =>
  fc
    .record({
      capShare: fc.double({ min: 0, max: 1, noNaN: true }),
      lastChangeAgo: fc.nat(600_000),
      lastProbeAgo: fc.nat(600_000),
      paused: maybe(fc.constantFrom<PauseReason>('balance', 'account', 'outage', 'threads')),
      pausedAgo: fc.nat(600_000),
      resumeTotal: maybe(fc.integer({ min: 2, max: 400 })),
      outageTicks: fc.nat(8),
      probeCeiling: maybe(fc.integer({ min: 2, max: 200 })),
      resumedAgo: maybe(fc.nat(600_000)),
      haltCeiling: maybe(fc.integer({ min: 2, max: 300 })),
      balanceSeen: maybe(fc.record({ ago: fc.nat(60_000), usd: fc.double({ min: 0, max: 100, noNaN: true }) })),
      spendPerSecond: maybe(fc.double({ min: 0, max: 1, noNaN: true })),
      estimate: maybe(
        fc.record({
          freeShare: fc.double({ min: 0, max: 1, noNaN: true }),
          step: fc.integer({ min: 1, max: 512 }),
          budget: fc.double({ min: -50, max: 500, noNaN: true }),
          refusals: fc.nat(1000),
          acceptances: fc.nat(100_000),
        }),
      ),
      probeCredit: maybe(fc.integer({ min: -50, max: 1 })),
      carried: maybe(fc.record({ threads: fc.nat(300), inMs: fc.integer({ min: -60_000, max: 120_000 }) })),
    })
    .map((s) => (now: number): GovernorState => {
      const base = initialState(cfg, now - 1_000_000);
      const e = s.estimate;
      return {
        ...base,
        lastChangeAt: now - s.lastChangeAgo,
        pause:
          s.paused === undefined
            ? undefined
            : {
                reason: s.paused,
                since: now - s.pausedAgo,
                ...(s.paused === 'outage' && s.resumeTotal !== undefined ? { resumeTotal: s.resumeTotal } : {}),
              },
        resumedAt: s.resumedAgo === undefined ? undefined : now - s.resumedAgo,
        probe: {
          lastAt: now - s.lastProbeAgo,
          recovery: s.probeCeiling === undefined ? undefined : { ceiling: s.probeCeiling, reason: 'resume' },
        },
        overCap: {
          effectiveCap: Math.max(capFloor(cfg), Math.round(planCap(cfg) * s.capShare)),
          ...(e === undefined
            ? {}
            : {
                neighbours: {
                  free: Math.round(planCap(cfg) * e.freeShare),
                  step: e.step,
                  budget: e.budget,
                  seen: { refusals: e.refusals, acceptances: e.acceptances },
                  updatedAt: now - 10_000,
                },
              }),
          ...(s.probeCredit === undefined ? {} : { probeCredit: s.probeCredit }),
          ...(s.carried === undefined ? {} : { carried: { threads: s.carried.threads, until: now + s.carried.inMs } }),
        },
        spend: {
          lastRead: s.balanceSeen === undefined ? undefined : { at: now - s.balanceSeen.ago, usd: s.balanceSeen.usd },
          perSecond: s.spendPerSecond,
          haltCeiling: s.haltCeiling,
        },
        availability: { solver: { ticks: s.outageTicks } },
      };
    });

const caseArb = configArb.chain((cfg) => fc.tuple(fc.constant(cfg), signalsArb, stateArb(cfg)));

const enabledTotal = (s: GovernorSignals, cfg: GovernorConfig) =>
  (s.lanes.normal.enabled ? s.lanes.normal.ceiling : 0) +
  (cfg.highLane && s.lanes.high?.enabled ? s.lanes.high.ceiling : 0);

describe('decide: properties', () => {
  it('never sets enabled ceilings × tasks per invocation above the effective cap, nor the cap above the plan', () => {
    fc.assert(
      fc.property(caseArb, ([cfg, sig, mkState]) => {
        const d = decide(sig, mkState(sig.now), cfg);
        expect(total(d) * cfg.tasksPerInvocation).toBeLessThanOrEqual(d.state.overCap.effectiveCap);
        expect(d.state.overCap.effectiveCap).toBeLessThanOrEqual(planCap(cfg));
        expect(total(d)).toBeLessThanOrEqual(cfg.maxConcurrency);
        for (const l of ['normal', 'high'] as const) if (d.enabled[l]) expect(d.ceilings[l]).toBeGreaterThanOrEqual(2);
      }),
      { numRuns: 2000 },
    );
  });

  it('never raises the ceiling on a low balance or a high error rate', () => {
    fc.assert(
      fc.property(caseArb, ([cfg, sig, mkState]) => {
        const low = sig.balance !== undefined && sig.balance < cfg.haltBalance;
        const erroring =
          sig.errorRate !== undefined && sig.errorRate - (sig.transientErrorRate ?? 0) > cfg.errorRateThreshold;
        fc.pre(low || erroring);
        const state = mkState(sig.now);
        const d = decide(sig, state, cfg);
        // The minimum may lift a fleet that stood below it (e.g. re-enabled after a pause). An
        // outage pause that ends resumes where it began (the ceiling held before it, which the
        // paused mappings no longer show), never above the halt's frozen ceiling, and a starved
        // spell at the halt's frozen ceiling: not a rise. The frozen ceiling is cleared once the
        // balance reads at the halt level or above (stage-stabilize.ts, haltCeiling): a balance
        // exactly at the level with a high error rate resumes where the outage began.
        const funded = sig.balance !== undefined && sig.balance >= cfg.haltBalance;
        const halt = funded ? undefined : state.spend.haltCeiling;
        const before =
          d.paused || state.pause === undefined
            ? 0
            : state.pause.reason === 'outage'
              ? Math.min(state.pause.resumeTotal ?? 0, halt ?? Number.POSITIVE_INFINITY)
              : state.pause.reason === 'threads'
                ? (halt ?? 0)
                : 0;
        expect(total(d)).toBeLessThanOrEqual(Math.max(enabledTotal(sig, cfg), ceilingFor(capFloor(cfg), cfg), before));
      }),
      { numRuns: 2000 },
    );
  });

  it('never goes below the minimum unless paused', () => {
    fc.assert(
      fc.property(caseArb, ([cfg, sig, mkState]) => {
        const d = decide(sig, mkState(sig.now), cfg);
        if (d.paused) expect(total(d)).toBe(0);
        else expect(total(d)).toBeGreaterThanOrEqual(cfg.minConcurrency);
      }),
      { numRuns: 2000 },
    );
  });

  it('holds a halted fleet where its ceiling stood at the crossing, whatever the use and the backlog do', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 40 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.array(fc.record({ inFlight: fc.nat(40), backlog: fc.nat(5_000) }), { minLength: 1, maxLength: 12 }),
        (plan, standShare, ticks) => {
          const cfg = config({}, { planThreads: plan });
          const standing = Math.max(2, Math.round(plan * standShare));
          let state = priceLearned(initialState(cfg, T0));
          let ceiling = standing;
          ticks.forEach((t, i) => {
            // Between the pause ($0.10) and the halt ($1) levels, the spend slow enough for no projected pause.
            const sig = signals(
              { now: T0 + (i + 1) * 1000, balance: 0.9 - i * 1e-6 },
              { ceiling, inFlight: Math.min(t.inFlight, ceiling), backlog: t.backlog },
            );
            const d = decide(sig, state, cfg);
            expect(d.paused).toBe(false);
            // Never lowered to the use (an idle ceiling costs nothing), never raised (no scale-up).
            expect(total(d)).toBe(standing);
            state = d.state;
            ceiling = d.ceilings.normal;
          });
        },
      ),
      { numRuns: 500 },
    );
  });

  it('gives the same output for the same input (pure, no clock)', () => {
    fc.assert(
      fc.property(caseArb, ([cfg, sig, mkState]) => {
        const state = mkState(sig.now);
        const frozen = structuredClone(state);
        const a = decide(sig, state, cfg);
        const b = decide(structuredClone(sig), structuredClone(state), cfg);
        expect(b).toEqual(a);
        expect(state).toEqual(frozen); // the input state is not mutated
      }),
      { numRuns: 1000 },
    );
  });
});
