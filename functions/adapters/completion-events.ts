/**
 * CompletionEvents for AWS (EventBridge PutEvents) and for the local runtime (an in-process
 * stream). Publishing happens after the terminal record is written, so a result is never lost
 * by a failed publish; which delivery publishes (once where two meet) is the consumer's
 * (functions/consumer/announce.ts). A publish that still fails after retries is counted and
 * logged, and readers fall back to the results table.
 */
import { EventEmitter } from 'node:events';
import { type EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { sleep as wait } from '../core/helpers/time.js';
import { METRICS } from '../core/metric-names.js';
import type { CompletionEvents, ResultsRepository } from '../core/ports.js';
import type { Redactor } from '../core/redaction.js';
import { type Metrics, MetricUnit } from './metrics.js';
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

/** What announcing a terminal record needs. */
export interface AnnounceDeps {
  events: CompletionEvents | undefined;
  repository: Pick<ResultsRepository, 'markAnnounced'>;
  metrics: Metrics;
  redactor: Redactor;
  clock: () => number;
  log: { warn(message: string, attributes?: Record<string, unknown>): void };
}

/**
 * Announce a terminal record at least once: publish its completion event (its error text
 * redacted once more), then (unless `note` is false) note on the record that it went out
 * (`announcedAt`), so a redelivery stays silent. True when the event went out (or there is no events port); false
 * when it could not be published (the caller has the message delivered again to publish it).
 */
export async function announceResult(
  deps: AnnounceDeps,
  result: TaskResult,
  options: { note?: boolean } = {},
): Promise<boolean> {
  const { events } = deps;
  if (events === undefined) return true;
  // The answer goes to the port, which decides whether events carry it (`eventsIncludeAnswer`).
  const { claimToken: _claimToken, leaseUntil: _leaseUntil, completedBy: _completedBy, ...published } = result;
  const clean: TaskResult = {
    ...published,
    ...(published.errorCode !== undefined ? { errorCode: deps.redactor.redact(published.errorCode) } : {}),
    ...(published.errorMessage !== undefined ? { errorMessage: deps.redactor.redact(published.errorMessage) } : {}),
  };
  try {
    await events.publish(clean);
  } catch (error) {
    deps.metrics.addMetric(METRICS.eventPublishFailures, MetricUnit.Count, 1);
    deps.log.warn('completion event could not be published; the message goes back so a redelivery publishes it', {
      error: describeError(error),
    });
    return false;
  }
  if (options.note === false) return true;
  try {
    await deps.repository.markAnnounced(result.taskId, deps.clock());
  } catch (error) {
    // The event went out; a later duplicate delivery may publish it again, with the same eventId.
    deps.log.warn('completion event published but not noted on the record', { error: describeError(error) });
  }
  return true;
}

function describeError(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
