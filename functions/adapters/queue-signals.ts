/**
 * Queue signals: GetQueueAttributes on each lane's queue, every tick (fresher than CloudWatch's
 * SQS metrics). A failed read yields undefined fields (missing, never zero), so the policy holds.
 */
import { GetQueueAttributesCommand, type QueueAttributeName, type SQSClient } from '@aws-sdk/client-sqs';
import type { Clock } from '../core/ports.js';
import type { QueueReading } from '../core/governor/signals.js';

/** Attributes read every tick. The age of the oldest message is not among them in SQS: it is a CloudWatch metric. */
export const QUEUE_SIGNAL_ATTRIBUTES: QueueAttributeName[] = [
  'ApproximateNumberOfMessages',
  'ApproximateNumberOfMessagesNotVisible',
  'ApproximateNumberOfMessagesDelayed',
];

export interface QueueSignalsOptions {
  sqs: SQSClient;
  queueUrls: { normal: string; high?: string | undefined };
  clock?: Clock;
  /** Receives read failures (the reading is then undefined). */
  onError?: (lane: 'normal' | 'high', error: unknown) => void;
}

export interface QueueSignals {
  /** Read every lane's queue in parallel. */
  read(): Promise<{ normal: QueueReading; high?: QueueReading }>;
}

function count(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

/** Build the queue reader. */
export function createQueueSignals(options: QueueSignalsOptions): QueueSignals {
  const clock = options.clock ?? Date.now;
  const readOne = async (lane: 'normal' | 'high', url: string): Promise<QueueReading> => {
    try {
      const out = await options.sqs.send(
        new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: QUEUE_SIGNAL_ATTRIBUTES }),
      );
      const a = out.Attributes ?? {};
      return {
        at: clock(),
        visible: count(a.ApproximateNumberOfMessages),
        notVisible: count(a.ApproximateNumberOfMessagesNotVisible),
        delayed: count(a.ApproximateNumberOfMessagesDelayed),
      };
    } catch (error) {
      options.onError?.(lane, error);
      return { at: clock(), visible: undefined, notVisible: undefined, delayed: undefined };
    }
  };
  return {
    async read() {
      const high = options.queueUrls.high;
      const [normal, highReading] = await Promise.all([
        readOne('normal', options.queueUrls.normal),
        high ? readOne('high', high) : Promise.resolve(undefined),
      ]);
      return highReading ? { normal, high: highReading } : { normal };
    },
  };
}
