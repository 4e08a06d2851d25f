/**
 * What the solver client's steps share. `SolverContext` is built once per client (its settings,
 * the HTTP dispatcher, the clock, the redacting logger, and the wire protocol's adapter);
 * `SolveState` once per `solve()` (the task, its deadline and signal, the retries so far).
 * `httpCall` / `jsonCall`, the wires, `submit` and `pollForAnswer` each take both, so no step
 * reaches into another's closure.
 */
import type { Dispatcher } from 'undici';
import { retryBackoffMs, SOLVER_RETRY_DEFAULTS } from '../core/backoff.js';
import type { PollSchedule } from '../core/poll-schedule.js';
import type { Clock, SolveOptions, SolveOutcome, SolverAnswer } from '../core/ports.js';
import {
  type Dialect,
  type SolverError,
  type SolverErrorOptions,
  type SolverMethod,
  type SolverProtocol,
  SolverTimeoutError,
  SolverTransientError,
} from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';

/** An answer as read: its text, what else the provider said (bounded, redacted), what it cost. */
export interface SolvedAnswer {
  answer: string;
  extras: Record<string, string>;
  costUsd?: number;
  costSource?: 'provider' | 'configured';
}

/** One submission's outcome: the solver id (and the answer, when the service gave it at once), or the error. */
export type SubmitOnce = { solverId: string; solved?: SolvedAnswer } | { error: SolverError };
/** One result request's outcome. */
export type PollOnce = { solved: SolvedAnswer } | { notReady: string } | { error: SolverError };

/**
 * A wire protocol: one submission, one result request, the balance, a report. The client's loops
 * (retries, backoff, the poll schedule, the deadline) are the same for every protocol.
 */
export interface SolverWire {
  readonly protocol: SolverProtocol;
  submitOnce(ctx: SolverContext, solve: SolveState, task: Task): Promise<SubmitOnce>;
  pollOnce(ctx: SolverContext, solve: SolveState, task: Task, solverId: string): Promise<PollOnce>;
  /**
   * Whether the provider answers this task in the submission's own response (CapSolver's image
   * tasks): the request then lasts the recognition, and one cut short after the provider accepted
   * it is paid with its id never known. Absent: every submission is answered at once.
   */
  answersInSubmission?(ctx: SolverContext, task: Task): boolean;
  balance(ctx: SolverContext, signal: AbortSignal | undefined): Promise<number>;
  report(ctx: SolverContext, verdict: 'bad' | 'good', solverId: string, method: string | undefined): Promise<void>;
}

/** How over-cap and transient answers are retried. */
export interface SolverRetryOptions {
  /** Over-cap answers to in.php retried before SolverOverCapError. @default 3 */
  maxOverCapRetries: number;
  /** Transient failures retried before SolverTransientError: per submission, and in a row while polling. @default 3 */
  maxTransientRetries: number;
  /** Backoff before the first retry, ms; doubles per retry. @default 1000 */
  baseBackoffMs: number;
  /** Largest backoff, ms. @default 15000 */
  maxBackoffMs: number;
}

export const DEFAULT_RETRY: Readonly<SolverRetryOptions> = SOLVER_RETRY_DEFAULTS;

/** Structured logger; Powertools' Logger fits. Lines are redacted before they get here. */
export interface SolverLogger {
  debug(message: string, attributes: Record<string, unknown>): void;
  warn(message: string, attributes: Record<string, unknown>): void;
}

/** One client's settings and services, shared by every step of every solve. */
export interface SolverContext {
  /** Where in.php and res.php (or the JSON API's methods) live, without a trailing slash. */
  readonly base: string;
  readonly key: string;
  readonly dialect: Dialect;
  /** The protocol's adapter. */
  readonly wire: SolverWire;
  /** How long the latest submissions answered in their own response took (`answersInSubmission`). */
  readonly answerWaits: AnswerWaits;
  /** The operator's developer id (in.php `soft_id`, the JSON API's `softId`, CapSolver's `appId`), if set. */
  readonly softId: string | undefined;
  /** Configured prices per method, USD: a solve's cost where the provider reports none. */
  readonly prices: Readonly<Partial<Record<SolverMethod, number>>>;
  readonly dispatcher: Dispatcher;
  readonly clock: Clock;
  readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  readonly schedule: PollSchedule;
  readonly requestTimeoutMs: number;
  /** Least time between two result requests of one submission, ms (SolverClientOptions.pollGapMs). */
  readonly pollGapMs: number;
  /** Largest response body read, bytes; a larger one is a transient failure, not read whole. */
  readonly maxResponseBytes: number;
  readonly retry: SolverRetryOptions;
  readonly random: () => number;
  /** The text with the key removed. */
  readonly redact: (text: string) => string;
  /** Logs with message and attributes redacted. */
  readonly log: SolverLogger;
}

/** One `solve()` in progress. */
export interface SolveState {
  readonly taskId: string;
  readonly signal: AbortSignal | undefined;
  readonly deadlineAt: number;
  /** No submission answered in its own response is sent after this (SolveOptions.submitBy). */
  readonly submitBy: number;
  /** Such a submission's request waits for its answer until this (SolveOptions.answerBy). */
  readonly answerBy: number;
  readonly onSolverAnswer: SolveOptions['onSolverAnswer'];
  /** Counted as the steps retry; returned in the outcome. */
  readonly retries: SolveOutcome['retries'];
}

