/**
 * One valid task of one delivery: claim → solve (or resume) → record → announce, as a value.
 * Every path returns an Outcome (outcome.ts); nothing here throws to hand a task back. The steps
 * that must survive a store's bad minute once the solver is paid live in durable-writes.ts: the
 * submission's id is kept beside the solve, the terminal record is retried within the
 * invocation's margin, and what still cannot be written travels in a fresh copy of the message.
 */
import { randomUUID } from 'node:crypto';
import { MetricResolution, MetricUnit } from '../adapters/metrics.js';
import { METRICS } from '../core/metric-names.js';
import {
  type ClaimResult,
  isStoreError,
  type SolveOutcome,
  type SolverAnswer,
  type SolverPort,
} from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import { answerFitsCarry, type Carry, carryText } from '../core/redelivery.js';
import { isTerminal, type TaskResult } from '../core/results.js';
import {
  SolverAccountError,
  SolverError,
  SolverOverCapError,
  SolverTaskError,
  SolverTimeoutError,
  SolverTransientError,
  type SolverMethod,
} from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';
import { hasCounts, WINDOW_COUNTERS, type WindowCounts } from '../core/solve-window.js';
import { describeIdConflict, ID_CONFLICT } from '../core/task-identity.js';
import { recordedStale, solvedFields } from '../core/solved-record.js';
import { announceFound, announceOwn } from './announce.js';
import type { RecordContext } from './context.js';
import { type Delivery, describe, type RecordLog, redactorOf } from './delivery.js';
import { retryWrite, SolverIdKeeper } from './durable-writes.js';
import { countSpend } from '../adapters/spend-metrics.js';
import { type Outcome, refreshNearDlq, retry, secondsUntil, sendCopy } from './outcome.js';
import { LeaseHolding, leaseWaiting } from './lease-holding.js';
import { ThreadTracking } from './thread-tracking.js';

/** Codes that say a resumed solver id is unknown: submit afresh instead of failing the task. */
const STALE_ID_CODES = new Set(['ERROR_WRONG_CAPTCHA_ID', 'ERROR_WRONG_ID_FORMAT']);
const UNSOLVABLE = 'ERROR_CAPTCHA_UNSOLVABLE';
/** The answer came but no results record can hold it (DynamoDB's 400 KB item). */
export const ANSWER_TOO_LARGE = 'ANSWER_TOO_LARGE';

/** The claim was lost mid-solve (another delivery took the task over). */
export class ClaimLostError extends Error {
  override readonly name = 'ClaimLostError';
  constructor(readonly taskId: string) {
    super(`claim of task ${taskId} was lost to another delivery`);
  }
}

/**
 * The fleet held every thread it may for the whole room wait (ThreadTracking.waitForRoom): the
 * task goes back as over cap, without a submission, so this invocation's slot is free for the
 * tasks whose answers free threads.
 */
class NoRoomError extends SolverOverCapError {
  override name = 'NoRoomError';
  constructor(taskId: string) {
    super('FLEET_AT_CAP', {
      taskId,
      message: 'the fleet holds every thread it may; handed back without a submission',
    });
  }
}

/**
 * The last moment the solver id keeper writes an id (half the record margin before the
 * invocation's end), and so the last a submission answered in its own response waits for it.
 */
function lastIdWriteAt(ctx: RecordContext): number {
  return lastIdWriteBefore(ctx.stopAt, ctx.timing.recordMarginMs);
}

/** The same for an invocation that ends at `stopAt` with a record margin of `recordMarginMs` (`npm start`'s check of its window). */
export function lastIdWriteBefore(stopAt: number, recordMarginMs: number): number {
  return stopAt - recordMarginMs / 2;
}

/**
 * The submission a delivery resumes: the newer of its message's carry and its record's. A carry is
 * what the message knew when its copy was sent; a delivery of that copy may have submitted again
 * since (an unsolvable answer) and kept the new id on the record with the time the solver accepted
 * it. Resuming the carry then polled the old, finished submission, put its id back on the record
 * and paid for another: a task paid twice with both ids kept (a drawn run, --solve-mode wait
 * --crash-rate 0.3 --batch-size 5 --seed 6). A record without that time (kept before it was
 * written) leaves the carry first, as before: a carry is otherwise the newer, made when the
 * table would not take its id.
 */
function newerSubmission(
  carry: Carry | undefined,
  claim: Pick<
    Extract<ClaimResult, { outcome: 'claimed' }>,
    'previousSolverId' | 'previousSolverProvider' | 'previousSolverAcceptedAt'
  >,
  ownProvider: SolverProvider,
): Submission | undefined {
  const recorded =
    claim.previousSolverId !== undefined
      ? {
          solverId: claim.previousSolverId,
          provider: claim.previousSolverProvider ?? ownProvider,
          acceptedAt: claim.previousSolverAcceptedAt ?? 0,
        }
      : undefined;
  if (carry === undefined || recorded === undefined) return carry ?? recorded;
  // A record without the time reads as 0: never newer.
  return recorded.solverId !== carry.solverId && recorded.acceptedAt > carry.acceptedAt ? recorded : carry;
}

/** A paid submission: who accepted it, its id, when. */
interface Submission {
  provider: SolverProvider;
  solverId: string;
  acceptedAt: number;
}

/** A solve's outcome, with the provider whose submission answered. */
type Solved = SolveOutcome & { provider: SolverProvider };

/** The submission's id is on the record and the claim given up: the task waits, parked, until `until`. */
interface Parked {
  parked: true;
  until: number;
}

/** The fields every terminal record of this delivery shares. */
type BaseFields = Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt' | 'status'>;

