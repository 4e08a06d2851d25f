/**
 * Outage = pause, not attrition (issue 9 item 1): the outage guard, its place in the guard order,
 * the outage probe and its backoff, and the account pause's cause. Properties over decide():
 * an outage always pauses within `outageTicks` ticks whatever else is missing, a pause never
 * enables a lane, and no sequence of ticks sets the ceiling above the cap.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  GUARD_ORDER,
  capFloor,
  decide,
  governorConfigFrom,
  initialState,
  planCap,
} from '../../functions/core/governor/policy.js';
import { classifyBalanceError, createProbingBalance } from '../../functions/governor/balance-probe.js';
import { SolverAccountError, SolverTransientError } from '../../functions/core/solver-protocol.js';
import type {
  Decision,
  GovernorConfig,
  GovernorSignals,
  GovernorState,
  LaneSignals,
} from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { governorSignals, T0 } from '../helpers/governor.js';
import { laneArb, maybe } from '../helpers/governor-arbitraries.js';

function signals(overrides: Partial<GovernorSignals> = {}, normal: Partial<LaneSignals> = {}): GovernorSignals {
  return governorSignals(T0, overrides, normal);
}

/** What a tick of a solver that answers nothing looks like: the balance read got no answer. */
const NO_ANSWER: Partial<GovernorSignals> = {
  balance: undefined,
  balanceError: { kind: 'unreachable', code: 'HTTP_503' },
};

/** A consumer whose solver requests mostly answer transient errors (the balance still reads). */
const MOSTLY_TRANSIENT: Partial<GovernorSignals> = { errorRate: 0.9, transientErrorRate: 0.9 };

function config(overrides: Partial<GovernorConfig> = {}): GovernorConfig {
  return governorConfigFrom(resolveSettings({ tickMs: 1000, planThreads: 8 }), overrides);
}

const cfg = config();
const TICK = 1000;

/** Run ticks from `state`, one per `TICK`, each with `each(i)`'s signals; returns every decision. */
function run(
  state: GovernorState,
  count: number,
  each: (i: number) => Partial<GovernorSignals>,
  start = T0,
  c = cfg,
): Decision[] {
  const decisions: Decision[] = [];
  let s = state;
  let ceiling = s.ceilings.normal;
  let enabled = true;
  for (let i = 0; i < count; i++) {
    const d = decide(signals({ now: start + i * TICK, ...each(i) }, { ceiling, enabled }), s, c);
    decisions.push(d);
    s = d.state;
    ceiling = d.ceilings.normal;
    enabled = d.enabled.normal;
  }
  return decisions;
}

/** Paused for an outage at T0 + (outageTicks − 1) ticks. */
function pausedForOutage(): { decision: Decision; at: number } {
  const decisions = run(initialState(cfg, T0), cfg.outageTicks, () => NO_ANSWER);
  const decision = decisions.at(-1) as Decision;
  return { decision, at: T0 + (cfg.outageTicks - 1) * TICK };
}

