/**
 * The consumer on a store's bad day, on the emulators: the results table throttled or down while
 * a paid submission is polled, writes that commit while their answer is lost (through the fault
 * proxy), receive counts near the DLQ, a batch whose invocation dies, messages at SQS's limit, and
 * text with the key in it. What must hold: paid once, announced at least once, nothing valid
 * dead-lettered, no second DLQ copy, the key nowhere.
 */
import { ChangeMessageVisibilityCommand, SendMessageCommand, SetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse } from 'aws-lambda';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createAwsClients } from '../../functions/adapters/aws-clients.js';
import { createCarrySeal } from '../../functions/adapters/carry-seal.js';
import { createLocalEventStream } from '../../functions/adapters/completion-events.js';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { SqsTaskQueue } from '../../functions/adapters/task-queue.js';
import { createConsumerHandler, type ConsumerTiming } from '../../functions/consumer/create-handler.js';
import { METRICS } from '../../functions/core/metric-names.js';
import { type ResultsRepository, StoreError } from '../../functions/core/ports.js';
import { createRedactor } from '../../functions/core/redaction.js';
import { carryText, REDELIVERY_ATTRIBUTE } from '../../functions/core/redelivery.js';
import { SolverTransientError } from '../../functions/core/solver-protocol.js';
import { MAX_TASK_BYTES, TASK_QUEUE_MESSAGE_LIMIT_BYTES, type TaskMessage } from '../../functions/core/task.js';
import { startFaultProxy, type FaultProxy } from '../../local/faults/proxy.js';
import {
  captureLogs,
  captureMetrics,
  imageTask,
  recaptchaTask,
  ScriptedSolver,
  TEST_SOLVER_KEY,
} from '../helpers/factories.js';
import {
  deliver,
  lambdaContext,
  receive,
  sendMessage,
  sleep,
  startEmulatorFixture,
  toSqsEvent,
  type EmulatorFixture,
  type TestFleet,
} from '../helpers/fleet-fixture.js';

let fixture: EmulatorFixture;
let logs: ReturnType<typeof captureLogs>;
const proxies: FaultProxy[] = [];

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});
beforeEach(() => {
  logs = captureLogs();
});
afterEach(async () => {
  logs.restore();
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  // Every test doubles as a leak check: the key in no case and no direction.
  const reversed = [...TEST_SOLVER_KEY].reverse().join('');
  expect(logs.raw.join('')).not.toMatch(new RegExp(`${TEST_SOLVER_KEY}|${reversed}`, 'i'));
});

const FAST: Partial<ConsumerTiming> = {
  leaseMs: 400,
  recordMarginMs: 300,
  retryBaseSeconds: 0,
  retryMaxSeconds: 0,
  storeRetryBaseSeconds: 0,
  storeRetryMaxSeconds: 0,
  minSolveWindowMs: 100,
  accountRetryBaseSeconds: 0,
  accountRetryMaxSeconds: 0,
  writeRetry: { firstMs: 20, maxMs: 100 },
  solverIdCarryAfterMs: 150,
  requeueReserveMs: 150,
};

