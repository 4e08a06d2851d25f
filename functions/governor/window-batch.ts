/**
 * The solves the watch recorded, on their way to the parked fleet's metric window
 * (functions/core/solve-window.ts): their count and times, one write per batch, at most every
 * `flushMs` and at the end of the watch's run, beside its solved count and its deletes. Never
 * throws: a batch whose write failed stays for the next (the window is read as it stands).
 */
import { createBatchTimer } from './batch-timer.js';
import type { Clock } from '../core/ports.js';
import type { SolveWindowWriter } from '../core/solve-window.js';

export interface WindowBatch {
  /** A solve recorded, with its time at the solver, ms. */
  add(solveMs: number): void;
  /** Write what waits when the oldest has waited `flushMs`. */
  flushIfDue(): Promise<void>;
  /** Write what waits. */
  flush(): Promise<void>;
  readonly stats: { writes: number; counted: number; failed: number };
}

export interface WindowBatchOptions {
  window: SolveWindowWriter;
  /** Longest a solve waits for its batch, ms. @default WATCH_BATCH_MS (10 000: the watch's solved batch) */
  flushMs?: number;
  clock?: Clock;
  warn?: (message: string, fields?: Record<string, unknown>) => void;
}

export function createWindowBatch(options: WindowBatchOptions): WindowBatch {
  const timer = createBatchTimer(options);
  const stats = { writes: 0, counted: 0, failed: 0 };
  let times: number[] = [];
  const flush = async (): Promise<void> => {
    if (times.length === 0) return;
    // Taken before the write: a solve recorded meanwhile joins the next batch.
    const batch = times;
    times = [];
    stats.writes += 1;
    try {
      await options.window.add({ solved: batch.length, solveMs: batch });
      stats.counted += batch.length;
    } catch (error) {
      stats.failed += 1;
      if (times.length === 0) timer.started();
      times = [...batch, ...times];
      options.warn?.('solves not added to the metric window; kept for the next batch', {
        count: batch.length,
        error: `${(error as Error).name}: ${(error as Error).message}`,
      });
    }
  };
  return {
    add(solveMs) {
      if (times.length === 0) timer.started();
      times.push(solveMs);
    },
    flushIfDue: () => (timer.due(times.length) ? flush() : Promise.resolve()),
    flush,
    stats,
  };
}
