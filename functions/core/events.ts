/**
 * Completion events: one per terminal result (solved, failed, rejected), schema version 1.
 * Pure: builds the event from a result record. The answer travels only when configured,
 * because a token is a credential.
 */
import type { SolverProvider } from './provider.js';
import type { TaskResult } from './results.js';

// The event's `source` is the fleet's own (settings.eventSource, `captcha-fleet.<prefix>`), so two
// fleets' events stay apart even when routed to one target.
export const COMPLETION_EVENT_DETAIL_TYPE = 'CAPTCHA Task Completed';

export interface CompletionEvent {
  version: 1;
  id: string;
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
    ...(options.includeAnswer && result.answer !== undefined ? { answer: result.answer } : {}),
  };
}

/** Whether a token answer is past its expiry at `now`. Image answers never go stale. */
export function isStale(result: Pick<TaskResult, 'status' | 'tokenExpiresAt'>, now: number): boolean {
  return result.status === 'solved' && result.tokenExpiresAt !== undefined && now >= result.tokenExpiresAt;
}