/** One claimed-or-not task of one delivery. */
export class TaskRun {
  private readonly claimToken: string;
  private readonly provider: SolverProvider;
  private readonly threads: ThreadTracking;
  /** The parked design's thread lease (solveMode `park`, the primary lane); undefined otherwise. */
  private readonly leasing: LeaseHolding | undefined;
  private readonly keeper: SolverIdKeeper;
  private readonly abort = new AbortController();
  private claimLost = false;
  /** The submission this delivery is polling (its own or a resumed one). */
  private submission: Submission | undefined;
  /** The solver id this delivery resumed (already on the record), if it resumed one. */
  private resumedId: string | undefined;
  /** When this delivery's claim runs out, epoch ms. */
  private leaseUntil = 0;
  /** This delivery's wait in the queue, ms (from the first send to its claim): the parked record keeps it. */
  private queueWaitMs: number | undefined;
  /** How long the claim call took, ms. */
  private claimLatencyMs = 0;
  /** Solver responses of this delivery, counted as they come and emitted once it ends. */
  private readonly answers = { submissions: 0, resultRequests: 0, transientErrors: 0, taskErrors: 0 };
  /** What the parked fleet's metric window needs of this delivery (written once it ends, when any). */
  private readonly windowCounts: Required<Omit<WindowCounts, 'solveMs'>> & { solveMs: number[] } = {
    submitErrors: 0,
    resultRequests: 0,
    transientErrors: 0,
    taskErrors: 0,
    accountErrors: 0,
    solved: 0,
    failed: 0,
    solveMs: [],
  };

  constructor(
    private readonly delivery: Delivery,
    private readonly task: Task,
    private readonly ctx: RecordContext,
    private readonly log: RecordLog,
  ) {
    this.provider = ctx.deps.provider ?? 'primary';
    this.claimToken = `${delivery.record.messageId}:${delivery.receiveCount}:${randomUUID()}`;
    const lane = ctx.deps.leases;
    this.leasing =
      lane !== undefined && ctx.deps.settings.solveMode === 'park' && this.provider === 'primary'
        ? new LeaseHolding(lane, task.id, delivery.message, ctx.clock, leaseWaiting(ctx.timing), log)
        : undefined;
    const leasing = this.leasing;
    this.threads = new ThreadTracking(
      ctx.deps.threadLedger,
      ctx.clock,
      log,
      ctx.timing.overCapWaiting,
      ctx.deps.settings.effectiveCap,
      leasing === undefined ? undefined : () => leasing.fleetHeld(),
      leasing === undefined ? undefined : () => leasing.refusedHeld(),
    );
    this.keeper = new SolverIdKeeper({
      write: (solverId, provider, acceptedAt, park) =>
        park
          ? ctx.deps.repository.park(task.id, this.claimToken, {
              solverId,
              provider,
              acceptedAt,
              ...(this.queueWaitMs !== undefined ? { queueWaitMs: this.queueWaitMs } : {}),
            })
          : ctx.deps.repository.recordSolverId(task.id, this.claimToken, solverId, provider, acceptedAt),
      onClaimLost: () => {
        this.claimLost = true;
        this.abort.abort(new ClaimLostError(task.id));
      },
      onUnrecorded: (solverId, provider, acceptedAt) => this.carryEarly({ solverId, provider, acceptedAt }),
      clock: ctx.clock,
      timing: ctx.timing,
      until: lastIdWriteAt(ctx),
      log,
    });
  }

  async run(): Promise<Outcome> {
    const { deps, clock, timing } = this.ctx;
    // Near the DLQ, the first thing: the deliveries before this one ended with no outcome
    // (crashed, timed out), so this one might too, anywhere, its claim included.
    await refreshNearDlq(this.delivery, this.ctx, this.log);
    const claimedAt = clock();
    const claim = await deps.repository.claim({
      task: this.task,
      claimToken: this.claimToken,
      now: claimedAt,
      leaseMs: timing.leaseMs,
      provider: this.provider,
      resumable: this.resumableProviders(),
    });
    this.claimLatencyMs = clock() - claimedAt;
    switch (claim.outcome) {
      case 'conflict':
        return this.refuseConflict(claim.record);
      case 'terminal':
        return this.duplicate(claim.record);
      case 'held':
        return retry(this.ctx, this.delivery, 'lease_held', {
          delaySeconds: secondsUntil(claim.leaseUntil, claimedAt),
          detail: `claimed by another delivery until ${new Date(claim.leaseUntil).toISOString()}`,
        });
      case 'held_elsewhere':
        return this.heldElsewhere(claim.solverProvider, false);
      default:
        return this.work(claim, claimedAt);
    }
  }

  /** Providers this consumer can resume a submission at: its own and those it holds a resume solver for. */
  private resumableProviders(): SolverProvider[] {
    const others = Object.keys(this.ctx.deps.resumeSolvers ?? {}) as SolverProvider[];
    return [this.provider, ...others.filter((p) => p !== this.provider)];
  }

  private solverFor(provider: SolverProvider): SolverPort | undefined {
    return provider === this.provider ? this.ctx.deps.solver : this.ctx.deps.resumeSolvers?.[provider];
  }

