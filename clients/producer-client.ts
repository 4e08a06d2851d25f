/**
 * The producer's side of the fleet, for other programs: submit tasks to the queues, read and
 * wait for their results. Works against AWS or any AWS-compatible endpoint (the local stack)
 * through the clients it is given.
 *
 * ```ts
 * const producer = createProducer({ queueUrls: { normal, high }, table: 'captcha-fleet-results', clients: createAwsClients() });
 * const result = await producer.solve({ method: 'turnstile', params: { sitekey: '0x4AAAAAAA…', pageurl: 'https://example.com' } });
 * if (result.stale) throw new Error('token expired before it could be used');
 * ```
 */
import { randomUUID } from 'node:crypto';
import { SendMessageBatchCommand, SendMessageCommand, type SendMessageBatchCommandOutput } from '@aws-sdk/client-sqs';
import { BatchGetCommand, type BatchGetCommandOutput, GetCommand } from '@aws-sdk/lib-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { MAX_TASK_BYTES, TaskSchema, taskIssues, type TaskMessage } from '../functions/core/task.js';
import { describeIdConflict, sameContent, taskFingerprint } from '../functions/core/task-identity.js';
import { closestParamName } from '../functions/core/task-params.js';
import { isTerminal, type TaskResult } from '../functions/core/results.js';
import { isStale, type CompletionEvent } from '../functions/core/events.js';
import {
  decideReport,
  type ReportMessage,
  type ReportRefusal,
  ReportMessageSchema,
  type SettledReport,
  type Verdict,
} from '../functions/core/report.js';

/** SQS's SendMessageBatch limit. */
const SEND_BATCH = 10;
/**
 * SQS's limit on a SendMessageBatch's bodies together, bytes (as on one message: 1 MiB). Six
 * valid image tasks of 180 000 characters went in one request past it, and all six failed.
 */
const SEND_BATCH_BYTES = 1_048_576;
/** DynamoDB errors no retry changes: the id check and `wait` give up on them at once. */
const PERMANENT_READ_ERRORS: ReadonlySet<string> = new Set([
  'AccessDeniedException',
  'ResourceNotFoundException',
  'ValidationException',
  'UnrecognizedClientException',
  // No credentials in the process: no retry finds them (the id check tried five rounds, the send four).
  'CredentialsProviderError',
]);
/** The fields of a task message's top level (schema v1). */
const TASK_FIELDS: ReadonlySet<string> = new Set(['id', 'method', 'params', 'priority', 'submittedAt']);

/** DynamoDB's BatchGetItem limit. */
const READ_BATCH = 100;
/** Rounds of BatchGetItem (a failed call, or UnprocessedKeys left) tried before giving up. */
const READ_ROUNDS = 5;
/** Tries of one SendMessageBatch while SQS throttles, fails or resets. */
const SEND_ATTEMPTS = 5;
/** First pause between tries, ms; doubles each try. */
const RETRY_BASE_MS = 100;

/**
 * Where `wait` can hear of completions instead of polling: the local runtime's event stream
 * fits, and in AWS any bridge from an EventBridge rule (a queue, a WebSocket) can offer it.
 */
export interface CompletionEventSource {
  /** Resolves with the task's event, or undefined when `timeoutMs` passes first. */
  waitFor(taskId: string, timeoutMs: number): Promise<CompletionEvent | undefined>;
}

export interface ProducerOptions {
  /**
   * The task lanes, and the reports queue `report()` sends to (`<prefix>-reports`; the stack's
   * `ReportsQueueUrl` output). @default no reports queue: `report()` throws
   */
  queueUrls: { normal: string; high?: string; reports?: string };
  /** Name of the results table. */
  table: string;
  clients: { sqs: SQSClient; documents: DynamoDBDocumentClient };
  /** Epoch ms; stamps `submittedAt` when a task carries none, and judges token freshness. */
  clock?: () => number;
  /**
   * Completion events: `wait` then reads only when an event arrives, or every
   * `eventFallbackMs` in case one never does (a failed publish). @default none: reads with backoff
   */
  events?: CompletionEventSource;
  /**
   * When the results table cannot be read for the id check before a send (after retries):
   * `send` sends anyway and reports a warning: the consumer checks every id again when it claims
   * the task (a reused id still ends in the DLQ as ID_CONFLICT), so nothing but the early error
   * is lost, and producers keep working while DynamoDB has a bad minute; `refuse` throws
   * IdCheckUnavailableError and sends nothing. @default 'send'
   */
  idCheckUnavailable?: 'send' | 'refuse';
  /** Told of what the producer did on its own (an id check skipped). @default none */
  onWarning?: (warning: ProducerWarning) => void;
}

/** Something the producer did on its own that its caller may want to log. */
export interface ProducerWarning {
  code: 'ID_CHECK_SKIPPED';
  message: string;
  taskIds: string[];
  cause?: unknown;
}

