/**
 * Outage = pause, not attrition: the availability stage (one record per dependency: the solver
 * and the stores the loop reports), its place in the pipeline, the probe every tick and the
 * resume at the pre-outage ceiling, and the account pause's cause. Properties over decide(): an
 * outage always pauses within `outageTicks` ticks whatever else is missing, the pre-outage
 * ceiling is back on the first tick every dependency answers, a pause never enables a lane, and
 * no sequence of ticks sets the ceiling above the cap.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  PIPELINE,
  capFloor,
  decide,
  governorConfigFrom,
  carriedThreads,
  initialState,
  minimumCeiling,
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
import { balanceReadBefore, governorSignals, T0 } from '../helpers/governor.js';
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
  const decisions = run(balanceReadBefore(initialState(cfg, T0)), cfg.outageTicks, () => NO_ANSWER);
  const decision = decisions.at(-1) as Decision;
  return { decision, at: T0 + (cfg.outageTicks - 1) * TICK };
}

/** The state after `outageTicks` ticks of no answer while the fleet held all 8 threads (p95 solve 20 s): paused for the outage. */
function pausedAtFullPlan(c: GovernorConfig): GovernorState {
  const full = { held: 8, refusals: 0, acceptances: 100 };
  let state = balanceReadBefore(initialState(c, T0));
  for (let i = 0; i < c.outageTicks; i++)
    state = decide(
      signals({ now: T0 + i * TICK, ...NO_ANSWER, threadLedger: full, p95SolveMs: 20_000 }, { ceiling: 8 }),
      state,
      c,
    ).state;
  return state;
}