describe('outage guard', () => {
  it('pauses after outageTicks ticks of mostly transient answers, every lane disabled', () => {
    // Act
    const decisions = run(initialState(cfg, T0), cfg.outageTicks, () => MOSTLY_TRANSIENT);
    // Assess
    expect(decisions.slice(0, -1).map((d) => d.reason.code)).toEqual(['HIGH_ERROR_RATE', 'HIGH_ERROR_RATE']);
    const last = decisions.at(-1) as Decision;
    expect(last.reason.code).toBe('PAUSE_OUTAGE');
    expect(last.paused).toBe(true);
    expect(last.enabled).toEqual({ normal: false, high: false });
    expect(last.state.pause?.reason).toBe('outage');
  });

  it('pauses after outageTicks ticks of a balance read that gets no answer, although signals are missing', () => {
    // Prepare: the old order held here (HOLD_MISSING_SIGNAL) and kept the mapping consuming.
    const missingToo = { ...NO_ANSWER, errorRate: undefined, transientErrorRate: undefined, overCapAnswers: undefined };
    // Act
    const decisions = run(initialState(cfg, T0), cfg.outageTicks, () => missingToo);
    // Assess
    expect(decisions.slice(0, -1).every((d) => d.reason.code === 'HOLD_MISSING_SIGNAL')).toBe(true);
    expect(decisions.at(-1)?.reason.code).toBe('PAUSE_OUTAGE');
    expect(decisions.at(-1)?.reason.message).toContain('HTTP_503');
  });

  it('does not take an idle fleet whose balance read answers for an outage', () => {
    // Act: no requests in the window (0 % transient), the balance answers.
    const decisions = run(initialState(cfg, T0), 10, () => ({ errorRate: 0, transientErrorRate: 0 }));
    // Assess
    expect(decisions.some((d) => d.paused)).toBe(false);
  });

  it('does not take a balance read the solver refused (key, IP) for an outage', () => {
    // Act
    const decisions = run(initialState(cfg, T0), 10, () => ({
      balance: undefined,
      balanceError: { kind: 'account', code: 'ERROR_WRONG_USER_KEY' },
    }));
    // Assess
    expect(decisions.every((d) => d.reason.code === 'HOLD_MISSING_SIGNAL')).toBe(true);
  });

  it('does not count a balance that is only missing (a reader that cannot tell why) as an outage', () => {
    // Act
    const decisions = run(initialState(cfg, T0), 10, () => ({ balance: undefined }));
    // Assess
    expect(decisions.some((d) => d.paused)).toBe(false);
  });
});

describe('guard order', () => {
  it('lets account errors win over an outage (the key is the safer thing to stop on)', () => {
    // Act
    const decisions = run(initialState(cfg, T0), cfg.outageTicks, () => ({
      ...NO_ANSWER,
      accountErrors: 2,
      accountErrorCode: 'ERROR_WRONG_USER_KEY',
    }));
    // Assess
    expect(decisions[0]?.reason.code).toBe('PAUSE_ACCOUNT');
    expect(decisions.every((d) => d.paused)).toBe(true);
  });

  it('lets an outage win over the halt on a low balance and over an over-cap shrink', () => {
    // Act: balance under the halt level, over-cap answers, and mostly transient answers.
    const decisions = run(initialState(cfg, T0), cfg.outageTicks, () => ({
      ...MOSTLY_TRANSIENT,
      balance: 0.5,
      overCapAnswers: 3,
    }));
    // Assess
    expect(decisions.at(-1)?.reason.code).toBe('PAUSE_OUTAGE');
  });

  it('keeps an outage pause while the balance cannot be read (the hold does not resume it)', () => {
    // Prepare
    const { decision, at } = pausedForOutage();
    // Act: a cooldown later, still no answer and other signals missing.
    const later = decide(
      signals({ now: at + cfg.probeCooldownMs, ...NO_ANSWER, errorRate: undefined }, { enabled: false }),
      decision.state,
      cfg,
    );
    // Assess
    expect(later.paused).toBe(true);
    expect(later.reason.code).toBe('PAUSE_OUTAGE');
  });

  it('asks the guards in the order docs/governor.md gives', () => {
    // Prepare: the guard column of the table under "Guard order".
    const doc = readFileSync(new URL('../../docs/governor.md', import.meta.url), 'utf8');
    const section = doc.slice(doc.indexOf('### Guard order'), doc.indexOf('### ', doc.indexOf('### Guard order') + 4));
    const documented = [...section.matchAll(/^\| \d+ \| `(\w+)` \|/gm)].map((m) => m[1]);
    // Act
    const inCode = GUARD_ORDER.map((guard) => guard.name);
    // Assess
    expect(documented).toEqual([...inCode, 'atFreeThreads']);
  });
});

