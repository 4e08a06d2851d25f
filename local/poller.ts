/**
 * The local stand-in for Lambda's SQS event source mapping: long-polls one queue, hands batches
 * to the consumer handler as a Lambda would (a well-formed `SQSEvent` and `Context`), keeps at
 * most `maxConcurrency` invocations in flight, deletes what the handler reports as done, and
 * treats an invocation past the function timeout as dead.
 *
 * Semantics follow the AWS documentation for SQS event sources with `ReportBatchItemFailures`:
 * - a resolved response deletes every record not listed in `batchItemFailures`;
 * - a throw, a timeout or a malformed response deletes nothing (the batch returns after the
 *   visibility timeout and, after `maxReceiveCount` receives, reaches the DLQ);
 * - lowering `MaximumConcurrency` lets in-flight invocations finish; disabling the mapping stops
 *   receiving.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import {
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  type Message,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { sleep } from '../functions/core/helpers/time.js';
import { MappingRamp, type MappingRampParams } from '../functions/core/mapping-ramp.js';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { lambdaRecordOf, readFailures } from '../functions/adapters/sqs-record.js';

/** The consumer's shape: Lambda's SQS handler with partial batch responses. */
export type SqsBatchHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse | undefined>;

/** Why an invocation ended without its result being used. */
export type InvocationDeath = 'timeout' | 'crash';

/**
 * Concurrency shared by several pollers of the same function, as the function's reserved
 * concurrency is shared by its event source mappings. Locally a received batch waits for a
 * slot instead of being throttled back to the queue. Receives do not hold slots: an idle lane's
 * long poll must not take capacity from a busy one.
 */
export interface ConcurrencyPool {
  /** Invocations the pool allows at once. */
  limit: number;
  /** Invocations running across the pollers; maintained by them. */
  inUse: number;
  /** Most invocations that ran at once across the pollers. */
  peak?: number;
}

export interface PollerOptions {
  sqs: SQSClient;
  queueUrl: string;
  /** Read from the queue when omitted. */
  queueArn?: string;
  region: string;
  handler: SqsBatchHandler;
  /** SQS batch size (1-10): records per invocation. */
  batchSize: number;
  /** Invocations in flight at most (the mapping's `ScalingConfig.MaximumConcurrency`). */
  maxConcurrency: number;
  /** Function timeout, ms: past it an invocation is dead. */
  functionTimeoutMs: number;
  functionName?: string;
  memoryLimitInMB?: number;
  /**
   * Long-poll wait per ReceiveMessage, seconds. Short locally so a stop takes effect at once
   * (the receive is also aborted) and a raised ceiling is used quickly.
   * @default 1
   */
  waitTimeSeconds?: number;
  /**
   * Receive calls in flight at once (Lambda runs several pollers per mapping).
   * @default 2
   */
  receivers?: number;
  /** Start disabled (a paused mapping). @default true */
  enabled?: boolean;
  /**
   * Scale as Lambda's pollers do (functions/core/mapping-ramp.ts: five invocations at first, up
   * to 300 more a minute while messages wait, from the start again after a pause), stepped every
   * `stepSeconds` of real time. Absent: `maxConcurrency` at once.
   */
  ramp?: MappingRampParams;
  /** Shared with the other pollers of the same function. */
  pool?: ConcurrencyPool;
  /** Errors of the poller itself (receive or delete calls); the handler's errors are counted, not reported. */
  onError?: (error: unknown, during: 'receive' | 'delete') => void;
  /** Called when an invocation ends, however it ends. */
  onInvocationEnd?: (summary: InvocationSummary) => void;
  now?: () => number;
}

/** How one invocation ended. */
export interface InvocationSummary {
  requestId: string;
  records: number;
  outcome: 'ok' | 'error' | 'timeout' | 'crash' | 'bad_response';
  deleted: number;
  failed: number;
  durationMs: number;
}

