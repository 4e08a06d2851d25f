/**
 * The parked fleet's metric window, pure side (functions/core/solve-window.ts): the histogram's
 * percentiles against the exact ones on generated solve times, the window's assembly from slots
 * and the ledger's minutes, and the watch's window batch (functions/governor/window-batch.ts).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { percentile } from '../../functions/core/helpers/stats.js';
import {
  bucketMs,
  bucketOf,
  hasCounts,
  histogramOf,
  histogramQuantile,
  type MinuteCounts,
  minuteOf,
  WINDOW_COUNTERS,
  WINDOW_SETTLE_MS,
  windowMinutes,
  type WindowCounts,
  windowOf,
} from '../../functions/core/solve-window.js';
import { createWindowBatch } from '../../functions/governor/window-batch.js';
import { WATCH_BATCH_MS } from '../../functions/core/thread-leases.js';

const slot = (minute: number, counts: Partial<MinuteCounts['counters']>, solveMs: number[] = []): MinuteCounts => ({
  minute,
  counters: Object.fromEntries(WINDOW_COUNTERS.map((name) => [name, counts[name] ?? 0])) as MinuteCounts['counters'],
  solveCount: solveMs.length,
  solveMsSum: solveMs.reduce((a, b) => a + b, 0),
  buckets: histogramOf(solveMs),
});

describe('the window’s histogram', () => {
  it('puts every time in a bucket whose middle is within 4.5 % of it (above the 250 ms floor)', () => {
    fc.assert(
      fc.property(fc.double({ min: 251, max: 3_600_000, noNaN: true }), (ms) => {
        const k = bucketOf(ms);
        expect(Math.abs(bucketMs(k) - ms) / ms).toBeLessThanOrEqual(0.045);
      }),
    );
    expect(bucketOf(0)).toBe(0);
    expect(bucketOf(250)).toBe(0);
    expect(bucketOf(Number.MAX_VALUE)).toBe(120);
  });

  it('reads p95 and the median within 4.5 % of the exact nearest-rank figures, on generated solve times', () => {
    // Solve times as a fleet sees them: a lognormal body (images ~2 s, tokens ~15 s) and a slow tail.
    const solves = fc.array(
      fc.tuple(fc.double({ min: 0.5, max: 60, noNaN: true }), fc.double({ min: 1, max: 4, noNaN: true })),
      { minLength: 1, maxLength: 400 },
    );
    fc.assert(
      fc.property(solves, (pairs) => {
        const times = pairs.map(([seconds, tail]) => seconds * 1000 * (tail > 3.8 ? tail : 1));
        for (const q of [0.5, 0.95]) {
          const exact = percentile(times, q) as number;
          const read = histogramQuantile(histogramOf(times), q) as number;
          expect(Math.abs(read - exact) / exact).toBeLessThanOrEqual(0.045);
        }
      }),
    );
  });

  it('has no percentile without solves', () => {
    expect(histogramQuantile(new Map(), 0.95)).toBeUndefined();
    expect(histogramQuantile(histogramOf([Number.NaN, -5]), 0.95)).toBeUndefined();
  });
});

describe('the window’s assembly', () => {
  const minuteStart = 28_333_335 * 60_000;
  const m = minuteOf(minuteStart);
  // Slots of four minutes and the ledger's counters of the same minutes.
  const slots = [
    slot(m - 3, { solved: 100, transientErrors: 50 }, [99_000]),
    slot(m - 2, { solved: 3, submitErrors: 1, transientErrors: 1 }, [10_000, 11_000, 12_000]),
    slot(m - 1, { solved: 2, failed: 1, taskErrors: 1, resultRequests: 4 }, [20_000, 30_000]),
    slot(m, { accountErrors: 1, submitErrors: 1, solved: 9 }, [1_000]),
  ];
  const ledger = {
    acceptances: new Map([
      [m - 3, 40],
      [m - 2, 5],
      [m - 1, 4],
      [m, 1],
    ]),
    refusals: new Map([[m - 1, 2]]),
  };

  it('sums the last two whole minutes whose counts are complete: not the minute still being written', () => {
    // Act: 20 s into minute m (the watch's last batch of m − 1 written by 12 s)
    const window = windowOf(minuteStart + 20_000, slots, ledger);
    // Assess: minutes m − 2 and m − 1, 120 s
    expect(windowMinutes(minuteStart + 20_000)).toEqual({ first: m - 2, last: m - 1 });
    expect(window).toMatchObject({
      windowMs: 120_000,
      submissions: 5 + 4 + 2 + 1,
      overCapAnswers: 2,
      resultRequests: 4,
      transientErrors: 1,
      taskErrors: 1,
      accountErrors: 0,
      solved: 5,
      failed: 1,
      meanSolveMs: (10_000 + 11_000 + 12_000 + 20_000 + 30_000) / 5,
    });
    // The slowest of five, read from its bucket: within 4.5 %.
    expect(Math.abs((window.p95SolveMs as number) - 30_000) / 30_000).toBeLessThanOrEqual(0.045);
  });

  it('waits for the watch’s last batch of a minute before counting it (WINDOW_SETTLE_MS into the next)', () => {
    // 5 s into minute m: m − 1 may still get a batch, so the window is m − 3 and m − 2.
    expect(WINDOW_SETTLE_MS).toBeGreaterThan(WATCH_BATCH_MS);
    expect(windowMinutes(minuteStart + 5_000)).toEqual({ first: m - 3, last: m - 2 });
    expect(windowMinutes(minuteStart + WINDOW_SETTLE_MS)).toEqual({ first: m - 2, last: m - 1 });
    const window = windowOf(minuteStart + 5_000, slots, ledger);
    expect(window).toMatchObject({ windowMs: 120_000, solved: 103, submissions: 40 + 5 + 1, transientErrors: 51 });
  });

  it('reads a quiet window as zeros with no solve time (a known window, not an unknown one)', () => {
    const window = windowOf(minuteStart + 20_000, [], { acceptances: new Map(), refusals: new Map() });
    expect(window).toMatchObject({ submissions: 0, solved: 0, transientErrors: 0 });
    expect(window.meanSolveMs).toBeUndefined();
    expect(window.p95SolveMs).toBeUndefined();
  });

  it('has nothing to write for an ordinary parked delivery (its submission is the ledger’s)', () => {
    expect(hasCounts({})).toBe(false);
    expect(hasCounts({ solved: 0, solveMs: [] })).toBe(false);
    const some: WindowCounts[] = [{ submitErrors: 1 }, { failed: 1 }, { solveMs: [5] }, { accountErrors: 1 }];
    for (const counts of some) expect(hasCounts(counts)).toBe(true);
  });
});

describe('the watch’s window batch', () => {
  it('writes the solves it holds once the oldest is due, and keeps a failed batch for the next', async () => {
    // Prepare
    let now = 0;
    let down = true;
    const written: WindowCounts[] = [];
    const warnings: string[] = [];
    const batch = createWindowBatch({
      window: {
        async add(counts) {
          if (down) throw new Error('DynamoDB unavailable');
          written.push(counts);
        },
      },
      flushMs: 5_000,
      clock: () => now,
      warn: (message) => warnings.push(message),
    });
    // Act: two solves, not yet due; then due with the table down; then up again.
    batch.add(10_000);
    now = 1_000;
    batch.add(12_000);
    await batch.flushIfDue();
    expect(written).toEqual([]);
    now = 5_000;
    await batch.flushIfDue();
    expect(warnings).toHaveLength(1);
    down = false;
    batch.add(14_000);
    await batch.flushIfDue();
    expect(written).toEqual([]);
    now = 10_000;
    await batch.flushIfDue();
    // Assess: the failed batch (retried a flush later, not at once) and the new solve in one write.
    expect(written).toEqual([{ solved: 3, solveMs: [10_000, 12_000, 14_000] }]);
    expect(batch.stats).toEqual({ writes: 2, counted: 3, failed: 1 });
    await batch.flush();
    expect(batch.stats.writes).toBe(2);
  });
});
