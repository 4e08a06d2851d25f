import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { pollRequestsFor } from '../../functions/core/solver-protocol.js';
import { initialEstimate, updateEstimate } from '../../functions/core/governor/neighbours.js';
import {
  fleetHeldOf,
  fleetHeldUnder,
  liveHeld,
  fleetRoomFull,
  fleetRoomOf,
  freeSlotIndexes,
  LEASE_SHARD_SLOTS,
  LEASE_WAIT_MIN_POLL_MS,
  LEASE_WAIT_POLL_MS,
  type LeaseSlot,
  LEASE_WAIT_MAX_POLL_MS,
  leaseWaitPollMs,
  roomInShard,
  type ShardView,
  shardCapacity,
  shardKeys,
  shardLimits,
  shardQueryReadUnits,
  slotsInForce,
  WATCH_POLL_MAX_MS,
  WATCH_POLL_MS,
  WATCH_POLL_REQUESTS_PER_SECOND,
  PROVIDER_POLL_SECONDS,
  watchPollMs,
} from '../../functions/core/thread-leases.js';

const NOW = 1_000_000;

function slot(index: number, until = NOW + 60_000): LeaseSlot {
  return {
    shard: 'primary#0',
    slot: index,
    taskId: `t${index}`,
    takenAt: NOW - 1_000,
    until,
    delivery: { eventSourceArn: 'arn:aws:sqs:us-east-1:1:q', receiptHandle: `h${index}` },
  };
}

function view(slots: LeaseSlot[], meta?: ShardView['meta']): ShardView {
  return { shard: 'primary#0', meta, slots };
}

describe('thread lease shards', () => {
  it.each([
    [1, 1],
    [LEASE_SHARD_SLOTS, 1],
    [LEASE_SHARD_SLOTS + 1, 2],
    [1_000, 16],
  ])('a plan of %i threads has %i shard(s), each one Query', (planCap, shards) => {
    expect(shardKeys('primary', planCap)).toHaveLength(shards);
    const capacities = shardKeys('primary', planCap).map((_, i) => shardCapacity(planCap, i));
    expect(capacities.reduce((a, b) => a + b, 0)).toBe(planCap);
    expect(Math.max(...capacities)).toBeLessThanOrEqual(LEASE_SHARD_SLOTS);
  });

  it('splits a ceiling so that the shards open exactly it, never above the plan', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2_000 }), fc.integer({ min: 0, max: 3_000 }), (planCap, ceiling) => {
        const limits = shardLimits(ceiling, planCap);
        expect(limits.reduce((a, b) => a + b, 0)).toBe(Math.min(ceiling, planCap));
        for (const [i, limit] of limits.entries()) expect(limit).toBeLessThanOrEqual(shardCapacity(planCap, i));
      }),
    );
  });

  it('never raises a shard when the ceiling falls (the cap holds while limits move)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 2_000 }),
        fc.integer({ min: 0, max: 2_000 }),
        fc.integer({ min: 0, max: 2_000 }),
        (planCap, a, b) => {
          const [low, high] = a <= b ? [a, b] : [b, a];
          const lower = shardLimits(low, planCap);
          const higher = shardLimits(high, planCap);
          for (const [i, limit] of lower.entries()) expect(limit).toBeLessThanOrEqual(higher[i] as number);
        },
      ),
    );
  });
});

describe("the fleet's held threads as a delivery sees them", () => {
  it('counts its shard exactly with one shard, and scales it with its own slot with several', () => {
    expect(fleetHeldOf(7, 1)).toBe(7);
    // 10 slots over 5 shards, every one full (2 each): a delivery sees 1 other in its shard.
    expect(fleetHeldOf(1, 5)).toBe(9);
    expect(fleetHeldOf(0, 3)).toBe(2);
  });

  it("lets the governor's estimate climb back once a multi-shard fleet fills its slots after a refusal", () => {
    // GIVEN a 268-thread plan (5 shards) whose estimate a refusal took to 10 threads (2 slots a shard)
    const shape = { planCap: 268, spare: 1, floor: 2, tickMs: 10_000 };
    const start = initialEstimate(shape, 0);
    const refused = updateEstimate(
      start,
      { held: 10, refusals: 1, acceptances: 500, lastRefusal: { at: 1, held: 10 } },
      shape,
      1,
    ).estimate;
    expect(refused.free).toBe(10);
    // WHEN every shard is full and a delivery's submission is accepted, recorded with its fleetHeld
    const held = fleetHeldOf(1, shardKeys('primary', 268).length);
    const reading = { held: 10, refusals: 1, acceptances: 501, lastAcceptance: { at: 2, held } };
    // THEN the estimate is tested and climbs
    expect(updateEstimate(refused, reading, shape, 2).change).toBe('up');
  });
});

