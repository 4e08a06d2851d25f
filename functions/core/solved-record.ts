/**
 * The fields of a solved task's terminal record, from the answer read: one builder for the
 * consumer (which records what it polled) and the governor's parked watch (which records a parked
 * task's answer once it is ready), so both write the same record. Pure.
 */
import type { SolverProvider } from './provider.js';
import type { TaskResult } from './results.js';
import { METHOD_KIND, type SolverMethod, TOKEN_TTL_MS } from './solver-protocol.js';

/** What the record keeps of a read answer. */
export interface ReadAnswer {
  answer: string;
  solverId: string;
  /** Epoch ms the solver accepted the submission, and the answer was read. */
  acceptedAt: number;
  answeredAt: number;
  /** Whose submission answered. */
  provider: SolverProvider;
  costUsd?: number;
  costSource?: 'provider' | 'configured';
}

/** The record's fields before the answer: what the claim wrote about the task. */
export type RecordBase = Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt' | 'status'>;

/**
 * The terminal fields of a solved task. A token's expiry counts from `issuedNoLaterThan` (the
 * latest it can have been issued: the read itself when it came within a poll of the answer,
 * earlier when the answer may have waited), so it is never later than the truth.
 */
export function solvedFields(
  base: RecordBase,
  read: ReadAnswer,
  completedAt: number,
  issuedNoLaterThan: number = read.answeredAt,
): Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'> & { status: 'solved'; solveMs: number } {
  const method = base.method as SolverMethod;
  const ttl = METHOD_KIND[method] === 'token' ? TOKEN_TTL_MS[method] : undefined;
  const tokenExpiresAt = ttl === undefined ? undefined : issuedNoLaterThan + ttl;
  return {
    ...base,
    // Who solved it: the provider whose submission answered (a resume at the other lane's provider names it).
    provider: read.provider,
    solverProvider: read.provider,
    status: 'solved',
    answer: read.answer,
    solverId: read.solverId,
    completedAt,
    solveMs: Math.max(0, read.answeredAt - read.acceptedAt),
    ...(tokenExpiresAt !== undefined ? { tokenExpiresAt } : {}),
    ...(read.costUsd !== undefined ? { costUsd: read.costUsd, costSource: read.costSource } : {}),
  };
}

/** Whether a token answer was already past its expiry when it was recorded. */
export function recordedStale(fields: Pick<TaskResult, 'tokenExpiresAt' | 'completedAt'>): boolean {
  return (
    fields.tokenExpiresAt !== undefined &&
    fields.completedAt !== undefined &&
    fields.completedAt >= fields.tokenExpiresAt
  );
}
