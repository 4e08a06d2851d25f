/**
 * CompletionEvents for AWS (EventBridge PutEvents) and for the local runtime (an in-process
 * stream). Publishing happens after the terminal record is written by the delivery that owns
 * the claim, so a result is never lost by a failed publish and never published twice by two
 * deliveries; a publish that still fails after retries is counted and logged, and readers fall
 * back to the results table.
 */
import { EventEmitter } from 'node:events';
import { type EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { sleep as wait } from '../core/helpers/time.js';
import type { CompletionEvents } from '../core/ports.js';
import type { TaskResult } from '../core/results.js';
import { COMPLETION_EVENT_DETAIL_TYPE, toCompletionEvent, type CompletionEvent } from '../core/events.js';

/** Thrown when EventBridge refused the event after every attempt. */
export class EventPublishError extends Error {
  override readonly name = 'EventPublishError';
  constructor(
    readonly taskId: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export interface EventBridgePublisherOptions {
  client: Pick<EventBridgeClient, 'send'>;
  busName: string;
  /** The fleet's event source (settings.eventSource): the bus policy admits no other. */
  source: string;
  includeAnswer: boolean;
  attempts?: number;
  /** Backoff between attempts, ms (doubles each time). */
  backoffMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

export function createEventBridgePublisher(options: EventBridgePublisherOptions): CompletionEvents {
  const attempts = options.attempts ?? 3;
  const sleep = options.sleep ?? wait;
  return {
    async publish(result: TaskResult) {
      const event = toCompletionEvent(result, { includeAnswer: options.includeAnswer });
      let lastProblem = 'no attempt made';
      for (let attempt = 1; attempt <= attempts; attempt++) {
        try {
          const response = await options.client.send(
            new PutEventsCommand({
              Entries: [
                {
                  EventBusName: options.busName,
                  Source: options.source,
                  DetailType: COMPLETION_EVENT_DETAIL_TYPE,
                  Detail: JSON.stringify(event),
                  Resources: [],
                },
              ],
            }),
          );
          if ((response.FailedEntryCount ?? 0) === 0) return;
          const entry = response.Entries?.[0];
          lastProblem = `${entry?.ErrorCode ?? 'failed entry'}: ${entry?.ErrorMessage ?? ''}`.trim();
        } catch (error) {
          lastProblem = (error as Error).name;
        }
        if (attempt < attempts) await sleep((options.backoffMs ?? 100) * 2 ** (attempt - 1));
      }
      throw new EventPublishError(
        result.taskId,
        `completion event for task ${result.taskId} not published after ${attempts} attempts (${lastProblem})`,
      );
    },
  };
}

/** The local runtime's event stream: the same events, delivered in-process. */
export interface LocalEventStream extends CompletionEvents {
  subscribe(listener: (event: CompletionEvent) => void): () => void;
  /** Resolves with the task's event, or undefined when `timeoutMs` passes first. */
  waitFor(taskId: string, timeoutMs: number): Promise<CompletionEvent | undefined>;
  readonly published: number;
}

export function createLocalEventStream(options: { includeAnswer: boolean }): LocalEventStream {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  let published = 0;
  return {
    async publish(result: TaskResult) {
      const event = toCompletionEvent(result, options);
      published++;
      emitter.emit('event', event);
      emitter.emit(`task:${event.id}`, event);
    },
    subscribe(listener) {
      emitter.on('event', listener);
      return () => emitter.off('event', listener);
    },
    waitFor(taskId, timeoutMs) {
      return new Promise((resolve) => {
        const onEvent = (event: CompletionEvent) => {
          clearTimeout(timer);
          resolve(event);
        };
        const timer = setTimeout(() => {
          emitter.off(`task:${taskId}`, onEvent);
          resolve(undefined);
        }, timeoutMs);
        emitter.once(`task:${taskId}`, onEvent);
      });
    },
    get published() {
      return published;
    },
  };
}
