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
} from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';

const T0 = 1_700_000_000_000;

function lane(overrides: Partial<LaneSignals> = {}): LaneSignals {
  return {
    backlog: 100,
    inFlight: 8,
    delayed: 0,
    oldestAgeSeconds: 5,
    arrivalRate: 1,
    ceiling: 8,
    enabled: true,
    ...overrides,
  };
}

function signals(overrides: Partial<GovernorSignals> = {}, normal: Partial<LaneSignals> = {}): GovernorSignals {
  return {
    now: T0 + 10_000,
    lanes: { normal: lane(normal) },
    completionRate: 0.5,
    meanSolveMs: 10_000,
    p95SolveMs: 20_000,
    errorRate: 0,
    transientErrorRate: 0,
    overCapRate: 0,
    overCapAnswers: 0,
    accountErrors: 0,
    accountErrorCode: undefined,
    balance: 50,
    ...overrides,
  };
}

function config(
  overrides: Partial<GovernorConfig> = {},
  fleet: Parameters<typeof resolveSettings>[0] = { planThreads: 8 },
): GovernorConfig {
  return governorConfigFrom(resolveSettings({ tickMs: 1000, ...fleet }), overrides);
}

const total = (d: ReturnType<typeof decide>) =>
  (d.enabled.normal ? d.ceilings.normal : 0) + (d.enabled.high ? d.ceilings.high : 0);

