/**
 * The governor loop running the overflow lane (functions/governor/overflow-step.ts), with fake
 * readers and actuators: the lane's in flight taken out of the normal lane's, the provider's
 * signals decideOverflow() gets, its state saved with the governor's across ticks and cold starts,
 * dry runs, a failing provider read, and the decision's metrics.
 */
import { describe, expect, it, vi } from 'vitest';
import { createMemoryGovernorState, readGovernorStatus } from '../../functions/adapters/governor-state.js';
import { createMetrics, type EmfDocument } from '../../functions/adapters/metrics.js';
import {
  decideOverflow,
  initialOverflowState,
  overflowConfigFrom,
  type OverflowConfig,
} from '../../functions/core/governor/overflow.js';
import { minimumCeiling } from '../../functions/core/governor/capacity.js';
import { governorConfigFrom } from '../../functions/core/governor/policy.js';
import type { LaneActuator } from '../../functions/core/governor/ports.js';
import { assembleSignals, type LaneSetting, type MetricsWindow } from '../../functions/core/governor/signals.js';
import type { GovernorStateStore } from '../../functions/core/governor/ports.js';
import { resolveSettings } from '../../functions/core/settings.js';
import type { ThreadLedgerReading } from '../../functions/core/thread-ledger.js';
import { createGovernorLoop, decisionLogFields, type GovernorLoopOptions } from '../../functions/governor/loop.js';
import { counterRise } from '../../functions/governor/overflow-step.js';
import { emitDecisionMetrics } from '../../functions/governor/run.js';
import { T0 } from '../helpers/governor.js';

const TICK_MS = 10_000;
const overflowBlock = {
  baseUrl: 'https://overflow.example',
  capUsdPerHour: 2,
  capUsdPerDay: 10,
  priceHintUsd: 0.003,
  maxConcurrency: 20,
};
const settings = resolveSettings({ planThreads: 10, tickMs: TICK_MS, overflow: overflowBlock });
const config = governorConfigFrom(settings);
const overflowConfig = overflowConfigFrom(settings) as OverflowConfig;

/** The primary's window: 20 s solves, nothing failing. */
const primaryWindow: MetricsWindow = {
  windowMs: 60_000,
  submissions: 30,
  resultRequests: 120,
  overCapAnswers: 0,
  transientErrors: 0,
  taskErrors: 0,
  accountErrors: 0,
  solved: 30,
  meanSolveMs: 20_000,
  p95SolveMs: 30_000,
};
/** The overflow consumer's window: 15 s solves. */
const overflowWindow: MetricsWindow = {
  ...primaryWindow,
  submissions: 6,
  resultRequests: 24,
  solved: 6,
  meanSolveMs: 15_000,
};

/** An actuator that remembers what it was set to. */
function fakeActuator(start: LaneSetting) {
  let setting = { ...start };
  const apply = vi.fn(async (d: { ceilings: { normal: number }; enabled: { normal: boolean } }) => {
    const changed = d.ceilings.normal !== setting.ceiling || d.enabled.normal !== setting.enabled;
    setting = { ceiling: d.ceilings.normal, enabled: d.enabled.normal };
    return { changes: changed ? [`set ${setting.ceiling} ${setting.enabled}`] : [] };
  });
  const actuator: LaneActuator & { apply: typeof apply } = { read: async () => ({ normal: { ...setting } }), apply };
  return actuator;
}

/** What the world looks like to one tick; tests change it between ticks. */
interface World {
  now: number;
  visible: number;
  notVisible: number;
  sentRate: number | undefined;
  primaryBalance: number;
  overflowBalance: () => Promise<number | undefined>;
  ledger: () => Promise<ThreadLedgerReading | undefined>;
}

/** A saturated primary: 300 waiting, all 10 threads busy, 4 overflow solves in flight (14 not visible). */
function world(overrides: Partial<World> = {}): World {
  return {
    now: T0,
    visible: 300,
    notVisible: 14,
    sentRate: 2,
    primaryBalance: 50,
    overflowBalance: async () => 20,
    ledger: async () => ({ held: 4, refusals: 0, acceptances: 10, solved: 0 }),
    ...overrides,
  };
}

