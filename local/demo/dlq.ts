/**
 * DLQ inspection: read every DLQ message without consuming it, and match them to the run's
 * tasks by id (never by body).
 */
import { ChangeMessageVisibilityBatchCommand, type Message, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { parseRedelivery, REDELIVERY_ATTRIBUTE } from '../../functions/core/redelivery.js';
import type { LocalStack } from '../runtime.js';
import type { DemoItem } from './workload.js';

/**
 * Read every DLQ message without consuming it: receive them all (hidden meanwhile), then make
 * them visible again so they stay for `captcha-fleet redrive` and for inspection.
 */
export async function inspectDlq(stack: LocalStack): Promise<Message[]> {
  const queueUrl = stack.resources.queueUrls.dlq;
  const seen = new Map<string, Message>();
  for (let empty = 0; empty < 2; ) {
    const answer = await stack.observer.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        VisibilityTimeout: 30,
        MessageAttributeNames: ['All'],
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
 */
export function accountDlq(
  messages: readonly Message[],
  items: readonly DemoItem[],
  messageIds: ReadonlyMap<string, string>,
): { ids: Set<string>; byReason: Record<string, number>; foreign: number; duplicates: number } {
  const known = new Set(items.map((item) => item.id));
  const ids = new Set<string>();
  const byReason: Record<string, number> = {};
  let foreign = 0;
  let matched = 0;
  for (const message of messages) {
    const id = dlqTaskId(message, messageIds);
    if (id === undefined || !known.has(id)) {
      foreign++;
      continue;
    }
    matched++;
    ids.add(id);
    // No reason attribute: SQS moved it after maxReceiveCount receives (the consumer never refused it).
    const reason = message.MessageAttributes?.reason?.StringValue ?? 'maxReceiveCount';
    byReason[reason] = (byReason[reason] ?? 0) + 1;
  }
  return { ids, byReason, foreign, duplicates: matched - ids.size };
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
