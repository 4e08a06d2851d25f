import { describe, expect, it } from 'vitest';
import { createDynamoThreadLeases, META_SLOT } from '../../functions/adapters/thread-leases.js';
import { createDynamoWatchBaton, RELAY_KEY } from '../../functions/adapters/watch-baton.js';
import { resolveTiming } from '../../functions/consumer/context.js';
import { LeaseHolding, leaseWaiting } from '../../functions/consumer/lease-holding.js';
import type { OverCapWaiting } from '../../functions/consumer/thread-tracking.js';
import {
  LEASE_SHARD_SLOTS,
  LEASE_WAIT_MIN_POLL_MS,
  LEASE_WAIT_POLL_MS,
  type LeaseSlot,
  shardQueryReadUnits,
} from '../../functions/core/thread-leases.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { REFUSAL_HOLD_OFF_MS } from '../../functions/core/thread-ledger.js';
import { leasesTableOnEmulators } from '../helpers/fleet-fixture.js';

const emulated = leasesTableOnEmulators();

function leasesAt(now: { t: number }) {
  return createDynamoThreadLeases({
    documents: emulated.fixture.clients.documents,
    tableName: emulated.leasesTable,
    clock: () => now.t,
  });
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

  it('renews a lease for its holder only: not once the slot was taken again, nor after it was freed', async () => {
    const now = { t: 2_000_000 };
    const leases = leasesAt(now);
    const first = lease('renew#0', 1, 'a', now.t, 10_000);
    await leases.take(first);

    const renewed = await leases.renew(first, now.t + 200_000);
    now.t += 50_000; // past the first end: still held, renewed
    const takenAfterRenewal = await leases.take(lease('renew#0', 1, 'b', now.t));
    const view = await leases.view('renew#0');

    expect(renewed).toBe(true);
    expect(takenAfterRenewal).toBe(false);
    expect(view.slots.map((s) => [s.taskId, s.until])).toEqual([['a', 2_200_000]]);
    // Freed, then taken by another: the old lease's renewal changes nothing.
    await leases.release(first);
    const second = lease('renew#0', 1, 'a', now.t, 10_000);
    await leases.take(second);
    expect(await leases.renew(first, now.t + 900_000)).toBe(false);
    expect((await leases.view('renew#0')).slots.map((s) => s.until)).toEqual([now.t + 10_000]);
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

describe('a delivery waiting for a thread lease (LeaseHolding.take), on dynalite', () => {
  const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

  /**
   * A shard of `planCap` slots, all held by others until `freeAt` (one is then released, or, with
   * `expireAt`, runs out), and a delivery that waits for one on a simulated clock.
   */
  async function waitingFor(shard: string, options: { planCap: number; waiting: OverCapWaiting; freeAt: number }) {
    const now = { t: 3_000_000 };
    const leases = leasesAt(now);
    for (let i = 0; i < options.planCap; i++) await leases.take(lease(shard, i, `other-${i}`, now.t));
    const start = now.t;
    const pauses: number[] = [];
    let reads = 0;
    const lane = {
      leases: {
        ...leases,
        view: (key: string) => {
          reads += 1;
          return leases.view(key);
        },
      },
      shards: [shard],
      planCap: options.planCap,
      leaseMs: 60_000,
    };
    const waiting: OverCapWaiting = {
      ...options.waiting,
      random: () => 0.5,
      sleep: async (ms) => {
        pauses.push(ms);
        const before = now.t - start;
        now.t += ms;
        if (before < options.freeAt && now.t - start >= options.freeAt)
          await leases.release({ shard, slot: 0, taskId: 'other-0' });
      },
    };
    const delivery = { eventSourceArn: 'arn:aws:sqs:us-east-1:000000000000:q', receiptHandle: 'h' };
    const holding = new LeaseHolding(lane, 'me', delivery, () => now.t, waiting, quiet);
    return { holding, pauses, reads: () => reads, elapsed: () => now.t - start, start };
  }

  it('reads a full 64-slot shard every leaseWaitPollMs (250 ms) while it waits, and takes the slot freed', async () => {
    // GIVEN the consumer's default timing: the lease wait's reads apart from the ledger's 1 s polls
    const timing = resolveTiming(resolveSettings({ prefix: 'lease-wait' }));
    const waiting = leaseWaiting(timing);
    expect(timing.leaseWaitPollMs).toBe(LEASE_WAIT_POLL_MS);
    expect(waiting.pollMs).toBe(250);
    expect(waiting.maxWaitMs).toBe(timing.overCapWaiting.maxWaitMs);
    // and a full shard of 64 slots one of which frees 2 s into the wait
    const w = await waitingFor('poll#0', { planCap: LEASE_SHARD_SLOTS, waiting, freeAt: 2_000 });

    // WHEN the delivery takes a slot
    const took = await w.holding.take(w.start + 60_000);

    // THEN it read the shard every 250 ms (jitter at its middle) and took the freed slot at the first read after 2 s
    expect(took).toBe(true);
    expect(w.holding.lease?.slot).toBe(0);
    expect(new Set(w.pauses)).toEqual(new Set([250]));
    expect(w.elapsed()).toBe(2_000);
    expect(w.reads()).toBe(9);
  });

  it("reads a small plan's shard every 50 ms for the read units a full shard spends in 250 ms", async () => {
    // GIVEN the default timing and a 2-thread plan's shard, both slots held, one freed 2 s into the wait
    const waiting = leaseWaiting(resolveTiming(resolveSettings({ prefix: 'lease-wait-small' })));
    const w = await waitingFor('small#0', { planCap: 2, waiting, freeAt: 2_000 });

    // WHEN the delivery takes a slot
    expect(await w.holding.take(w.start + 60_000)).toBe(true);

    // THEN each round read one 4 KB page (half a read unit, a ninth of a full shard's): it read every 50 ms
    // and took the freed slot 2 s in, its reads' units a second no more than a full shard's at 250 ms
    expect(new Set(w.pauses)).toEqual(new Set([LEASE_WAIT_MIN_POLL_MS]));
    expect(w.elapsed()).toBe(2_000);
    expect(w.reads()).toBe(41);
    const unitsPerSecond = (w.reads() * shardQueryReadUnits(2, false)) / 2;
    expect(unitsPerSecond).toBeLessThanOrEqual((shardQueryReadUnits(LEASE_SHARD_SLOTS, false) * 1000) / 250 + 0.5);
  });

  it('waits past maxWaitMs, up to its deadline, while live leases hold every open slot', async () => {
    // GIVEN a 300 ms bound on waits and a slot that frees 2 s in (the fleet's own solve ends)
    const w = await waitingFor('patient#0', {
      planCap: 1,
      waiting: { pollMs: 250, maxWaitMs: 300, maxWaits: 3 },
      freeAt: 2_000,
    });

    // WHEN the delivery takes a slot with 10 s to its deadline, THEN it waits for the freed slot
    expect(await w.holding.take(w.start + 10_000)).toBe(true);
    expect(w.elapsed()).toBe(2_000);
  });

  it('hands back after maxWaitMs while a refusal, not live leases, closes the shard', async () => {
    // GIVEN a shard with a free slot but a fresh refusal recorded at the slots held then
    const w = await waitingFor('closed#0', {
      planCap: 2,
      waiting: { pollMs: 250, maxWaitMs: 300, maxWaits: 3 },
      freeAt: 2_000,
    });
    const now = { t: 3_000_000 };
    const leases = leasesAt(now);
    await leases.release({ shard: 'closed#0', slot: 1, taskId: 'other-1' });
    await leases.refused('closed#0', now.t, 1);

    // WHEN the delivery takes a slot, THEN it gives up after its bound, not its deadline
    expect(await w.holding.take(w.start + 10_000)).toBe(false);
    expect(w.elapsed()).toBeLessThanOrEqual(300);
  });
});

describe('the fleet-wide refusal room a taker honours on a lane of several shards, on dynalite', () => {
  const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
  const delivery = { eventSourceArn: 'arn:aws:sqs:us-east-1:000000000000:q', receiptHandle: 'h' };

  /** A lane of two 64-slot shards, `held[i]` slots of shard i taken by others, and a delivery on a simulated clock. */
  async function lane(name: string, held: [number, number]) {
    const now = { t: 4_000_000 };
    const leases = leasesAt(now);
    const shards = [`${name}#0`, `${name}#1`];
    for (const [index, count] of held.entries())
      for (let i = 0; i < count; i++)
        await leases.take(lease(shards[index] as string, i, `other-${index}-${i}`, now.t));
    const waiting: OverCapWaiting = {
      pollMs: 250,
      maxWaitMs: 300,
      maxWaits: 3,
      random: () => 0,
      sleep: async (ms) => {
        now.t += ms;
      },
    };
    const holding = new LeaseHolding(
      { leases, shards, planCap: 128, leaseMs: 60_000 },
      'me',
      delivery,
      () => now.t,
      waiting,
      quiet,
    );
    return { holding, now, leases, shards };
  }

  it('holds every shard off at its share of the ledger refusal count, not only the refused shard', async () => {
    // GIVEN 41 + 40 live slots and a refusal, a second ago, in shard #0, with the ledger saying
    // the fleet may hold 81 (shares 41 and 40); shard #1 has no refusal of its own and 24 free slots
    const w = await lane('fleetroom', [41, 40]);
    await w.leases.refused(w.shards[0] as string, w.now.t - 1_000, 40);
    const ledger = { lastRefusal: { at: w.now.t - 1_000, held: 81 }, refusalRun: 1 };
    const start = w.now.t;

    // WHEN it takes a slot with 2 s to its deadline
    const took = await w.holding.take(start + 2_000, ledger);

    // THEN it takes none: each shard holds its share of the room the refusal left; full of the
    // fleet's own leases, it waited patiently to its deadline (not the 300 ms bound)
    expect(took).toBe(false);
    expect(w.now.t - start).toBeGreaterThan(300);
    const views = await w.leases.views(w.shards);
    expect(views.map((view) => view.slots.length)).toEqual([41, 40]);
  });

  it('takes a slot below its shard’s share of the refusal room, and any once the hold-off has lapsed', async () => {
    // GIVEN the same refusal, and shard #0 full at its share (41) while shard #1 has freed one (39 of 40)
    const w = await lane('fleetroom-free', [41, 39]);
    const ledger = { lastRefusal: { at: w.now.t - 1_000, held: 81 }, refusalRun: 1 };

    // WHEN it takes a slot, THEN shard #1 gives it one: the fleet holds the room, 81
    expect(await w.holding.take(w.now.t + 2_000, ledger)).toBe(true);
    expect(w.holding.lease?.shard).toBe('fleetroom-free#1');

    // and 40 + 40 live: shard #0 (share 41) gives one; the others it records are 80, not the 81 its
    // shard scales to (that count would read as the fleet filling the refused level)
    const even = await lane('fleetroom-even', [40, 40]);
    expect(await even.holding.take(even.now.t + 2_000, ledger)).toBe(true);
    expect(even.holding.lease?.shard).toBe('fleetroom-even#0');
    expect(even.holding.fleetHeld()).toBe(80);

    // and a refusal older than the hold-off holds nothing (nor bounds the count)
    const late = await lane('fleetroom-late', [41, 40]);
    const old = { lastRefusal: { at: late.now.t - REFUSAL_HOLD_OFF_MS - 1, held: 81 }, refusalRun: 1 };
    expect(await late.holding.take(late.now.t + 2_000, old)).toBe(true);
    expect(late.holding.fleetHeld()).toBe(83);
  });

  it('counts the fleet exactly at a refusal, every shard read, its own slot not counted', async () => {
    // GIVEN 41 + 10 live slots, shard #0 at its limit of 41: a delivery takes one in shard #1
    // (random 0 tries #0 first), where its scaled count reads (10 + 1) × 2 − 1 = 21
    const w = await lane('refusal-count', [41, 10]);
    await w.leases.setLimit(w.shards[0] as string, 41);
    expect(await w.holding.take(w.now.t + 2_000)).toBe(true);
    expect(w.holding.lease?.shard).toBe('refusal-count#1');
    expect(w.holding.fleetHeld()).toBe(21);
    // WHEN its submission is refused, THEN the count is 51, the others' slots over both shards
    expect(await w.holding.refusedHeld()).toBe(51);
    // and where a shard cannot be read, the scaled count
    const broken = new LeaseHolding(
      {
        leases: { ...w.leases, view: async () => Promise.reject(new Error('ProvisionedThroughputExceededException')) },
        shards: w.shards,
        planCap: 128,
        leaseMs: 60_000,
      },
      'me-too',
      delivery,
      () => w.now.t,
      { pollMs: 250, maxWaitMs: 300, maxWaits: 3 },
      quiet,
    );
    expect(await broken.refusedHeld()).toBe(broken.fleetHeld());
  });
});

describe('takers that read a shard at once, under a refusal, on dynalite', () => {
  const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
  const delivery = { eventSourceArn: 'arn:aws:sqs:us-east-1:000000000000:q', receiptHandle: 'h' };

  /** Two deliveries on one 2-slot shard whose shuffles order its free slots oppositely (before, one took slot 0, the other slot 1). */
  async function pair(shard: string) {
    const now = { t: 6_000_000 };
    const leases = leasesAt(now);
    await leases.setLimit(shard, 2);
    const holding = (id: string, random: () => number) =>
      new LeaseHolding(
        { leases, shards: [shard], planCap: 2, leaseMs: 60_000 },
        id,
        delivery,
        () => now.t,
        {
          pollMs: 250,
          maxWaitMs: 300,
          maxWaits: 1,
          random,
          sleep: async (ms) => {
            now.t += ms;
          },
        },
        quiet,
      );
    return { now, leases, takers: [holding('a', () => 0), holding('b', () => 0.99)] as const };
  }

  it("take only the slots the shard's hold-off leaves: of two racing for one, one wins", async () => {
    // GIVEN a shard of 2 slots, none held, refused a second ago while the fleet held 1 (others hold the rest)
    const { now, leases, takers } = await pair('race-holdoff#0');
    await leases.refused('race-holdoff#0', now.t - 1_000, 1);

    // WHEN both take at once
    const took = await Promise.all(takers.map((taker) => taker.take(now.t + 400)));

    // THEN one holds the one slot the refusal left; before, each took one of the two and one was refused
    expect(took.filter(Boolean)).toHaveLength(1);
    const [view] = await leases.views(['race-holdoff#0']);
    expect(view?.slots.map((slot) => slot.slot)).toEqual([0]);
  });

  it('take only their share of the fleet-wide refusal room: of two racing for one, one wins', async () => {
    // GIVEN the same shard with no hold-off of its own, and the ledger's newest refusal a second ago at 1 held
    const { now, leases, takers } = await pair('race-room#0');
    const ledger = { lastRefusal: { at: now.t - 1_000, held: 1 }, refusalRun: 1 };

    // WHEN both take at once under that reading
    const took = await Promise.all(takers.map((taker) => taker.take(now.t + 400, ledger)));

    // THEN one holds the room's one slot
    expect(took.filter(Boolean)).toHaveLength(1);
    const [view] = await leases.views(['race-room#0']);
    expect(view?.slots.map((slot) => slot.slot)).toEqual([0]);
  });
});

describe('a taker that loses a race for a freed slot, on dynalite', () => {
  const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
  const delivery = { eventSourceArn: 'arn:aws:sqs:us-east-1:000000000000:q', receiptHandle: 'h' };

  it("waits on past maxWaitMs (the slots are the fleet's own live leases) and takes the next one freed", async () => {
    // GIVEN a shard of 2, both slots held by the fleet's live leases, and a delivery waiting for one
    const shard = 'race-lost#0';
    const now = { t: 7_000_000 };
    const start = now.t;
    const leases = leasesAt(now);
    await leases.setLimit(shard, 2);
    const x = lease(shard, 0, 'x', now.t);
    const y = lease(shard, 1, 'y', now.t);
    await leases.take(x);
    await leases.take(y);
    // Past its maxWaitMs (300 ms), x's slot frees and another taker wins it before this one: its
    // read shows slot 0 free, its conditional take fails (the read is the one from before the win).
    let raced = false;
    let yFreed = false;
    const racing = {
      ...leases,
      view: async (key: string) => {
        const view = await leases.view(key);
        if (raced || now.t < start + 400) return view;
        raced = true;
        await leases.release(x);
        await leases.take(lease(shard, 0, 'winner', now.t));
        return { ...view, slots: view.slots.filter((held) => held.slot !== 0) };
      },
    };
    const holding = new LeaseHolding(
      { leases: racing, shards: [shard], planCap: 2, leaseMs: 60_000 },
      'loser',
      delivery,
      () => now.t,
      {
        pollMs: 100,
        maxWaitMs: 300,
        maxWaits: 1,
        random: () => 0.5,
        sleep: async (ms) => {
          now.t += ms;
          // y's answer comes a second later: its slot frees.
          if (!yFreed && now.t >= start + 1_000) {
            yFreed = true;
            await leases.release(y);
          }
        },
      },
      quiet,
    );

    // WHEN it waits, with its deadline 5 s away
    const took = await holding.take(start + 5_000);

    // THEN it lost the race and still took y's slot when it freed; before, the lost race read as a
    // closed shard and, its maxWaitMs past, the task went back to the queue
    expect(raced).toBe(true);
    expect(took).toBe(true);
    expect(holding.lease?.slot).toBe(1);
    expect(now.t).toBeGreaterThanOrEqual(start + 1_000);
  });
});

describe('a refusal in a burst of takers, on dynalite', () => {
  const quiet = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };
  const delivery = { eventSourceArn: 'arn:aws:sqs:us-east-1:000000000000:q', receiptHandle: 'h' };
  const waiting: OverCapWaiting = { pollMs: 250, maxWaitMs: 300, maxWaits: 0, random: () => 0 };

  /** A delivery `id` taking slots of one 5-slot shard through `leases`, on the clock `now`. */
  const holdingOn = (leases: ReturnType<typeof leasesAt>, shard: string, id: string, now: { t: number }) =>
    new LeaseHolding(
      { leases, shards: [shard], planCap: 5, leaseMs: 60_000 },
      id,
      delivery,
      () => now.t,
      waiting,
      quiet,
    );

  it('records the slots held in its shard at the refusal, not the none each taker saw at once', async () => {
    // GIVEN five deliveries that take slots of one 5-slot shard at once: each read the shard
    // before any took one, so each saw no other slot held
    const now = { t: 9_000_000 };
    const leases = leasesAt(now);
    const shard = 'burst#0';
    await leases.setLimit(shard, 5);
    const holdings = [0, 1, 2, 3, 4].map((i) => holdingOn(leases, shard, `burst-${i}`, now));
    const took = await Promise.all(holdings.map((holding) => holding.take(now.t + 2_000)));
    expect(took.every(Boolean)).toBe(true);
    expect(holdings.map((holding) => holding.fleetHeld())).toContain(0);

    // WHEN the solver (others hold 3 of its 5 threads) accepts two and refuses three, refused
    // one after another, the ledger's count read at each refusal as the consumer reads it
    const [first, second, ...refused] = holdings as [LeaseHolding, LeaseHolding, ...LeaseHolding[]];
    first.parked();
    second.parked();
    for (const holding of refused) {
      await holding.refusedHeld();
      await holding.refused();
    }

    // THEN the shard's hold-off keeps its takers to the two accepted submissions' slots, not to
    // none: as those answers free them, the next takers find room at once instead of waiting out
    // the hold-off (60 s) with every thread the plan leaves the fleet idle
    const view = await leases.view(shard);
    expect(view.meta?.refusedHeld).toBe(2);
    expect(view.slots).toHaveLength(2);
    for (const slot of view.slots) await leases.release(slot);
    const next = holdingOn(leases, shard, 'after', now);
    expect(await next.take(now.t + 2_000)).toBe(true);
  });

  it('reads the shard at the refusal when the ledger count did not (and keeps the take count when it cannot)', async () => {
    const now = { t: 9_500_000 };
    const leases = leasesAt(now);
    const shard = 'burst-alone#0';
    await leases.setLimit(shard, 5);
    const make = (id: string, reads = leases) => holdingOn(reads, shard, id, now);
    const refusedOne = make('alone');
    expect(await refusedOne.take(now.t + 2_000)).toBe(true);
    // Another takes a slot after it: at its refusal the shard holds one other.
    const other = make('other');
    expect(await other.take(now.t + 2_000)).toBe(true);
    await refusedOne.refused();
    expect((await leases.view(shard)).meta?.refusedHeld).toBe(1);

    // A shard that cannot be read at the refusal: the count its taker saw stands (one other,
    // taken before it; the other then gave its slot back).
    await leases.setLimit(shard, 5, { clearRefusal: true });
    let failing = false;
    const flaky = {
      ...leases,
      view: (name: string) =>
        failing ? Promise.reject(new Error('ProvisionedThroughputExceededException')) : leases.view(name),
    };
    const unread = make('unread', flaky);
    expect(await unread.take(now.t + 2_000)).toBe(true);
    await other.release();
    failing = true;
    await unread.refused();
    expect((await leases.view(shard)).meta?.refusedHeld).toBe(1);
  });
});

describe('the watch relay’s baton on dynalite, through the real SDK', () => {
  it('writes on the version it read: of two racing writers one wins, and a stale one loses', async () => {
    const baton = createDynamoWatchBaton({
      documents: emulated.fixture.clients.documents,
      tableName: emulated.leasesTable,
    });
    await expect(baton.read()).resolves.toBeUndefined();
    const [a, b] = await Promise.all([
      baton.write({ owner: 'a', until: 2_000 }, undefined),
      baton.write({ owner: 'b', until: 3_000 }, undefined),
    ]);
    expect([a, b].filter(Boolean)).toHaveLength(1);
    const first = await baton.read();
    expect(first).toEqual(a ? { owner: 'a', until: 2_000, version: 1 } : { owner: 'b', until: 3_000, version: 1 });
    // A newcomer asks to be next, then the holder hands over on the version it reads.
    const asked = { owner: first?.owner ?? '', until: first?.until ?? 0, next: { owner: 'c', until: 9_000 } };
    await expect(baton.write(asked, first)).resolves.toBe(true);
    await expect(baton.write({ owner: 'z', until: 1 }, first)).resolves.toBe(false);
    const second = await baton.read();
    expect(second).toEqual({ ...asked, version: 2 });
    await expect(baton.write({ owner: 'c', until: 9_000 }, second)).resolves.toBe(true);
    await expect(baton.read()).resolves.toEqual({ owner: 'c', until: 9_000, version: 3 });
    // The baton lives beside the lane's shards, never in a shard's view.
    const views = await leasesAt({ t: 1_000_000 }).views(['primary#0']);
    expect(views[0]?.slots).toEqual([]);
    expect(RELAY_KEY.shard).not.toMatch(/#\d+$/);
  });
});
