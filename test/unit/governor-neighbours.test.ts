import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  capFromEstimate,
  lowerBoundAt,
  updateEstimate,
  type NeighbourEstimate,
} from '../../functions/core/governor/neighbours.js';
import type { ThreadLedgerReading } from '../../functions/core/thread-ledger.js';

const T0 = 1_700_000_000_000;
const PLAN = 10;
const DECAY = 6_000;
const cfg = { planThreads: PLAN, decayMs: DECAY };
const capCfg = { ...cfg, spareThreads: 1 };

function reading(overrides: Partial<ThreadLedgerReading> = {}): ThreadLedgerReading {
  return { held: 0, refusals: 0, acceptances: 0, ...overrides };
}

describe('neighbour estimate: bounds', () => {
  it('takes a refusal while holding h as others holding at least plan − h', () => {
    // Act
    const e = updateEstimate(undefined, reading({ refusals: 1, lastRefusal: { at: T0, held: 6 } }), T0, cfg);
    // Assess
    expect(lowerBoundAt(e, T0, cfg)).toBe(4);
    expect(capFromEstimate(e, T0, capCfg)).toBe(6);
  });

  it('takes an acceptance while holding h as others holding at most plan − h − 1', () => {
    // Prepare: a refusal at 4 held said others ≥ 6; then time passed and the bound widened
    const refused = updateEstimate(undefined, reading({ refusals: 1, lastRefusal: { at: T0, held: 4 } }), T0, cfg);
    const later = T0 + 3 * DECAY;
    // Act: accepted while holding 5
    const e = updateEstimate(
      refused,
      reading({ refusals: 1, acceptances: 1, lastAcceptance: { at: later, held: 5 } }),
      later,
      cfg,
    );
    // Assess
    expect(e.upper).toBe(4);
  });

  it('is tight when a refusal and an acceptance agree: the cap is exactly the free threads', () => {
    // Act: refused at 6 held, accepted at 5 held ⇒ others are exactly 4
    const e = updateEstimate(
      undefined,
      reading({
        refusals: 1,
        acceptances: 1,
        lastRefusal: { at: T0, held: 6 },
        lastAcceptance: { at: T0, held: 5 },
      }),
      T0,
      cfg,
    );
    // Assess
    expect([lowerBoundAt(e, T0, cfg), e.upper]).toEqual([4, 4]);
    expect(capFromEstimate(e, T0, capCfg)).toBe(6);
  });

  it('starts at the whole plan before any refusal', () => {
    const e = updateEstimate(undefined, reading({ acceptances: 3, lastAcceptance: { at: T0, held: 2 } }), T0, cfg);
    expect(capFromEstimate(e, T0, capCfg)).toBe(PLAN);
  });

  it('counts an answer once: the same reading twice changes nothing', () => {
    // Prepare
    const r = reading({ refusals: 1, lastRefusal: { at: T0, held: 6 } });
    const once = updateEstimate(undefined, r, T0, cfg);
    // Act: a confirming read later must not reset the decay
    const twice = updateEstimate(once, r, T0 + DECAY, cfg);
    // Assess
    expect(lowerBoundAt(twice, T0 + DECAY, cfg)).toBe(3);
  });

  it('lets a refusal win over an acceptance that claims fewer neighbours', () => {
    // Prepare: refusal says others ≥ 4
    const e0 = updateEstimate(undefined, reading({ refusals: 1, lastRefusal: { at: T0, held: 6 } }), T0, cfg);
    // Act: an acceptance at 7 held (its count includes answers not read yet) says others ≤ 2
    const e = updateEstimate(
      e0,
      reading({ refusals: 1, acceptances: 1, lastAcceptance: { at: T0 + 1, held: 7 } }),
      T0 + 1,
      cfg,
    );
    // Assess
    expect(capFromEstimate(e, T0 + 1, capCfg)).toBe(6);
  });

  it('raises the estimate at once when neighbours take more (a refusal above the upper bound)', () => {
    // Prepare: others were exactly 4
    const e0 = updateEstimate(
      undefined,
      reading({ refusals: 1, acceptances: 1, lastRefusal: { at: T0, held: 6 }, lastAcceptance: { at: T0, held: 5 } }),
      T0,
      cfg,
    );
    // Act: refused while holding only 3
    const e = updateEstimate(
      e0,
      reading({ refusals: 2, acceptances: 1, lastRefusal: { at: T0 + 500, held: 3 } }),
      T0 + 500,
      cfg,
    );
    // Assess
    expect(capFromEstimate(e, T0 + 500, capCfg)).toBe(3);
  });
});