describe('outage probe', () => {
  it('stays paused until the probe time even when the balance reads again', () => {
    // Prepare
    const { decision, at } = pausedForOutage();
    // Act
    const early = decide(signals({ now: at + TICK }, { enabled: false }), decision.state, cfg);
    // Assess
    expect(early.paused).toBe(true);
    expect(early.reason.message).toMatch(/probing the solver in \d+ s/);
  });

  it('resumes at the minimum when the probe (a balance read) answers, then doubles while healthy', () => {
    // Prepare
    const { decision, at } = pausedForOutage();
    const probeAt = decision.state.pause?.probeAt as number;
    // Act
    const resumed = decide(signals({ now: probeAt }, { enabled: false }), decision.state, cfg);
    const doubled = decide(
      signals({ now: probeAt + cfg.probeCooldownMs }, { ceiling: resumed.ceilings.normal }),
      resumed.state,
      cfg,
    );
    // Assess
    expect(probeAt - at).toBe(cfg.probeCooldownMs);
    expect(resumed.reason.code).toBe('OUTAGE_PROBE');
    expect(resumed.paused).toBe(false);
    expect(resumed.ceilings.normal).toBe(2);
    expect(doubled.reason.code).toBe('OUTAGE_PROBE');
    expect(doubled.ceilings.normal).toBe(4);
  });

  it('clears the failed probes once the recovery reaches the free threads', () => {
    // Prepare: one probe failed, the next one answers.
    const { decision } = pausedForOutage();
    const first = decision.state.pause?.probeAt as number;
    const failed = decide(signals({ now: first, ...NO_ANSWER }, { enabled: false }), decision.state, cfg);
    const second = failed.state.pause?.probeAt as number;
    const resumed = decide(signals({ now: second }, { enabled: false }), failed.state, cfg);
    // Act: healthy for two cooldowns and more: 2 → 4 → 8 (the free threads).
    const ticks = (2 * cfg.probeCooldownMs) / TICK + 1;
    const last = run(resumed.state, ticks, () => ({}), second + TICK).at(-1) as Decision;
    // Assess
    expect(failed.state.outage.failedProbes).toBe(1);
    expect(last.ceilings.normal).toBe(8);
    expect(last.state.probe.recovery).toBeUndefined();
    expect(last.state.outage.failedProbes).toBeUndefined();
  });

  /** Cooldowns between five failed probes in a row. */
  function failedProbeWaits(c: GovernorConfig): { waits: number[]; since: number | undefined; first: Decision } {
    const first = run(initialState(c, T0), c.outageTicks, () => NO_ANSWER, T0, c).at(-1) as Decision;
    let state = first.state;
    const waits: number[] = [];
    for (let probe = 0; probe < 5; probe++) {
      const at = state.pause?.probeAt as number;
      const d = decide(signals({ now: at, ...NO_ANSWER }, { enabled: false }), state, c);
      waits.push(((d.state.pause?.probeAt as number) - at) / c.probeCooldownMs);
      state = d.state;
    }
    return { waits, since: state.pause?.since, first };
  }

  it('waits twice the cooldown after failed probes by default (the cap: a failed probe costs one read)', () => {
    // Act
    const { waits, since, first } = failedProbeWaits(cfg);
    // Assess
    expect(waits).toEqual([2, 2, 2, 2, 2]);
    expect(since).toBe(first.state.pause?.since);
  });

  it('doubles the wait after each failed probe, up to maxOutageProbeBackoff × the cooldown', () => {
    // Act
    const { waits } = failedProbeWaits(config({ maxOutageProbeBackoff: 8 }));
    // Assess
    expect(waits).toEqual([2, 4, 8, 8, 8]);
  });

  it('pauses again at once, with a longer wait, when the first tasks after the probe fail', () => {
    // Prepare: resumed by the probe; past the grace the window shows the probe tasks failing.
    const { decision } = pausedForOutage();
    const probeAt = decision.state.pause?.probeAt as number;
    const resumed = decide(signals({ now: probeAt }, { enabled: false }), decision.state, cfg);
    const afterGrace = probeAt + cfg.probeCooldownMs;
    // Act
    const failed = decide(signals({ now: afterGrace, ...MOSTLY_TRANSIENT }, { ceiling: 2 }), resumed.state, cfg);
    // Assess
    expect(failed.reason.code).toBe('PAUSE_OUTAGE');
    expect(failed.reason.message).toContain('the first tasks after the probe failed');
    expect(failed.state.outage.failedProbes).toBe(1);
    expect(failed.state.pause?.probeAt).toBe(afterGrace + 2 * cfg.probeCooldownMs);
  });

  it('ignores transient answers from before the pause during the grace after a resume', () => {
    // Prepare
    const { decision } = pausedForOutage();
    const probeAt = decision.state.pause?.probeAt as number;
    const resumed = decide(signals({ now: probeAt }, { enabled: false }), decision.state, cfg);
    // Act: the window still shows the outage, one tick after the resume.
    const stale = decide(signals({ now: probeAt + TICK, ...MOSTLY_TRANSIENT }, { ceiling: 2 }), resumed.state, cfg);
    // Assess
    expect(stale.paused).toBe(false);
  });

  it('turns into a money pause when the solver answers again but the balance is under the pause level', () => {
    // Prepare
    const { decision } = pausedForOutage();
    // Act
    const poor = decide(
      signals({ now: decision.state.pause?.probeAt as number, balance: 0.05 }, { enabled: false }),
      decision.state,
      cfg,
    );
    // Assess
    expect(poor.paused).toBe(true);
    expect(poor.reason.code).toBe('PAUSE_LOW_BALANCE');
    expect(poor.state.pause?.reason).toBe('balance');
  });
});

