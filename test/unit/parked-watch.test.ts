/**
 * The governor's watch over parked tasks, one round at a time, table-driven over what the record
 * and the solver say: which leases it frees, which messages it shows again, and what it leaves.
 */
import { describe, expect, it } from 'vitest';
import type { DeliveredMessage, PollState, PollTarget } from '../../functions/core/ports.js';
import type { TaskResult } from '../../functions/core/results.js';
import type { LeaseKeeper, LeaseSlot, ShardView } from '../../functions/core/thread-leases.js';
import { createParkedWatch, MAX_RECORDING, type ParkedWatchOptions } from '../../functions/governor/parked-watch.js';
import { VirtualTime } from '../helpers/virtual-time.js';

const NOW = 5_000_000;

function lease(taskId: string, slot: number, overrides: Partial<LeaseSlot> = {}): LeaseSlot {
  return {
    shard: 'primary#0',
    slot,
    taskId,
    takenAt: NOW - 2_000,
    until: NOW + 60_000,
    delivery: { eventSourceArn: 'arn:aws:sqs:us-east-1:1:tasks', receiptHandle: `handle-${taskId}` },
    ...overrides,
  };
}

function record(taskId: string, overrides: Partial<TaskResult> = {}): TaskResult {
  return {
    taskId,
    status: 'solving',
    attempts: 1,
    method: 'userrecaptcha',
    solverId: `id-${taskId}`,
    solverProvider: 'primary',
    solverAcceptedAt: NOW - 1_900,
    leaseUntil: 0,
    expiresAt: NOW / 1000 + 3600,
    ...overrides,
  };
}

/** The leases, records, solver and queue of one round, in memory. */
function world(
  slots: LeaseSlot[],
  records: TaskResult[],
  states: Record<string, PollState['state']>,
  clock: () => number = () => NOW,
  leaseMs?: number,
  extra: Partial<ParkedWatchOptions> = {},
) {
  const held = new Map(slots.map((s) => [`${s.shard}/${s.slot}`, s]));
  let views = 0;
  const released: string[] = [];
  const shown: DeliveredMessage[] = [];
  const hidden: { handle: string; seconds: number }[] = [];
  const renewed: { taskId: string; until: number }[] = [];
  let renewAnswer: () => Promise<boolean> = async () => true;
  const asked: PollTarget[][] = [];
  const leases: LeaseKeeper = {
    views: async (shards) => {
      views += 1;
      return shards.map((shard): ShardView => ({ shard, meta: { limit: 10 }, slots: [...held.values()] }));
    },
    setLimit: async () => undefined,
    clearRefusal: async () => undefined,
    release: async (l) => {
      const key = `${l.shard}/${l.slot}`;
      if (held.get(key)?.taskId === l.taskId) {
        held.delete(key);
        released.push(l.taskId);
      }
    },
    renew: async (l, until) => {
      const ok = await renewAnswer();
      if (ok) renewed.push({ taskId: l.taskId, until });
      return ok;
    },
  };
  const byId = new Map(records.map((r) => [r.taskId, r]));
  const watch = createParkedWatch({
    leases,
    shards: ['primary#0'],
    results: { get: async (id) => byId.get(id) },
    solver: {
      pollMany: async (targets) => {
        asked.push([...targets]);
        return new Map(targets.map((t) => [t.solverId, { state: states[t.solverId] ?? 'not_ready' } as PollState]));
      },
    },
    queue: {
      changeVisibility: async (message, seconds) =>
        void (seconds === 0 ? shown.push(message) : hidden.push({ handle: message.receiptHandle, seconds })),
    },
    clock,
    settleMs: 0,
    ...(leaseMs !== undefined ? { leaseMs } : {}),
    ...extra,
  });
  return {
    watch,
    released,
    shown,
    hidden,
    renewed,
    answerRenewals: (answer: () => Promise<boolean>) => {
      renewAnswer = answer;
    },
    asked,
    records: byId,
    held,
    views: () => views,
    states,
  };
}