function loopFor(
  w: World,
  extra: Partial<GovernorLoopOptions> = {},
  state?: GovernorStateStore,
  laneConfig: OverflowConfig = overflowConfig,
) {
  const primary = fakeActuator({ ceiling: 10, enabled: true });
  const overflowActuator = fakeActuator({ ceiling: 2, enabled: false });
  const store = state ?? createMemoryGovernorState();
  const logged: Array<Record<string, unknown> | undefined> = [];
  const options: GovernorLoopOptions = {
    config,
    queues: {
      read: async () => ({
        normal: { at: w.now, visible: w.visible, notVisible: w.notVisible, delayed: 0, sentRate: w.sentRate },
      }),
    },
    metrics: { read: async () => primaryWindow },
    balance: { read: async () => w.primaryBalance },
    actuator: primary,
    state: store,
    clock: () => w.now,
    metricsEveryMs: 0,
    log: { info: (_m, fields) => logged.push(fields), warn: () => {}, error: () => {} },
    overflow: {
      config: laneConfig,
      balance: { read: () => w.overflowBalance() },
      ledger: { read: () => w.ledger() },
      metrics: { read: async () => overflowWindow },
      actuator: overflowActuator,
    },
    ...extra,
  };
  return { loop: createGovernorLoop(options), primary, overflowActuator, store, logged };
}