  private async work(claim: Extract<ClaimResult, { outcome: 'claimed' }>, claimedAt: number): Promise<Outcome> {
    const { deps } = this.ctx;
    this.leaseUntil = claim.record.leaseUntil ?? claimedAt + this.ctx.timing.leaseMs;
    const queueWaitMs = Math.max(0, claimedAt - this.delivery.sentAt);
    this.queueWaitMs = queueWaitMs;
    if (claim.record.attempts === 1) deps.metrics.addMetric(METRICS.queueWait, MetricUnit.Milliseconds, queueWaitMs);
    const carried = await this.openCarry();
    const resume = newerSubmission(carried, claim, this.provider);
    // The copy's carry stands only when it is the submission resumed (not an older one).
    const carry = resume === carried ? carried : undefined;
    if (claim.takenOver || carry !== undefined)
      this.log.info('task resumed', {
        attempts: claim.record.attempts,
        resume: resume?.solverId,
        at: resume?.provider,
      });
    // A submission known only from the message goes onto the record at once: every later
    // delivery, of this copy or of any other, then resumes it.
    if (
      carry !== undefined &&
      claim.previousSolverId !== carry.solverId &&
      this.solverFor(carry.provider) !== undefined
    )
      this.keeper.keep(carry.solverId, carry.provider, carry.acceptedAt);
    // The previous holder died holding the claim with no id on the record: if it was paid and the
    // table would not take the id, the id is in a fresh copy of this message, which may come back
    // together with (or after) this one when SQS has had a bad minute, or a visibility timeout
    // later when a receive of it was lost. Deliveries wait for it `orphanWaitMs` from the first.
    const waitedSince = claim.orphaned === true ? claimedAt : claim.record.orphanWaitAt;
    // A carried submission of a provider this consumer cannot poll: that provider's lane finishes it.
    // Its id is not this consumer's to write (a carry it cannot verify), so while the record holds
    // none, the claim is given up with the orphan wait: the original message, back without the id
    // (its delete lost), waits for the copy instead of paying again. Before, the overflow lane handed
    // such a copy back with a plain release, and the original, 170 ms later, was submitted afresh.
    if (resume !== undefined && this.solverFor(resume.provider) === undefined)
      return this.heldElsewhere(
        resume.provider,
        true,
        claim.previousSolverId === undefined ? { orphanWaitAt: waitedSince ?? claimedAt } : undefined,
      );
    if (resume === undefined && waitedSince !== undefined && claimedAt < waitedSince + this.ctx.timing.orphanWaitMs) {
      await this.release(claim.orphaned === true ? { orphanWaitAt: claimedAt } : undefined);
      return retry(this.ctx, this.delivery, 'orphan_wait', {
        detail: `the previous holder died with no solver id recorded; waiting for a copy that may carry it until ${new Date(waitedSince + this.ctx.timing.orphanWaitMs).toISOString()}`,
      });
    }
    const claimMs = this.claimLatencyMs;
    if (resume === undefined && (claimMs > this.ctx.timing.degradedStoreMs || this.ctx.dynamoErrors() > 0)) {
      await this.release();
      return retry(this.ctx, this.delivery, 'store', {
        detail: `the results table is struggling (claim ${claimMs} ms, ${this.ctx.dynamoErrors()} failed call(s) in this invocation): no new paid submission until it answers well`,
      });
    }
    if (resume === undefined && this.solveDeadline(claimedAt) - this.ctx.clock() < this.ctx.timing.minSolveWindowMs) {
      await this.release();
      return retry(this.ctx, this.delivery, 'timeout', {
        detail: 'too little of the invocation left to pay for a submission and keep its id',
      });
    }
    const base: BaseFields = {
      method: this.task.method,
      priority: this.task.priority,
      submittedAt: this.task.submittedAt,
      startedAt: claimedAt,
      queueWaitMs,
      provider: this.provider,
    };
    try {
      const answer = carry?.answer;
      const solved =
        carry !== undefined && answer !== undefined
          ? solvedFromCarry({ ...carry, answer })
          : await this.solve(resume, claimedAt);
      if ('parked' in solved) return this.parkedUntil(solved.until);
      return await this.recordSolved(solved, base, claim.record, resume);
    } catch (error) {
      return await this.afterSolveError(error, base, claim.record);
    } finally {
      // Every path reports the requests it made and frees the thread it held in the ledger (or
      // its lease: a parked task's stays taken until the governor sees its answer).
      this.emitAnswerCounts();
      await this.flushWindowCounts();
      await this.keeper.settle();
      await this.threads.settle();
      await this.leasing?.release();
    }
  }

  /**
   * The id names another task (other content) whose record lives: this message goes to the DLQ
   * with `ID_CONFLICT`, and the first task's record stays as it is (no `rejected` over it, no
   * event: its producer is still waiting on it).
   */
  private refuseConflict(existing: TaskResult): Outcome {
    const detail = describeIdConflict(this.task.id, existing);
    this.log.warn('task id in use by other content', { reason: ID_CONFLICT, existingStatus: existing.status });
    return {
      kind: 'dead_letter',
      letter: {
        body: this.delivery.record.body,
        reason: ID_CONFLICT,
        reasonDetail: detail,
        taskId: this.task.id,
        sourceQueue: this.delivery.sourceQueue,
      },
    };
  }

  /**
   * A finished task delivered again: acknowledged once its event is out (`announceFound`: it
   * may publish it, or wait for it).
   */
  private async duplicate(record: TaskResult): Promise<Outcome> {
    this.ctx.deps.metrics.addMetric(METRICS.duplicates, MetricUnit.Count, 1);
    this.log.info('duplicate delivery of a finished task', { status: record.status });
    return announceFound(this.ctx, this.delivery, this.log, record, 'duplicate');
  }

  /**
   * The task's submission belongs to a provider this consumer cannot poll: paying its own would
   * pay twice. The message goes back for that provider's lane (the claim, if taken, released).
   */
  private async heldElsewhere(
    provider: SolverProvider,
    claimed: boolean,
    note?: { orphanWaitAt: number },
  ): Promise<Outcome> {
    if (claimed) await this.release(note);
    const carry = this.delivery.redelivery?.carry;
    return retry(this.ctx, this.delivery, 'held_elsewhere', {
      detail: `the ${provider} provider holds this task's submission; its lane finishes it`,
      ...(carry !== undefined && carry.provider === provider ? { carry } : {}),
    });
  }

  /** The carry of a fresh copy, when its seal holds for this task's body; undefined otherwise. */
  private async openCarry(): Promise<Carry | undefined> {
    const carry = this.delivery.redelivery?.carry;
    const seal = this.ctx.deps.seal;
    if (carry === undefined) return undefined;
    const { mac, ...fields } = carry;
    const text = carryText(this.delivery.record.body, this.task.id, fields);
    // A carry sealed with a key this consumer does not hold is another lane's: it stands as its
    // holder's claim on the task (heldElsewhere), never as an answer to record.
    if (this.solverFor(carry.provider) === undefined) return carry;
    const verified = seal !== undefined && (await seal.verify(carry.provider, text, mac).catch(() => false));
    if (!verified) this.log.warn('carried submission not verified; ignored', { provider: carry.provider });
    return verified ? carry : undefined;
  }

