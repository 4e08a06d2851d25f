/**
 * The watch relay: each governor invocation's watch takes over from the previous one's and hands
 * over to the next's, never two at once, with no more than a moment between them. Driven on a
 * virtual clock over chains of invocations drawn with jittered starts, store round trips, crashes
 * and store failures.
 */
import { describe, expect, it } from 'vitest';
import {
  createWatchRelay,
  HAND_OVER_CONFIRM_MS,
  handedOver,
  relayMove,
  type WatchBaton,
  type WatchBatonStore,
} from '../../functions/core/watch-relay.js';
import type { ParkedWatch } from '../../functions/governor/parked-watch.js';
import { runRelayedWatch, TICK_WINDOW_MS, tickWindowOf } from '../../functions/governor/relayed-watch.js';
import { Rng } from '../../lab/rng.js';
import { VirtualTime } from '../helpers/virtual-time.js';

describe('relayMove', () => {
  const held = (over: Partial<WatchBaton> = {}): WatchBaton => ({ owner: 'a', until: 1_000, version: 3, ...over });

  it.each([
    ['nobody ever held it', undefined, 500, { kind: 'take', write: { owner: 'b', until: 9_000 } }],
    ['its holder’s time is up', held(), 1_000, { kind: 'take', write: { owner: 'b', until: 9_000 } }],
    ['it was handed over', held({ owner: 'b' }), 500, { kind: 'holds' }],
    [
      'another holds it',
      held(),
      500,
      { kind: 'ask', write: { owner: 'a', until: 1_000, next: { owner: 'b', until: 9_000 } } },
    ],
    ['it asked already', held({ next: { owner: 'b', until: 9_000 } }), 500, { kind: 'wait' }],
    [
      'a third waits: it asks in its place',
      held({ next: { owner: 'c', until: 8_000 } }),
      500,
      { kind: 'ask', write: { owner: 'a', until: 1_000, next: { owner: 'b', until: 9_000 } } },
    ],
  ])('%s', (_case, baton, now, move) => {
    expect(relayMove(baton, 'b', 9_000, now)).toEqual(move);
  });

  it('hands the baton to the one waiting, else ends its own hold now', () => {
    // The newcomer's for HAND_OVER_CONFIRM_MS until it confirms (its own until).
    expect(handedOver(held({ next: { owner: 'b', until: 9_000 } }), 700)).toEqual({
      owner: 'b',
      until: 700 + HAND_OVER_CONFIRM_MS,
    });
    expect(handedOver(held({ next: { owner: 'b', until: 2_000 } }), 700)).toEqual({ owner: 'b', until: 2_000 });
    expect(handedOver(held(), 700)).toEqual({ owner: 'a', until: 700 });
  });
});

/** The baton in memory, each call one round trip of `rttMs`; failing while `failing()` says so. */
function memoryBaton(time: VirtualTime, rttMs: () => number, failing: () => boolean = () => false) {
  let stored: WatchBaton | undefined;
  const calls = { reads: 0, writes: 0 };
  const store: WatchBatonStore = {
    async read() {
      calls.reads += 1;
      await time.sleep(rttMs());
      if (failing()) throw new Error('store unreachable');
      return stored === undefined ? undefined : structuredClone(stored);
    },
    async write(baton, expected) {
      calls.writes += 1;
      await time.sleep(rttMs());
      if (failing()) throw new Error('store unreachable');
      if ((stored?.version ?? 0) !== (expected?.version ?? 0)) return false;
      stored = { ...structuredClone(baton), version: (expected?.version ?? 0) + 1 };
      return true;
    },
  };
  return { store, calls };
}

interface Round {
  by: string;
  start: number;
  end: number;
}

/** A watch whose rounds take `roundMs` each and are logged; it stops dead (no hand-over) at `dieAt`. */
function loggedWatch(time: VirtualTime, by: string, rounds: Round[], roundMs: number, dieAt?: number) {
  const watch: Pick<ParkedWatch, 'run'> = {
    async run(remainingMs, marginMs, done) {
      while (remainingMs() - roundMs >= marginMs && !((await done?.()) ?? false)) {
        if (dieAt !== undefined && time.now >= dieAt) return new Promise<void>(() => {});
        const start = time.now;
        await time.sleep(roundMs);
        rounds.push({ by, start, end: time.now });
      }
    },
  };
  return watch;
}

