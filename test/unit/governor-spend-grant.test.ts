/**
 * The money side's spend grant (the account stage): with the price per solve learned from the
 * balance and the ledger's solved counter, the governor grants the consumers, every tick, exactly
 * the solves the money above the pause level pays for after every solve in flight is charged
 * (the fair floor's rule), and pauses once it pays for none. One row per
 * situation, then the price it learns, then a property over whole runs: no solve starts that the
 * money above the pause level does not pay for, and none the money pays for is left unstarted.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { decide, governorConfigFrom, initialState } from '../../functions/core/governor/policy.js';
import { GRANT_MIN_LIFETIME_MS } from '../../functions/core/governor/stage-account.js';
import { decideTick } from '../../functions/core/governor/tick.js';
import type { GovernorState, SpendState } from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';
import type { ThreadLedgerReading } from '../../functions/core/thread-ledger.js';
import { grantUsedUp } from '../../functions/core/thread-ledger.js';
import { countingPrice, type PriceSample, priceBound, withPriceSample } from '../../functions/core/governor/price.js';
import { enabledTotal, governorSignals, T0 } from '../helpers/governor.js';

const cfg = governorConfigFrom(resolveSettings({ tickMs: 10_000, planThreads: 8 }), { probeSubmissions: true });
const NOW = T0 + 10_000;
const PRICE = 0.002;

function stateWith(spend: Partial<SpendState>, pause?: GovernorState['pause']): GovernorState {
  const base = initialState(cfg, T0);
  return { ...base, spend: { ...base.spend, ...spend }, ...(pause ? { pause } : {}) };
}

function ledger(held: number, acceptances = 1000): ThreadLedgerReading {
  return { held, refusals: 0, acceptances, solved: acceptances - held };
}

/** A tick at NOW with `balance`, `held` solves in flight and the learned price in the state. */
function tick(balance: number, held: number | undefined, spend: Partial<SpendState>, pause?: GovernorState['pause']) {
  return decide(
    governorSignals(
      NOW,
      { balance, ...(held !== undefined ? { threadLedger: ledger(held) } : {}) },
      { inFlight: held ?? 5 },
    ),
    stateWith({ lastRead: { at: T0, usd: balance + 0.1 }, perSecond: 0.01, ...spend }, pause),
    cfg,
  );
}

// The price learned (and bounded: priceBound), and 40 solves started since the last read (the fleet's reach: 4 ticks of that).
const learned = { learnedPriceUsd: PRICE, priceBoundUsd: PRICE, solvedSeen: 1000 - 5, acceptedSeen: 1000 - 40 };

