/** The lanes' queues and the DLQ by their approximate counts (what the watch and the summary read). */
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { LocalStack } from '../runtime.js';

/** One queue's messages, in the words of docs/local.md. */
export interface QueueCount {
  /** Backlog: visible, ready for a delivery. */
  visible: number;
  /** In flight: received and not yet deleted. */
  notVisible: number;
  /** Waiting: delayed, not yet visible. */
  delayed: number;
}

export interface QueueDepths {
  total: number;
  dlq: number;
  normal: QueueCount;
  high: QueueCount;
  /** The last read failed: these are older figures. */
  unread?: boolean;
}

const NO_MESSAGES: QueueCount = { visible: 0, notVisible: 0, delayed: 0 };
/** Before the first read: nothing known, nothing taken as done. */
export const EMPTY_DEPTHS: QueueDepths = { total: 0, dlq: 0, normal: NO_MESSAGES, high: NO_MESSAGES, unread: true };

const messages = (count: QueueCount) => count.visible + count.notVisible + count.delayed;

/** One queue's approximate counts. */
export async function queueCount(sqs: SQSClient, queueUrl: string): Promise<QueueCount> {
  const answer = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
  );
  const a = answer.Attributes ?? {};
  return {
    visible: Number(a.ApproximateNumberOfMessages ?? 0),
    notVisible: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
    delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
  };
}

export async function queueDepths(stack: LocalStack): Promise<QueueDepths> {
  const read = (queueUrl: string) => queueCount(stack.observer.sqs, queueUrl);
  const [normal, high, dlq] = await Promise.all([
    read(stack.resources.queueUrls.normal),
    read(stack.resources.queueUrls.high),
    read(stack.resources.queueUrls.dlq),
  ]);
  return {
    total: messages(normal) + messages(high),
    dlq: messages(dlq),
    normal,
    high,
  };
}