/** A repository whose chosen methods fail as the table does while `down` says so. */
function flaky(
  inner: ResultsRepository,
  down: (method: keyof ResultsRepository, args: unknown[]) => boolean,
): ResultsRepository {
  return new Proxy(inner, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        if (down(property as keyof ResultsRepository, args))
          return Promise.reject(
            new StoreError('results table unavailable (test)', 'dynamodb', 'unavailable', String(args[0])),
          );
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
}

interface HarnessOptions {
  config?: Parameters<EmulatorFixture['createFleet']>[0];
  timing?: Partial<ConsumerTiming>;
  wrapRepository?: (inner: ResultsRepository) => ResultsRepository;
  /** Route the consumer's SQS and DynamoDB calls through a fault proxy with these windows. */
  faults?: Parameters<typeof startFaultProxy>[0]['plan'];
}

async function harness(options: HarnessOptions = {}) {
  const fleet: TestFleet = await fixture.createFleet({ solveDeadlineSeconds: 10, ...options.config });
  let clients = fleet.clients;
  if (options.faults) {
    const proxy = await startFaultProxy({
      upstreams: { sqs: fixture.emulators.sqsEndpoint, dynamodb: fixture.emulators.dynamoEndpoint },
      plan: options.faults,
    });
    proxies.push(proxy);
    proxy.arm();
    clients = createAwsClients({ sqsEndpoint: proxy.url, dynamoEndpoint: proxy.url, region: 'us-east-1' });
  }
  const solver = new ScriptedSolver();
  const repository = new DynamoResultsRepository({
    documents: clients.documents,
    tableName: fleet.resources.tables.results,
    ttlSeconds: fleet.settings.resultTtlSeconds,
  });
  const queue = new SqsTaskQueue({
    sqs: clients.sqs,
    dlqUrl: fleet.resources.queueUrls.dlq,
    sourceQueueUrls: [fleet.resources.queueUrls.normal, fleet.resources.queueUrls.high],
  });
  const captured = captureMetrics(fleet.settings.metricsNamespace);
  const events = createLocalEventStream({ includeAnswer: false });
  const heard: string[] = [];
  events.subscribe((event) => heard.push(`${event.id}:${event.eventId}`));
  const redactor = createRedactor([TEST_SOLVER_KEY]);
  const handler = createConsumerHandler({
    solver,
    repository: options.wrapRepository ? options.wrapRepository(repository) : repository,
    queue,
    metrics: captured.metrics,
    logger: logs.logger,
    settings: fleet.settings,
    events,
    redactor,
    seal: createCarrySeal({ primary: async () => TEST_SOLVER_KEY }),
    timing: { ...FAST, ...options.timing },
  });
  const url = fleet.resources.queueUrls.normal;
  const record = (id: string) => repository.get(id, { consistent: true });
  return {
    fleet,
    solver,
    handler,
    heard,
    record,
    send: (task: TaskMessage | string) =>
      sendMessage(fleet.clients, url, typeof task === 'string' ? task : JSON.stringify(task)),
    deliver: (opts: { max?: number; remainingMs?: number } = {}) => deliver(fleet, handler, opts),
    metricSum: (name: string) => captured.store.total(name).sum,
    dlq: () => receive(fleet.clients, fleet.resources.queueUrls.dlq),
    /** Deliver until the task has a terminal record (or `rounds` run out), waiting for delayed copies. */
    async deliverUntilDone(id: string, rounds = 40, opts: { remainingMs?: number } = {}) {
      for (let round = 0; round < rounds; round++) {
        const status = (await record(id))?.status;
        if (status === 'solved' || status === 'failed') return;
        await deliver(fleet, handler, opts);
        await sleep(100);
      }
    },
  };
}

describe('paid once', () => {
  it('keeps a paid submission’s id through a throttled table: written on a retry, so a crash after it resumes the submission', async () => {
    // Prepare: the first two writes of the id fail; the first delivery dies inside complete().
    let idWrites = 0;
    let dieInComplete = true;
    let died = false;
    const h = await harness({
      wrapRepository: (inner) =>
        new Proxy(
          flaky(inner, (method) => method === 'recordSolverId' && ++idWrites <= 2),
          {
            get(target, property, receiver) {
              const value = Reflect.get(target, property, receiver) as (...a: unknown[]) => Promise<unknown>;
              if (property !== 'complete') return value;
              return (...args: unknown[]) => {
                if (!dieInComplete) return value.apply(target, args);
                died = true;
                return new Promise(() => undefined);
              };
            },
          },
        ),
    });
    const task = imageTask();
    h.solver.script(task.id as string, { delayMs: 300 });
    await h.send(task);
    const [message] = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 1);
    if (message === undefined) throw new Error('no message');

    // Act: the invocation dies; its lease runs out; the message comes back.
    void h.handler(toSqsEvent([message], h.fleet.resources.queueArns.normal, h.fleet.clients.region), lambdaContext());
    for (let i = 0; i < 100 && !died; i++) await sleep(20);
    expect(died).toBe(true);
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solving', solverId: expect.any(String) });
    dieInComplete = false;
    await sleep(450);
    // The message comes back (or, when the id's first write failed, its fresh copy carrying the id).
    await h.fleet.clients.sqs
      .send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: h.fleet.resources.queueUrls.normal,
          ReceiptHandle: message.ReceiptHandle,
          VisibilityTimeout: 0,
        }),
      )
      .catch(() => undefined);
    await h.deliverUntilDone(task.id as string);

    // Assess: the second delivery resumed the first submission
    expect(idWrites).toBeGreaterThanOrEqual(3);
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved', attempts: 2 });
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
  });

  it('carries an answer the table would not take in a fresh copy of the message: the next delivery records it, asking the solver nothing', async () => {
    // Prepare: the table takes the claim and the submission's id, then not the record.
    let down = true;
    const h = await harness({
      wrapRepository: (inner) => flaky(inner, (method) => down && (method === 'complete' || method === 'release')),
    });
    const task = recaptchaTask();
    h.solver.script(task.id as string, { delayMs: 250, answer: 'the-token' });
    await h.send(task);

    // Act: the first delivery, cut short, records nothing but puts a fresh copy in the message's
    // place (acknowledging the original); the table comes back.
    const first = await h.deliver({ remainingMs: 3_000 });
    expect(first.response).toEqual({ batchItemFailures: [] });
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solving' });
    expect(h.metricSum(METRICS.requeued)).toBe(1);
    down = false;
    await h.deliverUntilDone(task.id as string);

    // Assess
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved', answer: 'the-token' });
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
    expect(h.solver.callsOf(task.id as string)).toHaveLength(1);
    expect(h.heard.filter((e) => e.startsWith(`${task.id}:`))).toHaveLength(1);
    expect(h.metricSum(METRICS.dynamoErrors)).toBeGreaterThan(0);
    expect(h.metricSum(METRICS.dynamoRequests)).toBeGreaterThan(h.metricSum(METRICS.dynamoErrors));
  });

  it('pays once when neither the id nor the answer was taken: whichever copy comes first, the id’s or the answer’s, finishes that one submission', async () => {
    // Prepare: the table takes the claim, then neither the submission's id nor the record: the id
    // goes into one copy (sent when its write failed), the answer into another. SQS gives no
    // order between them: the answer's is recorded as it is, the id's resumes the submission.
    let down = true;
    const h = await harness({
      wrapRepository: (inner) =>
        flaky(
          inner,
          (method) => down && (method === 'recordSolverId' || method === 'complete' || method === 'release'),
        ),
    });
    const task = recaptchaTask();
    h.solver.script(task.id as string, { delayMs: 250, answer: 'the-token' });
    await h.send(task);

    // Act
    const first = await h.deliver({ remainingMs: 3_000 });
    expect(first.response).toEqual({ batchItemFailures: [] });
    expect(h.metricSum(METRICS.requeued)).toBeGreaterThanOrEqual(1);
    down = false;
    await h.deliverUntilDone(task.id as string);

    // Assess: one submission, its answer recorded, any other call a resume of it.
    const [submitted] = h.solver.submissions.get(task.id as string) ?? [];
    expect(await h.record(task.id as string)).toMatchObject({
      status: 'solved',
      answer: 'the-token',
      solverId: submitted,
    });
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
    expect(
      h.solver.callsOf(task.id as string).every((c) => c.submittedId !== undefined || c.resumeSolverId === submitted),
    ).toBe(true);
    expect(h.heard.filter((e) => e.startsWith(`${task.id}:`))).toHaveLength(1);
  });

  it('resumes the newer submission on the record, not the older one a copy of the message carries', async () => {
    // Prepare: a copy carries submission A (its id the table would not take then); a delivery of
    // that copy found A unsolvable, submitted B, kept B on the record with its acceptance time and
    // died. The copy comes back.
    const h = await harness();
    const repository = new DynamoResultsRepository({
      documents: h.fleet.clients.documents,
      tableName: h.fleet.resources.tables.results,
      ttlSeconds: h.fleet.settings.resultTtlSeconds,
    });
    const task = recaptchaTask();
    const id = task.id as string;
    const now = Date.now();
    const parsed = { ...task, id, priority: 'normal' as const, submittedAt: now };
    const claim = await repository.claim({ task: parsed as never, claimToken: 'died', now, leaseMs: 1 });
    expect(claim.outcome).toBe('claimed');
    expect(await repository.recordSolverId(id, 'died', '71400678702', 'primary', now - 1_000)).toBe(true);
    const body = JSON.stringify(task);
    const carried = { provider: 'primary' as const, solverId: '71400678575', acceptedAt: now - 60_000 };
    const mac = await createCarrySeal({ primary: async () => TEST_SOLVER_KEY }).seal(
      'primary',
      carryText(body, id, carried),
    );
    const redelivery = {
      v: 1,
      taskId: id,
      sentAt: now - 60_000,
      firstReceivedAt: now - 60_000,
      generation: 1,
      waits: 0,
    };
    await h.fleet.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: h.fleet.resources.queueUrls.normal,
        MessageBody: body,
        MessageAttributes: {
          [REDELIVERY_ATTRIBUTE]: {
            DataType: 'String',
            StringValue: JSON.stringify({ ...redelivery, carry: { ...carried, mac } }),
          },
        },
      }),
    );
    await sleep(5);

    // Act
    await h.deliverUntilDone(id);

    // Assess: B polled and recorded, nothing submitted. Before, the carry won: A went back on the
    // record and was polled, and its unsolvable answer paid for a third submission.
    expect(h.solver.callsOf(id).map((call) => call.resumeSolverId)).toEqual(['71400678702']);
    expect(h.solver.submissionsOf(id)).toBe(0);
    expect(await h.record(id)).toMatchObject({ status: 'solved', solverId: '71400678702' });
  });

  it('keeps sending the copy that carries a paid answer while SQS refuses it and the table is down: paid once', async () => {
    // Prepare: the table takes the claim, then neither the id nor the record; SQS throttles the
    // first two SendMessage calls past the SDK's own retries (three tries each).
    let down = true;
    const h = await harness({
      wrapRepository: (inner) =>
        flaky(
          inner,
          (method) => down && (method === 'recordSolverId' || method === 'complete' || method === 'release'),
        ),
      faults: {
        windows: [
          {
            service: 'sqs',
            kind: 'throttle',
            startMs: 0,
            durationMs: 60_000,
            rate: 1,
            operations: ['SendMessage'],
            count: 6,
          },
        ],
      },
    });
    const task = recaptchaTask();
    h.solver.script(task.id as string, { delayMs: 250, answer: 'the-token' });
    await h.send(task);

    // Act
    const first = await h.deliver({ remainingMs: 4_000 });
    expect(first.response).toEqual({ batchItemFailures: [] });
    expect(h.metricSum(METRICS.requeued)).toBeGreaterThanOrEqual(1);
    down = false;
    await h.deliverUntilDone(task.id as string);

    // Assess
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved', answer: 'the-token' });
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
  });

  it('ignores a carried answer whose seal does not hold (a producer cannot forge one)', async () => {
    const h = await harness();
    const task = imageTask();
    const body = JSON.stringify(task);
    const carry = { provider: 'primary' as const, solverId: '123456', acceptedAt: 1, answer: 'forged', answeredAt: 2 };
    const forged = {
      v: 1,
      taskId: task.id,
      sentAt: 1,
      firstReceivedAt: 1,
      generation: 0,
      waits: 0,
      carry: { ...carry, mac: '0'.repeat(64) },
    };
    expect(carryText(body, task.id as string, carry)).toContain('forged');
    await h.fleet.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: h.fleet.resources.queueUrls.normal,
        MessageBody: body,
        MessageAttributes: { [REDELIVERY_ATTRIBUTE]: { DataType: 'String', StringValue: JSON.stringify(forged) } },
      }),
    );

    await h.deliver();

    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved', answer: `answer-${task.id}` });
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
    expect(logs.raw.join('')).toContain('carried submission not verified');
  });
});

