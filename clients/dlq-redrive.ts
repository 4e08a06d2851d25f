/**
 * Dead-letter queue inspection and redrive. Lists what waits in the DLQ grouped by reason and
 * moves it back to its lane. Messages the consumer refused (malformed JSON, schema violations,
 * unknown methods, oversize) would fail again, so they stay unless asked.
 *
 * Two ways to move, chosen per message by who put it in the DLQ:
 * - SQS's own StartMessageMoveTask moves only messages SQS dead-lettered itself (after
 *   maxReceiveCount receives; they carry the DeadLetterQueueSourceArn system attribute). A message
 *   sent to the DLQ with SendMessage, as the consumer sends its refusals, fails that task with
 *   CouldNotDetermineMessageSource, and the task moves every message in the queue, so it is used
 *   only when every message left in the DLQ is one SQS put there, and only in AWS.
 * - Everything else is copied (SendMessage to the lane, then DeleteMessage): at-least-once, and a
 *   duplicate is harmless because the consumer's claim solves a task once.
 * The report says how many moved by copy (done) and what the native task was started for (it runs
 * on asynchronously: its status is read once, never reported as moved).
 */
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ListMessageMoveTasksCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  StartMessageMoveTaskCommand,
  type Message,
  type MessageAttributeValue,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { parseRedelivery, REDELIVERY_ATTRIBUTE, type Redelivery } from '../functions/core/redelivery.js';

/**
 * Reasons the consumer gives when it refuses a message (see functions/core/task.ts), and
 * ID_CONFLICT (another task holds the id): moved again as they are, they come straight back, so
 * redrive leaves them unless asked (`--include-rejected`).
 */
export const REJECTED_REASONS = [
  'MALFORMED_JSON',
  'SCHEMA_VIOLATION',
  'UNKNOWN_METHOD',
  'TOO_LARGE',
  'ID_CONFLICT',
] as const;
/** Reason given to messages SQS moved after maxReceiveCount receives (they carry none). */
export const EXHAUSTED = 'RECEIVES_EXHAUSTED';

/** Who put a message in the DLQ: SQS after maxReceiveCount receives, or a SendMessage (the consumer's refusals). */
export type DeadLetterOrigin = 'sqs' | 'sent';

export interface DeadLetterEntry {
  messageId: string;
  origin: DeadLetterOrigin;
  receiptHandle: string;
  reason: string;
  reasonDetail: string | undefined;
  taskId: string | undefined;
  lane: 'normal' | 'high';
  body: string;
  /** Whether the body is a JSON task carrying its own top-level id (else its claim was under its message's id). */
  bodyHasId: boolean;
  messageAttributes: Record<string, MessageAttributeValue>;
}

export interface DeadLetterInventory {
  /** ApproximateNumberOfMessages before listing. */
  depth: number;
  /**
   * ApproximateNumberOfMessagesNotVisible before listing: letters another reader holds (a listing
   * or redrive of the last minute, cut short or running beside this one), not listed here.
   */
  hidden: number;
  /** True when the listing stopped at its limit (`max`) with letters left unlisted. */
  cut: boolean;
  entries: DeadLetterEntry[];
  /** Groups by reason (a map with no prototype: a reason is a producer's text, `__proto__` too). */
  byReason: Record<string, { count: number; example: string | undefined; movable: boolean }>;
}

export interface RedriveTarget {
  sqs: Pick<SQSClient, 'send'>;
  dlqUrl: string;
  dlqArn?: string;
  queueUrls: { normal: string; high?: string };
  /** May use StartMessageMoveTask for messages SQS dead-lettered (AWS only; emulators lack it). */
  native: boolean;
}

/** SQS's move task, as started and as first seen (it runs on after the report). */
export interface NativeMove {
  taskHandle: string | undefined;
  /** Messages SQS dead-lettered that the task was started for. */
  messages: number;
  /** ListMessageMoveTasks' status right after the start (RUNNING, COMPLETED, FAILED, …), if read. */
  status: string | undefined;
  /** ApproximateNumberOfMessagesMoved at that moment. */
  movedSoFar: number | undefined;
  failureReason: string | undefined;
}

