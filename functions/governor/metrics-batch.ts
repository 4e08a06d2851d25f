/**
 * The consumer's metrics of the solves the watch recorded, published once a batch instead of once
 * a solve: one EMF document holds every value of its batch (Powertools keeps up to 100 values a
 * metric and publishes when a metric reaches them), so CloudWatch Logs ingests a document's frame
 * once per batch rather than once per solve. Published when the oldest solve has waited `flushMs`
 * (with the watch's solved batch) and at the end of its run. Never throws.
 */
import { createBatchTimer } from './batch-timer.js';
import type { Clock } from '../core/ports.js';

export interface MetricsBatch {
  /** A solve's metrics were added to the store: publish them with the batch. */
  add(): void;
  /** Publish what waits when the oldest has waited `flushMs`. */
  flushIfDue(): Promise<void>;
  /** Publish what waits. */
  flush(): Promise<void>;
  readonly stats: { documents: number; solves: number };
}

export interface MetricsBatchOptions {
  /** The recorder's metrics (Powertools Metrics: `publishStoredMetrics`). */
  metrics: { publishStoredMetrics(): unknown };
  /** Longest a solve's metrics wait for their batch, ms. @default WATCH_BATCH_MS (10 000: the watch's solved batch) */
  flushMs?: number;
  clock?: Clock;
}

export function createMetricsBatch(options: MetricsBatchOptions): MetricsBatch {
  const timer = createBatchTimer(options);
  const stats = { documents: 0, solves: 0 };
  let waiting = 0;
  const flush = async (): Promise<void> => {
    if (waiting === 0) return;
    stats.solves += waiting;
    stats.documents += 1;
    waiting = 0;
    try {
      options.metrics.publishStoredMetrics();
    } catch {
      // A metric is never worth a recorded answer: the next batch publishes what is stored.
    }
  };
  return {
    add() {
      if (waiting === 0) timer.started();
      waiting += 1;
    },
    flushIfDue: () => (timer.due(waiting) ? flush() : Promise.resolve()),
    flush,
    stats,
  };
}
