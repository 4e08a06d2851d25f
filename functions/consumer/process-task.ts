/**
 * One SQS record, start to finish: parse → claim → solve → record. Throwing fails the record
 * (Powertools batch turns the throw into a `batchItemFailures` entry, so SQS delivers it again);
 * returning acknowledges it. Every path ends in a terminal record, the DLQ, or a retry.
 */
import { randomUUID } from 'node:crypto';
import type { SQSRecord } from 'aws-lambda';
import type { Logger } from '@aws-lambda-powertools/logger';
import { MetricResolution, MetricUnit, type Metrics } from '../adapters/metrics.js';
import { RecordTooLargeError } from '../adapters/results-repository.js';
import { MAX_VISIBILITY_SECONDS, queueNameOf } from '../adapters/task-queue.js';
import { ACCOUNT_HAND_BACK_BACKOFF, HAND_BACK_BACKOFF, handBackSeconds } from '../core/backoff.js';
import { METRICS } from '../core/metric-names.js';
import type {
  Clock,
  CompletionEvents,
  DeliveredMessage,
  ResultsRepository,
  SolveOutcome,
  SolverAnswer,
  SolverPort,
  TaskQueue,
} from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import { isTerminal, type TaskResult } from '../core/results.js';
import { RECORD_MARGIN_SECONDS, type FleetSettings } from '../core/settings.js';
import {
  METHOD_KIND,
  redactKey,
  SolverAccountError,
  SolverError,
  SolverOverCapError,
  SolverTaskError,
  SolverTimeoutError,
  TOKEN_TTL_MS,
  type SolverMethod,
} from '../core/solver-protocol.js';
import { parseTask, type Task } from '../core/task.js';
import { describeIdConflict, ID_CONFLICT } from '../core/task-identity.js';
import type { ThreadLedgerRecorder } from '../core/thread-ledger.js';
import { type OverCapWaiting, ThreadTracking } from './thread-tracking.js';

/** SQS caps a visibility timeout at 12 hours. */
/** Codes that say a resumed solver id is unknown: submit afresh instead of failing the task. */
const STALE_ID_CODES = new Set(['ERROR_WRONG_CAPTCHA_ID', 'ERROR_WRONG_ID_FORMAT']);
const UNSOLVABLE = 'ERROR_CAPTCHA_UNSOLVABLE';
/** The answer came but no results record can hold it (DynamoDB's 400 KB item). */
export const ANSWER_TOO_LARGE = 'ANSWER_TOO_LARGE';

/** Why a record is handed back to the queue; the `Reason` dimension of the Retried metric. */
export type RetryReason = 'over_cap' | 'transient' | 'timeout' | 'account' | 'lease_held' | 'claim_lost' | 'error';

/** Timings the consumer uses; defaults come from the settings, tests shrink them. */
export interface ConsumerTiming {
  /** How long a claim protects a task, ms. @default settings.leaseSeconds × 1000 */
  leaseMs: number;
  /** Time kept before the invocation stops to record the outcome, ms. @default RECORD_MARGIN_SECONDS × 1000 */
  recordMarginMs: number;
  /** First retry delay (over-cap, transient, timeout), seconds; doubles per receive. @default 5 */
  retryBaseSeconds: number;
  /** Longest retry delay, seconds. @default 300 */
  retryMaxSeconds: number;
  /** First delay after an account error, seconds (the governor pauses meanwhile). @default 60 */
  accountRetryBaseSeconds: number;
  /** Longest delay after an account error, seconds. @default 900 */
  accountRetryMaxSeconds: number;
  /** With a thread ledger: how a refused invocation waits for a thread before submitting again. @default 1 s polls, 15 s at most, 3 waits */
  overCapWaiting: OverCapWaiting;
}

/** What the consumer needs; the Lambda handler and the local runtime pass their own. */
export interface ConsumerDeps {
  solver: SolverPort;
  repository: ResultsRepository;
  queue: TaskQueue;
  /** Powertools Metrics (EMF); flushed at the end of every invocation. */
  metrics: Metrics;
  /** Powertools Logger; every record logs through a child that carries the task id. */
  logger: Logger;
  settings: FleetSettings;
  clock?: Clock;
  /** Completion events; none are published when absent. */
  events?: CompletionEvents;
  timing?: Partial<ConsumerTiming>;
  /** Where over-cap answers, acceptances and held threads are recorded for the governor; none when absent. */
  threadLedger?: ThreadLedgerRecorder;
  /** Whose solver `solver` is: written on every claim, solved and failed record. @default 'primary' */
  provider?: SolverProvider;
}