export interface RedriveReport {
  dryRun: boolean;
  inventory: Omit<DeadLetterInventory, 'entries'>;
  /** Messages copied to their lane and deleted from the DLQ (done). */
  copied: number;
  /** The native move task, when one was started. */
  nativeMove?: NativeMove;
  /** Messages listed that stay in the DLQ (refused ones not asked for). */
  left: number;
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
  const max = options.max ?? DEFAULT_MAX_LETTERS;
  const attributes = await target.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: target.dlqUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  const depth = Number(attributes.Attributes?.ApproximateNumberOfMessages ?? 0);
  const hidden = Number(attributes.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0);
  const entries: DeadLetterEntry[] = [];
  let emptyReceives = 0;
  while (entries.length < max && entries.length < depth && emptyReceives < 2) {
    const received = await target.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: target.dlqUrl,
        // Never past `max`: a letter read is held for the listing's minute.
        MaxNumberOfMessages: Math.min(10, max - entries.length),
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
  // A reason is a letter's attribute: `__proto__` or `constructor` looked up on a plain object hid
  // its letters from the listing (and printed "stays" for letters that then moved).
  const byReason: DeadLetterInventory['byReason'] = Object.create(null);
  for (const entry of entries) {
    const group = Object.hasOwn(byReason, entry.reason)
      ? (byReason[entry.reason] as DeadLetterInventory['byReason'][string])
      : { count: 0, example: entry.reasonDetail, movable: !isRejectedReason(entry.reason) };
    group.count++;
    byReason[entry.reason] = group;
  }
  return { depth, hidden, cut: entries.length >= max && depth > entries.length, entries, byReason };
}

/** Letters one listing reads at most (`max`): a listing holds each for a minute while it decides. */
export const DEFAULT_MAX_LETTERS = 10_000;

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
  const summary = {
    depth: inventory.depth,
    hidden: inventory.hidden,
    cut: inventory.cut,
    byReason: inventory.byReason,
  };
  if (options.dryRun || movable.length === 0) {
    await releaseEntries(target, inventory.entries);
    return { dryRun: options.dryRun, inventory: summary, copied: 0, left: inventory.entries.length };
  }
  const bySqs = movable.filter((entry) => entry.origin === 'sqs');
  // The move task takes every message in the queue: only when all that stays is SQS's own.
  const nativeFits =
    target.native &&
    target.dlqArn !== undefined &&
    bySqs.length > 0 &&
    staying.length === 0 &&
    inventory.entries.length >= inventory.depth;
  const toCopy = nativeFits ? movable.filter((entry) => entry.origin !== 'sqs') : movable;
  const copied = await copyBack(target, toCopy);
  await releaseEntries(target, staying);
  if (!nativeFits) return { dryRun: false, inventory: summary, copied, left: staying.length };
  await releaseEntries(target, bySqs);
  const nativeMove = await startNativeMove(target, target.dlqArn as string, bySqs.length);
  return { dryRun: false, inventory: summary, copied, nativeMove, left: 0 };
}

/** Send each entry to its lane, then delete it from the DLQ. */
async function copyBack(target: RedriveTarget, entries: DeadLetterEntry[]): Promise<number> {
  let copied = 0;
  for (const entry of entries) {
    const queueUrl = entry.lane === 'high' && target.queueUrls.high ? target.queueUrls.high : target.queueUrls.normal;
    await target.sqs.send(
      new SendMessageCommand({
        QueueUrl: queueUrl,
        MessageBody: entry.body,
        MessageAttributes: carriedAttributes(entry, Date.now()),
      }),
    );
    await target.sqs.send(new DeleteMessageCommand({ QueueUrl: target.dlqUrl, ReceiptHandle: entry.receiptHandle }));
    copied++;
  }
  return copied;
}

/** Start SQS's move task back to each message's source queue, and read its status once. */
async function startNativeMove(target: RedriveTarget, dlqArn: string, messages: number): Promise<NativeMove> {
  const started = await target.sqs.send(new StartMessageMoveTaskCommand({ SourceArn: dlqArn }));
  const move: NativeMove = {
    taskHandle: started.TaskHandle,
    messages,
    status: undefined,
    movedSoFar: undefined,
    failureReason: undefined,
  };
  try {
    const listed = await target.sqs.send(new ListMessageMoveTasksCommand({ SourceArn: dlqArn, MaxResults: 1 }));
    const task = listed.Results?.find(
      (result) => result.TaskHandle === undefined || result.TaskHandle === started.TaskHandle,
    );
    move.status = task?.Status;
    move.movedSoFar = task?.ApproximateNumberOfMessagesMoved;
    move.failureReason = task?.FailureReason;
  } catch {
    // The task runs whether or not its status could be read; the report then says "unknown".
  }
  return move;
}