/** Counters since the poller started. */
export interface PollerStats {
  invocations: number;
  inFlight: number;
  peakConcurrency: number;
  /** Messages received (records handed to the handler). */
  received: number;
  /** Messages deleted after a successful invocation. */
  deleted: number;
  /** Records the handler listed in `batchItemFailures`. */
  failedItems: number;
  /** Invocations that threw: nothing deleted. */
  errors: number;
  /** Invocations whose response named records not in the batch: treated as a throw. */
  badResponses: number;
  timeouts: number;
  /** Invocations killed by chaos (after solving, before recording). */
  crashes: number;
  /** Summed duration of the ended invocations, ms (what Lambda would bill, before rounding). */
  invocationMs: number;
  /** Deletes SQS refused (e.g. an expired receipt handle). */
  deleteFailures: number;
  receiveErrors: number;
  maxConcurrency: number;
  enabled: boolean;
}

/** What the handler's async context can see of the invocation it runs in (chaos, guards). */
export interface InvocationHandle {
  readonly requestId: string;
  /** True once the invocation timed out or crashed: its writes must not happen. */
  readonly dead: boolean;
  /** Kill the invocation as a crash (OOM, runtime exit): nothing deleted, its result ignored. */
  kill(reason: InvocationDeath): void;
}

const invocationScope = new AsyncLocalStorage<InvocationHandle>();
/** The pollers sharing each pool, so a slot freed in one lane wakes the others. */
const pools = new WeakMap<ConcurrencyPool, Set<Poller>>();

/** The invocation the caller runs inside, when called from a handler a poller invoked. */
export function currentInvocation(): InvocationHandle | undefined {
  return invocationScope.getStore();
}

/** Thrown by `Poller.start` when the queue cannot be read. */
export class PollerError extends Error {
  override readonly name = 'PollerError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/**
 * One event source mapping. Create, `start()`, and `stop()` when done.
 * The governor drives it through `setMaxConcurrency` and `setEnabled`.
 */
export class Poller {
  private readonly options: Required<
    Pick<PollerOptions, 'waitTimeSeconds' | 'receivers' | 'functionName' | 'memoryLimitInMB'>
  > &
    PollerOptions;
  private readonly now: () => number;
  private running = false;
  private currentMax: number;
  private isEnabled: boolean;
  private queueArn: string | undefined;
  /** Receives in flight: each holds a concurrency slot so a batch never lands above the ceiling. */
  private receiving = 0;
  private active = 0;
  private readonly abort = new AbortController();
  private readonly waiters = new Set<() => void>();
  private readonly loops: Promise<void>[] = [];
  private readonly live = new Set<Promise<void>>();
  /**
   * Lambda's pollers' ramp (`ramp`), and what the receives since its last step saw of the queue:
   * messages, only empty answers, or nothing (every slot busy: the last step's answer stands).
   */
  private readonly ramp: MappingRamp | undefined;
  private rampTimer: NodeJS.Timeout | undefined;
  private queueSeen: 'messages' | 'empty' | undefined;
  private backlogSeen = 0;
  private readonly counters = {
    invocations: 0,
    peakConcurrency: 0,
    received: 0,
    deleted: 0,
    failedItems: 0,
    errors: 0,
    badResponses: 0,
    timeouts: 0,
    crashes: 0,
    invocationMs: 0,
    deleteFailures: 0,
    receiveErrors: 0,
  };

  constructor(options: PollerOptions) {
    if (!Number.isInteger(options.batchSize) || options.batchSize < 1 || options.batchSize > 10) {
      throw new RangeError(`batchSize must be an integer from 1 to 10, got ${options.batchSize}`);
    }
    assertConcurrency(options.maxConcurrency);
    if (!(options.functionTimeoutMs > 0))
      throw new RangeError(`functionTimeoutMs must be positive, got ${options.functionTimeoutMs}`);
    this.options = {
      waitTimeSeconds: 1,
      receivers: 2,
      functionName: 'captcha-fleet-consumer',
      memoryLimitInMB: 512,
      ...options,
    };
    this.now = options.now ?? Date.now;
    this.currentMax = options.maxConcurrency;
    this.isEnabled = options.enabled ?? true;
    this.queueArn = options.queueArn;
    this.ramp = options.ramp && new MappingRamp(options.ramp, this.currentMax, this.isEnabled);
  }

