import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { SqsTaskQueue } from '../../functions/adapters/task-queue.js';
import { METRICS } from '../../functions/core/metric-names.js';
import type {
  DeadLetter,
  DeliveredMessage,
  MessageCopy,
  ResultsRepository,
  SolveOptions,
  SolveOutcome,
  SolverAnswer,
  TaskQueue,
} from '../../functions/core/ports.js';
import type { FleetConfig } from '../../functions/core/settings.js';
import {
  SolverAccountError,
  SolverError,
  SolverOverCapError,
  SolverTimeoutError,
  SolverTaskError,
  SolverTransientError,
  TOKEN_TTL_MS,
} from '../../functions/core/solver-protocol.js';
import { MAX_TASK_BYTES, type Task, type TaskMessage } from '../../functions/core/task.js';
import { createConsumerHandler, type ConsumerTiming } from '../../functions/consumer/create-handler.js';
import {
  deliver,
  lambdaContext,
  queueDepth,
  receive,
  sendMessage,
  sleep,
  startEmulatorFixture,
  toSqsEvent,
  type EmulatorFixture,
  type TestFleet,
} from '../helpers/fleet-fixture.js';
import { printable } from '../../functions/core/helpers/printable.js';
import {
  captureLogs,
  captureMetrics,
  imageTask,
  recaptchaTask,
  ScriptedSolver,
  taskId,
  TEST_SOLVER_KEY,
  type SolverStep,
} from '../helpers/factories.js';

let fixture: EmulatorFixture;
let logs: ReturnType<typeof captureLogs>;
/** Answers handed out in the current test: none may appear in a log line. */
let answersGiven: string[] = [];

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});
beforeEach(() => {
  logs = captureLogs();
  answersGiven = [];
});
afterEach(() => {
  logs.restore();
  // Every test doubles as a leak check: no key, no answer, and a task id on every line.
  const text = logs.raw.join('');
  expect(text).not.toContain(TEST_SOLVER_KEY);
  for (const answer of answersGiven) expect(text).not.toContain(answer);
  for (const entry of logs.entries()) expect(entry, JSON.stringify(entry)).toHaveProperty('taskId');
});

/** Records what the consumer asked of the queue, then does it for real. */
class RecordingQueue implements TaskQueue {
  readonly visibility: Array<{ receiptHandle: string; seconds: number }> = [];
  readonly letters: DeadLetter[] = [];
  /** What was asked of the queue and the solver, in order (`solve:<id>` is pushed by the test). */
  readonly order: string[] = [];
  failDeadLetters = false;
  /** A slow DLQ: each letter's send takes this long. */
  deadLetterDelayMs = 0;
  constructor(private readonly inner: TaskQueue) {}
  async deadLetter(letter: DeadLetter): Promise<void> {
    if (this.failDeadLetters) throw new Error('DLQ unreachable');
    if (this.deadLetterDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.deadLetterDelayMs));
    this.letters.push(letter);
    this.order.push(`letter:${letter.reason}`);
    await this.inner.deadLetter(letter);
  }
  async changeVisibility(message: DeliveredMessage, seconds: number): Promise<void> {
    this.visibility.push({ receiptHandle: message.receiptHandle, seconds });
    await this.inner.changeVisibility(message, seconds);
  }
  async acknowledge(message: DeliveredMessage): Promise<void> {
    await this.inner.acknowledge(message);
    this.order.push(`deleted:${message.messageId}`);
  }
  requeue(message: DeliveredMessage, copy: MessageCopy): Promise<{ deleted: boolean }> {
    return this.inner.requeue(message, copy);
  }
}

/** A step that can also list the exact solver responses the solve reports, in order. */
type AnsweringStep = SolverStep & { answers?: SolverAnswer[] };

/**
 * The scripted solver, reporting its responses through `onSolverAnswer` as the real client does
 * (the consumer counts requests and error answers only from there). Without `answers`, a step's
 * responses are derived: over-cap retries and the acceptance on submission; transient retries,
 * not-ready polls and the answer on success (`resultRequests` in all); the error otherwise.
 */
class AnsweringSolver extends ScriptedSolver {
  private readonly steps = new Map<string, AnsweringStep[]>();

  override script(id: string, ...steps: AnsweringStep[]): this {
    this.steps.set(id, [...(this.steps.get(id) ?? []), ...steps]);
    return super.script(id, ...steps);
  }

