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
/** DynamoDB errors no retry changes: the id check gives up on them at once. */
const PERMANENT_READ_ERRORS: ReadonlySet<string> = new Set([
  'AccessDeniedException',
  'ResourceNotFoundException',
  'ValidationException',
  'UnrecognizedClientException',
]);

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
  ) {
    super(
      `the results table could not be read to check ${taskIds.length} task id(s) for reuse; nothing was sent ` +
        `(retry later, or create the producer with idCheckUnavailable: 'send': the consumer checks ids again)`,
      options,
    );
  }

  get taskId(): string | undefined {
    return this.taskIds[0];
  }
}

/** SQS refused some messages of a batch; the others were sent. */
export class TaskSubmitError extends Error {
  override readonly name = 'TaskSubmitError';
  constructor(
    message: string,
    /** Ids SQS refused. */
    readonly failedIds: string[],
    /** Ids that were sent before or alongside the failure. */
    readonly sentIds: string[],
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
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
    const parsed = TaskSchema.safeParse(candidate);
    if (!parsed.success) {
      const id = (candidate as { id?: unknown } | null)?.id;
      for (const issue of taskIssues(parsed.error, candidate)) {
        problems.push({
          index,
          taskId: typeof id === 'string' ? id : undefined,
          path: issue.path || '(task)',
          message: issue.message,
        });
      }
      return;
    }
    const task = parsed.data;
    const id = task.id ?? randomUUID();
    const message = { ...task, id, submittedAt: task.submittedAt ?? clock() };
    const body = JSON.stringify(message);
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

  const duplicates = prepared.map((p) => p.id).filter((id, i, ids) => ids.indexOf(id) !== i);
  if (duplicates.length > 0) {
    throw new TaskValidationError(
      duplicates.map((id) => ({
        index: prepared.findIndex((p) => p.id === id),
        taskId: id,
        path: 'id',
        message: 'the same id appears twice in one submission',
      })),
    );
  }
  return prepared;
}

/**
 * Send in batches of 10 per queue. A call that fails for SQS's sake (throttled, 5xx, a reset
 * connection) and entries SQS failed on its side are tried again with backoff: a resend is safe,
 * since the task's id makes a second copy a duplicate the consumer acknowledges without solving.
 * An entry SQS refuses as the sender's fault, or still failing after the tries, throws with what
 * was sent before it.
 */
async function sendPrepared(ctx: ProducerContext, prepared: readonly PreparedTask[]): Promise<void> {
  const sent: string[] = [];
  const byQueue = new Map<string, PreparedTask[]>();
  for (const item of prepared) byQueue.set(item.queueUrl, [...(byQueue.get(item.queueUrl) ?? []), item]);
  for (const [queueUrl, items] of byQueue) {
    for (let i = 0; i < items.length; i += SEND_BATCH) {
      await sendChunk(ctx, queueUrl, items.slice(i, i + SEND_BATCH), sent);
    }
  }
}

async function sendChunk(
  ctx: ProducerContext,
  queueUrl: string,
  chunk: readonly PreparedTask[],
  sent: string[],
): Promise<void> {
  let left = [...chunk];
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
      if (attempt < SEND_ATTEMPTS && retryableSend(error)) {
        ctx.counters.sendRetries += 1;
        await pause(RETRY_BASE_MS * 2 ** (attempt - 1), undefined);
        continue;
      }
      throw new TaskSubmitError(
        `sending ${left.length} task(s) failed: ${(error as Error).message}`,
        left.map((c) => c.id),
        [...sent],
        { cause: error },
      );
    }
    const failedEntries = answer.Failed ?? [];
    const failedAt = new Set(failedEntries.map((entry) => Number(entry.Id)));
    sent.push(...left.filter((_, n) => !failedAt.has(n)).map((item) => item.id));
    if (failedEntries.length === 0) return;
    const senderFault = failedEntries.filter((entry) => entry.SenderFault !== false);
    if (senderFault.length === 0 && attempt < SEND_ATTEMPTS) {
      ctx.counters.sendRetries += 1;
      left = left.filter((_, n) => failedAt.has(n));
      await pause(RETRY_BASE_MS * 2 ** (attempt - 1), undefined);
      continue;
    }
    const failed = failedEntries.map((entry) => left[Number(entry.Id)]?.id ?? `entry ${entry.Id}`);
    const reasons = [...new Set(failedEntries.map((entry) => `${entry.Code}: ${entry.Message ?? ''}`))].join('; ');
    throw new TaskSubmitError(`SQS refused ${failed.length} task(s): ${reasons}`, failed, [...sent]);
  }
}