/**
 * A result as `get` and `wait` return it: the record plus its freshness. The record's
 * `provider` says whose consumer solved (or failed) it: `primary` (the plan) or `overflow`
 * (absent on rejections and on records written before overflow existed).
 */
export type ProducerResult = TaskResult & {
  /** True when a token answer is past its expiry now; false otherwise (image answers never go stale). */
  stale: boolean;
  /** Token answers: ms until the token expires (negative once stale). */
  tokenExpiresInMs?: number;
};

/** What the producer has seen, for the caller's own metrics. */
export interface ProducerCounters {
  /** Token answers `get` or `wait` returned already stale. */
  staleDeliveries: number;
  /** `wait` calls that ended on a completion event. */
  waitsByEvent: number;
  /** `wait` calls that ended on a read without an event (no event source, or the event never came). */
  waitsByRead: number;
  /** Tasks sent without the id check, because the results table could not be read (`idCheckUnavailable: 'send'`). */
  idChecksSkipped: number;
  /** SendMessageBatch calls (or their failed entries) tried again. */
  sendRetries: number;
}

export interface WaitOptions {
  /** Give up after this long, ms. @default 120000 (the usual `wait_result` limit) */
  timeoutMs?: number;
  /** First pause between reads, ms; grows by half each read. @default 100 */
  initialIntervalMs?: number;
  /** Longest pause between reads, ms. @default 2000 */
  maxIntervalMs?: number;
  /** With an event source: read anyway after this long without an event, ms. @default 5000 */
  eventFallbackMs?: number;
  signal?: AbortSignal;
}

/** A problem found in one of the tasks given to `submit`. */
export interface TaskProblem {
  /** Position in the list given to `submit` (0 for a single task). */
  index: number;
  /** The task's id when it has one. */
  taskId: string | undefined;
  path: string;
  message: string;
}

/** Thrown by `submit` before anything is sent when a task does not match schema v1. */
export class TaskValidationError extends Error {
  override readonly name = 'TaskValidationError';
  /** Id of the first invalid task, when it has one. */
  readonly taskId: string | undefined;
  constructor(readonly problems: TaskProblem[]) {
    super(
      `${new Set(problems.map((p) => p.index)).size} task(s) do not match schema v1; nothing was sent:\n` +
        problems
          .map((p) => `  - task #${p.index}${p.taskId ? ` (${p.taskId})` : ''} ${p.path}: ${p.message}`)
          .join('\n'),
    );
    this.taskId = problems[0]?.taskId;
  }
}

/** A task given to `submit` whose id is in use by a task with other content. */
export interface TaskIdConflict {
  /** Position in the list given to `submit` (0 for a single task). */
  index: number;
  taskId: string;
  /** Status of the record that holds the id. */
  status: TaskResult['status'];
  /** When that record expires and the id is free again, epoch seconds. */
  expiresAt: number;
  /** The method of the task that holds the id, when its record says. */
  method?: string;
}

/**
 * Thrown by `submit` before anything is sent when a task's id is in use, within the result
 * TTL, by a task with other content (method or params). An id is the producer's idempotency
 * key: resending the same task is fine (it gets the first result), reusing the id for another
 * task is refused, here and again by the consumer (`ID_CONFLICT`) should two producers race.
 */
export class TaskIdConflictError extends Error {
  override readonly name = 'TaskIdConflictError';
  /** Id of the first conflicting task. */
  readonly taskId: string | undefined;
  constructor(
    readonly conflicts: TaskIdConflict[],
    options: { cause?: unknown } = {},
  ) {
    super(
      `${conflicts.length} task id(s) are in use by tasks with other content; nothing was sent:\n` +
        conflicts.map((c) => `  - task #${c.index}: ${describeIdConflict(c.taskId, c)}`).join('\n'),
      options,
    );
    this.taskId = conflicts[0]?.taskId;
  }
}

/**
 * Thrown by `submit` (with `idCheckUnavailable: 'refuse'`) when the results table could not be
 * read for the id check; nothing was sent.
 */
export class IdCheckUnavailableError extends Error {
  override readonly name = 'IdCheckUnavailableError';
  constructor(
    readonly taskIds: string[],
    options: { cause?: unknown } = {},
    /** Why, where a retry would not help (no such table). @default the table could not be read */
    why?: string,
  ) {
    super(
      why ??
        `the results table could not be read to check ${taskIds.length} task id(s) for reuse; nothing was sent ` +
          `(retry later, or create the producer with idCheckUnavailable: 'send': the consumer checks ids again)`,
      options,
    );
  }

  get taskId(): string | undefined {
    return this.taskIds[0];
  }
}

/**
 * Some tasks of a `submit` were not sent: SQS refused them, a call kept failing, or the sending
 * stopped at such a failure before their batch was tried. Every other task was sent: resending
 * the tasks of `failedIds` with those ids sends each task once (a resent id is a duplicate the
 * consumer acknowledges). `taskIds` gives every task's id in the order given, the ids the producer
 * assigned to tasks given without one included: `taskIds[i]` is the i-th task's, so a caller finds
 * which of its tasks failed and resends them under the same ids.
 */