/**
 * One governor invocation on `time` running its relayed watch over `store` from `startAt` for
 * `timeoutMs`, its rounds logged in `rounds`; resolves with when it ended.
 */
async function relayedInvocation(
  time: VirtualTime,
  store: WatchBatonStore,
  rounds: Round[],
  by: string,
  startAt: number,
  timeoutMs = 75_000,
): Promise<number> {
  await time.sleep(startAt);
  const started = time.now;
  const remainingMs = () => started + timeoutMs - time.now;
  await runRelayedWatch({
    watch: loggedWatch(time, by, rounds, 100),
    relay: createWatchRelay({ store, me: by, clock: time.clock, sleep: time.sleep, pollMs: 100 }),
    remainingMs,
    marginMs: 1_000,
    ticksOver: () => tickWindowOf(started, remainingMs, time.clock)() <= 0,
    clock: time.clock,
  });
  return time.now;
}

interface ChainOptions {
  seed: number;
  invocations: number;
  timeoutMs?: number;
  /** The schedule's lateness for each invocation, ms. */
  jitterMs?: (rng: Rng) => number;
  rttMs?: (rng: Rng) => number;
  /** Invocations that crash, and when after their start. */
  crashes?: Map<number, number>;
  failing?: (now: number) => boolean;
}

/** A chain of governor invocations a minute apart, each running its relayed watch; their rounds. */
async function runChain(options: ChainOptions) {
  const time = new VirtualTime();
  const rng = new Rng(options.seed);
  const timeoutMs = options.timeoutMs ?? 75_000;
  const rtt = () => options.rttMs?.(rng) ?? 5 + rng.uniform() * 20;
  const { store, calls } = memoryBaton(time, rtt, () => options.failing?.(time.now) ?? false);
  const rounds: Round[] = [];
  const warnings: string[] = [];
  const spans: Array<{ by: string; start: number; end?: number }> = [];
  const invocation = async (index: number, startAt: number) => {
    await time.sleep(startAt);
    const by = `inv-${index}`;
    const span: { by: string; start: number; end?: number } = { by, start: time.now };
    spans.push(span);
    const started = time.now;
    const remainingMs = () => started + timeoutMs - time.now;
    const crashAt = options.crashes?.get(index);
    await runRelayedWatch({
      watch: loggedWatch(time, by, rounds, 100, crashAt === undefined ? undefined : started + crashAt),
      relay: createWatchRelay({ store, me: by, clock: time.clock, sleep: time.sleep, pollMs: 100 }),
      remainingMs,
      marginMs: 1_000,
      ticksOver: () => tickWindowOf(started, remainingMs, time.clock)() <= 0,
      clock: time.clock,
      log: { warn: (message) => warnings.push(`${by}: ${message}`) },
    });
    span.end = time.now;
  };
  for (let i = 0; i < options.invocations; i++)
    void invocation(i, i * 60_000 + Math.max(0, options.jitterMs?.(rng) ?? rng.uniform() * 3_000));
  await time.runUntil(options.invocations * 60_000 + timeoutMs);
  rounds.sort((a, b) => a.start - b.start);
  return { rounds, spans, calls, warnings };
}

/** Gaps between consecutive rounds of different invocations, ms; throws on an overlap. */
function handOverGaps(rounds: Round[]): number[] {
  const gaps: number[] = [];
  for (let i = 1; i < rounds.length; i++) {
    const [before, after] = [rounds[i - 1] as Round, rounds[i] as Round];
    if (before.by === after.by) continue;
    if (after.start < before.end)
      throw new Error(`${after.by} began a round at ${after.start} inside ${before.by}'s (until ${before.end})`);
    gaps.push(after.start - before.end);
  }
  return gaps;
}

