/**
 * The watch that records parked answers, with its batches, built in one place for every runner:
 * the governor Lambda (functions/governor/wiring.ts), the local runtime (local/runtime.ts) and the
 * CPU benchmark (bench/watch-cpu.ts). A recorded task's message delete waits for its batch
 * (delete-batch.ts), its solve for the metric window's (window-batch.ts, when the fleet keeps one)
 * and its metrics for one EMF document a batch (metrics-batch.ts); the watch flushes them after
 * its rounds and at the end of its run.
 */
import type { Metrics } from '../adapters/metrics.js';
import { createParkedRecorder, type ParkedRecorderDeps } from '../adapters/parked-recorder.js';
import type { Clock, SolverPort } from '../core/ports.js';
import type { SolveWindowWriter } from '../core/solve-window.js';
import type { SolvedCounter } from '../core/thread-ledger.js';
import { createDeleteBatch, type DeleteBatch, type ManyDeleter } from './delete-batch.js';
import type { GovernorLog } from './loop.js';
import { createMetricsBatch, type MetricsBatch } from './metrics-batch.js';
import { createParkedWatch, type ParkedWatch, type ParkedWatchOptions } from './parked-watch.js';
import { createWindowBatch, type WindowBatch } from './window-batch.js';

export interface RecordingWatchOptions {
  leases: ParkedWatchOptions['leases'];
  shards: readonly string[];
  /** The results table: the watch reads new leases' records, the recorder writes the answers. */
  results: ParkedWatchOptions['results'] & ParkedRecorderDeps['repository'];
  /** The solver: a bulk poll for the watch, the answer's read for the recorder. */
  solver: Required<Pick<SolverPort, 'pollMany'>> & Pick<SolverPort, 'solve'>;
  queue: ParkedWatchOptions['queue'] & ParkedRecorderDeps['queue'] & ManyDeleter;
  events: ParkedRecorderDeps['events'];
  /** The consumer's metrics (service `consumer`): a solve counts the same whoever records it. */
  metrics: Metrics;
  redactor: ParkedRecorderDeps['redactor'];
  /** The thread ledger's `solved` counter (the governor's price per solve). */
  solved?: SolvedCounter;
  /** The parked fleet's metric window, when the governor reads one. */
  window?: SolveWindowWriter;
  /** Longest a batch waits (the solved count's included), ms. @default WATCH_BATCH_MS (each batch's own default) */
  batchMs?: number;
  /** The watch's cadence and leases: pollMs, pollGapMs, backoffPollMs, viewEveryMs, settleMs, leaseMs. */
  cadence?: Pick<ParkedWatchOptions, 'pollMs' | 'pollGapMs' | 'backoffPollMs' | 'viewEveryMs' | 'settleMs' | 'leaseMs'>;
  clock?: Clock;
  log?: GovernorLog;
}

export interface RecordingWatch {
  watch: ParkedWatch;
  deletes: DeleteBatch;
  metricsBatch: MetricsBatch;
  windowBatch: WindowBatch | undefined;
}

/** Build the recorder, its batches and the watch that flushes them. */
export function createRecordingWatch(options: RecordingWatchOptions): RecordingWatch {
  const { clock, log } = options;
  const timing = {
    ...(options.batchMs !== undefined ? { flushMs: options.batchMs } : {}),
    ...(clock ? { clock } : {}),
  };
  const deletes = createDeleteBatch({ queue: options.queue, ...timing });
  const windowBatch = options.window
    ? createWindowBatch({
        window: options.window,
        ...timing,
        ...(log ? { warn: (message, fields) => log.warn(message, fields) } : {}),
      })
    : undefined;
  const metricsBatch = createMetricsBatch({ metrics: options.metrics, ...timing });
  const recorder = createParkedRecorder({
    repository: options.results,
    solver: options.solver,
    queue: options.queue,
    deletes,
    ...(windowBatch ? { window: windowBatch } : {}),
    metricsBatch,
    events: options.events,
    metrics: options.metrics,
    redactor: options.redactor,
    ...(clock ? { clock } : {}),
    ...(log ? { log } : {}),
  });
  const watch = createParkedWatch({
    leases: options.leases,
    shards: options.shards,
    results: options.results,
    solver: options.solver,
    queue: options.queue,
    recorder,
    deletes,
    ...(windowBatch ? { window: windowBatch } : {}),
    metricsBatch,
    ...(options.solved ? { solved: options.solved } : {}),
    ...(options.batchMs !== undefined ? { solvedFlushMs: options.batchMs } : {}),
    ...options.cadence,
    ...(clock ? { clock } : {}),
    ...(log ? { log } : {}),
  });
  return { watch, deletes, metricsBatch, windowBatch };
}