export class TaskSubmitError extends Error {
  override readonly name = 'TaskSubmitError';
  constructor(
    message: string,
    /** Ids not sent: refused, failed, or not tried after a failure that stopped the sending. */
    readonly failedIds: string[],
    /** Ids that were sent. */
    readonly sentIds: string[],
    /** `taskIds`: every task's id in the order given; without it, the sent ids then the failed. */
    options: { cause?: unknown; taskIds?: string[] } = {},
  ) {
    super(message, options.cause === undefined ? {} : { cause: options.cause });
    this.taskIds = options.taskIds ?? [...sentIds, ...failedIds];
  }

  /** Every task's id, in the order the tasks were given (assigned ids included). */
  readonly taskIds: string[];

  /** The positions (in the order given) of the tasks not sent. */
  get failedIndexes(): number[] {
    const failed = new Set(this.failedIds);
    return this.taskIds.flatMap((id, index) => (failed.has(id) ? [index] : []));
  }

  get taskId(): string | undefined {
    return this.failedIds[0];
  }
}

/** `wait` gave up before the task reached a terminal record. */
export class TaskWaitTimeoutError extends Error {
  override readonly name = 'TaskWaitTimeoutError';
  constructor(
    readonly taskId: string,
    readonly timeoutMs: number,
    /** The record's status at the last read; undefined when no record existed yet. */
    readonly lastStatus: TaskResult['status'] | undefined,
    options: { cause?: unknown } = {},
  ) {
    super(
      `task ${taskId} has no result after ${timeoutMs} ms (last status: ${lastStatus ?? 'no record yet, still queued'})`,
      options,
    );
  }
}

export interface Producer {
  /**
   * Validate, refuse an id in use by other content (TaskIdConflictError), then send; returns
   * the task's id (assigned when the task has none).
   */
  submit(task: TaskMessage): Promise<string>;
  /** Validate and check all, then send in batches of 10; returns the ids in the same order. */
  submit(tasks: readonly TaskMessage[]): Promise<string[]>;
  /** The task's record with its freshness, or undefined while none exists. */
  get(taskId: string, options?: { consistent?: boolean }): Promise<ProducerResult | undefined>;
  /**
   * Until the record is terminal: with an event source, a read when the event arrives (or
   * after `eventFallbackMs` without one); else strongly consistent reads with backoff.
   */
  wait(taskId: string, options?: WaitOptions): Promise<ProducerResult>;
  /** `submit` then `wait`. */
  solve(task: TaskMessage, options?: WaitOptions): Promise<ProducerResult>;
  /**
   * Report a solved task's answer as wrong (`bad`: the provider is asked for a refund) or right
   * (`good`). The fleet calls the provider that solved it once, with its solver id, and marks the
   * record; this waits for that and resolves with the accepted report. A repeated report resolves
   * with the first one's answer and calls nobody. Throws ReportRefusedError (with a `reason`) when
   * the report is refused: no such task, not solved, reported the other way, or the provider no
   * longer takes it; ReportWaitTimeoutError when the fleet has not settled it in time (it still will).
   */
  report(taskId: string, verdict: Verdict, options?: ReportOptions): Promise<SettledReport>;
  /** Counters since the producer was built. */
  counters(): ProducerCounters;
}