describe('announced once, at least', () => {
  it('recognises a terminal write that committed while its answer was lost, and announces it', async () => {
    // Prepare: the fault proxy loses the answer of the first write of the solved record.
    const h = await harness({
      faults: {
        windows: [
          {
            service: 'dynamodb',
            kind: 'lost_commit',
            startMs: 0,
            durationMs: 60_000,
            rate: 1,
            operations: ['UpdateItem'],
            bodyIncludes: '#answer',
            count: 1,
          },
        ],
      },
    });
    const task = imageTask();
    await h.send(task);

    // Act
    const delivery = await h.deliver();

    // Assess: the SDK's retry met its own record; the task is acknowledged and announced.
    expect(delivery.response).toEqual({ batchItemFailures: [] });
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved' });
    expect(h.heard.filter((e) => e.startsWith(`${task.id}:`))).toHaveLength(1);
    expect(h.metricSum(METRICS.solved)).toBe(1);
  });
});

describe('a store’s bad minute', () => {
  it('never burns a valid task to the DLQ: near maxReceiveCount it goes back as a fresh copy, and is solved once the table answers', async () => {
    // Prepare: five receives to the DLQ; the table refuses the first ten deliveries' claims.
    let claims = 0;
    const h = await harness({
      config: { maxReceiveCount: 5 },
      wrapRepository: (inner) => flaky(inner, (method) => method === 'claim' && ++claims <= 10),
    });
    const task = imageTask();
    await h.send(task);

    // Act
    await h.deliverUntilDone(task.id as string, 40);

    // Assess
    expect(claims).toBeGreaterThan(10);
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved' });
    expect(await h.dlq()).toEqual([]);
    expect(h.metricSum(METRICS.requeued)).toBeGreaterThanOrEqual(2);
  });

  it('reads a store failure by the port’s kind, from any repository: an item too large ends the task once, as failed', async () => {
    const h = await harness({
      wrapRepository: (inner) =>
        new Proxy(inner, {
          get(target, property, receiver) {
            const value = Reflect.get(target, property, receiver) as (...a: unknown[]) => Promise<unknown>;
            if (property !== 'complete') return value;
            return (...args: unknown[]) => {
              const result = args[2] as { status: string };
              if (result.status === 'solved')
                return Promise.reject(
                  new StoreError('item too large (test)', 'dynamodb', 'too_large', String(args[0])),
                );
              return value.apply(target, args);
            };
          },
        }),
    });
    const task = imageTask();
    await h.send(task);

    const delivery = await h.deliver();

    expect(delivery.response).toEqual({ batchItemFailures: [] });
    expect(await h.record(task.id as string)).toMatchObject({ status: 'failed', errorCode: 'ANSWER_TOO_LARGE' });
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
  });
});

