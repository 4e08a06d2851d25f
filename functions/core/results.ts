/**
 * The result record: one per task id in the results table. Pure types and helpers.
 */
import type { SolverProvider } from './provider.js';
import type { SolverMethod } from './solver-protocol.js';

export type ResultStatus = 'solving' | 'solved' | 'failed' | 'rejected';
/** The statuses a task ends in. */
export type TerminalStatus = Exclude<ResultStatus, 'solving'>;
export const TERMINAL_STATUSES: readonly TerminalStatus[] = ['solved', 'failed', 'rejected'];

/**
 * True only for a known terminal status. A whitelist: a record read back without a status (or
 * with one this code does not know) is not finished, so the consumer does not acknowledge it,
 * `wait` does not return it and the demo reports it as unknown.
 */
export function isTerminal(status: unknown): status is TerminalStatus {
  return (TERMINAL_STATUSES as readonly unknown[]).includes(status);
}

export interface TaskResult {
  taskId: string;
  status: ResultStatus;
  method?: SolverMethod | string;
  priority?: 'normal' | 'high';
  /** The solver's answer (a token or the text of an image). */
  answer?: string;
  errorCode?: string;
  errorMessage?: string;
  /** Deliveries that claimed the task, counting takeovers. */
  attempts: number;
  /**
   * Which provider's consumer wrote the record (claimed, solved or failed it): `primary` (the
   * plan) or `overflow`. Absent on records written before overflow existed and on rejections.
   */
  provider?: SolverProvider;
  /** The solver's captcha id of the current submission (lets a takeover resume it). */
  solverId?: string;
  /**
   * Which provider accepted `solverId`: only a consumer that can poll that provider resumes it.
   * Absent on records written before it: the claimant's `provider` then stands for it.
   */
  solverProvider?: SolverProvider;
  /**
   * When the solver accepted `solverId`, epoch ms: written when a delivery parks the task (the
   * delivery that resumes it measures the solve from it). Absent otherwise.
   */
  solverAcceptedAt?: number;
  /**
   * The claim token of the delivery that wrote the terminal record: a write whose answer was lost
   * is recognised as its own by the retry. Absent on records written before it.
   */
  completedBy?: string;
  /** When the completion event went out, epoch ms; absent until then (a redelivery announces it). */
  announcedAt?: number;
  /**
   * Until when a delivery that found the record un-announced holds its announcement, epoch ms
   * (`takeAnnouncement`): another such delivery waits for it instead of publishing too.
   */
  announcingUntil?: number;
  /** When a delivery waited once for the copy of a dead holder's message that may carry its submission, epoch ms. */
  orphanWaitAt?: number;
  /**
   * The solver's `ERROR_CAPTCHA_UNSOLVABLE` answers to this task's submissions so far, each counted
   * once (`unsolvableOf`: the submission the last one answered): what `unsolvableResubmits` bounds
   * across deliveries (a parked task's resumption is a new delivery). Absent until the first.
   */
  unsolvableAnswers?: number;
  unsolvableOf?: string;
  /** Epoch ms. */
  submittedAt?: number;
  startedAt?: number;
  completedAt?: number;
  queueWaitMs?: number;
  solveMs?: number;
  /** Epoch ms until which the claim protects the task. */
  leaseUntil?: number;
  /** Identifies the delivery that holds the claim. */
  claimToken?: string;
  /**
   * SHA-256 of the task's method and canonical params (`taskFingerprint`), written by the claim:
   * tells a resend of this task from another task under the same id. Never the params themselves.
   * Absent on records written before fingerprints (taken as the same content) and on rejections.
   */
  fingerprint?: string;
  /** When a token answer stops being usable, epoch ms. */
  tokenExpiresAt?: number;
  /**
   * What the solve cost, USD: the provider's own figure (the JSON task API's `cost`) or the
   * operator's configured price of the method (`costSource`). Absent when neither is known, and
   * on failed and rejected records.
   */
  costUsd?: number;
  costSource?: 'provider' | 'configured';
  /** A producer's report on the answer (bad: a refund asked; good), once one came. See core/report.ts. */
  report?: TaskReport;
  /** DynamoDB TTL attribute, epoch seconds. */
  expiresAt: number;
}

/** A producer's verdict on an answer (core/report.ts has the message and the decision). */
export const VERDICTS = ['bad', 'good'] as const;
export type Verdict = (typeof VERDICTS)[number];

/**
 * Why a report was refused, as the record keeps it and the caller reads it:
 * - `NOT_FOUND`: no record of the task (not yet taken from its queue, never sent, or past the results TTL);
 * - `NOT_SOLVED`: the task is still solving, or ended failed or rejected: there is no answer to report;
 * - `NO_SOLVER_ID`: the record names no solver id (written before ids were kept);
 * - `PROVIDER_REFUSED`: the provider no longer takes a report on it (`code`: ERROR_WRONG_CAPTCHA_ID,
 *   ERROR_NO_SUCH_CAPCHA_ID, ERROR_TASKID_INVALID, REPORT_NOT_RECORDED…: unknown, expired, past its window);
 * - `NOT_SUPPORTED`: the provider has no report method for this task (CapMonster; Anti-Captcha's good
 *   reports on anything but reCAPTCHA);
 * - `PROVIDER_UNAVAILABLE`: the provider that solved it is no longer configured in this fleet;
 * - `ALREADY_REPORTED`: the task was reported with the other verdict; the first report stands.
 */
export const REPORT_REFUSALS = [
  'NOT_FOUND',
  'NOT_SOLVED',
  'NO_SOLVER_ID',
  'PROVIDER_REFUSED',
  'NOT_SUPPORTED',
  'PROVIDER_UNAVAILABLE',
  'ALREADY_REPORTED',
] as const;
export type ReportRefusal = (typeof REPORT_REFUSALS)[number];

/** A report as the result record keeps it (`report`). */
export interface TaskReport {
  verdict: Verdict;
  /** `pending` while a delivery calls the provider; `accepted` or `refused` once settled. */
  state: 'pending' | 'accepted' | 'refused';
  /** Why it was refused. */
  reason?: ReportRefusal;
  /** The provider's code behind a refusal (ERROR_…), when it gave one. */
  code?: string;
  /** What happened, for people. */
  message?: string;
  /** When the report was taken up, epoch ms. */
  requestedAt: number;
  /** When it settled, epoch ms. */
  reportedAt?: number;
  /** The provider called (the one that solved the task) and the id it was called with. */
  provider?: SolverProvider;
  solverId?: string;
  /** A bad report accepted: the solve's cost the provider is asked to refund, USD, when known. */
  refundUsd?: number;
  /** The delivery that holds a pending report (SQS message id), and until when. Absent once settled. */
  token?: string;
  leaseUntil?: number;
}