export interface ReportOptions {
  /** Give up waiting after this long, ms (the report is still made). @default 60000 */
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** A report the fleet (or this client, before sending) refused, with why. */
export class ReportRefusedError extends Error {
  override readonly name = 'ReportRefusedError';
  constructor(
    readonly taskId: string,
    readonly reason: ReportRefusal,
    message: string,
    /** The provider's code behind a PROVIDER_REFUSED or NOT_SUPPORTED (ERROR_…), when it gave one. */
    readonly code?: string,
    /** The report as the record keeps it, when it was written there. */
    readonly report?: SettledReport,
  ) {
    super(`report on task ${taskId} refused (${reason}${code ? ` ${code}` : ''}): ${message}`);
  }
}

/** `report` sent the report, but the fleet did not settle it within the wait (it still will). */
export class ReportWaitTimeoutError extends Error {
  override readonly name = 'ReportWaitTimeoutError';
  constructor(
    readonly taskId: string,
    readonly timeoutMs: number,
  ) {
    super(
      `report on task ${taskId} sent, not settled after ${timeoutMs} ms (is the report function running?); read the record's \`report\` later`,
    );
  }
}

/** What the producer's steps share: its options, clock, clients and counters. */
interface ProducerContext {
  options: ProducerOptions;
  clock: () => number;
  sqs: SQSClient;
  documents: DynamoDBDocumentClient;
  counters: ProducerCounters;
}

/** A validated task, ready to send. */
interface PreparedTask {
  id: string;
  body: string;
  queueUrl: string;
  /** Only for an id the producer chose: a fresh UUID cannot be in use already. */
  fingerprint?: string;
}

/** Build a producer. See the module comment for an example. */
export function createProducer(options: ProducerOptions): Producer {
  const ctx: ProducerContext = {
    options,
    clock: options.clock ?? Date.now,
    sqs: options.clients.sqs,
    documents: options.clients.documents,
    counters: { staleDeliveries: 0, waitsByEvent: 0, waitsByRead: 0, idChecksSkipped: 0, sendRetries: 0 },
  };
  const submitMany = async (input: readonly unknown[]): Promise<string[]> => {
    const prepared = prepareTasks(ctx, input);
    await refuseIdsInUse(ctx, prepared);
    await sendPrepared(ctx, prepared);
    return prepared.map((item) => item.id);
  };
  const submit = (async (task: TaskMessage | readonly TaskMessage[]) => {
    if (Array.isArray(task)) return submitMany(task);
    const [id] = await submitMany([task]);
    // submitMany returns one id per task or throws.
    return id as string;
  }) as Producer['submit'];
  const wait = (taskId: string, waitOptions: WaitOptions = {}) => waitForResult(ctx, taskId, waitOptions);

  return {
    submit,
    async get(taskId, getOptions = {}) {
      const record = await readRecord(ctx, taskId, getOptions.consistent ?? false);
      return record === undefined ? undefined : withFreshness(ctx, record);
    },
    wait,
    async solve(task, waitOptions) {
      // An aborted caller pays for nothing: the submission is a paid solve.
      waitOptions?.signal?.throwIfAborted();
      return wait(await submit(task), waitOptions);
    },
    report: (taskId, verdict, reportOptions = {}) => reportAnswer(ctx, taskId, verdict, reportOptions),
    counters: () => ({ ...ctx.counters }),
  };
}

/** Validate every task (all problems at once), assign ids and route by priority; no duplicate ids. */
function prepareTasks({ options, clock }: ProducerContext, input: readonly unknown[]): PreparedTask[] {
  const problems: TaskProblem[] = [];
  const prepared: PreparedTask[] = [];
  input.forEach((candidate, index) => {
    const given = (candidate as { id?: unknown } | null)?.id;
    const taskId = typeof given === 'string' ? given : undefined;
    // The schema drops a field it does not know: `prority: 'high'` went to the normal lane unsaid.
    for (const field of unknownFields(candidate))
      problems.push({ index, taskId, path: field, message: unknownFieldMessage(field) });
    const parsed = TaskSchema.safeParse(candidate);
    if (!parsed.success) {
      for (const issue of taskIssues(parsed.error, candidate)) {
        problems.push({ index, taskId, path: issue.path || '(task)', message: issue.message });
      }
      return;
    }
    const task = parsed.data;
    const id = task.id ?? randomUUID();
    // Whole ms: a clock of performance.timeOrigin + performance.now() gave a fraction the consumer's schema refuses.
    const message = { ...task, id, submittedAt: task.submittedAt ?? wholeMs(clock()) };
    const body = sqsSafeJson(message);
    const bytes = Buffer.byteLength(body);
    if (bytes > MAX_TASK_BYTES) {
      problems.push({
        index,
        taskId: id,
        path: '(task)',
        message: `the message is ${bytes} bytes; the limit is ${MAX_TASK_BYTES} (SQS's 1 MiB less the room the fleet keeps for its attributes)`,
      });
      return;
    }
    prepared.push({
      id,
      body,
      queueUrl: queueFor(options, task.priority),
      ...(task.id !== undefined ? { fingerprint: taskFingerprint(task) } : {}),
    });
  });
  if (problems.length > 0) throw new TaskValidationError(problems);

  // Every task is prepared here, so prepared[i] is input[i]: each repeat is named at its own place.
  const firstAt = new Map<string, number>();
  const repeats: TaskProblem[] = [];
  prepared.forEach((item, index) => {
    const first = firstAt.get(item.id);
    if (first === undefined) firstAt.set(item.id, index);
    else
      repeats.push({
        index,
        taskId: item.id,
        path: 'id',
        message: `the same id as task #${first} in this submission`,
      });
  });
  if (repeats.length > 0) throw new TaskValidationError(repeats);
  return prepared;
}

/** Top-level fields of `candidate` that are not a task's (none when it is not an object). */
function unknownFields(candidate: unknown): string[] {
  if (typeof candidate !== 'object' || candidate === null || Array.isArray(candidate)) return [];
  return Object.keys(candidate).filter((field) => !TASK_FIELDS.has(field));
}

function unknownFieldMessage(field: string): string {
  const near = closestParamName(field, [...TASK_FIELDS]);
  return `is not a field of a task (${near !== undefined ? `did you mean ${near}? ` : ''}the fields are ${[...TASK_FIELDS].join(', ')}; a solver parameter goes in params)`;
}

/** A clock's reading as whole epoch ms; a clock that reads no time is the caller's bug, said as such. */
function wholeMs(reading: number): number {
  if (!Number.isFinite(reading) || reading < 0)
    throw new TypeError(`the producer's clock returned ${String(reading)}: it must return epoch ms (Date.now)`);
  return Math.floor(reading);
}

/**
 * The message as JSON text SQS takes: characters outside the Basic Multilingual Plane (emoji) and
 * U+FFFE / U+FFFF written as JSON escapes, the same value to any JSON reader. SQS refuses U+FFFE
 * and U+FFFF in a body, and the local emulator every character past U+FFFF; JSON.stringify
 * already escapes control characters and lone surrogates.
 */
function sqsSafeJson(message: unknown): string {
  return JSON.stringify(message).replace(/[\u{10000}-\u{10FFFF}\uFFFE\uFFFF]/gu, (char) =>
    Array.from({ length: char.length }, (_, i) => char.charCodeAt(i))
      .map((unit) => `\\u${unit.toString(16).padStart(4, '0')}`)
      .join(''),
  );
}

/**
 * Send in batches of up to 10 tasks and 1 MiB per queue. A call that fails for SQS's sake
 * (throttled, 5xx, a reset connection) and entries SQS failed on its side are tried again with
 * backoff: a resend is safe, since the task's id makes a second copy a duplicate the consumer
 * acknowledges without solving. Entries SQS refuses as the sender's fault fail alone, and the
 * next batches still go; a call still failing after its tries stops the sending (the rest would
 * meet the same outage). Throws, once done, with every task not sent — refused, failed, or never
 * tried — and every task sent.
 */
async function sendPrepared(ctx: ProducerContext, prepared: readonly PreparedTask[]): Promise<void> {
  const sent: string[] = [];
  const failed: string[] = [];
  const reasons: string[] = [];
  let stopped: unknown;
  const byQueue = new Map<string, PreparedTask[]>();
  for (const item of prepared) byQueue.set(item.queueUrl, [...(byQueue.get(item.queueUrl) ?? []), item]);
  for (const [queueUrl, items] of byQueue) {
    for (const chunk of sendBatches(items)) {
      if (stopped !== undefined) {
        failed.push(...chunk.map((item) => item.id));
        continue;
      }
      const outcome = await sendChunk(ctx, queueUrl, chunk, sent);
      failed.push(...outcome.failed);
      if (outcome.reason !== undefined) reasons.push(outcome.reason);
      if (outcome.stop !== undefined) stopped = outcome.stop;
    }
  }
  if (failed.length === 0) return;
  throw new TaskSubmitError(
    `${failed.length} of ${prepared.length} task(s) not sent (${sent.length} sent): ${[...new Set(reasons)].join('; ')}` +
      (stopped !== undefined ? '; the batches after the failure were not tried' : ''),
    failed,
    [...sent],
    { taskIds: prepared.map((item) => item.id), ...(stopped !== undefined ? { cause: stopped } : {}) },
  );
}

/** A queue's tasks in batches SQS takes: at most 10, their bodies at most 1 MiB together. */
function sendBatches(items: readonly PreparedTask[]): PreparedTask[][] {
  const batches: PreparedTask[][] = [];
  let batch: PreparedTask[] = [];
  let bytes = 0;
  for (const item of items) {
    const size = Buffer.byteLength(item.body);
    if (batch.length > 0 && (batch.length === SEND_BATCH || bytes + size > SEND_BATCH_BYTES)) {
      batches.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(item);
    bytes += size;
  }
  if (batch.length > 0) batches.push(batch);
  return batches;
}

/** What one batch came to: the ids not sent and why, and the error that should stop the sending, if any. */
interface ChunkOutcome {
  failed: string[];
  reason?: string;
  stop?: unknown;
}

async function sendChunk(
  ctx: ProducerContext,
  queueUrl: string,
  chunk: readonly PreparedTask[],
  sent: string[],
): Promise<ChunkOutcome> {
  let left = [...chunk];
  // Entries SQS refused as the sender's fault: not tried again, whatever else the batch met.
  const refused: { id: string; reason: string }[] = [];
  const outcome = (failed: string[], reason?: string, stop?: unknown): ChunkOutcome => {
    const all = [...refused.map((r) => r.id), ...failed];
    const reasons = [...new Set([...refused.map((r) => r.reason), ...(reason === undefined ? [] : [reason])])];
    if (all.length === 0) return { failed: [] };
    return { failed: all, reason: reasons.join('; '), ...(stop !== undefined ? { stop } : {}) };
  };
  for (let attempt = 1; ; attempt++) {
    let answer: SendMessageBatchCommandOutput;
    try {
      answer = await ctx.sqs.send(
        new SendMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: left.map((item, n) => ({ Id: String(n), MessageBody: item.body })),
        }),
      );
    } catch (error) {
      const retryable = retryableSend(error);
      if (attempt < SEND_ATTEMPTS && retryable) {
        ctx.counters.sendRetries += 1;
        await pause(RETRY_BASE_MS * 2 ** (attempt - 1), undefined);
        continue;
      }
      return outcome(
        left.map((c) => c.id),
        `sending failed: ${(error as Error).message}`,
        // The request's own fault (one batch's content) leaves the next batches to go.
        retryable || PERMANENT_READ_ERRORS.has((error as Error).name) ? error : undefined,
      );
    }
    const failedEntries = answer.Failed ?? [];
    const failedAt = new Set(failedEntries.map((entry) => Number(entry.Id)));
    sent.push(...left.filter((_, n) => !failedAt.has(n)).map((item) => item.id));
    const entryOf = (entry: (typeof failedEntries)[number]) => left[Number(entry.Id)];
    const reasonOf = (entries: typeof failedEntries) =>
      `SQS refused ${entries.length}: ${[...new Set(entries.map((e) => `${e.Code}: ${e.Message ?? ''}`))].join('; ')}`;
    const senderFault = failedEntries.filter((entry) => entry.SenderFault !== false);
    if (senderFault.length > 0) {
      const reason = reasonOf(senderFault);
      for (const entry of senderFault) refused.push({ id: entryOf(entry)?.id ?? `entry ${entry.Id}`, reason });
    }
    // SQS's own side (SenderFault false) is tried again alone, beside any entry it refused.
    const theirs = failedEntries.filter((entry) => entry.SenderFault === false);
    if (theirs.length === 0) return outcome([]);
    if (attempt < SEND_ATTEMPTS) {
      ctx.counters.sendRetries += 1;
      const again = new Set(theirs.map((entry) => Number(entry.Id)));
      left = left.filter((_, n) => again.has(n));
      await pause(RETRY_BASE_MS * 2 ** (attempt - 1), undefined);
      continue;
    }
    return outcome(
      theirs.map((entry) => entryOf(entry)?.id ?? `entry ${entry.Id}`),
      reasonOf(theirs),
    );
  }
}

