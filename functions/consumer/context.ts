/**
 * What the consumer is built from (its dependencies and timings) and what the records of one
 * invocation share. The Lambda handler and the local runtime pass their own dependencies.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { Metrics } from '../adapters/metrics.js';
import { ACCOUNT_HAND_BACK_BACKOFF, HAND_BACK_BACKOFF, handBackSeconds, REQUEUE_DEFAULTS } from '../core/backoff.js';
import type { CarrySeal, Clock, CompletionEvents, ResultsRepository, SolverPort, TaskQueue } from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import type { Redactor } from '../core/redaction.js';
import { RECORD_MARGIN_SECONDS, type FleetSettings } from '../core/settings.js';
import { LEASE_WAIT_POLL_MS, type LeaseLane } from '../core/thread-leases.js';
import type { ThreadLedgerRecorder } from '../core/thread-ledger.js';
import type { SolveWindowWriter } from '../core/solve-window.js';
import type { OverCapWaiting } from './thread-tracking.js';

/** SQS caps a visibility timeout at 12 hours. */
export const MAX_VISIBILITY_SECONDS = 43_200;

/** When a message is put back as a fresh copy instead of burning receives toward the DLQ. */
export interface RequeuePolicy {
  /**
   * A record handed back this many receives or fewer before `maxReceiveCount` goes back as a
   * fresh copy (its receive count starts again). @default 3
   */
  beforeReceives: number;
  /**
   * A delivery this many receives or fewer before `maxReceiveCount` first makes a fresh copy of
   * its message, before any work: the deliveries before it ended without an outcome (crashes,
   * timeouts), and the next one might too. @default 1
   */
  refreshBeforeReceives: number;
  /**
   * Copies made because deliveries kept failing (not while waiting for a store or the holding
   * lane), after which the message is left to SQS's redrive: a message that fails every delivery
   * still reaches the DLQ. @default 3
   */
  maxGenerations: number;
  /**
   * Copies made while waiting (a store down, another lane holding the submission) after which
   * further copies count as failing ones: a wait that never ends (a forged carry naming a lane
   * that does not exist) still reaches the DLQ, days later. @default 50
   */
  maxWaitCopies: number;
}

