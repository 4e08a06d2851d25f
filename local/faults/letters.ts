/**
 * The dead letters SQS cannot keep from being sent twice. A letter and its source message's
 * delete are two calls with no transaction between them, and a standard queue's SendMessage takes
 * no idempotency key, so a second letter of one message follows when:
 *
 * - the letter's SendMessage committed while its answer was lost (the fault proxy's lost commits):
 *   the sender, never told, sends it again (the SDK's retry, or the next delivery);
 * - the invocation died after the letter went in and before the source message's delete did: the
 *   message comes back and is refused again.
 *
 * The watch counts both per source message; the demo's accounting judges a second DLQ copy
 * against them (local/demo/accounting.ts), so anything beyond is a defect.
 */
import type { DeadLetter, DeliveredMessage, TaskQueue } from '../../functions/core/ports.js';
import type { InvocationHandle } from '../poller.js';
import type { FaultKind, FaultService } from './plan.js';

/** Source message id → sends of its letter that SQS could not keep from being repeated. */
export type RepeatableLetters = ReadonlyMap<string, number>;

export interface LetterWatch {
  /** The proxy's `onInjected`. */
  onInjected(injected: { service: FaultService; operation: string; kind: FaultKind; body: string }): void;
  /** A letter of the source message went in, from this invocation. */
  sent(source: string, invocation: InvocationHandle | undefined): void;
  /** The source message was deleted. */
  deleted(source: string): void;
  /** The letters sent to `dlqUrl` that may be repeated, by source message id: lost answers and deletes a crash cut off. */
  repeatable(dlqUrl: string): RepeatableLetters;
}

/** A SendMessage body as the SQS JSON protocol carries it (only what is read here). */
interface SendBody {
  QueueUrl?: string;
  MessageAttributes?: Record<string, { StringValue?: string } | undefined>;
}

export function createLetterWatch(): LetterWatch {
  const lost: { queueUrl: string; source: string }[] = [];
  /** Letters sent whose source was not deleted yet, with the invocation that sent them. */
  const undeleted = new Map<string, InvocationHandle[]>();
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
    sent(source, invocation) {
      if (invocation !== undefined) undeleted.set(source, [...(undeleted.get(source) ?? []), invocation]);
    },
    deleted(source) {
      undeleted.delete(source);
    },
    repeatable(dlqUrl) {
      const bySource = new Map<string, number>();
      const add = (source: string) => bySource.set(source, (bySource.get(source) ?? 0) + 1);
      for (const { queueUrl, source } of lost) if (queueUrl === dlqUrl) add(source);
      for (const [source, invocations] of undeleted)
        for (const invocation of invocations) if (invocation.dead) add(source);
      return bySource;
    },
  };
}

/** A task queue that tells the watch of each letter sent and each message deleted (the delete of a letter's source). */
export function watchLetters(
  queue: TaskQueue,
  watch: LetterWatch,
  invocation: () => InvocationHandle | undefined,
): TaskQueue {
  return new Proxy(queue, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (property === 'deadLetter' && typeof value === 'function')
        return async (letter: DeadLetter) => {
          await (value as TaskQueue['deadLetter']).call(target, letter);
          if (letter.sourceMessageId !== undefined) watch.sent(letter.sourceMessageId, invocation());
        };
      if (property === 'acknowledge' && typeof value === 'function')
        return async (message: DeliveredMessage) => {
          await (value as TaskQueue['acknowledge']).call(target, message);
          if (message.messageId !== undefined) watch.deleted(message.messageId);
        };
      return value;
    },
  });
}