describe('the spend grant', () => {
  const rows = [
    {
      situation: 'money far above what the fleet could start before a grant lapses: no grant, the free threads',
      balance: 50,
      held: 5,
      spend: learned,
      code: 'FREE_THREADS',
      grant: undefined,
    },
    {
      situation: 'money within the fleet’s reach, the projection still above the pause level: the grant rides along',
      // ($0.40 − $0.10) / $0.002 = 150 solves, 5 of them in flight: 146 more, under 4 × 40.
      balance: 0.4,
      held: 5,
      spend: { ...learned, perSecond: 0.001 },
      code: 'HALT_LOW_BALANCE',
      grant: 1146,
    },
    {
      situation: 'near the pause level: the solves the money above it pays for, and the decision says so',
      // ($0.30 − $0.10) / $0.002 = 100 solves, 5 of them in flight: 95 more may start, the 96th at the level.
      balance: 0.3,
      held: 5,
      spend: learned,
      code: 'SPEND_THE_REST',
      grant: 1096,
    },
    {
      situation:
        'the money after the solves in flight exactly at the pause level: one more may start (the floor’s rule)',
      balance: 0.11,
      held: 5,
      spend: learned,
      code: 'SPEND_THE_REST',
      grant: 1001,
    },
    {
      situation: 'the solves in flight already take it under the pause level: paused, the grant used up',
      balance: 0.108,
      held: 5,
      spend: learned,
      code: 'PAUSE_LOW_BALANCE',
      grant: 1000,
    },
    {
      situation:
        'no price learned yet: the grant counts at the assumed price, the projection decides the rate (spending the rest by share)',
      // ($0.30 − $0.10) / UNKNOWN_PRICE_USD ($0.01) = 20 solves, 5 in flight: 15 more, the 16th at the level.
      balance: 0.3,
      held: 5,
      spend: {},
      code: 'HALT_LOW_BALANCE',
      grant: 1016,
    },
    {
      situation:
        'a price learned from a window that bounds nothing yet (every span counted no more than it held): counted at the assumed price',
      // As the row with no price: ($0.30 − $0.10) / $0.01 = 20 solves, 5 in flight, the 16th at the level.
      balance: 0.3,
      held: 5,
      spend: { ...learned, priceBoundUsd: undefined },
      code: 'SPEND_THE_REST',
      grant: 1016,
    },
    {
      situation: 'a bound above the learned price: counted at the bound',
      // ($0.30 − $0.10) / $0.004 = 50 solves, 5 in flight: 45 more, the 46th at the level.
      balance: 0.3,
      held: 5,
      spend: { ...learned, priceBoundUsd: 0.004 },
      code: 'SPEND_THE_REST',
      grant: 1046,
    },
    {
      situation: 'an account its balance shows is not charged per solve (a learned 0): no grant, nothing to count',
      balance: 0.3,
      held: 5,
      spend: { ...learned, learnedPriceUsd: 0 },
      code: 'HALT_LOW_BALANCE',
      grant: undefined,
    },
    {
      situation: 'the ledger unread: no grant (its counts are the grant’s)',
      balance: 0.3,
      held: undefined,
      spend: learned,
      code: 'HALT_LOW_BALANCE',
      grant: undefined,
    },
  ] as const;

  it.each(rows)('$situation', ({ balance, held, spend, code, grant }) => {
    // Act
    const d = tick(balance, held, spend);
    // Assess
    expect(d.reason.code).toBe(code);
    expect(d.spendGrant?.limit).toBe(grant);
    if (grant !== undefined) expect(d.spendGrant?.until).toBeGreaterThan(NOW);
    if (code === 'SPEND_THE_REST') expect(enabledTotal(d)).toBe(8);
  });

  it('resumes from an outage near the pause level under the grant (the resuming tick counts the money too)', () => {
    // Act: paused for an outage, the solver answers again with $0.30 and 5 solves in flight.
    const d = tick(0.3, 5, learned, { reason: 'outage', since: T0, resumeTotal: 8 });
    // Assess: resumed, with the same count as a running fleet gets ($0.30 − $0.10) / $0.002 − 5 + 1.
    expect(d.paused).toBe(false);
    expect(d.spendGrant?.limit).toBe(1096);
  });

  it('stays paused while the money above the pause level is spoken for, the grant kept used up', () => {
    // Act
    const d = tick(0.104, 3, learned, { reason: 'balance', since: T0 });
    // Assess
    expect(d.paused).toBe(true);
    expect(d.reason.code).toBe('PAUSE_LOW_BALANCE');
    expect(grantUsedUp({ grant: d.spendGrant, acceptances: 1000 }, NOW)).toBe(true);
    expect(d.reason.message).toContain('the money above the pause level $0.10 is spoken for (balance $0.1040');
  });

  it('says a balance at or under the pause level is, rather than that the money above it is spoken for', () => {
    // Act
    const d = tick(0.05, 0, learned, { reason: 'balance', since: T0 });
    // Assess: before, "the money above the pause level $0.10 is spoken for (balance $0.0500 …)".
    expect(d.reason.code).toBe('PAUSE_LOW_BALANCE');
    expect(d.reason.message).toBe(
      'Still paused: the balance $0.0500 is at or under the pause level $0.10; tasks wait in the queue until it is topped up.',
    );
  });

  it('resumes at the free threads once topped up far above the pause level, the grant far from used up', () => {
    // Act
    const d = tick(40, 5, { ...learned, perSecond: 0.01 }, { reason: 'balance', since: T0 });
    // Assess
    expect(d.paused).toBe(false);
    expect(enabledTotal(d)).toBe(8);
    expect(d.spendGrant?.limit ?? Number.POSITIVE_INFINITY).toBeGreaterThan(1000 + 19_000);
  });

  it('learns the price from the balance drops over the solves the ledger counted beside them', () => {
    // Prepare: $1.00, then $0.90 with 50 more solves counted: $0.002 a solve.
    const before = stateWith({ lastRead: { at: T0, usd: 1 }, solvedSeen: 100 });
    const reading: ThreadLedgerReading = { held: 4, refusals: 0, acceptances: 154, solved: 150 };
    // Act
    const d = decide(governorSignals(NOW, { balance: 0.9, threadLedger: reading }), before, cfg);
    // Assess
    expect(d.state.spend.learnedPriceUsd).toBeCloseTo(0.002, 9);
    expect(d.state.spend.solvedSeen).toBe(150);
  });

  it('leaves a top-up’s interval out of the price (its drop is hidden)', () => {
    // Prepare
    const before = stateWith({ lastRead: { at: T0, usd: 1 }, solvedSeen: 100, learnedPriceUsd: 0.003 });
    // Act: the balance rose by a top-up while 50 solves were counted.
    const d = decide(
      governorSignals(NOW, { balance: 5, threadLedger: { held: 0, refusals: 0, acceptances: 150, solved: 150 } }),
      before,
      cfg,
    );
    // Assess
    expect(d.state.spend.learnedPriceUsd).toBe(0.003);
    expect(d.state.spend.solvedSeen).toBe(150);
  });

  it('starts the window over after a top-up’s interval, the price and its bound kept', () => {
    // Prepare: three intervals learned, then a top-up.
    const window = [
      { usd: 0.02, solves: 10, heldBefore: 2 },
      { usd: 0.02, solves: 10, heldBefore: 2 },
    ];
    const before = stateWith({
      lastRead: { at: T0, usd: 1 },
      solvedSeen: 100,
      heldSeen: 3,
      priceWindow: window,
      learnedPriceUsd: 0.002,
      priceBoundUsd: 0.0022,
    });
    // Act
    const d = decide(
      governorSignals(NOW, { balance: 5, threadLedger: { held: 4, refusals: 0, acceptances: 154, solved: 150 } }),
      before,
      cfg,
    );
    // Assess: a span across the top-up would count solves whose drop it hides.
    expect(d.state.spend.priceWindow).toEqual([]);
    expect(d.state.spend.learnedPriceUsd).toBe(0.002);
    expect(d.state.spend.priceBoundUsd).toBe(0.0022);
    expect(d.state.spend.heldSeen).toBe(4);
  });

  it('keeps no solved count from a read whose ledger was not read, so the next interval is not priced over two', () => {
    // Prepare
    const before = stateWith({ lastRead: { at: T0, usd: 1 }, solvedSeen: 100, heldSeen: 3, learnedPriceUsd: 0.002 });
    // Act: the balance read, the ledger not.
    const d = decide(governorSignals(NOW, { balance: 0.9 }), before, cfg);
    // Assess
    expect(d.state.spend.solvedSeen).toBeUndefined();
    expect(d.state.spend.learnedPriceUsd).toBe(0.002);
  });
});

