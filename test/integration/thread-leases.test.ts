import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoThreadLeases, META_SLOT } from '../../functions/adapters/thread-leases.js';
import type { LeaseSlot } from '../../functions/core/thread-leases.js';
import { type EmulatorFixture, startEmulatorFixture } from '../helpers/fleet-fixture.js';

let fixture: EmulatorFixture;
let tableName: string;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  tableName = (await fixture.createFleet()).resources.tables.leases;
});

afterAll(async () => {
  await fixture?.stop();
});

function leasesAt(now: { t: number }) {
  return createDynamoThreadLeases({ documents: fixture.clients.documents, tableName, clock: () => now.t });
}

function lease(shard: string, slot: number, taskId: string, now: number, ms = 60_000): LeaseSlot {
  return {
    shard,
    slot,
    taskId,
    takenAt: now,
    until: now + ms,
    delivery: {
      eventSourceArn: 'arn:aws:sqs:us-east-1:000000000000:q',
      receiptHandle: `handle-${taskId}`,
      messageId: taskId,
    },
  };
}

describe('thread leases on dynalite, through the real SDK', () => {
  it('gives one slot to one taker: of two racing for it, one wins', async () => {
    // Prepare
    const now = { t: 1_000_000 };
    const leases = leasesAt(now);
    // Act
    const [a, b] = await Promise.all([
      leases.take(lease('race#0', 3, 'a', now.t)),
      leases.take(lease('race#0', 3, 'b', now.t)),
    ]);
    const view = await leases.view('race#0');
    // Assess
    expect([a, b].filter(Boolean)).toHaveLength(1);
    expect(view.slots).toHaveLength(1);
    expect(view.slots[0]?.delivery.receiptHandle).toBe(`handle-${view.slots[0]?.taskId}`);
  });

  it('lets a slot be taken again once its holder released it or its lease ran out', async () => {
    const now = { t: 1_000_000 };
    const leases = leasesAt(now);
    expect(await leases.take(lease('reuse#0', 0, 'first', now.t, 10_000))).toBe(true);
    expect(await leases.take(lease('reuse#0', 0, 'second', now.t))).toBe(false);
    now.t += 10_001;
    // The first holder crashed: its slot is free by its `until`, whatever is left in the table.
    expect(await leases.take(lease('reuse#0', 0, 'second', now.t))).toBe(true);
    // A late release by the first holder cannot free the second's slot.
    await leases.release({ shard: 'reuse#0', slot: 0, taskId: 'first' });
    expect((await leases.view('reuse#0')).slots.map((s) => s.taskId)).toEqual(['second']);
    await leases.release({ shard: 'reuse#0', slot: 0, taskId: 'second' });
    expect((await leases.view('reuse#0')).slots).toEqual([]);
  });

  it('keeps a shard limit and a refusal hold-off on its meta item, apart from the slots', async () => {
    const now = { t: 2_000_000 };
    const leases = leasesAt(now);
    await leases.setLimit('meta#0', 7);
    await leases.refused('meta#0', now.t, 5);
    await leases.take(lease('meta#0', 0, 'x', now.t));
    const [held] = await leases.views(['meta#0']);
    expect(held?.meta).toEqual({ limit: 7, refusedAt: now.t, refusedHeld: 5, refusals: 1 });
    expect(held?.slots.map((s) => s.slot)).toEqual([0]);
    await leases.setLimit('meta#0', 9, { clearRefusal: true });
    expect((await leases.view('meta#0')).meta).toEqual({ limit: 9, refusals: 1 });
    expect(META_SLOT).toBeLessThan(0);
  });

  it('reads a shard of 64 slots whole, each with the delivery that took it', async () => {
    const now = { t: 3_000_000 };
    const leases = leasesAt(now);
    await Promise.all(Array.from({ length: 64 }, (_, i) => leases.take(lease('full#0', i, `task-${i}`, now.t))));
    const view = await leases.view('full#0');
    expect(view.slots).toHaveLength(64);
    expect(new Set(view.slots.map((s) => s.delivery.receiptHandle)).size).toBe(64);
  });
});