describe('account pause names the cause', () => {
  it.each([
    [{ accountErrorCode: 'ERROR_WRONG_USER_KEY' }, 'key rejected (ERROR_WRONG_USER_KEY)'],
    [{ accountErrorCode: 'ERROR_KEY_DOES_NOT_EXIST' }, 'key rejected (ERROR_KEY_DOES_NOT_EXIST)'],
    [{ accountErrorCode: 'IP_BANNED' }, 'IP banned (IP_BANNED)'],
    [{ accountErrorCode: 'ERROR_IP_NOT_ALLOWED' }, 'IP banned (ERROR_IP_NOT_ALLOWED)'],
    [{ accountErrorCode: 'ERROR_ZERO_BALANCE' }, 'key unusable (ERROR_ZERO_BALANCE)'],
    // CloudWatch and the local store carry counts only: the balance read's refusal names it.
    [{ balance: undefined, balanceError: { kind: 'account' as const, code: 'IP_BANNED' } }, 'IP banned (IP_BANNED)'],
    [{}, 'key or IP refused (no error code seen)'],
  ])('from %o says %s', (seen, cause) => {
    // Act
    const d = decide(signals({ accountErrors: 1, ...seen }), initialState(cfg, T0), cfg);
    // Assess
    expect(d.reason.code).toBe('PAUSE_ACCOUNT');
    expect(d.reason.message).toContain(cause);
  });
});

describe('while paused for the account, the reason names what the balance read saw', () => {
  it.each([
    [
      { balanceError: { kind: 'account' as const, code: 'ERROR_WRONG_USER_KEY' } },
      'key rejected (ERROR_WRONG_USER_KEY)',
    ],
    [{ balanceError: { kind: 'unreachable' as const, code: 'HTTP_503' } }, 'solver unreachable (HTTP_503)'],
  ])('from %o says %s', (seen, cause) => {
    // Prepare: paused on a rejected key, one cooldown and more ago
    const paused = decide(
      signals({ accountErrors: 1, accountErrorCode: 'ERROR_WRONG_USER_KEY' }),
      initialState(cfg, T0),
      cfg,
    );
    const later = T0 + cfg.probeCooldownMs + TICK;
    // Act: the balance read still fails; the consumer, paused, answers nothing
    const d = decide(signals({ now: later, accountErrors: 0, balance: undefined, ...seen }), paused.state, cfg);
    // Assess
    expect(d.reason.code).toBe(paused.reason.code);
    expect(d.reason.message).toContain(cause);
    expect(d.reason.message).not.toContain('key rejected, IP banned or solver unreachable');
  });
});

