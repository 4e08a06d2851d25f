import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decideOverflow,
  PRICE_WINDOW_READS,
  laneTakeRate,
  withLaneTake,
  initialOverflowState,
  type OverflowConfig,
  type OverflowSignals,
  type OverflowState,
} from '../../functions/core/governor/overflow.js';
import { governorConfigFrom } from '../../functions/core/governor/policy.js';
import type { Decision, GovernorSignals, LaneSignals } from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { governorSignals } from '../helpers/governor.js';

const T0 = Date.UTC(2026, 0, 1, 5, 30);
const TICK_MS = 10_000;

function overflowConfig(overrides: Partial<OverflowConfig> = {}): OverflowConfig {
  const settings = resolveSettings({ planThreads: 40, tickMs: TICK_MS, pauseBalance: 1, haltBalance: 2 });
  return {
    latencyTargetMs: 30_000,
    capUsdPerHour: 5,
    capUsdPerDay: 20,
    maxConcurrency: 40,
    tasksPerInvocation: 1,
    priceHintUsd: 0.003,
    probeCeiling: 2,
    minSolveMs: 4_000,
    tickMs: TICK_MS,
    provider: governorConfigFrom(settings),
    ...overrides,
  };
}

/** The primary's decision: `freeThreads` at its ceiling, or paused. */
function primary(freeThreads: number, paused = false): Decision {
  return {
    ceilings: { normal: freeThreads, high: 2 },
    enabled: { normal: !paused, high: false },
    paused,
    freeThreads,
    neededThreads: undefined,
    shortfall: 0,
    drainSeconds: undefined,
    shortfallWarning: false,
    reason: { code: paused ? 'PAUSE_OUTAGE' : 'FREE_THREADS', message: '' },
    stages: [],
    probe: false,
    state: {} as Decision['state'],
  };
}

/** A tick at `now` of 20 s solves and $100, the normal lane idle and disabled unless `normal` says otherwise. */
function signalsAt(
  now: number,
  normal: Partial<LaneSignals>,
  overrides: Partial<GovernorSignals> = {},
): GovernorSignals {
  return governorSignals(
    now,
    { completionRate: 1, meanSolveMs: 20_000, p95SolveMs: 40_000, balance: 100, ...overrides },
    { backlog: 0, inFlight: 0, oldestAgeSeconds: 0, arrivalRate: 0, ceiling: 2, enabled: false, ...normal },
  );
}

/** The primary with all 50 threads busy and `backlog` waiting at `arrivalRate` per second. */
function busyPrimary(now: number, backlog: number, arrivalRate = 2): GovernorSignals {
  return signalsAt(now, { backlog, inFlight: 50, arrivalRate, ceiling: 50, enabled: true });
}

function overflowSignals(
  now: number,
  lanes: Partial<LaneSignals> = {},
  overrides: Partial<GovernorSignals> = {},
  solvesSinceLastRead: number | undefined = 0,
): OverflowSignals {
  return { provider: signalsAt(now, lanes, overrides), solvesSinceLastRead };
}

