/**
 * The consumer's side of the task queues (SQS): dead-lettering refused messages with their
 * reason, changing a delivered message's visibility (lease waits and retry backoff), deleting a
 * message whose work is done, and putting a fresh copy of a message in its place.
 */
import {
  ChangeMessageVisibilityCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  GetQueueUrlCommand,
  type MessageAttributeValue,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import {
  type DeadLetter,
  type DeliveredMessage,
  type MessageAttribute,
  type MessageCopy,
  StoreError,
  type StoreFailureKind,
  type TaskQueue,
} from '../core/ports.js';
import { SQS_BATCH_ENTRIES, SQS_MESSAGE_LIMIT_BYTES } from '../core/task.js';
import { storeFailureKind } from './store-failure.js';

/** SQS allows a visibility timeout of at most 12 hours. */
export const MAX_VISIBILITY_SECONDS = 43_200;
/** SQS allows a message delay of at most 15 minutes. */
export const MAX_DELAY_SECONDS = 900;
/** SQS allows at most 10 attributes on a message. */
const MAX_ATTRIBUTES = 10;
/** The reason detail kept on a dead letter, bytes of UTF-8 (the headroom holds it with the rest). */
const MAX_DETAIL_BYTES = 2_048;

/** A queue call failed; carries the task id when known and what the failure means (`kind`). */
export class TaskQueueError extends StoreError {
  override name = 'TaskQueueError';
  constructor(message: string, taskId: string | undefined, options: { cause?: unknown; kind?: StoreFailureKind } = {}) {
    super(
      message,
      'sqs',
      options.kind ?? (options.cause === undefined ? 'unavailable' : storeFailureKind(options.cause)),
      taskId,
      options.cause === undefined ? {} : { cause: options.cause },
    );
  }
}

export interface SqsTaskQueueOptions {
  sqs: SQSClient;
  dlqUrl: string;
  /** URLs of the queues the consumer reads, so an event's ARN maps to a URL without a call. */
  sourceQueueUrls: readonly string[];
}

/** Name of a queue from its ARN (`arn:aws:sqs:region:account:name`) or URL (`…/account/name`). */
export function queueNameOf(arnOrUrl: string): string {
  const separator = arnOrUrl.startsWith('arn:') ? ':' : '/';
  return arnOrUrl.slice(arnOrUrl.lastIndexOf(separator) + 1);
}

type Attributes = Record<string, MessageAttributeValue>;

/** Bytes SQS counts for a message: the body, and each attribute's name, type and value. */
export function messageBytes(body: string, attributes: Attributes): number {
  let total = Buffer.byteLength(body);
  for (const [name, value] of Object.entries(attributes)) {
    total += Buffer.byteLength(name) + Buffer.byteLength(value.DataType ?? '');
    if (value.StringValue !== undefined) total += Buffer.byteLength(value.StringValue);
    if (value.BinaryValue !== undefined) total += value.BinaryValue.byteLength;
  }
  return total;
}

/** A string cut to at most `bytes` of UTF-8, never inside a character. */
function cutToBytes(text: string, bytes: number): string {
  if (Buffer.byteLength(text) <= bytes) return text;
  let out = Buffer.from(text).subarray(0, Math.max(0, bytes)).toString('utf8');
  // A cut multi-byte character decodes as U+FFFD: drop it.
  while (out.endsWith('\uFFFD')) out = out.slice(0, -1);
  return out;
}

const text = (value: string): MessageAttributeValue => ({ DataType: 'String', StringValue: value });

/**
 * A dead letter's attributes, fitted to the DLQ's limit with the body: the detail is cut first,
 * then the optional attributes go, the reason last. The lanes accept DEAD_LETTER_HEADROOM_BYTES
 * less than SQS's limit, so on the fleet's own queues everything fits.
 */
export function deadLetterAttributes(letter: DeadLetter, limit = SQS_MESSAGE_LIMIT_BYTES): Attributes {
  const attributes: Attributes = {
    reason: text(letter.reason),
    reasonDetail: text(cutToBytes(letter.reasonDetail, MAX_DETAIL_BYTES) || letter.reason),
    sourceQueue: text(letter.sourceQueue),
    ...(letter.taskId !== undefined ? { taskId: text(letter.taskId) } : {}),
    ...(letter.sourceMessageId !== undefined ? { sourceMessageId: text(letter.sourceMessageId) } : {}),
  };
  const over = () => messageBytes(letter.body, attributes) - limit;
  if (over() > 0) {
    const detail = attributes.reasonDetail?.StringValue ?? '';
    attributes.reasonDetail = text(cutToBytes(detail, Math.max(1, Buffer.byteLength(detail) - over())) || '-');
  }
  for (const name of ['reasonDetail', 'sourceQueue', 'sourceMessageId', 'taskId', 'reason'])
    if (over() > 0) delete attributes[name];
  return attributes;
}

/** A Lambda-shaped attribute (binary as base64) in SQS's shape. */
function toSqsAttribute(attribute: MessageAttribute): MessageAttributeValue {
  return {
    DataType: attribute.dataType,
    ...(attribute.stringValue !== undefined ? { StringValue: attribute.stringValue } : {}),
    ...(attribute.binaryValue !== undefined ? { BinaryValue: Buffer.from(attribute.binaryValue, 'base64') } : {}),
  };
}

/** SQS implementation of {@link TaskQueue}. */
export class SqsTaskQueue implements TaskQueue {
  private readonly sqs: SQSClient;
  private readonly dlqUrl: string;
  private readonly urlsByName = new Map<string, string>();

  constructor(options: SqsTaskQueueOptions) {
    this.sqs = options.sqs;
    this.dlqUrl = options.dlqUrl;
    for (const url of options.sourceQueueUrls) this.urlsByName.set(queueNameOf(url), url);
  }

  async deadLetter(letter: DeadLetter): Promise<void> {
    try {
      await this.sqs.send(
        new SendMessageCommand({
          QueueUrl: this.dlqUrl,
          MessageBody: letter.body,
          MessageAttributes: deadLetterAttributes(letter),
        }),
      );
    } catch (error) {
      throw new TaskQueueError(`dead-lettering a message (${letter.reason}) failed`, letter.taskId, { cause: error });
    }
  }

  async changeVisibility(message: DeliveredMessage, seconds: number): Promise<void> {
    const queueUrl = await this.urlOf(message.eventSourceArn);
    const visibility = Math.max(0, Math.min(MAX_VISIBILITY_SECONDS, Math.ceil(seconds)));
    try {
      await this.sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: queueUrl,
          ReceiptHandle: message.receiptHandle,
          VisibilityTimeout: visibility,
        }),
      );
    } catch (error) {
      throw new TaskQueueError(`changing the visibility of a message of ${queueNameOf(queueUrl)} failed`, undefined, {
        cause: error,
      });
    }
  }

  async acknowledge(message: DeliveredMessage): Promise<void> {
    const queueUrl = await this.urlOf(message.eventSourceArn);
    try {
      await this.sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.receiptHandle }));
    } catch (error) {
      throw new TaskQueueError(`deleting a message of ${queueNameOf(queueUrl)} failed`, undefined, { cause: error });
    }
  }

  /**
   * Delete many messages, ten to a DeleteMessageBatch request per queue. Never throws: the count of
   * messages not deleted (a failed request, or an entry SQS refused) is returned, with the requests
   * made; those not deleted come back when their visibility ends.
   */
  async acknowledgeMany(messages: readonly DeliveredMessage[]): Promise<{ failed: number; requests: number }> {
    const byQueue = new Map<string, DeliveredMessage[]>();
    for (const message of messages)
      byQueue.set(message.eventSourceArn, [...(byQueue.get(message.eventSourceArn) ?? []), message]);
    let failed = 0;
    let requests = 0;
    for (const [arn, ofQueue] of byQueue) {
      for (let i = 0; i < ofQueue.length; i += SQS_BATCH_ENTRIES) {
        const chunk = ofQueue.slice(i, i + SQS_BATCH_ENTRIES);
        requests += 1;
        try {
          const out = await this.sqs.send(
            new DeleteMessageBatchCommand({
              QueueUrl: await this.urlOf(arn),
              Entries: chunk.map((message, index) => ({ Id: String(index), ReceiptHandle: message.receiptHandle })),
            }),
          );
          failed += out.Failed?.length ?? 0;
        } catch {
          failed += chunk.length;
        }
      }
    }
    return { failed, requests };
  }

  async requeue(message: DeliveredMessage, copy: MessageCopy): Promise<{ deleted: boolean }> {
    const queueUrl = await this.urlOf(message.eventSourceArn);
    const attributes = Object.fromEntries(
      Object.entries(copy.attributes)
        .slice(0, MAX_ATTRIBUTES)
        .map(([name, attribute]) => [name, toSqsAttribute(attribute)]),
    );
    try {
      await this.sqs.send(
        new SendMessageCommand({
          QueueUrl: queueUrl,
          MessageBody: copy.body,
          MessageAttributes: attributes,
          DelaySeconds: Math.max(0, Math.min(MAX_DELAY_SECONDS, Math.ceil(copy.delaySeconds))),
        }),
      );
    } catch (error) {
      throw new TaskQueueError(`sending a fresh copy of a message of ${queueNameOf(queueUrl)} failed`, undefined, {
        cause: error,
      });
    }
    // The copy is out: the original must go, or it comes back without what the copy carries.
    // One more try after the SDK's own, then the caller hears that two copies are out.
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await this.sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.receiptHandle }));
        return { deleted: true };
      } catch {
        if (attempt === 0) await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    return { deleted: false };
  }

  private async urlOf(arn: string): Promise<string> {
    const name = queueNameOf(arn);
    const known = this.urlsByName.get(name);
    if (known !== undefined) return known;
    const account = arn.split(':')[4];
    let found: { QueueUrl?: string | undefined };
    try {
      found = await this.sqs.send(
        new GetQueueUrlCommand({ QueueName: name, ...(account ? { QueueOwnerAWSAccountId: account } : {}) }),
      );
    } catch (error) {
      throw new TaskQueueError(`the URL of queue ${name} could not be read`, undefined, { cause: error });
    }
    if (!found.QueueUrl) throw new TaskQueueError(`queue ${name} has no URL`, undefined);
    this.urlsByName.set(name, found.QueueUrl);
    return found.QueueUrl;
  }
}