describe('governor loop with the overflow lane', () => {
  it("takes the overflow lane's in flight out of the normal lane's before the primary decides", async () => {
    // Prepare: 14 not visible on the normal queue, 4 of them the overflow lane's.
    const { loop } = loopFor(world());

    // Act
    const record = await loop.tick();

    // Assess
    expect(record.signals.lanes.normal.inFlight).toBe(10);
    expect(record.decision.state.lastDecision?.inFlight).toEqual({ normal: 10 });
    expect(record.overflowSignals?.provider.lanes.normal.inFlight).toBe(4);
  });

  it('never takes the normal lane below 0, and keeps an unknown in flight unknown', async () => {
    const over = await loopFor(world({ ledger: async () => ({ held: 20, refusals: 0, acceptances: 0 }) })).loop.tick();
    const unknownLedger = await loopFor(
      world({
        ledger: async () => {
          throw new Error('ProvisionedThroughputExceededException');
        },
      }),
    ).loop.tick();

    expect(over.signals.lanes.normal.inFlight).toBe(0);
    expect(unknownLedger.signals.lanes.normal.inFlight).toBeUndefined();
    expect(unknownLedger.decision.reason.code).toBe('HOLD_MISSING_SIGNAL');
    expect(unknownLedger.overflow?.reason.code).toBe('OVERFLOW_MISSING_SIGNAL');
  });

  it("gives decideOverflow the primary's decision and signals and the provider's own signals", async () => {
    // Prepare
    const { loop } = loopFor(world());

    // Act
    const record = await loop.tick();

    // Assess: the provider's lane is the normal queue's backlog with the lane's own in flight and mapping.
    const provider = record.overflowSignals?.provider;
    expect(provider?.lanes.normal).toMatchObject({ backlog: 300, inFlight: 4, ceiling: 2, enabled: false });
    expect(provider?.lanes.normal.arrivalRate).toBe(record.signals.lanes.normal.arrivalRate);
    expect(provider?.balance).toBe(20);
    expect(record.signals.balance).toBe(50);
    expect(provider?.meanSolveMs).toBe(15_000);
    expect(provider?.errorRate).toBe(0);
    expect(record.overflowSignals?.solvesSinceLastRead).toBeUndefined(); // first read after a cold start
    expect(record.overflow).toEqual(
      decideOverflow(
        record.decision,
        record.signals,
        record.overflowSignals as NonNullable<typeof record.overflowSignals>,
        initialOverflowState(overflowConfig, T0),
        overflowConfig,
      ),
    );
    // Saturated primary, 300 waiting: the lane opens, no wider than the probe until a price is learned.
    expect(record.overflow).toMatchObject({ enabled: true, ceiling: 2, reason: { code: 'OVERFLOW_PROBE' } });
  });

  it('closes the lane for a store outage as the primary pauses for it (both lanes use the stores), and resumes it on trial', async () => {
    // Prepare: DynamoDB's probe fails for outageTicks ticks, then answers.
    const w = world();
    let dynamoDown = true;
    const stores = {
      read: async () => [
        {
          store: 'dynamodb' as const,
          probe: dynamoDown
            ? ({ ok: false, kind: 'unavailable', detail: 'ServiceUnavailable' } as const)
            : ({ ok: true } as const),
        },
        { store: 'sqs' as const, probe: { ok: true } as const },
      ],
    };
    const { loop, overflowActuator } = loopFor(w, { stores });

    // Act
    const records = [];
    for (let i = 0; i < config.outageTicks; i++) {
      records.push(await loop.tick());
      w.now += TICK_MS;
    }
    const paused = records.at(-1);
    dynamoDown = false;
    const resumed = await loop.tick();

    // Assess: the primary's pause does not send the backlog through the overflow lane into the same store.
    expect(paused?.decision.reason.code).toBe('PAUSE_OUTAGE');
    expect(paused?.overflow).toMatchObject({ enabled: false, reason: { code: 'OVERFLOW_GUARD' } });
    expect(paused?.overflow?.reason.message).toContain('dynamodb');
    expect(overflowActuator.apply.mock.calls[config.outageTicks - 1]?.[0].enabled.normal).toBe(false);
    // Back on trial: the lane no wider than the guard's trial ceiling.
    expect(resumed.decision.reason.message).toContain('on trial');
    expect(resumed.overflow?.ceiling ?? 0).toBeLessThanOrEqual(minimumCeiling(overflowConfig.provider));
  });

  it('opens the overflow mapping after the primary lanes and says so', async () => {
    const { loop, primary, overflowActuator } = loopFor(world());

    const record = await loop.tick();

    expect(overflowActuator.apply).toHaveBeenCalledExactlyOnceWith({
      ceilings: { normal: 2, high: 2 },
      enabled: { normal: true, high: false },
    });
    expect(primary.apply.mock.invocationCallOrder[0]).toBeLessThan(
      overflowActuator.apply.mock.invocationCallOrder[0] as number,
    );
    expect(record.changes).toContain('set 2 true');
  });

  it('saves its state with the governor state, learns the price across ticks, and after a cold start', async () => {
    // Prepare: the lane solves 10 tasks between two reads while the balance drops $0.03.
    const w = world();
    let solved = 0;
    let balance = 20;
    w.ledger = async () => ({ held: 4, refusals: 0, acceptances: 10, solved });
    w.overflowBalance = async () => balance;
    const { loop, store } = loopFor(w);
    const first = await loop.tick();
    w.now += TICK_MS;
    solved = 10;
    balance = 19.97;

    // Act
    const second = await loop.tick();

    // Assess: one item, one version per tick, the overflow state inside it.
    const saved = await store.load();
    expect(saved?.version).toBe(2);
    expect(saved?.state.overflow).toEqual(second.overflow?.state);
    expect(second.overflowSignals?.solvesSinceLastRead).toBe(10);
    expect(second.overflow?.state.spend.learnedPriceUsd).toBeCloseTo(0.003, 9);
    expect(second.overflow?.state.spend.hourUsd).toBeCloseTo(0.03, 9);
    expect(second.overflow).toEqual(
      decideOverflow(
        second.decision,
        second.signals,
        second.overflowSignals as NonNullable<typeof second.overflowSignals>,
        first.overflow?.state as NonNullable<typeof first.overflow>['state'],
        overflowConfig,
      ),
    );

    // A cold start (a new invocation) reads the state back: the drop since the saved read is
    // spent, the solves since are unknown (the counter's base lived in the old invocation).
    w.now += TICK_MS;
    solved = 20;
    balance = 19.94;
    const cold = await loopFor(w, {}, store).loop.tick();
    expect(cold.overflowSignals?.solvesSinceLastRead).toBeUndefined();
    expect(cold.overflow?.state.spend.hourUsd).toBeCloseTo(0.06, 9);
    expect(cold.overflow?.state.spend.learnedPriceUsd).toBeCloseTo(0.003, 9);
  });

  it('counts the solves from the last balance read, not from the last tick', async () => {
    // Prepare: the second tick cannot read the balance; the third prices both intervals' solves.
    const w = world();
    let solved = 0;
    let balance: number | undefined = 20;
    w.ledger = async () => ({ held: 4, refusals: 0, acceptances: 10, solved });
    w.overflowBalance = async () => balance;
    const { loop } = loopFor(w);
    await loop.tick();
    w.now += TICK_MS;
    solved = 5;
    balance = undefined;
    const blind = await loop.tick();
    w.now += TICK_MS;
    solved = 12;
    balance = 19.964;

    // Act
    const third = await loop.tick();

    // Assess
    expect(blind.overflow?.reason.code).toBe('OVERFLOW_MISSING_SIGNAL');
    expect(third.overflowSignals?.solvesSinceLastRead).toBe(12);
    expect(third.overflow?.state.spend.learnedPriceUsd).toBeCloseTo(0.003, 9);
  });

  it('records the lane in the saved status and the decision log line', async () => {
    const { loop, store, logged } = loopFor(world());

    const record = await loop.tick();

    expect((await readGovernorStatus(store))?.overflow).toEqual({
      enabled: true,
      ceiling: 2,
      code: 'OVERFLOW_PROBE',
      message: record.overflow?.reason.message,
      excess: record.overflow?.excess,
      inFlight: 4,
      balance: 20,
      hourUsd: 0,
      dayUsd: 0,
      capUsdPerHour: 2,
      capUsdPerDay: 10,
      priceUsd: 0.003,
      priceLearned: false,
    });
    expect(logged.at(-1)).toMatchObject({
      reason: record.decision.reason.code,
      overflow: { reason: 'OVERFLOW_PROBE', enabled: true, ceiling: 2, balance: 20, inFlight: 4, spendHourUsd: 0 },
    });
  });

  it('on a dry run decides the lane but neither saves nor moves it', async () => {
    const { loop, overflowActuator, store } = loopFor(world(), { dryRun: true });

    const record = await loop.tick();

    expect(record.overflow?.enabled).toBe(true);
    expect(record.applied).toBe(false);
    expect(overflowActuator.apply).not.toHaveBeenCalled();
    expect(await store.load()).toBeUndefined();
  });

  it("closes the lane on a failing provider balance read without failing the primary's tick", async () => {
    // Prepare: the provider's balance read throws.
    const { loop, primary, overflowActuator, store } = loopFor(
      world({
        overflowBalance: async () => {
          throw new Error('connect ECONNREFUSED');
        },
      }),
    );

    // Act
    const record = await loop.tick();

    // Assess: the primary decided, saved and applied as always; the lane is closed.
    expect(record.decision.reason.code).toBe('FREE_THREADS');
    expect(primary.apply).toHaveBeenCalledOnce();
    expect((await store.load())?.version).toBe(1);
    expect(record.overflow).toMatchObject({ enabled: false, reason: { code: 'OVERFLOW_MISSING_SIGNAL' } });
    expect(overflowActuator.apply).toHaveBeenCalledWith({
      ceilings: { normal: 2, high: 2 },
      enabled: { normal: false, high: false },
    });
  });

  it('fails the tick when the overflow mapping cannot be moved, after the state is saved', async () => {
    const { loop, overflowActuator, store } = loopFor(world());
    overflowActuator.apply.mockRejectedValueOnce(new Error('ResourceInUseException'));

    await expect(loop.tick()).rejects.toThrow('ResourceInUseException');
    expect((await store.load())?.state.overflow).toBeDefined();
  });

  it('without the overflow option behaves as before: no subtraction, no overflow state', async () => {
    const { loop, store } = loopFor(world(), { overflow: undefined });

    const record = await loop.tick();

    expect(record.signals.lanes.normal.inFlight).toBe(14);
    expect(record.overflow).toBeUndefined();
    expect(decisionLogFields(record)).not.toHaveProperty('overflow');
    expect((await store.load())?.state).not.toHaveProperty('overflow');
    expect((await readGovernorStatus(store))?.overflow).toBeUndefined();
  });
});

