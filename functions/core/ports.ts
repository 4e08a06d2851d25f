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
  /**
   * The request answered. A submission whose response carries the answer itself (CapSolver's
   * image tasks) is told twice: `accepted`, then `answered` (no result request was made).
   */
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
  /**
   * Epoch ms after which a submission the provider answers in its own response (CapSolver's
   * images) is not sent: its request lasts the recognition, and one cut short by the deadline after
   * the provider accepted it is paid with its id never known. Not sent, the solve ends in a
   * SolverTimeoutError (DEADLINE_EXCEEDED) with nothing paid. Other submissions are answered at
   * once and keep to `deadlineAt`. @default deadlineAt
   */
  submitBy?: number;
  /**
   * Epoch ms until which such a submission's request may wait for its answer: not cut at
   * `deadlineAt` (which bounds waits, retries and polls), since cut after the provider accepted it
   * it is paid with its id never known. The caller's last moment to record an answer. @default deadlineAt
   */
  answerBy?: number;
  /** Resume polling a submission a previous delivery made instead of submitting again. */
  resumeSolverId?: string;
  /**
   * Poll a submission this delivery just made (`submit`) on the plan's schedule, as `solve` would
   * after its own submission (the first poll after the method's usual first wait).
   */
  continueSolverId?: string;
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

/** A fresh submission the solver accepted (the first step of a solve, see `SolverPort.submit`). */
export interface Submitted {
  solverId: string;
  /** Epoch ms the solver accepted it. */
  acceptedAt: number;
  /** The answer, when the service gave it in the submission's own response (CapSolver's image tasks). */
  outcome?: SolveOutcome;
}

/** One submission as one result request saw it (the governor's poll of parked submissions). */
export type PollState =
  | { state: 'ready' }
  | { state: 'not_ready' }
  /** The solver ended it without an answer (`ERROR_CAPTCHA_UNSOLVABLE`, an unknown id): its thread is free. */
  | { state: 'ended'; code: string }
  /** This id's request failed in passing (HTTP 5xx, a timeout): ask again later. */
  | { state: 'unknown'; code: string };

