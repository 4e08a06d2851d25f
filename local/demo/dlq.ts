/**
 * DLQ inspection: read every DLQ message without consuming it, and match them to the run's
 * tasks by id (never by body).
 */
import { ChangeMessageVisibilityBatchCommand, type Message, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { parseRedelivery, REDELIVERY_ATTRIBUTE } from '../../functions/core/redelivery.js';
import type { RepeatableLetters } from '../faults/letters.js';
import type { LocalStack } from '../runtime.js';
import type { DemoItem } from './workload.js';

/**
 * Read every DLQ message without consuming it: receive them all (hidden meanwhile), then make
 * them visible again so they stay for `captcha-fleet redrive` and for inspection.
 */
export function inspectDlq(stack: LocalStack): Promise<Message[]> {
  return inspectQueue(stack, stack.resources.queueUrls.dlq);
}

/**
 * Read every visible message of a queue without consuming it (received, then made visible
 * again); messages in flight or delayed are not seen. Each receive counts one, as any receive does.
 */
export async function inspectQueue(stack: LocalStack, queueUrl: string): Promise<Message[]> {
  const seen = new Map<string, Message>();
  for (let empty = 0; empty < 2; ) {
    const answer = await stack.observer.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        VisibilityTimeout: 30,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['ApproximateReceiveCount'],
      }),
    );
    const messages = answer.Messages ?? [];
    if (messages.length === 0) empty++;
    for (const message of messages) seen.set(message.MessageId ?? String(seen.size), message);
  }
  const all = [...seen.values()];
  for (let i = 0; i < all.length; i += 10) {
    await stack.observer.sqs
      .send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: all
            .slice(i, i + 10)
            .map((message, n) => ({ Id: String(n), ReceiptHandle: message.ReceiptHandle, VisibilityTimeout: 0 })),
        }),
      )
      .catch(() => undefined);
  }
  return all;
}

/**
 * The DLQ's messages matched to this run's tasks by id, never by body (a producer adds fields
 * to what it sends, and a body may repeat): the `taskId` attribute of the consumer's own letters,
 * the SQS message id for messages sent raw (a letter names it as `sourceMessageId`; SQS's redrive
 * keeps it), the id the fleet's redelivery attribute names, else the body's own `id`.
 * `duplicates` counts the letters beyond the first of one task; `duplicatesUnexplained` those no
 * repeatable letter explains (`repeatable`, by source message: a send whose answer was lost, or a
 * source message whose delete a crash cut off: local/faults/letters.ts).
 */
export function accountDlq(
  messages: readonly Message[],
  items: readonly DemoItem[],
  messageIds: ReadonlyMap<string, string>,
  repeatable: RepeatableLetters = new Map(),
): {
  ids: Set<string>;
  byReason: Record<string, number>;
  foreign: number;
  duplicates: number;
  duplicatesUnexplained: number;
} {
  const known = new Set(items.map((item) => item.id));
  const letters = new Map<string, { count: number; sources: Set<string> }>();
  const byReason: Record<string, number> = {};
  let foreign = 0;
  for (const message of messages) {
    const id = dlqTaskId(message, messageIds);
    if (id === undefined || !known.has(id)) {
      foreign++;
      continue;
    }
    const task = letters.get(id) ?? { count: 0, sources: new Set<string>() };
    task.count += 1;
    const source = message.MessageAttributes?.sourceMessageId?.StringValue;
    if (source !== undefined) task.sources.add(source);
    letters.set(id, task);
    // No reason attribute: SQS moved it after maxReceiveCount receives (the consumer never refused it).
    const reason = message.MessageAttributes?.reason?.StringValue ?? 'maxReceiveCount';
    byReason[reason] = (byReason[reason] ?? 0) + 1;
  }
  let duplicates = 0;
  let beyond = 0;
  for (const { count, sources } of letters.values()) {
    const explained = [...sources].reduce((sum, source) => sum + (repeatable.get(source) ?? 0), 0);
    duplicates += count - 1;
    beyond += Math.max(0, count - 1 - explained);
  }
  return { ids: new Set(letters.keys()), byReason, foreign, duplicates, duplicatesUnexplained: beyond };
}

/** The task id a DLQ message stands for (see accountDlq). */
export function dlqTaskId(message: Message, messageIds: ReadonlyMap<string, string>): string | undefined {
  const attributes = message.MessageAttributes ?? {};
  const named = attributes.taskId?.StringValue;
  if (named !== undefined) return named;
  const source = attributes.sourceMessageId?.StringValue ?? message.MessageId;
  const sent = source === undefined ? undefined : messageIds.get(source);
  if (sent !== undefined) return sent;
  const redelivered = parseRedelivery(attributes[REDELIVERY_ATTRIBUTE]?.StringValue)?.taskId;
  if (redelivered !== undefined) return redelivered;
  try {
    const id = (JSON.parse(message.Body ?? '') as { id?: unknown } | null)?.id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}