describe('room in a shard', () => {
  it('is the limit less the live slots; an expired lease holds nothing', () => {
    const v = view([slot(0), slot(1), slot(2, NOW - 1)], { limit: 4 });
    expect(roomInShard(v, 50, 0, NOW)).toBe(2);
  });

  it('is the shard share of the plan before the governor set a limit', () => {
    expect(roomInShard(view([slot(0)]), 10, 0, NOW)).toBe(9);
  });

  it('holds off below the slots held at a recent refusal, and lets it lapse after a minute', () => {
    const held = [slot(0, NOW + 600_000), slot(1, NOW + 600_000), slot(2, NOW + 600_000)];
    const v = view(held, { limit: 10, refusedAt: NOW - 5_000, refusedHeld: 3 });
    expect(roomInShard(v, 50, 0, NOW)).toBe(0);
    expect(roomInShard(v, 50, 0, NOW + 60_000)).toBe(7);
  });

  it('offers the slot indexes in force: under the hold-off, and under the shard share of the fleet room', () => {
    const lane = { planCap: 128, shards: 2 };
    const v = view([], { limit: 40, refusedAt: NOW - 5_000, refusedHeld: 3 });
    expect(slotsInForce(v, lane, 0, NOW, undefined)).toBe(3);
    // the hold-off over, the limit; a fleet room of 9 spread over two shards: 5 and 4
    expect(slotsInForce(v, lane, 0, NOW + 60_000, undefined)).toBe(40);
    expect(slotsInForce(v, lane, 0, NOW + 60_000, 9)).toBe(5);
    expect(slotsInForce(v, lane, 1, NOW + 60_000, 9)).toBe(4);
    // the lower of the two binds; a refusal at none held offers none
    expect(slotsInForce(v, lane, 0, NOW, 9)).toBe(3);
    expect(slotsInForce(view([], { limit: 40, refusedAt: NOW - 5_000, refusedHeld: 0 }), lane, 0, NOW, undefined)).toBe(
      0,
    );
  });

  it('offers every free index below the limit once, expired ones included', () => {
    const v = view([slot(0), slot(2, NOW - 1), slot(5)], { limit: 4 });
    const free = freeSlotIndexes(v, 4, NOW, () => 0.5);
    expect([...free].sort()).toEqual([1, 2, 3]);
  });
});