describe('deliveries that keep dying', () => {
  it('copy their message before they could be the last: a task whose every delivery dies for a while is not dead-lettered, and is paid once', async () => {
    // Prepare: five receives to the DLQ; the first seven deliveries die inside complete().
    let deaths = 0;
    let dying = true;
    const h = await harness({
      config: { maxReceiveCount: 5 },
      wrapRepository: (inner) =>
        new Proxy(inner, {
          get(target, property, receiver) {
            const value = Reflect.get(target, property, receiver) as (...a: unknown[]) => Promise<unknown>;
            if (property !== 'complete') return value;
            return (...args: unknown[]) => {
              if (!dying) return value.apply(target, args);
              deaths++;
              return new Promise(() => undefined);
            };
          },
        }),
    });
    const task = imageTask();
    await h.send(task);

    // Act: each delivery dies; its message comes back when its lease has run out.
    for (let round = 0; round < 60 && deaths < 7; round++) {
      const [message] = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 1);
      if (message === undefined) {
        await sleep(200);
        continue;
      }
      const before = deaths;
      void h.handler(
        toSqsEvent([message], h.fleet.resources.queueArns.normal, h.fleet.clients.region),
        lambdaContext(),
      );
      for (let i = 0; i < 100 && deaths === before; i++) await sleep(10);
      await sleep(450);
      await h.fleet.clients.sqs
        .send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: h.fleet.resources.queueUrls.normal,
            ReceiptHandle: message.ReceiptHandle,
            VisibilityTimeout: 0,
          }),
        )
        .catch(() => undefined);
    }
    dying = false;
    await h.deliverUntilDone(task.id as string);

    // Assess
    expect(deaths).toBe(7);
    expect(await h.record(task.id as string)).toMatchObject({ status: 'solved' });
    expect(await h.dlq()).toEqual([]);
    expect(h.solver.submissionsOf(task.id as string)).toBe(1);
    expect(h.metricSum(METRICS.requeued)).toBeGreaterThanOrEqual(1);
  });
});