describe('decide: table of cases', () => {
  const cfg = config();
  const state0 = initialState(cfg, T0);

  it('starts at the free threads at once, not trailing demand', () => {
    // Prepare: a small current ceiling and a fresh backlog.
    const d = decide(signals({}, { ceiling: 2, inFlight: 2, backlog: 300 }), state0, cfg);
    // Assess
    expect(d.reason.code).toBe('FREE_THREADS');
    expect(d.ceilings.normal).toBe(8);
    expect(d.enabled.normal).toBe(true);
    expect(d.paused).toBe(false);
  });

  it('subtracts reserved threads and divides by tasks per invocation', () => {
    const c = config({}, { planThreads: 50, reservedThreads: 10, tasksPerInvocation: 3 });
    const d = decide(signals({}, { ceiling: 2 }), initialState(c, T0), c);
    expect(d.ceilings.normal).toBe(13); // ⌊40 / 3⌋
    expect(d.ceilings.normal * 3).toBeLessThanOrEqual(40);
    expect(d.freeThreads).toBe(39);
  });

  it('stays at the free threads while idle and says so', () => {
    const d = decide(signals({}, { backlog: 0, inFlight: 0, arrivalRate: 0, ceiling: 8 }), state0, cfg);
    expect(d.reason.code).toBe('IDLE');
    expect(d.ceilings.normal).toBe(8);
  });

  it('halts under the halt level: clamps to in flight at the crossing, then holds that value', () => {
    const d = decide(signals({ balance: 0.5 }, { ceiling: 8, inFlight: 3 }), state0, cfg);
    expect(d.reason.code).toBe('HALT_LOW_BALANCE');
    expect(d.ceilings.normal).toBe(3);
    expect(d.state.haltCeiling).toBe(3);
    // A dip in use does not ratchet it down…
    const dip = decide(signals({ now: T0 + 20_000, balance: 0.45 }, { ceiling: 3, inFlight: 1 }), d.state, cfg);
    expect(dip.ceilings.normal).toBe(3);
    expect(dip.reason.message).toMatch(/held/);
    // …and a backlog does not raise it.
    const up = decide(
      signals({ now: T0 + 30_000, balance: 0.4 }, { ceiling: 3, inFlight: 3, backlog: 500 }),
      dip.state,
      cfg,
    );
    expect(up.ceilings.normal).toBe(3);
    expect(up.reason.message).toMatch(/halt/i);
    // Nothing in flight at the crossing: the minimum, not 0.
    const low = decide(signals({ balance: 0.5 }, { ceiling: 4, inFlight: 0 }), state0, cfg);
    expect(low.ceilings.normal).toBe(2);
    // Topped up over the halt level: back at the free threads, the hold forgotten.
    const topped = decide(signals({ now: T0 + 40_000, balance: 5 }, { ceiling: 3 }), up.state, cfg);
    expect(topped.ceilings.normal).toBe(8);
    expect(topped.state.haltCeiling).toBeUndefined();
  });

  it('pauses under the pause level and resumes at the free threads on the first read that shows funds', () => {
    const d = decide(signals({ balance: 0.05 }), state0, cfg);
    expect(d.paused).toBe(true);
    expect(d.enabled).toEqual({ normal: false, high: false });
    expect(d.reason.code).toBe('PAUSE_LOW_BALANCE');
    // Still low: stays paused.
    const still = decide(signals({ now: T0 + 11_000, balance: 0.05 }, { enabled: false }), d.state, cfg);
    expect(still.paused).toBe(true);
    // Topped up over the halt level: resumes at once (no cooldown, no doubling from the minimum).
    const resumed = decide(signals({ now: T0 + 12_000, balance: 20 }, { enabled: false }), still.state, cfg);
    expect(12_000 - 10_000).toBeLessThan(cfg.probeCooldownMs);
    expect(resumed.paused).toBe(false);
    expect(resumed.reason.code).toBe('PROBE_RESUME');
    expect(resumed.ceilings.normal).toBe(8);
    expect(resumed.state.probeCeiling).toBeUndefined();
    // Topped up over the pause level only: resumes at the minimum with scaling halted.
    const part = decide(signals({ now: T0 + 12_000, balance: 0.5 }, { enabled: false }), still.state, cfg);
    expect(part.paused).toBe(false);
    expect(part.ceilings.normal).toBe(2);
    const halted = decide(
      signals({ now: T0 + 13_000, balance: 0.5 }, { ceiling: 2, inFlight: 2, backlog: 300 }),
      part.state,
      cfg,
    );
    expect(halted.reason.code).toBe('HALT_LOW_BALANCE');
    expect(halted.ceilings.normal).toBe(2);
    // Funds back but the answers failing: the minimum, never up on a high error rate.
    const failing = decide(
      signals({ now: T0 + 12_000, balance: 20, errorRate: 0.5 }, { enabled: false }),
      still.state,
      cfg,
    );
    expect(failing.paused).toBe(false);
    expect(failing.ceilings.normal).toBe(2);
  });

  it('pauses one tick early when the spend rate says the balance will cross the pause level before the next tick', () => {
    const c = config({}, { planThreads: 8, tickMs: 10_000 });
    const s0 = { ...initialState(c, T0), balanceSeen: { at: T0, usd: 0.2 } };
    // $0.05 in 10 s: $0.005/s, so two ticks ahead the $0.15 balance projects to $0.05 < $0.10.
    const fast = decide(signals({ now: T0 + 10_000, balance: 0.15 }), s0, c);
    expect(fast.paused).toBe(true);
    expect(fast.reason.code).toBe('PAUSE_LOW_BALANCE');
    expect(fast.reason.message).toMatch(/by the next tick/);
    expect(fast.state.spendPerSecond).toBeCloseTo(0.005, 6);
    // Slow spending at the same balance: no pause (the halt guard applies instead).
    const slow = decide(
      signals({ now: T0 + 10_000, balance: 0.15 }),
      { ...s0, balanceSeen: { at: T0, usd: 0.151 } },
      c,
    );
    expect(slow.paused).toBe(false);
    expect(slow.reason.code).toBe('HALT_LOW_BALANCE');
    // A missing balance is held, never projected from zero; the last read is kept.
    const missing = decide(signals({ now: T0 + 10_000, balance: undefined }), s0, c);
    expect(missing.paused).toBe(false);
    expect(missing.reason.code).toBe('HOLD_MISSING_SIGNAL');
    expect(missing.state.balanceSeen).toEqual({ at: T0, usd: 0.2 });
    // The rate that paused the fleet is frozen while paused: the same balance does not resume it.
    const again = decide(signals({ now: T0 + 20_000, balance: 0.15 }, { enabled: false }), fast.state, c);
    expect(again.paused).toBe(true);
  });

  it('pauses on account errors and resumes only when the balance can be read again', () => {
    const d = decide(signals({ accountErrors: 3, accountErrorCode: 'ERROR_WRONG_USER_KEY' }), state0, cfg);
    expect(d.reason.code).toBe('PAUSE_ACCOUNT');
    expect(d.reason.message).toContain('ERROR_WRONG_USER_KEY');
    const later = T0 + 10_000 + cfg.probeCooldownMs;
    const unreadable = decide(
      signals({ now: later, balance: undefined, accountErrors: 3 }, { enabled: false }),
      d.state,
      cfg,
    );
    expect(unreadable.paused).toBe(true);
    expect(unreadable.reason.message).toMatch(/cannot be read/);
    // The old window's account errors do not re-pause right after the resume.
    const resumed = decide(signals({ now: later, accountErrors: 3 }, { enabled: false }), d.state, cfg);
    expect(resumed.paused).toBe(false);
    // Key and IP troubles keep the slow probe: back at the minimum, doubling per cooldown.
    expect(resumed.ceilings.normal).toBe(2);
    expect(resumed.state.probeReason).toBe('resume');
    const next = decide(signals({ now: later + 1000, accountErrors: 3 }, { ceiling: 2 }), resumed.state, cfg);
    expect(next.paused).toBe(false);
    // After the grace, fresh account errors pause again.
    const again = decide(
      signals({ now: later + cfg.probeCooldownMs + 1, accountErrors: 1 }, { ceiling: 2 }),
      next.state,
      cfg,
    );
    expect(again.reason.code).toBe('PAUSE_ACCOUNT');
  });

  it('does not increase while the error rate is over the threshold', () => {
    const d = decide(signals({ errorRate: 0.2 }, { ceiling: 4 }), state0, cfg);
    expect(d.reason.code).toBe('HIGH_ERROR_RATE');
    expect(d.ceilings.normal).toBe(4);
  });

  it('steps down after several outage ticks and probes back', () => {
    let state: GovernorState = state0;
    const codes: string[] = [];
    let ceiling = 8;
    for (let i = 0; i < cfg.outageTicks; i++) {
      const d = decide(
        signals({ now: T0 + i * 1000, errorRate: 0.9, transientErrorRate: 0.9 }, { ceiling }),
        state,
        cfg,
      );
      codes.push(d.reason.code);
      state = d.state;
      ceiling = d.ceilings.normal;
    }
    expect(codes.slice(0, -1).every((c) => c === 'HIGH_ERROR_RATE')).toBe(true);
    expect(codes.at(-1)).toBe('OUTAGE_STEP_DOWN');
    expect(ceiling).toBe(4);
    // Errors gone: the next probe after a cooldown raises it back.
    const healthy = decide(signals({ now: T0 + 5000 + cfg.probeCooldownMs }, { ceiling }), state, cfg);
    expect(healthy.reason.code).toBe('OUTAGE_PROBE');
    expect(healthy.ceilings.normal).toBe(8);
    expect(healthy.state.probeCeiling).toBeUndefined();
  });

  it('shrinks to the threads held when the solver refused, not the average use', () => {
    const c = config({}, { planThreads: 50, tickMs: 10_000 });
    // The fleet reached 33 in flight 50 s ago and 3 answers were over-cap; it averaged 21 threads.
    const s0 = {
      ...initialState(c, T0),
      recentUse: [
        { at: T0 - 50_000, threads: 33 },
        { at: T0 - 40_000, threads: 28 },
      ],
    };
    const over = { overCapAnswers: 3, overCapRate: 0.05, completionRate: 1.4, meanSolveMs: 15_000 };
    const d = decide(signals({ now: T0, ...over }, { ceiling: 50, inFlight: 24, backlog: 0 }), s0, c);
    expect(d.reason.code).toBe('OVER_CAP_SHRINK');
    expect(d.state.effectiveCap).toBe(30); // 33 − 3 backing off, not 21
    expect(d.ceilings.normal).toBe(30);
    // One answer shows one missing thread.
    const one = decide(
      signals({ now: T0, ...over, overCapAnswers: 1 }, { ceiling: 50, inFlight: 24, backlog: 0 }),
      s0,
      c,
    );
    expect(one.state.effectiveCap).toBe(32);
    // Many answers: never below what completions say the fleet held.
    const many = decide(
      signals({ now: T0, ...over, overCapAnswers: 40 }, { ceiling: 50, inFlight: 24, backlog: 0 }),
      s0,
      c,
    );
    expect(many.state.effectiveCap).toBe(21);
  });

  it('does not shrink twice on one lagging window, and probes back only after in flight reached the cap', () => {
    const c = config({}, { planThreads: 50, tickMs: 10_000 });
    const span = 2 * c.probeCooldownMs;
    const s0 = { ...initialState(c, T0), recentUse: [{ at: T0 - 50_000, threads: 33 }] };
    const over = { overCapAnswers: 3, completionRate: 1.4, meanSolveMs: 15_000 };
    const d1 = decide(signals({ now: T0, ...over }, { ceiling: 50, inFlight: 24, backlog: 0 }), s0, c);
    expect(d1.state.effectiveCap).toBe(30);
    // Answers still in the window after a cooldown, within the metric span: not a second shrink.
    const d2 = decide(
      signals(
        { now: T0 + c.probeCooldownMs + 10_000, ...over, overCapAnswers: 5 },
        { ceiling: 30, inFlight: 28, backlog: 0 },
      ),
      d1.state,
      c,
    );
    expect(d2.state.effectiveCap).toBe(30);
    // Quiet, but the fleet never filled its cap: nothing was tested, no probe.
    const d3 = decide(signals({ now: T0 + span + 10_000 }, { ceiling: 30, inFlight: 22, backlog: 0 }), d2.state, c);
    expect(d3.reason.code).toBe('FREE_THREADS');
    expect(d3.state.effectiveCap).toBe(30);
    // In flight reaches the cap; once the metric window has covered that moment without over-cap answers, probe.
    const d4 = decide(signals({ now: T0 + span + 20_000 }, { ceiling: 30, inFlight: 30, backlog: 4 }), d3.state, c);
    expect(d4.state.effectiveCap).toBe(30);
    const d5 = decide(
      signals({ now: T0 + span + 20_000 + span / 2 }, { ceiling: 30, inFlight: 25, backlog: 0 }),
      d4.state,
      c,
    );
    expect(d5.reason.code).toBe('OVER_CAP_PROBE');
    expect(d5.state.effectiveCap).toBe(31);
    expect(d5.ceilings.normal).toBe(31);
    // The probe fails: the shrink goes back to the level just proven (30), whatever the ticks sampled.
    const d6 = decide(
      signals({ now: T0 + 3 * span, ...over, overCapAnswers: 2 }, { ceiling: 31, inFlight: 31, backlog: 2 }),
      d5.state,
      c,
    );
    expect(d6.reason.code).toBe('OVER_CAP_SHRINK');
    expect(d6.state.effectiveCap).toBe(30);
  });

  it('backs off probing after failed probes, shrinks back at once when one fails, and resets when a probe holds', () => {
    const c = config({}, { planThreads: 8, tickMs: 1_000 });
    const cooldown = c.probeCooldownMs;
    const span = 2 * cooldown;
    // Shrunk to 5 (3 threads held by others) long enough ago; in flight fills the cap.
    let state: GovernorState = {
      ...initialState(c, T0),
      effectiveCap: 5,
      refusedThreads: 6,
      lastShrinkAt: T0,
      lastProbeAt: T0,
      recentUse: [],
    };
    let now = T0;
    const tick = (s: Partial<GovernorSignals>, l: Partial<LaneSignals>) => {
      const d = decide(signals({ now, ...s }, { backlog: 50, ...l }), state, c);
      state = d.state;
      return d;
    };
    /** Fill the cap for half a span, then tick until the next probe; returns when it probed. */
    const probeAt = () => {
      for (now += 1_000; ; now += 1_000) {
        const d = tick({}, { ceiling: 5, inFlight: 5 });
        if (d.reason.code === 'OVER_CAP_PROBE') return now;
      }
    };
    const waits: number[] = [];
    let last = T0;
    for (let failure = 1; failure <= 6; failure++) {
      const probedAt = probeAt();
      waits.push(probedAt - last);
      expect(state.effectiveCap).toBe(6);
      expect(state.unprovenProbeAt).toBe(probedAt);
      // The probe fails: over-cap answers one tick later. The first time that is inside the metric
      // span of the last shrink; the shrink still comes at once, back to where the probe started.
      now += 1_000;
      if (failure === 1) expect(now - (state.lastShrinkAt as number)).toBeLessThan(Math.max(cooldown, span));
      const d = tick({ overCapAnswers: 2 }, { ceiling: 6, inFlight: 6 });
      expect(d.reason.code).toBe('OVER_CAP_SHRINK');
      expect(d.state.effectiveCap).toBe(5);
      expect(d.ceilings.normal).toBe(5);
      expect(d.state.probeBackoff).toBe(Math.min(16, 2 ** failure));
      expect(d.state.unprovenProbeAt).toBeUndefined();
      last = now;
    }
    // Each failed probe doubled the wait before the next, up to 16 × the cooldown.
    for (let i = 1; i < waits.length; i++) expect(waits[i]).toBeGreaterThanOrEqual(cooldown * Math.min(16, 2 ** i));
    expect(waits.at(-1)).toBeLessThan(cooldown * 16 + span);
    // The foreign user leaves: the next probe holds once the window covers in flight at the new cap.
    const probedAt = probeAt();
    expect(state.effectiveCap).toBe(6);
    now += 1_000;
    const filled = tick({}, { ceiling: 6, inFlight: 6 });
    expect(filled.state.unprovenProbeAt).toBe(probedAt); // not known yet: the window has not covered it
    now += span / 2;
    const held = tick({}, { ceiling: 6, inFlight: 6 });
    expect(held.state.probeBackoff).toBeUndefined();
    // Back to the plain cooldown: with it passed, the same tick probes the next thread.
    expect(now - probedAt).toBeLessThan(2 * cooldown);
    expect(held.reason.code).toBe('OVER_CAP_PROBE');
    expect(held.state.effectiveCap).toBe(7);
    expect(held.state.unprovenProbeAt).toBe(now);
  });

  it('re-climbs below a failed probe level at the plain cooldown, keeping the backoff for that level', () => {
    const c = config({}, { planThreads: 8, tickMs: 1_000 });
    const cooldown = c.probeCooldownMs;
    // A probe to 6 failed (backoff 4); late answers then shrank the cap to 4.
    let state: GovernorState = {
      ...initialState(c, T0),
      effectiveCap: 4,
      refusedThreads: 6,
      lastShrinkAt: T0,
      lastProbeAt: T0,
      probeBackoff: 4,
      failedProbeCap: 6,
      recentUse: [],
    };
    let now = T0;
    const probes: Array<{ at: number; cap: number }> = [];
    for (now = T0 + 1_000; now < T0 + 10 * cooldown; now += 1_000) {
      const d = decide(
        signals({ now }, { backlog: 50, ceiling: ceilingFor(state.effectiveCap, c), inFlight: state.effectiveCap }),
        state,
        c,
      );
      if (d.reason.code === 'OVER_CAP_PROBE') probes.push({ at: now - T0, cap: d.state.effectiveCap });
      state = d.state;
      if (d.state.effectiveCap === 6) break;
    }
    expect(probes.map((p) => p.cap)).toEqual([5, 6]);
    // 4 → 5 is known ground: one cooldown (plus the window covering the cap). It held, but below 6: the backoff stays.
    expect(probes[0]!.at).toBeLessThan(2 * cooldown);
    // 5 → 6 failed before: it waits 4 cooldowns after the last probe.
    expect(probes[1]!.at - probes[0]!.at).toBeGreaterThanOrEqual(4 * cooldown);
    expect(state.probeBackoff).toBe(4);
  });

  it('shrinks at the first tick that sees over-cap answers', () => {
    // Locally the metric window is fresh: no earlier shrink, the first answers shrink at once.
    const c = config({}, { planThreads: 8, tickMs: 1_000 });
    const d = decide(
      signals(
        { now: T0 + 1_000, overCapAnswers: 3, completionRate: 0, meanSolveMs: undefined },
        { ceiling: 8, inFlight: 8 },
      ),
      initialState(c, T0),
      c,
    );
    expect(d.reason.code).toBe('OVER_CAP_SHRINK');
    expect(d.state.effectiveCap).toBe(5);
    expect(d.ceilings.normal).toBe(5);
  });

  it('halves the gap to the refused level when probing back after a deep shrink', () => {
    const c = config({}, { planThreads: 50, tickMs: 10_000 });
    const span = 2 * c.probeCooldownMs;
    // Refused at 41 in flight; 20 answers; completions say 21 held: cap 21.
    const s0 = { ...initialState(c, T0), recentUse: [{ at: T0 - 30_000, threads: 41 }] };
    const d1 = decide(
      signals({ now: T0, overCapAnswers: 20, completionRate: 1.4, meanSolveMs: 15_000 }, { ceiling: 50, inFlight: 30 }),
      s0,
      c,
    );
    expect(d1.state.effectiveCap).toBe(21);
    const atCap = decide(signals({ now: T0 + span }, { ceiling: 21, inFlight: 21 }), d1.state, c);
    const probe = decide(signals({ now: T0 + span + span / 2 }, { ceiling: 21, inFlight: 21 }), atCap.state, c);
    expect(probe.reason.code).toBe('OVER_CAP_PROBE');
    expect(probe.state.effectiveCap).toBe(31); // 21 + ⌈(40 − 21) / 2⌉
  });

  it('holds on a missing signal instead of reading it as zero', () => {
    for (const missing of [
      { balance: undefined },
      { errorRate: undefined },
      { overCapAnswers: undefined },
      { accountErrors: undefined },
    ]) {
      const d = decide(signals(missing, { ceiling: 3 }), state0, cfg);
      expect(d.reason.code).toBe('HOLD_MISSING_SIGNAL');
      expect(d.ceilings.normal).toBe(3);
    }
    const noBacklog = decide(signals({}, { ceiling: 3, backlog: undefined }), state0, cfg);
    expect(noBacklog.reason.code).toBe('HOLD_MISSING_SIGNAL');
    expect(noBacklog.reason.message).toContain('normal backlog');
  });

  it('reports the capacity shortfall and warns past the usual thresholds', () => {
    // 2 tasks/s × 10 s = 20 threads for arrivals + 600 queued × 10 s / 60 s = 100 more.
    const d = decide(signals({ meanSolveMs: 10_000 }, { arrivalRate: 2, backlog: 600, inFlight: 8 }), state0, cfg);
    expect(d.neededThreads).toBe(120);
    expect(d.shortfall).toBe(112);
    expect(d.shortfallWarning).toBe(true);
    expect(d.drainSeconds).toBe(Number.POSITIVE_INFINITY); // 0.8 solves/s < 2 arrivals/s
    const fine = decide(signals({ meanSolveMs: 10_000 }, { arrivalRate: 0.1, backlog: 10, inFlight: 2 }), state0, cfg);
    expect(fine.shortfall).toBe(0);
    expect(fine.shortfallWarning).toBe(false);
    expect(fine.drainSeconds).toBeCloseTo(10 / 0.7, 5);
  });

  describe('two lanes', () => {
    const c2 = config({ highLane: true }, { planThreads: 20 });
    const s0 = initialState(c2, T0);
    const two = (
      high: Partial<LaneSignals>,
      normal: Partial<LaneSignals> = {},
      extra: Partial<GovernorSignals> = {},
    ) => ({
      ...signals(extra, { ceiling: 20, ...normal }),
      lanes: { normal: lane({ ceiling: 20, ...normal }), high: lane({ ceiling: 2, enabled: false, ...high }) },
    });

    it('gives the normal lane everything while the high lane is empty', () => {
      const d = decide(two({ backlog: 0, inFlight: 0, arrivalRate: 0 }), s0, c2);
      expect(d.enabled).toEqual({ normal: true, high: false });
      expect(d.ceilings.normal).toBe(20);
    });

    it('gives the high lane what its work needs first, normal the rest', () => {
      const d = decide(two({ backlog: 5, inFlight: 0, arrivalRate: 0 }), s0, c2);
      expect(d.enabled).toEqual({ normal: true, high: true });
      expect(d.ceilings.high).toBe(5);
      expect(d.ceilings.normal).toBe(15);
      const floor = decide(two({ backlog: 1, inFlight: 0, arrivalRate: 0 }), s0, c2);
      expect(floor.ceilings.high).toBe(2);
      const all = decide(two({ backlog: 50, inFlight: 0, arrivalRate: 0 }), s0, c2);
      expect(all.ceilings.high).toBe(20);
      expect(all.enabled.normal).toBe(false);
    });

    it('keeps the high lane share first when scaling halts', () => {
      const d = decide(
        two({ backlog: 10, inFlight: 3, enabled: true, ceiling: 3 }, { ceiling: 10, inFlight: 7 }, { balance: 0.5 }),
        s0,
        c2,
      );
      expect(d.reason.code).toBe('HALT_LOW_BALANCE');
      expect(total(d)).toBe(10);
      expect(d.ceilings.high).toBe(10);
      expect(d.enabled.normal).toBe(false);
    });
  });
});