describe('a ready answer whose holder still had its claim', () => {
  it('is recorded by the watch once the holder parks it without reading it; left to a holder that records it', async () => {
    // Before: the watch freed the lease and left the answer to the holder, which parked instead
    // (its poll window ran out): nothing recorded it until its lease ended and the message came
    // back (the lab: 200 s for solves under half a second).
    let now = NOW;
    const recorded: string[] = [];
    const w = world(
      [lease('a', 0), lease('b', 1)],
      [
        record('a', { claimToken: 'c', leaseUntil: NOW + 5_000 }),
        record('b', { claimToken: 'c', leaseUntil: NOW + 5_000 }),
      ],
      { 'id-a': 'ready', 'id-b': 'ready' },
      () => now,
      undefined,
      { recorder: { record: async (task) => (recorded.push(task.taskId), 'recorded') } },
    );
    await w.watch.round();
    expect(w.released.sort()).toEqual(['a', 'b']);
    expect(recorded).toEqual([]);
    // a's holder parks (its claim given up) without the answer; b's holder records it itself.
    w.records.set('a', record('a', { claimToken: undefined, leaseUntil: 0 }));
    w.records.set('b', record('b', { status: 'solved', answer: 'tok', claimToken: undefined }));
    now += 1_500;
    await w.watch.round();
    expect(recorded).toEqual(['a']);
    now += 1_500;
    await w.watch.round();
    expect(recorded).toEqual(['a']);
  });
});