  /** When a solve started at `startedAt` gives up: its own deadline, or the invocation's end less the margin. */
  private solveDeadline(startedAt: number): number {
    const { deps, timing, stopAt } = this.ctx;
    return Math.min(startedAt + deps.settings.solveDeadlineSeconds * 1000, stopAt - timing.recordMarginMs);
  }

  /**
   * The bounds of a submission the provider answers in its own response, whose request lasts the
   * recognition (the client keeps to them; others are answered at once and their id kept):
   * `submitBy`, the claim's rule (no fresh submission with less than `minSolveWindowMs` before the
   * deadline) kept at the moment of sending, after waits for a thread and retries; `answerBy`, how
   * long it may wait for its answer: past the deadline, up to the last moment the solver id keeper
   * still writes, which leaves the rest of the record margin to record the answer or carry it.
   */
  private sendBounds(deadlineAt: number): { submitBy: number; answerBy: number } {
    return { submitBy: deadlineAt - this.ctx.timing.minSolveWindowMs, answerBy: lastIdWriteAt(this.ctx) };
  }

  /** Submit (or resume) and poll; resubmit unsolvable captchas as the settings allow. */
  private async solve(resumeFrom: Submission | undefined, startedAt: number): Promise<Solved | Parked> {
    const { deps } = this.ctx;
    const deadlineAt = this.solveDeadline(startedAt);
    let resume = resumeFrom;
    let unsolvable = 0;
    this.submission = resume;
    this.resumedId = resume?.solverId;
    if (resume !== undefined) this.threads.resuming(resume.solverId);
    for (;;) {
      const provider = resume?.provider ?? this.provider;
      const solver = this.solverFor(provider) ?? deps.solver;
      try {
        if (resume === undefined && !(await this.room(deadlineAt))) throw new NoRoomError(this.task.id);
        if (resume === undefined && this.mayPark(solver)) return await this.submitToPark(solver, deadlineAt);
        if (resume !== undefined && resume.provider === 'primary' && this.mayPark(solver, true))
          return await this.resumeOrPark(resume, deadlineAt);
        const outcome = await solver.solve(this.task, {
          deadlineAt,
          ...this.sendBounds(deadlineAt),
          signal: this.abort.signal,
          ...(resume !== undefined ? { resumeSolverId: resume.solverId } : {}),
          onSolverAnswer: (answer) => this.countAnswer(answer),
          onSubmitted: (solverId) => this.submitted(solverId),
        });
        return { ...outcome, provider };
      } catch (error) {
        if (this.claimLost) throw new ClaimLostError(this.task.id);
        // Refused over the cap: wait for a thread to free rather than retry into the same refusal.
        if (error instanceof SolverOverCapError && !(error instanceof NoRoomError) && (await this.refused(deadlineAt)))
          continue;
        if (error instanceof SolverTaskError && resume !== undefined && STALE_ID_CODES.has(error.code)) {
          this.log.warn('resumed solver id is unknown to the solver; submitting afresh', {
            solverId: resume.solverId,
            at: resume.provider,
            code: error.code,
          });
          resume = undefined;
          continue;
        }
        if (error instanceof SolverTaskError && error.code === UNSOLVABLE) {
          unsolvable = Math.max(unsolvable + 1, (await this.countUnsolvable()) ?? 0);
          if (unsolvable <= deps.settings.unsolvableResubmits) {
            resume = undefined;
            this.log.info('solver could not solve the captcha; resubmitting', {
              resubmit: unsolvable,
              of: deps.settings.unsolvableResubmits,
            });
            continue;
          }
        }
        throw error;
      }
    }
  }

  /**
   * The task's unsolvable answers so far, this one counted on the record (once per submission):
   * a parked task's resumption is a new delivery, so a count kept here alone restarted at each and
   * an unsolvable captcha was resubmitted until its message neared the DLQ (8 submissions a task
   * at `unsolvableResubmits` 2). Undefined when the table cannot say (this delivery's own count stands).
   */
  private async countUnsolvable(): Promise<number | undefined> {
    const solverId = this.submission?.solverId;
    if (solverId === undefined) return undefined;
    return this.ctx.deps.repository.countUnsolvable?.(this.task.id, this.claimToken, solverId).catch(() => undefined);
  }

  /** The solver accepted a submission: it is paid for, so its id is kept whatever the table does. */
  private submitted(solverId: string, options: { acceptedAt?: number; park?: boolean } = {}): void {
    this.submission = { solverId, provider: this.provider, acceptedAt: options.acceptedAt ?? this.ctx.clock() };
    // Parking at once: the "parked" line follows within milliseconds with the same id (and the
    // record keeps it), so this one is a debug line; CloudWatch Logs bills every line it ingests.
    if (options.park === true) this.log.debug('submitted to the solver', { solverId });
    else this.log.info('submitted to the solver', { solverId });
    this.threads.submitted(solverId);
    this.keeper.keep(solverId, this.provider, this.submission.acceptedAt, { park: options.park === true });
  }

  /**
   * Before a fresh submission: room in the fleet's ledger (the waiting design), or (the parked
   * design) money in the governor's spend grant, then a thread lease under the refusal room of
   * that same read of the ledger (the fleet-wide refusal signal, `fleetRoomOf`), then the grant's
   * reservation with the lease held (the grant counts the leases as solves in flight). A grant used
   * up for the whole wait hands the task back without a submission in both designs; a reservation
   * others took first gives the lease back and waits for a new grant.
   */
  private async room(deadlineAt: number): Promise<boolean> {
    const leasing = this.leasing;
    if (leasing === undefined) return this.threads.waitForRoom(deadlineAt);
    if (this.ctx.probe !== undefined) return this.probeRoom(leasing);
    for (;;) {
      if (!(await this.threads.waitForGrant(deadlineAt))) return false;
      if (!(await leasing.take(deadlineAt, this.threads.lastGrantReading))) return false;
      if (await this.threads.reserveLeased()) return true;
      await leasing.release();
    }
  }