describe('decideOverflow', () => {
  it('opens when the primary is saturated and the backlog cannot drain within the target', () => {
    // Prepare: 50 threads at 20 s solve 2.5/s; 2/s arrive and 300 wait: 12/s asked.
    const config = overflowConfig({ priceHintUsd: 0.001, capUsdPerHour: 100, capUsdPerDay: 100 });
    const state = {
      ...initialOverflowState(config, T0),
      spend: { ...initialOverflowState(config, T0).spend, learnedPriceUsd: 0.001 },
    };

    // Act
    const d = decideOverflow(primary(50), busyPrimary(T0, 300), overflowSignals(T0), state, config);

    // Assess: (2 + 300/30 − 2.5) × 20 s = 190 invocations, within the max of 40.
    expect(d.enabled).toBe(true);
    expect(d.excess).toBe(190);
    expect(d.ceiling).toBe(40);
  });

  it('stays closed while the primary has free threads, however long the backlog', () => {
    const config = overflowConfig();
    const signals = signalsAt(T0, { backlog: 5000, inFlight: 49, arrivalRate: 5, ceiling: 50, enabled: true });

    const d = decideOverflow(primary(50), signals, overflowSignals(T0), initialOverflowState(config, T0), config);

    expect(d.enabled).toBe(false);
    expect(d.reason.code).toBe('OVERFLOW_CLOSED');
  });

  it("reads the plan's threads in use from the thread ledger: messages hidden while they wait hold none", () => {
    // Prepare: 70 messages in flight on the primary's lanes (parked tasks, and hand-backs hidden
    // while they wait for a lease), but the ledger shows 30 of the 50 threads held.
    const config = overflowConfig({ priceHintUsd: 0.001, capUsdPerHour: 100, capUsdPerDay: 100 });
    const ledger = { held: 30, leftover: 0, refusals: 0, acceptances: 300, refusalRun: 0 };
    const signals = signalsAt(T0, { backlog: 300, inFlight: 70, arrivalRate: 2, ceiling: 50, enabled: true });

    // Act
    const idle = decideOverflow(
      primary(50),
      { ...signals, threadLedger: ledger },
      overflowSignals(T0),
      initialOverflowState(config, T0),
      config,
    );
    const full = decideOverflow(
      primary(50),
      { ...signals, threadLedger: { ...ledger, held: 50 } },
      overflowSignals(T0),
      initialOverflowState(config, T0),
      config,
    );

    // One invocation short of the plan is a slot changing hands (full); two short is a free thread.
    const handing = (held: number) =>
      decideOverflow(
        primary(50),
        { ...signals, threadLedger: { ...ledger, held } },
        overflowSignals(T0),
        initialOverflowState(config, T0),
        config,
      ).enabled;

    // Assess: before, the in flight opened the lane (and paid the overflow provider) with 20 threads idle.
    expect(idle.enabled).toBe(false);
    expect(idle.reason.code).toBe('OVERFLOW_CLOSED');
    expect(full.enabled).toBe(true);
    expect([handing(49), handing(48)]).toEqual([true, false]);
  });

  it('closes when the primary drains the backlog within the target', () => {
    // 50 threads at 20 s: 2.5/s; 1/s arrives; 40 waiting drain in 27 s < 30 s.
    const config = overflowConfig();

    const d = decideOverflow(
      primary(50),
      busyPrimary(T0, 40, 1),
      overflowSignals(T0),
      initialOverflowState(config, T0),
      config,
    );

    expect(d.enabled).toBe(false);
    expect(d.reason.code).toBe('OVERFLOW_CLOSED');
  });

  it('opens no wider than the probe ceiling until a price is learned', () => {
    const config = overflowConfig({ probeCeiling: 3 });

    const d = decideOverflow(
      primary(50),
      busyPrimary(T0, 300),
      overflowSignals(T0),
      initialOverflowState(config, T0),
      config,
    );

    expect(d.ceiling).toBe(3);
    expect(d.reason.code).toBe('OVERFLOW_PROBE');
    expect(d.priceLearned).toBe(false);
  });

  /** The second tick's decision after the provider's balance fell by `dropUsd` over `solves` solves. */
  const afterDrop = (config: OverflowConfig, dropUsd: number, solves: number) => {
    const first = decideOverflow(
      primary(50),
      busyPrimary(T0, 300),
      overflowSignals(T0),
      initialOverflowState(config, T0),
      config,
    );
    return decideOverflow(
      primary(50),
      busyPrimary(T0 + TICK_MS, 300),
      overflowSignals(T0 + TICK_MS, { inFlight: 2, ceiling: 2, enabled: true }, { balance: 100 - dropUsd }, solves),
      first.state,
      config,
    );
  };

  it('learns the price per solve from the balance drop divided by the solves', () => {
    const config = overflowConfig();

    const d = afterDrop(config, 0.004, 2);

    // Learned, but the budget never prices a solve under the hint: a drop and the solves counted
    // beside it need not cover the same solves (see the count-lag property below).
    expect(d.state.spend.learnedPriceUsd).toBeCloseTo(0.002, 9);
    expect(d.priceLearned).toBe(true);
    expect(d.priceUsd).toBeCloseTo(config.priceHintUsd, 9);
  });

  it('raises the price the budget uses when the balance shows solves dearer than the hint', () => {
    // $0.008 gone for 2 solves: $0.004 a solve, above the $0.003 hint.
    const d = afterDrop(overflowConfig(), 0.008, 2);

    expect(d.priceUsd).toBeCloseTo(0.004, 9);
  });

  it('learns the price over the last reads, so solves counted a read late do not price the lane out for good', () => {
    // The provider charged 8 solves ($0.024) in the first interval, the consumer counted 1 of them
    // then and the other 7 a read later: per interval that is $0.024 a solve, 8× the price.
    const config = overflowConfig();
    let state = initialOverflowState(config, T0);
    let balance = 100;
    const reads: Array<[dropUsd: number, solves: number]> = [
      [0, 0],
      [0.024, 1],
      [0, 7],
      [0.006, 2],
    ];
    reads.forEach(([dropUsd, solves], n) => {
      const at = T0 + n * TICK_MS;
      balance -= dropUsd;
      const d = decideOverflow(
        primary(50),
        busyPrimary(at, 300),
        overflowSignals(at, { inFlight: 2, ceiling: 2, enabled: true }, { balance }, n === 0 ? undefined : solves),
        state,
        config,
      );
      state = d.state;
    });
    expect(state.spend.learnedPriceUsd).toBeCloseTo(0.003, 9);
    // …and a mix that turns dearer shows within the window: $0.01 a solve from now on.
    for (let n = 4; n < 4 + PRICE_WINDOW_READS; n++) {
      const at = T0 + n * TICK_MS;
      balance -= 0.02;
      state = decideOverflow(
        primary(50),
        busyPrimary(at, 300),
        overflowSignals(at, { inFlight: 2, ceiling: 2, enabled: true }, { balance }, 2),
        state,
        config,
      ).state;
    }
    expect(state.spend.learnedPriceUsd).toBeCloseTo(0.01, 9);
  });

  it('books the committed solves and the next ticks before opening: closed at the cap', () => {
    // $4.97 of $5 spent this hour: 2 in flight × $0.003 and 5 solves per slot at $0.003 leave room for 1 slot, under the floor.
    const config = overflowConfig();
    const start = initialOverflowState(config, T0);
    const state: OverflowState = {
      ...start,
      spend: {
        ...start.spend,
        hourUsd: 4.97,
        dayUsd: 4.97,
        learnedPriceUsd: 0.003,
        lastRead: { at: T0 - TICK_MS, usd: 100 },
      },
    };

    const d = decideOverflow(primary(50), busyPrimary(T0, 300), overflowSignals(T0, { inFlight: 2 }), state, config);

    expect(d.enabled).toBe(false);
    expect(d.reason.code).toBe('OVERFLOW_CAP');
  });

  it("is closed by its provider's guard on account errors", () => {
    const config = overflowConfig();

    const d = decideOverflow(
      primary(50),
      busyPrimary(T0, 300),
      overflowSignals(T0, {}, { accountErrors: 3, accountErrorCode: 'ERROR_WRONG_USER_KEY' }),
      initialOverflowState(config, T0),
      config,
    );

    expect(d.enabled).toBe(false);
    expect(d.reason.code).toBe('OVERFLOW_GUARD');
    expect(d.reason.message).toContain('key rejected');
  });

  it('stays closed while the provider balance cannot be read', () => {
    const config = overflowConfig();

    const d = decideOverflow(
      primary(50),
      busyPrimary(T0, 300),
      overflowSignals(T0, {}, { balance: undefined }),
      initialOverflowState(config, T0),
      config,
    );

    expect(d.enabled).toBe(false);
  });

  it('takes the work of a primary paused for an outage', () => {
    const config = overflowConfig();
    const signals = signalsAt(T0, { backlog: 100, inFlight: 0, arrivalRate: 1, ceiling: 50, enabled: false });

    const d = decideOverflow(primary(50, true), signals, overflowSignals(T0), initialOverflowState(config, T0), config);

    expect(d.enabled).toBe(true);
  });

  it('opens at the probe width for a primary paused before any solve was timed', () => {
    // Prepare: an outage from the first tick: no solve time from the primary or the provider.
    const config = overflowConfig();
    const signals = signalsAt(
      T0,
      { backlog: 100, inFlight: 0, arrivalRate: 1, ceiling: 50, enabled: false },
      { meanSolveMs: undefined },
    );

    const provider = overflowSignals(T0, {}, { meanSolveMs: undefined });

    // Act
    const d = decideOverflow(primary(50, true), signals, provider, initialOverflowState(config, T0), config);

    // Assess
    expect(d.enabled).toBe(true);
    expect(d.excess).toBe(config.probeCeiling);
    expect(d.ceiling).toBe(config.probeCeiling);
  });

  it('still needs the solve time of a working primary to size the excess', () => {
    const config = overflowConfig();
    const signals = signalsAt(
      T0,
      { backlog: 300, inFlight: 50, arrivalRate: 2, ceiling: 50, enabled: true },
      { meanSolveMs: undefined },
    );

    const d = decideOverflow(primary(50), signals, overflowSignals(T0), initialOverflowState(config, T0), config);

    expect(d.enabled).toBe(false);
    expect(d.reason.code).toBe('OVERFLOW_MISSING_SIGNAL');
  });

  it('counts the worst case it booked as spent when a top-up hides the drop', () => {
    const config = overflowConfig();
    const first = decideOverflow(
      primary(50),
      busyPrimary(T0, 300),
      overflowSignals(T0),
      initialOverflowState(config, T0),
      config,
    );

    const d = decideOverflow(
      primary(50),
      busyPrimary(T0 + TICK_MS, 300),
      overflowSignals(T0 + TICK_MS, { inFlight: 2, ceiling: 2, enabled: true }, { balance: 150 }, 2),
      first.state,
      config,
    );

    expect(first.state.spend.reservedUsd).toBeGreaterThan(0);
    expect(d.state.spend.hourUsd).toBeCloseTo(first.state.spend.reservedUsd, 9);
  });
});