describe('the parked watch, one round', () => {
  it.each([
    // what the record says, what the solver says → lease freed, message shown
    ['parked and ready', record('a'), 'ready', true, true],
    ['parked and ended (unsolvable: the thread is free)', record('a'), 'ended', true, true],
    ['parked, still solving', record('a'), 'not_ready', false, false],
    ['parked, its request failed in passing', record('a'), 'unknown', false, false],
    [
      'still held by a polling invocation, ready',
      record('a', { claimToken: 'c', leaseUntil: NOW + 5_000 }),
      'ready',
      true,
      false,
    ],
    [
      'held by an invocation whose claim ran out (it died), ready',
      record('a', { claimToken: 'c', leaseUntil: NOW - 1 }),
      'ready',
      true,
      true,
    ],
  ] as const)('%s', async (_, rec, state, freed, shown) => {
    const w = world([lease('a', 0)], [rec], { 'id-a': state });
    await w.watch.round();
    expect(w.released).toEqual(freed ? ['a'] : []);
    expect(w.shown.map((m) => m.receiptHandle)).toEqual(shown ? ['handle-a'] : []);
  });

  describe('renews a parked lease the solver has not answered for, once it ends within a minute', () => {
    const LEASE_MS = 200_000;

    it.each([
      // what the solver says, the lease's end from now → renewed (with its message kept hidden)
      ['still solving, ending in 30 s', 'not_ready', 30_000, true],
      ['unable to say (an outage), ending in 30 s', 'unknown', 30_000, true],
      ['still solving, ending in 2 min (not yet)', 'not_ready', 120_000, false],
      ['ready, ending in 30 s (freed instead)', 'ready', 30_000, false],
    ] as const)('%s', async (_, state, endsInMs, renewed) => {
      const w = world(
        [lease('a', 0, { until: NOW + endsInMs })],
        [record('a')],
        { 'id-a': state },
        () => NOW,
        LEASE_MS,
      );
      await w.watch.round();
      expect(w.renewed).toEqual(renewed ? [{ taskId: 'a', until: NOW + LEASE_MS }] : []);
      expect(w.hidden).toEqual(renewed ? [{ handle: 'handle-a', seconds: LEASE_MS / 1000 }] : []);
      expect(w.released).toEqual(state === 'ready' ? ['a'] : []);
      expect(w.watch.stats.renewed).toBe(renewed ? 1 : 0);
    });

    it('keeps the renewed lease in its cached read past its old end', async () => {
      let now = NOW;
      const w = world([lease('a', 0, { until: NOW + 500 })], [record('a')], { 'id-a': 'unknown' }, () => now, LEASE_MS);
      await w.watch.round();
      now += 700; // past the old end, before the next read of the leases: the cached read is used
      w.states['id-a'] = 'ready';
      await w.watch.round();
      expect(w.views()).toBe(1);
      expect(w.released).toEqual(['a']);
    });

    it('leaves a lease held by a live invocation (its holder polls it) and any lease without a lease length', async () => {
      const live = world(
        [lease('a', 0, { until: NOW + 30_000 })],
        [record('a', { claimToken: 'c', leaseUntil: NOW + 5_000 })],
        { 'id-a': 'not_ready' },
        () => NOW,
        LEASE_MS,
      );
      const unset = world([lease('a', 0, { until: NOW + 30_000 })], [record('a')], { 'id-a': 'not_ready' });
      await live.watch.round();
      await unset.watch.round();
      expect(live.renewed).toEqual([]);
      expect(unset.renewed).toEqual([]);
    });

    it('changes nothing when the slot holds another lease, and counts a renewal that fails', async () => {
      const taken = world(
        [lease('a', 0, { until: NOW + 30_000 })],
        [record('a')],
        { 'id-a': 'unknown' },
        () => NOW,
        LEASE_MS,
      );
      taken.answerRenewals(async () => false);
      const failing = world(
        [lease('a', 0, { until: NOW + 30_000 })],
        [record('a')],
        { 'id-a': 'unknown' },
        () => NOW,
        LEASE_MS,
      );
      failing.answerRenewals(async () => {
        throw new Error('throttled');
      });
      await taken.watch.round();
      await failing.watch.round();
      expect(taken.hidden).toEqual([]);
      expect(taken.watch.stats).toMatchObject({ renewed: 0, renewFailures: 0 });
      expect(failing.hidden).toEqual([]);
      expect(failing.watch.stats).toMatchObject({ renewed: 0, renewFailures: 1 });
    });
  });

  it('frees the lease of a task finished by another delivery, without asking the solver', async () => {
    const w = world([lease('a', 0)], [record('a', { status: 'solved' })], {});
    await w.watch.round();
    expect(w.released).toEqual(['a']);
    expect(w.asked).toEqual([]);
  });

  it('does not ask about a lease whose record has no submission yet, and does once it has (at its next read)', async () => {
    let now = NOW;
    const w = world(
      [lease('a', 0)],
      [record('a', { solverId: undefined, claimToken: 'c', leaseUntil: NOW + 9_000 })],
      { 'id-a': 'ready' },
      () => now,
    );
    await w.watch.round();
    expect(w.asked).toEqual([]);
    w.records.set('a', record('a'));
    now += 1_000;
    await w.watch.round();
    expect(w.released).toEqual(['a']);
    expect(w.shown).toHaveLength(1);
  });

  it("ignores a submission older than the lease (a previous delivery's) and an expired lease", async () => {
    const old = record('a', { solverAcceptedAt: NOW - 10_000 });
    const w = world([lease('a', 0), lease('b', 1, { until: NOW - 1 })], [old, record('b')], {
      'id-a': 'ready',
      'id-b': 'ready',
    });
    await w.watch.round();
    expect(w.asked).toEqual([]);
    expect(w.released).toEqual([]);
  });

  it('asks about every parked submission in one call', async () => {
    const slots = Array.from({ length: 30 }, (_, i) => lease(`t${i}`, i));
    const w = world(
      slots,
      slots.map((s) => record(s.taskId)),
      {},
    );
    await w.watch.round();
    expect(w.asked).toHaveLength(1);
    expect(w.asked[0]).toHaveLength(30);
    expect(w.watch.stats.parked).toBe(30);
  });
});

