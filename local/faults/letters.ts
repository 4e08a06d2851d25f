/**
 * The dead letters whose send lost its answer: a SendMessage to the DLQ that SQS committed while
 * the fault proxy reset its connection. The sender cannot know the letter went in, so it sends it
 * again (the SDK's retry, or the next delivery): SQS standard queues have no idempotency key, and
 * such a letter is in the DLQ twice. The accounting counts them per source message, so a second
 * DLQ copy is judged against what SQS itself allows (local/demo/accounting.ts).
 */
import type { FaultKind, FaultService } from './plan.js';

/** Source message id → DLQ sends of its letter whose answer was lost. */
export type LostLetterAnswers = ReadonlyMap<string, number>;

export interface LetterWatch {
  /** The proxy's `onInjected`. */
  onInjected(injected: { service: FaultService; operation: string; kind: FaultKind; body: string }): void;
  /** The letters sent to `dlqUrl` whose answer was lost, by source message id. */
  lostAnswers(dlqUrl: string): LostLetterAnswers;
}

/** A SendMessage body as the SQS JSON protocol carries it (only what is read here). */
interface SendBody {
  QueueUrl?: string;
  MessageAttributes?: Record<string, { StringValue?: string } | undefined>;
}

export function createLetterWatch(): LetterWatch {
  const lost: { queueUrl: string; source: string }[] = [];
  return {
    onInjected({ service, operation, kind, body }) {
      if (service !== 'sqs' || operation !== 'SendMessage' || kind !== 'lost_commit') return;
      let send: SendBody;
      try {
        send = JSON.parse(body) as SendBody;
      } catch {
        return;
      }
      const source = send.MessageAttributes?.sourceMessageId?.StringValue;
      if (send.QueueUrl !== undefined && source !== undefined) lost.push({ queueUrl: send.QueueUrl, source });
    },
    lostAnswers(dlqUrl) {
      const bySource = new Map<string, number>();
      for (const { queueUrl, source } of lost)
        if (queueUrl === dlqUrl) bySource.set(source, (bySource.get(source) ?? 0) + 1);
      return bySource;
    },
  };
}
