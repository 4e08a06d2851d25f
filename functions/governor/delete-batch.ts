/**
 * The watch's deletes of the messages whose answers it recorded, batched: SQS's DeleteMessageBatch
 * takes ten per request, billed as one. A full batch of ten goes at once; the rest go with the
 * watch's solved batch (at most every `flushMs`) and at the end of its run. A delete that waits
 * or fails costs nothing but time: the record is already terminal and its event out, so a
 * message that comes back at its visibility's end meets the terminal record and is acknowledged
 * as a duplicate (docs/governor.md, "The watch over parked tasks").
 */
import { createBatchTimer } from './batch-timer.js';
import type { Clock, DeliveredMessage } from '../core/ports.js';
import { SQS_BATCH_ENTRIES } from '../core/task.js';

/** What the batch asks of the queues (SqsTaskQueue.acknowledgeMany). */
export interface ManyDeleter {
  acknowledgeMany(messages: readonly DeliveredMessage[]): Promise<{ failed: number; requests: number }>;
}

export interface DeleteBatch {
  /** Queue a message's delete (a full batch is sent at once, not awaited). */
  add(message: DeliveredMessage): void;
  /** Send what waits when the oldest has waited `flushMs`. */
  flushIfDue(): Promise<void>;
  /** Send what waits, and wait for every batch sent. */
  flush(): Promise<void>;
  readonly stats: { requests: number; deleted: number; failed: number };
}

export interface DeleteBatchOptions {
  queue: ManyDeleter;
  /** Longest a delete waits for its batch, ms. @default WATCH_BATCH_MS (10 000: the watch's solved batch) */
  flushMs?: number;
  /** Deletes per request. @default 10 (SQS's limit) */
  size?: number;
  clock?: Clock;
}

/** Build the batch. Never throws. */
export function createDeleteBatch(options: DeleteBatchOptions): DeleteBatch {
  const timer = createBatchTimer(options);
  const size = options.size ?? SQS_BATCH_ENTRIES;
  const stats = { requests: 0, deleted: 0, failed: 0 };
  let pending: DeliveredMessage[] = [];
  const inFlight = new Set<Promise<void>>();
  const send = (messages: DeliveredMessage[]): Promise<void> => {
    const sent = options.queue
      .acknowledgeMany(messages)
      .then(({ failed, requests }) => {
        stats.requests += requests;
        stats.failed += failed;
        stats.deleted += messages.length - failed;
      })
      .catch(() => {
        stats.requests += 1;
        stats.failed += messages.length;
      });
    inFlight.add(sent);
    void sent.finally(() => inFlight.delete(sent));
    return sent;
  };
  const sendPending = (): Promise<void> => {
    if (pending.length === 0) return Promise.resolve();
    const messages = pending;
    pending = [];
    return send(messages);
  };
  return {
    stats,
    add(message) {
      if (pending.length === 0) timer.started();
      pending.push(message);
      if (pending.length >= size) void sendPending();
    },
    flushIfDue: () => (timer.due(pending.length) ? sendPending() : Promise.resolve()),
    async flush() {
      await sendPending();
      await Promise.all([...inFlight]);
    },
  };
}