describe("the parked watch's solves in the thread ledger", () => {
  /**
   * Three parked tasks ready at once, a recorder that records them, and a ledger counter that
   * fails while `failing` (`overrides` replace any of these).
   */
  function recording(failing = { now: false }, overrides: Partial<ParkedWatchOptions> = {}) {
    let now = NOW;
    const slots = ['a', 'b', 'c'].map((id, i) => lease(id, i));
    const held = new Map(slots.map((s) => [s.slot, s]));
    const writes: number[] = [];
    const watch = createParkedWatch({
      leases: {
        views: async (shards) => shards.map((shard) => ({ shard, meta: { limit: 10 }, slots: [...held.values()] })),
        setLimit: async () => undefined,
        clearRefusal: async () => undefined,
        renew: async () => false,
        release: async (l) => void held.delete(l.slot),
      },
      shards: ['primary#0'],
      results: { get: async (id) => record(id) },
      solver: {
        pollMany: async (targets) => new Map(targets.map((t) => [t.solverId, { state: 'ready' } as PollState])),
      },
      queue: { changeVisibility: async () => undefined },
      recorder: { record: async () => 'recorded' },
      solved: {
        countSolved: async (count) => {
          writes.push(count);
          if (failing.now) throw new Error('ProvisionedThroughputExceededException');
        },
      },
      solvedFlushMs: 5_000,
      clock: () => now,
      sleep: async (ms) => {
        now += ms;
      },
      settleMs: 0,
      ...overrides,
    });
    return {
      watch,
      writes,
      held,
      advance: (ms: number) => (now += ms),
      add: (s: LeaseSlot) => held.set(s.slot, s),
    };
  }

  it('adds the answers it recorded to the ledger in one batch, not one write per answer', async () => {
    const w = recording();
    await w.watch.round();
    expect(w.watch.stats.recorded).toBe(3);
    // Within the flush interval: nothing written yet.
    expect(w.writes).toEqual([]);
    w.advance(5_000);
    await w.watch.round();
    expect(w.writes).toEqual([3]);
    expect(w.watch.stats.solvedCounted).toBe(3);
    // Nothing new: no write.
    w.advance(5_000);
    await w.watch.round();
    expect(w.writes).toEqual([3]);
  });

  it('adds what it recorded at once when the governor’s tick asks, before the tick reads the ledger', async () => {
    // GIVEN a round that recorded three answers, its batch not due yet
    const w = recording();
    await w.watch.round();
    expect(w.writes).toEqual([]);
    // WHEN the tick asks THEN the three are counted now, in one write, and not again when the batch is due
    await w.watch.countSolvedNow();
    expect(w.writes).toEqual([3]);
    expect(w.watch.stats.solvedCounted).toBe(3);
    w.advance(5_000);
    await w.watch.round();
    expect(w.writes).toEqual([3]);
    // AND with nothing recorded since, it writes nothing
    await w.watch.countSolvedNow();
    expect(w.writes).toEqual([3]);
  });

  it('counts the answers it freed until their count is on the ledger: while recording, while batched, not once written', async () => {
    // GIVEN three parked tasks ready at once, recordings held open until released, the third skipped
    const gates: Array<() => void> = [];
    const w = recording(undefined, {
      recorder: {
        record: (task) =>
          new Promise((resolve) => gates.push(() => resolve(task.taskId === 'c' ? 'skipped' : 'recorded'))),
      },
      solvedFlushMs: 60_000,
    });
    // WHEN a round frees them and records beside it
    await w.watch.round({ recording: 'beside' });
    // THEN their leases are free and all three are counted as answered, none on the ledger yet
    expect(w.held.size).toBe(0);
    expect(w.watch.answersUncounted()).toBe(3);
    // WHEN the recordings end (the third skipped: its task finished by another delivery)
    for (const open of gates) open();
    await w.watch.settle();
    // THEN the two recorded wait in the batch, still counted; the third is not an answer of this watch's
    expect(w.watch.answersUncounted()).toBe(2);
    // WHEN the tick counts them THEN they are on the ledger and no longer counted here
    await w.watch.countSolvedNow();
    expect(w.writes).toEqual([2]);
    expect(w.watch.answersUncounted()).toBe(0);
  });

  it('waits for a batch write under way before the tick reads the ledger', async () => {
    // GIVEN a batch write that has not landed
    let land: () => void = () => undefined;
    const landed: number[] = [];
    const w = recording(undefined, {
      solved: {
        countSolved: (count) =>
          new Promise<void>((resolve) => {
            land = () => {
              landed.push(count);
              resolve();
            };
          }),
      },
      solvedFlushMs: 60_000,
    });
    await w.watch.round();
    const background = w.watch.flushSolved();
    await new Promise((resolve) => setImmediate(resolve));
    // WHEN the tick asks while it is under way
    let counted = false;
    const tick = w.watch.countSolvedNow().then(() => {
      counted = true;
    });
    await new Promise((resolve) => setImmediate(resolve));
    // THEN the tick waits for it to land
    expect(counted).toBe(false);
    land();
    await Promise.all([background, tick]);
    expect(counted).toBe(true);
    expect(landed).toEqual([3]);
  });

  it('keeps the count when the write fails and adds it with the next batch', async () => {
    const failing = { now: true };
    const w = recording(failing);
    await w.watch.round();
    w.advance(5_000);
    await expect(w.watch.round()).resolves.toBeUndefined();
    expect(w.writes).toEqual([3]);
    expect(w.watch.stats.solvedCounted).toBe(0);
    failing.now = false;
    w.add(lease('d', 3));
    w.advance(5_000);
    await w.watch.round();
    expect(w.writes).toEqual([3, 4]);
    expect(w.watch.stats.solvedCounted).toBe(4);
  });

  it('writes what is left at the end of its run', async () => {
    const w = recording();
    let remaining = 2_500;
    await w.watch.run(() => (remaining -= 1_000), 0);
    expect(w.watch.stats.recorded).toBe(3);
    expect(w.writes).toEqual([3]);
  });

  it('stops when an asynchronous done() says so (the relay: the next invocation waits), still writing what is left', async () => {
    const w = recording();
    let asked = 0;
    await w.watch.run(
      () => 60_000,
      0,
      async () => {
        asked += 1;
        await Promise.resolve();
        return asked > 2;
      },
    );
    expect(asked).toBe(3);
    expect(w.watch.stats.rounds).toBe(2);
    expect(w.writes).toEqual([3]);
  });
});