// ---- properties -------------------------------------------------------------------------------

const maybe = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined });

const laneArb = fc.record({
  backlog: maybe(fc.nat(5000)),
  inFlight: maybe(fc.nat(1000)),
  delayed: maybe(fc.nat(100)),
  oldestAgeSeconds: maybe(fc.nat(10_000)),
  arrivalRate: maybe(fc.double({ min: 0, max: 100, noNaN: true })),
  ceiling: fc.integer({ min: 2, max: 1000 }),
  enabled: fc.boolean(),
});

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

/** A state some earlier ticks may have left: shrunk caps, pauses, probes. */
const stateArb = (cfg: GovernorConfig) =>
  fc
    .record({
      capShare: fc.double({ min: 0, max: 1, noNaN: true }),
      lastChangeAgo: fc.nat(600_000),
      lastProbeAgo: fc.nat(600_000),
      lastShrinkAgo: maybe(fc.nat(600_000)),
      paused: maybe(fc.constantFrom('balance', 'account')),
      pausedAgo: fc.nat(600_000),
      outageTicks: fc.nat(5),
      probeCeiling: maybe(fc.integer({ min: 2, max: 200 })),
      resumedAgo: maybe(fc.nat(600_000)),
      recentUse: fc.array(fc.record({ ago: fc.nat(600_000), threads: fc.nat(400) }), { maxLength: 20 }),
      haltCeiling: maybe(fc.integer({ min: 2, max: 300 })),
      balanceSeen: maybe(fc.record({ ago: fc.nat(60_000), usd: fc.double({ min: 0, max: 100, noNaN: true }) })),
      spendPerSecond: maybe(fc.double({ min: 0, max: 1, noNaN: true })),
      provenThreads: maybe(fc.nat(300)),
      refusedThreads: maybe(fc.nat(400)),
      unprovenProbeAgo: maybe(fc.nat(600_000)),
      probeBackoff: maybe(fc.constantFrom(2, 4, 8, 16)),
      failedProbeCap: maybe(fc.nat(300)),
    })
    .map((s) => (now: number): GovernorState => {
      const base = initialState(cfg, now - 1_000_000);
      return {
        ...base,
        effectiveCap: Math.max(capFloor(cfg), Math.round(planCap(cfg) * s.capShare)),
        lastChangeAt: now - s.lastChangeAgo,
        lastProbeAt: now - s.lastProbeAgo,
        lastShrinkAt: s.lastShrinkAgo === undefined ? undefined : now - s.lastShrinkAgo,
        pausedReason: s.paused,
        pausedSince: s.paused === undefined ? undefined : now - s.pausedAgo,
        outageTicks: s.outageTicks,
        probeCeiling: s.probeCeiling,
        probeReason: s.probeCeiling === undefined ? undefined : 'outage',
        resumedAt: s.resumedAgo === undefined ? undefined : now - s.resumedAgo,
        recentUse: s.recentUse.map((u) => ({ at: now - u.ago, threads: u.threads })).sort((a, b) => a.at - b.at),
        haltCeiling: s.haltCeiling,
        balanceSeen: s.balanceSeen === undefined ? undefined : { at: now - s.balanceSeen.ago, usd: s.balanceSeen.usd },
        spendPerSecond: s.spendPerSecond,
        provenThreads: s.provenThreads,
        refusedThreads: s.refusedThreads,
        unprovenProbeAt: s.unprovenProbeAgo === undefined ? undefined : now - s.unprovenProbeAgo,
        probeBackoff: s.probeBackoff,
        failedProbeCap: s.failedProbeCap,
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
        expect(total(d) * cfg.tasksPerInvocation).toBeLessThanOrEqual(d.state.effectiveCap);
        expect(d.state.effectiveCap).toBeLessThanOrEqual(planCap(cfg));
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
        const erroring = sig.errorRate !== undefined && sig.errorRate > cfg.errorRateThreshold;
        fc.pre(low || erroring);
        const d = decide(sig, mkState(sig.now), cfg);
        // The minimum may lift a fleet that stood below it (e.g. re-enabled after a pause).
        expect(total(d)).toBeLessThanOrEqual(Math.max(enabledTotal(sig, cfg), ceilingFor(capFloor(cfg), cfg)));
        if (low) expect(d.state.effectiveCap).toBeLessThanOrEqual(mkState(sig.now).effectiveCap);
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