  override async solve(task: Task, options: SolveOptions): Promise<SolveOutcome> {
    const step = this.steps.get(task.id)?.shift() ?? {};
    const emit = (answer: SolverAnswer) => options.onSolverAnswer?.(answer);
    let submitted = options.resumeSolverId !== undefined;
    if (step.answers) step.answers.forEach(emit);
    const wrapped: SolveOptions = {
      ...options,
      onSubmitted: async (solverId) => {
        submitted = true;
        if (!step.answers) {
          for (let i = 0; i < (step.retries?.overCap ?? 0); i += 1)
            emit({ request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' });
          emit({ request: 'submit', outcome: 'accepted' });
        }
        await options.onSubmitted?.(solverId);
      },
    };
    try {
      const outcome = await super.solve(task, wrapped);
      if (!step.answers) {
        const transient = step.retries?.transient ?? 0;
        for (let i = 0; i < transient; i += 1) emit({ request: 'result', outcome: 'transient', code: 'HTTP_502' });
        for (let i = transient + 1; i < outcome.resultRequests; i += 1)
          emit({ request: 'result', outcome: 'not_ready', code: 'CAPCHA_NOT_READY' });
        emit({ request: 'result', outcome: 'answered' });
      }
      return outcome;
    } catch (error) {
      if (!step.answers && error instanceof SolverError && !(error instanceof SolverTimeoutError)) {
        emit({ request: submitted ? 'result' : 'submit', outcome: error.errorClass, code: error.code });
      }
      throw error;
    }
  }
}

const FAST: Partial<ConsumerTiming> = {
  leaseMs: 400,
  recordMarginMs: 100,
  retryBaseSeconds: 0,
  retryMaxSeconds: 0,
  accountRetryBaseSeconds: 30,
  accountRetryMaxSeconds: 30,
  storeRetryBaseSeconds: 0,
  storeRetryMaxSeconds: 0,
  minSolveWindowMs: 100,
};

async function harness(
  config: FleetConfig = {},
  options: { timing?: Partial<ConsumerTiming>; wrapRepository?: (inner: ResultsRepository) => ResultsRepository } = {},
) {
  const fleet: TestFleet = await fixture.createFleet({ unsolvableResubmits: 2, solveDeadlineSeconds: 10, ...config });
  const solver = new AnsweringSolver();
  const repository = new DynamoResultsRepository({
    documents: fleet.clients.documents,
    tableName: fleet.resources.tables.results,
    ttlSeconds: fleet.settings.resultTtlSeconds,
  });
  const queue = new RecordingQueue(
    new SqsTaskQueue({
      sqs: fleet.clients.sqs,
      dlqUrl: fleet.resources.queueUrls.dlq,
      sourceQueueUrls: [fleet.resources.queueUrls.normal, fleet.resources.queueUrls.high],
    }),
  );
  const captured = captureMetrics(fleet.settings.metricsNamespace);
  const handler = createConsumerHandler({
    solver,
    repository: options.wrapRepository ? options.wrapRepository(repository) : repository,
    queue,
    metrics: captured.metrics,
    logger: logs.logger,
    settings: fleet.settings,
    timing: { ...FAST, ...options.timing },
  });
  const url = fleet.resources.queueUrls.normal;
  return {
    fleet,
    solver,
    repository,
    queue,
    handler,
    ...captured,
    /** Send a task (or any body); remembers its default answer for the leak check. */
    async send(task: TaskMessage | string): Promise<string> {
      if (typeof task !== 'string' && task.id) answersGiven.push(`answer-${task.id}`);
      return sendMessage(fleet.clients, url, typeof task === 'string' ? task : JSON.stringify(task));
    },
    deliver: (opts: { max?: number; remainingMs?: number } = {}) => deliver(fleet, handler, opts),
    record: (id: string) => repository.get(id, { consistent: true }),
    depth: () => queueDepth(fleet.clients, url),
    /** What SQS does when a visibility timeout ends: the message becomes receivable again. */
    async expireVisibility(receiptHandle: string): Promise<void> {
      await fleet.clients.sqs.send(
        new ChangeMessageVisibilityCommand({ QueueUrl: url, ReceiptHandle: receiptHandle, VisibilityTimeout: 0 }),
      );
    },
    metricSum: (name: string, dimensions?: Record<string, string>) => captured.store.total(name, dimensions).sum,
  };
}

describe('refused messages', () => {
  it("dead-letters a message whose names are Object.prototype's, and a method of control characters, beside valid tasks it no longer fails", async () => {
    // Prepare: before, params.constructor threw while the batch was read, failing all of it until
    // every message, the valid ones too, reached the DLQ without a reason.
    const h = await harness();
    const goods = [imageTask(), imageTask(), imageTask()];
    const poison = JSON.stringify({ id: 'pc-1', method: 'base64', params: { body: 'A'.repeat(200), constructor: 1 } });
    const typed = JSON.stringify({ id: 'ct-1', task: { type: 'constructor' } });
    const escapes = JSON.stringify({ id: 'me-1', method: '\u001b[31mPWNED\r\nlevel=ERROR', params: {} });
    for (const body of [poison, typed, escapes]) await h.send(body);
    for (const good of goods) await h.send(good);

    // Act
    const delivery = await h.deliver({ max: 10 });

    // Assess
    expect(delivery.messages).toHaveLength(6);
    expect(delivery.response).toEqual({ batchItemFailures: [] });
    for (const good of goods) expect(await h.record(good.id as string)).toMatchObject({ status: 'solved' });
    const dead = await receive(h.fleet.clients, h.fleet.resources.queueUrls.dlq, 10);
    const attributes = new Map(dead.map((m) => [m.Body, m.MessageAttributes]));
    expect(attributes.get(poison)?.reason?.StringValue).toBe('SCHEMA_VIOLATION');
    expect(attributes.get(typed)?.reason?.StringValue).toBe('SCHEMA_VIOLATION');
    expect(attributes.get(escapes)?.reason?.StringValue).toBe('UNKNOWN_METHOD');
    // SQS refuses control characters in an attribute: the detail writes them out.
    const detail = attributes.get(escapes)?.reasonDetail?.StringValue ?? '';
    expect(detail).toContain('\\u001b[31mPWNED\\u000d\\u000alevel=ERROR');
    expect(printable(detail, detail.length)).toBe(detail);
    expect(await h.record('me-1')).toMatchObject({ status: 'rejected', errorMessage: detail });
  });

  it('dead-letters malformed, invalid, unknown-method and oversized messages with their reason, records them rejected, and acknowledges them', async () => {
    // Prepare
    const h = await harness();
    const good = imageTask();
    const big = JSON.stringify({ id: 'big-1', method: 'base64', params: { body: 'A'.repeat(MAX_TASK_BYTES) } });
    const bodies = {
      malformed: '{"id": "broken-1", "method":',
      malformedNoId: 'definitely not json',
      schema: JSON.stringify({ id: 'bad-schema', method: 'hcaptcha', params: { sitekey: 'abcdefgh12' } }),
      method: JSON.stringify({ id: 'bad-method', method: 'recaptcha_v9', params: {} }),
      big,
    };
    for (const body of Object.values(bodies)) await h.send(body);
    await h.send(good);

    // Act
    const delivery = await h.deliver({ max: 10 });

    // Assess
    expect(delivery.messages).toHaveLength(6);
    expect(delivery.response).toEqual({ batchItemFailures: [] });
    expect(await h.depth()).toEqual({ visible: 0, inFlight: 0 });
    const dead = await receive(h.fleet.clients, h.fleet.resources.queueUrls.dlq, 10);
    const byBody = new Map(dead.map((m) => [m.Body, m]));
    const reasonOf = (body: string) => byBody.get(body)?.MessageAttributes?.reason?.StringValue;
    expect(dead).toHaveLength(5);
    expect(reasonOf(bodies.malformed)).toBe('MALFORMED_JSON');
    expect(reasonOf(bodies.malformedNoId)).toBe('MALFORMED_JSON');
    expect(reasonOf(bodies.schema)).toBe('SCHEMA_VIOLATION');
    expect(reasonOf(bodies.method)).toBe('UNKNOWN_METHOD');
    expect(reasonOf(bodies.big)).toBe('TOO_LARGE');
    const byReason = new Map(dead.map((m) => [m.MessageAttributes?.reason?.StringValue, m]));
    expect(byBody.get(bodies.malformed)?.MessageAttributes?.taskId?.StringValue).toBe('broken-1');
    expect(byBody.get(bodies.malformedNoId)?.MessageAttributes?.taskId).toBeUndefined();
    expect(byReason.get('SCHEMA_VIOLATION')?.MessageAttributes?.taskId?.StringValue).toBe('bad-schema');
    expect(byReason.get('SCHEMA_VIOLATION')?.MessageAttributes?.reasonDetail?.StringValue).toContain('pageurl');
    expect(byReason.get('UNKNOWN_METHOD')?.MessageAttributes?.reasonDetail?.StringValue).toContain('recaptcha_v9');
    expect(byReason.get('TOO_LARGE')?.Body).toBe(big);
    for (const message of dead)
      expect(message.MessageAttributes?.sourceQueue?.StringValue).toBe(h.fleet.settings.queueNames.normal);

    expect(await h.record('bad-schema')).toMatchObject({
      status: 'rejected',
      errorCode: 'SCHEMA_VIOLATION',
      method: 'hcaptcha',
      attempts: 0,
    });
    expect(await h.record('bad-method')).toMatchObject({
      status: 'rejected',
      errorCode: 'UNKNOWN_METHOD',
      method: 'recaptcha_v9',
    });
    expect(await h.record('big-1')).toMatchObject({ status: 'rejected', errorCode: 'TOO_LARGE' });
    expect(await h.record('broken-1')).toMatchObject({ status: 'rejected', errorCode: 'MALFORMED_JSON' });
    expect(await h.record(good.id as string)).toMatchObject({ status: 'solved' });
    expect(h.metricSum(METRICS.rejected)).toBe(5);
    expect(h.solver.calls.map((c) => c.taskId)).toEqual([good.id]);
  });

  it('does not acknowledge a refused message when the DLQ cannot take it, and dead-letters it on the next delivery', async () => {
    const h = await harness();
    const messageId = await h.send('not json at all');
    h.queue.failDeadLetters = true;

    const first = await h.deliver();
    expect(first.response).toEqual({ batchItemFailures: [{ itemIdentifier: messageId }] });
    expect(await h.depth()).toEqual({ visible: 1, inFlight: 0 }); // backoff 0: back at once
    expect(h.metricSum(METRICS.retried, { Reason: 'error' })).toBe(1);

    h.queue.failDeadLetters = false;
    const second = await h.deliver();
    expect(second.acknowledged).toEqual([messageId]);
    expect(h.queue.letters.map((l) => l.reason)).toEqual(['MALFORMED_JSON']);
    expect(await h.depth()).toEqual({ visible: 0, inFlight: 0 });
  });
  it("settles a batch's refusals before any of its tasks starts: a task's crash cannot bring a dead-lettered message back", async () => {
    const h = await harness();
    const good = imageTask();
    await h.send(good);
    const refusedId = await h.send('{"id": "broken-first", "method":');
    h.queue.deadLetterDelayMs = 300;
    const solve = h.solver.solve.bind(h.solver);
    h.solver.solve = async (task, options) => {
      h.queue.order.push(`solve:${task.id}`);
      return solve(task, options);
    };

    const delivery = await h.deliver({ max: 10 });

    expect(delivery.messages).toHaveLength(2);
    expect(delivery.response).toEqual({ batchItemFailures: [] });
    const order = h.queue.order.filter((step) => !step.startsWith('deleted:') || step === `deleted:${refusedId}`);
    expect(order.slice(0, 3)).toEqual(['letter:MALFORMED_JSON', `deleted:${refusedId}`, `solve:${good.id}`]);
    expect(await h.record(good.id as string)).toMatchObject({ status: 'solved' });
  });
});

describe('claims and duplicate deliveries', () => {
  it('acknowledges a duplicate of a finished task without solving it again', async () => {
    const h = await harness();
    const task = recaptchaTask();
    await h.send(task);
    await h.send(task); // the producer sent it twice

    await h.deliver({ max: 1 });
    const second = await h.deliver({ max: 1 });

    expect(second.acknowledged).toHaveLength(1);
    expect(h.solver.callsOf(task.id as string)).toHaveLength(1);
    expect(h.metricSum(METRICS.duplicates)).toBe(1);
    expect(await h.depth()).toEqual({ visible: 0, inFlight: 0 });
  });

  it('acknowledges the same id with the same content in another key order as a duplicate', async () => {
    const h = await harness();
    const task = recaptchaTask();
    const { googlekey, pageurl } = task.params as { googlekey: string; pageurl: string };
    const reordered = { params: { pageurl, googlekey } };
    await h.send(task);
    await h.send(JSON.stringify({ ...reordered, method: task.method, id: task.id }));

    await h.deliver({ max: 1 });
    const second = await h.deliver({ max: 1 });

    expect(second.acknowledged).toHaveLength(1);
    expect(h.solver.callsOf(task.id as string)).toHaveLength(1);
    expect(h.metricSum(METRICS.duplicates)).toBe(1);
    expect(await receive(h.fleet.clients, h.fleet.resources.queueUrls.dlq)).toHaveLength(0);
  });

  it('refuses the same id with other content to the DLQ as ID_CONFLICT, leaving the first result untouched', async () => {
    // Prepare: image A solved under the id; image B arrives with A's id (a reused counter).
    const h = await harness();
    const first = imageTask();
    const id = first.id as string;
    await h.send(first);
    await h.deliver();
    const before = await h.record(id);
    const conflicting = JSON.stringify(imageTask({ id, params: { body: 'R0lGODlh'.padEnd(200, 'B') } }));
    const messageId = await h.send(conflicting);

    // Act
    const delivery = await h.deliver();

    // Assess
    expect(delivery.acknowledged).toEqual([messageId]);
    expect(h.solver.callsOf(id)).toHaveLength(1);
    expect(await h.record(id)).toEqual(before);
    const dead = await receive(h.fleet.clients, h.fleet.resources.queueUrls.dlq);
    expect(dead).toHaveLength(1);
    expect(dead[0]?.Body).toBe(conflicting);
    expect(dead[0]?.MessageAttributes?.reason?.StringValue).toBe('ID_CONFLICT');
    expect(dead[0]?.MessageAttributes?.taskId?.StringValue).toBe(id);
    expect(dead[0]?.MessageAttributes?.reasonDetail?.StringValue).toContain(`id "${id}" is in use`);
    expect(h.metricSum(METRICS.duplicates)).toBe(0);
    expect(h.metricSum(METRICS.rejected)).toBe(1);
  });

  it('refuses other content under an id at once, without waiting, while the first task is being solved', async () => {
    const h = await harness();
    const first = recaptchaTask();
    const id = first.id as string;
    const parsed = { ...first, id, priority: 'normal' as const, submittedAt: Date.now() };
    await h.repository.claim({ task: parsed as never, claimToken: 'first-delivery', now: Date.now(), leaseMs: 60_000 });
    await h.send(
      recaptchaTask({
        id,
        params: { googlekey: '6LfD3PIbAAAAAJs_eEHvoOl75_83eXSqpPSRFJ_u', pageurl: 'https://example.com/b' },
      }),
    );

    const delivery = await h.deliver();

    expect(delivery.response).toEqual({ batchItemFailures: [] });
    expect(h.solver.calls).toHaveLength(0);
    expect(await h.record(id)).toMatchObject({ status: 'solving', claimToken: 'first-delivery', attempts: 1 });
    const dead = await receive(h.fleet.clients, h.fleet.resources.queueUrls.dlq);
    expect(dead.map((m) => m.MessageAttributes?.reason?.StringValue)).toEqual(['ID_CONFLICT']);
  });

  it('lets a valid task replace the rejected record of a malformed message with its id, and solves it', async () => {
    // Prepare: a broken message carrying the id arrives first and is rejected.
    const h = await harness();
    const task = recaptchaTask();
    const id = task.id as string;
    const malformed = `{"id":"${id}","method":"userrecaptcha",`;
    await h.send(malformed);
    await h.deliver();
    expect(await h.record(id)).toMatchObject({ status: 'rejected', errorCode: 'MALFORMED_JSON' });

    // Act: the valid task with the same id follows.
    await h.send(task);
    const delivery = await h.deliver();

    // Assess: solved, once; the rejection's reason stays in the DLQ.
    expect(delivery.response).toEqual({ batchItemFailures: [] });
    expect(h.solver.callsOf(id)).toHaveLength(1);
    const record = await h.record(id);
    expect(record).toMatchObject({ status: 'solved', answer: `answer-${id}`, attempts: 1 });
    expect(record?.errorCode).toBeUndefined();
    const dead = await receive(h.fleet.clients, h.fleet.resources.queueUrls.dlq);
    expect(dead.map((m) => [m.Body, m.MessageAttributes?.reason?.StringValue])).toEqual([
      [malformed, 'MALFORMED_JSON'],
    ]);
  });

  it('leaves a duplicate queued, hidden until the live lease ends, while another delivery holds the claim', async () => {
    const h = await harness();
    const task = recaptchaTask();
    const messageId = await h.send(task);
    const parsed = { ...task, id: task.id as string, priority: 'normal' as const, submittedAt: Date.now() };
    const now = Date.now();
    await h.repository.claim({ task: parsed as never, claimToken: 'another-delivery', now, leaseMs: 60_000 });

    const delivery = await h.deliver();

    expect(delivery.response).toEqual({ batchItemFailures: [{ itemIdentifier: messageId }] });
    expect(h.solver.calls).toHaveLength(0);
    const seconds = h.queue.visibility.at(-1)?.seconds ?? 0;
    expect(seconds).toBeGreaterThanOrEqual(59);
    expect(seconds).toBeLessThanOrEqual(60);
    expect(await h.depth()).toEqual({ visible: 0, inFlight: 1 });
    expect(h.metricSum(METRICS.retried, { Reason: 'lease_held' })).toBe(1);
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solving', claimToken: 'another-delivery' });
  });

  it("measures a resumed submission's solve from its first acceptance, not from the resume", async () => {
    const h = await harness();
    const task = recaptchaTask();
    const parsed = { ...task, id: task.id as string, priority: 'normal' as const, submittedAt: Date.now() - 25_000 };
    await h.repository.claim({ task: parsed as never, claimToken: 'timed-out', now: Date.now(), leaseMs: 1 });
    // The solver accepted it 20 s ago; the delivery that submitted it timed out polling.
    await h.repository.recordSolverId(parsed.id, 'timed-out', 'sid-slow', 'primary', Date.now() - 20_000);
    await sleep(5);
    await h.send(task);

    await h.deliver();

    const record = await h.record(parsed.id);
    expect(record).toMatchObject({ status: 'solved', solverId: 'sid-slow' });
    // Measured from the resume it read a few milliseconds.
    expect(record?.solveMs).toBeGreaterThanOrEqual(20_000);
    expect(record?.solveMs).toBeLessThan(60_000);
  });

  it('takes over an expired claim and resumes its solver submission instead of paying for a new one', async () => {
    const h = await harness();
    const task = recaptchaTask();
    const parsed = { ...task, id: task.id as string, priority: 'normal' as const, submittedAt: Date.now() };
    await h.repository.claim({ task: parsed as never, claimToken: 'crashed-delivery', now: Date.now(), leaseMs: 1 });
    await h.repository.recordSolverId(parsed.id, 'crashed-delivery', 'sid-old');
    await sleep(5);
    await h.send(task);

    const delivery = await h.deliver();

    expect(delivery.acknowledged).toHaveLength(1);
    expect(h.solver.callsOf(parsed.id)).toMatchObject([{ resumeSolverId: 'sid-old', submittedId: undefined }]);
    expect(h.solver.submissionsOf(parsed.id)).toBe(0);
    expect(await h.record(parsed.id)).toMatchObject({
      status: 'solved',
      attempts: 2,
      solverId: 'sid-old',
      answer: `answer-${parsed.id}`,
    });
  });

  it("waits orphanWaitMs from the first delivery that found a dead holder's claim without an id, for the copy that may carry it, then submits once", async () => {
    // Prepare: a dead holder's claim with no solver id on the record (the table would not take
    // it: its id, if it was paid, went into a fresh copy of the message, which may be late).
    const h = await harness({}, { timing: { orphanWaitMs: 1_500 } });
    const task = imageTask();
    const parsed = { ...task, id: task.id as string, priority: 'normal' as const, submittedAt: Date.now() };
    await h.repository.claim({ task: parsed as never, claimToken: 'dead-holder', now: Date.now(), leaseMs: 1 });
    await sleep(5);
    await h.send(task);
    // Act: the first delivery finds it, a second comes back at once (a store backoff of 0 s
    // here), a third after the wait.
    await h.deliver();
    const waitedAt = (await h.record(parsed.id))?.orphanWaitAt;
    await h.deliver();
    const beforeWaitEnds = h.solver.submissionsOf(parsed.id);
    await sleep(Math.max(0, (waitedAt ?? 0) + 1_500 - Date.now()) + 50);
    await h.deliver();
    // Assess: nothing paid while a copy may still come (before, the second delivery paid), then one submission.
    expect(waitedAt).toBeGreaterThan(0);
    expect(beforeWaitEnds).toBe(0);
    expect(h.metricSum(METRICS.retried, { Reason: 'orphan_wait' })).toBe(2);
    expect(h.solver.submissionsOf(parsed.id)).toBe(1);
    expect(await h.record(parsed.id)).toMatchObject({ status: 'solved', orphanWaitAt: waitedAt });
  });

  it('waits again for the copy of a second holder that died with no id after the first wait ended', async () => {
    const h = await harness({}, { timing: { orphanWaitMs: 300 } });
    const task = imageTask();
    const parsed = { ...task, id: task.id as string, priority: 'normal' as const, submittedAt: Date.now() };
    await h.repository.claim({ task: parsed as never, claimToken: 'first-dead', now: Date.now(), leaseMs: 1 });
    await sleep(5);
    await h.send(task);
    await h.deliver();
    const firstWait = (await h.record(parsed.id))?.orphanWaitAt ?? 0;
    // Past the first wait, a second holder claims (a takeover of the released record) and dies with no id.
    await sleep(350);
    const second = await h.repository.claim({
      task: parsed as never,
      claimToken: 'second-dead',
      now: Date.now(),
      leaseMs: 1,
    });
    expect(second.outcome).toBe('claimed');
    await sleep(5);
    await h.deliver();
    expect(h.solver.submissionsOf(parsed.id)).toBe(0);
    expect(h.metricSum(METRICS.retried, { Reason: 'orphan_wait' })).toBe(2);
    expect((await h.record(parsed.id))?.orphanWaitAt).toBeGreaterThan(firstWait);
  });

  it('submits afresh when the resumed solver id is unknown to the solver', async () => {
    const h = await harness();
    const task = imageTask();
    const parsed = { ...task, id: task.id as string, priority: 'normal' as const, submittedAt: Date.now() };
    await h.repository.claim({ task: parsed as never, claimToken: 'old', now: Date.now(), leaseMs: 1 });
    await h.repository.recordSolverId(parsed.id, 'old', 'sid-gone');
    await sleep(5);
    h.solver.script(parsed.id, { error: new SolverTaskError('ERROR_WRONG_CAPTCHA_ID') });
    await h.send(task);

    await h.deliver();

    expect(h.solver.callsOf(parsed.id).map((c) => c.resumeSolverId)).toEqual(['sid-gone', undefined]);
    expect(await h.record(parsed.id)).toMatchObject({
      status: 'solved',
      solverId: h.solver.submissions.get(parsed.id)?.[0],
    });
  });
});

describe('solver outcomes', () => {
  it('records a solved token task with its freshness, timings and metrics', async () => {
    const h = await harness();
    const task = recaptchaTask();
    h.solver.script(task.id as string, { delayMs: 20, resultRequests: 3, retries: { overCap: 1, transient: 2 } });
    await h.send(task);

    const delivery = await h.deliver();

    expect(delivery.acknowledged).toHaveLength(1);
    const record = await h.record(task.id as string);
    expect(record).toMatchObject({
      status: 'solved',
      method: 'userrecaptcha',
      priority: 'normal',
      attempts: 1,
      answer: `answer-${task.id}`,
    });
    const answeredAt = (record?.tokenExpiresAt ?? 0) - (TOKEN_TTL_MS.userrecaptcha ?? 0);
    expect(record?.completedAt ?? 0).toBeGreaterThanOrEqual(answeredAt);
    expect((record?.completedAt ?? 0) - answeredAt).toBeLessThan(1_000);
    expect(record?.solveMs).toBeGreaterThanOrEqual(20);
    expect(record?.queueWaitMs).toBeGreaterThanOrEqual(0);
    expect(record?.claimToken).toBeUndefined();

    expect(h.metricSum(METRICS.solved)).toBe(1);
    expect(h.metricSum(METRICS.resultRequests)).toBe(3);
    expect(h.metricSum(METRICS.overCapAnswers)).toBe(1);
    expect(h.metricSum(METRICS.transientErrors)).toBe(2);
    expect(h.metricSum(METRICS.submissions)).toBe(2); // one accepted, one refused over cap
  });

  it('gives image answers no token expiry', async () => {
    const h = await harness();
    const task = imageTask();
    await h.send(task);
    await h.deliver();
    const record = await h.record(task.id as string);
    expect(record?.status).toBe('solved');
    expect(record?.tokenExpiresAt).toBeUndefined();
  });

  it('records a task-terminal error as failed, acknowledged, with the code and no key in the message', async () => {
    const h = await harness();
    const task = recaptchaTask();
    h.solver.script(task.id as string, {
      error: new SolverTaskError('ERROR_BAD_PARAMETERS', {
        message: `in.php?key=${TEST_SOLVER_KEY}&method=userrecaptcha answered ERROR_BAD_PARAMETERS`,
      }),
    });
    await h.send(task);

    const delivery = await h.deliver();

    expect(delivery.acknowledged).toHaveLength(1);
    const record = await h.record(task.id as string);
    expect(record).toMatchObject({ status: 'failed', errorCode: 'ERROR_BAD_PARAMETERS' });
    expect(record?.errorMessage).not.toContain(TEST_SOLVER_KEY);
    expect(h.metricSum(METRICS.failed, { ErrorCode: 'ERROR_BAD_PARAMETERS' })).toBe(1);
    expect(h.metricSum(METRICS.taskErrors)).toBe(1);
  });

  it('ends a task whose answer no record can hold as failed ANSWER_TOO_LARGE, once, instead of retrying it', async () => {
    // Prepare: an answer the size of DynamoDB's whole item
    const h = await harness();
    const task = recaptchaTask();
    h.solver.script(task.id as string, { answer: 'x'.repeat(400 * 1024) });
    await h.send(task);

    // Act
    const delivery = await h.deliver();

    // Assess: acknowledged with a failed record, not handed back, nothing in the DLQ
    expect(delivery.acknowledged).toHaveLength(1);
    const record = await h.record(task.id as string);
    expect(record).toMatchObject({ status: 'failed', errorCode: 'ANSWER_TOO_LARGE' });
    expect(record?.answer).toBeUndefined();
    expect(record?.errorMessage).toMatch(/its answer 409600\)/);
    expect(h.queue.visibility).toEqual([]);
    expect(h.queue.letters).toEqual([]);
    expect(h.metricSum(METRICS.failed, { ErrorCode: 'ANSWER_TOO_LARGE' })).toBe(1);
    expect(await h.depth()).toMatchObject({ visible: 0, inFlight: 0 });
  });

  it('resubmits an unsolvable captcha as often as the settings allow, then records it failed', async () => {
    const h = await harness({ unsolvableResubmits: 2 });
    const unsolvable = () => ({ error: new SolverTaskError('ERROR_CAPTCHA_UNSOLVABLE') });
    const failing = imageTask();
    const recovering = imageTask();
    h.solver.script(failing.id as string, unsolvable(), unsolvable(), unsolvable(), {});
    h.solver.script(recovering.id as string, unsolvable(), unsolvable(), { answer: 'recovered-answer' });
    answersGiven.push('recovered-answer');
    await h.send(failing);
    await h.send(recovering);

    await h.deliver({ max: 2 });

    expect(h.solver.submissionsOf(failing.id as string)).toBe(3);
    expect(await h.record(failing.id as string)).toMatchObject({
      status: 'failed',
      errorCode: 'ERROR_CAPTCHA_UNSOLVABLE',
    });
    expect(h.solver.submissionsOf(recovering.id as string)).toBe(3);
    expect(await h.record(recovering.id as string)).toMatchObject({ status: 'solved', answer: 'recovered-answer' });
    expect(h.metricSum(METRICS.failed, { ErrorCode: 'ERROR_CAPTCHA_UNSOLVABLE' })).toBe(1);
    expect(h.metricSum(METRICS.taskErrors)).toBe(5);
    expect(await h.depth()).toEqual({ visible: 0, inFlight: 0 });
  });

  it('counts the requests and error answers of a solve that fails or is handed back, not only of solved ones', async () => {
    const h = await harness();
    const failing = imageTask();
    const flaky = imageTask();
    const refused = imageTask();
    const notReady: SolverAnswer = { request: 'result', outcome: 'not_ready', code: 'CAPCHA_NOT_READY' };
    const transient: SolverAnswer = { request: 'result', outcome: 'transient', code: 'HTTP_502' };
    const overCap: SolverAnswer = { request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' };
    // Task-terminal answer on the third result request.
    h.solver.script(failing.id as string, {
      answers: [
        { request: 'submit', outcome: 'accepted' },
        notReady,
        notReady,
        { request: 'result', outcome: 'task_terminal', code: 'ERROR_BAD_DUPLICATES' },
      ],
      error: new SolverTaskError('ERROR_BAD_DUPLICATES'),
    });
    // One not-ready poll, then four transient failures in a row: handed back.
    h.solver.script(flaky.id as string, {
      answers: [{ request: 'submit', outcome: 'accepted' }, notReady, transient, transient, transient, transient],
      error: new SolverTransientError('HTTP_502'),
      stage: 'poll',
    });
    // Four over-cap answers to in.php, the last one not retried: handed back.
    h.solver.script(refused.id as string, {
      answers: [overCap, overCap, overCap, overCap],
      error: new SolverOverCapError('ERROR_NO_SLOT_AVAILABLE'),
    });
    for (const task of [failing, flaky, refused]) await h.send(task);

    await h.deliver({ max: 3 });

    expect(await h.record(failing.id as string)).toMatchObject({ status: 'failed', errorCode: 'ERROR_BAD_DUPLICATES' });
    expect(h.metricSum(METRICS.retried, { Reason: 'transient' })).toBe(1);
    expect(h.metricSum(METRICS.retried, { Reason: 'over_cap' })).toBe(1);
    expect(h.metricSum(METRICS.resultRequests)).toBe(3 + 5);
    expect(h.metricSum(METRICS.submissions)).toBe(1 + 1 + 4);
    expect(h.metricSum(METRICS.taskErrors)).toBe(1);
    expect(h.metricSum(METRICS.transientErrors)).toBe(4);
    expect(h.metricSum(METRICS.overCapAnswers)).toBe(4);
  });

  it('emits over-cap answers as they come, while the solve is still running, with the service dimension only', async () => {
    const h = await harness();
    const task = imageTask();
    const overCap: SolverAnswer = { request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' };
    h.solver.script(task.id as string, {
      answers: [
        overCap,
        overCap,
        { request: 'submit', outcome: 'accepted' },
        { request: 'result', outcome: 'answered' },
      ],
      delayMs: 600,
    });
    await h.send(task);

    const delivery = h.deliver();
    const overCapDocuments = () =>
      h.documents.filter((document) =>
        document._aws.CloudWatchMetrics[0]?.Metrics.some((metric) => metric.Name === METRICS.overCapAnswers),
      );
    const seenBy = Date.now() + 500;
    while (overCapDocuments().length < 2 && Date.now() < seenBy)
      await new Promise((resolve) => setTimeout(resolve, 10));

    // Seen before the solve ended: still in flight, nothing solved yet.
    expect(overCapDocuments()).toHaveLength(2);
    expect(h.solver.inFlight).toBe(1);
    expect(h.metricSum(METRICS.solved)).toBe(0);
    expect(h.metricSum(METRICS.overCapAnswers)).toBe(2);
    for (const document of overCapDocuments()) {
      expect(document._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service']]);
      expect(document.service).toBe('consumer');
    }

    expect((await delivery).acknowledged).toHaveLength(1);
    expect(h.metricSum(METRICS.solved)).toBe(1);
    // Counted once: nothing is added again when the solve ends.
    expect(h.metricSum(METRICS.overCapAnswers)).toBe(2);
    expect(h.metricSum(METRICS.submissions)).toBe(3);
    expect(h.metricSum(METRICS.resultRequests)).toBe(1);
  });

  it('hands an over-cap answer back to the queue with the claim released, then solves it on the next delivery', async () => {
    const h = await harness();
    const task = recaptchaTask();
    h.solver.script(task.id as string, { error: new SolverOverCapError('ERROR_ZERO_BALANCE') });
    const messageId = await h.send(task);

    const first = await h.deliver();
    expect(first.response).toEqual({ batchItemFailures: [{ itemIdentifier: messageId }] });
    const released = await h.record(task.id as string);
    expect(released).toMatchObject({ status: 'solving', leaseUntil: 0, attempts: 1 });
    expect(released?.claimToken).toBeUndefined();
    expect(h.queue.visibility).toHaveLength(1);

    const second = await h.deliver();
    expect(second.acknowledged).toEqual([messageId]);
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved', attempts: 2 });
    expect(h.metricSum(METRICS.overCapAnswers)).toBe(1);
    expect(h.metricSum(METRICS.retried, { Reason: 'over_cap' })).toBe(1);
    expect(h.metricSum(METRICS.submissions)).toBe(2);
  });

  it('backs retries off with the receive count, capped', async () => {
    const h = await harness({}, { timing: { retryBaseSeconds: 2, retryMaxSeconds: 8 } });
    const task = imageTask();
    const transient = () => ({
      error: new SolverTransientError('ERROR_SERVER_ERROR', {
        message: `GET https://ocr.captchaai.com/res.php?key=${TEST_SOLVER_KEY}&action=get failed: 502`,
      }),
    });
    h.solver.script(task.id as string, transient(), transient(), transient(), transient());
    await h.send(task);

    const delays: number[] = [];
    for (let receive = 1; receive <= 4; receive++) {
      const delivery = await h.deliver();
      expect(delivery.failed).toHaveLength(1);
      expect(await h.depth()).toEqual({ visible: 0, inFlight: 1 }); // hidden for the backoff
      delays.push(h.queue.visibility.at(-1)?.seconds ?? -1);
      await h.expireVisibility(delivery.messages[0]?.ReceiptHandle ?? '');
    }

    // Equal jitter: within [ceiling / 2, ceiling], ceiling = min(8, 2 × 2^(receive - 1)).
    const ceilings = [2, 4, 8, 8];
    delays.forEach((delay, i) => {
      expect(delay).toBeGreaterThanOrEqual(Math.ceil((ceilings[i] as number) / 2));
      expect(delay).toBeLessThanOrEqual(ceilings[i] as number);
    });
    expect(h.metricSum(METRICS.transientErrors)).toBe(4);
    expect(h.metricSum(METRICS.retried, { Reason: 'transient' })).toBe(4);
    expect(logs.raw.join('')).toContain('key=***');

    await h.deliver();
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved', attempts: 5 });
  });

  it('leaves the task queued on an account error, counted so the governor can pause', async () => {
    const h = await harness();
    const task = recaptchaTask();
    h.solver.script(task.id as string, { error: new SolverAccountError('ERROR_WRONG_USER_KEY') });
    const messageId = await h.send(task);

    const delivery = await h.deliver();

    expect(delivery.response).toEqual({ batchItemFailures: [{ itemIdentifier: messageId }] });
    expect(h.metricSum(METRICS.accountErrors)).toBe(1);
    expect(h.metricSum(METRICS.retried, { Reason: 'account' })).toBe(1);
    const seconds = h.queue.visibility.at(-1)?.seconds ?? 0;
    expect(seconds).toBeGreaterThanOrEqual(15);
    expect(seconds).toBeLessThanOrEqual(30);
    expect(await h.depth()).toEqual({ visible: 0, inFlight: 1 });
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solving', leaseUntil: 0 });
  });

  it('stops the solve before the invocation must end, hands the task back, and resumes the submission next time', async () => {
    const h = await harness({}, { timing: { recordMarginMs: 1_000 } });
    const task = recaptchaTask();
    h.solver.script(task.id as string, { hang: true });
    const messageId = await h.send(task);

    const first = await h.deliver({ remainingMs: 1_500 });

    expect(first.response).toEqual({ batchItemFailures: [{ itemIdentifier: messageId }] });
    const [call] = h.solver.callsOf(task.id as string);
    const budget = (call?.deadlineAt ?? 0) - (call?.startedAt ?? 0);
    expect(budget).toBeGreaterThan(300); // 1 500 ms left − 1 000 ms margin, less setup time
    expect(budget).toBeLessThanOrEqual(500);
    // The claim's rule, kept at the moment of sending a submission answered in its own response:
    // no fresh one with less than minSolveWindowMs (100 ms here) left.
    expect(call?.submitBy).toBe((call?.deadlineAt ?? 0) - 100);
    // And such a submission waits for its answer past the deadline, to half the record margin
    // before the invocation's end: the deadline is the end less the whole margin (1 000 ms).
    expect((call?.answerBy ?? 0) - (call?.deadlineAt ?? 0)).toBe(500);
    expect(h.metricSum(METRICS.retried, { Reason: 'timeout' })).toBe(1);
    const submitted = h.solver.submissions.get(task.id as string)?.[0];
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solving', solverId: submitted, leaseUntil: 0 });

    await h.deliver();
    expect(h.solver.callsOf(task.id as string)[1]?.resumeSolverId).toBe(submitted);
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved', solverId: submitted });
  });
});

describe('batches', () => {
  it('solves the records of one batch concurrently and emits EMF metrics for them', async () => {
    const h = await harness();
    const tasks = [imageTask(), imageTask(), recaptchaTask()];
    for (const task of tasks) {
      h.solver.script(task.id as string, { delayMs: 150 });
      await h.send(task);
    }

    const delivery = await h.deliver({ max: 3 });

    expect(delivery.messages).toHaveLength(3);
    expect(delivery.response).toEqual({ batchItemFailures: [] });
    // All three solves were in flight at once (a wall-clock bound would depend on machine load).
    expect(h.solver.maxInFlight).toBe(3);

    const document = h.documents.find((d) => METRICS.solveDuration in d);
    expect(document?._aws.CloudWatchMetrics[0]?.Namespace).toBe(h.fleet.settings.metricsNamespace);
    expect(document?.service).toBe('consumer');
    expect(document?._aws.CloudWatchMetrics[0]?.Metrics.find((m) => m.Name === METRICS.solveDuration)).toEqual({
      Name: METRICS.solveDuration,
      Unit: 'Milliseconds',
      StorageResolution: 1,
    });
    const durations = document?.[METRICS.solveDuration] as number[];
    expect(durations).toHaveLength(3);
    for (const ms of durations) expect(ms).toBeGreaterThanOrEqual(150);
    expect(h.store.count(METRICS.queueWait, 60_000)).toBe(3);
    expect(h.store.count(METRICS.endToEnd, 60_000)).toBe(3);
    expect(h.metricSum(METRICS.solved)).toBe(3);
    expect(h.metricSum(METRICS.submissions)).toBe(3);
    expect(h.store.percentile(METRICS.solveDuration, 95, 60_000)).toBe(Math.max(...durations));
  });

  it('reports only the record whose write failed; its redelivery resumes the submission and solves it once', async () => {
    let failNext = '';
    const h = await harness(
      {},
      {
        wrapRepository: (inner) =>
          new Proxy(inner, {
            get(target, property, receiver) {
              if (property !== 'complete') return Reflect.get(target, property, receiver);
              return async (...args: Parameters<ResultsRepository['complete']>) => {
                if (args[0] === failNext) {
                  failNext = '';
                  throw new Error('socket hang up');
                }
                return target.complete(...args);
              };
            },
          }),
      },
    );
    const tasks = [imageTask(), imageTask(), imageTask()];
    const ids: string[] = [];
    for (const task of tasks) ids.push(await h.send(task));
    failNext = tasks[1]?.id as string;

    const first = await h.deliver({ max: 3 });

    const failedMessage = first.messages.find((m) => m.Body?.includes(tasks[1]?.id as string));
    expect(first.response).toEqual({ batchItemFailures: [{ itemIdentifier: failedMessage?.MessageId }] });
    expect(first.acknowledged).toHaveLength(2);

    const second = await h.deliver({ max: 3 });
    expect(second.acknowledged).toEqual([failedMessage?.MessageId]);
    for (const task of tasks) {
      expect(await h.record(task.id as string)).toMatchObject({ status: 'solved' });
      expect(h.solver.submissionsOf(task.id as string)).toBe(1);
    }
    expect(h.solver.callsOf(tasks[1]?.id as string)[1]?.resumeSolverId).toBe(
      h.solver.submissions.get(tasks[1]?.id as string)?.[0],
    );
    expect(await h.depth()).toEqual({ visible: 0, inFlight: 0 });
  });

  it('keeps polling a paid submission when its solver id cannot be recorded, and solves the task once', async () => {
    const h = await harness(
      {},
      {
        wrapRepository: (inner) =>
          new Proxy(inner, {
            get(target, property, receiver) {
              if (property !== 'recordSolverId') return Reflect.get(target, property, receiver);
              return async () => {
                throw new Error('ProvisionedThroughputExceededException');
              };
            },
          }),
      },
    );
    const task = imageTask();
    await h.send(task);

    const first = await h.deliver({ max: 1 });

    expect(first.acknowledged).toHaveLength(1);
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved' });
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
  });

  it('releases the claim when writing a failed result itself fails, so the redelivery records it without waiting for the lease', async () => {
    let failWrites = 1;
    const h = await harness(
      {},
      {
        wrapRepository: (inner) =>
          new Proxy(inner, {
            get(target, property, receiver) {
              if (property !== 'complete') return Reflect.get(target, property, receiver);
              return async (...args: Parameters<ResultsRepository['complete']>) => {
                if (failWrites > 0) {
                  failWrites--;
                  throw new Error('ProvisionedThroughputExceededException');
                }
                return target.complete(...args);
              };
            },
          }),
      },
    );
    const task = imageTask();
    await h.send(task);
    h.solver.script(
      task.id as string,
      { error: new SolverTaskError('ERROR_BAD_PARAMETERS') },
      { error: new SolverTaskError('ERROR_BAD_PARAMETERS') },
    );

    const first = await h.deliver({ max: 1 });
    expect(first.response.batchItemFailures).toHaveLength(1);
    // Handed back released: lease 0, so the next delivery is not `held`.
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solving', leaseUntil: 0 });

    const second = await h.deliver({ max: 1 });
    expect(second.acknowledged).toHaveLength(1);
    expect(await h.record(task.id as string)).toMatchObject({ status: 'failed', errorCode: 'ERROR_BAD_PARAMETERS' });
  });

  it('loses nothing when an invocation dies mid-batch: the finished tasks were deleted at once, the unfinished one is solved once', async () => {
    // Prepare: complete() of one task never returns, as if the environment died there.
    let dieOn = '';
    let died = false;
    const h = await harness(
      {},
      {
        wrapRepository: (inner) =>
          new Proxy(inner, {
            get(target, property, receiver) {
              if (property !== 'complete') return Reflect.get(target, property, receiver);
              return (...args: Parameters<ResultsRepository['complete']>) => {
                if (args[0] === dieOn) {
                  died = true;
                  return new Promise<boolean>(() => undefined);
                }
                return target.complete(...args);
              };
            },
          }),
      },
    );
    const tasks = [imageTask(), recaptchaTask(), imageTask()];
    for (const task of tasks) await h.send(task);
    dieOn = tasks[1]?.id as string;
    const messages = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 3);
    expect(messages).toHaveLength(3);

    // Act: the invocation never returns; nothing is deleted.
    void h.handler(toSqsEvent(messages, h.fleet.resources.queueArns.normal, h.fleet.clients.region), lambdaContext());
    for (
      let i = 0;
      i < 100 &&
      !(
        died &&
        (await h.record(tasks[2]?.id as string))?.status === 'solved' &&
        (await h.record(tasks[0]?.id as string))?.status === 'solved'
      );
      i++
    ) {
      await sleep(10);
    }
    expect(died).toBe(true);
    // The finished two are gone already (deleted as they finished); the third comes back.
    const unfinished = messages.find((m) => JSON.parse(m.Body ?? '{}').id === dieOn);
    dieOn = '';
    await h.expireVisibility(unfinished?.ReceiptHandle ?? '');
    await sleep(450); // the dead delivery's lease (400 ms) runs out

    const redelivery = await h.deliver({ max: 3 });

    // Assess: only the task whose invocation died comes back; its batch-mates were acknowledged
    // as they finished, so their receive counts stop (a crashing batch cannot walk them to the DLQ).
    expect(redelivery.messages.map((m) => JSON.parse(m.Body ?? '{}').id)).toEqual([tasks[1]?.id]);
    expect(redelivery.response).toEqual({ batchItemFailures: [] });
    expect(await h.depth()).toEqual({ visible: 0, inFlight: 0 });
    for (const task of tasks) {
      expect(await h.record(task.id as string)).toMatchObject({ status: 'solved' });
      expect(h.solver.submissionsOf(task.id as string)).toBe(1);
    }
    expect(h.solver.callsOf(tasks[0]?.id as string)).toHaveLength(1);
    expect(h.solver.callsOf(tasks[1]?.id as string)).toHaveLength(2);
    expect(await h.record(tasks[1]?.id as string)).toMatchObject({ attempts: 2 });
    expect(h.metricSum(METRICS.duplicates)).toBe(0);
  });

  it('acknowledges when the claim was lost but another delivery recorded the result, and retries when none did yet', async () => {
    let interfere: 'finish' | 'claim' | undefined;
    /** The tasks sent, by id: the rival is another delivery of the same task (same content). */
    const sent = new Map<string, TaskMessage>();
    const h = await harness(
      {},
      {
        wrapRepository: (inner) =>
          new Proxy(inner, {
            get(target, property, receiver) {
              if (property !== 'complete') return Reflect.get(target, property, receiver);
              return async (...args: Parameters<ResultsRepository['complete']>) => {
                const [id] = args;
                const record = await target.get(id, { consistent: true });
                // Another delivery takes the claim over (its lease looked expired to it).
                const task = { ...sent.get(id), id, priority: 'normal', submittedAt: 1 } as never;
                await target.claim({ task, claimToken: 'rival', now: (record?.leaseUntil ?? 0) + 1, leaseMs: 60_000 });
                if (interfere === 'finish')
                  await target.complete(id, 'rival', {
                    status: 'solved',
                    answer: 'rival-answer',
                    completedAt: Date.now(),
                  });
                return target.complete(...args);
              };
            },
          }),
      },
    );
    answersGiven.push('rival-answer');
    const finished = imageTask();
    const pending = imageTask();
    for (const task of [finished, pending]) sent.set(task.id as string, task);

    interfere = 'finish';
    await h.send(finished);
    const first = await h.deliver();
    expect(first.acknowledged).toHaveLength(1);
    expect(await h.record(finished.id as string)).toMatchObject({ status: 'solved', answer: 'rival-answer' });

    interfere = 'claim';
    const pendingId = await h.send(pending);
    const second = await h.deliver();
    expect(second.response).toEqual({ batchItemFailures: [{ itemIdentifier: pendingId }] });
    expect(h.metricSum(METRICS.retried, { Reason: 'claim_lost' })).toBe(1);
    // Hidden while the rival's 60 s lease runs, and only that once.
    expect(h.queue.visibility.map((v) => v.seconds)).toEqual([expect.toSatisfy((s: number) => s >= 59 && s <= 61)]);
    expect(h.metricSum(METRICS.retried)).toBe(1);
    expect(await h.depth()).toEqual({ visible: 0, inFlight: 1 });
  });
});

it('puts the task id on every log line of a record', async () => {
  const h = await harness();
  const task = recaptchaTask({ id: taskId('logged') });
  await h.send(task);
  await h.deliver();
  const lines = logs.entries().filter((entry) => entry.taskId === task.id);
  expect(lines.map((entry) => entry.message)).toEqual(
    expect.arrayContaining(['submitted to the solver', 'task solved']),
  );
  for (const line of lines)
    expect(line).toMatchObject({
      service: 'consumer',
      method: 'userrecaptcha',
      requestId: expect.any(String),
      messageId: expect.any(String),
    });
});
