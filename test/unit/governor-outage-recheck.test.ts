/**
 * The solver's return, between ticks (functions/governor/outage-recheck.ts): while a tick left the
 * fleet paused for the solver's outage (its balance read got no answer), the wait reads the
 * balance every OUTAGE_RECHECK_MS and the first read that answers wakes the loop for a tick at
 * once, out of the cadence and without a probe; a pause for anything else waits for the cadence.
 */
import { describe, expect, it } from 'vitest';
import type { GovernorLoop, TickOptions, TickRecord } from '../../functions/governor/loop.js';
import {
  OUTAGE_RECHECK_MS,
  pausedForSolverOutage,
  solverAnswersAgain,
} from '../../functions/governor/outage-recheck.js';
import { createProbingBalance } from '../../functions/governor/balance-probe.js';
import { runTicks } from '../../functions/governor/run.js';
import { createTickWake } from '../../functions/governor/tick-wake.js';

/**
 * Virtual timers: every sleep ends at its own virtual deadline, the earliest first, once the work
 * of the moment (promises) has settled; an aborted sleep rejects at once, as node's does.
 */
function virtualTimers() {
  const clock = { now: 0 };
  const pending: { at: number; resolve: () => void; done: boolean }[] = [];
  let scheduled = false;
  const pump = () => {
    scheduled = false;
    const next = pending.filter((p) => !p.done).sort((a, b) => a.at - b.at)[0];
    if (next === undefined) return;
    clock.now = Math.max(clock.now, next.at);
    next.done = true;
    next.resolve();
    schedule();
  };
  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(pump);
  };
  const sleep = (ms: number, signal?: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      const entry = { at: clock.now + ms, resolve, done: false };
      pending.push(entry);
      signal?.addEventListener('abort', () => {
        if (entry.done) return;
        entry.done = true;
        reject(new Error('aborted'));
      });
      schedule();
    });
  return { clock, sleep };
}

type Paused = 'solver' | 'store' | false;

function record(paused: Paused): TickRecord {
  return {
    decision: { paused: paused !== false, reason: { code: paused === false ? 'FREE_THREADS' : 'PAUSE_OUTAGE' } },
    signals: paused === 'solver' ? { balanceError: { kind: 'unreachable', code: 'HTTP_503' } } : { balance: 10 },
  } as never;
}

/** Ticks 10 s apart for 60 s; the solver is down until `backAt` (its reads fail), the tick pauses as `pausedAs` while it is. */
async function run(options: { backAt: number; pausedAs: Paused; withRead: boolean }) {
  const { clock, sleep } = virtualTimers();
  const wake = createTickWake();
  const ticks: { at: number; probe: boolean }[] = [];
  const reads: number[] = [];
  const loop = {
    async tick(tickOptions?: TickOptions) {
      ticks.push({ at: clock.now, probe: tickOptions?.probe ?? true });
      return record(clock.now < options.backAt ? options.pausedAs : false);
    },
    lastDecision: undefined,
    beginInvocation: () => undefined,
  } as GovernorLoop;
  const solverRead = async () => {
    reads.push(clock.now);
    if (clock.now < options.backAt) throw new Error('HTTP 503');
    return 10;
  };
  await runTicks({
    loop,
    tickMs: 10_000,
    remainingMs: () => 60_000 - clock.now,
    sleep,
    clock: () => clock.now,
    wake,
    ...(options.withRead ? { solverRead } : {}),
  });
  return { ticks, reads };
}

describe('pausedForSolverOutage', () => {
  it('is a pause for an outage whose balance read got no answer, and nothing else', () => {
    expect(pausedForSolverOutage(record('solver'))).toBe(true);
    expect(pausedForSolverOutage(record('store'))).toBe(false);
    expect(pausedForSolverOutage(record(false))).toBe(false);
  });
});