  /**
   * The governor's probe (RecordContext.probe): the grant's money read once, a probe slot, the
   * grant's reservation; nothing waited for (a probe the money or the slots do not allow now is
   * not made: the governor makes its synthetic one).
   */
  private async probeRoom(leasing: LeaseHolding): Promise<boolean> {
    if (!(await this.threads.waitForGrant(this.ctx.clock()))) return false;
    if (!(await leasing.takeProbe())) return false;
    if (await this.threads.reserveLeased()) return true;
    await leasing.release();
    return false;
  }

  /** After an over-cap refusal: whether to wait for a thread and submit again (never for the governor's probe). */
  private async refused(deadlineAt: number): Promise<boolean> {
    // The probe's refusal is the plan's answer it asked for (the ledger has it): its slot freed, no wait.
    if (this.ctx.probe !== undefined) {
      await this.leasing?.release();
      return false;
    }
    if (this.leasing !== undefined) return this.leasing.refused();
    return this.threads.waitForFreeThread(deadlineAt);
  }

  /**
   * Whether this delivery parks its fresh submission instead of waiting for the answer: the
   * parked design, a solver that can submit alone, and far enough from the DLQ that the delivery
   * that resumes it is not the message's last (near it the task is solved here, its lease held).
   */
  private mayPark(solver: SolverPort, leaseLater = false): boolean {
    const { settings } = this.ctx.deps;
    const beforeDlq = settings.maxReceiveCount - this.ctx.timing.requeue.beforeReceives;
    return (
      this.leasing !== undefined &&
      (leaseLater || this.leasing.lease !== undefined) &&
      solver.submit !== undefined &&
      this.delivery.receiveCount < beforeDlq &&
      !this.delivery.moved
    );
  }

  /**
   * Submit; once the id is on the record and the claim given up, park. A service that answered in
   * its submission's response is recorded at once; with `parkAfterMs` this invocation first polls
   * for that long and records a quick answer itself. An id the table did not take in time is
   * polled here as in the waiting design (its lease held until the answer).
   */
  private async submitToPark(solver: SolverPort, deadlineAt: number): Promise<Solved | Parked> {
    if (solver.submit === undefined) throw new TypeError('the solver cannot submit alone');
    const submitted = await solver.submit(this.task, {
      deadlineAt,
      ...this.sendBounds(deadlineAt),
      signal: this.abort.signal,
      onSolverAnswer: (answer) => this.countAnswer(answer),
    });
    const { solverId, acceptedAt } = submitted;
    if (submitted.outcome !== undefined) {
      this.submitted(solverId, { acceptedAt });
      return { ...submitted.outcome, provider: this.provider };
    }
    const window = this.ctx.timing.parkAfterMs;
    // With no window the id's write gives the claim up too: one write, then park.
    this.submitted(solverId, { acceptedAt, park: window <= 0 });
    if (window > 0) {
      const quick = await this.pollWithin(solverId, Math.min(deadlineAt, acceptedAt + window));
      if (quick !== undefined) return quick;
    }
    const parked = await this.park({ solverId, provider: this.provider, acceptedAt }, window > 0);
    if (parked !== undefined) return parked;
    if (this.claimLost) throw new ClaimLostError(this.task.id);
    // Not on the record in time: keep trying the plain write beside the polls, as the waiting design does.
    if (!this.keeper.recorded) this.keeper.keep(solverId, this.provider, acceptedAt);
    return this.poll(solverId, deadlineAt);
  }

  /**
   * A resumed submission (parked design): asked for at once, and polled for `parkAfterMs` at most;
   * not answered by then, it parks again (its thread is the solver's already), so no invocation
   * waits on a solve that outlasted its lease (or an outage).
   */
  private async resumeOrPark(resume: Submission, deadlineAt: number): Promise<Solved | Parked> {
    const solver = this.solverFor(resume.provider) ?? this.ctx.deps.solver;
    const window = Math.max(this.ctx.timing.parkAfterMs, 1);
    try {
      const outcome = await solver.solve(this.task, {
        deadlineAt: Math.min(deadlineAt, this.ctx.clock() + window),
        signal: this.abort.signal,
        resumeSolverId: resume.solverId,
        onSolverAnswer: (answer) => this.countAnswer(answer),
      });
      return { ...outcome, provider: resume.provider };
    } catch (error) {
      if (!(error instanceof SolverTimeoutError && error.code === 'DEADLINE_EXCEEDED') || this.claimLost) throw error;
    }
    const parked = await this.parkLive(resume);
    if (parked !== undefined) return parked;
    const outcome = await solver.solve(this.task, {
      deadlineAt,
      signal: this.abort.signal,
      resumeSolverId: resume.solverId,
      onSolverAnswer: (answer) => this.countAnswer(answer),
    });
    return { ...outcome, provider: resume.provider };
  }

  /** Poll this delivery's fresh submission until `until`; undefined when it is not answered by then. */
  private async pollWithin(solverId: string, until: number): Promise<Solved | undefined> {
    try {
      return await this.poll(solverId, until);
    } catch (error) {
      if (error instanceof SolverTimeoutError && error.code === 'DEADLINE_EXCEEDED' && !this.claimLost)
        return undefined;
      throw error;
    }
  }

  private async poll(solverId: string, deadlineAt: number): Promise<Solved> {
    const outcome = await this.ctx.deps.solver.solve(this.task, {
      deadlineAt,
      signal: this.abort.signal,
      continueSolverId: solverId,
      onSolverAnswer: (answer) => this.countAnswer(answer),
    });
    return { ...outcome, provider: this.provider };
  }