  /** The mapping's current maximum concurrency. */
  get maxConcurrency(): number {
    return this.currentMax;
  }

  /** False while the mapping is disabled (paused). */
  get enabled(): boolean {
    return this.isEnabled;
  }

  /** Invocations running now. */
  get inFlight(): number {
    return this.active;
  }

  /** Change the ceiling while running; in-flight invocations above it finish normally. */
  setMaxConcurrency(value: number): void {
    assertConcurrency(value);
    this.currentMax = value;
    this.ramp?.set(value, this.isEnabled);
    this.wake();
  }

  /** Disable (stop receiving; in-flight invocations finish) or enable the mapping. */
  setEnabled(value: boolean): void {
    this.isEnabled = value;
    this.ramp?.set(this.currentMax, value);
    this.wake();
  }

  stats(): PollerStats {
    return { ...this.counters, inFlight: this.active, maxConcurrency: this.currentMax, enabled: this.isEnabled };
  }

  /** Invocations (and receives) the pollers allow now: the ceiling, or the ramp's allowance under it. */
  get allowed(): number {
    return this.ramp === undefined ? this.currentMax : Math.max(0, Math.floor(this.ramp.limit()));
  }

  /** One step of the ramp: messages wait when a receive found some since the last step (none when they all came back empty). */
  private stepRamp(): void {
    if (this.queueSeen !== undefined) this.backlogSeen = this.queueSeen === 'messages' ? 1 : 0;
    this.queueSeen = undefined;
    this.ramp?.step(this.backlogSeen, this.active + this.receiving);
    this.wake();
  }

  /** Begin polling. Resolves once the queue's ARN is known and the receive loops run. */
  async start(): Promise<void> {
    if (this.running) return;
    if (this.queueArn === undefined) {
      try {
        const described = await this.options.sqs.send(
          new GetQueueAttributesCommand({ QueueUrl: this.options.queueUrl, AttributeNames: ['QueueArn'] }),
        );
        this.queueArn = described.Attributes?.QueueArn;
      } catch (error) {
        throw new PollerError(`cannot read queue ${this.options.queueUrl}`, { cause: error });
      }
      if (this.queueArn === undefined) throw new PollerError(`queue ${this.options.queueUrl} reports no QueueArn`);
    }
    this.running = true;
    if (this.options.pool) pools.set(this.options.pool, (pools.get(this.options.pool) ?? new Set()).add(this));
    if (this.ramp !== undefined && this.options.ramp !== undefined) {
      this.rampTimer = setInterval(() => this.stepRamp(), this.options.ramp.stepSeconds * 1000);
      this.rampTimer.unref();
    }
    for (let i = 0; i < Math.max(1, this.options.receivers); i++) this.loops.push(this.receiveLoop());
  }