describe('the money the solver itself takes (a pause level under one solve)', () => {
  // Before: "one more while the money is at the level or over it" granted a solve the balance
  // could not pay; the solver refused it (ERROR_ZERO_BALANCE), and the fleet paused for a broken
  // key (PAUSE_ACCOUNT, "no error code seen") or, at CaptchaAI, waited for threads others held.
  const zero = governorConfigFrom(
    resolveSettings({ tickMs: 10_000, planThreads: 8, haltBalance: 0, pauseBalance: 0 }),
    {
      probeSubmissions: true,
    },
  );
  const at = (balance: number, accountErrors: number) =>
    decide(
      governorSignals(NOW, { balance, accountErrors, threadLedger: ledger(0) }, { inFlight: 0 }),
      {
        ...initialState(zero, T0),
        spend: { ...initialState(zero, T0).spend, lastRead: { at: T0, usd: balance }, ...learned },
      },
      zero,
    );

  it.each([0, 3])('pauses for money, not the key, when the balance pays for no solve (%i account errors)', (errors) => {
    // Act: $0.0015 at $0.002 a solve, nothing in flight.
    const d = at(0.0015, errors);
    // Assess
    expect(d.reason.code).toBe('PAUSE_LOW_BALANCE');
    expect(d.reason.message).toContain('pays the solver for no more solves');
  });

  it('grants the one solve the balance pays for, no more', () => {
    // Act: $0.0035 at $0.002: one solve, though (0.0035 − 0) / 0.002 = 1.75 gave the floor's 2.
    const d = at(0.0035, 0);
    // Assess
    expect(d.paused).toBe(false);
    expect(d.spendGrant?.limit).toBe(1000 + 1);
  });
});