  /**
   * Park the submission: its id on the record (`recorded` by the keeper's parking write, or else
   * one more write that gives the claim up now). Undefined when the id is not on the record in
   * time: the caller polls on.
   */
  private async park(submission: Submission, separateWrite: boolean): Promise<Parked | undefined> {
    const lease = this.leasing?.lease;
    if (lease === undefined) return undefined;
    if (!(await this.keeper.recordedWithin(this.ctx.timing.parkRecordWaitMs))) return undefined;
    if (separateWrite) {
      const { deps, timing, stopAt, clock } = this.ctx;
      const parkedNow = await retryWrite(() => deps.repository.park(this.task.id, this.claimToken, submission), {
        until: stopAt - timing.requeueReserveMs,
        clock,
        timing: timing.writeRetry,
      }).catch(() => false);
      if (!parkedNow) return undefined;
    }
    this.leasing?.parked();
    return { parked: true, until: lease.until };
  }

  /**
   * The submission a failed solve leaves live at the solver (parked design): one this delivery
   * polled, when the polls ended in a timeout or a passing fault (not a refusal, an account
   * error or a lost claim).
   */
  private liveSubmission(error: unknown): Submission | undefined {
    if (this.leasing === undefined || this.submission === undefined || this.claimLost) return undefined;
    if (error instanceof SolverTimeoutError && error.code === 'ABORTED') return undefined;
    const passing = error instanceof SolverTimeoutError || error instanceof SolverTransientError;
    return passing ? this.submission : undefined;
  }

  /**
   * Park a submission the solver still works on: under this delivery's lease, or (a resumed one,
   * whose thread the solver holds already) under any free slot whatever the limit. Undefined when
   * no slot or no record write could be had: the caller goes on as the waiting design does.
   */
  private async parkLive(submission: Submission): Promise<Parked | undefined> {
    const leasing = this.leasing;
    // The governor watches the plan's submissions only.
    if (leasing === undefined || submission.provider !== 'primary') return undefined;
    if (!this.mayPark(this.ctx.deps.solver, true)) return undefined;
    if (leasing.lease === undefined && !(await leasing.takeHeld().catch(() => false))) return undefined;
    const acceptedAt = submission.acceptedAt > 0 ? submission.acceptedAt : this.ctx.clock();
    // The id is on the record already (resumed, or kept by the keeper): this write gives the claim up.
    if (!this.keeper.recorded && this.submission?.solverId !== this.resumedId) return undefined;
    return this.park({ ...submission, acceptedAt }, true);
  }

  /** The parked outcome: the message hidden until the lease ends (the governor shows it sooner). */
  private parkedUntil(until: number): Outcome {
    this.log.info('task parked until its answer is ready', {
      solverId: this.submission?.solverId,
      until: new Date(until).toISOString(),
    });
    return { kind: 'park', delaySeconds: secondsUntil(until, this.ctx.clock(), 1) };
  }

  /**
   * The table would not take the submission's id: put it in a fresh copy of the message now, so
   * that a crash from here on still resumes this submission. The copy comes back after this
   * invocation (the claim's lease holds it off meanwhile).
   */
  private async carryEarly(submission: Submission): Promise<void> {
    const carry = await this.sealCarry(submission);
    if (carry === undefined) return;
    // Back just after this claim runs out: before the original message's own visibility timeout
    // (never shorter than the lease) could bring it back without the id.
    const delaySeconds = secondsUntil(this.leaseUntil + 500, this.ctx.clock(), 1);
    await sendCopy(this.delivery, this.ctx, this.log, {
      delaySeconds,
      failing: false,
      carry,
      why: 'solver_id_unrecorded',
    });
  }

  /** A carry of the submission (and the answer, when it fits), sealed with its provider's key. */
  private async sealCarry(
    submission: Submission,
    read?: { answer: string; answeredAt: number },
  ): Promise<Carry | undefined> {
    const seal = this.ctx.deps.seal;
    if (seal === undefined) return undefined;
    const fields: Omit<Carry, 'mac'> = {
      provider: submission.provider,
      solverId: submission.solverId,
      acceptedAt: submission.acceptedAt,
      ...(read !== undefined && answerFitsCarry(read.answer) ? read : {}),
    };
    const mac = await seal
      .seal(submission.provider, carryText(this.delivery.record.body, this.task.id, fields))
      .catch(() => undefined);
    return mac === undefined ? undefined : { ...fields, mac };
  }

  /** A carry of the current submission when its id is not on the record (else nothing to carry). */
  private async carryIfUnrecorded(): Promise<Carry | undefined> {
    const submission = this.submission;
    if (submission === undefined || this.keeper.recorded) return undefined;
    return this.sealCarry(submission);
  }

  /**
   * Write the solved record, retrying while the table is throttled or down. An answer no record can
   * hold ends the task as `failed` with ANSWER_TOO_LARGE; an answer the table will not take within
   * the margin goes, sealed, into a fresh copy of the message: never thrown away, never paid again.
   */
  private async recordSolved(
    solved: Solved,
    base: BaseFields,
    claimed: TaskResult,
    resumed: Submission | undefined,
  ): Promise<Outcome> {
    const { deps, clock } = this.ctx;
    const m = deps.metrics;
    const completedAt = clock();
    const result = solvedFields(
      base,
      this.fromAcceptance(solved, resumed),
      completedAt,
      this.issuedNoLaterThan(solved, resumed),
    );
    const { solveMs, tokenExpiresAt } = result;
    m.addMetric(METRICS.solveDuration, MetricUnit.Milliseconds, solveMs, MetricResolution.High);
    const method = this.task.method as SolverMethod;
    let written: boolean;
    try {
      written = await this.writeTerminal(result);
    } catch (error) {
      if (isStoreError(error) && error.kind === 'too_large')
        return this.fail(
          new SolverTaskError(ANSWER_TOO_LARGE, { taskId: this.task.id, message: error.message }),
          base,
          claimed,
        );
      // Read but not recorded: the answer travels, sealed, in a fresh copy of the message.
      await this.release();
      const submission = { provider: solved.provider, solverId: solved.solverId, acceptedAt: solved.acceptedAt };
      const carry = await this.sealCarry(submission, { answer: solved.answer, answeredAt: solved.answeredAt });
      return retry(this.ctx, this.delivery, isStoreError(error) ? 'store' : 'error', {
        detail: `answer read but not recorded (${describe(error)})${carry ? '; it travels in a fresh copy of the message' : ''}`,
        ...(carry !== undefined ? { carry } : {}),
      });
    }
    if (!written) return this.afterLostClaim();
    m.addMetric(METRICS.solved, MetricUnit.Count, 1);
    this.windowCounts.solved += 1;
    this.windowCounts.solveMs.push(solveMs);
    countSpend(m, method, solved.costUsd);
    if (recordedStale(result)) {
      // Recorded as solved (the solver was paid and the answer is the truth of what happened),
      // but a producer must not use it: `get`/`wait` report it stale, and operators see the count.
      m.addMetric(METRICS.tokensStale, MetricUnit.Count, 1);
      this.log.warn('token answer recorded already stale', {
        solverId: solved.solverId,
        tokenExpiresAt,
        resumed: resumed !== undefined,
      });
    }
    m.addMetric(METRICS.endToEnd, MetricUnit.Milliseconds, Math.max(0, completedAt - this.task.submittedAt));
    this.log.info('task solved', {
      solverId: solved.solverId,
      solveMs,
      resultRequests: solved.resultRequests,
      answerLength: solved.answer.length,
    });
    return announceOwn(
      this.ctx,
      this.delivery,
      this.log,
      { ...claimed, ...result, completedBy: this.claimToken },
      'solved',
    );
  }