/** A failed SendMessageBatch worth trying again: SQS's side (5xx, throttling) or the network, not the request. */
function retryableSend(error: unknown): boolean {
  const e = error as { $fault?: string; name?: string; $metadata?: { httpStatusCode?: number } };
  if (e.$fault === 'server') return true;
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
    if (ctx.options.idCheckUnavailable === 'refuse') throw new IdCheckUnavailableError(ids, { cause: error });
    ctx.counters.idChecksSkipped += ids.length;
    ctx.options.onWarning?.({
      code: 'ID_CHECK_SKIPPED',
      message: `the results table could not be read to check ${ids.length} task id(s) for reuse; sent anyway (the consumer checks them when it claims each task): ${(error as Error).message}`,
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
    conflicts.push({ index: item.index, taskId: item.id, status: record.status, expiresAt: record.expiresAt });
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
): Promise<TaskResult | undefined> {
  const answer = await documents.send(
    new GetCommand({ TableName: options.table, Key: { taskId }, ConsistentRead: consistent }),
  );
  return answer.Item as TaskResult | undefined;
}

/** Until the record is terminal (see {@link Producer.wait}). */
async function waitForResult(ctx: ProducerContext, taskId: string, waitOptions: WaitOptions): Promise<ProducerResult> {
  const timeoutMs = waitOptions.timeoutMs ?? 120_000;
  const maxInterval = waitOptions.maxIntervalMs ?? 2_000;
  const fallbackMs = waitOptions.eventFallbackMs ?? 5_000;
  let interval = waitOptions.initialIntervalMs ?? 100;
  const giveUpAt = Date.now() + timeoutMs;
  const events = ctx.options.events;
  let last: TaskResult | undefined;
  let heard = false;
  for (;;) {
    waitOptions.signal?.throwIfAborted();
    // Listen before reading, so an event published between the read and the wait is not missed.
    // Each wait is bounded by the fallback, so no listener outlives this call by much.
    // A failing event source only costs the wait its speed: the reads go on.
    const event = events
      ?.waitFor(taskId, Math.max(1, Math.min(fallbackMs, giveUpAt - Date.now())))
      .catch(() => undefined);
    // The table stays the source of truth: an event says when to read, the read says what.
    last = await readRecord(ctx, taskId, true);
    if (last !== undefined && isTerminal(last.status)) {
      if (heard) ctx.counters.waitsByEvent += 1;
      else ctx.counters.waitsByRead += 1;
      return withFreshness(ctx, last);
    }
    const left = giveUpAt - Date.now();
    if (left <= 0) throw new TaskWaitTimeoutError(taskId, timeoutMs, last?.status);
    if (event !== undefined) {
      heard = (await raceAbort(event, waitOptions.signal)) !== undefined;
    } else {
      await pause(Math.min(interval, left), waitOptions.signal);
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
  const message: ReportMessage = ReportMessageSchema.parse({ taskId, verdict });
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
  const before = settled(await readRecord(ctx, taskId, true));
  if (before !== undefined) return before;
  await ctx.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: JSON.stringify(message) }));
  const timeoutMs = options.timeoutMs ?? 60_000;
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
