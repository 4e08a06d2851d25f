/**
 * The consumer's side of the task queues (SQS): dead-lettering refused messages with their
 * reason, and changing a delivered message's visibility (lease waits and retry backoff).
 */
import {
  ChangeMessageVisibilityCommand,
  GetQueueUrlCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { DeadLetter, DeliveredMessage, TaskQueue } from '../core/ports.js';

/** SQS allows a visibility timeout of at most 12 hours. */
export const MAX_VISIBILITY_SECONDS = 43_200;
/** Message attribute values are capped by the 256 KiB message limit; keep the detail short. */
const MAX_DETAIL_CHARS = 1024;

/** A queue call failed; carries the task id when known. */
export class TaskQueueError extends Error {
  override readonly name = 'TaskQueueError';
  constructor(
    message: string,
    readonly taskId: string | undefined,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
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
    const attributes: Record<string, { DataType: 'String'; StringValue: string }> = {
      reason: { DataType: 'String', StringValue: letter.reason },
      reasonDetail: {
        DataType: 'String',
        StringValue: letter.reasonDetail.slice(0, MAX_DETAIL_CHARS) || letter.reason,
      },
      sourceQueue: { DataType: 'String', StringValue: letter.sourceQueue },
    };
    if (letter.taskId !== undefined) attributes.taskId = { DataType: 'String', StringValue: letter.taskId };
    try {
      await this.sqs.send(
        new SendMessageCommand({ QueueUrl: this.dlqUrl, MessageBody: letter.body, MessageAttributes: attributes }),
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

  private async urlOf(arn: string): Promise<string> {
    const name = queueNameOf(arn);
    const known = this.urlsByName.get(name);
    if (known !== undefined) return known;
    const account = arn.split(':')[4];
    const found = await this.sqs.send(
      new GetQueueUrlCommand({ QueueName: name, ...(account ? { QueueOwnerAWSAccountId: account } : {}) }),
    );
    if (!found.QueueUrl) throw new TaskQueueError(`queue ${name} has no URL`, undefined);
    this.urlsByName.set(name, found.QueueUrl);
    return found.QueueUrl;
  }
}