  /** `complete()` under this claim, retried within the invocation's margin. */
  private writeTerminal(result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>): Promise<boolean> {
    const { deps, clock, timing, stopAt } = this.ctx;
    return retryWrite(() => deps.repository.complete(this.task.id, this.claimToken, result), {
      until: stopAt - timing.requeueReserveMs,
      clock,
      timing: timing.writeRetry,
    });
  }

  /** Record a task-terminal error as `failed` and announce it. */
  private async fail(error: SolverTaskError, base: BaseFields, claimed: TaskResult): Promise<Outcome> {
    const { deps, clock } = this.ctx;
    const completedAt = clock();
    const redactor = redactorOf(this.ctx);
    const result = {
      ...base,
      status: 'failed' as const,
      errorCode: redactor.redact(error.code),
      errorMessage: redactor.redact(error.message),
      completedAt,
    };
    let written: boolean;
    try {
      written = await this.writeTerminal(result);
    } catch (failure) {
      // Not recorded: the claim is released, and the next delivery resumes the submission (its
      // id on the record or carried) without waiting for the lease.
      await this.release();
      const carry = await this.carryIfUnrecorded();
      return retry(this.ctx, this.delivery, isStoreError(failure) ? 'store' : 'error', {
        detail: `failure not recorded (${describe(failure)})`,
        ...(carry !== undefined ? { carry } : {}),
      });
    }
    if (!written) return this.afterLostClaim();
    const single = deps.metrics.singleMetric();
    single.addDimension('ErrorCode', result.errorCode);
    single.addMetric(METRICS.failed, MetricUnit.Count, 1);
    this.windowCounts.failed += 1;
    deps.metrics.addMetric(METRICS.endToEnd, MetricUnit.Milliseconds, Math.max(0, completedAt - this.task.submittedAt));
    this.log.warn('task failed', { errorCode: result.errorCode, errorMessage: result.errorMessage });
    return announceOwn(
      this.ctx,
      this.delivery,
      this.log,
      { ...claimed, ...result, completedBy: this.claimToken },
      'failed',
    );
  }

  /** The solve (or its record) ended in an error: record a task error, else hand the task back by class. */
  private async afterSolveError(error: unknown, base: BaseFields, claimed: TaskResult): Promise<Outcome> {
    if (error instanceof ClaimLostError) {
      this.log.warn('claim lost while solving');
      return this.afterLostClaim();
    }
    if (error instanceof SolverTaskError) return this.fail(error, base, claimed);
    // The parked design: a submission the solver still works on (its answer not read in time, an
    // outage outlasting the polls' retries) parks rather than going back without its thread.
    const live = this.liveSubmission(error);
    if (live !== undefined) {
      const parked = await this.parkLive(live);
      if (parked !== undefined) return this.parkedUntil(parked.until);
    }
    // Every other outcome hands the task back. The claim is released (lease 0, solver id kept)
    // rather than kept: a kept lease would make the retry wait for it and burn a receive as
    // `lease_held`; a released one lets the retry take over at once and resume the same
    // submission, so nothing is paid twice. An id the table never took travels with the message.
    await this.release();
    const carry = await this.carryIfUnrecorded();
    const extra = {
      detail: describe(error),
      ...(error instanceof SolverError ? { code: error.code } : {}),
      ...(carry !== undefined ? { carry } : {}),
    };
    if (error instanceof SolverAccountError) {
      this.ctx.deps.metrics.addMetric(METRICS.accountErrors, MetricUnit.Count, 1);
      this.windowCounts.accountErrors += 1;
      return retry(this.ctx, this.delivery, 'account', extra);
    }
    // The answers behind these (over-cap, transient) were counted as they came (countAnswer).
    // The governor's probe's task goes back at once, no wait of its own counted (retry, Outcome.probe).
    if (error instanceof SolverOverCapError) return retry(this.ctx, this.delivery, 'over_cap', extra);
    if (error instanceof SolverTimeoutError) return retry(this.ctx, this.delivery, 'timeout', extra);
    if (error instanceof SolverError) return retry(this.ctx, this.delivery, 'transient', extra);
    if (isStoreError(error)) return retry(this.ctx, this.delivery, 'store', extra);
    return retry(this.ctx, this.delivery, 'error', extra);
  }

  /** Give the claim up so the next delivery need not wait for the lease (best effort: else the lease runs out). */
  private async release(note?: { orphanWaitAt: number }): Promise<void> {
    try {
      await this.ctx.deps.repository.release(this.task.id, this.claimToken, note);
    } catch (error) {
      this.log.warn('claim could not be released', { error: describe(error) });
    }
  }