describe('the price’s upper bound while counts lag charges (priceBound)', () => {
  it('bounds the price by each span ending at the newest read: its drops ÷ its count less the solves held at its start', () => {
    // Spans from the newest: 0.010 / (5 − 4) = 0.010; 0.030 / (15 − 4) ≈ 0.00273; 0.050 / (25 − 4) ≈ 0.00238.
    const window = [
      { usd: 0.02, solves: 10, heldBefore: 4 },
      { usd: 0.02, solves: 10, heldBefore: 4 },
      { usd: 0.01, solves: 5, heldBefore: 4 },
    ];
    expect(priceBound(window)).toBeCloseTo(0.05 / 21, 12);
  });

  it('reads above the plain ratio while a fleet winds down (counts of a busier past among fewer charges)', () => {
    // Prepare: 10 solves an interval charged at $0.002, then 2; each counted an interval after its
    // charge, and at most 12 held at a read. The window keeps the last 10 intervals.
    const charged = [...Array(12).fill(10), ...Array(6).fill(2)] as number[];
    const window = charged.map((n, i) => ({
      usd: n * 0.002,
      solves: i === 0 ? 0 : (charged[i - 1] ?? 0),
      heldBefore: 12,
    }));
    // Act
    const sampled = window.reduce<{ window: PriceSample[]; learned: number | undefined; bound: number | undefined }>(
      (acc, sample) => withPriceSample(acc.window, sample, acc.learned, acc.bound),
      { window: [], learned: undefined, bound: undefined },
    );
    // Assess: the plain ratio reads $0.104 / 60 ≈ $0.00173, under the price; the bound, over it.
    expect(sampled.learned).toBeLessThan(0.002);
    expect(sampled.bound).toBeGreaterThanOrEqual(0.002);
    expect(countingPrice({ learnedPriceUsd: sampled.learned, priceBoundUsd: sampled.bound }, undefined).usd).toBe(
      sampled.bound,
    );
  });

  it('gives no bound where every span counted no more than it held at its start, nor across a sample without its held count', () => {
    expect(priceBound([{ usd: 0.02, solves: 10, heldBefore: 10 }])).toBeUndefined();
    expect(
      priceBound([
        { usd: 0.02, solves: 10 },
        { usd: 0.02, solves: 10, heldBefore: 12 },
      ]),
    ).toBeUndefined();
  });

  it('keeps the last bound while the window gives none, and never counts a learned 0 at it', () => {
    const sampled = withPriceSample([], { usd: 0.01, solves: 2, heldBefore: 5 }, 0.002, 0.0025);
    expect(sampled.bound).toBe(0.0025);
    expect(countingPrice({ learnedPriceUsd: 0, priceBoundUsd: 0.0025 }, undefined).usd).toBe(0);
  });
});