describe('the parked watch, round after round', () => {
  it('polls the solver every round but reads the leases at most every viewEveryMs (1 s)', async () => {
    // GIVEN a parked task still solving, and rounds every 500 ms (the governor's pollMs)
    let now = NOW;
    const w = world([lease('a', 0)], [record('a')], {}, () => now);

    // WHEN five rounds run 500 ms apart
    for (let k = 0; k < 5; k++) {
      await w.watch.round();
      now += 500;
    }

    // THEN every round asked the solver (one bulk request each), and the shards were read at 0, 1 and 2 s
    expect(w.asked).toHaveLength(5);
    expect(w.asked.every((targets) => targets.length === 1)).toBe(true);
    expect(w.views()).toBe(3);
    expect(w.watch.stats).toMatchObject({ rounds: 5, views: 3 });
  });

  it('between reads, polls the last read less the leases it freed; a new lease waits for the next read', async () => {
    // GIVEN two parked tasks; a's answer is ready at the first round
    let now = NOW;
    const w = world(
      [lease('a', 0), lease('b', 1)],
      [record('a'), record('b'), record('c', { solverAcceptedAt: NOW + 200 })],
      { 'id-a': 'ready' },
      () => now,
    );
    await w.watch.round();
    expect(w.released).toEqual(['a']);

    // WHEN a lease is taken for c (its record parked) and the next round comes 500 ms later
    w.held.set('primary#0/2', lease('c', 2, { takenAt: NOW + 100 }));
    now += 500;
    await w.watch.round();

    // THEN that round asked about b alone (a freed, c not read yet), without reading the shards
    expect(w.asked[1]?.map((t) => t.solverId)).toEqual(['id-b']);
    expect(w.views()).toBe(1);

    // and the round after the next read asks about c too
    now += 500;
    await w.watch.round();
    expect(w.views()).toBe(2);
    expect(w.asked[2]?.map((t) => t.solverId)).toEqual(['id-b', 'id-c']);
  });

  it('drops a lease past its end between reads', async () => {
    let now = NOW;
    const w = world([lease('a', 0, { until: NOW + 300 })], [record('a')], {}, () => now);
    await w.watch.round();
    now += 500;
    await w.watch.round();
    expect(w.asked).toHaveLength(1);
  });
});

/** A fake sleep on a fake clock: each wait recorded, the clock moved by it, then `after` run. */
function fakeTime(after: (waits: number[]) => void = () => undefined) {
  let now = NOW;
  const waits: number[] = [];
  const sleep = async (ms: number) => {
    waits.push(ms);
    now += ms;
    after(waits);
  };
  return { clock: () => now, sleep, waits };
}