  /** complete() found the claim gone: acknowledge only if some delivery recorded a result. */
  private async afterLostClaim(): Promise<Outcome> {
    const { clock } = this.ctx;
    let current: TaskResult | undefined;
    try {
      current = await this.ctx.deps.repository.get(this.task.id, { consistent: true });
    } catch (error) {
      return retry(this.ctx, this.delivery, 'store', { detail: describe(error) });
    }
    if (current !== undefined && isTerminal(current.status)) {
      this.ctx.deps.metrics.addMetric(METRICS.duplicates, MetricUnit.Count, 1);
      this.log.warn('claim lost, but the task has a terminal record', { status: current.status });
      return announceFound(this.ctx, this.delivery, this.log, current, 'duplicate');
    }
    return retry(this.ctx, this.delivery, 'claim_lost', {
      delaySeconds: current?.leaseUntil !== undefined ? secondsUntil(current.leaseUntil, clock()) : 0,
      detail: 'the claim was lost and the task has no terminal record yet',
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
    const probe = this.ctx.probe;
    if (probe !== undefined && probe.answer === undefined && answer.request === 'submit') {
      if (answer.outcome === 'over_cap') probe.answer = 'refused';
      else if (answer.outcome === 'accepted' || answer.outcome === 'answered') probe.answer = 'accepted';
    }
    // The submission's own response carried the answer: counted once already, as accepted.
    if (answer.request === 'submit' && answer.outcome === 'answered') return;
    if (answer.request === 'submit' && answer.outcome === 'over_cap') {
      // No extra dimension: the single metric keeps the plain `service` dimension the alarms,
      // the dashboard and the governor read. A single metric publishes on every addMetric.
      const single = this.ctx.deps.metrics.singleMetric();
      single.addMetric(METRICS.overCapAnswers, MetricUnit.Count, 1);
      single.addMetric(METRICS.submissions, MetricUnit.Count, 1);
      return;
    }
    if (answer.request === 'submit') this.answers.submissions += 1;
    else this.answers.resultRequests += 1;
    if (answer.outcome === 'transient') this.answers.transientErrors += 1;
    else if (answer.outcome === 'task_terminal') this.answers.taskErrors += 1;
    // The window: accepted (and refused) submissions are the ledger's; the rest counted here.
    const w = this.windowCounts;
    if (answer.request === 'submit' && answer.outcome !== 'accepted') w.submitErrors += 1;
    if (answer.request === 'result') w.resultRequests += 1;
    if (answer.outcome === 'transient') w.transientErrors += 1;
    else if (answer.outcome === 'task_terminal') w.taskErrors += 1;
  }

  /**
   * The parked fleet's metric window (functions/core/solve-window.ts): one write when this
   * delivery saw anything the ledger does not count; an ordinary parked delivery writes nothing.
   * Best effort, as the metrics are: a failed write is logged and the delivery's outcome stands.
   */
  private async flushWindowCounts(): Promise<void> {
    const window = this.ctx.deps.solveWindow;
    const counts = this.windowCounts;
    if (window === undefined || !hasCounts(counts)) return;
    try {
      await window.add({ ...counts, solveMs: [...counts.solveMs] });
    } catch (error) {
      this.log.warn('metric window not written', { error: describe(error) });
    }
    for (const name of WINDOW_COUNTERS) counts[name] = 0;
    counts.solveMs.length = 0;
  }

  private emitAnswerCounts(): void {
    const m = this.ctx.deps.metrics;
    const { submissions, resultRequests, transientErrors, taskErrors } = this.answers;
    if (submissions > 0) m.addMetric(METRICS.submissions, MetricUnit.Count, submissions);
    if (resultRequests > 0) m.addMetric(METRICS.resultRequests, MetricUnit.Count, resultRequests);
    if (transientErrors > 0) m.addMetric(METRICS.transientErrors, MetricUnit.Count, transientErrors);
    if (taskErrors > 0) m.addMetric(METRICS.taskErrors, MetricUnit.Count, taskErrors);
    this.answers.submissions = this.answers.resultRequests = this.answers.transientErrors = this.answers.taskErrors = 0;
  }

  /**
   * The latest the token can have been issued. A fresh submission's answer is read within one
   * poll of being issued, so the read time stands. A resumed (or carried) submission's answer may
   * have waited at the solver since the previous holder died: it was issued no earlier than the
   * task's message was first received (nothing was submitted before that), and that earlier time
   * is taken so the expiry is never later than the truth.
   */
  /**
   * A resumed submission's solve as it ran: from its first acceptance (on the record), not from
   * this delivery's resume. Measured from the resume, a solve that outlived its invocation read
   * short in the record, SolveDuration and the metric window (a 30 s solve as 9 s, another as
   * 5 ms); the governor's watch measures parked solves from their lease's acceptance the same way.
   */
  private fromAcceptance(solved: Solved, resumed: Submission | undefined): Solved {
    if (resumed === undefined || solved.solverId !== resumed.solverId || !(resumed.acceptedAt > 0)) return solved;
    return { ...solved, acceptedAt: Math.min(solved.acceptedAt, resumed.acceptedAt) };
  }

  private issuedNoLaterThan(solved: Solved, resumed: Submission | undefined): number {
    if (resumed === undefined || solved.solverId !== resumed.solverId) return solved.answeredAt;
    return Math.min(solved.answeredAt, this.delivery.firstReceivedAt);
  }
}

/** A carried answer as a solve's outcome: read by an earlier delivery, recorded by this one. */
function solvedFromCarry(carry: Carry & { answer: string }): Solved {
  return {
    answer: carry.answer,
    solverId: carry.solverId,
    acceptedAt: carry.acceptedAt,
    answeredAt: carry.answeredAt ?? carry.acceptedAt,
    resultRequests: 0,
    retries: { overCap: 0, transient: 0 },
    provider: carry.provider,
  };
}