describe('neighbour estimate: decay and the spare probe', () => {
  it('widens the lower bound by 1, 3, 7 threads after 1, 2, 3 quiet periods', () => {
    const e = updateEstimate(undefined, reading({ refusals: 1, lastRefusal: { at: T0, held: 2 } }), T0, cfg);
    expect([1, 2, 3].map((k) => lowerBoundAt(e, T0 + k * DECAY, cfg))).toEqual([7, 5, 1]);
  });

  it('waits for enough accepted submissions as well as time before it widens', () => {
    // Prepare: others ≥ 4, refused when 100 submissions had been accepted; probing allowed once per 50
    const gated = { ...cfg, acceptancesPerProbe: 50 };
    const e0 = updateEstimate(
      undefined,
      reading({ refusals: 1, acceptances: 100, lastRefusal: { at: T0, held: 6 } }),
      T0,
      gated,
    );
    const later = T0 + 5 * DECAY;
    // Act: five periods later, 49 and then 50 more accepted
    const fewer = updateEstimate(e0, reading({ refusals: 1, acceptances: 149 }), later, gated);
    const enough = updateEstimate(e0, reading({ refusals: 1, acceptances: 150 }), later, gated);
    // Assess
    expect(lowerBoundAt(fewer, later, gated)).toBe(4);
    expect(lowerBoundAt(enough, later, gated)).toBe(3);
  });

  it('probes with one spare invocation once the lower bound has widened', () => {
    // Prepare: exactly 4 others
    const e = updateEstimate(
      undefined,
      reading({ refusals: 1, acceptances: 1, lastRefusal: { at: T0, held: 6 }, lastAcceptance: { at: T0, held: 5 } }),
      T0,
      cfg,
    );
    // Act / Assess: 6 before a period, 6 + 1 spare after it, never more while the upper bound stands
    expect(capFromEstimate(e, T0 + DECAY - 1, capCfg)).toBe(6);
    expect(capFromEstimate(e, T0 + DECAY, capCfg)).toBe(7);
    expect(capFromEstimate(e, T0 + 3 * DECAY, capCfg)).toBe(7);
  });

  it('restarts the decay when a refused probe confirms the decayed level', () => {
    // Prepare: others ≥ 4, one period later the bound reads 3
    const e0 = updateEstimate(undefined, reading({ refusals: 1, lastRefusal: { at: T0, held: 6 } }), T0, cfg);
    const t = T0 + DECAY;
    // Act: the spare is refused while holding 7 ⇒ others ≥ 3, the level the bound had decayed to
    const e = updateEstimate(e0, reading({ refusals: 2, lastRefusal: { at: t, held: 7 } }), t, cfg);
    // Assess: decay counts from the confirmation (3 − 1 one period later), not from the first refusal (4 − 3)
    expect(lowerBoundAt(e, t + DECAY, cfg)).toBe(2);
  });

  it('climbs on accepted probes, and stops at a refused one (which restarts the decay)', () => {
    // Prepare: 4 others, then they leave; three periods pass
    let e = updateEstimate(
      undefined,
      reading({ refusals: 1, acceptances: 1, lastRefusal: { at: T0, held: 6 }, lastAcceptance: { at: T0, held: 5 } }),
      T0,
      cfg,
    );
    const t = T0 + 3 * DECAY;
    // Act: the spare is accepted while holding 6 ⇒ others ≤ 3; then while holding 7 ⇒ others ≤ 2
    e = updateEstimate(e, reading({ refusals: 1, acceptances: 2, lastAcceptance: { at: t, held: 6 } }), t, cfg);
    const afterFirst = capFromEstimate(e, t, capCfg);
    e = updateEstimate(e, reading({ refusals: 1, acceptances: 3, lastAcceptance: { at: t + 1, held: 7 } }), t + 1, cfg);
    const afterSecond = capFromEstimate(e, t + 1, capCfg);
    // ...then the next spare is refused while holding 8 ⇒ others ≥ 2
    e = updateEstimate(e, reading({ refusals: 2, acceptances: 3, lastRefusal: { at: t + 2, held: 8 } }), t + 2, cfg);
    // Assess
    expect([afterFirst, afterSecond, capFromEstimate(e, t + 2, capCfg)]).toEqual([8, 9, 8]);
    expect(capFromEstimate(e, t + 2 + DECAY, capCfg)).toBe(9);
  });
});