describe('the fleet-wide refusal room', () => {
  it('is the ledger refusal count while it is in force, halved per refusal of a run after the first, and none without one', () => {
    const refusal = { at: NOW - 5_000, held: 81 };
    expect(fleetRoomOf(undefined, 128, NOW)).toBeUndefined();
    expect(fleetRoomOf({}, 128, NOW)).toBeUndefined();
    expect(fleetRoomOf({ lastRefusal: refusal, refusalRun: 1 }, 128, NOW)).toBe(81);
    expect(fleetRoomOf({ lastRefusal: refusal, refusalRun: 2 }, 128, NOW)).toBe(40);
    expect(fleetRoomOf({ lastRefusal: refusal, refusalRun: 3 }, 128, NOW)).toBe(20);
    // lapsed, or lifted by an acceptance at the refused count: the shards' limits alone
    expect(fleetRoomOf({ lastRefusal: refusal, refusalRun: 1 }, 128, NOW + 60_000)).toBeUndefined();
    const lifted = { lastRefusal: refusal, lastAcceptance: { at: NOW - 1_000, held: 81 }, refusalRun: 0 };
    expect(fleetRoomOf(lifted, 128, NOW)).toBeUndefined();
  });

  it("lets a taker take the thread a held test opens: the ledger's room lifted by liftedAt, the shard's hold-off cleared, the limit one above the refused count", () => {
    // Prepare: a one-shard lane held at 3 by a refusal 20 s ago; the consumer wrote it into its
    // shard 40 ms after the ledger's. The governor's test: limit 4, the ledger's hold lifted.
    const held = [slot(0, NOW + 600_000), slot(1, NOW + 600_000), slot(2, NOW + 600_000)];
    const lane = { planCap: 20, shards: 1 };
    const ledger = {
      lastRefusal: { at: NOW - 20_000, held: 3 },
      lastAcceptance: { at: NOW - 15_000, held: 2 },
      refusalRun: 0,
    };
    const before = view(held, { limit: 3, refusedAt: NOW - 20_000 + 40, refusedHeld: 3 });
    const openedHeldOff = view(held, { limit: 4, refusedAt: NOW - 20_000 + 40, refusedHeld: 3 });
    const opened = view(held, { limit: 4 });
    // Assess: before the test none; the limit raised alone, still none (the shard's hold-off, then
    // the ledger's room); with both lifted, the one slot above the refused count.
    expect(slotsInForce(before, lane, 0, NOW, fleetRoomOf(ledger, 20, NOW)) - held.length).toBe(0);
    expect(
      slotsInForce(openedHeldOff, lane, 0, NOW, fleetRoomOf({ ...ledger, liftedAt: NOW - 20_000 }, 20, NOW)) -
        held.length,
    ).toBe(0);
    expect(slotsInForce(opened, lane, 0, NOW, fleetRoomOf(ledger, 20, NOW)) - held.length).toBe(0);
    expect(
      slotsInForce(opened, lane, 0, NOW, fleetRoomOf({ ...ledger, liftedAt: NOW - 20_000 }, 20, NOW)) - held.length,
    ).toBe(1);
  });

  it('closes a shard whose live slots fill its share of the room: the shards together hold the room, and no more', () => {
    // two shards, room 81: shares 41 and 40
    expect(fleetRoomFull(81, 41, 2, 0)).toBe(true);
    expect(fleetRoomFull(81, 40, 2, 0)).toBe(false);
    expect(fleetRoomFull(81, 40, 2, 1)).toBe(true);
    expect(fleetRoomFull(81, 39, 2, 1)).toBe(false);
    expect(fleetRoomFull(undefined, 64, 2, 0)).toBe(false);
    // one shard: the live slots themselves
    expect(fleetRoomFull(3, 3, 1, 0)).toBe(true);
    expect(fleetRoomFull(3, 2, 1, 0)).toBe(false);
    // a room under the shards: the first ones hold it
    expect(fleetRoomFull(1, 0, 3, 0)).toBe(false);
    expect(fleetRoomFull(1, 0, 3, 1)).toBe(true);
    expect(fleetRoomFull(0, 0, 3, 0)).toBe(true);
  });

  it('lets takers that try every shard fill the room exactly however the shards stand, never past it', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 0, max: 400 }),
        fc.array(fc.nat(80), { minLength: 8, maxLength: 8 }),
        fc.array(fc.nat(7), { maxLength: 600 }),
        (shards, room, start, order) => {
          // Shards as a refusal left them (each at or under its share), then takers from random shards.
          const live = start.slice(0, shards).map((n, i) => Math.min(n, shareOf(room, shards, i)));
          for (const first of order) {
            for (let k = 0; k < shards; k++) {
              const i = (first + k) % shards;
              if (fleetRoomFull(room, live[i] as number, shards, i)) continue;
              live[i] = (live[i] as number) + 1;
              break;
            }
          }
          const total = live.reduce((a, b) => a + b, 0);
          expect(total).toBeLessThanOrEqual(room);
          if (order.length >= room) expect(total).toBe(room);
        },
      ),
    );
  });

  it('records the others a taker under the room saw as at most the room less its own slot', () => {
    // two shards, 40 live beside the taker's: scaled, 81; under a room of 81 it holds at most 80 others
    expect(fleetHeldUnder(40, 2, undefined)).toBe(81);
    expect(fleetHeldUnder(40, 2, 81)).toBe(80);
    expect(fleetHeldUnder(10, 2, 81)).toBe(21);
    expect(fleetHeldUnder(0, 1, 0)).toBe(0);
  });
});

describe("the watch's cadence", () => {
  it('runs a round every 100 ms while a round takes one solver request, slower as it takes more, never slower than 500 ms', () => {
    expect(watchPollMs(0)).toBe(WATCH_POLL_MS);
    expect(watchPollMs(1)).toBe(100);
    expect(watchPollMs(2)).toBe(200);
    expect(watchPollMs(4)).toBe(400);
    expect(watchPollMs(5)).toBe(WATCH_POLL_MAX_MS);
    expect(watchPollMs(40)).toBe(500);
  });

  it("keeps res.php's rounds at 100 ms for any number parked: a bulk request per 100 ids is within the providers' one poll per id per 5 s", () => {
    for (const parked of [1, 50, 100, 101, 150, 250, 687, 1_000, 5_000])
      expect(watchPollMs(pollRequestsFor('res-php', parked), parked)).toBe(WATCH_POLL_MS);
    // One getTaskResult per id (the JSON task API): as many requests as ids, two rounds a second.
    expect(watchPollMs(pollRequestsFor('create-task', 100), 100)).toBe(WATCH_POLL_MAX_MS);
  });

  it('never spends more than ten solver requests a second, or one per submission asked about per 5 s, while it can keep to its slowest round', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 2_000 }), fc.integer({ min: 0, max: 200_000 }), (requests, asked) => {
        const ms = watchPollMs(requests, asked);
        expect(ms).toBeGreaterThanOrEqual(WATCH_POLL_MS);
        expect(ms).toBeLessThanOrEqual(WATCH_POLL_MAX_MS);
        const budget = Math.max(WATCH_POLL_REQUESTS_PER_SECOND, asked / PROVIDER_POLL_SECONDS);
        if (ms < WATCH_POLL_MAX_MS) expect((requests * 1000) / ms).toBeLessThanOrEqual(budget + 1e-9);
        // and as fast as that budget allows
        if (ms > WATCH_POLL_MS && ms < WATCH_POLL_MAX_MS) expect((requests * 1000) / ms).toBeCloseTo(budget, 6);
      }),
    );
  });
});

