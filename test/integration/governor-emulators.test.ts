import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { createQueueSignals } from '../../functions/adapters/queue-signals.js';
import { createDynamoThreadLedger } from '../../functions/adapters/thread-ledger.js';
import { createDynamoGovernorState, readGovernorStatus } from '../../functions/adapters/governor-state.js';
import { GovernorStateConflictError } from '../../functions/core/governor/ports.js';
import type { GovernorState } from '../../functions/core/governor/types.js';
import { governorConfigFrom, initialState } from '../../functions/core/governor/policy.js';
import { METRICS } from '../../functions/core/metric-names.js';
import { SolverTransientError } from '../../functions/core/solver-protocol.js';
import { startLocalGovernor, type LocalLane } from '../../local/governor-local.js';
import { MetricsStore } from '../../local/metrics-store.js';
import type { Poller } from '../../local/poller.js';
import { sleep, startEmulatorFixture, type EmulatorFixture, type TestFleet } from '../helpers/fleet-fixture.js';

// The real poller is what `npm start` hands the local governor.
const pollerFits: (p: Poller) => LocalLane = (p) => p;
void pollerFits;

let fixture: EmulatorFixture;
let fleet: TestFleet;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  fleet = await fixture.createFleet({ planThreads: 8, tickMs: 100 });
});

afterAll(async () => {
  await fixture?.stop();
});

/** A state item as an older release wrote it, put on the table, and the store that reads it. */
async function storedState(id: string, version: number, state: unknown) {
  await fixture.clients.documents.send(
    new PutCommand({ TableName: fleet.resources.tables.governor, Item: { id, version, state } }),
  );
  return createDynamoGovernorState({
    documents: fixture.clients.documents,
    tableName: fleet.resources.tables.governor,
    id,
  });
}

async function send(queueUrl: string, count: number, delaySeconds = 0) {
  for (let i = 0; i < count; i++) {
    await fixture.clients.sqs.send(
      new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify({ i }), DelaySeconds: delaySeconds }),
    );
  }
}

describe('queue signals on the SQS emulator', () => {
  it('reads visible, in-flight and delayed messages per lane', async () => {
    // Prepare: 5 visible, 2 of them received (in flight), 2 delayed; the high lane empty.
    const f = await fixture.createFleet();
    await send(f.resources.queueUrls.normal, 5);
    await send(f.resources.queueUrls.normal, 2, 60);
    await fixture.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: f.resources.queueUrls.normal,
        MaxNumberOfMessages: 2,
        VisibilityTimeout: 60,
      }),
    );
    const reader = createQueueSignals({ sqs: fixture.clients.sqs, queueUrls: f.resources.queueUrls, clock: () => 42 });
    // Act
    const reading = await reader.read();
    // Assess
    expect(reading.normal).toEqual({ at: 42, visible: 3, notVisible: 2, delayed: 2 });
    expect(reading.high).toEqual({ at: 42, visible: 0, notVisible: 0, delayed: 0 });
  });

  it('reads a queue it cannot reach as unknown, not empty', async () => {
    const errors: string[] = [];
    const reader = createQueueSignals({
      sqs: fixture.clients.sqs,
      queueUrls: { normal: `${fixture.emulators.sqsEndpoint}/000000000000/no-such-queue` },
      onError: (lane) => errors.push(lane),
    });
    const reading = await reader.read();
    expect(reading.normal.visible).toBeUndefined();
    expect(reading.normal.notVisible).toBeUndefined();
    expect(errors).toEqual(['normal']);
  });
});