describe('neighbour estimate: properties', () => {
  const eventArb = fc.record({
    dt: fc.integer({ min: 0, max: 4 * DECAY }),
    refusal: fc.option(fc.nat(PLAN + 2), { nil: undefined }),
    acceptance: fc.option(fc.nat(PLAN + 2), { nil: undefined }),
  });

  function run(events: { dt: number; refusal?: number | undefined; acceptance?: number | undefined }[]) {
    let e: NeighbourEstimate | undefined;
    let now = T0;
    let refusals = 0;
    let acceptances = 0;
    const steps: { e: NeighbourEstimate; now: number; refusedAt?: number | undefined }[] = [];
    for (const ev of events) {
      now += ev.dt;
      if (ev.refusal !== undefined) refusals += 1;
      if (ev.acceptance !== undefined) acceptances += 1;
      const r = reading({
        refusals,
        acceptances,
        ...(ev.refusal !== undefined ? { lastRefusal: { at: now, held: ev.refusal } } : {}),
        ...(ev.acceptance !== undefined ? { lastAcceptance: { at: now, held: ev.acceptance } } : {}),
      });
      e = updateEstimate(e, r, now, cfg);
      steps.push({ e, now, refusedAt: ev.refusal });
    }
    return steps;
  }

  it('never allows more than plan − the lower bound of others', () => {
    fc.assert(
      fc.property(
        fc.array(eventArb, { minLength: 1, maxLength: 40 }),
        fc.integer({ min: 1, max: 5 }),
        (events, spare) => {
          for (const { e, now } of run(events)) {
            const cap = capFromEstimate(e, now, { ...cfg, spareThreads: spare });
            expect(cap).toBeLessThanOrEqual(PLAN - lowerBoundAt(e, now, cfg));
            expect(cap).toBeGreaterThanOrEqual(0);
          }
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('right after a refusal while holding h, allows no more than h', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { minLength: 1, maxLength: 40 }), (events) => {
        for (const { e, now, refusedAt } of run(events)) {
          if (refusedAt !== undefined) expect(capFromEstimate(e, now, capCfg)).toBeLessThanOrEqual(refusedAt);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('never lets the lower bound grow without a refusal, and keeps upper ≥ lower', () => {
    fc.assert(
      fc.property(fc.array(eventArb, { minLength: 2, maxLength: 40 }), (events) => {
        const steps = run(events);
        for (let i = 1; i < steps.length; i++) {
          const before = steps[i - 1] as (typeof steps)[number];
          const after = steps[i] as (typeof steps)[number];
          if (after.refusedAt === undefined)
            expect(lowerBoundAt(after.e, after.now, cfg)).toBeLessThanOrEqual(lowerBoundAt(before.e, before.now, cfg));
          expect(after.e.upper).toBeGreaterThanOrEqual(lowerBoundAt(after.e, after.now, cfg));
        }
      }),
      { numRuns: 2000 },
    );
  });
});