describe('signal assembly with a second consumer on the normal queue', () => {
  const base = {
    now: 20_000,
    previous: { normal: { at: 10_000, visible: 100, notVisible: 14, delayed: 0 } },
    queues: { normal: { at: 20_000, visible: 90, notVisible: 14, delayed: 0 } },
    metrics: { ...primaryWindow, solved: 60, windowMs: 60_000 }, // the primary completes 1/s
    balance: 5,
    settings: { normal: { ceiling: 10, enabled: true } },
  };

  it("counts the other consumer's completions among what left the queue", () => {
    // 10 fewer queued in 10 s (−1/s); the primary completed 1/s and the overflow lane 0.5/s: 0.5/s arrived.
    const s = assembleSignals({ ...base, sharedNormal: { inFlight: 4, completionRate: 0.5 } });
    expect(s.lanes.normal.arrivalRate).toBeCloseTo(0.5, 12);
    expect(s.lanes.normal.inFlight).toBe(10);
    // Without it the same reads say nothing arrived.
    expect(assembleSignals(base).lanes.normal.arrivalRate).toBe(0);
  });

  it("reads the arrivals as unknown when the other consumer's completions are", () => {
    const s = assembleSignals({ ...base, sharedNormal: { inFlight: 4, completionRate: undefined } });
    expect(s.lanes.normal.arrivalRate).toBeUndefined();
  });
});