describe('decideOverflow while the primary cannot keep up with the arrivals', () => {
  /** A primary paused for an outage: its queue empty (the lane took every task), `arrivalRate` read on it. */
  const pausedPrimary = (now: number, arrivalRate: number) =>
    signalsAt(now, { backlog: 0, inFlight: 0, arrivalRate, ceiling: 50, enabled: false });
  /** A learned price of $0.003 and `balance` read on the previous tick (nothing spent since). */
  const learnedState = (config: OverflowConfig, lane?: OverflowState['lane'], balance = 100): OverflowState => {
    const start = initialOverflowState(config, T0);
    return {
      ...start,
      spend: { ...start.spend, learnedPriceUsd: 0.003, lastRead: { at: T0 - TICK_MS, usd: balance } },
      ...(lane === undefined ? {} : { lane }),
    };
  };

  it('keeps an open lane open on an empty queue while a paused primary solves nothing', () => {
    // Prepare: 1 task/s arrives, the lane holds 20 and has emptied the queue.
    const config = overflowConfig();
    const lane = { inFlight: 20, ceiling: 20, enabled: true };

    // Act
    const d = decideOverflow(
      primary(50, true),
      pausedPrimary(T0, 1),
      overflowSignals(T0, lane),
      learnedState(config),
      config,
    );

    // Assess: sized to the arrivals, 1/s × 20 s.
    expect(d.enabled).toBe(true);
    expect(d.reason.code).toBe('OVERFLOW_OPEN');
    expect(d.excess).toBe(20);
  });

  it('does not open a closed lane on an empty queue', () => {
    const config = overflowConfig();

    const d = decideOverflow(
      primary(50, true),
      pausedPrimary(T0, 1),
      overflowSignals(T0),
      learnedState(config),
      config,
    );

    expect(d.enabled).toBe(false);
    expect(d.reason.code).toBe('OVERFLOW_CLOSED');
  });

  it('counts what the lane took from the queue as arrivals the primary did not see', () => {
    // Prepare: the queue's count held still (arrival rate 0 on the primary) because the lane
    // solved 8 and grew from 10 to 12 in flight over the 10 s tick: it took 1 task/s.
    const config = overflowConfig();
    const lane = { inFlight: 12, ceiling: 20, enabled: true };
    const state = learnedState(config, { at: T0 - TICK_MS, inFlight: 10 });

    // Act
    const laneSignals = overflowSignals(T0, lane, {}, 8);
    const take = laneTakeRate(laneSignals, state.lane);
    const d = decideOverflow(primary(50, true), withLaneTake(pausedPrimary(T0, 0), take), laneSignals, state, config);

    // Assess: 1/s × 20 s, and the lane's reading kept for the next tick.
    expect(take).toBeCloseTo(1, 12);
    expect(d.enabled).toBe(true);
    expect(d.excess).toBe(20);
    expect(d.state.lane).toEqual({ at: T0, inFlight: 12 });
  });

  it('reads an unknown solve count as nothing taken', () => {
    const config = overflowConfig();
    const lane = { inFlight: 12, ceiling: 20, enabled: true };
    const state = learnedState(config, { at: T0 - TICK_MS, inFlight: 10 });

    const laneSignals = { ...overflowSignals(T0, lane), solvesSinceLastRead: undefined };
    const take = laneTakeRate(laneSignals, state.lane);
    const d = decideOverflow(primary(50, true), withLaneTake(pausedPrimary(T0, 0), take), laneSignals, state, config);

    expect(take).toBe(0);
    expect(d.enabled).toBe(false);
    expect(d.reason.code).toBe('OVERFLOW_CLOSED');
  });

  it('closes the open lane once the resumed primary keeps up with the arrivals and the lane', () => {
    // Prepare: 50 threads at 20 s solve 2.5/s; 1/s on the queue + 1/s the lane took = 2/s.
    const config = overflowConfig();
    const lane = { inFlight: 12, ceiling: 20, enabled: true };
    const state = learnedState(config, { at: T0 - TICK_MS, inFlight: 10 });

    // Act
    const laneSignals = overflowSignals(T0, lane, {}, 8);
    const withTake = withLaneTake(busyPrimary(T0, 0, 1), laneTakeRate(laneSignals, state.lane));
    const d = decideOverflow(primary(50), withTake, laneSignals, state, config);

    // Assess
    expect(d.enabled).toBe(false);
    expect(d.reason.code).toBe('OVERFLOW_CLOSED');
  });

  it('keeps the lane open while the saturated primary solves less than the arrivals and the lane', () => {
    // Prepare: 2/s on the queue + 1/s the lane took = 3/s against the primary's 2.5/s.
    const config = overflowConfig();
    const lane = { inFlight: 12, ceiling: 20, enabled: true };
    const state = learnedState(config, { at: T0 - TICK_MS, inFlight: 10 });

    // Act
    const laneSignals = overflowSignals(T0, lane, {}, 8);
    const withTake = withLaneTake(busyPrimary(T0, 0, 2), laneTakeRate(laneSignals, state.lane));
    const d = decideOverflow(primary(50), withTake, laneSignals, state, config);

    // Assess: (3 − 2.5) × 20 s = 10 invocations.
    expect(d.enabled).toBe(true);
    expect(d.excess).toBe(10);
  });

  it('narrows the lane to what the balance funds above the pause level, the committed solves included', () => {
    // Prepare: 2 in flight commit $0.006; a slot can spend 5 solves × $0.003 = $0.015 by the tick after next.
    const config = overflowConfig();
    const lane = { inFlight: 2, ceiling: 10, enabled: true };
    const work = signalsAt(T0, { backlog: 300, inFlight: 0, arrivalRate: 1, ceiling: 50, enabled: false });
    const at = (balance: number) =>
      decideOverflow(
        primary(50, true),
        work,
        overflowSignals(T0, lane, { balance }),
        learnedState(config, undefined, balance),
        config,
      );

    // Act: $0.05 above the $1 level funds 2 slots; $0.03 funds 1, under the mapping floor.
    const funded = at(1.05);
    const unfunded = at(1.03);

    // Assess
    expect(funded.enabled).toBe(true);
    expect(funded.ceiling).toBe(2);
    expect(funded.reason.code).toBe('OVERFLOW_GUARD');
    expect(unfunded.enabled).toBe(false);
    expect(unfunded.reason.code).toBe('OVERFLOW_GUARD');
    expect(unfunded.reason.message).toContain('pause level $1.00');
  });

  it("is closed by its provider's guard when the provider's balance is under its pause level", () => {
    // Prepare: the provider's pause level is $1.
    const config = overflowConfig();

    // Act
    const d = decideOverflow(
      primary(50, true),
      signalsAt(T0, { backlog: 300, inFlight: 0, arrivalRate: 1, ceiling: 50, enabled: false }),
      overflowSignals(T0, { inFlight: 5, ceiling: 10, enabled: true }, { balance: 0.8 }),
      learnedState(config),
      config,
    );

    // Assess
    expect(d.enabled).toBe(false);
    expect(d.reason.code).toBe('OVERFLOW_GUARD');
    expect(d.reason.message).toContain('pause level');
  });
});

