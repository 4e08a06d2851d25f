/**
 * When one of the watch's batches is due (its deletes, its solves' metric window, their metrics):
 * once its oldest entry has waited `flushMs` (WATCH_BATCH_MS by default). Each batch marks the
 * entry that starts it (`started`) and asks `due` with what it holds.
 */
import type { Clock } from '../core/ports.js';
import { WATCH_BATCH_MS } from '../core/thread-leases.js';

export interface BatchTimer {
  /** The batch's first entry came (it was empty): its wait starts now. */
  started(): void;
  /** Whether a batch holding `waiting` entries is due. */
  due(waiting: number): boolean;
}

export function createBatchTimer(options: { flushMs?: number; clock?: Clock }): BatchTimer {
  const clock = options.clock ?? Date.now;
  const flushMs = options.flushMs ?? WATCH_BATCH_MS;
  let oldestAt = 0;
  return {
    started() {
      oldestAt = clock();
    },
    due: (waiting) => waiting > 0 && clock() - oldestAt >= flushMs,
  };
}