describe('batches with crashes', () => {
  it('dead-letters a malformed message once even when its batch dies: it is deleted as soon as it is in the DLQ', async () => {
    // Prepare: a batch of three, one malformed, one whose complete() never returns.
    let dieOn = '';
    const h = await harness({
      wrapRepository: (inner) =>
        new Proxy(inner, {
          get(target, property, receiver) {
            const value = Reflect.get(target, property, receiver) as (...a: unknown[]) => Promise<unknown>;
            if (property !== 'complete') return value;
            return (...args: unknown[]) =>
              args[0] === dieOn ? new Promise(() => undefined) : value.apply(target, args);
          },
        }),
    });
    const [dying, healthy] = [imageTask(), imageTask()];
    dieOn = dying.id as string;
    await h.send(dying);
    await h.send('not JSON at all');
    await h.send(healthy);
    const messages = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 3);
    expect(messages).toHaveLength(3);

    // Act: the invocation never returns; everything not deleted comes back.
    void h.handler(toSqsEvent(messages, h.fleet.resources.queueArns.normal, h.fleet.clients.region), lambdaContext());
    for (let i = 0; i < 100 && (await h.record(healthy.id as string))?.status !== 'solved'; i++) await sleep(20);
    await sleep(200);
    dieOn = '';
    for (const message of messages)
      await h.fleet.clients.sqs
        .send(
          new ChangeMessageVisibilityCommand({
            QueueUrl: h.fleet.resources.queueUrls.normal,
            ReceiptHandle: message.ReceiptHandle,
            VisibilityTimeout: 0,
          }),
        )
        .catch(() => undefined);
    await sleep(450);
    const again = await h.deliver();

    // Assess: only the dying task came back; one DLQ copy of the malformed message
    expect(again.messages.map((m) => m.Body)).toEqual([JSON.stringify(dying)]);
    const letters = await h.dlq();
    expect(letters).toHaveLength(1);
    expect(letters[0]?.MessageAttributes?.reason?.StringValue).toBe('MALFORMED_JSON');
    expect(letters[0]?.MessageAttributes?.sourceMessageId?.StringValue).toBe(messages[1]?.MessageId);
  });
  it('dead-letters a refused message once when its delete fails, the event source’s included: the delete is retried', async () => {
    // Prepare: the first DeleteMessage call fails (SQS throttles all three of the SDK's attempts);
    // the event source's own delete is not made (as when it fails too): what the consumer deleted
    // is all that is gone.
    const h = await harness({
      faults: {
        windows: [
          {
            service: 'sqs',
            kind: 'throttle',
            startMs: 0,
            durationMs: 60_000,
            rate: 1,
            operations: ['DeleteMessage'],
            count: 3,
          },
        ],
      },
      // The time an outcome's record may take (the SDK's three attempts back off for a while).
      timing: { recordMarginMs: 5_000 },
    });
    await h.send('not JSON at all');
    const [message] = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 1);
    if (message === undefined) throw new Error('no message');

    // Act: one invocation, its batch response ignored; then the message is made visible again if it is still there.
    await h.handler(toSqsEvent([message], h.fleet.resources.queueArns.normal, h.fleet.clients.region), lambdaContext());
    await h.fleet.clients.sqs
      .send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: h.fleet.resources.queueUrls.normal,
          ReceiptHandle: message.ReceiptHandle,
          VisibilityTimeout: 0,
        }),
      )
      .catch(() => undefined);
    const again = await h.deliver();

    // Assess: deleted by the consumer itself, so nothing came back and the DLQ holds one letter.
    expect(again.messages).toHaveLength(0);
    const letters = await h.dlq();
    expect(letters).toHaveLength(1);
    expect(letters[0]?.MessageAttributes?.sourceMessageId?.StringValue).toBe(message.MessageId);
  });
  it('dead-letters a refused message once when its delete fails past every retry: the letter is noted, and its return is only deleted', async () => {
    // Prepare: every delete of the first delivery's receipt fails (SQS down for it), the event
    // source's own delete too (its batch response is ignored).
    const failFirst = {
      service: 'sqs' as const,
      kind: 'unavailable' as const,
      startMs: 0,
      durationMs: 600_000,
      rate: 1,
      operations: ['DeleteMessage'],
      bodyIncludes: 'not yet known',
    };
    const h = await harness({ faults: { windows: [failFirst] } });
    await h.send('not JSON at all');
    const [message] = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 1);
    if (message === undefined) throw new Error('no message');
    failFirst.bodyIncludes = message.ReceiptHandle as string;

    // Act: the first delivery sends the letter and cannot delete; the message comes back.
    await h.handler(toSqsEvent([message], h.fleet.resources.queueArns.normal, h.fleet.clients.region), lambdaContext());
    await h.fleet.clients.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: h.fleet.resources.queueUrls.normal,
        ReceiptHandle: message.ReceiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    const again = await h.deliver();

    // Assess: the return was deleted without a second letter.
    expect(again.messages).toHaveLength(1);
    expect(again.acknowledged).toHaveLength(1);
    const letters = await h.dlq();
    expect(letters).toHaveLength(1);
    expect(letters[0]?.MessageAttributes?.sourceMessageId?.StringValue).toBe(message.MessageId);
  });
  it('copies a message one receive from the DLQ before its claim: a delivery that dies in the claim still leaves a fresh copy', async () => {
    // Prepare: a claim that never answers (the invocation dies in it), a task one receive from the DLQ.
    const h = await harness({
      wrapRepository: (inner) =>
        new Proxy(inner, {
          get(target, property, receiver) {
            const value = Reflect.get(target, property, receiver) as (...a: unknown[]) => Promise<unknown>;
            return property === 'claim' ? () => new Promise(() => undefined) : value.bind(target);
          },
        }),
    });
    const task = imageTask();
    await h.send(task);
    const [message] = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 1);
    if (message === undefined) throw new Error('no message');
    const event = toSqsEvent([message], h.fleet.resources.queueArns.normal, h.fleet.clients.region);
    const record = event.Records[0];
    if (record === undefined) throw new Error('no record');
    record.attributes.ApproximateReceiveCount = String(h.fleet.settings.maxReceiveCount - 1);

    // Act: the invocation never returns.
    void h.handler(event, lambdaContext());
    let copies: Awaited<ReturnType<typeof receive>> = [];
    for (let i = 0; i < 50 && copies.length === 0; i++) {
      await sleep(100);
      copies = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 10);
    }

    // Assess: a fresh copy of the task (its receive count starts again), the original gone.
    expect(copies).toHaveLength(1);
    expect(copies[0]?.MessageId).not.toBe(message.MessageId);
    expect(copies[0]?.Body).toBe(message.Body);
    expect(copies[0]?.Attributes?.ApproximateReceiveCount).toBe('1');
  });
  it('writes one letter for an id conflict one receive from the DLQ: the copy made before the claim writes it, the original none', async () => {
    // Prepare: a task solved under an id, then another task under the same id, one receive from the DLQ.
    const h = await harness();
    const first = imageTask();
    await h.send(first);
    await h.deliverUntilDone(first.id as string);
    await h.send(imageTask({ id: first.id, params: { body: 'iVBORw0KGgo'.padEnd(200, 'B') } }));
    const [message] = await receive(h.fleet.clients, h.fleet.resources.queueUrls.normal, 1);
    if (message === undefined) throw new Error('no message');
    const event = toSqsEvent([message], h.fleet.resources.queueArns.normal, h.fleet.clients.region);
    const record = event.Records[0];
    if (record === undefined) throw new Error('no record');
    record.attributes.ApproximateReceiveCount = String(h.fleet.settings.maxReceiveCount - 1);

    // Act: that delivery copies the message, then finds the conflict; the copy comes back.
    await h.handler(event, lambdaContext());
    let delivered = 0;
    for (let i = 0; i < 50 && delivered === 0; i++) {
      await sleep(100);
      delivered = (await h.deliver()).messages.length;
    }
    expect(delivered).toBe(1);

    // Assess
    const letters = await h.dlq();
    expect(letters).toHaveLength(1);
    expect(letters[0]?.MessageAttributes?.reason?.StringValue).toBe('ID_CONFLICT');
  });
});