// ---- properties ---------------------------------------------------------------------------------

const HOUR = 3_600_000;
const DAY = 24 * HOUR;

interface World {
  truePrice: number;
  capHour: number;
  capDay: number;
  minSolveMs: number;
  startOffset: number;
  ticks: { gap: number; saturated: boolean; backlog: number; topUp: boolean; solveSpread: number }[];
}

const worldArb: fc.Arbitrary<World> = fc.record({
  // The policy is told only the hint ($0.003); the true price is at most that and learned.
  truePrice: fc.double({ min: 0.0003, max: 0.003, noNaN: true }),
  capHour: fc.double({ min: 0.02, max: 3, noNaN: true }),
  capDay: fc.double({ min: 0.05, max: 6, noNaN: true }),
  minSolveMs: fc.integer({ min: 1_000, max: 20_000 }),
  startOffset: fc.integer({ min: 0, max: DAY - 1 }),
  ticks: fc.array(
    fc.record({
      gap: fc.integer({ min: TICK_MS / 2, max: 2 * TICK_MS }),
      saturated: fc.boolean(),
      backlog: fc.nat(3000),
      topUp: fc.boolean(),
      solveSpread: fc.double({ min: 1, max: 6, noNaN: true }),
    }),
    { minLength: 50, maxLength: 600 },
  ),
});