describe('governor state on the DynamoDB emulator', () => {
  it('round-trips the state and refuses a stale writer', async () => {
    const store = createDynamoGovernorState({
      documents: fixture.clients.documents,
      tableName: fleet.resources.tables.governor,
    });
    const config = governorConfigFrom(fleet.settings);
    expect(await store.load()).toBeUndefined();
    const initial = initialState(config, 1000);
    const first: GovernorState = {
      ...initial,
      overCap: { ...initial.overCap, probeCredit: 1 },
      probe: { lastAt: 1000, recovery: { ceiling: 4, reason: 'resume' } },
    };
    const v1 = await store.save(first, undefined);
    expect(await store.load()).toEqual({ state: first, version: v1 });
    const second: GovernorState = {
      ...first,
      overCap: { ...first.overCap, effectiveCap: 5 },
      pause: { reason: 'balance', since: 2000 },
    };
    const v2 = await store.save(second, v1);
    expect(v2).toBe(v1 + 1);
    expect((await store.load())?.state).toEqual(second);
    // A second governor still holding version 1, or one that never read: refused.
    await expect(store.save(first, v1)).rejects.toBeInstanceOf(GovernorStateConflictError);
    await expect(store.save(first, undefined)).rejects.toBeInstanceOf(GovernorStateConflictError);
    expect((await store.load())?.state).toEqual(second);
  });

  it('stores the last decision summary and the new state fields in the item', async () => {
    const store = createDynamoGovernorState({
      documents: fixture.clients.documents,
      tableName: fleet.resources.tables.governor,
      id: 'status-test',
    });
    const config = governorConfigFrom(fleet.settings);
    expect(await readGovernorStatus(store)).toBeUndefined();
    const initial = initialState(config, 1000);
    const state: GovernorState = {
      ...initial,
      overCap: {
        ...initial.overCap,
        neighbours: { free: 7, step: 2, budget: 1.5, seen: { refusals: 1, acceptances: 100 }, updatedAt: 900 },
      },
      spend: { haltCeiling: 3, lastRead: { at: 1000, usd: 0.75 }, perSecond: 0.001 },
      lastDecision: {
        at: 1000,
        code: 'HALT_LOW_BALANCE' as const,
        message: 'Scaling halted',
        ceilings: { normal: 3, high: 2 },
        enabled: { normal: true, high: false },
        paused: false,
        freeThreads: 8,
        neededThreads: 12,
        shortfall: 4,
        // An endless drain is stored as null: DynamoDB has no Infinity.
        drainSeconds: null,
        shortfallWarning: true,
        balance: 0.75,
        backlog: { normal: 40 },
        inFlight: { normal: 3 },
        p95SolveMs: 20_000,
        errorRate: 0.01,
      },
    };
    await store.save(state, undefined);
    expect((await store.load())?.state).toEqual(state);
    expect(await readGovernorStatus(store)).toEqual(state.lastDecision);
  });

  it('loads an item written in the older flat shape as the grouped state (migrated on load)', async () => {
    // Prepare: the item as a release before the grouping wrote it, paused on the key.
    const id = 'legacy-shape';
    const legacy = {
      effectiveCap: 6,
      lastChangeAt: 1000,
      lastProbeAt: 900,
      pausedReason: 'account',
      pausedSince: 1000,
      outageTicks: 1,
      ceilings: { normal: 3, high: 2 },
      lastShrinkAt: 800,
      probeCeiling: 2,
      probeReason: 'resume',
      recentUse: [{ at: 950, threads: 6 }],
      refusedThreads: 7,
      probeBackoff: 2,
      haltCeiling: 3,
      balanceSeen: { at: 1000, usd: 0.75 },
      spendPerSecond: 0.001,
    };
    const store = await storedState(id, 4, legacy);
    // Act
    const loaded = await store.load();
    // Assess
    expect(loaded).toEqual({
      version: 4,
      state: {
        ceilings: { normal: 3, high: 2 },
        lastChangeAt: 1000,
        pause: { reason: 'account', since: 1000 },
        probe: { lastAt: 900, recovery: { ceiling: 2, reason: 'resume' } },
        // The metric window's over-cap fields are retired: the thread ledger's estimate starts afresh.
        overCap: { effectiveCap: 6 },
        spend: { lastRead: { at: 1000, usd: 0.75 }, perSecond: 0.001, haltCeiling: 3 },
        availability: { solver: { ticks: 1 } },
      },
    });
  });

  it("loads a previous grouped item's overflow provider and bare refused-read count in the current shape", async () => {
    // Prepare: the item as the release that brought the overflow lane wrote it (an `outage`
    // counter, the provider's guards in the same shape) with one refused balance read counted bare.
    const id = 'grouped-overflow';
    const grouped = (ceilings: { normal: number; high: number }, effectiveCap: number) => ({
      ceilings,
      lastChangeAt: 1000,
      probe: { lastAt: 1000 },
      overCap: { effectiveCap },
      spend: {},
      outage: { ticks: 1 },
    });
    const previous = {
      ...grouped({ normal: 6, high: 2 }, 8),
      spend: { refusedReads: 1 },
      overflow: {
        provider: grouped({ normal: 2, high: 2 }, 20),
        spend: { hourStart: 0, hourUsd: 0, dayStart: 0, dayUsd: 0, reservedUsd: 0 },
      },
    };
    const store = await storedState(id, 7, previous);
    // Act
    const loaded = await store.load();
    // Assess: the provider's `outage` is its `availability` as the primary's is (today's guards read
    // it every tick), and the bare count is a count a next refused read adds to.
    expect(loaded?.state.availability).toEqual({ solver: { ticks: 1 } });
    expect(loaded?.state.spend).toEqual({ refusedReads: { count: 1, at: 0 } });
    expect(loaded?.state.overflow?.provider).toEqual({
      ceilings: { normal: 2, high: 2 },
      lastChangeAt: 1000,
      probe: { lastAt: 1000 },
      overCap: { effectiveCap: 20 },
      spend: {},
      availability: { solver: { ticks: 1 } },
    });
    expect(loaded?.state.overflow?.spend).toEqual(previous.overflow.spend);
  });

  it('saves a migrated state over the legacy item on the version it read', async () => {
    // Prepare
    const id = 'legacy-resave';
    const config = governorConfigFrom(fleet.settings);
    const legacy = { ...initialState(config, 1000), effectiveCap: 8, lastProbeAt: 1000, outageTicks: 0 };
    const { overCap: _o, probe: _p, spend: _s, availability: _u, ...flat } = legacy;
    await fixture.clients.documents.send(
      new PutCommand({ TableName: fleet.resources.tables.governor, Item: { id, version: 1, state: flat } }),
    );
    const store = createDynamoGovernorState({
      documents: fixture.clients.documents,
      tableName: fleet.resources.tables.governor,
      id,
    });
    const loaded = await store.load();
    // Act
    const version = await store.save(loaded?.state as GovernorState, loaded?.version);
    // Assess
    expect(version).toBe(2);
    expect((await store.load())?.state).toEqual(loaded?.state);
    expect((await store.load())?.state.overCap.effectiveCap).toBe(8);
  });
});