/** Timings the consumer uses; defaults come from the settings, tests and the local runtime shrink them. */
export interface ConsumerTiming {
  /** How long a claim protects a task, ms. @default settings.leaseSeconds × 1000 */
  leaseMs: number;
  /**
   * How long deliveries wait, from the first that found it, for the fresh copy a dead holder of a
   * claim with no solver id on it may have sent with its id (`orphan_wait`), ms. The copy is
   * hidden until just after that claim's lease, so it is receivable by the time the claim is
   * found dead; a receive of it that is lost (committed, its answer never back) or whose receiver
   * dies hides it for a queue visibility timeout. So: a visibility timeout, and a lease for the
   * copy's first receive to happen, after the first delivery found the claim. One store backoff was
   * too short for that (a drawn run paid a task twice with both ids kept, as a delivery submitting
   * before the copy came back would: bench:sweep seed 11004).
   * @default settings.visibilityTimeoutSeconds × 1000 + leaseMs
   */
  orphanWaitMs: number;
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
  /** First delay after the results table or the queue failed, seconds; doubles per receive. @default 10 */
  storeRetryBaseSeconds: number;
  /** Longest delay after a store failure, seconds. @default 900 */
  storeRetryMaxSeconds: number;
  /** Retries of one write (a solver id, a terminal record) inside the invocation: first wait and longest wait, ms. @default 100 / 2000 */
  writeRetry: { firstMs: number; maxMs: number };
  /**
   * A paid submission's id whose write failed, or has not answered this long after the solver
   * accepted it, is carried in a fresh copy of the message as well, ms: until it is stored
   * somewhere, a crash would cost a second payment. @default 1000
   */
  solverIdCarryAfterMs: number;
  /** Time kept after a terminal write's retries for putting its answer in a fresh copy, ms. @default 1000 */
  requeueReserveMs: number;
  /**
   * No fresh submission is made with less than this before the solve's deadline (a claim that
   * took long, a slow table): a paid submission needs time to keep its id and read its answer.
   * The task is handed back instead; a resumed submission is polled whatever is left. @default 5000
   */
  minSolveWindowMs: number;
  /**
   * A claim that took longer than this, or an invocation that has already seen the results table
   * fail, does not start a fresh (paid) submission: the table that will have to keep its id is
   * struggling, and waiting costs nothing. The task goes back to wait, ms. @default 2000
   */
  degradedStoreMs: number;
  requeue: RequeuePolicy;
  /** With a thread ledger: how a refused invocation waits for a thread before submitting again. @default 1 s polls, 15 s at most, 3 waits */
  overCapWaiting: OverCapWaiting;
  /**
   * Parked design: a delivery waiting for a thread lease reads the shards this often when a round
   * reads a full shard, ×0.5–1.5 jitter, ms (sooner for a round that reads less, the same read
   * units a second: `leaseWaitPollMs`; the thread ledger's waits keep `overCapWaiting.pollMs`): a
   * slot the watch frees is taken about half of this later. Its bounds are `overCapWaiting`'s.
   * @default LEASE_WAIT_POLL_MS (250)
   */
  leaseWaitPollMs: number;
  /**
   * Parked design: how long a delivery waits for its submission's id to reach the record before
   * it polls the submission itself instead of parking it, ms. @default 3000
   */
  parkRecordWaitMs: number;
  /**
   * Parked design: how long the submitting invocation polls for the answer itself before it parks
   * the task, ms. A solve that answers sooner is recorded at once (no second delivery); 0 parks
   * straight after the submission's id is on the record. Waiting costs Lambda time and a park
   * cycle costs about two seconds of it in requests and writes (docs/cost.md), so it pays only
   * where many solves answer that fast (the local simulator's do). @default 0
   */
  parkAfterMs: number;
  /**
   * How long the writer of a terminal record has to publish its completion event and note it,
   * ms. A delivery that finds the record un-noted sooner (a second copy of the task in the same
   * batch, a redelivery while the writer publishes) hands its message back until the window ends
   * and then finds it noted; after it, one delivery takes the announcement (a conditional write)
   * and publishes. Publishing too would send the event twice. @default 20000
   */
  announceWindowMs: number;
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
  /**
   * The thread leases of the parked design (settings.solveMode `park`, the primary lane): every
   * fresh submission takes a lease first, and a task whose id is on its record parks instead of
   * waiting for its answer. Absent: every invocation waits through its solve.
   */
  leases?: LeaseLane;
  /**
   * The parked fleet's metric window (functions/core/solve-window.ts): what a delivery saw that the
   * thread ledger does not count (error answers, a solve or failure it read itself). Absent: the
   * governor reads the consumer's metrics from CloudWatch.
   */
  solveWindow?: SolveWindowWriter;
  /** Whose solver `solver` is: written on every claim, solved and failed record. @default 'primary' */
  provider?: SolverProvider;
  /**
   * Solvers of other providers this consumer may resume a submission at (poll only, never
   * submit): the primary consumer holds the overflow provider's when the fleet has one, so a
   * task the overflow lane paid for is finished there, never paid again at the plan.
   */
  resumeSolvers?: Partial<Record<SolverProvider, SolverPort>>;
  /** Seals what a delivery hands to the next in a fresh copy of its message; none sealed or opened when absent. */
  seal?: CarrySeal;
  /** Every log line, saved error text and published error code goes through it (the keys this process holds). */
  redactor?: Redactor;
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
  /**
   * Delete each finished message at once instead of leaving it to the batch response: in a batch
   * of several, a batch-mate's crash would otherwise bring a finished (even paid) task back, and
   * with it its receive count toward the DLQ.
   */
  acknowledgeEach: boolean;
  /** Failed calls to the results table so far in this invocation (throttled or unavailable). */
  dynamoErrors: () => number;
  /**
   * In a batch of several, the batch's refused messages are dead-lettered and deleted before any
   * of its tasks starts (`settled` resolves once each refusal has settled, `done` counts one):
   * a task's crash kills the whole invocation, and one that came between a letter's send and its
   * delete would bring the refused message back to be dead-lettered a second time.
   */
  refusalsFirst?: { settled: Promise<void>; done: () => void };
  /** This delivery is the governor's probe (a waiting task carried: `ProbeDelivery`). */
  probe?: ProbeDelivery;
}

