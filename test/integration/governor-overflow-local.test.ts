/**
 * The local governor running the overflow lane on the emulators: the lane's poller as its
 * mapping, its pool as its reservation, its metrics from the local store under
 * `consumer-overflow`, its balance and ledger from what the options give.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { METRICS } from '../../functions/core/metric-names.js';
import type { ThreadLedgerReading } from '../../functions/core/thread-ledger.js';
import { startLocalGovernor, type LocalLane } from '../../local/governor-local.js';
import { MetricsStore } from '../../local/metrics-store.js';
import { sendMessage, startEmulatorFixture, type EmulatorFixture } from '../helpers/fleet-fixture.js';

let fixture: EmulatorFixture;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});

afterAll(async () => {
  await fixture?.stop();
});

function lane(ceiling: number, enabled: boolean): LocalLane {
  const l = {
    maxConcurrency: ceiling,
    enabled,
    setMaxConcurrency(value: number) {
      l.maxConcurrency = value;
    },
    setEnabled(value: boolean) {
      l.enabled = value;
    },
  };
  return l;
}

describe('local governor with an overflow lane', () => {
  it('opens the overflow poller while the plan is saturated, closes it when its balance is unknown, and counts it', async () => {
    // Prepare: plan 4; 40 queued, 6 received: 4 by the primary, 2 held by the overflow lane.
    const f = await fixture.createFleet({
      planThreads: 4,
      tickMs: 1_000,
      overflow: { baseUrl: 'http://127.0.0.1:1', capUsdPerHour: 2, capUsdPerDay: 10, priceHintUsd: 0.003 },
    });
    for (let i = 0; i < 40; i++) await sendMessage(fixture.clients, f.resources.queueUrls.normal, `{"i":${i}}`);
    await fixture.clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: f.resources.queueUrls.normal,
        MaxNumberOfMessages: 6,
        VisibilityTimeout: 120,
      }),
    );
    let now = Date.now();
    const store = new MetricsStore({ clock: () => now });
    const emit = (service: string, solveMs: number) => {
      for (const [name, value] of [
        [METRICS.submissions, 2],
        [METRICS.solved, 2],
        [METRICS.solveDuration, solveMs],
      ] as const)
        store.record({ name, value, timestamp: now - 10, dimensions: { service } });
    };
    emit('consumer', 20_000);
    emit('consumer-overflow', 15_000);
    const normal = lane(4, true);
    const overflowLane = lane(2, false);
    const overflowPool = { limit: 2 };
    let overflowBalance: () => Promise<number> = async () => 20;
    const ledger: ThreadLedgerReading = { held: 2, refusals: 0, acceptances: 2, solved: 0 };
    const governor = startLocalGovernor({
      settings: f.settings,
      pollers: { normal },
      pool: { limit: 4 },
      sqs: fixture.clients.sqs,
      queueUrls: { normal: f.resources.queueUrls.normal },
      metricsStore: store,
      solver: { getBalance: async () => 50 },
      tickMs: 60_000,
      clock: () => now,
      overflow: {
        lane: overflowLane,
        pool: overflowPool,
        solver: { getBalance: () => overflowBalance() },
        ledger: { read: async () => ({ ...ledger }) },
      },
    });
    try {
      // Act: the first tick has no earlier queue read, so no arrival rate yet: the lane stays closed.
      await governor.ready;
      const first = governor.lastDecision?.state.lastDecision?.overflow;
      expect(first?.code).toBe('OVERFLOW_MISSING_SIGNAL');
      expect(overflowLane.enabled).toBe(false);
      now += 1_000;
      const opened = await governor.tickNow();

      // Assess: the plan's 4 threads are busy (6 not visible less the lane's 2) and 34 wait.
      expect(opened?.signals.lanes.normal.inFlight).toBe(4);
      expect(opened?.signals.meanSolveMs).toBe(20_000);
      expect(opened?.overflowSignals?.provider.meanSolveMs).toBe(15_000);
      expect(opened?.overflow).toMatchObject({ enabled: true, ceiling: 2, reason: { code: 'OVERFLOW_PROBE' } });
      expect(overflowLane).toMatchObject({ enabled: true, maxConcurrency: 2 });
      expect(overflowPool.limit).toBe(2);
      expect(opened?.changes).toContain('overflow enabled');

      // The provider's balance cannot be read (after the half-tick cache): spend cannot be budgeted, the lane closes.
      overflowBalance = async () => {
        throw new Error('connect ECONNREFUSED');
      };
      now += 31_000;
      const closed = await governor.tickNow();
      expect(closed?.overflow?.reason.code).toBe('OVERFLOW_MISSING_SIGNAL');
      expect(closed?.decision.reason.code).not.toBe('HOLD_MISSING_SIGNAL');
      expect(overflowLane.enabled).toBe(false);

      expect(governor.stats().overflow).toEqual({
        decisions: 3,
        openDecisions: 1,
        maxCeiling: 2,
        reasons: { OVERFLOW_MISSING_SIGNAL: 2, OVERFLOW_PROBE: 1 },
        lastSpendHourUsd: 0,
        lastSpendDayUsd: 0,
        priceUsd: 0.003,
        priceLearned: false,
      });
    } finally {
      await governor.stop();
    }
  });

  it('opens its high-queue poller too while the primary is paused, splitting the lane by backlog', async () => {
    // Prepare: the plan's balance is under its pause level; 30 wait on the normal queue, 10 on the high one.
    const f = await fixture.createFleet({
      planThreads: 4,
      tickMs: 1_000,
      overflow: { baseUrl: 'http://127.0.0.1:1', capUsdPerHour: 2, capUsdPerDay: 10, priceHintUsd: 0.003 },
    });
    for (let i = 0; i < 30; i++) await sendMessage(fixture.clients, f.resources.queueUrls.normal, `{"i":${i}}`);
    for (let i = 0; i < 10; i++) await sendMessage(fixture.clients, f.resources.queueUrls.high, `{"h":${i}}`);
    let now = Date.now();
    const store = new MetricsStore({ clock: () => now });
    for (const service of ['consumer', 'consumer-overflow'])
      for (const [name, value] of [
        [METRICS.submissions, 2],
        [METRICS.solved, 2],
        [METRICS.solveDuration, 20_000],
      ] as const)
        store.record({ name, value, timestamp: now - 10, dimensions: { service } });
    const overflowNormal = lane(2, false);
    const overflowHigh = lane(2, false);
    const overflowPool = { limit: 2 };
    const governor = startLocalGovernor({
      settings: f.settings,
      pollers: { normal: lane(2, true), high: lane(2, true) },
      pool: { limit: 4 },
      sqs: fixture.clients.sqs,
      queueUrls: { normal: f.resources.queueUrls.normal, high: f.resources.queueUrls.high },
      metricsStore: store,
      // Under the default $0.10 pause level: the primary pauses (PAUSE_LOW_BALANCE).
      solver: { getBalance: async () => 0.05 },
      tickMs: 60_000,
      clock: () => now,
      overflow: {
        lane: overflowNormal,
        highLane: overflowHigh,
        pool: overflowPool,
        solver: { getBalance: async () => 20 },
        ledger: { read: async () => ({ held: 0, refusals: 0, acceptances: 0, solved: 0 }) },
        // A learned-price-wide lane from the start, so the split has room for both mappings.
        config: { probeCeiling: 8 },
      },
    });
    try {
      await governor.ready;
      now += 1_000;

      // Act
      const record = await governor.tickNow();

      // Assess: the primary paused; the lane open on both queues, the high share by backlog, the pool their sum.
      expect(record?.decision.paused).toBe(true);
      expect(record?.overflow?.enabled).toBe(true);
      const ceiling = record?.overflow?.ceiling ?? 0;
      expect(ceiling).toBeGreaterThanOrEqual(4);
      expect(overflowHigh.enabled).toBe(true);
      expect(overflowNormal.enabled).toBe(true);
      expect(overflowHigh.maxConcurrency).toBe(Math.max(2, Math.ceil((ceiling * 10) / 40)));
      expect(overflowHigh.maxConcurrency + overflowNormal.maxConcurrency).toBe(ceiling);
      expect(overflowPool.limit).toBe(ceiling);
      expect(record?.changes).toContain('overflow high enabled');
    } finally {
      await governor.stop();
    }
  });

  it('has no overflow block in its stats without an overflow lane', async () => {
    const f = await fixture.createFleet({ planThreads: 4, tickMs: 1_000 });
    const governor = startLocalGovernor({
      settings: f.settings,
      pollers: { normal: lane(2, true) },
      sqs: fixture.clients.sqs,
      queueUrls: { normal: f.resources.queueUrls.normal },
      metricsStore: new MetricsStore(),
      solver: { getBalance: async () => 5 },
      tickMs: 60_000,
    });
    await governor.ready;
    await governor.stop();
    expect(governor.stats()).not.toHaveProperty('overflow');
    expect(governor.lastDecision?.state.overflow).toBeUndefined();
  });
});
