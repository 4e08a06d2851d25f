/**
 * Dead-letter queue inspection and redrive. Lists what waits in the DLQ grouped by reason and
 * moves it back to its lane. Messages the consumer refused (malformed JSON, schema violations,
 * unknown methods, oversize) would fail again, so they stay unless asked.
 *
 * Two ways to move: SQS's own StartMessageMoveTask (AWS; moves everything back to the queue each
 * message came from) when every message is to be moved, else a copy (SendMessage to the lane,
 * then DeleteMessage): at-least-once, and a duplicate is harmless because the consumer's claim
 * solves a task once.
 */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  StartMessageMoveTaskCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from '@aws-sdk/client-sqs';

/** Reasons the consumer gives when it refuses a message (see functions/core/task.ts). */
export const REJECTED_REASONS = ['MALFORMED_JSON', 'SCHEMA_VIOLATION', 'UNKNOWN_METHOD', 'TOO_LARGE'] as const;
/** Reason given to messages SQS moved after maxReceiveCount receives (they carry none). */
export const EXHAUSTED = 'RECEIVES_EXHAUSTED';

export interface DeadLetterEntry {
  messageId: string;
  receiptHandle: string;
  reason: string;
  reasonDetail: string | undefined;
  taskId: string | undefined;
  lane: 'normal' | 'high';
  body: string;
  messageAttributes: Record<string, MessageAttributeValue>;
}

export interface DeadLetterInventory {
  /** ApproximateNumberOfMessages before listing. */
  depth: number;
  entries: DeadLetterEntry[];
  byReason: Record<string, { count: number; example: string | undefined; movable: boolean }>;
}

export interface RedriveTarget {
  sqs: Pick<SQSClient, 'send'>;
  dlqUrl: string;
  dlqArn?: string;
  queueUrls: { normal: string; high?: string };
  /** Use StartMessageMoveTask when everything moves (AWS only; emulators lack it). */
  native: boolean;
}

export interface RedriveReport {
  dryRun: boolean;
  strategy: 'native' | 'copy' | 'none';
  inventory: Omit<DeadLetterInventory, 'entries'>;
  moved: number;
  left: number;
  /** Native move task handle, when one was started. */
  taskHandle?: string;
}

export function isRejectedReason(reason: string): boolean {
  return (REJECTED_REASONS as readonly string[]).includes(reason);
}

/**
 * Read up to `max` DLQ messages and hide them for `holdSeconds` while the caller decides.
 * Call `releaseEntries` for the ones not moved.
 */
export async function inspectDeadLetters(
  target: RedriveTarget,
  options: { max?: number; holdSeconds?: number } = {},
): Promise<DeadLetterInventory> {
  const max = options.max ?? 10_000;
  const attributes = await target.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: target.dlqUrl, AttributeNames: ['ApproximateNumberOfMessages'] }),
  );
  const depth = Number(attributes.Attributes?.ApproximateNumberOfMessages ?? 0);
  const entries: DeadLetterEntry[] = [];
  let emptyReceives = 0;
  while (entries.length < max && entries.length < depth && emptyReceives < 2) {
    const received = await target.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: target.dlqUrl,
        MaxNumberOfMessages: 10,
        VisibilityTimeout: options.holdSeconds ?? 60,
        WaitTimeSeconds: 0,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    const messages = received.Messages ?? [];
    if (messages.length === 0) emptyReceives++;
    for (const message of messages) entries.push(toEntry(message));
  }
  const byReason: DeadLetterInventory['byReason'] = {};
  for (const entry of entries) {
    const group = (byReason[entry.reason] ??= {
      count: 0,
      example: entry.reasonDetail,
      movable: !isRejectedReason(entry.reason),
    });
    group.count++;
  }
  return { depth, entries, byReason };
}

/** Make listed messages visible again at once. */
export async function releaseEntries(target: RedriveTarget, entries: DeadLetterEntry[]): Promise<void> {
  for (let i = 0; i < entries.length; i += 10) {
    const chunk = entries.slice(i, i + 10);
    await target.sqs.send(
      new ChangeMessageVisibilityBatchCommand({
        QueueUrl: target.dlqUrl,
        Entries: chunk.map((entry, index) => ({
          Id: String(index),
          ReceiptHandle: entry.receiptHandle,
          VisibilityTimeout: 0,
        })),
      }),
    );
  }
}

/** List, then (unless dry run) move back what can succeed on a retry. */
export async function redrive(
  target: RedriveTarget,
  options: { dryRun: boolean; includeRejected: boolean; max?: number },
): Promise<RedriveReport> {
  const inventory = await inspectDeadLetters(target, { max: options.max });
  const movable = inventory.entries.filter((entry) => options.includeRejected || !isRejectedReason(entry.reason));
  const staying = inventory.entries.filter((entry) => !movable.includes(entry));
  const summary = { depth: inventory.depth, byReason: inventory.byReason };
  if (options.dryRun || movable.length === 0) {
    await releaseEntries(target, inventory.entries);
    return { dryRun: options.dryRun, strategy: 'none', inventory: summary, moved: 0, left: inventory.entries.length };
  }
  const everything = staying.length === 0 && inventory.entries.length >= inventory.depth;
  if (target.native && everything && target.dlqArn) {
    await releaseEntries(target, inventory.entries);
    const started = await target.sqs.send(new StartMessageMoveTaskCommand({ SourceArn: target.dlqArn }));
    return {
      dryRun: false,
      strategy: 'native',
      inventory: summary,
      moved: movable.length,
      left: 0,
      taskHandle: started.TaskHandle,
    };
  }
  let moved = 0;
  for (const entry of movable) {
    const queueUrl = entry.lane === 'high' && target.queueUrls.high ? target.queueUrls.high : target.queueUrls.normal;
    await target.sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: entry.body,
        MessageAttributes: carriedAttributes(entry),
      }),
    );
    await target.sqs.send(new DeleteMessageCommand({ QueueUrl: target.dlqUrl, ReceiptHandle: entry.receiptHandle }));
    moved++;
  }
  await releaseEntries(target, staying);
  return { dryRun: false, strategy: 'copy', inventory: summary, moved, left: staying.length };
}

function toEntry(message: Message): DeadLetterEntry {
  const attributes = message.MessageAttributes ?? {};
  const reason = attributes.reason?.StringValue ?? EXHAUSTED;
  const body = message.Body ?? '';
  const source = message.Attributes?.DeadLetterQueueSourceArn ?? attributes.sourceQueue?.StringValue ?? '';
  return {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    reason,
    reasonDetail: attributes.reasonDetail?.StringValue,
    taskId: attributes.taskId?.StringValue,
    lane: source.endsWith('-high') || priorityOf(body) === 'high' ? 'high' : 'normal',
    body,
    messageAttributes: attributes,
  };
}

function priorityOf(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as { priority?: unknown };
    return typeof parsed.priority === 'string' ? parsed.priority : undefined;
  } catch {
    return undefined;
  }
}

/** The refusal's own attributes stay behind; anything the producer set travels back. */
function carriedAttributes(entry: DeadLetterEntry): Record<string, MessageAttributeValue> | undefined {
  const kept = Object.entries(entry.messageAttributes).filter(
    ([name]) => !['reason', 'reasonDetail', 'sourceQueue', 'taskId'].includes(name),
  );
  if (kept.length === 0) return undefined;
  return Object.fromEntries(
    kept.map(([name, value]) => [
      name,
      { DataType: value.DataType, StringValue: value.StringValue, BinaryValue: value.BinaryValue },
    ]),
  );
}
