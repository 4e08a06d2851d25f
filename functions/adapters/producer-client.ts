/**
 * The producer's side of the fleet, for other programs: submit tasks to the queues, read and
 * wait for their results. Works against AWS or any AWS-compatible endpoint (the local stack)
 * through the clients it is given.
 *
 * ```ts
 * const producer = createProducer({ queueUrls: { normal, high }, table: 'captcha-fleet-results', clients: createAwsClients() });
 * const result = await producer.solve({ method: 'turnstile', params: { sitekey: '0x4AAAAAAA…', pageurl: 'https://example.com' } });
 * ```
 */
import { randomUUID } from 'node:crypto';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { TaskSchema, type TaskMessage } from '../core/task.js';
import { isTerminal, type TaskResult } from '../core/results.js';

/** SQS's SendMessageBatch limit. */
const SEND_BATCH = 10;

export interface ProducerOptions {
  queueUrls: { normal: string; high?: string };
  /** Name of the results table. */
  table: string;
  clients: { sqs: SQSClient; documents: DynamoDBDocumentClient };
  /** Epoch ms; stamps `submittedAt` when a task carries none. */
  clock?: () => number;
}

export interface WaitOptions {
  /** Give up after this long, ms. @default 120000 (the usual `wait_result` limit) */
  timeoutMs?: number;
  /** First pause between reads, ms; grows by half each read. @default 100 */
  initialIntervalMs?: number;
  /** Longest pause between reads, ms. @default 2000 */
  maxIntervalMs?: number;
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
        problems.map((p) => `  - task #${p.index}${p.taskId ? ` (${p.taskId})` : ''} ${p.path}: ${p.message}`).join('\n'),
    );
    this.taskId = problems[0]?.taskId;
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
    super(`task ${taskId} has no result after ${timeoutMs} ms (last status: ${lastStatus ?? 'no record yet, still queued'})`, options);
  }
}

export interface Producer {
  /** Validate, then send; returns the task's id (assigned when the task has none). */
  submit(task: TaskMessage): Promise<string>;
  /** Validate all, then send in batches of 10; returns the ids in the same order. */
  submit(tasks: readonly TaskMessage[]): Promise<string[]>;
  /** The task's record, or undefined while none exists. */
  get(taskId: string, options?: { consistent?: boolean }): Promise<TaskResult | undefined>;
  /** Read (strongly consistent, with backoff) until the record is terminal. */
  wait(taskId: string, options?: WaitOptions): Promise<TaskResult>;
  /** `submit` then `wait`. */
  solve(task: TaskMessage, options?: WaitOptions): Promise<TaskResult>;
}

/** Build a producer. See the module comment for an example. */
export function createProducer(options: ProducerOptions): Producer {
  const clock = options.clock ?? Date.now;
  const { sqs, documents } = options.clients;

  async function submitMany(input: readonly unknown[]): Promise<string[]> {
    const problems: TaskProblem[] = [];
    const prepared: { id: string; body: string; queueUrl: string }[] = [];
    input.forEach((candidate, index) => {
      const parsed = TaskSchema.safeParse(candidate);
      if (!parsed.success) {
        const id = (candidate as { id?: unknown } | null)?.id;
        for (const issue of parsed.error.issues) {
          problems.push({ index, taskId: typeof id === 'string' ? id : undefined, path: issue.path.join('.') || '(task)', message: issue.message });
        }
        return;
      }
      const task = parsed.data;
      const id = task.id ?? randomUUID();
      const message = { ...task, id, submittedAt: task.submittedAt ?? clock() };
      prepared.push({ id, body: JSON.stringify(message), queueUrl: queueFor(task.priority) });
    });
    if (problems.length > 0) throw new TaskValidationError(problems);

    const duplicates = prepared.map((p) => p.id).filter((id, i, ids) => ids.indexOf(id) !== i);
    if (duplicates.length > 0) {
      throw new TaskValidationError(
        duplicates.map((id) => ({ index: prepared.findIndex((p) => p.id === id), taskId: id, path: 'id', message: 'the same id appears twice in one submission' })),
      );
    }

    const sent: string[] = [];
    const byQueue = new Map<string, typeof prepared>();
    for (const item of prepared) byQueue.set(item.queueUrl, [...(byQueue.get(item.queueUrl) ?? []), item]);
    for (const [queueUrl, items] of byQueue) {
      for (let i = 0; i < items.length; i += SEND_BATCH) {
        const chunk = items.slice(i, i + SEND_BATCH);
        let answer;
        try {
          answer = await sqs.send(
            new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: chunk.map((item, n) => ({ Id: String(n), MessageBody: item.body })) }),
          );
        } catch (error) {
          throw new TaskSubmitError(`sending ${chunk.length} task(s) failed: ${(error as Error).message}`, chunk.map((c) => c.id), sent, { cause: error });
        }
        const failed = (answer.Failed ?? []).map((entry) => chunk[Number(entry.Id)]!.id);
        const ok = chunk.filter((item) => !failed.includes(item.id)).map((item) => item.id);
        sent.push(...ok);
        if (failed.length > 0) {
          const reasons = [...new Set((answer.Failed ?? []).map((entry) => `${entry.Code}: ${entry.Message ?? ''}`))].join('; ');
          throw new TaskSubmitError(`SQS refused ${failed.length} task(s): ${reasons}`, failed, sent);
        }
      }
    }
    return prepared.map((item) => item.id);
  }

  function queueFor(priority: 'normal' | 'high' | undefined): string {
    // Without a high lane, high-priority tasks still go somewhere rather than nowhere.
    return priority === 'high' && options.queueUrls.high ? options.queueUrls.high : options.queueUrls.normal;
  }

  async function get(taskId: string, getOptions: { consistent?: boolean } = {}): Promise<TaskResult | undefined> {
    const answer = await documents.send(new GetCommand({ TableName: options.table, Key: { taskId }, ConsistentRead: getOptions.consistent ?? false }));
    return answer.Item as TaskResult | undefined;
  }

  async function wait(taskId: string, waitOptions: WaitOptions = {}): Promise<TaskResult> {
    const timeoutMs = waitOptions.timeoutMs ?? 120_000;
    const maxInterval = waitOptions.maxIntervalMs ?? 2_000;
    let interval = waitOptions.initialIntervalMs ?? 100;
    const giveUpAt = Date.now() + timeoutMs;
    let last: TaskResult | undefined;
    for (;;) {
      waitOptions.signal?.throwIfAborted();
      last = await get(taskId, { consistent: true });
      if (last !== undefined && isTerminal(last.status)) return last;
      const left = giveUpAt - Date.now();
      if (left <= 0) throw new TaskWaitTimeoutError(taskId, timeoutMs, last?.status);
      await pause(Math.min(interval, left), waitOptions.signal);
      interval = Math.min(maxInterval, Math.ceil(interval * 1.5));
    }
  }

  const submit = (async (task: TaskMessage | readonly TaskMessage[]) => {
    if (Array.isArray(task)) return submitMany(task);
    const [id] = await submitMany([task]);
    return id!;
  }) as Producer['submit'];

  return {
    submit,
    get,
    wait,
    async solve(task, waitOptions) {
      return wait(await submit(task), waitOptions);
    },
  };
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