/** A failed SendMessageBatch worth trying again: SQS's side (5xx, throttling) or the network, not the request. */
function retryableSend(error: unknown): boolean {
  const e = error as { $fault?: string; name?: string; $metadata?: { httpStatusCode?: number } };
  if (e.$fault === 'server') return true;
  if (PERMANENT_READ_ERRORS.has(e.name ?? '')) return false;
  if (/Throttl|RequestThrottled|TooManyRequests|TimeoutError|NetworkingError|ECONNRESET|socket/i.test(e.name ?? ''))
    return true;
  const status = e.$metadata?.httpStatusCode;
  return status === undefined || status === 429 || status >= 500;
}

/**
 * Refuse, before anything is sent, tasks whose id a live record holds for other content.
 * A rejected record, one past its TTL and one written before fingerprints hold nothing
 * against a resend (the consumer's claim judges the same way and has the last word).
 */
async function refuseIdsInUse(ctx: ProducerContext, prepared: readonly PreparedTask[]): Promise<void> {
  const chosen = prepared.flatMap((item, index) =>
    item.fingerprint === undefined ? [] : [{ index, id: item.id, fingerprint: item.fingerprint }],
  );
  if (chosen.length === 0) return;
  const ids = chosen.map((item) => item.id);
  let records: Map<string, TaskResult>;
  try {
    records = await readRecords(ctx, ids);
  } catch (error) {
    // No such table is no bad minute of DynamoDB: the producer could never read these results.
    if ((error as Error).name === 'ResourceNotFoundException')
      throw new IdCheckUnavailableError(
        ids,
        { cause: error },
        `the results table "${ctx.options.table}" does not exist here (ResourceNotFoundException); nothing was sent: ` +
          'give the producer the fleet’s table (the stack output ResultsTableName, <prefix>-results) and its region',
      );
    if (ctx.options.idCheckUnavailable === 'refuse') throw new IdCheckUnavailableError(ids, { cause: error });
    ctx.counters.idChecksSkipped += ids.length;
    ctx.options.onWarning?.({
      code: 'ID_CHECK_SKIPPED',
      message: `the results table could not be read to check ${ids.length} task id(s) for reuse; sending them unchecked (the consumer checks them when it claims each task): ${(error as Error).message}`,
      taskIds: ids,
      cause: error,
    });
    return;
  }
  const nowSeconds = Math.floor(ctx.clock() / 1000);
  const conflicts: TaskIdConflict[] = [];
  for (const item of chosen) {
    const record = records.get(item.id);
    if (record === undefined || record.status === 'rejected' || record.expiresAt < nowSeconds) continue;
    if (sameContent(record.fingerprint, item.fingerprint)) continue;
    conflicts.push({
      index: item.index,
      taskId: item.id,
      status: record.status,
      expiresAt: record.expiresAt,
      ...(typeof record.method === 'string' ? { method: record.method } : {}),
    });
  }
  if (conflicts.length > 0) throw new TaskIdConflictError(conflicts);
}