describe('solverAnswersAgain', () => {
  it('reads every period until a read answers', async () => {
    const { clock, sleep } = virtualTimers();
    const reads: number[] = [];
    const back = await solverAnswersAgain(
      async () => {
        reads.push(clock.now);
        if (clock.now < 5_000) throw new Error('down');
      },
      sleep,
      new AbortController().signal,
    );
    expect(back).toBe(true);
    expect(reads).toEqual([OUTAGE_RECHECK_MS, 2 * OUTAGE_RECHECK_MS, 3 * OUTAGE_RECHECK_MS]);
  });

  it('gives up when its signal aborts', async () => {
    const { sleep } = virtualTimers();
    const controller = new AbortController();
    const reading = solverAnswersAgain(
      async () => {
        throw new Error('down');
      },
      sleep,
      controller.signal,
    );
    controller.abort();
    expect(await reading).toBe(false);
  });
});

describe('runTicks while paused for the solver’s outage', () => {
  it('wakes for a tick at the first balance read that answers, without a probe, and keeps the cadence', async () => {
    // WHEN the solver is back at 25 s
    const { ticks, reads } = await run({ backAt: 25_000, pausedAs: 'solver', withRead: true });
    // THEN each wait reads it every 2 s (the read its end would make is the tick's own); after the
    // 20-s tick at 22, 24 and 26 s, and the read at 26 s answers: the loop ticks at once (no
    // probe), then at 30 s, 40 s and 50 s as before
    expect(reads).toEqual([2_000, 4_000, 6_000, 8_000, 12_000, 14_000, 16_000, 18_000, 22_000, 24_000, 26_000]);
    expect(ticks).toEqual([
      { at: 0, probe: true },
      { at: 10_000, probe: true },
      { at: 20_000, probe: true },
      { at: 26_000, probe: false },
      { at: 30_000, probe: true },
      { at: 40_000, probe: true },
      { at: 50_000, probe: true },
    ]);
  });

  it('waits for the cadence without the read (before: the tick after the solver’s return, up to a tick later)', async () => {
    const { ticks } = await run({ backAt: 25_000, pausedAs: 'solver', withRead: false });
    expect(ticks.map((t) => t.at)).toEqual([0, 10_000, 20_000, 30_000, 40_000, 50_000]);
  });

  it('reads nothing between ticks for a pause whose balance read answered (a store’s outage)', async () => {
    const { ticks, reads } = await run({ backAt: 25_000, pausedAs: 'store', withRead: true });
    expect(reads).toEqual([]);
    expect(ticks.map((t) => t.at)).toEqual([0, 10_000, 20_000, 30_000, 40_000, 50_000]);
  });

  it('reads nothing between ticks while the fleet runs', async () => {
    const { reads } = await run({ backAt: 0, pausedAs: 'solver', withRead: true });
    expect(reads).toEqual([]);
  });
});

describe('the read past the balance cache', () => {
  it('drops the cached failure when it answers, so the tick it wakes asks the solver again', async () => {
    // Prepare: a cache of a whole tick; the solver down for the first read, then back
    let now = 0;
    let down = true;
    let asked = 0;
    const balance = createProbingBalance(
      {
        async getBalance() {
          asked += 1;
          if (down) throw new Error('HTTP 503');
          return 7;
        },
      },
      { ttlMs: 10_000, clock: () => now },
    );
    expect(await balance.read()).toBeUndefined();
    down = false;
    now = 2_000;
    // The cache keeps the failure for its TTL (before the read past it: the woken tick stayed paused)
    expect(await balance.read()).toBeUndefined();
    expect(asked).toBe(1);
    // WHEN the recheck's read answers
    expect(await balance.readFresh(new AbortController().signal)).toBe(7);
    // THEN the next tick's read asks the solver and sees it back, its failure forgotten
    expect(await balance.read()).toBe(7);
    expect(balance.lastError()).toBeUndefined();
    expect(asked).toBe(3);
  });

  it('keeps the cached failure while the solver is still down', async () => {
    const balance = createProbingBalance(
      {
        async getBalance() {
          throw new Error('HTTP 503');
        },
      },
      { ttlMs: 10_000, clock: () => 0 },
    );
    expect(await balance.read()).toBeUndefined();
    await expect(balance.readFresh(new AbortController().signal)).rejects.toThrow('HTTP 503');
    expect(await balance.read()).toBeUndefined();
  });
});