/** How many of the latest submissions answered in their own response `AnswerWaits` remembers, and for how long, ms. */
const ANSWER_WAITS_KEPT = 16;
const ANSWER_WAITS_FOR_MS = 60_000;

/**
 * How much longer than the longest of the latest such requests a submission answered in its own
 * response needs left when it is sent. The longest of up to 16 recognitions is about their 94th
 * percentile: a send with just that left is cut short (paid, its id never known) about once in 16
 * (a drawn run: --solver-dialect capsolver --solver-latency-ms 3000 --visibility-timeout 6, five
 * images paid twice). Half again covers a log-normal recognition time of the simulator's spread
 * (0.35: the 99.7th percentile) and more of a tighter one; a window too narrow for it is refused
 * where it is known (`npm start`'s check of the flags, bin/commands/start/sync-answers.ts).
 */
export const ANSWER_WAIT_HEADROOM = 1.5;

/**
 * How long the latest accepted submissions the provider answered in their own response took: the
 * longest of them, with ANSWER_WAIT_HEADROOM, is how much of its deadline such a submission needs
 * left when it is sent. Only accepted ones count (a request cut short says only that it took
 * longer than what was left, and counted, one outlier at a whole window would stop every send),
 * and only for a minute (a long one remembered while nothing is sent would stop them for good).
 */
export class AnswerWaits {
  private readonly recent: { at: number; ms: number }[] = [];

  note(ms: number, at: number): void {
    this.recent.push({ at, ms: Math.max(0, ms) });
    if (this.recent.length > ANSWER_WAITS_KEPT) this.recent.shift();
  }

  /** The longest of the latest at `now`, ms; 0 before any. */
  longest(now: number): number {
    let most = 0;
    for (const { at, ms } of this.recent) if (now - at <= ANSWER_WAITS_FOR_MS) most = Math.max(most, ms);
    return most;
  }
}

/** The caller aborted the solve. */
export function aborted(taskId: string | undefined): SolverTimeoutError {
  return new SolverTimeoutError('ABORTED', {
    taskId,
    message: `solve of task ${taskId ?? '(none)'} aborted by the caller`,
  });
}

/** The deadline passed with no answer. */
export function deadlinePassed(
  taskId: string,
  solverId: string | undefined,
  resultRequests: number,
): SolverTimeoutError {
  return new SolverTimeoutError('DEADLINE_EXCEEDED', {
    taskId,
    message: `no answer for task ${taskId}${solverId ? ` (solver id ${solverId})` : ''} before the deadline; ${resultRequests} result requests made`,
  });
}

/** Wait `ms` (the caller's signal ends it early). Throws SolverTimeoutError on abort. */
export async function pause(
  ctx: SolverContext,
  ms: number,
  signal: AbortSignal | undefined,
  taskId: string | undefined,
): Promise<void> {
  if (signal?.aborted) throw aborted(taskId);
  if (ms > 0) {
    try {
      await ctx.sleep(ms, signal);
    } catch (error) {
      if (signal?.aborted) throw aborted(taskId);
      throw new SolverTransientError('CLIENT_ERROR', {
        taskId,
        message: ctx.redact(`sleep failed: ${describeError(error)}`),
      });
    }
  }
  if (signal?.aborted) throw aborted(taskId);
}

/** Tell the caller about one response; a throwing hook must not change the solve. */
export function notify(ctx: SolverContext, solve: SolveState, answer: SolverAnswer): void {
  if (solve.onSolverAnswer === undefined) return;
  try {
    solve.onSolverAnswer(answer);
  } catch (error) {
    ctx.log.warn('onSolverAnswer hook threw; ignored', { taskId: solve.taskId, error: describeError(error) });
  }
}

/** Back off before retry number `attempt` (0-based), or throw `error` if that would pass the deadline. */
export async function backOff(
  ctx: SolverContext,
  solve: SolveState,
  error: SolverError,
  attempt: number,
): Promise<void> {
  const { retry } = ctx;
  const delay = Math.round(retryBackoffMs(attempt, retry, ctx.random));
  if (ctx.clock() + delay >= solve.deadlineAt) {
    throw solverErrorLike(error, `${error.message}; no retry: the backoff of ${delay} ms would pass the deadline`);
  }
  ctx.log.warn('solver answer retried after a backoff', {
    taskId: solve.taskId,
    code: error.code,
    errorClass: error.errorClass,
    attempt: attempt + 1,
    delayMs: delay,
  });
  await pause(ctx, delay, solve.signal, solve.taskId);
}

/** The same typed error (class, code, task id, cause) with another message. */
export function solverErrorLike(error: SolverError, message: string): SolverError {
  const Constructor = error.constructor as new (code: string, options?: SolverErrorOptions) => SolverError;
  return new Constructor(error.code, { taskId: error.taskId, message, cause: error.cause });
}

/** Name, code and message of a thrown value, for a (then redacted) message. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return `${error.name}${typeof code === 'string' ? ` ${code}` : ''}: ${error.message}`;
  }
  return String(error);
}