/** The records of these ids (consistent reads, identity fields only), by id. */
async function readRecords(
  { documents, options }: ProducerContext,
  ids: readonly string[],
): Promise<Map<string, TaskResult>> {
  // Unread keys after every round throw too: the caller decides (send anyway, or refuse).
  const found = new Map<string, TaskResult>();
  for (let i = 0; i < ids.length; i += READ_BATCH) {
    let keys: Record<string, unknown>[] | undefined = ids.slice(i, i + READ_BATCH).map((taskId) => ({ taskId }));
    for (let round = 0; keys !== undefined && keys.length > 0; round++) {
      if (round === READ_ROUNDS) {
        const unread = keys.map((key) => String(key.taskId));
        throw new TaskSubmitError(
          `the results table left ${unread.length} id(s) unchecked; nothing was sent`,
          unread,
          [],
        );
      }
      let answer: BatchGetCommandOutput;
      try {
        answer = await documents.send(
          new BatchGetCommand({
            RequestItems: {
              [options.table]: {
                Keys: keys,
                ConsistentRead: true,
                ProjectionExpression: 'taskId, #status, fingerprint, expiresAt, #method',
                ExpressionAttributeNames: { '#status': 'status', '#method': 'method' },
              },
            },
          }),
        );
      } catch (error) {
        // Throttled, 5xx, a reset: the SDK's own tries are spent; try the round again after a pause.
        // A refusal that a pause cannot change (no permission, no such table) is final at once:
        // tried five times over 1.5 s before, while every submit with an id waited on it.
        if (round === READ_ROUNDS - 1 || PERMANENT_READ_ERRORS.has((error as Error).name)) throw error;
        await pause(RETRY_BASE_MS * 2 ** round, undefined);
        continue;
      }
      for (const item of answer.Responses?.[options.table] ?? []) found.set(item.taskId as string, item as TaskResult);
      keys = answer.UnprocessedKeys?.[options.table]?.Keys;
      if (keys !== undefined && keys.length > 0) await pause(RETRY_BASE_MS * 2 ** round, undefined);
    }
  }
  return found;
}