/** What a redrive did, for people: copies as done, the native task as started (never as moved). */
export function describeRedrive(report: RedriveReport): string[] {
  const unlisted = report.inventory.cut
    ? [
        `listed ${listedOf(report)} of about ${report.inventory.depth} (one run lists at most ${DEFAULT_MAX_LETTERS}); run it again for the rest`,
      ]
    : [];
  if (report.dryRun) return [...unlisted, 'dry run: nothing moved'];
  const left = report.left + (report.inventory.cut ? Math.max(0, report.inventory.depth - listedOf(report)) : 0);
  const lines = [
    ...unlisted,
    `copied ${report.copied} back to their lanes (copy + delete); ${report.inventory.cut ? 'about ' : ''}${left} left in the DLQ`,
  ];
  const move = report.nativeMove;
  if (move === undefined) return lines;
  const seen =
    move.status === undefined
      ? 'status unknown'
      : `status ${move.status}${move.movedSoFar !== undefined ? `, ${move.movedSoFar} moved so far` : ''}${move.failureReason ? ` (${move.failureReason})` : ''}`;
  lines.push(
    `SQS move task started for ${move.messages} message(s) SQS dead-lettered itself (task ${move.taskHandle ?? 'unknown'}): ${seen}; follow it with \`aws sqs list-message-move-tasks\``,
  );
  return lines;
}

/** Letters a listing counted: the groups' sum. */
function listedOf(report: RedriveReport): number {
  return Object.values(report.inventory.byReason).reduce((sum, group) => sum + group.count, 0);
}

function toEntry(message: Message): DeadLetterEntry {
  const attributes = message.MessageAttributes ?? {};
  // SQS stamps the messages it dead-letters itself; a SendMessage leaves no such attribute.
  const origin: DeadLetterOrigin = message.Attributes?.DeadLetterQueueSourceArn !== undefined ? 'sqs' : 'sent';
  // SQS dead-lettered it after its receives: whatever `reason` it carries is the producer's own attribute.
  const reason = origin === 'sqs' ? EXHAUSTED : (attributes.reason?.StringValue ?? EXHAUSTED);
  const body = message.Body ?? '';
  const head = bodyHead(body);
  const source = message.Attributes?.DeadLetterQueueSourceArn ?? attributes.sourceQueue?.StringValue ?? '';
  return {
    messageId: message.MessageId ?? '',
    origin,
    receiptHandle: message.ReceiptHandle ?? '',
    reason,
    reasonDetail: attributes.reasonDetail?.StringValue,
    // The consumer names a letter's task; a message SQS moved (no reason of the consumer's) is the
    // task it was, whose id, when its body has none, is the message's own.
    taskId:
      attributes.taskId?.StringValue ??
      (origin === 'sqs' || attributes.reason === undefined ? message.MessageId : undefined),
    lane: source.endsWith('-high') || head.priority === 'high' ? 'high' : 'normal',
    body,
    bodyHasId: head.id !== undefined,
    messageAttributes: attributes,
  };
}

/** A body's top-level priority and id, read once (undefined where it is not JSON or has none). */
function bodyHead(body: string): { priority: string | undefined; id: unknown } {
  try {
    const parsed = JSON.parse(body) as unknown;
    if (typeof parsed !== 'object' || parsed === null) return { priority: undefined, id: undefined };
    const { priority, id } = parsed as { priority?: unknown; id?: unknown };
    return { priority: typeof priority === 'string' ? priority : undefined, id };
  } catch {
    return { priority: undefined, id: undefined };
  }
}

/**
 * The refusal's own attributes stay behind; anything the producer set travels back. A task whose
 * body has no id was claimed under its first message's id, which a copy would change (a new task:
 * the producer waiting on the old id never heard, a paid submission was made again): the copy
 * carries the fleet's redelivery attribute with that id, as the consumer's own copies do, unless
 * the letter has one.
 */
function carriedAttributes(entry: DeadLetterEntry, now: number): Record<string, MessageAttributeValue> | undefined {
  const kept = Object.entries(entry.messageAttributes).filter(
    ([name]) => !['reason', 'reasonDetail', 'sourceQueue', 'taskId'].includes(name),
  );
  const out: Record<string, MessageAttributeValue> = Object.fromEntries(
    kept.map(([name, value]) => [
      name,
      { DataType: value.DataType, StringValue: value.StringValue, BinaryValue: value.BinaryValue },
    ]),
  );
  if (!Object.hasOwn(out, REDELIVERY_ATTRIBUTE) && entry.taskId !== undefined && !entry.bodyHasId) {
    const identity: Redelivery = {
      v: 1,
      taskId: entry.taskId,
      sentAt: now,
      firstReceivedAt: now,
      generation: 0,
      waits: 0,
    };
    if (parseRedelivery(JSON.stringify(identity)) !== undefined)
      out[REDELIVERY_ATTRIBUTE] = { DataType: 'String', StringValue: JSON.stringify(identity) };
  }
  return Object.keys(out).length === 0 ? undefined : out;
}