describe('the parked watch’s cadence', () => {
  it('waits after each round what its pollMs gives for the submissions that round asked about', async () => {
    // GIVEN three parked tasks still solving, then 247 more, and a cadence of 1 ms per submission asked
    const ids = ['a', 'b', 'c'];
    let w: ReturnType<typeof world> | undefined;
    const time = fakeTime((waits) => {
      if (waits.length !== 2) return;
      for (let i = 3; i < 250; i++) {
        w?.held.set(`primary#0/${i}`, lease(`t${i}`, i));
        w?.records.set(`t${i}`, record(`t${i}`));
      }
    });
    w = world(
      ids.map((id, i) => lease(id, i)),
      ids.map((id) => record(id)),
      {},
      time.clock,
      undefined,
      { pollMs: (polled) => 100 + polled, viewEveryMs: 0, sleep: time.sleep },
    );

    // WHEN it runs four rounds
    let rounds = 0;
    await w.watch.run(
      () => 60_000,
      0,
      () => rounds++ >= 4,
    );

    // THEN the wait after a round follows that round's submissions: 3 for two rounds, then 250
    expect(w.asked.map((targets) => targets.length)).toEqual([3, 3, 250, 250]);
    expect(time.waits).toEqual([103, 103, 350, 350]);
  });

  it('waits backoffPollMs after a round the solver answered for nothing or that failed, its cadence again after one it answered', async () => {
    // GIVEN two parked tasks still solving; the solver answers not ready, then refuses every id
    // (rate-limited), then fails the whole request, then answers again, then refuses again, and
    // then nothing is parked
    const answers: Array<PollState['state'] | 'throw'> = ['not_ready', 'unknown', 'throw', 'not_ready', 'unknown'];
    let round = 0;
    const time = fakeTime();
    const w = world([lease('a', 0), lease('b', 1)], [record('a'), record('b')], {}, time.clock, undefined, {
      solver: {
        pollMany: async (targets) => {
          const answer = answers[round++] ?? 'not_ready';
          if (answer === 'throw') throw new Error('socket hang up');
          return new Map(
            targets.map((t) => [t.solverId, { state: answer, code: 'ERROR_TOO_MUCH_REQUESTS' } as PollState]),
          );
        },
      },
      pollMs: () => 100,
      backoffPollMs: 500,
      viewEveryMs: 0,
      sleep: async (ms) => {
        await time.sleep(ms);
        if (round === answers.length) w.held.clear();
      },
    });

    // WHEN it runs six rounds
    let rounds = 0;
    await w.watch.run(
      () => 60_000,
      0,
      () => rounds++ >= 6,
    );

    // THEN the round after each refusal and after the failure waited 500 ms, the others 100 ms
    // (a round with nothing to ask about keeps no earlier refusal's wait)
    expect(time.waits).toEqual([100, 500, 500, 100, 500, 100]);
    expect(w.watch.stats.failedRounds).toBe(1);
  });
});