function queueFor(options: ProducerOptions, priority: 'normal' | 'high' | undefined): string {
  // Without a high lane, high-priority tasks still go somewhere rather than nowhere.
  return priority === 'high' && options.queueUrls.high ? options.queueUrls.high : options.queueUrls.normal;
}

/** Add freshness to a record, judged now, and count a stale token handed out. */
function withFreshness({ clock, counters }: ProducerContext, record: TaskResult): ProducerResult {
  const now = clock();
  const stale = isStale(record, now);
  if (stale) counters.staleDeliveries += 1;
  return {
    ...record,
    stale,
    ...(record.status === 'solved' && record.tokenExpiresAt !== undefined
      ? { tokenExpiresInMs: record.tokenExpiresAt - now }
      : {}),
  };
}

async function readRecord(
  { documents, options }: ProducerContext,
  taskId: string,
  consistent: boolean,
  abortSignal?: AbortSignal,
): Promise<TaskResult | undefined> {
  const answer = await documents.send(
    new GetCommand({ TableName: options.table, Key: { taskId }, ConsistentRead: consistent }),
    abortSignal !== undefined ? { abortSignal } : {},
  );
  return answer.Item as TaskResult | undefined;
}

/** A read worth trying again within a wait: anything but a refusal no retry changes. */
function retryableRead(error: unknown): boolean {
  return !PERMANENT_READ_ERRORS.has((error as Error).name);
}

/** A duration option: a finite number of ms at least `least`, or the default. */
function msOption(name: string, value: number | undefined, fallback: number, least = 0): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isFinite(value) || value < least)
    throw new TypeError(`${name} must be a finite number of ms, at least ${least} (got ${String(value)})`);
  return value;
}

/**
 * Until the record is terminal (see {@link Producer.wait}). Every read is bounded by the time left
 * and the caller's signal (the SDK's own timeout and tries made a 2 s wait 30 s against a table
 * that did not answer), and a read that fails is tried again at the next turn until the time is
 * up (one failed read ended the wait with the SDK's error); a refusal no retry changes (no such
 * table, no permission, no credentials) ends it at once.
 */
