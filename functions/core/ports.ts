/**
 * Ports: what the domain needs from the outside world. Adapters implement them for AWS and
 * for the local runtime; tests pass their own.
 */
import type { Task } from './task.js';
import type { TaskResult } from './results.js';
import type { SolverProvider } from './provider.js';
import type { SolverErrorClass } from './solver-protocol.js';

/** Milliseconds since the epoch; injected so tests and the lab control time. */
export type Clock = () => number;

/**
 * One solver response during a solve, as the client acted on it: `submit` is an in.php (or
 * createTask) response, `result` a res.php get (or getTaskResult). `accepted` / `answered` are successes; otherwise the class
 * the client treated the answer as (an over-cap code on res.php is a passing fault, so
 * `transient`; HTTP and parse failures are `transient` too, with codes like `HTTP_502`).
 */
export interface SolverAnswer {
  request: 'submit' | 'result';
  outcome: 'accepted' | 'answered' | 'not_ready' | SolverErrorClass;
  /** The protocol or transport code for a non-success (e.g. `ERROR_NO_SLOT_AVAILABLE`, `REQUEST_TIMEOUT`). */
  code?: string;
}

export interface SolveOptions {
  /** Aborts polling and retries at once (e.g. the invocation is about to time out). */
  signal?: AbortSignal;
  /** Epoch ms after which the solve gives up with a SolverTimeoutError. */
  deadlineAt: number;
  /** Resume polling a submission a previous delivery made instead of submitting again. */
  resumeSolverId?: string;
  /** Called once the solver accepted the task, with its captcha id. */
  onSubmitted?: (solverId: string) => Promise<void> | void;
  /**
   * Called synchronously for every in.php / res.php response of this solve, including those
   * retried inside the client and failed exchanges, as it happens (metrics per request).
   * Its own throws are swallowed: counting must never change a solve.
   */
  onSolverAnswer?: (answer: SolverAnswer) => void;
}

export interface SolveOutcome {
  answer: string;
  solverId: string;
  /** Epoch ms the solver accepted the task. */
  acceptedAt: number;
  /** Epoch ms the answer was read. */
  answeredAt: number;
  /** res.php get requests made. */
  resultRequests: number;
  /** Over-cap and transient answers retried on the way. */
  retries: { overCap: number; transient: number };
  /**
   * What the provider returned beside the answer, when it did: `userAgent` (the browser the
   * token was made in: use it with the token), `cookies` (`name=value; …`), `respKey`
   * (hCaptcha). Bounded (8 KiB each, longer dropped) and with the key removed, like the answer.
   */
  extras?: Readonly<Record<string, string>>;
  /**
   * What the solve cost, USD, as far as the client can know: the provider's own figure (the JSON
   * task API's `cost`: source `provider`) or the operator's configured price of the method
   * (`configured`; res.php reports none). Absent when neither is known.
   */
  costUsd?: number;
  costSource?: 'provider' | 'configured';
}

/** What a report needs besides the solver id: the task's method (Anti-Captcha has one report method per kind). */
export interface ReportContext {
  method?: string;
}

/**
 * One submission to the solver and its polls; throws typed SolverErrors. The same port whatever
 * the wire protocol (in.php / res.php or the JSON task API): the protocol is the adapter's choice.
 */
export interface SolverPort {
  solve(task: Task, options: SolveOptions): Promise<SolveOutcome>;
  getBalance(options?: { signal?: AbortSignal }): Promise<number>;
  /**
   * Report an answer as wrong (for a refund) or right. Resolves when the provider took it or had
   * it already; throws a SolverTaskError when it no longer takes one (unknown or expired id, past
   * its report window: `ERROR_WRONG_CAPTCHA_ID`, `ERROR_NO_SUCH_CAPCHA_ID`, …) or has no report
   * method for the task (`REPORT_NOT_SUPPORTED`).
   */
  reportBad(solverId: string, context?: ReportContext): Promise<void>;
  reportGood(solverId: string, context?: ReportContext): Promise<void>;
}

export type ClaimResult =
  | { outcome: 'claimed'; record: TaskResult; takenOver: boolean; previousSolverId?: string }
  | { outcome: 'terminal'; record: TaskResult }
  | { outcome: 'held'; leaseUntil: number }
  /** The id is in use by a task with other content (another fingerprint); the record is untouched. */
  | { outcome: 'conflict'; record: TaskResult };

/** One delivery's claim on a task. */
export interface ClaimInput {
  task: Task;
  claimToken: string;
  now: number;
  leaseMs: number;
  /**
   * Whose consumer claims: written on the record (a takeover by the other lane overwrites it).
   * A takeover resumes the holder's submission (`previousSolverId`) only when the holder was of
   * the same provider; absent counts as `primary`.
   */
  provider?: SolverProvider;
}

/** The results table. Every write is a single-item conditional write. */
export interface ResultsRepository {
  /**
   * Claim a task for one delivery: new (or in place of a rejected or expired record) → claimed;
   * expired lease → taken over; same id with other content → conflict; else why not. A claim
   * (fresh or a takeover) records `provider`, the claiming consumer's, when given.
   */
  claim(input: ClaimInput): Promise<ClaimResult>;
  /** Remember the solver's id for the current claim. False when the claim was lost. */
  recordSolverId(taskId: string, claimToken: string, solverId: string): Promise<boolean>;
  /** Write the terminal record if the claim is still ours. False when it was lost. */
  complete(
    taskId: string,
    claimToken: string,
    result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>,
  ): Promise<boolean>;
  /** Give the claim up so another delivery need not wait for the lease. */
  release(taskId: string, claimToken: string): Promise<void>;
  /**
   * Write a `rejected` record unless a result exists already. Resolves `true` when this call
   * wrote it, `false` when a record existed (implementations that cannot tell resolve nothing;
   * the consumer then publishes no event for the rejection, so none is ever repeated).
   */
  reject(
    taskId: string,
    result: { errorCode: string; errorMessage: string; method?: string; submittedAt?: number; completedAt: number },
  ): Promise<boolean | undefined>;
  get(taskId: string, options?: { consistent?: boolean }): Promise<TaskResult | undefined>;
}

/** Where a delivered message came from, enough to act on it in its queue. */
export interface DeliveredMessage {
  /** The queue's ARN as the event source reports it (`eventSourceARN`). */
  eventSourceArn: string;
  receiptHandle: string;
}

/** A refused message on its way to the dead-letter queue, with why. */
export interface DeadLetter {
  /** The original message body, unchanged. */
  body: string;
  /** A stable code (e.g. `SCHEMA_VIOLATION`); becomes the `reason` message attribute. */
  reason: string;
  /** Human-readable detail; becomes the `reasonDetail` message attribute. */
  reasonDetail: string;
  /** The task id when one could be read. */
  taskId?: string;
  /** Name of the queue the message was received from. */
  sourceQueue: string;
}

/** What the consumer asks of the task queues besides the event source's own acknowledgement. */
export interface TaskQueue {
  /** Send a refused message to the DLQ. Throws when it could not be sent (the caller must not acknowledge). */
  deadLetter(letter: DeadLetter): Promise<void>;
  /** Hide a message for `seconds` from now (0 makes it visible at once). */
  changeVisibility(message: DeliveredMessage, seconds: number): Promise<void>;
}

/** Optional: announce terminal results (EventBridge in AWS, an emitter locally). */
export interface CompletionEvents {
  publish(result: TaskResult): Promise<void>;
}