/** A parked submission to ask about: its id and its task's method (the JSON API reads answers by task type). */
export interface PollTarget {
  solverId: string;
  method: string;
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
  /**
   * Only the submission of a solve (in.php or createTask, with the same over-cap and transient
   * retries as `solve`): resolves once the solver accepted the task. The parked design submits,
   * keeps the id and ends the invocation; `solve` with `continueSolverId` polls it on the plan.
   */
  submit?(
    task: Task,
    options: Omit<SolveOptions, 'resumeSolverId' | 'continueSolverId' | 'onSubmitted'>,
  ): Promise<Submitted>;
  /**
   * Ask the solver about many submissions at once (res.php `action=get&ids=…` in chunks, or one
   * getTaskResult each where the protocol has no bulk call). Never reads an answer out: it says
   * which are ready. Every id asked about is in the map; an id whose request failed is `unknown`.
   */
  pollMany?(targets: readonly PollTarget[], options?: { signal?: AbortSignal }): Promise<Map<string, PollState>>;
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

/** Which of the fleet's own stores a call went to. */
export type StoreName = 'dynamodb' | 'sqs';

/**
 * What a failed store call means to its caller, whatever the store: the item or message is
 * `too_large` to ever be written (no retry helps), the store is `throttled` (retry later), or
 * it is `unavailable` (5xx, a reset or timed-out connection, refused access: retry later, and a
 * sustained run of them is an outage the governor pauses for).
 */
export type StoreFailureKind = 'too_large' | 'throttled' | 'unavailable';

/**
 * A store call failed (after the SDK's own retries). Adapters throw it (or a subclass); the
 * consumer reads `kind` and `store`, never an adapter's own classes.
 */
export class StoreError extends Error {
  override name = 'StoreError';
  constructor(
    message: string,
    readonly store: StoreName,
    readonly kind: StoreFailureKind,
    readonly taskId: string | undefined,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

/** True for a {@link StoreError} of any adapter. */
export function isStoreError(error: unknown): error is StoreError {
  return error instanceof StoreError;
}

export type ClaimResult =
  | {
      outcome: 'claimed';
      record: TaskResult;
      takenOver: boolean;
      /** The submission a takeover resumes (its holder was a provider this consumer can resume at). */
      previousSolverId?: string;
      /** Who accepted `previousSolverId`. @default the claiming consumer's provider */
      previousSolverProvider?: SolverProvider;
      /** When the solver accepted `previousSolverId` (known when its holder kept it with the time), epoch ms. */
      previousSolverAcceptedAt?: number;
      /**
       * The takeover replaced a claim that ran out (its holder died) with no solver id on it and
       * no wait for that holder's copy yet (none, or one begun before it claimed): the holder may
       * have been paid for a submission whose id it could only put in a fresh copy of the message
       * (the table would not take it). See `orphanWaitAt`.
       */
      orphaned?: boolean;
    }
  | { outcome: 'terminal'; record: TaskResult }
  | { outcome: 'held'; leaseUntil: number }
  /** The id is in use by a task with other content (another fingerprint); the record is untouched. */
  | { outcome: 'conflict'; record: TaskResult }
  /**
   * The lease ran out, but the task's submission was accepted by a provider this consumer cannot
   * resume at: taking over would pay a second provider for a task the first may have solved. The
   * record is untouched; the task waits for that provider's lane.
   */
  | { outcome: 'held_elsewhere'; solverProvider: SolverProvider; record: TaskResult };

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
  /**
   * Providers whose submissions this consumer can resume (poll with their key). A takeover of a
   * submission accepted by any other provider answers `held_elsewhere` instead.
   * @default [provider]
   */
  resumable?: readonly SolverProvider[];
}

/** What `reject()` found: its own record written (or recognised after a lost answer), or another. */
export type RejectOutcome = { outcome: 'written'; record: TaskResult } | { outcome: 'exists'; record: TaskResult };

/** The results table. Every write is a single-item conditional write. */
export interface ResultsRepository {
  /**
   * Count the solver's `ERROR_CAPTCHA_UNSOLVABLE` answer to `solverId` on the record this claim
   * holds, once per submission (a delivery that repeats the count of an answer already counted
   * adds nothing), and return the task's count so far; undefined when the record is not this
   * claim's, or the table cannot be read or written (the caller counts its own answers then).
   */
  countUnsolvable?(taskId: string, claimToken: string, solverId: string): Promise<number | undefined>;
  /**
   * Claim a task for one delivery: new (or in place of a rejected or expired record) → claimed;
   * expired lease → taken over; same id with other content → conflict; else why not. A claim
   * (fresh or a takeover) records `provider`, the claiming consumer's, when given.
   */
  claim(input: ClaimInput): Promise<ClaimResult>;
  /**
   * Remember the solver's id (and the provider that accepted it, and when: `acceptedAt`, epoch ms,
   * when known) for the current claim. False when the claim was lost. Idempotent under one claim:
   * a retry after a lost answer succeeds.
   */
  recordSolverId(
    taskId: string,
    claimToken: string,
    solverId: string,
    provider?: SolverProvider,
    acceptedAt?: number,
  ): Promise<boolean>;
  /**
   * Park the task (solveMode `park`): keep the accepted submission's id, provider and acceptance
   * time on the record and give the claim up in the same write, so the delivery that resumes it
   * (the governor makes its message visible once the answer is ready) takes over at once. True
   * when written (or found written by an earlier attempt whose answer was lost), false when the
   * claim was lost.
   */
  park(
    taskId: string,
    claimToken: string,
    /** `queueWaitMs`: the delivery's wait in the queue, kept on the record (the first one written stands). */
    submission: { solverId: string; provider: SolverProvider; acceptedAt: number; queueWaitMs?: number },
  ): Promise<boolean>;
  /**
   * Write a parked task's solved record where its message is not (the governor's watch, which
   * reads the answer once the solver has it), in one conditional write: only a record still
   * solving, holding `solverId`, with no live claim, is completed (a delivery that resumed the
   * task holds a claim, and finishes it itself). True when written (or found written by an
   * earlier attempt of the same `writer` whose answer was lost), false otherwise.
   */
  completeParked(
    taskId: string,
    solverId: string,
    result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>,
    writer: { token: string; now: number },
  ): Promise<boolean>;
  /**
   * Write the terminal record if the claim is still ours. True when the record is now ours:
   * written by this call, or by an earlier attempt under the same claim whose answer was lost
   * (the record names its writer, `completedBy`). False when another delivery owns the task.
   */
  complete(
    taskId: string,
    claimToken: string,
    result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>,
  ): Promise<boolean>;
  /** Note that the terminal record's completion event went out (`announcedAt`); a redelivery then stays silent. */
  markAnnounced(taskId: string, at: number): Promise<void>;
  /**
   * Take the announcement of a terminal record its writer has not noted (`announcingUntil`, a
   * conditional write): true when this delivery publishes it now; false when it was noted
   * meanwhile or another delivery holds it until a time not yet passed.
   */
  takeAnnouncement(taskId: string, now: number, until: number): Promise<boolean>;
  /**
   * Give the claim up so another delivery need not wait for the lease. With `orphanWaitAt`, note
   * on the record that a delivery waited for the copy an orphaned claim's holder may have made
   * (the next takeover does not wait again).
   */
  release(taskId: string, claimToken: string, note?: { orphanWaitAt: number }): Promise<void>;
  /**
   * Write a `rejected` record unless a record exists already. `written` when this call wrote it
   * (or an earlier attempt by the same `writer` whose answer was lost), else the record found.
   */
  reject(
    taskId: string,
    result: { errorCode: string; errorMessage: string; method?: string; submittedAt?: number; completedAt: number },
    writer: string,
  ): Promise<RejectOutcome>;
  get(taskId: string, options?: { consistent?: boolean }): Promise<TaskResult | undefined>;
  /**
   * Note that a refused message's letter is in the DLQ while the message itself could not be
   * deleted (SQS failing): when it comes back, its delivery deletes it instead of sending a second
   * letter. A marker of its own, keyed by the message id (no task's record is touched), that
   * lives as long as a result.
   */
  noteLetter(sourceMessageId: string, at: number): Promise<void>;
  /** Whether an earlier delivery noted this message's letter (`noteLetter`). */
  letterNoted(sourceMessageId: string): Promise<boolean>;
}

/** Where a delivered message came from, enough to act on it in its queue. */
export interface DeliveredMessage {
  /** The queue's ARN as the event source reports it (`eventSourceARN`). */
  eventSourceArn: string;
  receiptHandle: string;
  /** SQS's id of the message (named on a dead letter as `sourceMessageId`). */
  messageId?: string;
}

/** A message attribute as Lambda's SQS event carries it (binary as base64). */
export interface MessageAttribute {
  dataType: string;
  stringValue?: string;
  binaryValue?: string;
}

/** A fresh copy of a delivered message, sent to its own queue in its place. */
export interface MessageCopy {
  /** The body, unchanged. */
  body: string;
  /** Its attributes (the fleet's redelivery attribute among them). */
  attributes: Readonly<Record<string, MessageAttribute>>;
  /** Hidden this long before its first delivery, seconds (SQS allows 0–900). */
  delaySeconds: number;
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
  /** SQS's id of the refused message: a second copy of one letter is recognised by it. */
  sourceMessageId?: string;
}

/** What the consumer asks of the task queues besides the event source's own acknowledgement. */
export interface TaskQueue {
  /** Send a refused message to the DLQ. Throws when it could not be sent (the caller must not acknowledge). */
  deadLetter(letter: DeadLetter): Promise<void>;
  /** Hide a message for `seconds` from now (0 makes it visible at once). */
  changeVisibility(message: DeliveredMessage, seconds: number): Promise<void>;
  /** Delete a message whose work is done, without waiting for the batch's end (its batch-mates may still crash). */
  acknowledge(message: DeliveredMessage): Promise<void>;
  /**
   * Put a fresh copy of a message in its own queue, then delete the message: the copy's receive
   * count starts again, and its attributes carry what the next delivery needs. Throws when the
   * copy could not be sent (the message is then left as it is); `deleted` is false when the
   * original could not be deleted (a second copy is then in the queue: safe, it is the same task).
   */
  requeue(message: DeliveredMessage, copy: MessageCopy): Promise<{ deleted: boolean }>;
}

/**
 * Seals what a delivery hands to the next one inside a message (a paid submission's id, an
 * answer read but not recorded) with a key of the provider that holds it, so that a producer
 * cannot forge one into a message of its own. A process seals and opens only with the keys it
 * holds.
 */
export interface CarrySeal {
  /** The MAC of `payload` with `provider`'s key; undefined when this process holds no such key. */
  seal(provider: SolverProvider, payload: string): Promise<string | undefined>;
  /** Whether `mac` is `payload`'s MAC with `provider`'s key; false when this process holds none. */
  verify(provider: SolverProvider, payload: string, mac: string): Promise<boolean>;
}

/** Optional: announce terminal results (EventBridge in AWS, an emitter locally). */
export interface CompletionEvents {
  publish(result: TaskResult): Promise<void>;
}