describe('the price the grant counts by before the balance shows one', () => {
  it('counts at the dearest configured price (solverPricesUsd) when told one', () => {
    // Prepare
    const told = governorConfigFrom(
      resolveSettings({ tickMs: 10_000, planThreads: 8, solverPricesUsd: { userrecaptcha: 0.003, base64: 0.001 } }),
      { probeSubmissions: true },
    );
    // Act
    const d = decide(
      governorSignals(NOW, { balance: 0.3, threadLedger: ledger(5) }, { inFlight: 5 }),
      stateWith({ lastRead: { at: T0, usd: 0.4 }, perSecond: 0.01 }),
      told,
    );
    // Assess: ($0.30 − $0.10) / $0.003 = 66.7 solves, 5 in flight: 61 more, the 62nd at the level.
    expect(told.priceHintUsd).toBe(0.003);
    expect(d.spendGrant?.limit).toBe(1000 + 62);
  });

  it.each([
    {
      case: 'solves over two reads that dropped nothing: an account not charged per solve (0)',
      window: [{ usd: 0, solves: 2 }],
      sample: { usd: 0, solves: 1 },
      learned: undefined,
      expected: 0,
    },
    {
      case: 'the same solves in one read: a balance that lags the answers, nothing learned',
      window: [],
      sample: { usd: 0, solves: 3 },
      learned: undefined,
      expected: undefined,
    },
    {
      case: 'fewer solves than FREE_AFTER_SOLVES: nothing learned',
      window: [{ usd: 0, solves: 1 }],
      sample: { usd: 0, solves: 1 },
      learned: undefined,
      expected: undefined,
    },
    {
      case: 'a quiet window after a price was learned (a balance shown in cents): the price kept',
      window: [{ usd: 0, solves: 2 }],
      sample: { usd: 0, solves: 2 },
      learned: 0.002,
      expected: 0.002,
    },
    {
      case: 'a drop after a 0 was learned: the price it shows',
      window: [{ usd: 0, solves: 3 }],
      sample: { usd: 0.03, solves: 3 },
      learned: 0,
      expected: 0.005,
    },
  ])('learns $case', ({ window, sample, learned, expected }) => {
    // Act
    const next = withPriceSample(window, sample, learned);
    // Assess
    expect(next.learned).toBe(expected);
  });

  it('holds the minimum under the halt level only while the price is assumed', () => {
    // Prepare: under the halt level ($1), nothing learned, then an account not charged per solve.
    const signals = governorSignals(NOW, { balance: 0.5, threadLedger: ledger(0) }, { inFlight: 0, backlog: 100 });
    // Act
    const assumed = decide(signals, stateWith({ haltCeiling: 8 }), cfg);
    const free = decide(signals, stateWith({ learnedPriceUsd: 0, haltCeiling: 8 }), cfg);
    // Assess
    expect(enabledTotal(assumed)).toBe(cfg.minConcurrency);
    expect(enabledTotal(free)).toBe(8);
  });
});