describe('outage guard', () => {
  it('pauses after outageTicks ticks of mostly transient answers, every lane disabled', () => {
    // Act
    const decisions = run(initialState(cfg, T0), cfg.outageTicks, () => MOSTLY_TRANSIENT);
    // Assess: transient answers are the outage's evidence, not a reason to hold (the error rate less them is 0)
    expect(decisions.slice(0, -1).every((d) => !d.paused && d.reason.code !== 'HIGH_ERROR_RATE')).toBe(true);
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
    const decisions = run(balanceReadBefore(initialState(cfg, T0)), cfg.outageTicks, () => missingToo);
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
    const decisions = run(balanceReadBefore(initialState(cfg, T0)), 10, () => ({
      balance: undefined,
      balanceError: { kind: 'account', code: 'ERROR_WRONG_USER_KEY' },
    }));
    // Assess: never an outage; the first refusal holds, the second in a row pauses for the account.
    expect(decisions.map((d) => d.reason.code)).toEqual([
      'HOLD_MISSING_SIGNAL',
      ...Array.from({ length: 9 }, () => 'PAUSE_ACCOUNT'),
    ]);
  });

  it('does not count a balance that is only missing (a reader that cannot tell why) as an outage', () => {
    // Act
    const decisions = run(balanceReadBefore(initialState(cfg, T0)), 10, () => ({ balance: undefined }));
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

  it('runs the stages in the order docs/governor.md gives', () => {
    // Prepare: the stage column of the table under "The pipeline".
    const doc = readFileSync(new URL('../../docs/governor.md', import.meta.url), 'utf8');
    const start = doc.indexOf('### The pipeline');
    const section = doc.slice(start, doc.indexOf('### ', start + 4));
    const documented = [...section.matchAll(/^\| \d+ \| `([\w-]+)` \|/gm)].map((m) => m[1]);
    // Assess
    expect(documented).toEqual([...PIPELINE]);
  });
});

describe('outage probe: every tick, back where it was', () => {
  it('probes every tick: the first balance read that answers resumes at the ceiling held before the outage', () => {
    // Prepare: running at 6 of 8 when the solver goes down.
    let state = balanceReadBefore(initialState(cfg, T0));
    let d: Decision | undefined;
    for (let i = 0; i < cfg.outageTicks; i++) {
      d = decide(signals({ now: T0 + i * TICK, ...NO_ANSWER }, { ceiling: 6 }), state, cfg);
      state = d.state;
    }
    const paused = d as Decision;
    const next = T0 + cfg.outageTicks * TICK;
    // Act: still down one tick, answering the next.
    const still = decide(signals({ now: next, ...NO_ANSWER }, { enabled: false }), paused.state, cfg);
    const back = decide(signals({ now: next + TICK }, { enabled: false }), still.state, cfg);
    // Assess
    expect(paused.reason.code).toBe('PAUSE_OUTAGE');
    expect(still.paused).toBe(true);
    expect(still.reason.message).toContain('probing again next tick');
    expect(back.reason.code).toBe('OUTAGE_PROBE');
    expect(back.paused).toBe(false);
    expect(back.ceilings.normal).toBe(6);
  });

  it('stays paused while the solves the solver paused through the outage fill the plan, then climbs back to the ceiling before it as they end', () => {
    // Prepare: the waiting design (the parked design's watch renews its leases: the next test)
    // running at 8 of 8, every thread held, p95 solve 20 s, when the solver goes down; the
    // outage outlasts the ledger's leases, so they age out of its count.
    const cfg = config({ parked: false });
    let state = pausedAtFullPlan(cfg);
    const aged = { held: 0, refusals: 0, acceptances: 100 };
    const back = T0 + 600_000;
    // Act: answering again from `back` on, a tick a second for 45 s.
    const decisions: Decision[] = [];
    let ceiling = 0;
    let enabled = false;
    for (let s = 0; s <= 45; s++) {
      const d = decide(signals({ now: back + s * 1000, threadLedger: aged }, { ceiling, enabled }), state, cfg);
      decisions.push(d);
      state = d.state;
      ceiling = d.ceilings.normal;
      enabled = !d.paused;
    }
    // Assess: no submission into a plan the solver still fills; the ceiling never opens threads the
    // line of the paused solves still counts, climbs as they end, and is back at 8 by 2 × p95.
    const first = decisions[0] as Decision;
    expect(first.paused).toBe(true);
    expect(first.reason.message).toContain('still works on the 8 solve(s) it paused');
    expect(first.reason.message).toContain('which fill the plan');
    // From 5 s on the line counts 7 of 8: one free, under the mapping's minimum of 2, still paused, and it says so.
    const second = decisions[5] as Decision;
    expect(second.paused).toBe(true);
    expect(second.reason.message).toContain(
      `leave room for 1 invocation(s), under the mapping's minimum concurrency of ${minimumCeiling(cfg)}`,
    );
    expect(second.reason.message).not.toContain('fill the plan');
    const resumedAt = decisions.findIndex((d) => !d.paused);
    expect(resumedAt).toBeGreaterThan(0);
    expect(decisions.slice(resumedAt).every((d) => !d.paused)).toBe(true);
    expect((decisions[resumedAt] as Decision).reason.code).toBe('OUTAGE_PROBE');
    for (const [s, d] of decisions.entries()) {
      const still = Math.ceil((8 * Math.max(0, 40 - s)) / 40);
      if (!d.paused) expect(d.ceilings.normal).toBeLessThanOrEqual(Math.max(minimumCeiling(cfg), 8 - still));
      if (s > 0 && !(decisions[s - 1] as Decision).paused)
        expect(d.ceilings.normal).toBeGreaterThanOrEqual((decisions[s - 1] as Decision).ceilings.normal);
    }
    // Before, the fleet stayed paused the whole 40 s; now it resumes once the line leaves the minimum.
    expect(resumedAt).toBeLessThan(40);
    expect((decisions[40] as Decision).ceilings.normal).toBe(8);
  });

  it('parked: resumes at the ceiling before the outage on the first tick the solver answers (the leases still count every solve it paused)', () => {
    // Prepare: the parked design running at 8 of 8 when the solver goes down; the watch renews
    // the leases the solver has not answered for, so they never age out. At the first answer the
    // leases hold 5: 3 dropped since the pause (a submission the outage refused, answers read).
    const parked = config({ parked: true });
    const state = pausedAtFullPlan(parked);
    expect(state.pause?.reason).toBe('outage');
    // Act
    const back = T0 + 600_000;
    const d = decide(
      signals({ now: back, threadLedger: { held: 5, refusals: 0, acceptances: 100 } }, { ceiling: 0, enabled: false }),
      state,
      parked,
    );
    // Assess: nothing carried beside the leases; the waiting design would hold 3 back as carried
    const waiting = decide(
      signals({ now: back, threadLedger: { held: 5, refusals: 0, acceptances: 100 } }, { ceiling: 0, enabled: false }),
      state,
      config({ parked: false }),
    );
    expect(d.paused).toBe(false);
    expect(d.reason.code).toBe('OUTAGE_PROBE');
    expect(d.ceilings.normal).toBe(8);
    expect(d.state.overCap.carried).toBeUndefined();
    expect(waiting.state.overCap.carried?.threads).toBe(3);
  });

  it('does not pause for a blip shorter than outageTicks ticks (the retries absorb it)', () => {
    // Act: down for outageTicks − 1 ticks, then up.
    const decisions = run(balanceReadBefore(initialState(cfg, T0)), cfg.outageTicks + 3, (i) =>
      i < cfg.outageTicks - 1 ? NO_ANSWER : {},
    );
    // Assess
    expect(decisions.some((d) => d.paused)).toBe(false);
  });

  it("does not count the metric window's transient share while it covers a failed balance read", () => {
    // Prepare: a blip of outageTicks − 1 ticks, then the balance answers while the lagging window still shows it.
    const decisions = run(balanceReadBefore(initialState(cfg, T0)), cfg.outageTicks + 4, (i) =>
      i < cfg.outageTicks - 1 ? NO_ANSWER : MOSTLY_TRANSIENT,
    );
    // Assess
    expect(decisions.some((d) => d.paused)).toBe(false);
  });

  it('pauses for a store the loop reports down, each dependency with its own record, and resumes when all answer', () => {
    // Prepare
    const storeDown = { dependencies: [{ name: 'governor-state', down: true, detail: 'ThrottlingException' }] };
    const decisions = run(initialState(cfg, T0), cfg.outageTicks, () => storeDown);
    const paused = decisions.at(-1) as Decision;
    const at = T0 + cfg.outageTicks * TICK;
    // Act
    const solverUpStoreDown = decide(signals({ now: at, ...storeDown }, { enabled: false }), paused.state, cfg);
    const allUp = decide(
      signals({ now: at + TICK, dependencies: [{ name: 'governor-state', down: false }] }, { enabled: false }),
      solverUpStoreDown.state,
      cfg,
    );
    // Assess
    expect(paused.reason.code).toBe('PAUSE_OUTAGE');
    expect(paused.reason.message).toContain('governor-state');
    expect(paused.state.availability['governor-state']?.ticks).toBe(cfg.outageTicks);
    expect(paused.state.availability.solver?.ticks).toBe(0);
    expect(solverUpStoreDown.paused).toBe(true);
    expect(allUp.paused).toBe(false);
  });

  it('turns into a money pause when the solver answers again but the balance is under the pause level', () => {
    // Prepare
    const { decision, at } = pausedForOutage();
    // Act
    const poor = decide(signals({ now: at + TICK, balance: 0.05 }, { enabled: false }), decision.state, cfg);
    // Assess
    expect(poor.paused).toBe(true);
    expect(poor.reason.code).toBe('PAUSE_LOW_BALANCE');
    expect(poor.state.pause?.reason).toBe('balance');
  });
});

describe('the solves an outage paused, as the governor counts them after it', () => {
  /** Share of solves caught at a random point of their run still running t after it resumed: E[(S − t)+] / E[S], S log-normal. */
  function stillRunning(median: number, p95: number, t: number): number {
    const sigma = Math.log(p95 / median) / 1.6448536269514722;
    const mean = median * Math.exp((sigma * sigma) / 2);
    if (t <= 0) return 1;
    const d1 = (Math.log(median / t) + sigma * sigma) / sigma;
    return (mean * normalCdf(d1) - t * normalCdf(d1 - sigma)) / mean;
  }
  function normalCdf(x: number): number {
    // Abramowitz and Stegun 7.1.26 on erf, |error| < 1.5e-7.
    const z = Math.abs(x) / Math.SQRT2;
    const k = 1 / (1 + 0.3275911 * z);
    const poly = k * (0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (-1.453152027 + k * 1.061405429))));
    const erf = 1 - poly * Math.exp(-z * z);
    return x >= 0 ? (1 + erf) / 2 : (1 - erf) / 2;
  }

  it('counts all of them when the solver answers again, none from the bound on, fewer between, never more than all', () => {
    const carried = { threads: 40, since: 1_000, until: 41_000 };
    expect(carriedThreads(carried, 1_000)).toBe(40);
    expect(carriedThreads(carried, 21_000)).toBe(20);
    expect(carriedThreads(carried, 40_999)).toBe(1);
    expect(carriedThreads(carried, 41_000)).toBe(0);
    expect(carriedThreads(carried, 0)).toBe(40);
    expect(carriedThreads(undefined, 0)).toBe(0);
    // A state kept before `since` was: all of them until the bound, as then.
    expect(carriedThreads({ threads: 40, until: 41_000 }, 40_000)).toBe(40);
  });

  it('is an upper bound on those still running, for any solve-time mix the lab draws, up to what outlasts twice the p95', () => {
    fc.assert(
      fc.property(
        fc.double({ min: 1, max: 120, noNaN: true }),
        fc.double({ min: 1.05, max: 8, noNaN: true }),
        fc.integer({ min: 1, max: 1_000 }),
        (median, spread, threads) => {
          const p95 = median * spread;
          const until = 2 * p95 * 1000;
          const tail = stillRunning(median, p95, 2 * p95);
          for (let k = 0; k <= 50; k++) {
            const t = (until * k) / 50;
            const counted = carriedThreads({ threads, since: 0, until }, t);
            // Still running in expectation: under the line, less at most the share that outlasts the bound.
            expect(threads * stillRunning(median, p95, t / 1000)).toBeLessThanOrEqual(counted + threads * tail + 1e-6);
          }
          // What outlasts twice the p95 is small: under 8 % of them even with a p95 8 × the median.
          expect(tail).toBeLessThan(0.08);
        },
      ),
    );
    // The lab's mixes (a p95 up to about 5 × the median): under 3 %.
    expect(stillRunning(20, 100, 200)).toBeLessThan(0.03);
    expect(stillRunning(20, 40, 80)).toBeLessThan(0.001);
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
      pause: maybe(fc.constantFrom('balance' as const, 'account' as const, 'outage' as const, 'threads' as const)),
      pausedAgo: fc.nat(600_000),
      resumeTotal: maybe(fc.integer({ min: 2, max: 300 })),
      recovery: fc.boolean(),
      resumedAgo: maybe(fc.nat(600_000)),
      outageTicks: fc.nat(6),
      lastDownAgo: maybe(fc.nat(600_000)),
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
                ...(s.pause === 'outage' && s.resumeTotal !== undefined ? { resumeTotal: s.resumeTotal } : {}),
              },
        resumedAt: s.resumedAgo === undefined ? undefined : now - s.resumedAgo,
        probe: { lastAt: now - 1000, recovery: s.recovery ? { ceiling: 2, reason: 'resume' } : undefined },
        overCap: { effectiveCap: Math.max(capFloor(c), Math.round(planCap(c) * s.capShare)) },
        availability: {
          solver: {
            ticks: s.outageTicks,
            ...(s.lastDownAgo === undefined ? {} : { lastDownAt: now - s.lastDownAgo }),
          },
        },
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
  it('is back at the pre-outage ceiling on the first tick every dependency answers, however long the outage', () => {
    fc.assert(
      fc.property(
        configArb,
        fc.integer({ min: 0, max: 200 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (c, extra, share) => {
          // Prepare: running at some ceiling within the free threads, then down for outageTicks + extra ticks.
          const before = Math.max(2, Math.floor(c.maxConcurrency * share));
          let s = balanceReadBefore(initialState(c, T0));
          let ceiling = before;
          let enabled = true;
          let now = T0;
          const tick = (extraSignals: Partial<GovernorSignals>) => {
            const d = decide(signals({ now, ...extraSignals }, { ceiling, enabled }), s, c);
            s = d.state;
            ceiling = d.ceilings.normal;
            enabled = d.enabled.normal;
            now += c.tickMs ?? 1000;
            return d;
          };
          const down = Array.from({ length: c.outageTicks + extra }, () => tick(NO_ANSWER));
          // Act
          const back = tick({});
          // Assess: paused within outageTicks ticks; back at the ceiling it held before on the first answering tick.
          expect(down[c.outageTicks - 1]?.paused).toBe(true);
          expect(back.paused).toBe(false);
          expect(total(back)).toBe(before);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('is back at the ceiling it held before the outage under the halt level too, and through a hold on the resuming tick', () => {
    // Before: a hold on the tick the outage ended (the balance under the halt level, a signal
    // unknown, the error rate high) measured "no increase" from the paused mappings' nothing and
    // held the resume at the minimum; under the halt level for good (gen-s13-893-combined: a
    // 23-thread plan on 2 threads for the rest of its money, p95 × 3.60 of its floor).
    const holds = {
      halted: {},
      'signal unknown': { errorRate: undefined },
      'error rate high': { errorRate: 0.5, transientErrorRate: 0.5 },
    } as const;
    fc.assert(
      fc.property(
        configArb,
        fc.integer({ min: 0, max: 50 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.constantFrom(...(Object.keys(holds) as (keyof typeof holds)[])),
        (base, extra, share, hold) => {
          // Prepare: a price per solve learned; the balance under the halt level ($5 of $10, the
          // pause level $1) from the first tick when halted, and healthy otherwise.
          const c = { ...base, haltBalance: 10, pauseBalance: 1 };
          const balance = hold === 'halted' ? 5 : 50;
          const before = Math.max(2, Math.floor(c.maxConcurrency * share));
          const first = balanceReadBefore(initialState(c, T0));
          let s: GovernorState = { ...first, spend: { ...first.spend, learnedPriceUsd: 0.001 } };
          let ceiling = before;
          let enabled = true;
          let now = T0;
          const tick = (extraSignals: Partial<GovernorSignals>) => {
            const d = decide(signals({ now, balance, ...extraSignals }, { ceiling, enabled }), s, c);
            s = d.state;
            ceiling = d.ceilings.normal;
            enabled = d.enabled.normal;
            now += c.tickMs ?? 1000;
            return d;
          };
          // Halted, it runs a tick first: frozen where it stands (`before`) when the outage begins.
          const running = hold === 'halted' ? tick({}) : undefined;
          const down = Array.from({ length: c.outageTicks + extra }, () => tick(NO_ANSWER));
          // Act: every dependency answers, under the hold.
          const back = tick(holds[hold]);
          // Assess: paused, and resumed where it stood: an outage ends where it began.
          if (running !== undefined) expect(total(running)).toBe(before);
          expect(down[c.outageTicks - 1]?.paused).toBe(true);
          expect(back.paused).toBe(false);
          expect(total(back)).toBe(before);
          // The halt still holds: never above the ceiling it froze at.
          if (hold === 'halted') expect(total(tick({}))).toBeLessThanOrEqual(before);
        },
      ),
      { numRuns: 600 },
    );
  });

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
          // Prepare: running (not paused), no resume whose grace, nor failed balance read whose span, could hide the window.
          const before = mkState(T0);
          const ticks0 = before.availability.solver?.ticks ?? 0;
          const state = {
            ...before,
            pause: undefined,
            resumedAt: undefined,
            availability: { solver: { ticks: ticks0 } },
          };
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
