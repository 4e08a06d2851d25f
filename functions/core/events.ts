/**
 * Completion events: one per terminal result (solved, failed, rejected), schema version 1.
 * Pure: builds the event from a result record. The answer travels only when configured,
 * because a token is a credential.
 */
import { createHash } from 'node:crypto';
import type { SolverProvider } from './provider.js';
import type { TaskResult } from './results.js';

// The event's `source` is the fleet's own (settings.eventSource, `captcha-fleet.<prefix>`), so two
// fleets' events stay apart even when routed to one target.
export const COMPLETION_EVENT_DETAIL_TYPE = 'CAPTCHA Task Completed';

export interface CompletionEvent {
  version: 1;
  /** The task id. */
  id: string;
  /**
   * The event's own id, the same on every publish of one terminal record (the fleet announces at
   * least once: a redelivery re-publishes when the first publish may not have gone out), so a
   * subscriber drops duplicates by it. Added within version 1.
   */
  eventId: string;
  status: 'solved' | 'failed' | 'rejected';
  method: string | undefined;
  priority: 'normal' | 'high' | undefined;
  errorCode: string | undefined;
  attempts: number;
  /** Whose consumer wrote the result: `primary` (the plan) or `overflow`; absent on `rejected`. Added within version 1. */
  provider: SolverProvider | undefined;
  /** Epoch ms. */
  submittedAt: number | undefined;
  startedAt: number | undefined;
  completedAt: number | undefined;
  queueWaitMs: number | undefined;
  solveMs: number | undefined;
  endToEndMs: number | undefined;
  /** When a token answer stops being usable, epoch ms. */
  tokenExpiresAt: number | undefined;
  /**
   * What the solve cost, USD (the provider's figure or the configured price: `costSource`); absent
   * when unknown and on failed and rejected tasks. Added within version 1.
   */
  costUsd: number | undefined;
  costSource: 'provider' | 'configured' | undefined;
  /** Present only when the fleet is configured to publish answers. */
  answer?: string;
}

export function toCompletionEvent(result: TaskResult, options: { includeAnswer: boolean }): CompletionEvent {
  if (result.status === 'solving') throw new Error(`task ${result.taskId} is not terminal`);
  const endToEndMs =
    result.completedAt !== undefined && result.submittedAt !== undefined
      ? Math.max(0, result.completedAt - result.submittedAt)
      : undefined;
  return {
    version: 1,
    id: result.taskId,
    eventId: eventIdOf(result),
    status: result.status,
    method: result.method,
    priority: result.priority,
    errorCode: result.errorCode,
    attempts: result.attempts,
    provider: result.provider,
    submittedAt: result.submittedAt,
    startedAt: result.startedAt,
    completedAt: result.completedAt,
    queueWaitMs: result.queueWaitMs,
    solveMs: result.solveMs,
    endToEndMs,
    tokenExpiresAt: result.tokenExpiresAt,
    costUsd: result.costUsd,
    costSource: result.costSource,
    ...(options.includeAnswer && result.answer !== undefined ? { answer: result.answer } : {}),
  };
}

/**
 * The event id of a terminal record: a digest of the task id, the status and the completion time,
 * which every publish of that record shares and a later task under the same id (after the TTL)
 * does not.
 */
export function eventIdOf(result: Pick<TaskResult, 'taskId' | 'status' | 'completedAt'>): string {
  return createHash('sha256')
    .update(JSON.stringify([result.taskId, result.status, result.completedAt ?? null]))
    .digest('hex')
    .slice(0, 32);
}

/** Whether a token answer is past its expiry at `now`. Image answers never go stale. */
export function isStale(result: Pick<TaskResult, 'status' | 'tokenExpiresAt'>, now: number): boolean {
  return result.status === 'solved' && result.tokenExpiresAt !== undefined && now >= result.tokenExpiresAt;
}