describe('the relay over a chain of invocations', () => {
  it.each([1, 2, 3, 4, 5, 6, 7, 8])(
    'seed %i: one watch at a time, each taking over within a few round trips',
    async (seed) => {
      const { rounds, spans, warnings } = await runChain({
        seed,
        invocations: 6,
        // Late by up to 8 s (the schedule's delivery, a cold start), store round trips 2–60 ms.
        jitterMs: (rng) => rng.uniform() * 8_000,
        rttMs: (rng) => 2 + rng.uniform() * 58,
      });
      const gaps = handOverGaps(rounds);
      expect(gaps).toHaveLength(5);
      expect(warnings).toEqual([]);
      // The holder's last round (100 ms), its yield check, the hand-over's read and write, and the
      // newcomer's next read of the baton: a few round trips and a poll, never the old 3 s.
      for (const gap of gaps) expect(gap).toBeLessThan(100 + 100 + 4 * 60);
      // Every invocation ends once its ticks are over and the next has come (the last runs to its
      // timeout margin): a second at most after the later of the two.
      for (const [i, span] of spans.entries()) {
        const next = spans[i + 1];
        if (next !== undefined)
          expect(span.end).toBeLessThanOrEqual(Math.max(next.start, span.start + TICK_WINDOW_MS) + 1_000);
      }
    },
  );

  it('keeps watching through the minute when the next invocation comes late', async () => {
    const { rounds } = await runChain({ seed: 11, invocations: 3, jitterMs: () => 12_000 });
    const gaps = handOverGaps(rounds);
    expect(Math.max(...gaps)).toBeLessThan(500);
  });

  it('waits out a holder that crashed, up to its own deadline, and never overlaps it', async () => {
    const { rounds } = await runChain({
      seed: 5,
      invocations: 3,
      jitterMs: () => 0,
      crashes: new Map([[1, 30_000]]),
    });
    const gaps = handOverGaps(rounds);
    // inv-1 died 30 s in without handing over: inv-2 takes the baton once inv-1's hold ends (its
    // 75 s timeout, past which it could not run).
    const taken = rounds.find((r) => r.by === 'inv-2')?.start ?? 0;
    expect(taken).toBeGreaterThanOrEqual(60_000 + 75_000);
    expect(taken).toBeLessThan(60_000 + 75_000 + 500);
    expect(gaps.filter((gap) => gap > 1_000)).toHaveLength(1);
  });

  it('keeps the holder watching while the store fails, and hands over once it answers', async () => {
    const { rounds } = await runChain({
      seed: 9,
      invocations: 4,
      failing: (now) => now > 118_000 && now < 125_000,
    });
    // Overlaps throw inside handOverGaps; the newcomer waited for the store, the holder watched on.
    const gaps = handOverGaps(rounds);
    expect(gaps).toHaveLength(3);
    expect(Math.max(...gaps)).toBeLessThan(500);
  });

  it('never starts a newcomer on top of a holder through a long store failure', async () => {
    const { rounds, warnings } = await runChain({
      seed: 10,
      invocations: 4,
      jitterMs: () => 0,
      failing: (now) => now > 100_000 && now < 200_000,
    });
    const gaps = handOverGaps(rounds);
    // inv-1 watches to its margin (134 s), cannot hand over; inv-2 and inv-3 wait for the store.
    expect(gaps.length).toBeGreaterThanOrEqual(2);
    const resumed = rounds.find((r) => r.start > 134_000)?.start ?? 0;
    expect(resumed).toBeGreaterThanOrEqual(200_000);
    // inv-2 never got the baton before its own end: its watch did not run, and it says so.
    expect(warnings.some((w) => w.startsWith('inv-2: parked watch did not run'))).toBe(true);
  });

  it('takes the baton back from a newcomer that died after it asked, and the next invocation takes it at once', async () => {
    // Prepare: inv-0 watches from 0 s (75 s timeout); at 60 s a newcomer asks to be next (its own
    // until 135 s) and dies; inv-2 comes at 120 s.
    const time = new VirtualTime();
    const { store } = memoryBaton(time, () => 10);
    const rounds: Round[] = [];
    const invocation = (by: string, startAt: number) => relayedInvocation(time, store, rounds, by, startAt);
    const dead = async () => {
      await time.sleep(60_000);
      const baton = await store.read();
      if (baton === undefined) throw new Error('no baton');
      await store.write({ owner: baton.owner, until: baton.until, next: { owner: 'dead', until: 135_000 } }, baton);
    };

    // Act
    void invocation('inv-0', 0);
    void dead();
    void invocation('inv-2', 120_000);
    await time.runUntil(200_000);
    rounds.sort((a, b) => a.start - b.start);

    // Assess: never two at once (handOverGaps throws); inv-0 watched on to its margin (before, it
    // stopped at the hand-over, ~60 s), and inv-2 began at once (before, at the dead one's 135 s).
    handOverGaps(rounds);
    const lastOfHolder = Math.max(...rounds.filter((r) => r.by === 'inv-0').map((r) => r.end));
    expect(lastOfHolder).toBeGreaterThan(73_000);
    const firstOfNext = rounds.find((r) => r.by === 'inv-2')?.start ?? Number.POSITIVE_INFINITY;
    expect(firstOfNext).toBeLessThan(120_500);
  });

  it('ends the holder at once when it hands over the rest of a newcomer’s short life (nothing to confirm)', async () => {
    // Prepare: inv-0 from 0 s (75 s); inv-1 from 70 s with 2.5 s to live: the baton handed to it
    // is its whole hold, which it does not confirm.
    const time = new VirtualTime();
    const { store } = memoryBaton(time, () => 10);
    const rounds: Round[] = [];
    const ended: Record<string, number> = {};
    const invocation = async (by: string, startAt: number, timeoutMs: number) => {
      ended[by] = await relayedInvocation(time, store, rounds, by, startAt, timeoutMs);
    };

    // Act
    void invocation('inv-0', 0, 75_000);
    void invocation('inv-1', 70_000, 2_500);
    await time.runUntil(80_000);
    rounds.sort((a, b) => a.start - b.start);

    // Assess: never two at once; inv-0 ended at the hand-over (before, it polled on to 72.5 s,
    // took the baton back and watched to its own end, its invocation billed the while).
    handOverGaps(rounds);
    expect(ended['inv-0']).toBeLessThan(70_500);
  });

  it('confirms a hand-over the store will not write at the poll’s pace, not in a loop', async () => {
    // Prepare: inv-0 from 0 s, inv-1 from 59.9 s; inv-1's confirmations of the baton handed to it
    // fail until 62.3 s (the store refusing its writes), within the 3 s it is given.
    const time = new VirtualTime();
    const { store } = memoryBaton(time, () => 10);
    const confirmationsAt: number[] = [];
    const flaky: WatchBatonStore = {
      read: () => store.read(),
      async write(baton, expected) {
        const confirming = baton.owner === 'inv-1' && expected?.owner === 'inv-1';
        if (confirming) confirmationsAt.push(time.now);
        if (confirming && time.now < 62_300) {
          await time.sleep(10);
          throw new Error('store unreachable');
        }
        return store.write(baton, expected);
      },
    };
    const rounds: Round[] = [];
    const invocation = (by: string, startAt: number) => relayedInvocation(time, flaky, rounds, by, startAt);

    // Act
    void invocation('inv-0', 0);
    void invocation('inv-1', 59_900);
    await time.runUntil(140_000);
    rounds.sort((a, b) => a.start - b.start);

    // Assess: one try a poll while the writes fail (before, a try every round trip: ~100), never
    // two watches at once, and inv-1 watches once the store writes again.
    handOverGaps(rounds);
    expect(confirmationsAt.filter((at) => at < 62_300).length).toBeGreaterThan(5);
    expect(confirmationsAt.filter((at) => at < 62_300).length).toBeLessThan(40);
    expect(rounds.some((r) => r.by === 'inv-1' && r.start >= 62_300)).toBe(true);
  });

  it('asks the store a few dozen times a minute, not every round of the minute', async () => {
    const { calls } = await runChain({ seed: 3, invocations: 5 });
    expect(calls.reads / 5).toBeLessThan(60);
    expect(calls.writes / 5).toBeLessThanOrEqual(3);
  });
});

describe('the tick window', () => {
  it('ends the ticks within the first 58 s however long the invocation may run', () => {
    let now = 1_000;
    const window = tickWindowOf(
      1_000,
      () => 75_000 - (now - 1_000),
      () => now,
    );
    expect(window()).toBe(TICK_WINDOW_MS);
    now = 1_000 + TICK_WINDOW_MS;
    expect(window()).toBe(0);
    const shortLived = tickWindowOf(
      1_000,
      () => 10_000 - (now - 1_000),
      () => now,
    );
    now = 1_000;
    expect(shortLived()).toBe(10_000);
  });
});