/** A record handed back to the queue on purpose; the batch processor reports it as failed. */
export class RetryLaterError extends Error {
  override readonly name = 'RetryLaterError';
  constructor(
    readonly reason: RetryReason,
    readonly taskId: string,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

/** The claim was lost mid-solve (another delivery took the task over). */
export class ClaimLostError extends Error {
  override readonly name = 'ClaimLostError';
  constructor(readonly taskId: string) {
    super(`claim of task ${taskId} was lost to another delivery`);
  }
}

/** Resolved dependencies shared by the records of one invocation. */
export interface RecordContext {
  deps: ConsumerDeps;
  clock: Clock;
  timing: ConsumerTiming;
  /** Epoch ms at which the invocation must have returned. */
  stopAt: number;
  /** The invocation's request id, on every log line (concurrency-safe, unlike `addContext`). */
  requestId?: string;
}

export function resolveTiming(settings: FleetSettings, overrides: Partial<ConsumerTiming> = {}): ConsumerTiming {
  return {
    leaseMs: settings.leaseSeconds * 1000,
    recordMarginMs: RECORD_MARGIN_SECONDS * 1000,
    retryBaseSeconds: HAND_BACK_BACKOFF.baseSeconds,
    retryMaxSeconds: HAND_BACK_BACKOFF.maxSeconds,
    accountRetryBaseSeconds: ACCOUNT_HAND_BACK_BACKOFF.baseSeconds,
    accountRetryMaxSeconds: ACCOUNT_HAND_BACK_BACKOFF.maxSeconds,
    overCapWaiting: { pollMs: 1_000, maxWaitMs: 15_000, maxWaits: 3 },
    ...overrides,
  };
}

/**
 * Visibility before the next try: doubles with each receive, capped, with equal jitter so
 * tasks refused together (over cap) do not come back together.
 */
export function backoffSeconds(
  receiveCount: number,
  baseSeconds: number,
  maxSeconds: number,
  random: () => number = Math.random,
): number {
  return handBackSeconds(receiveCount, { baseSeconds, maxSeconds }, random);
}

/** Handle one record. Resolves to acknowledge; throws to have SQS deliver it again. */
export async function processRecord(record: SQSRecord, ctx: RecordContext): Promise<void> {
  const { deps, clock } = ctx;
  const receivedAt = clock();
  const sentAt = Number(record.attributes.SentTimestamp) || receivedAt;
  const parsed = parseTask(record.body, record.messageId, sentAt);
  try {
    if (!parsed.ok) await rejectRecord(record, parsed.rejection, ctx);
    else await new TaskRun(record, parsed.task, ctx, sentAt).run();
  } catch (error) {
    if (error instanceof RetryLaterError) throw error;
    // An unexpected failure (the table or the DLQ unreachable): retry after a backoff rather
    // than after the queue's long visibility timeout.
    const taskId = parsed.ok ? parsed.task.id : (parsed.rejection.id ?? record.messageId);
    const receiveCount = Number(record.attributes.ApproximateReceiveCount) || 1;
    const delay = backoffSeconds(receiveCount, ctx.timing.retryBaseSeconds, ctx.timing.retryMaxSeconds);
    const log = deps.logger.createChild({
      persistentKeys: { taskId, messageId: record.messageId, requestId: ctx.requestId },
    });
    log.error('record failed; it will be delivered again', {
      error: redactKey(`${(error as Error).name}: ${(error as Error).message}`),
      retryInSeconds: delay,
    });
    await hideMessage(
      deps.queue,
      { eventSourceArn: record.eventSourceARN, receiptHandle: record.receiptHandle },
      delay,
      log,
    );
    countRetried(deps.metrics, 'error');
    throw new RetryLaterError('error', taskId, `record of task ${taskId} failed unexpectedly`, { cause: error });
  }
}

/** Delay a message's next delivery; if that fails it returns after the queue's own visibility timeout: later, not lost. */
async function hideMessage(
  queue: TaskQueue,
  message: DeliveredMessage,
  seconds: number,
  log: Pick<Logger, 'warn'>,
): Promise<void> {
  const visibility = Math.min(MAX_VISIBILITY_SECONDS, Math.max(0, Math.ceil(seconds)));
  try {
    await queue.changeVisibility(message, visibility);
  } catch (error) {
    log.warn('visibility could not be changed', { visibility, error: redactKey((error as Error).message) });
  }
}

function countRetried(metrics: Metrics, reason: RetryReason): void {
  // A metric with its own dimension goes out as a single metric, so the invocation's other
  // metrics keep their plain `service` dimension.
  const single = metrics.singleMetric();
  single.addDimension('Reason', reason);
  single.addMetric(METRICS.retried, MetricUnit.Count, 1);
}

async function rejectRecord(
  record: SQSRecord,
  rejection: { code: string; reason: string; id: string | undefined },
  ctx: RecordContext,
): Promise<void> {
  const { deps, clock } = ctx;
  const log = deps.logger.createChild({
    persistentKeys: { taskId: rejection.id ?? record.messageId, messageId: record.messageId, requestId: ctx.requestId },
  });
  const method = readMethod(record.body);
  // The record first: both writes are idempotent, so a failure of either retries both and a
  // message is acknowledged only once it is in the DLQ and (when it has an id) on record.
  if (rejection.id !== undefined) {
    const rejected = {
      errorCode: rejection.code,
      errorMessage: rejection.reason,
      ...(method !== undefined ? { method } : {}),
      completedAt: clock(),
    };
    // Only the delivery whose write created the record announces it: a redelivery (the DLQ send
    // failed, or the acknowledgement was lost) finds the record and stays silent.
    // Announced before the DLQ send, so a failing send (retried) cannot cost the event.
    if ((await deps.repository.reject(rejection.id, rejected)) === true) {
      await publishCompletion(deps, log, {
        taskId: rejection.id,
        status: 'rejected',
        attempts: 0,
        expiresAt: 0,
        ...rejected,
      });
    }
  }
  await deps.queue.deadLetter({
    body: record.body,
    reason: rejection.code,
    reasonDetail: rejection.reason,
    ...(rejection.id !== undefined ? { taskId: rejection.id } : {}),
    sourceQueue: queueNameOf(record.eventSourceARN),
  });
  deps.metrics.addMetric(METRICS.rejected, MetricUnit.Count, 1);
  log.warn('task rejected to the DLQ', { reason: rejection.code, reasonDetail: rejection.reason });
}

/** One claimed-or-not task of one delivery. */
class TaskRun {
  private readonly deps: ConsumerDeps;
  private readonly log: Logger;
  private readonly receiveCount: number;
  private readonly message: DeliveredMessage;
  private readonly claimToken: string;
  private claimLost = false;
  private readonly threads: ThreadTracking;
  /** Solver responses of this delivery, counted as they come and emitted once it ends. */
  private readonly answers = { submissions: 0, resultRequests: 0, transientErrors: 0, taskErrors: 0 };

  constructor(
    private readonly record: SQSRecord,
    private readonly task: Task,
    private readonly ctx: RecordContext,
    private readonly sentAt: number,
  ) {
    this.deps = ctx.deps;
    this.receiveCount = Number(record.attributes.ApproximateReceiveCount) || 1;
    this.message = { eventSourceArn: record.eventSourceARN, receiptHandle: record.receiptHandle };
    this.claimToken = `${record.messageId}:${this.receiveCount}:${randomUUID()}`;
    this.log = this.deps.logger.createChild({
      persistentKeys: {
        taskId: task.id,
        messageId: record.messageId,
        requestId: ctx.requestId,
        method: task.method,
        receiveCount: this.receiveCount,
      },
    });
    this.threads = new ThreadTracking(
      this.deps.threadLedger,
      ctx.clock,
      this.log,
      ctx.timing.overCapWaiting,
      this.deps.settings.effectiveCap,
    );
  }

  async run(): Promise<void> {
    const { deps, clock, timing } = this.ctx;
    const claimedAt = clock();
    const provider = deps.provider ?? 'primary';
    const claim = await deps.repository.claim({
      task: this.task,
      claimToken: this.claimToken,
      now: claimedAt,
      leaseMs: timing.leaseMs,
      provider,
    });

    if (claim.outcome === 'conflict') return this.refuseConflict(claim.record);
    if (claim.outcome === 'terminal') {
      deps.metrics.addMetric(METRICS.duplicates, MetricUnit.Count, 1);
      this.log.info('duplicate delivery of a finished task acknowledged', { status: claim.record.status });
      return;
    }
    if (claim.outcome === 'held') {
      await this.hideFor((claim.leaseUntil - claimedAt) / 1000);
      throw this.retry(
        'lease_held',
        `task ${this.task.id} is claimed by another delivery until ${new Date(claim.leaseUntil).toISOString()}`,
      );
    }

    const queueWaitMs = Math.max(0, claimedAt - this.sentAt);
    if (claim.record.attempts === 1) deps.metrics.addMetric(METRICS.queueWait, MetricUnit.Milliseconds, queueWaitMs);
    if (claim.takenOver) {
      this.log.info('expired claim taken over', {
        attempts: claim.record.attempts,
        resumeSolverId: claim.previousSolverId,
      });
    }
    const base: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt' | 'status'> = {
      method: this.task.method,
      priority: this.task.priority,
      submittedAt: this.task.submittedAt,
      startedAt: claimedAt,
      queueWaitMs,
      provider,
    };

    try {
      const outcome = await this.solve(claim.previousSolverId, claimedAt);
      await this.recordSolved(outcome, base, claim.record, claim.previousSolverId);
    } catch (error) {
      try {
        await this.handleFailure(error, base, claim.record);
      } catch (failure) {
        if (failure instanceof RetryLaterError) throw failure;
        // Recording the failure itself failed (the table unreachable): hand the task back with
        // its claim released, as for any other error, so the retry need not wait for the lease.
        await this.handBack(
          failure,
          'error',
          backoffSeconds(this.receiveCount, this.ctx.timing.retryBaseSeconds, this.ctx.timing.retryMaxSeconds),
        );
      }
    } finally {
      // Every path (solved, failed, handed back, claim lost) reports the requests it made
      // and frees the thread it held in the ledger.
      this.emitAnswerCounts();
      await this.threads.settle();
    }
  }

  /**
   * The id names another task (other content) whose record lives: this message goes to the DLQ
   * with `ID_CONFLICT`, and the first task's record stays as it is (no `rejected` over it, no
   * event: its producer is still waiting on it). A DLQ send that fails throws and retries.
   */
  private async refuseConflict(existing: TaskResult): Promise<void> {
    const { deps } = this.ctx;
    const detail = describeIdConflict(this.task.id, existing);
    await deps.queue.deadLetter({
      body: this.record.body,
      reason: ID_CONFLICT,
      reasonDetail: detail,
      taskId: this.task.id,
      sourceQueue: queueNameOf(this.record.eventSourceARN),
    });
    deps.metrics.addMetric(METRICS.rejected, MetricUnit.Count, 1);
    this.log.warn('task id in use by other content; refused to the DLQ', {
      reason: ID_CONFLICT,
      reasonDetail: detail,
      existingStatus: existing.status,
    });
  }

  /**
   * One solver response (the client calls this for every in.php / res.php answer, retried ones
   * included). Over-cap answers go out at once as their own EMF document, with the submission
   * they refused: the governor reads OverCapAnswers per window and must see them while this
   * invocation may still be retrying; the rest is summed and emitted when the delivery ends.
   */
  private countAnswer(answer: SolverAnswer): void {
    this.threads.onAnswer(answer);
    if (answer.request === 'submit' && answer.outcome === 'over_cap') {
      // No extra dimension: the single metric keeps the plain `service` dimension the alarms,
      // the dashboard and the governor read.
      // A single metric publishes on every addMetric, so these are two documents sent now.
      const single = this.deps.metrics.singleMetric();
      single.addMetric(METRICS.overCapAnswers, MetricUnit.Count, 1);
      single.addMetric(METRICS.submissions, MetricUnit.Count, 1);
      return;
    }
    if (answer.request === 'submit') this.answers.submissions += 1;
    else this.answers.resultRequests += 1;
    if (answer.outcome === 'transient') this.answers.transientErrors += 1;
    else if (answer.outcome === 'task_terminal') this.answers.taskErrors += 1;
  }

  private emitAnswerCounts(): void {
    const m = this.deps.metrics;
    const { submissions, resultRequests, transientErrors, taskErrors } = this.answers;
    if (submissions > 0) m.addMetric(METRICS.submissions, MetricUnit.Count, submissions);
    if (resultRequests > 0) m.addMetric(METRICS.resultRequests, MetricUnit.Count, resultRequests);
    if (transientErrors > 0) m.addMetric(METRICS.transientErrors, MetricUnit.Count, transientErrors);
    if (taskErrors > 0) m.addMetric(METRICS.taskErrors, MetricUnit.Count, taskErrors);
    this.answers.submissions = this.answers.resultRequests = this.answers.transientErrors = this.answers.taskErrors = 0;
  }

  /** Submit (or resume) and poll; resubmit unsolvable captchas as the settings allow. */
  private async solve(resumeSolverId: string | undefined, startedAt: number): Promise<SolveOutcome> {
    const { deps, timing, stopAt } = this.ctx;
    const deadlineAt = Math.min(startedAt + deps.settings.solveDeadlineSeconds * 1000, stopAt - timing.recordMarginMs);
    const abort = new AbortController();
    let resume = resumeSolverId;
    if (resume !== undefined) this.threads.resuming(resume);
    let unsolvable = 0;
    for (;;) {
      try {
        if (resume === undefined) await this.threads.waitForRoom(deadlineAt);
        return await deps.solver.solve(this.task, {
          deadlineAt,
          signal: abort.signal,
          ...(resume !== undefined ? { resumeSolverId: resume } : {}),
          onSolverAnswer: (answer) => this.countAnswer(answer),
          onSubmitted: async (solverId) => {
            this.log.info('submitted to the solver', { solverId });
            this.threads.submitted(solverId);
            let stillOurs: boolean;
            try {
              stillOurs = await deps.repository.recordSolverId(this.task.id, this.claimToken, solverId);
            } catch (error) {
              // The submission is paid for: keep polling it. The claim is still ours, and the
              // terminal record carries the solver id; only a takeover could not resume it.
              this.log.warn('solver id not recorded; polling on', {
                solverId,
                error: redactKey((error as Error).message),
              });
              return;
            }
            if (!stillOurs) {
              this.claimLost = true;
              abort.abort(new ClaimLostError(this.task.id));
            }
          },
        });
      } catch (error) {
        if (this.claimLost) throw new ClaimLostError(this.task.id);
        // Refused over the cap: wait for a thread to free rather than retry into the same refusal.
        if (error instanceof SolverOverCapError && (await this.threads.waitForFreeThread(deadlineAt))) continue;
        if (error instanceof SolverTaskError && resume !== undefined && STALE_ID_CODES.has(error.code)) {
          this.log.warn('resumed solver id is unknown to the solver; submitting afresh', {
            solverId: resume,
            code: error.code,
          });
          resume = undefined;
          continue;
        }
        if (
          error instanceof SolverTaskError &&
          error.code === UNSOLVABLE &&
          unsolvable < deps.settings.unsolvableResubmits
        ) {
          unsolvable += 1;
          resume = undefined;
          this.log.info('solver could not solve the captcha; resubmitting', {
            resubmit: unsolvable,
            of: deps.settings.unsolvableResubmits,
          });
          continue;
        }
        throw error;
      }
    }
  }

  private async recordSolved(
    outcome: SolveOutcome,
    base: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt' | 'status'>,
    claimed: TaskResult,
    resumedSolverId: string | undefined,
  ): Promise<void> {
    const { deps, clock } = this.ctx;
    const m = deps.metrics;
    m.addMetric(
      METRICS.solveDuration,
      MetricUnit.Milliseconds,
      Math.max(0, outcome.answeredAt - outcome.acceptedAt),
      MetricResolution.High,
    );
    // Requests, over-cap and transient answers were counted as they came (countAnswer).

    const method = this.task.method as SolverMethod;
    const ttl = METHOD_KIND[method] === 'token' ? TOKEN_TTL_MS[method] : undefined;
    const completedAt = clock();
    const tokenExpiresAt = ttl === undefined ? undefined : this.issuedNoLaterThan(outcome, resumedSolverId) + ttl;
    const result = {
      ...base,
      status: 'solved' as const,
      answer: outcome.answer,
      solverId: outcome.solverId,
      completedAt,
      solveMs: Math.max(0, outcome.answeredAt - outcome.acceptedAt),
      ...(tokenExpiresAt !== undefined ? { tokenExpiresAt } : {}),
    };
    if (!(await this.completeOrFailTooLarge(result))) {
      await this.afterLostClaim();
      return;
    }
    m.addMetric(METRICS.solved, MetricUnit.Count, 1);
    if (tokenExpiresAt !== undefined && completedAt >= tokenExpiresAt) {
      // Recorded as solved (the solver was paid and the answer is the truth of what happened),
      // but a producer must not use it: `get`/`wait` report it stale, and operators see the count.
      m.addMetric(METRICS.tokensStale, MetricUnit.Count, 1);
      this.log.warn('token answer recorded already stale', {
        solverId: outcome.solverId,
        tokenExpiresAt,
        resumed: resumedSolverId !== undefined,
      });
    }
    m.addMetric(METRICS.endToEnd, MetricUnit.Milliseconds, Math.max(0, completedAt - this.task.submittedAt));
    this.log.info('task solved', {
      solverId: outcome.solverId,
      solveMs: result.solveMs,
      resultRequests: outcome.resultRequests,
      answerLength: outcome.answer.length,
    });
    await this.publish({ ...claimed, ...result });
  }

  /**
   * Write the solved record. An answer no record can hold ends the task once, as `failed` with
   * ANSWER_TOO_LARGE (recorded by handleFailure), instead of failing every delivery to the DLQ.
   */
  private async completeOrFailTooLarge(
    result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>,
  ): Promise<boolean> {
    try {
      return await this.deps.repository.complete(this.task.id, this.claimToken, result);
    } catch (error) {
      if (!(error instanceof RecordTooLargeError)) throw error;
      throw new SolverTaskError(ANSWER_TOO_LARGE, { taskId: this.task.id, message: error.message });
    }
  }

  private async handleFailure(
    error: unknown,
    base: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt' | 'status'>,
    claimed: TaskResult,
  ): Promise<void> {
    const { deps, clock, timing } = this.ctx;
    const m = deps.metrics;
    // Already handed back (the claim was lost after the solve): its visibility stands.
    if (error instanceof RetryLaterError) throw error;
    if (error instanceof ClaimLostError) {
      this.log.warn('claim lost while solving');
      await this.afterLostClaim();
      return;
    }
    if (error instanceof SolverTaskError) {
      const completedAt = clock();
      const result = {
        ...base,
        status: 'failed' as const,
        errorCode: error.code,
        errorMessage: redactKey(error.message),
        completedAt,
      };
      if (!(await deps.repository.complete(this.task.id, this.claimToken, result))) {
        await this.afterLostClaim();
        return;
      }
      this.countFailed(error.code);
      m.addMetric(METRICS.endToEnd, MetricUnit.Milliseconds, Math.max(0, completedAt - this.task.submittedAt));
      this.log.warn('task failed', { errorCode: error.code, errorMessage: result.errorMessage });
      await this.publish({ ...claimed, ...result });
      return;
    }
    // Every other outcome hands the task back. The claim is released (lease 0, solver id kept)
    // rather than kept: a kept lease would make the retry wait for it and burn a receive as
    // `lease_held`, moving a healthy task toward the DLQ; a released one lets the retry take
    // over at once and resume the same submission, so nothing is paid twice.
    if (error instanceof SolverAccountError) {
      m.addMetric(METRICS.accountErrors, MetricUnit.Count, 1);
      return this.handBack(
        error,
        'account',
        backoffSeconds(this.receiveCount, timing.accountRetryBaseSeconds, timing.accountRetryMaxSeconds),
      );
    }
    const delay = backoffSeconds(this.receiveCount, timing.retryBaseSeconds, timing.retryMaxSeconds);
    // The answers behind these (over-cap, transient) were counted as they came (countAnswer).
    if (error instanceof SolverOverCapError) return this.handBack(error, 'over_cap', delay);
    if (error instanceof SolverTimeoutError) return this.handBack(error, 'timeout', delay);
    if (error instanceof SolverError) return this.handBack(error, 'transient', delay);
    return this.handBack(error, 'error', delay);
  }

  /** Release the claim, delay the next delivery, and fail the record. Never returns. */
  private async handBack(error: unknown, reason: RetryReason, delaySeconds: number): Promise<never> {
    const code = error instanceof SolverError ? error.code : undefined;
    const detail = redactKey(error instanceof Error ? `${error.name}: ${error.message}` : String(error));
    try {
      await this.deps.repository.release(this.task.id, this.claimToken);
    } catch (releaseError) {
      // The lease then simply runs out; the retry waits for it.
      this.log.warn('claim could not be released', { error: redactKey((releaseError as Error).message) });
    }
    await this.hideFor(delaySeconds);
    const log =
      reason === 'account' || reason === 'error' ? this.log.error.bind(this.log) : this.log.warn.bind(this.log);
    log('task handed back to the queue', { reason, code, detail, retryInSeconds: delaySeconds });
    throw this.retry(reason, `task ${this.task.id} handed back (${reason}${code ? ` ${code}` : ''})`, error);
  }

  /** complete() found the claim gone: acknowledge only if some delivery recorded a result. */
  private async afterLostClaim(): Promise<void> {
    const { clock } = this.ctx;
    const current = await this.deps.repository.get(this.task.id, { consistent: true });
    if (current !== undefined && isTerminal(current.status)) {
      this.deps.metrics.addMetric(METRICS.duplicates, MetricUnit.Count, 1);
      this.log.warn('claim lost, but the task has a terminal record; acknowledged', { status: current.status });
      return;
    }
    const leaseLeft = current?.leaseUntil !== undefined ? (current.leaseUntil - clock()) / 1000 : 0;
    await this.hideFor(Math.max(0, leaseLeft));
    throw this.retry('claim_lost', `task ${this.task.id} lost its claim and has no terminal record yet`);
  }

  private countFailed(errorCode: string): void {
    const single = this.deps.metrics.singleMetric();
    single.addDimension('ErrorCode', errorCode);
    single.addMetric(METRICS.failed, MetricUnit.Count, 1);
  }

  private retry(reason: RetryReason, message: string, cause?: unknown): RetryLaterError {
    countRetried(this.deps.metrics, reason);
    return new RetryLaterError(reason, this.task.id, message, cause === undefined ? {} : { cause });
  }

  private hideFor(seconds: number): Promise<void> {
    return hideMessage(this.deps.queue, this.message, seconds, this.log);
  }

  /**
   * The latest the token can have been issued. A fresh submission's answer is read within one
   * poll of being issued, so the read time stands. A resumed submission's answer may have waited
   * at the solver since the previous holder died: it was issued no earlier than this message was
   * first received (nothing was submitted before that), and that earlier time is taken so the
   * expiry is never later than the truth.
   */
  private issuedNoLaterThan(outcome: SolveOutcome, resumedSolverId: string | undefined): number {
    if (resumedSolverId === undefined || outcome.solverId !== resumedSolverId) return outcome.answeredAt;
    const firstReceivedAt = Number(this.record.attributes.ApproximateFirstReceiveTimestamp);
    return Number.isFinite(firstReceivedAt) && firstReceivedAt > 0
      ? Math.min(outcome.answeredAt, firstReceivedAt)
      : outcome.answeredAt;
  }

  /**
   * Announce a terminal record. Called only after `complete()` wrote it under our claim, so one
   * delivery publishes, at most once; a publish that fails is counted and logged, never thrown:
   * throwing would hand back a task that is already recorded (its redelivery would only be
   * acknowledged as a duplicate), and readers fall back to the results table.
   */
  private async publish(result: TaskResult): Promise<void> {
    await publishCompletion(this.deps, this.log, result);
  }
}

/** Publish one completion event; a failure is counted and logged, never thrown (see TaskRun.publish). */
async function publishCompletion(deps: ConsumerDeps, log: Logger, result: TaskResult): Promise<void> {
  const events = deps.events;
  if (events === undefined) return;
  // The answer goes to the port, which decides whether events carry it (`eventsIncludeAnswer`).
  const { claimToken: _claimToken, leaseUntil: _leaseUntil, ...published } = result;
  try {
    await events.publish(published);
  } catch (error) {
    deps.metrics.addMetric(METRICS.eventPublishFailures, MetricUnit.Count, 1);
    log.warn('completion event could not be published', {
      error: redactKey(`${(error as Error).name}: ${(error as Error).message}`),
    });
  }
}

function readMethod(body: string): string | undefined {
  const match = /"method"\s*:\s*"([A-Za-z0-9_-]{1,40})"/.exec(body.slice(0, 4096));
  return match?.[1];
}