describe('balance probe reader', () => {
  it('classifies a failed balance read by the solver error class', () => {
    // Act / Assess
    expect(classifyBalanceError(new SolverTransientError('HTTP_503'))).toEqual({
      kind: 'unreachable',
      code: 'HTTP_503',
    });
    expect(classifyBalanceError(new SolverAccountError('IP_BANNED'))).toEqual({
      kind: 'account',
      code: 'IP_BANNED',
    });
    expect(classifyBalanceError(new TypeError('bug'))).toEqual({ kind: 'other', code: 'TypeError' });
  });

  it('remembers why the last read failed for as long as the cache keeps the failure', async () => {
    // Prepare
    let now = 0;
    let answer: () => Promise<number> = () => Promise.reject(new SolverTransientError('REQUEST_TIMEOUT'));
    const reader = createProbingBalance({ getBalance: () => answer() }, { ttlMs: 1000, clock: () => now });
    // Act
    const failed = await reader.read();
    const whyFailed = reader.lastError();
    answer = () => Promise.resolve(12.5);
    now = 500;
    const cached = await reader.read();
    now = 1500;
    const fresh = await reader.read();
    // Assess
    expect(failed).toBeUndefined();
    expect(whyFailed).toEqual({ kind: 'unreachable', code: 'REQUEST_TIMEOUT' });
    expect(cached).toBeUndefined();
    expect(fresh).toBe(12.5);
    expect(reader.lastError()).toBeUndefined();
  });
});

// ---- properties -------------------------------------------------------------------------------

/** Anything else a tick may say, each signal possibly missing. */
const otherSignalsArb = fc.record({
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
});

const configArb = fc
  .record({
    planThreads: fc.integer({ min: 4, max: 300 }),
    tasksPerInvocation: fc.integer({ min: 1, max: 3 }),
    highLane: fc.boolean(),
    tickMs: fc.integer({ min: 100, max: 10_000 }),
    outageTicks: fc.integer({ min: 1, max: 6 }),
  })
  .filter((c) => Math.floor(c.planThreads / c.tasksPerInvocation) >= 2)
  .map((c) =>
    governorConfigFrom(
      resolveSettings({ planThreads: c.planThreads, tasksPerInvocation: c.tasksPerInvocation, tickMs: c.tickMs }),
      { highLane: c.highLane, outageTicks: c.outageTicks },
    ),
  );

/** A state earlier ticks may have left: any pause (or none), recovering or not, a shrunk cap. */
const stateArb = (c: GovernorConfig) =>
  fc
    .record({
      capShare: fc.double({ min: 0, max: 1, noNaN: true }),
      pause: maybe(fc.constantFrom('balance' as const, 'account' as const, 'outage' as const)),
      pausedAgo: fc.nat(600_000),
      probeIn: fc.integer({ min: -600_000, max: 600_000 }),
      recovery: maybe(fc.constantFrom('outage' as const, 'resume' as const)),
      resumedAgo: maybe(fc.nat(600_000)),
      outageTicks: fc.nat(6),
      failedProbes: maybe(fc.nat(5)),
    })
    .map((s) => (now: number): GovernorState => {
      const base = initialState(c, now - 1_000_000);
      return {
        ...base,
        pause:
          s.pause === undefined
            ? undefined
            : {
                reason: s.pause,
                since: now - s.pausedAgo,
                ...(s.pause === 'outage' ? { probeAt: now + s.probeIn } : {}),
              },
        resumedAt: s.resumedAgo === undefined ? undefined : now - s.resumedAgo,
        probe: {
          lastAt: now - 1000,
          recovery: s.recovery === undefined ? undefined : { ceiling: 2, reason: s.recovery },
        },
        overCap: { effectiveCap: Math.max(capFloor(c), Math.round(planCap(c) * s.capShare)) },
        outage: { ticks: s.outageTicks, failedProbes: s.failedProbes },
      };
    });

type OtherSignals = typeof otherSignalsArb extends fc.Arbitrary<infer T> ? T : never;

/** Ticks 1–120 s apart, each with its own other signals. */
const ticksArb = (length: fc.Arbitrary<number>) =>
  length.chain((n) =>
    fc.array(fc.tuple(otherSignalsArb, fc.integer({ min: 1, max: 120_000 })), { minLength: n, maxLength: n }),
  );