async function waitForResult(ctx: ProducerContext, taskId: string, waitOptions: WaitOptions): Promise<ProducerResult> {
  const timeoutMs = msOption('timeoutMs', waitOptions.timeoutMs, 120_000);
  const maxInterval = msOption('maxIntervalMs', waitOptions.maxIntervalMs, 2_000, 1);
  const fallbackMs = msOption('eventFallbackMs', waitOptions.eventFallbackMs, 5_000, 1);
  let interval = Math.min(maxInterval, msOption('initialIntervalMs', waitOptions.initialIntervalMs, 100, 1));
  const signal = waitOptions.signal;
  const giveUpAt = Date.now() + timeoutMs;
  const events = ctx.options.events;
  let last: TaskResult | undefined;
  let lastError: unknown;
  let heard = false;
  for (;;) {
    signal?.throwIfAborted();
    const listenedAt = Date.now();
    // Listen before reading, so an event published between the read and the wait is not missed.
    // Each wait is bounded by the fallback, so no listener outlives this call by much.
    const event = events
      ?.waitFor(taskId, Math.max(1, Math.min(fallbackMs, giveUpAt - Date.now())))
      .catch(() => undefined);
    // The table stays the source of truth: an event says when to read, the read says what.
    const deadline = AbortSignal.timeout(Math.max(1, giveUpAt - Date.now()));
    try {
      last = await readRecord(ctx, taskId, true, signal ? AbortSignal.any([signal, deadline]) : deadline);
      lastError = undefined;
    } catch (error) {
      signal?.throwIfAborted();
      if (!deadline.aborted && !retryableRead(error)) throw error;
      lastError = error;
    }
    if (last !== undefined && isTerminal(last.status)) {
      if (heard) ctx.counters.waitsByEvent += 1;
      else ctx.counters.waitsByRead += 1;
      return withFreshness(ctx, last);
    }
    const left = giveUpAt - Date.now();
    if (left <= 0)
      throw new TaskWaitTimeoutError(
        taskId,
        timeoutMs,
        last?.status,
        lastError !== undefined ? { cause: lastError } : {},
      );
    heard = false;
    if (event !== undefined) heard = (await raceAbort(event, signal)) !== undefined;
    // No event (none offered, or the source failed or gave up early) and no failed read to wait out
    // more: the reads back off. A source that failed at once read the table 673 times in 2 s.
    if (!heard) {
      const waited = Date.now() - listenedAt;
      const rest = Math.min(interval - waited, giveUpAt - Date.now());
      if (rest > 0) await pause(rest, signal);
      interval = Math.min(maxInterval, Math.ceil(interval * 1.5));
    }
  }
}

/**
 * Check the record (refused at once when the fleet would refuse it, answered at once when settled),
 * send the report message, then read until the record's report settles.
 */
async function reportAnswer(
  ctx: ProducerContext,
  taskId: string,
  verdict: Verdict,
  options: ReportOptions,
): Promise<SettledReport> {
  options.signal?.throwIfAborted();
  const parsed = ReportMessageSchema.safeParse({ taskId, verdict });
  if (!parsed.success)
    throw new TypeError(
      `report(${JSON.stringify(taskId)}, ${JSON.stringify(verdict)}): ${parsed.error.issues
        .map((issue) => `${issue.path.join('.') || '(report)'}: ${issue.message}`)
        .join('; ')} (the task's id as submit returned it, and 'bad' or 'good')`,
    );
  const message: ReportMessage = parsed.data;
  const queueUrl = ctx.options.queueUrls.reports;
  if (queueUrl === undefined)
    throw new TypeError(
      'this producer has no reports queue: pass queueUrls.reports (the stack output ReportsQueueUrl, <prefix>-reports)',
    );
  const settled = (record: TaskResult | undefined): SettledReport | undefined => {
    const decision = decideReport(record, verdict, { now: ctx.clock(), token: '' });
    if (decision.kind === 'settled') {
      if (decision.report.state === 'refused')
        throw new ReportRefusedError(
          taskId,
          decision.report.reason ?? 'PROVIDER_REFUSED',
          decision.report.message ?? 'refused',
          decision.report.code,
          decision.report,
        );
      return decision.report;
    }
    if (decision.kind === 'refuse') {
      const written = record?.report?.state === 'refused' ? (record.report as SettledReport) : undefined;
      throw new ReportRefusedError(taskId, decision.reason, decision.message, written?.code, written);
    }
    return undefined;
  };
  const before = settled(await readRecord(ctx, taskId, true, options.signal));
  if (before !== undefined) return before;
  // The last moment to take the report back: sent, the provider is asked (a refund claimed).
  options.signal?.throwIfAborted();
  await ctx.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(message) }));
  const timeoutMs = msOption('timeoutMs', options.timeoutMs, 60_000);
  const giveUpAt = Date.now() + timeoutMs;
  let interval = 100;
  for (;;) {
    await pause(Math.min(interval, Math.max(1, giveUpAt - Date.now())), options.signal);
    const after = settled(await readRecord(ctx, taskId, true));
    if (after !== undefined) return after;
    if (Date.now() >= giveUpAt) throw new ReportWaitTimeoutError(taskId, timeoutMs);
    interval = Math.min(1_000, Math.ceil(interval * 1.5));
  }
}

function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    // An abort before the pause is one too (a listener added now would never hear it).
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