describe("a waiting consumer's cadence", () => {
  it('reads a full shard every 250 ms, a small plan of one 4 KB page every 50 ms, and a shard between in proportion', () => {
    expect(leaseWaitPollMs([LEASE_SHARD_SLOTS])).toBe(LEASE_WAIT_POLL_MS);
    for (const items of [0, 1, 2, 7]) expect(leaseWaitPollMs([items])).toBe(LEASE_WAIT_MIN_POLL_MS);
    // 16 slots: 150 + 16 × 550 bytes, three 4 KB pages, 1.5 read units eventually consistent (a full shard's 4.5)
    expect(shardQueryReadUnits(16, false)).toBe(1.5);
    expect(leaseWaitPollMs([16])).toBeCloseTo(250 / 3, 9);
    // several shards read in a round: their read units at a full shard's pace (two shards of 40
    // slots, six pages each: 3 + 3 read units to a full shard's 4.5)
    expect(leaseWaitPollMs([40, 40])).toBeCloseTo((250 * 6) / 4.5, 9);
    // a 1 000-thread plan's 16 full shards: one round every 4 s, not every 250 ms (16 × the units)
    expect(leaseWaitPollMs(new Array(16).fill(LEASE_SHARD_SLOTS))).toBe(16 * LEASE_WAIT_POLL_MS);
    expect(leaseWaitPollMs(new Array(60).fill(LEASE_SHARD_SLOTS))).toBe(LEASE_WAIT_MAX_POLL_MS);
    expect(leaseWaitPollMs([])).toBe(LEASE_WAIT_POLL_MS);
  });

  it('never spends more read units a second than a full shard read every pollMs, never reads more often than 50 ms, never less often than 10 s', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: LEASE_SHARD_SLOTS }), { minLength: 1, maxLength: 20 }),
        fc.integer({ min: 50, max: 5_000 }),
        (round, pollMs) => {
          const ms = leaseWaitPollMs(round, pollMs);
          expect(ms).toBeGreaterThanOrEqual(LEASE_WAIT_MIN_POLL_MS);
          expect(ms).toBeLessThanOrEqual(Math.max(pollMs, LEASE_WAIT_MAX_POLL_MS));
          const units = round.reduce((sum, items) => sum + shardQueryReadUnits(items, false), 0);
          const budget = (shardQueryReadUnits(LEASE_SHARD_SLOTS, false) * 1000) / pollMs;
          // within the budget, but at the slowest cadence (a round over more than 40 full shards)
          if (ms < Math.max(pollMs, LEASE_WAIT_MAX_POLL_MS))
            expect((units * 1000) / ms).toBeLessThanOrEqual(budget + 1e-9);
        },
      ),
    );
  });

  it('reads a shard no more often as it fills (the cadence never falls as the items read grow)', () => {
    for (let items = 1; items <= LEASE_SHARD_SLOTS; items++)
      expect(leaseWaitPollMs([items])).toBeGreaterThanOrEqual(leaseWaitPollMs([items - 1]));
  });
});

/** Shard `index`'s share of `room` over `shards` (the room spread as the governor spreads a ceiling). */
function shareOf(room: number, shards: number, index: number): number {
  return Math.floor(room / shards) + (index < room % shards ? 1 : 0);
}

describe("the fleet's live slots over a lane", () => {
  it('counts every live slot of every shard, an expired one not, and the one named not', () => {
    const a = view([slot(0), slot(1), slot(2, NOW - 1)]);
    const b = { ...view([slot(0), slot(5)].map((s) => ({ ...s, shard: 'primary#1' }))), shard: 'primary#1' };
    expect(liveHeld([a, b], NOW)).toBe(4);
    // its own slot (primary#1, 5) not counted; slot 5 of another shard would be
    expect(liveHeld([a, b], NOW, { shard: 'primary#1', slot: 5 })).toBe(3);
    expect(liveHeld([a, b], NOW, { shard: 'primary#0', slot: 5 })).toBe(4);
    expect(liveHeld([], NOW)).toBe(0);
  });
});