  /**
   * Stop receiving (an outstanding long poll is aborted) and wait for in-flight invocations,
   * at most `graceMs` (default: the function timeout, after which they would be dead anyway).
   */
  async stop(options: { graceMs?: number } = {}): Promise<void> {
    if (!this.running) return;
    this.running = false;
    clearInterval(this.rampTimer);
    this.abort.abort();
    this.wake();
    await Promise.all(this.loops);
    if (this.options.pool) pools.get(this.options.pool)?.delete(this);
    const grace = options.graceMs ?? this.options.functionTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...this.live]),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, grace);
      }),
    ]);
    clearTimeout(timer);
  }

  /** Resolves when no invocation runs and no receive is outstanding (used by tests and the demo). */
  async idle(): Promise<void> {
    while (this.active > 0 || this.live.size > 0) await this.changed();
  }

  /** A receive may start: the lane has a slot for its batch and the shared pool is not full. */
  private slotFree(): boolean {
    const mine = this.active + this.receiving < this.allowed;
    return this.running && this.isEnabled && mine && this.poolFree();
  }

  private poolFree(): boolean {
    const pool = this.options.pool;
    return pool === undefined || pool.inUse < pool.limit;
  }

  private async receiveLoop(): Promise<void> {
    let backoffMs = 100;
    while (this.running) {
      if (!this.slotFree()) {
        await this.changed();
        continue;
      }
      this.receiving++;
      let messages: Message[] = [];
      try {
        const answer = await this.options.sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: this.options.queueUrl,
            MaxNumberOfMessages: this.options.batchSize,
            WaitTimeSeconds: this.options.waitTimeSeconds,
            MessageSystemAttributeNames: ['All'],
            MessageAttributeNames: ['All'],
          }),
          { abortSignal: this.abort.signal },
        );
        messages = answer.Messages ?? [];
        backoffMs = 100;
      } catch (error) {
        if (!this.running) {
          this.release();
          break;
        }
        this.counters.receiveErrors++;
        this.options.onError?.(error, 'receive');
        this.release();
        await sleep(backoffMs);
        backoffMs = Math.min(backoffMs * 2, 2_000);
        continue;
      }
      if (messages.length === 0) {
        this.queueSeen ??= 'empty';
        this.release();
        continue;
      }
      this.queueSeen = 'messages';
      // Another lane may have filled the shared pool meanwhile: the batch waits (invisible)
      // for a slot. The lane's own slot passes from the receive to the invocation.
      while (this.running && !this.poolFree()) await this.changed();
      if (!this.running) {
        // Stopping: the batch is left to its visibility timeout, as a throttled one would be.
        this.release();
        break;
      }
      this.receiving--;
      this.invoke(messages);
    }
  }

  private release(): void {
    this.receiving--;
    this.wake();
  }

  private invoke(messages: Message[]): void {
    const requestId = randomUUID();
    const startedAt = this.now();
    const deadline = startedAt + this.options.functionTimeoutMs;
    const event: SQSEvent = { Records: messages.map((message) => this.toRecord(message)) };
    const context = this.makeContext(requestId, deadline);
    this.active++;
    this.counters.invocations++;
    this.counters.received += messages.length;
    this.counters.peakConcurrency = Math.max(this.counters.peakConcurrency, this.active);
    this.ramp?.observe(this.active);
    const pool = this.options.pool;
    if (pool) {
      pool.inUse++;
      pool.peak = Math.max(pool.peak ?? 0, pool.inUse);
    }

    let settle!: (
      outcome:
        | { kind: 'result'; value: unknown }
        | { kind: 'throw'; error: unknown }
        | { kind: 'dead'; reason: InvocationDeath },
    ) => void;
    const ended = new Promise<Parameters<typeof settle>[0]>((resolve) => {
      settle = resolve;
    });
    let dead = false;
    const handle: InvocationHandle = {
      requestId,
      get dead() {
        return dead;
      },
      kill: (reason) => {
        if (dead) return;
        dead = true;
        settle({ kind: 'dead', reason });
      },
    };
    const timer = setTimeout(() => handle.kill('timeout'), this.options.functionTimeoutMs);
    invocationScope.run(handle, () => {
      Promise.resolve()
        .then(() => this.options.handler(event, context))
        .then(
          (value) => settle({ kind: 'result', value }),
          (error: unknown) => settle({ kind: 'throw', error }),
        );
    });

    const finished = ended.then(async (outcome) => {
      clearTimeout(timer);
      // The first settlement wins: a result arriving after the timeout is ignored.
      dead = true;
      const summary: InvocationSummary = {
        requestId,
        records: messages.length,
        outcome: 'ok',
        deleted: 0,
        failed: 0,
        durationMs: this.now() - startedAt,
      };
      this.counters.invocationMs += summary.durationMs;
      if (outcome.kind === 'dead') {
        summary.outcome = outcome.reason;
        if (outcome.reason === 'timeout') this.counters.timeouts++;
        else this.counters.crashes++;
      } else if (outcome.kind === 'throw') {
        summary.outcome = 'error';
        this.counters.errors++;
      } else {
        const failedIds = readFailures(outcome.value, event);
        if (failedIds === undefined) {
          summary.outcome = 'bad_response';
          this.counters.badResponses++;
        } else {
          summary.failed = failedIds.size;
          this.counters.failedItems += failedIds.size;
          const done = messages.filter((message) => !failedIds.has(message.MessageId ?? ''));
          summary.deleted = await this.deleteMessages(done);
        }
      }
      // The slot is given back only after the deletes, as Lambda's poller does.
      this.active--;
      if (pool) {
        pool.inUse--;
        // Other lanes wait on the pool: tell them too.
        for (const neighbour of pools.get(pool) ?? []) if (neighbour !== this) neighbour.wake();
      }
      this.options.onInvocationEnd?.(summary);
      this.wake();
    });
    this.live.add(finished);
    void finished.finally(() => {
      this.live.delete(finished);
      this.wake();
    });
  }

  private async deleteMessages(messages: Message[]): Promise<number> {
    let deleted = 0;
    for (let i = 0; i < messages.length; i += 10) {
      const chunk = messages.slice(i, i + 10);
      try {
        const answer = await this.options.sqs.send(
          new DeleteMessageBatchCommand({
            QueueUrl: this.options.queueUrl,
            Entries: chunk.map((message, index) => ({ Id: String(index), ReceiptHandle: message.ReceiptHandle })),
          }),
        );
        const ok = answer.Successful?.length ?? 0;
        deleted += ok;
        this.counters.deleteFailures += chunk.length - ok;
      } catch (error) {
        this.counters.deleteFailures += chunk.length;
        this.options.onError?.(error, 'delete');
      }
    }
    this.counters.deleted += deleted;
    return deleted;
  }

  private toRecord(message: Message): SQSRecord {
    return lambdaRecordOf(message, { queueArn: this.queueArn ?? '', region: this.options.region, now: this.now() });
  }

  private makeContext(requestId: string, deadline: number): Context {
    return lambdaContextOf({
      functionName: this.options.functionName,
      region: this.options.region,
      account: accountOf(this.queueArn),
      memoryLimitInMB: this.options.memoryLimitInMB,
      requestId,
      deadline,
      now: this.now,
    });
  }

  private changed(): Promise<void> {
    return new Promise((resolve) => this.waiters.add(resolve));
  }

  private wake(): void {
    const waiting = [...this.waiters];
    this.waiters.clear();
    for (const resolve of waiting) resolve();
  }
}