/**
 * Runs the policy against a lane whose every slot takes work at once (demand never runs out)
 * and finishes each solve in [minSolve, spread × minSolve]; each solve charges the true price at
 * its end. Returns the most spent in any UTC hour and day, and the provider's lowest balance.
 * @param account the provider's balance at the start, and whether the ticks' top-ups happen
 */
function simulateSpend(world: World, account = { balance: 1000, topUps: true }, countLagMs = 0) {
  const config = overflowConfig({
    capUsdPerHour: world.capHour,
    capUsdPerDay: world.capDay,
    minSolveMs: world.minSolveMs,
    probeCeiling: 2,
  });
  let now = Date.UTC(2026, 0, 1) + world.startOffset;
  let state = initialOverflowState(config, now);
  let balance = account.balance;
  let lowestBalance = balance;
  let solvesSinceRead = 0;
  // Solves the consumer reads (and counts) `countLagMs` after the provider charged them.
  const counted: number[] = [];
  const slots: (number | undefined)[] = Array.from({ length: config.maxConcurrency }, () => undefined);
  const spentIn = new Map<string, number>();
  const charge = (at: number) => {
    balance -= world.truePrice;
    lowestBalance = Math.min(lowestBalance, balance);
    if (countLagMs === 0) solvesSinceRead++;
    else counted.push(at + countLagMs);
    for (const key of [`h${Math.floor(at / HOUR)}`, `d${Math.floor(at / DAY)}`])
      spentIn.set(key, (spentIn.get(key) ?? 0) + world.truePrice);
  };
  let open = { enabled: false, ceiling: 2 };
  for (const tick of world.ticks) {
    const inFlight = slots.filter((s) => s !== undefined).length;
    for (let i = counted.length - 1; i >= 0; i--)
      if ((counted[i] as number) <= now) {
        solvesSinceRead++;
        counted.splice(i, 1);
      }
    const decision = decideOverflow(
      primary(50),
      signalsAt(now, {
        backlog: tick.backlog,
        inFlight: tick.saturated ? 50 : 10,
        arrivalRate: 2,
        ceiling: 50,
        enabled: true,
      }),
      overflowSignals(now, { inFlight, ceiling: open.ceiling, enabled: open.enabled }, { balance }, solvesSinceRead),
      state,
      config,
    );
    state = decision.state;
    solvesSinceRead = 0;
    open = { enabled: decision.enabled, ceiling: decision.ceiling };
    const end = now + tick.gap;
    slots.forEach((_, i) => {
      let doneAt = slots[i];
      let t = now;
      for (;;) {
        if (doneAt !== undefined) {
          if (doneAt > end) break;
          charge(doneAt);
          t = doneAt;
        }
        // Slots under the ceiling take the next task at once; those above it only finish theirs.
        if (!open.enabled || i >= open.ceiling) {
          doneAt = undefined;
          break;
        }
        doneAt = t + world.minSolveMs * (1 + ((tick.solveSpread - 1) * ((i * 7919 + t) % 97)) / 97);
      }
      slots[i] = doneAt;
    });
    if (tick.topUp && account.topUps) balance += 5;
    now = end;
  }
  let worstHour = 0;
  let worstDay = 0;
  for (const [key, usd] of spentIn) {
    if (key.startsWith('h')) worstHour = Math.max(worstHour, usd);
    else worstDay = Math.max(worstDay, usd);
  }
  return { worstHour, worstDay, opened: spentIn.size > 0, lowestBalance };
}