function runSequence(
  c: GovernorConfig,
  state: GovernorState,
  ticks: Array<[OtherSignals, number]>,
  shape: (other: OtherSignals) => Partial<GovernorSignals>,
): Decision[] {
  let now = T0;
  let s = state;
  const decisions: Decision[] = [];
  for (const [other, dt] of ticks) {
    now += dt;
    const d = decide({ ...(other as GovernorSignals), now, ...shape(other) }, s, c);
    decisions.push(d);
    s = d.state;
  }
  return decisions;
}

const total = (d: Decision) => (d.enabled.normal ? d.ceilings.normal : 0) + (d.enabled.high ? d.ceilings.high : 0);

describe('decide: outage properties', () => {
  it('pauses within outageTicks ticks of no answer, whatever else is missing, and stays paused', () => {
    fc.assert(
      fc.property(
        configArb.chain((c) => fc.tuple(fc.constant(c), stateArb(c), ticksArb(fc.integer({ min: 6, max: 12 })))),
        ([c, mkState, ticks]) => {
          // Act: every tick's balance read gets no answer; everything else is arbitrary.
          const decisions = runSequence(c, mkState(T0), ticks, () => NO_ANSWER);
          // Assess
          for (const d of decisions.slice(c.outageTicks - 1)) {
            expect(d.paused).toBe(true);
            expect(d.enabled).toEqual({ normal: false, high: false });
          }
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('pauses within outageTicks ticks of mostly transient answers in a running fleet', () => {
    fc.assert(
      fc.property(
        configArb.chain((c) => fc.tuple(fc.constant(c), stateArb(c), ticksArb(fc.integer({ min: 1, max: 6 })))),
        fc.double({ min: 0.51, max: 1, noNaN: true }),
        ([c, mkState, ticks], rate) => {
          // Prepare: running (not paused), no resume whose grace could hide the window.
          const state = { ...mkState(T0), pause: undefined, resumedAt: undefined };
          const sequence = ticks.slice(0, c.outageTicks);
          fc.pre(sequence.length === c.outageTicks);
          // Act
          const decisions = runSequence(c, state, sequence, () => ({ transientErrorRate: rate }));
          // Assess
          expect(decisions.some((d) => d.paused)).toBe(true);
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('never enables a lane while paused, keeps the lanes ceilings for the resume and records the pause', () => {
    fc.assert(
      fc.property(
        configArb.chain((c) => fc.tuple(fc.constant(c), stateArb(c), otherSignalsArb, fc.boolean())),
        ([c, mkState, other, noAnswer]) => {
          // Act
          const sig = { ...(other as GovernorSignals), now: T0, ...(noAnswer ? NO_ANSWER : {}) };
          const d = decide(sig, mkState(T0), c);
          // Assess
          expect(d.paused).toBe(d.state.pause !== undefined);
          if (d.paused) {
            expect(d.enabled).toEqual({ normal: false, high: false });
            expect(d.ceilings.normal).toBe(sig.lanes.normal.ceiling);
            for (const l of ['normal', 'high'] as const) expect(d.ceilings[l]).toBeGreaterThanOrEqual(2);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('never sets the ceiling above the cap through outages, probes and resumes', () => {
    fc.assert(
      fc.property(
        configArb.chain((c) =>
          fc.tuple(
            fc.constant(c),
            stateArb(c),
            ticksArb(fc.integer({ min: 5, max: 30 })),
            fc.array(fc.boolean(), { minLength: 30, maxLength: 30 }),
          ),
        ),
        ([c, mkState, ticks, down]) => {
          // Act: the solver comes and goes.
          let i = 0;
          const decisions = runSequence(c, mkState(T0), ticks, () => (down[i++] ? NO_ANSWER : {}));
          // Assess
          for (const d of decisions) {
            expect(total(d) * c.tasksPerInvocation).toBeLessThanOrEqual(d.state.overCap.effectiveCap);
            expect(d.state.overCap.effectiveCap).toBeLessThanOrEqual(planCap(c));
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});
