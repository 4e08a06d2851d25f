/**
 * Completion events and token freshness in the consumer, on the emulators: one event per
 * terminal record, published after the record is written by the delivery that wrote it; a
 * failed publish neither fails the record nor solves again, and is counted; tokens recorded
 * already stale (a takeover resuming an old answer) are counted.
 */
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { SqsTaskQueue } from '../../functions/adapters/task-queue.js';
import { createLocalEventStream } from '../../functions/adapters/completion-events.js';
import { createProducer } from '../../clients/producer-client.js';
import type { CompletionEvent } from '../../functions/core/events.js';
import { METRICS } from '../../functions/core/metric-names.js';
import type {
  CompletionEvents,
  DeadLetter,
  DeliveredMessage,
  MessageCopy,
  TaskQueue,
} from '../../functions/core/ports.js';
import type { TaskResult } from '../../functions/core/results.js';
import { SolverTaskError, TOKEN_TTL_MS } from '../../functions/core/solver-protocol.js';
import { createConsumerHandler } from '../../functions/consumer/create-handler.js';
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
} from '../helpers/fleet-fixture.js';
import { captureLogs, captureMetrics, imageTask, recaptchaTask, ScriptedSolver } from '../helpers/factories.js';
import type { TaskMessage } from '../../functions/core/task.js';

let fixture: EmulatorFixture;
let logs: ReturnType<typeof captureLogs>;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});
beforeEach(() => {
  logs = captureLogs();
});
afterEach(() => {
  logs.restore();
});

/** An events port that checks, at publish time, that the record is already terminal in the table. */
class CheckingEvents implements CompletionEvents {
  readonly published: TaskResult[] = [];
  /** Status of the table's record when each event was published. */
  readonly recordStatusAtPublish: (string | undefined)[] = [];
  failWith: Error | undefined;
  /** While set, the next publish waits for it (after reading the record): a writer caught mid-publish. */
  gate: Promise<void> | undefined;
  constructor(private readonly repository: DynamoResultsRepository) {}
  async publish(result: TaskResult): Promise<void> {
    this.recordStatusAtPublish.push((await this.repository.get(result.taskId, { consistent: true }))?.status);
    const gate = this.gate;
    this.gate = undefined;
    if (gate) await gate;
    if (this.failWith) throw this.failWith;
    this.published.push(result);
  }
}

/** The real queue adapter, with a switch that makes the DLQ unreachable. */
class FlakyDlqQueue implements TaskQueue {
  failDeadLetters = false;
  constructor(private readonly inner: TaskQueue) {}
  async deadLetter(letter: DeadLetter): Promise<void> {
    if (this.failDeadLetters) throw new Error('DLQ unreachable');
    await this.inner.deadLetter(letter);
  }
  async changeVisibility(message: DeliveredMessage, seconds: number): Promise<void> {
    await this.inner.changeVisibility(message, seconds);
  }
  acknowledge(message: DeliveredMessage): Promise<void> {
    return this.inner.acknowledge(message);
  }
  requeue(message: DeliveredMessage, copy: MessageCopy): Promise<{ deleted: boolean }> {
    return this.inner.requeue(message, copy);
  }
}

async function harness(options: { clock?: () => number; announceWindowMs?: number } = {}) {
  const fleet = await fixture.createFleet({ solveDeadlineSeconds: 10, unsolvableResubmits: 0 });
  const solver = new ScriptedSolver();
  const repository = new DynamoResultsRepository({
    documents: fleet.clients.documents,
    tableName: fleet.resources.tables.results,
    ttlSeconds: fleet.settings.resultTtlSeconds,
  });
  const events = new CheckingEvents(repository);
  const queue = new FlakyDlqQueue(
    new SqsTaskQueue({
      sqs: fleet.clients.sqs,
      dlqUrl: fleet.resources.queueUrls.dlq,
      sourceQueueUrls: [fleet.resources.queueUrls.normal, fleet.resources.queueUrls.high],
    }),
  );
  const captured = captureMetrics(fleet.settings.metricsNamespace);
  const handler = createConsumerHandler({
    solver,
    repository,
    queue,
    metrics: captured.metrics,
    logger: logs.logger,
    settings: fleet.settings,
    events,
    ...(options.clock ? { clock: options.clock } : {}),
    timing: {
      leaseMs: 400,
      recordMarginMs: 100,
      retryBaseSeconds: 0,
      retryMaxSeconds: 0,
      ...(options.announceWindowMs !== undefined ? { announceWindowMs: options.announceWindowMs } : {}),
    },
  });
  const url = fleet.resources.queueUrls.normal;
  return {
    fleet,
    solver,
    repository,
    events,
    queue,
    handler,
    send: (task: TaskMessage | string) =>
      sendMessage(fleet.clients, url, typeof task === 'string' ? task : JSON.stringify(task)),
    deliver: (options: { max?: number } = {}) => deliver(fleet, handler, options),
    metricSum: (name: string) => captured.store.total(name).sum,
  };
}