describe('the spend grant when a tick cannot count the money', () => {
  /** A tick near the pause level that writes a grant, and the state it leaves. */
  const written = () => tick(0.3, 5, learned);
  const later = NOW + 10_000;

  it('carries the last grant through a tick that cannot read the balance or the ledger: its count as it stands, its until renewed', () => {
    // Prepare
    const before = written();
    expect(before.spendGrant?.limit).toBe(1096);
    // Act: the next tick with the balance unread (a transient error), or the ledger unread
    const noBalance = decide(
      governorSignals(later, { balance: undefined, threadLedger: ledger(5) }),
      before.state,
      cfg,
    );
    const noLedger = decide(governorSignals(later, { balance: 0.29 }), before.state, cfg);
    // Assess: the same count, lapsing four ticks after this one (the governor is ticking), kept in the state
    const renewed = { limit: before.spendGrant?.limit, until: later + 4 * 10_000 };
    expect(noBalance.spendGrant).toEqual(renewed);
    expect(noLedger.spendGrant).toEqual(renewed);
    expect(noBalance.state.spend.grant).toEqual(renewed);
  });

  it('writes a grant that outlasts ticks that run late: four of the last interval when it was longer than the tick', () => {
    // Prepare: the last tick 25 s ago on a 10 s cadence
    const before = stateWith({ lastRead: { at: T0, usd: 0.4 }, perSecond: 0.01, ...learned });
    const { status } = decideTick(governorSignals(NOW - 25_000, { balance: 0.3 }), before, cfg);
    const late: GovernorState = { ...before, lastDecision: status };
    // Act
    const d = decide(governorSignals(NOW, { balance: 0.3, threadLedger: ledger(5) }, { inFlight: 5 }), late, cfg);
    const onTime = decide(
      governorSignals(NOW, { balance: 0.3, threadLedger: ledger(5) }, { inFlight: 5 }),
      before,
      cfg,
    );
    // Assess
    expect(d.spendGrant?.until).toBe(NOW + 4 * 25_000);
    expect(onTime.spendGrant?.until).toBe(NOW + 4 * 10_000);
  });

  it('writes a grant GRANT_MIN_LIFETIME_MS long at least, however short the tick (the local 1 s tick)', () => {
    // Prepare: a fleet on 1 s ticks whose money is near the pause level, its last tick on time
    const fast = governorConfigFrom(resolveSettings({ tickMs: 1_000, planThreads: 8 }), { probeSubmissions: true });
    const before = stateWith({ lastRead: { at: NOW - 1_000, usd: 0.31 }, perSecond: 0.01, ...learned });
    // Act
    const d = decide(governorSignals(NOW, { balance: 0.3, threadLedger: ledger(5) }, { inFlight: 5 }), before, fast);
    // Assess: 20 s, not four 1 s ticks (a tick that reads its signals for 2 s and comes 4 s late
    // would write the next grant after this one lapsed, and the consumers would take none)
    expect(GRANT_MIN_LIFETIME_MS).toBe(20_000);
    expect(d.spendGrant?.until).toBe(NOW + GRANT_MIN_LIFETIME_MS);
  });

  it('drops a carried grant once it lapses, as a governor that stopped ticking leaves it', () => {
    // Prepare
    const before = written();
    const until = before.spendGrant?.until ?? 0;
    // Act: the balance still unread, past the grant's until
    const d = decide(governorSignals(until + 1, { balance: undefined, threadLedger: ledger(5) }), before.state, cfg);
    // Assess
    expect(d.spendGrant).toBeUndefined();
    expect(d.state.spend.grant).toBeUndefined();
  });

  it('drops the last grant once the money is read far from the pause level (a top-up)', () => {
    // Act
    const d = decide(governorSignals(later, { balance: 50, threadLedger: ledger(5) }), written().state, cfg);
    // Assess
    expect(d.spendGrant).toBeUndefined();
    expect(d.state.spend.grant).toBeUndefined();
  });
});

