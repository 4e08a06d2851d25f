/** The demo's sender: valid tasks through the producer client, malformed ones raw, at a rate, with retries. */
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { sleep } from '../../functions/core/helpers/time.js';
import type { TaskMessage } from '../../functions/core/task.js';
import type { LocalStack } from '../runtime.js';
import type { WatchedRun } from './summary.js';
import type { DemoItem } from './workload.js';

/** Send valid tasks through the producer client and malformed ones raw, at the rate asked. Never throws. */
export async function sendWorkload(
  stack: LocalStack,
  items: readonly DemoItem[],
  rate: number,
  deadline: number,
  signal: AbortSignal | undefined,
  run: WatchedRun,
): Promise<void> {
  const started = Date.now();
  const sent = (batch: readonly DemoItem[]) => {
    run.submitted += batch.length;
    for (const item of batch) run.sentIds.add(item.id);
  };
  let next = 0;
  while (next < items.length) {
    if (signal?.aborted || Date.now() >= deadline) return;
    // In a burst everything is due at once; at a rate, what the clock says is due.
    const due =
      rate > 0 ? Math.min(items.length, Math.floor(((Date.now() - started) / 1000) * rate) + 1) : items.length;
    const batch = items.slice(next, due);
    next = due;
    const valid = batch.filter((item) => item.malformed === undefined);
    // Ten at a time (one SendMessageBatch each) so the progress line sees them go.
    for (let i = 0; i < valid.length; i += 10) {
      const chunk = valid.slice(i, i + 10);
      const done = await withRetries(
        () => stack.producer.submit(chunk.map((item) => JSON.parse(item.body) as TaskMessage)),
        SEND_TRIES,
      );
      if (done) sent(chunk);
      else for (const item of chunk) run.unsent.add(item.id);
    }
    for (const item of batch.filter((candidate) => candidate.malformed !== undefined)) {
      // Straight to SQS: the producer client would refuse it, which is its job. The message id
      // is what the DLQ is matched by.
      const answer = await withRetries(
        () =>
          stack.observer.sqs.send(
            new SendMessageCommand({ QueueUrl: stack.resources.queueUrls.normal, MessageBody: item.body }),
          ),
        SEND_TRIES,
      );
      if (answer?.MessageId !== undefined) run.messageIds.set(answer.MessageId, item.id);
      if (answer !== undefined) sent([item]);
      else run.unsent.add(item.id);
    }
    if (next < items.length) await sleep(Math.max(10, Math.min(100, 1000 / rate)));
  }
}

/**
 * A call tried again (0.2 s, 0.4 s, … at most 2 s apart) while it fails, `tries` times: a resend
 * of a task is safe (its id makes it a duplicate), and a producer keeps its tasks through a
 * queue's bad minute. Undefined when it still fails.
 */
export async function withRetries<T>(call: () => Promise<T>, tries = 5): Promise<T | undefined> {
  for (let attempt = 0; attempt < tries; attempt++) {
    try {
      return await call();
    } catch {
      if (attempt < tries - 1) await sleep(Math.min(2_000, 200 * 2 ** attempt));
    }
  }
  return undefined;
}

/** Tries of one send: about four minutes at 2 s apart, longer than the fault plans' SQS outages. */
const SEND_TRIES = 120;