describe('messages at SQS’s limit', () => {
  it('the lanes refuse a message without room for the DLQ’s reason attributes', async () => {
    const h = await harness();
    await expect(h.send('x'.repeat(TASK_QUEUE_MESSAGE_LIMIT_BYTES + 1))).rejects.toThrow(/shorter than/);
  });

  it('dead-letters a too-large message with its reason on its first receive, even from a queue that accepts SQS’s whole 1 MiB', async () => {
    // Prepare: an older lane with SQS's whole limit, and a message that fills it all but 50 bytes.
    const h = await harness();
    await h.fleet.clients.sqs.send(
      new SetQueueAttributesCommand({
        QueueUrl: h.fleet.resources.queueUrls.normal,
        Attributes: { MaximumMessageSize: '1048576' },
      }),
    );
    const body = JSON.stringify({
      id: 'huge-1',
      method: 'textcaptcha',
      params: { textcaptcha: 'x'.repeat(1_048_476) },
    });
    expect(Buffer.byteLength(body)).toBeGreaterThan(MAX_TASK_BYTES);
    await h.send(body);

    // Act
    const first = await h.deliver();

    // Assess
    expect(first.response).toEqual({ batchItemFailures: [] });
    const letters = await h.dlq();
    expect(letters).toHaveLength(1);
    expect(letters[0]?.MessageAttributes?.reason?.StringValue).toBe('TOO_LARGE');
    expect(letters[0]?.Body).toBe(body);
    expect(await h.record('huge-1')).toMatchObject({ status: 'rejected', errorCode: 'TOO_LARGE' });
  });
});

