/**
 * The governor's side of the thread leases (functions/governor/lease-step.ts): the mappings take
 * the submitters and the leases the thread ceilings; the lanes as they stand are read back from
 * the leases; held threads are the live slots; an acceptance newer than a shard's refusal lifts
 * its hold-off.
 */
import { describe, expect, it } from 'vitest';
import type { LaneActuator } from '../../functions/core/governor/ports.js';
import type { LeaseKeeper, LeaseSlot, ShardMeta, ShardView } from '../../functions/core/thread-leases.js';
import { leasedLedgerReader, withLeaseLimits } from '../../functions/governor/lease-step.js';

const NOW = 9_000_000;

function memoryKeeper(slots: LeaseSlot[] = []) {
  const metas = new Map<string, ShardMeta>();
  const calls: string[] = [];
  const keeper: LeaseKeeper = {
    views: async (shards) =>
      shards.map(
        (shard): ShardView => ({ shard, meta: metas.get(shard), slots: slots.filter((s) => s.shard === shard) }),
      ),
    renew: async () => false,
    setLimit: async (shard, limit, options = {}) => {
      calls.push(
        `limit ${shard} ${limit}${options.lanes ? ` lanes ${options.lanes.normal}/${options.lanes.high}` : ''}`,
      );
      metas.set(shard, { ...metas.get(shard), limit, ...(options.lanes ? { lanes: options.lanes } : {}) });
    },
    clearRefusal: async (shard, answeredAt) => {
      const meta = metas.get(shard);
      if (meta?.refusedAt !== undefined && meta.refusedAt < answeredAt) {
        calls.push(`clear ${shard}`);
        metas.set(shard, { ...meta, refusedAt: undefined, refusedHeld: undefined });
      }
    },
    release: async () => undefined,
  };
  return { keeper, metas, calls };
}

function fakeMappings() {
  const applied: unknown[] = [];
  const actuator: LaneActuator = {
    read: async () => ({ normal: { ceiling: 4, enabled: true }, high: { ceiling: 2, enabled: false } }),
    apply: async (decision) => {
      applied.push(decision);
      return { changes: ['mapping moved'] };
    },
  };
  return { actuator, applied };
}

const slot = (shard: string, i: number, until = NOW + 60_000): LeaseSlot => ({
  shard,
  slot: i,
  taskId: `t${shard}${i}`,
  takenAt: NOW,
  until,
  delivery: { eventSourceArn: 'arn', receiptHandle: `h${i}` },
});

describe('the lease actuator', () => {
  it('gives the mappings the submitters and the leases the thread ceilings, shard by shard, with the lanes on the first', async () => {
    const { keeper, metas, calls } = memoryKeeper();
    const { actuator, applied } = fakeMappings();
    const lane = { leases: keeper, shards: ['p#0', 'p#1'], planCap: 100, tasksPerInvocation: 1 };
    const wrapped = withLeaseLimits(actuator, lane);
    await wrapped.apply({
      ceilings: { normal: 70, high: 10 },
      enabled: { normal: true, high: true },
      submitters: { normal: 5, high: 2 },
    });
    expect(applied).toEqual([{ ceilings: { normal: 5, high: 2 }, enabled: { normal: true, high: true } }]);
    expect(calls).toEqual(['limit p#0 40 lanes 70/10', 'limit p#1 40']);
    expect(metas.get('p#0')?.lanes).toEqual({ normal: 70, high: 10 });
    // Read back: the thread ceilings from the leases, the states from the mappings.
    expect(await wrapped.read()).toEqual({
      normal: { ceiling: 70, enabled: true },
      high: { ceiling: 10, enabled: false },
    });
  });

  it('writes only what changed, and opens nothing while paused', async () => {
    const { keeper, calls } = memoryKeeper();
    const { actuator } = fakeMappings();
    const wrapped = withLeaseLimits(actuator, { leases: keeper, shards: ['p#0'], planCap: 50, tasksPerInvocation: 1 });
    const decision = { ceilings: { normal: 30, high: 2 }, enabled: { normal: true, high: false } };
    await wrapped.apply(decision);
    await wrapped.apply(decision);
    await wrapped.apply({ ...decision, enabled: { normal: false, high: false } });
    expect(calls).toEqual(['limit p#0 30 lanes 30/2', 'limit p#0 0']);
  });

  it("clears every shard's refusal hold-off up to now for a held test, before it opens the invocation tested (a shard's refusal is written after the ledger's), and leaves one newer than now", async () => {
    // Prepare: the test lifts the ledger's refusal at NOW − 20 s; its consumer wrote it into its
    // shard 40 ms later (after reading every shard); another shard carries a clock running ahead.
    const { keeper, metas, calls } = memoryKeeper();
    metas.set('p#0', { limit: 3, refusedAt: NOW - 20_000 + 40, refusedHeld: 3 });
    metas.set('p#1', { limit: 3, refusedAt: NOW + 2_000, refusedHeld: 3 });
    const { actuator } = fakeMappings();
    const lane = { leases: keeper, shards: ['p#0', 'p#1'], planCap: 50, tasksPerInvocation: 1 };
    const wrapped = withLeaseLimits(actuator, lane, undefined, () => NOW);
    // Act
    await wrapped.apply({
      ceilings: { normal: 7, high: 0 },
      enabled: { normal: true, high: false },
      liftHold: NOW - 20_000,
    });
    // Assess
    expect(calls[0]).toBe('clear p#0');
    expect(calls.filter((c) => c.startsWith('clear'))).toEqual(['clear p#0']);
    expect(metas.get('p#0')?.refusedAt).toBeUndefined();
    expect(metas.get('p#1')?.refusedAt).toBe(NOW + 2_000);
    expect(calls).toContain('limit p#0 7 lanes 7/0');
  });

  it('reads the lanes even while the leases cannot be read (a DynamoDB outage must not fail the tick that pauses for it)', async () => {
    const { keeper } = memoryKeeper();
    const { actuator } = fakeMappings();
    const wrapped = withLeaseLimits(actuator, { leases: keeper, shards: ['p#0'], planCap: 50, tasksPerInvocation: 1 });
    await wrapped.apply({ ceilings: { normal: 30, high: 2 }, enabled: { normal: true, high: false } });
    keeper.views = async () => {
      throw new Error('HTTP 503');
    };
    expect(await wrapped.read()).toEqual({
      normal: { ceiling: 30, enabled: true },
      high: { ceiling: 2, enabled: false },
    });
  });
});