/**
 * A delivery the governor's probe made (functions/governor/probe-carrier.ts): while others leave
 * the fleet fewer threads than the mapping's floor, the probe submits a waiting task instead of
 * a synthetic one, so an accepted probe's paid solve is that task's. Its one fresh submission is
 * the probe: under one of the probe's own slots whatever the limits (LeaseHolding.takeProbe),
 * never waited for; refused over the cap, the task goes back at once, no wait counted
 * (`Outcome.probe`). The solver's first answer to it is kept here for the governor.
 */
export interface ProbeDelivery {
  answer?: 'accepted' | 'refused';
  /**
   * Refused, the task is kept hidden this long for the governor's next probe instead of handed
   * back at once (`ConsumerEvent.probeKeepSeconds`); near the DLQ it still goes back as a fresh copy.
   */
  keepSeconds?: number;
}

/** The gate of `RecordContext.refusalsFirst` for `count` refusals (open at once for none). */
export function refusalGate(count: number): { settled: Promise<void>; done: () => void } {
  let left = count;
  let open: () => void = () => undefined;
  const settled = left <= 0 ? Promise.resolve() : new Promise<void>((resolve) => (open = resolve));
  return {
    settled,
    done: () => {
      left -= 1;
      if (left === 0) open();
    },
  };
}

/** `orphanWaitMs` for a queue visibility timeout and a claim lease, ms: the one formula the consumer and `npm start`'s default duration take. */
export function orphanWaitMsOf(visibilityTimeoutMs: number, leaseMs: number): number {
  return visibilityTimeoutMs + leaseMs;
}

export function resolveTiming(settings: FleetSettings, overrides: Partial<ConsumerTiming> = {}): ConsumerTiming {
  const leaseMs = overrides.leaseMs ?? settings.leaseSeconds * 1000;
  return {
    leaseMs,
    orphanWaitMs: orphanWaitMsOf(settings.visibilityTimeoutSeconds * 1000, leaseMs),
    recordMarginMs: RECORD_MARGIN_SECONDS * 1000,
    retryBaseSeconds: HAND_BACK_BACKOFF.baseSeconds,
    retryMaxSeconds: HAND_BACK_BACKOFF.maxSeconds,
    accountRetryBaseSeconds: ACCOUNT_HAND_BACK_BACKOFF.baseSeconds,
    accountRetryMaxSeconds: ACCOUNT_HAND_BACK_BACKOFF.maxSeconds,
    storeRetryBaseSeconds: 10,
    storeRetryMaxSeconds: 900,
    writeRetry: { firstMs: 100, maxMs: 2_000 },
    solverIdCarryAfterMs: 1_000,
    requeueReserveMs: 1_000,
    minSolveWindowMs: 5_000,
    degradedStoreMs: 2_000,
    requeue: { ...REQUEUE_DEFAULTS },
    overCapWaiting: { pollMs: 1_000, maxWaitMs: 15_000, maxWaits: 3 },
    leaseWaitPollMs: LEASE_WAIT_POLL_MS,
    parkRecordWaitMs: 3_000,
    parkAfterMs: 0,
    announceWindowMs: 20_000,
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
