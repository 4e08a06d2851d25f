/**
 * The watch's batched deletes (functions/governor/delete-batch.ts): ten to a request, the rest
 * when due or flushed, failures counted and never thrown.
 */
import { describe, expect, it } from 'vitest';
import type { DeliveredMessage } from '../../functions/core/ports.js';
import { createDeleteBatch, type ManyDeleter } from '../../functions/governor/delete-batch.js';

const message = (n: number, queue = 'normal'): DeliveredMessage => ({
  eventSourceArn: `arn:aws:sqs:us-east-1:123456789012:${queue}`,
  receiptHandle: `handle-${queue}-${n}`,
});

/** A queue that records what it was asked to delete; `fail` refuses those handles, `down` fails every request. */
function recordingQueue(options: { fail?: (m: DeliveredMessage) => boolean; down?: boolean } = {}) {
  const requests: DeliveredMessage[][] = [];
  const queue: ManyDeleter = {
    async acknowledgeMany(messages) {
      requests.push([...messages]);
      if (options.down) throw new Error('SQS unavailable');
      return { failed: messages.filter((m) => options.fail?.(m) ?? false).length, requests: 1 };
    },
  };
  return { queue, requests };
}

describe('the watch’s batched deletes', () => {
  it('sends a full batch of ten at once and keeps a partial one until it is due', async () => {
    // Prepare
    let now = 0;
    const { queue, requests } = recordingQueue();
    const batch = createDeleteBatch({ queue, flushMs: 5_000, clock: () => now });
    // Act
    for (let n = 0; n < 13; n++) batch.add(message(n));
    await batch.flushIfDue();
    const beforeDue = requests.length;
    now = 4_999;
    await batch.flushIfDue();
    const stillWaiting = requests.length;
    now = 5_000;
    await batch.flushIfDue();
    await batch.flush();
    // Assess
    expect(beforeDue).toBe(1);
    expect(stillWaiting).toBe(1);
    expect(requests.map((r) => r.length)).toEqual([10, 3]);
    expect(requests.flat().map((m) => m.receiptHandle)).toEqual(
      Array.from({ length: 13 }, (_, n) => `handle-normal-${n}`),
    );
    expect(batch.stats).toEqual({ requests: 2, deleted: 13, failed: 0 });
  });

  it('counts the wait from the oldest delete waiting, and sends everything on flush', async () => {
    // Prepare
    let now = 0;
    const { queue, requests } = recordingQueue();
    const batch = createDeleteBatch({ queue, flushMs: 5_000, clock: () => now });
    // Act
    batch.add(message(1));
    now = 3_000;
    batch.add(message(2));
    now = 5_000;
    await batch.flushIfDue();
    batch.add(message(3));
    await batch.flush();
    await batch.flush();
    // Assess: the first two went when the first was due; the third on flush; nothing twice.
    expect(requests.map((r) => r.map((m) => m.receiptHandle))).toEqual([
      ['handle-normal-1', 'handle-normal-2'],
      ['handle-normal-3'],
    ]);
  });

  it('counts what SQS refused or could not take, and never throws', async () => {
    // Prepare
    const refusing = recordingQueue({ fail: (m) => m.receiptHandle.endsWith('-2') });
    const down = recordingQueue({ down: true });
    const some = createDeleteBatch({ queue: refusing.queue });
    const none = createDeleteBatch({ queue: down.queue });
    // Act
    for (let n = 0; n < 4; n++) {
      some.add(message(n));
      none.add(message(n));
    }
    await some.flush();
    await none.flush();
    // Assess
    expect(some.stats).toEqual({ requests: 1, deleted: 3, failed: 1 });
    expect(none.stats).toEqual({ requests: 1, deleted: 0, failed: 4 });
  });

  it('waits on flush for the full batches already sent', async () => {
    // Prepare: a queue that answers only when released.
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let answered = 0;
    const queue: ManyDeleter = {
      async acknowledgeMany(messages) {
        await gate;
        answered += messages.length;
        return { failed: 0, requests: 1 };
      },
    };
    const batch = createDeleteBatch({ queue });
    for (let n = 0; n < 10; n++) batch.add(message(n));
    // Act
    const flushed = batch.flush().then(() => answered);
    release();
    // Assess
    expect(await flushed).toBe(10);
  });
});