describe('the leased ledger reading', () => {
  it('counts the live slots of every shard as the threads held, never a leftover', async () => {
    const { keeper } = memoryKeeper([slot('p#0', 0), slot('p#0', 1), slot('p#1', 0), slot('p#1', 1, NOW - 1)]);
    const ledger = { read: async () => ({ held: 99, leftover: 7, refusals: 3, acceptances: 10 }) };
    const reader = leasedLedgerReader(
      ledger,
      { leases: keeper, shards: ['p#0', 'p#1'], planCap: 100, tasksPerInvocation: 1 },
      { clock: () => NOW },
    );
    expect(await reader.read()).toEqual({ held: 3, refusals: 3, acceptances: 10 });
    expect(reader.lastHeld()).toBe(3);
  });

  it('counts among the solved the answers the watch freed and has not yet added to the ledger', async () => {
    // GIVEN one live slot, a ledger that counted 40 solved, and 6 answers freed and still on their way
    const { keeper } = memoryKeeper([slot('p#0', 0)]);
    const lane = { leases: keeper, shards: ['p#0'], planCap: 50, tasksPerInvocation: 1 };
    const ledger = { read: async () => ({ held: 0, refusals: 0, acceptances: 47, solved: 40 }) };
    let uncounted = 6;
    const reader = leasedLedgerReader(ledger, lane, { clock: () => NOW, uncounted: () => uncounted });
    // THEN the reading has them (charged when ready, in neither the leases nor the ledger yet)
    expect(await reader.read()).toMatchObject({ held: 1, acceptances: 47, solved: 46 });
    // AND a ledger that never counted a solve reads them alone; none leaves `solved` unknown
    const fresh = leasedLedgerReader({ read: async () => ({ held: 0, refusals: 0, acceptances: 7 }) }, lane, {
      clock: () => NOW,
      uncounted: () => uncounted,
    });
    expect((await fresh.read())?.solved).toBe(6);
    uncounted = 0;
    expect((await fresh.read())?.solved).toBeUndefined();
  });

  it('lifts a shard’s refusal hold-off once the ledger shows a later acceptance', async () => {
    const { keeper, metas, calls } = memoryKeeper();
    metas.set('p#0', { limit: 10, refusedAt: NOW - 5_000, refusedHeld: 0 });
    const lane = { leases: keeper, shards: ['p#0'], planCap: 50, tasksPerInvocation: 1 };
    const before = { held: 0, refusals: 1, acceptances: 4, lastAcceptance: { at: NOW - 9_000, held: 0 } };
    await leasedLedgerReader({ read: async () => before }, lane, { clock: () => NOW }).read();
    expect(calls).toEqual([]);
    const after = { ...before, acceptances: 5, lastAcceptance: { at: NOW - 1_000, held: 0 } };
    await leasedLedgerReader({ read: async () => after }, lane, { clock: () => NOW }).read();
    expect(calls).toEqual(['clear p#0']);
  });
});