describe('redaction in the consumer', () => {
  it('takes the key out of every log line and saved text, upper-cased or reversed', async () => {
    const h = await harness();
    const task = imageTask();
    const upper = TEST_SOLVER_KEY.toUpperCase();
    const reversed = [...TEST_SOLVER_KEY].reverse().join('');
    h.solver.script(task.id as string, {
      error: new SolverTransientError(`ERROR_${upper}`, { message: `in.php echoed ${upper} and ${reversed}` }),
      stage: 'submit',
    });
    await h.send(task);

    const delivery = await h.deliver();

    expect((delivery.response as SQSBatchResponse).batchItemFailures).toHaveLength(1);
    const text = logs.raw.join('');
    expect(text).toContain('task handed back to the queue');
    expect(text).toContain('ERROR_***');
  });
});

describe('a takeover whose answer is lost', () => {
  it("still waits for a dead holder's copy (orphan_wait), as when the answer comes back: paying at once would pay again for the id that copy may carry", async () => {
    // Prepare: a holder that claimed and died before its id reached the record; the takeover's
    // write commits and its answer is lost (the SDK's retry then fails the lease's condition).
    const h = await harness({
      timing: { orphanWaitMs: 3_000 },
      faults: {
        windows: [
          {
            service: 'dynamodb',
            kind: 'lost_commit',
            startMs: 0,
            durationMs: 600_000,
            rate: 1,
            operations: ['UpdateItem'],
            bodyIncludes: 'ADD attempts',
            count: 1,
          },
        ],
      },
    });
    const task = imageTask();
    const id = task.id as string;
    const direct = new DynamoResultsRepository({
      documents: h.fleet.clients.documents,
      tableName: h.fleet.resources.tables.results,
      ttlSeconds: h.fleet.settings.resultTtlSeconds,
    });
    const parsed = { ...task, id, priority: 'normal' as const, submittedAt: Date.now() };
    await direct.claim({ task: parsed as never, claimToken: 'dead-holder', now: Date.now(), leaseMs: 1 });
    await sleep(5);
    await h.send(task);

    // Act
    await h.deliver();

    // Assess: the delivery took the claim over and waits; before, it submitted at once.
    expect(await h.record(id)).toMatchObject({ status: 'solving', attempts: 2, orphanWaitAt: expect.any(Number) });
    expect(h.solver.submissionsOf(id)).toBe(0);
    expect(h.metricSum(METRICS.retried)).toBe(1); // the orphan wait's hand-back
  });
});