describe('the parked watch’s gap per submission (pollGapMs: the JSON task API, one getTaskResult per id)', () => {
  it('asks about each submission at most every pollGapMs, the first pollGapMs after its acceptance, and never lets one wait a round longer', async () => {
    // GIVEN three parked submissions accepted 2.9 s, 1.9 s and 0.5 s ago, still solving, and a 3 s gap
    let now = NOW;
    const accepted = { a: NOW - 2_900, b: NOW - 1_900, c: NOW - 500 };
    const w = world(
      // (each lease taken 100 ms before its submission was accepted)
      Object.entries(accepted).map(([id, at], i) => lease(id, i, { takenAt: at - 100 })),
      Object.entries(accepted).map(([id, at]) => record(id, { solverAcceptedAt: at })),
      {},
      () => now,
      undefined,
      { pollGapMs: 3_000 },
    );

    // WHEN rounds run every 100 ms for 20 s
    const askedAt: Record<string, number[]> = { 'id-a': [], 'id-b': [], 'id-c': [] };
    for (let k = 0; k < 200; k++) {
      const before = w.asked.length;
      await w.watch.round();
      if (w.asked.length > before) for (const t of w.asked.at(-1) ?? []) askedAt[t.solverId]?.push(now);
      now += 100;
    }

    // THEN each id was first asked 3 s after its acceptance (within a round), then every 3 s (within a round)
    for (const [id, at] of Object.entries(accepted)) {
      const times = askedAt[`id-${id}`] ?? [];
      expect(times[0]! - at).toBeGreaterThanOrEqual(3_000);
      expect(times[0]! - at).toBeLessThan(3_100);
      for (let i = 1; i < times.length; i++) {
        expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(3_000);
        expect(times[i]! - times[i - 1]!).toBeLessThan(3_100);
      }
      expect(times.length).toBeGreaterThanOrEqual(6);
    }
    // …and a round asks only about the submissions due (no round repeats an id inside its gap)
    expect(w.watch.stats.polled).toBe(Object.values(askedAt).reduce((sum, times) => sum + times.length, 0));
  });

  it('renews a parked lease near its end in a round that does not ask about it', async () => {
    // GIVEN a parked submission accepted 100 ms ago whose lease ends in 1 s (renewals within 30 s of the end)
    const w = world(
      [lease('a', 0, { until: NOW + 1_000 })],
      [record('a', { solverAcceptedAt: NOW - 100 })],
      {},
      () => NOW,
      60_000,
      { pollGapMs: 3_000 },
    );

    // WHEN a round runs inside the submission's gap
    await w.watch.round();

    // THEN the solver was not asked, and the lease and its message's hiding were renewed all the same
    expect(w.asked).toHaveLength(0);
    expect(w.renewed).toEqual([{ taskId: 'a', until: NOW + 60_000 }]);
    expect(w.hidden).toEqual([{ handle: 'handle-a', seconds: 60 }]);
  });

  it('frees a ready submission at the first round its gap allows', async () => {
    // GIVEN a parked submission accepted 1 s ago whose answer is ready, and a 3 s gap
    let now = NOW;
    const w = world(
      [lease('a', 0)],
      [record('a', { solverAcceptedAt: NOW - 1_000 })],
      { 'id-a': 'ready' },
      () => now,
      undefined,
      {
        pollGapMs: 3_000,
      },
    );

    // WHEN rounds run every 100 ms
    let rounds = 0;
    while (w.released.length === 0 && rounds < 100) {
      await w.watch.round();
      now += 100;
      rounds += 1;
    }

    // THEN it was asked once, 2 s later, and freed then
    expect(w.asked).toHaveLength(1);
    expect(w.released).toEqual(['a']);
    expect(rounds).toBe(21);
  });
});

/**
 * A busy plan on a virtual clock: `count` parked tasks whose answers are ready `readyAt(i)`, each
 * call taking time — the solver's bulk poll `pollMs`, a lease's DeleteItem 10 ms, a recording
 * `recordMs` (its result request, write, event and delete).
 */
function busyPlan(
  count: number,
  readyAt: (i: number) => number,
  timing: { pollMs: number; recordMs: number },
  outcome: (taskId: string) => Promise<'recorded'> = async () => 'recorded',
) {
  const time = new VirtualTime(NOW);
  const held = new Map<number, LeaseSlot>();
  for (let i = 0; i < count; i++) held.set(i, lease(`t${i}`, i, { until: NOW + 600_000 }));
  const ready = new Map([...held.values()].map((s, i) => [`id-${s.taskId}`, readyAt(i)]));
  const polls: number[] = [];
  const freedAt = new Map<string, number>();
  const warnings: string[] = [];
  const solvedWrites: number[] = [];
  let recording = 0;
  let mostRecording = 0;
  const watch = createParkedWatch({
    leases: {
      views: async (shards) =>
        shards.map((shard): ShardView => ({ shard, meta: { limit: count }, slots: [...held.values()] })),
      setLimit: async () => undefined,
      clearRefusal: async () => undefined,
      renew: async () => true,
      release: async (l) => {
        await time.sleep(10);
        held.delete(l.slot);
        freedAt.set(l.taskId, time.now);
      },
    },
    shards: ['primary#0'],
    results: { get: async (id) => record(id) },
    solver: {
      pollMany: async (targets) => {
        polls.push(time.now);
        await time.sleep(timing.pollMs);
        return new Map(
          targets.map((t) => [
            t.solverId,
            { state: (ready.get(t.solverId) ?? Infinity) <= time.now ? 'ready' : 'not_ready' } as PollState,
          ]),
        );
      },
    },
    queue: { changeVisibility: async () => undefined },
    recorder: {
      record: async (task) => {
        recording += 1;
        mostRecording = Math.max(mostRecording, recording);
        try {
          await time.sleep(timing.recordMs);
          return await outcome(task.taskId);
        } finally {
          recording -= 1;
        }
      },
    },
    solved: { countSolved: async (n) => void solvedWrites.push(n) },
    clock: time.clock,
    sleep: time.sleep,
    pollMs: 100,
    viewEveryMs: 60_000,
    settleMs: 0,
    log: {
      info: () => undefined,
      warn: (message: string) => void warnings.push(message),
      error: () => undefined,
    } as unknown as ParkedWatchOptions['log'],
  });
  return { time, watch, held, polls, freedAt, ready, warnings, solvedWrites, mostRecording: () => mostRecording };
}