describe('decideOverflow properties', () => {
  it('never spends a cent past the hourly or daily cap over any sequence of ticks', () => {
    fc.assert(
      fc.property(worldArb, (world) => {
        const { worstHour, worstDay } = simulateSpend(world);
        expect(worstHour).toBeLessThanOrEqual(world.capHour + 1e-9);
        expect(worstDay).toBeLessThanOrEqual(world.capDay + 1e-9);
      }),
      { numRuns: 60 },
    );
  });

  it('never spends past the caps when answers are counted after the provider charged them', () => {
    // The provider charges when its worker answers; the consumer counts the solve when it reads
    // the answer, up to a poll interval later: a balance drop and the solves counted beside it
    // need not cover the same solves.
    fc.assert(
      fc.property(worldArb, fc.integer({ min: 1, max: 2 * TICK_MS }), (world, lag) => {
        const { worstHour, worstDay } = simulateSpend(world, undefined, lag);
        expect(worstHour).toBeLessThanOrEqual(world.capHour + 1e-9);
        expect(worstDay).toBeLessThanOrEqual(world.capDay + 1e-9);
      }),
      { numRuns: 200 },
    );
  });

  it("never takes the provider's balance under its pause level, the solves in flight included", () => {
    // The provider's pause level is $1 (overflowConfig); the account starts a little above it.
    fc.assert(
      fc.property(worldArb, fc.double({ min: 1, max: 4, noNaN: true }), (world, start) => {
        const { lowestBalance } = simulateSpend(
          { ...world, capHour: 100, capDay: 100 },
          { balance: start, topUps: false },
        );
        expect(lowestBalance).toBeGreaterThanOrEqual(1 - 1e-9);
      }),
      { numRuns: 60 },
    );
  });

  const primaryArb = fc.record({
    free: fc.integer({ min: 2, max: 200 }),
    busyShare: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
    backlog: fc.nat(10_000),
    arrivalRate: fc.double({ min: 0, max: 50, noNaN: true }),
    meanSolveMs: fc.integer({ min: 1_000, max: 120_000 }),
  });

  it('never opens while the primary has free threads', () => {
    fc.assert(
      fc.property(primaryArb, (p) => {
        const config = overflowConfig();
        const inFlight = Math.floor(p.free * p.busyShare);
        const signals = signalsAt(
          T0,
          { backlog: p.backlog, inFlight, arrivalRate: p.arrivalRate, ceiling: p.free, enabled: true },
          { meanSolveMs: p.meanSolveMs },
        );

        const d = decideOverflow(
          primary(p.free),
          signals,
          overflowSignals(T0),
          initialOverflowState(config, T0),
          config,
        );

        expect(d.enabled).toBe(false);
      }),
    );
  });

  it('closes whenever the saturated primary drains the backlog within the target', () => {
    fc.assert(
      fc.property(primaryArb, fc.boolean(), (p, wasOpen) => {
        const config = overflowConfig();
        const rate = p.free / (p.meanSolveMs / 1000);
        fc.pre(p.arrivalRate < rate);
        // A backlog the primary drains within the 30 s target: ≤ (rate − arrivals) × 30.
        const backlog = Math.floor((rate - p.arrivalRate) * 30 * p.busyShare);
        const signals = signalsAt(
          T0,
          { backlog, inFlight: p.free, arrivalRate: p.arrivalRate, ceiling: p.free, enabled: true },
          { meanSolveMs: p.meanSolveMs },
        );
        const lane = { inFlight: wasOpen ? 5 : 0, ceiling: 10, enabled: wasOpen };

        const d = decideOverflow(
          primary(p.free),
          signals,
          overflowSignals(T0, lane),
          initialOverflowState(config, T0),
          config,
        );

        expect(d.enabled).toBe(false);
      }),
    );
  });
});