/** Create a poller (see {@link Poller}). */
export function createPoller(options: PollerOptions): Poller {
  return new Poller(options);
}

function assertConcurrency(value: number): void {
  if (!Number.isInteger(value) || value < 1)
    throw new RangeError(`maxConcurrency must be a positive integer, got ${value}`);
}

function accountOf(arn: string | undefined): string | undefined {
  return arn?.split(':')[4] || undefined;
}

/** What a local invocation's `Context` is made of. */
export interface LocalContextInput {
  functionName: string | undefined;
  region: string;
  account?: string | undefined;
  memoryLimitInMB: number | undefined;
  requestId: string;
  /** Epoch ms by which the invocation must have returned. */
  deadline: number;
  now: () => number;
}

/** A Lambda `Context` for a local invocation (the poller's, the governor's probe's); callbacks are not supported. */
export function lambdaContextOf(input: LocalContextInput): Context {
  const { functionName, region, requestId, deadline, now } = input;
  const account = input.account ?? '000000000000';
  const unsupported = (what: string) => () => {
    throw new Error(`context.${what} is not supported: return a promise from the handler`);
  };
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName: functionName as string,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${region}:${account}:function:${functionName}`,
    memoryLimitInMB: String(input.memoryLimitInMB),
    awsRequestId: requestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: `local/[$LATEST]${requestId.replaceAll('-', '')}`,
    getRemainingTimeInMillis: () => Math.max(0, deadline - now()),
    done: unsupported('done'),
    fail: unsupported('fail'),
    succeed: unsupported('succeed'),
  };
}