describe('counterRise', () => {
  it('is unknown without a base or when the counter fell', () => {
    expect(counterRise(12, 5)).toBe(7);
    expect(counterRise(12, undefined)).toBeUndefined();
    expect(counterRise(undefined, 5)).toBeUndefined();
    expect(counterRise(3, 5)).toBeUndefined();
  });
});

describe('overflow decision metrics', () => {
  const emitted = async (w: World, laneConfig = overflowConfig) => {
    const documents: EmfDocument[] = [];
    const metrics = createMetrics({
      namespace: 'CaptchaFleet',
      serviceName: 'governor',
      sink: (d) => documents.push(d),
    });
    const record = await loopFor(w, {}, undefined, laneConfig).loop.tick();
    emitDecisionMetrics(metrics, record);
    const values = new Map<string, number>();
    const reasons: string[] = [];
    for (const d of documents) {
      const fields = d as unknown as Record<string, unknown>;
      for (const m of d._aws.CloudWatchMetrics.flatMap((c) => c.Metrics)) {
        values.set(m.Name, fields[m.Name] as number);
        if (m.Name === 'OverflowDecision') reasons.push(String(fields.Reason));
      }
    }
    return { values, reasons, record };
  };

  it('publishes the open lane: ceiling, excess, spend, price, balance, the decision by reason', async () => {
    const { values, reasons, record } = await emitted(world());

    expect(values.get('OverflowCeiling')).toBe(2);
    expect(values.get('OverflowExcess')).toBe(record.overflow?.excess);
    expect(values.get('OverflowSpendHourUsd')).toBe(0);
    expect(values.get('OverflowSpendDayUsd')).toBe(0);
    expect(values.get('OverflowPriceUsd')).toBe(0.003);
    expect(values.get('OverflowBalance')).toBe(20);
    expect(values.get('OverflowCapReached')).toBe(0);
    expect(reasons).toEqual(['OVERFLOW_PROBE']);
  });

  it('publishes 0 as the ceiling of a closed lane, and leaves an unread balance out', async () => {
    const { values, reasons } = await emitted(world({ overflowBalance: async () => undefined }));

    expect(values.get('OverflowCeiling')).toBe(0);
    expect(values.has('OverflowBalance')).toBe(false);
    expect(reasons).toEqual(['OVERFLOW_MISSING_SIGNAL']);
  });

  it('flags the cap reached while the backlog still asks for more', async () => {
    // A cap of one cent an hour affords no invocation at $0.003 a solve.
    const capped = { ...overflowConfig, capUsdPerHour: 0.01 };

    const { values, reasons, record } = await emitted(world(), capped);

    expect(record.overflow?.excess).toBeGreaterThan(0);
    expect(reasons).toEqual(['OVERFLOW_CAP']);
    expect(values.get('OverflowCapReached')).toBe(1);
    expect(values.get('OverflowCeiling')).toBe(0);
  });

  it('publishes no overflow metric without an overflow lane', async () => {
    const documents: EmfDocument[] = [];
    const metrics = createMetrics({
      namespace: 'CaptchaFleet',
      serviceName: 'governor',
      sink: (d) => documents.push(d),
    });
    const record = await loopFor(world(), { overflow: undefined }).loop.tick();

    emitDecisionMetrics(metrics, record);

    const names = documents.flatMap((d) => d._aws.CloudWatchMetrics.flatMap((c) => c.Metrics.map((m) => m.Name)));
    expect(names).toContain('Ceiling');
    expect(names.filter((n) => n.startsWith('Overflow'))).toEqual([]);
  });
});