describe('the spend grant: property over whole runs', () => {
  it.each([
    { start: 'a fleet that has run a while (the price learned)', fresh: false },
    {
      start: 'a fresh fleet (no price learned: counted at UNKNOWN_PRICE_USD until the balance shows it)',
      fresh: true,
    },
    {
      // A quarter of the balance reads fail (no answer, or no reason) and ticks come 1–3 ticks
      // apart: the first read may fail, outages pause and resume, grants must outlast late ticks.
      start: 'a fresh fleet whose balance reads fail at random and whose ticks run late',
      fresh: true,
      faults: true,
    },
    {
      // The provider charges a solve when its worker answers; the ledger counts it (and frees its
      // thread) when the fleet records the answer: the watch's next round, a resumed delivery's
      // read a visibility timeout later. Each answer here is counted 0.5–10 s after its charge, so
      // a price learned as drops ÷ counts reads low while a fleet winds down at the level (at the
      // plain ratio, 361 of 3 000 such runs started 1–4 solves past it; price.ts priceBound).
      start: 'a fleet whose answers are counted seconds after they are charged',
      fresh: false,
      lagged: true,
    },
  ])(
    'starts exactly the solves the money above the pause level pays for, never one more: $start',
    ({ fresh, faults = false, lagged = false }) => {
      fc.assert(
        fc.property(
          fc.integer({ min: 2, max: 60 }),
          fc.constantFrom(0.001, 0.002, 0.003),
          fc.integer({ min: fresh ? 1 : 50, max: 3000 }),
          fc.integer({ min: 1, max: 1_000_000 }),
          // The halt level at its default ($1) or at the pause level (no halt hold: the start a fresh
          // fleet overshot in, a round of its width past the pause level).
          fc.boolean(),
          // Half-second steps between a solve's charge and its count (0: counted as it is charged).
          fc.integer({ min: lagged ? 1 : 0, max: lagged ? 20 : 0 }),
          (plan, price, affordable, seed, haltAtPause, lag) => {
            const levels = haltAtPause ? { haltBalance: 0.1, pauseBalance: 0.1 } : {};
            const c = governorConfigFrom(resolveSettings({ tickMs: 10_000, planThreads: plan, ...levels }), {
              probeSubmissions: true,
            });
            const pause = c.pauseBalance;
            const initial = pause + affordable * price + price / 3;
            let random = seed;
            const next = () => {
              random = (random * 1103515245 + 12345) % 2147483648;
              return random / 2147483648;
            };
            // The world: solves in flight (charged as each finishes), the counters the ledger keeps,
            // the solves charged and not yet counted (each with the step it is counted at).
            let balance = initial;
            let held = 0;
            const uncounted: number[] = [];
            let acceptances = 0;
            let solved = 0;
            // A fleet that has run a while (the price learned), or one that starts with nothing known.
            const first = initialState(c, T0);
            let state: GovernorState = fresh
              ? first
              : {
                  ...first,
                  spend: {
                    lastRead: { at: T0, usd: initial },
                    learnedPriceUsd: price,
                    priceBoundUsd: price,
                    solvedSeen: 0,
                    acceptedSeen: 0,
                    heldSeen: 0,
                  },
                };
            let started = 0;
            // Done once paused for money with nothing in flight and the price known (a fresh fleet
            // pauses first at the assumed price, and resumes once a balance read shows the real one);
            // with counts lagging, once that has held for a few ticks (the last counts arrive at the
            // tick that paused, and the next read may resume the fleet for a solve or two more).
            let settled = 0;
            const done = () => {
              const idle =
                started > 0 &&
                held === 0 &&
                state.pause?.reason === 'balance' &&
                state.spend.learnedPriceUsd !== undefined;
              settled = idle ? settled + 1 : 0;
              return lag === 0 ? idle : settled > 4;
            };
            let step = 0;
            let now = T0;
            for (let t = 1; t <= (lag === 0 ? 400 : 2_000) && !done(); t++) {
              const interval = faults ? 10_000 * (1 + Math.floor(next() * 3)) : 10_000;
              now += 10_000;
              const reading: ThreadLedgerReading = { held, refusals: 0, acceptances, solved };
              const failed = faults && next() < 0.25;
              const read = failed
                ? {
                    balance: undefined,
                    ...(next() < 0.5 ? { balanceError: { kind: 'unreachable' as const, code: 'HTTP_503' } } : {}),
                  }
                : { balance };
              const tick = decideTick(
                // Solves end at 30 % a half-second step: a mean solve of 1.7 s.
                governorSignals(
                  now,
                  { ...read, threadLedger: reading, meanSolveMs: 1700 },
                  { inFlight: held, ceiling: plan, backlog: 1000 },
                ),
                state,
                c,
              );
              const d = tick.primary;
              state = tick.state;
              // The fleet: solves finish at random until the next tick; invocations start solves up
              // to the ceiling, each one checking the grant first, as the consumer does.
              const steps = (20 * interval) / 10_000;
              for (let k = 0; k < steps; k++) {
                const at = now + (k * interval) / steps;
                step++;
                while (uncounted.length > 0 && (uncounted[0] as number) <= step) {
                  uncounted.shift();
                  held--;
                  solved++;
                }
                for (let i = held - uncounted.length; i > 0; i--)
                  if (next() < 0.3) {
                    balance -= price;
                    if (lag > 0) uncounted.push(step + lag);
                    else {
                      held--;
                      solved++;
                    }
                  }
                while (!d.paused && held < enabledTotal(d) && !grantUsedUp({ grant: d.spendGrant, acceptances }, at)) {
                  // The money rule the fair floor keeps: a solve starts only while the balance, less the solves in flight (not yet charged), is at the pause level or over it.
                  expect(balance - (held - uncounted.length) * price).toBeGreaterThanOrEqual(pause - 1e-9);
                  held++;
                  acceptances++;
                  started++;
                }
              }
              now += interval - 10_000;
            }
            // Every solve the money above the pause level pays for was started.
            expect(started).toBe(affordable + 1);
          },
        ),
        { numRuns: 100 },
      );
    },
  );
});