/** The announce window the tests that wait it out use, ms. */
const WINDOW_MS = 1_000;
/** The drawn runs' window, ms (shorter: they wait it out once or twice each). */
const FAST_WINDOW_MS = 500;

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(10);
  }
}

describe('completion events from the consumer', () => {
  it('publishes one event per solved or failed task, after its terminal record is written; a duplicate delivery publishes nothing', async () => {
    const h = await harness();
    const solvedTask = recaptchaTask();
    const failedTask = imageTask();
    h.solver.script(failedTask.id as string, {
      error: new SolverTaskError('ERROR_BAD_PARAMETERS', {
        taskId: failedTask.id as string,
        message: 'bad parameters',
      }),
    });
    await h.send(solvedTask);
    await h.send(failedTask);
    await h.deliver();

    expect(h.events.published.map((e) => [e.taskId, e.status]).sort()).toEqual(
      [
        [failedTask.id, 'failed'],
        [solvedTask.id, 'solved'],
      ].sort(),
    );
    expect(h.events.recordStatusAtPublish.sort()).toEqual(['failed', 'solved']);
    expect(h.events.published.find((e) => e.status === 'failed')?.errorCode).toBe('ERROR_BAD_PARAMETERS');
    // The claim's fields never travel.
    for (const event of h.events.published) expect(event).not.toHaveProperty('claimToken');

    await h.send(solvedTask); // the producer sent it twice
    const duplicate = await h.deliver();
    expect(duplicate.acknowledged).toHaveLength(1);
    expect(h.events.published).toHaveLength(2);
    expect(h.solver.submissionsOf(solvedTask.id as string)).toBe(1);
  });

  it('a failed publish hands the message back and its redelivery publishes the event, with the same event id, without solving again', async () => {
    const h = await harness({ announceWindowMs: WINDOW_MS });
    h.events.failWith = new Error('EventBridge unreachable');
    const task = recaptchaTask();
    await h.send(task);

    const first = await h.deliver();

    // Recorded, not announced: the message goes back (retry delay 0 in this harness).
    expect(first.response.batchItemFailures).toHaveLength(1);
    expect(h.events.recordStatusAtPublish).toEqual(['solved']);
    const record = await h.repository.get(task.id as string, { consistent: true });
    expect(record).toMatchObject({ status: 'solved' });
    expect(record?.announcedAt).toBeUndefined();
    expect(h.metricSum(METRICS.eventPublishFailures)).toBe(1);
    expect(h.metricSum(METRICS.solved)).toBe(1);
    expect(logs.raw.join('')).toContain('completion event could not be published');

    h.events.failWith = undefined;
    // Within the announce window the writer may still be publishing: the redelivery waits it out.
    const early = await h.deliver();
    expect(early.response.batchItemFailures).toHaveLength(1);
    expect(h.events.published).toHaveLength(0);
    await sleep(WINDOW_MS + 200);
    const second = await h.deliver();

    expect(second.acknowledged).toHaveLength(1);
    expect(h.events.published).toHaveLength(1);
    expect(h.events.published[0]).toMatchObject({ taskId: task.id, status: 'solved' });
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
    expect((await h.repository.get(task.id as string, { consistent: true }))?.announcedAt).toBeGreaterThan(0);
    // Announced and noted: a third delivery stays silent.
    await h.send(task);
    await h.deliver();
    expect(h.events.published).toHaveLength(1);
  });

  it('a copy delivered while the writer publishes stays silent, hands its message back past the window, and then finds the event noted', async () => {
    // Prepare: the writer's publish waits at a gate; a second copy of the task arrives meanwhile.
    const h = await harness({ announceWindowMs: WINDOW_MS });
    const task = recaptchaTask();
    let open = () => {};
    h.events.gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    await h.send(task);
    const writer = h.deliver();
    await until(() => h.events.recordStatusAtPublish.length === 1);
    await h.send(task);

    // Act
    const copy = await h.deliver();
    open();
    const written = await writer;

    // Assess: one event; the copy back for about the window, then silent.
    expect(copy.response.batchItemFailures).toHaveLength(1);
    expect(written.acknowledged).toHaveLength(1);
    expect(h.events.published).toHaveLength(1);
    expect(await h.deliver()).toMatchObject({ messages: [] });
    await sleep(WINDOW_MS + 200);
    const again = await h.deliver();
    expect(again.acknowledged).toHaveLength(1);
    expect(h.events.published).toHaveLength(1);
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
  });

  it('two copies that find an un-announced record past the window together publish it once: one takes the announcement, the other comes back to find it noted', async () => {
    // Prepare: the writer's publish failed (the record solved, not noted); a second copy waits.
    const h = await harness({ announceWindowMs: WINDOW_MS });
    h.events.failWith = new Error('EventBridge unreachable');
    const task = recaptchaTask();
    await h.send(task);
    expect((await h.deliver()).response.batchItemFailures).toHaveLength(1);
    h.events.failWith = undefined;
    await h.send(task);
    await sleep(WINDOW_MS + 200);

    // Act: both copies in one batch, processed concurrently.
    const both = await h.deliver();

    // Assess
    expect(both.messages).toHaveLength(2);
    expect(h.events.published).toHaveLength(1);
    expect(both.response.batchItemFailures).toHaveLength(1);
    const record = await h.repository.get(task.id as string, { consistent: true });
    expect(record?.announcedAt).toBeGreaterThan(0);
    expect(record?.announcingUntil).toBeGreaterThan(0);
    await sleep(WINDOW_MS + 200);
    expect((await h.deliver()).acknowledged).toHaveLength(1);
    expect(h.events.published).toHaveLength(1);
  });

  it('copies of a task meeting its writer anywhere: while it publishes or after, in any batches, its publish failing or not: one event, one submission', async () => {
    // Drawn: 1–3 more copies, batches of 1–4, whether the writer's publish fails, and whether the
    // copies arrive while the writer is publishing (its publish held at a gate until each copy
    // was delivered once) or after it. Each run then delivers until the lane is empty (a
    // handed-back copy comes back after its window).
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 1, max: 4 }),
        fc.boolean(),
        fc.constantFrom('publishing', 'after'),
        async (more, batch, failFirst, meet) => {
          const h = await harness({ announceWindowMs: FAST_WINDOW_MS });
          const task = recaptchaTask();
          let open = () => {};
          if (meet === 'publishing')
            h.events.gate = new Promise<void>((resolve) => {
              open = resolve;
            });
          h.events.failWith = failFirst ? new Error('EventBridge unreachable') : undefined;
          await h.send(task);
          const writer = h.deliver({ max: 1 });
          if (meet === 'publishing') {
            await until(() => h.events.recordStatusAtPublish.length === 1);
            for (let i = 0; i < more; i++) await h.send(task);
            let delivered = 0;
            while (delivered < more) delivered += (await h.deliver({ max: batch })).messages.length;
            open();
          }
          await writer;
          h.events.failWith = undefined;
          if (meet === 'after') for (let i = 0; i < more; i++) await h.send(task);
          const end = Date.now() + 20_000;
          for (;;) {
            await h.deliver({ max: batch });
            const depth = await queueDepth(h.fleet.clients, h.fleet.resources.queueUrls.normal);
            if (depth.visible + depth.inFlight === 0) break;
            if (Date.now() > end) throw new Error(`copies still queued: ${JSON.stringify(depth)}`);
            await sleep(100);
          }
          expect(h.events.published.map((e) => e.taskId)).toEqual([task.id]);
          expect(h.solver.submissionsOf(task.id as string)).toBe(1);
          expect((await h.repository.get(task.id as string, { consistent: true }))?.announcedAt).toBeGreaterThan(0);
        },
      ),
      { numRuns: 8, seed: 20261205 },
    );
  }, 120_000);

  it('a refused message with an id publishes one rejected event, even when the DLQ send fails and the message comes back', async () => {
    const h = await harness();
    const body = JSON.stringify({
      id: 'bad-ev-1',
      method: 'turnstile',
      params: { sitekey: '0x4AAAAAAADemoKey', pageurl: 'not-a-url' },
    });
    await h.send(body);
    h.queue.failDeadLetters = true;
    const first = await h.deliver();
    expect(first.failed).toHaveLength(1);
    // Published once the record was written, before the failing DLQ send.
    expect(h.events.published.map((e) => [e.taskId, e.status, e.errorCode])).toEqual([
      ['bad-ev-1', 'rejected', 'SCHEMA_VIOLATION'],
    ]);

    h.queue.failDeadLetters = false;
    const second = await h.deliver();
    expect(second.acknowledged).toHaveLength(1);
    expect(h.events.published).toHaveLength(1);
    // A message without a readable id has no record, so no event.
    await h.send('not JSON at all');
    await h.deliver();
    expect(h.events.published).toHaveLength(1);
  });

  it('two copies of a refused message delivered together publish one rejected event, and both reach the DLQ', async () => {
    const h = await harness({ announceWindowMs: WINDOW_MS });
    const body = JSON.stringify({
      id: 'bad-ev-2',
      method: 'turnstile',
      params: { sitekey: 'k', pageurl: 'not-a-url' },
    });
    await h.send(body);
    await h.send(body);

    const both = await h.deliver();
    expect(both.messages).toHaveLength(2);
    await sleep(WINDOW_MS + 200);
    await h.deliver();

    expect(h.events.published.map((e) => [e.taskId, e.status])).toEqual([['bad-ev-2', 'rejected']]);
    const letters = await receive(h.fleet.clients, h.fleet.resources.queueUrls.dlq, 10);
    expect(letters).toHaveLength(2);
    expect(await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 10)).toHaveLength(0);
  });

  it('feeds the local event stream: subscribers and waitFor hear the event, without the answer unless configured', async () => {
    const fleet = await fixture.createFleet({});
    const stream = createLocalEventStream({ includeAnswer: false });
    const heard: CompletionEvent[] = [];
    stream.subscribe((event) => heard.push(event));
    const captured = captureMetrics(fleet.settings.metricsNamespace);
    const handler = createConsumerHandler({
      solver: new ScriptedSolver(),
      repository: new DynamoResultsRepository({
        documents: fleet.clients.documents,
        tableName: fleet.resources.tables.results,
        ttlSeconds: 60,
      }),
      queue: new SqsTaskQueue({
        sqs: fleet.clients.sqs,
        dlqUrl: fleet.resources.queueUrls.dlq,
        sourceQueueUrls: [fleet.resources.queueUrls.normal],
      }),
      metrics: captured.metrics,
      logger: logs.logger,
      settings: fleet.settings,
      events: stream,
    });
    const task = recaptchaTask();
    await sendMessage(fleet.clients, fleet.resources.queueUrls.normal, JSON.stringify(task));
    const waited = stream.waitFor(task.id as string, 5_000);
    await deliver(fleet, handler);
    const event = await waited;
    expect(event).toMatchObject({ version: 1, id: task.id, status: 'solved', method: 'userrecaptcha' });
    expect(event?.answer).toBeUndefined();
    expect(event?.tokenExpiresAt).toEqual(expect.any(Number));
    expect(heard.map((e) => e.id)).toEqual([task.id]);
  });
});