describe('the parked watch records beside its rounds', () => {
  it('keeps its cadence while it records: each slot frees a round trip after the first round past its answer, whatever recording takes', async () => {
    // GIVEN 40 parked tasks whose answers come every 37 ms from 0.1 s on, a bulk poll of 100 ms and
    // a recording of 150 ms (its own result request and three writes)
    const plan = busyPlan(40, (i) => NOW + 100 + 37 * i, { pollMs: 100, recordMs: 150 });

    // WHEN the watch runs until its invocation has 3 s left of 5 s
    const left = () => NOW + 5_000 - plan.time.now;
    const run = plan.watch.run(left, 3_000);
    await plan.time.runUntil(NOW + 10_000);
    await run;

    // THEN the rounds kept 110 ms apart (the poll and the DeleteItem; waiting for each round's
    // recordings spaced them 260 ms), every slot freed within two of those after its answer, and
    // every answer was recorded and counted before the run ended
    const gaps = plan.polls.slice(1).map((at, k) => at - (plan.polls[k] as number));
    expect(Math.max(...gaps)).toBeLessThanOrEqual(110);
    for (const [solverId, at] of plan.ready) {
      const freed = plan.freedAt.get(solverId.slice('id-'.length));
      expect(freed).toBeDefined();
      expect((freed as number) - at).toBeLessThanOrEqual(2 * 110);
    }
    expect(plan.watch.stats.recorded).toBe(40);
    expect(plan.solvedWrites.reduce((a, b) => a + b, 0)).toBe(40);
  });

  it(`records at most ${MAX_RECORDING} at once: a round past that waits for recordings to finish`, async () => {
    // GIVEN 300 answers ready at once and a recording of 2 s
    const plan = busyPlan(300, () => NOW, { pollMs: 100, recordMs: 2_000 });

    // WHEN the watch runs one round
    let over = false;
    const round = plan.watch.round({ recording: 'beside' }).then(() => {
      over = true;
    });
    await plan.time.runUntil(NOW + 1_000);

    // THEN it freed every slot at once, began MAX_RECORDING recordings and waits to begin the rest
    expect(plan.held.size).toBe(0);
    expect(plan.mostRecording()).toBe(MAX_RECORDING);
    expect(over).toBe(false);

    // and once the first recordings end it begins the rest, never more at once; all are recorded
    await plan.time.runUntil(NOW + 3_000);
    await round;
    const settled = plan.watch.settle();
    await plan.time.runUntil(NOW + 10_000);
    await settled;
    expect(plan.mostRecording()).toBe(MAX_RECORDING);
    expect(plan.watch.stats.recorded).toBe(300);
  });

  it('logs a recording that throws and goes on: the others are recorded, the run ends', async () => {
    const plan = busyPlan(
      5,
      (i) => NOW + 50 * i,
      { pollMs: 100, recordMs: 50 },
      async (taskId) => {
        if (taskId === 't2') throw new Error('socket hang up');
        return 'recorded';
      },
    );
    const left = () => NOW + 3_000 - plan.time.now;
    const run = plan.watch.run(left, 2_000);
    await plan.time.runUntil(NOW + 5_000);
    await expect(run).resolves.toBeUndefined();
    expect(plan.watch.stats.recorded).toBe(4);
    expect(plan.warnings).toEqual(['parked answer not recorded; its message returns when its lease ends']);
  });
});