describe('local governor on the emulators', () => {
  function lane(ceiling: number): LocalLane & { changes: string[] } {
    const l = {
      maxConcurrency: ceiling,
      enabled: true,
      changes: [] as string[],
      setMaxConcurrency(value: number) {
        l.maxConcurrency = value;
        l.changes.push(`max ${value}`);
      },
      setEnabled(value: boolean) {
        l.enabled = value;
        l.changes.push(value ? 'on' : 'off');
      },
    };
    return l;
  }

  /** A local governor on the fleet's normal lane (`normal`), an empty metric store, and what `extra` adds or replaces. */
  function plainGovernor(
    f: TestFleet,
    normal: LocalLane,
    extra: Partial<Parameters<typeof startLocalGovernor>[0]> & Pick<Parameters<typeof startLocalGovernor>[0], 'solver'>,
  ) {
    return startLocalGovernor({
      settings: f.settings,
      pollers: { normal },
      sqs: fixture.clients.sqs,
      queueUrls: { normal: f.resources.queueUrls.normal },
      metricsStore: new MetricsStore(),
      ...extra,
    });
  }

  /**
   * A local governor on the fleet's queues and its thread ledger on the emulator (the ledger's
   * solved counter and the balance give the price per solve), its ticks driven by hand.
   */
  function moneyGovernor(
    f: TestFleet,
    parts: {
      normal: LocalLane;
      pool?: { limit: number };
      store: MetricsStore;
      balance: () => number;
      clock: () => number;
    },
  ) {
    const ledger = createDynamoThreadLedger({
      documents: fixture.clients.documents,
      tableName: f.resources.tables.governor,
      leaseMs: 300_000,
      clock: parts.clock,
    });
    const start = () =>
      startLocalGovernor({
        settings: f.settings,
        pollers: { normal: parts.normal },
        ...(parts.pool !== undefined ? { pool: parts.pool } : {}),
        sqs: fixture.clients.sqs,
        queueUrls: { normal: f.resources.queueUrls.normal },
        metricsStore: parts.store,
        threadLedger: ledger,
        solver: { getBalance: async () => parts.balance() },
        // Ticks are driven by hand; the timer would only add noise.
        tickMs: 60_000,
        clock: parts.clock,
      });
    return { ledger, start };
  }

  it('raises the poller to the free threads on its first tick, halts and pauses on the balance, counts reasons', async () => {
    // Prepare: 20 queued, 2 in flight, a healthy metric window, a plan of 8 threads.
    const f = await fixture.createFleet({ planThreads: 8, tickMs: 100 });
    await send(f.resources.queueUrls.normal, 20);
    await fixture.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: f.resources.queueUrls.normal,
        MaxNumberOfMessages: 2,
        VisibilityTimeout: 60,
      }),
    );
    let now = Date.now();
    const store = new MetricsStore({ clock: () => now });
    for (const [name, value] of [
      [METRICS.submissions, 4],
      [METRICS.solved, 4],
      [METRICS.solveDuration, 900],
      [METRICS.solveDuration, 1100],
    ] as const) {
      store.record({ name, value, timestamp: now - 50, dimensions: { service: 'consumer' } });
    }
    let balance = 10;
    const normal = lane(2);
    const pool = { limit: 2 };
    const { ledger, start } = moneyGovernor(f, { normal, pool, store, balance: () => balance, clock: () => now });
    // A fleet that has solved before: the counter exists (it is never read as 0 before its first solve).
    await ledger.countSolved(1);
    const governor = start();
    try {
      // Act + Assess: the first tick sets the free threads at once.
      await governor.ready;
      expect(governor.lastDecision?.reason.code).toBe('FREE_THREADS');
      expect(normal.maxConcurrency).toBe(8);
      expect(pool.limit).toBe(8);
      // An hour later the balance drifted under the halt level (slow spending: no pause ahead) over
      // 9 500 solves ($0.001 each, learned): frozen where the ceiling stands (8, with 2 in flight: an
      // idle ceiling costs nothing), never up. A drop this size within one tick would pause at once.
      await ledger.countSolved(9_500);
      balance = 0.5;
      now += 3_600_000;
      await governor.tickNow();
      expect(governor.lastDecision?.reason.code).toBe('HALT_LOW_BALANCE');
      expect(normal.maxConcurrency).toBe(8);
      // Under the pause level: the poller is disabled, tasks stay queued.
      balance = 0.01;
      now += 60_001;
      await governor.tickNow();
      expect(governor.lastDecision?.paused).toBe(true);
      expect(normal.enabled).toBe(false);
      now += 5_000;
      const stats = governor.stats();
      expect(stats).toMatchObject({ decisions: 3, startCeiling: 8, maxCeiling: 8, failedTicks: 0 });
      expect(stats.reasons).toEqual({ FREE_THREADS: 1, HALT_LOW_BALANCE: 1, PAUSE_LOW_BALANCE: 1 });
      expect(stats.pausedMs).toBe(5_000);
    } finally {
      await governor.stop();
    }
  });

  it('starts under the halt level at the minimum, not where its mappings stand, until the price is learned', async () => {
    // Prepare: a fleet's first tick with $0.50 (halt $1, pause $0.10), its mapping standing at 8, 20 queued.
    const f = await fixture.createFleet({ planThreads: 8, tickMs: 100 });
    await send(f.resources.queueUrls.normal, 20);
    let now = Date.now();
    let balance = 0.5;
    const normal = lane(8);
    const store = new MetricsStore({ clock: () => now });
    const { ledger, start } = moneyGovernor(f, { normal, store, balance: () => balance, clock: () => now });
    const governor = start();
    try {
      // Act + Assess: no price yet: the minimum.
      await governor.ready;
      expect(governor.lastDecision?.reason.code).toBe('HALT_LOW_BALANCE');
      expect(governor.lastDecision?.reason.message).toMatch(/until the price per solve is learned/);
      expect(normal.maxConcurrency).toBe(2);
      // The first solves: the ledger's counter starts (no interval to learn from yet), then ten more
      // at $0.002: the price is known, and the hold stays at the minimum (no scale-up under the level).
      await ledger.countSolved(4);
      balance = 0.492;
      now += 60_000;
      await governor.tickNow();
      expect(governor.lastDecision?.state.spend.learnedPriceUsd).toBeUndefined();
      expect(normal.maxConcurrency).toBe(2);
      await ledger.countSolved(10);
      balance = 0.472;
      now += 60_000;
      await governor.tickNow();
      expect(governor.lastDecision?.state.spend.learnedPriceUsd).toBeCloseTo(0.002, 9);
      expect(normal.maxConcurrency).toBe(2);
    } finally {
      await governor.stop();
    }
  });

  it('paused for the solver’s outage, reads the balance between ticks and ticks at its first answer, as in AWS', async () => {
    // GIVEN a fleet with tasks waiting, a solver that does not answer, and ticks a minute apart (driven by hand)
    const f = await fixture.createFleet({ planThreads: 6, tickMs: 100 });
    await send(f.resources.queueUrls.normal, 10);
    const normal = lane(2);
    let down = true;
    const reads: number[] = [];
    const governor = plainGovernor(f, normal, {
      solver: {
        getBalance: async () => {
          reads.push(Date.now());
          if (down) throw new SolverTransientError('HTTP_503');
          return 5;
        },
      },
      tickMs: 60_000,
    });
    await governor.ready;
    for (let tick = 0; tick < 8 && governor.lastDecision?.reason.code !== 'PAUSE_OUTAGE'; tick++)
      await governor.tickNow();
    expect(governor.lastDecision?.reason.code).toBe('PAUSE_OUTAGE');
    expect(normal.enabled).toBe(false);
    const decisions = governor.stats().decisions;
    const paused = Date.now();

    // WHEN the solver answers again, with no tick of the cadence due for a minute
    down = false;
    const deadline = Date.now() + 6_000;
    while (governor.stats().decisions === decisions && Date.now() < deadline) await sleep(50);
    await sleep(100);

    // THEN a balance read between ticks (every 2 s) found it and woke a tick within a few seconds,
    // which resumed the fleet; the reads stop with the pause
    expect(governor.stats().decisions).toBe(decisions + 1);
    expect(Date.now() - paused).toBeLessThan(6_000);
    expect(governor.lastDecision?.paused).toBe(false);
    expect(normal.enabled).toBe(true);
    const readsAfter = reads.length;
    await sleep(2_500);
    expect(reads.length).toBe(readsAfter);
    await governor.stop();
  });

  it('hands back the task its probe keeps when it stops, as at an invocation’s end in AWS', async () => {
    const f = await fixture.createFleet({ planThreads: 6, tickMs: 100 });
    const calls: string[] = [];
    const governor = plainGovernor(f, lane(2), {
      solver: { getBalance: async () => 5 },
      probe: {
        submit: async () => {
          calls.push('submit');
        },
        release: async () => {
          calls.push('release');
        },
      },
      tickMs: 60_000,
    });
    await governor.ready;
    const beforeStop = calls.length;
    await governor.stop();
    expect(calls.slice(beforeStop)).toEqual(['release']);
  });

  it('ticks on its timer', async () => {
    const f = await fixture.createFleet({ planThreads: 6, tickMs: 100 });
    const normal = lane(2);
    const governor = plainGovernor(f, normal, { solver: { getBalance: async () => 5 }, tickMs: 100 });
    await new Promise((resolve) => setTimeout(resolve, 450));
    await governor.stop();
    const decisions = governor.stats().decisions;
    expect(decisions).toBeGreaterThanOrEqual(3);
    expect(decisions).toBeLessThanOrEqual(6);
    expect(normal.maxConcurrency).toBe(6);
    expect(governor.stats().reasons.IDLE).toBe(decisions);
  });
});