describe('token freshness in the consumer', () => {
  it('a fresh solve expires TOKEN_TTL after the answer was read and is not counted stale', async () => {
    const h = await harness();
    const task = recaptchaTask();
    await h.send(task);
    const before = Date.now();
    await h.deliver();
    const record = await h.repository.get(task.id as string, { consistent: true });
    expect(record?.tokenExpiresAt).toBeGreaterThanOrEqual(before + (TOKEN_TTL_MS.userrecaptcha as number));
    expect(h.metricSum(METRICS.tokensStale)).toBe(0);
  });

  it('a takeover that resumes an answer the solver may have held since long ago records it with the earliest expiry, counted stale', async () => {
    const h = await harness();
    const task = recaptchaTask();
    const id = task.id as string;
    // A first delivery claimed the task 10 minutes ago, submitted it, and died.
    const longAgo = Date.now() - 600_000;
    const first = await h.repository.claim({
      task: { ...task, id, priority: 'normal', submittedAt: longAgo } as never,
      claimToken: 'dead-holder',
      now: longAgo,
      leaseMs: 1_000,
    });
    expect(first.outcome).toBe('claimed');
    expect(await h.repository.recordSolverId(id, 'dead-holder', 'old-captcha-7')).toBe(true);

    // The message comes back; SQS says it was first received 10 minutes ago.
    await h.send(task);
    const messages = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal);
    const event = toSqsEvent(messages, h.fleet.resources.queueArns.normal, h.fleet.clients.region);
    event.Records[0]!.attributes.ApproximateFirstReceiveTimestamp = String(longAgo);
    const response = await h.handler(event, lambdaContext());

    expect(response.batchItemFailures).toEqual([]);
    expect(h.solver.callsOf(id)[0]?.resumeSolverId).toBe('old-captcha-7');
    expect(h.solver.submissionsOf(id)).toBe(0);
    const record = await h.repository.get(id, { consistent: true });
    expect(record).toMatchObject({
      status: 'solved',
      solverId: 'old-captcha-7',
      attempts: 2,
      tokenExpiresAt: longAgo + (TOKEN_TTL_MS.userrecaptcha as number),
    });
    expect(h.metricSum(METRICS.tokensStale)).toBe(1);
    expect(h.metricSum(METRICS.solved)).toBe(1);

    // The producer reports it stale and counts the stale delivery.
    const producer = createProducer({
      queueUrls: { normal: h.fleet.resources.queueUrls.normal },
      table: h.fleet.resources.tables.results,
      clients: h.fleet.clients,
    });
    const got = await producer.get(id, { consistent: true });
    expect(got?.stale).toBe(true);
    expect(got?.tokenExpiresInMs).toBeLessThan(-400_000);
    expect(producer.counters().staleDeliveries).toBe(1);
  });
});
