import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
} from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, Context } from 'aws-lambda';
import { startEmulators, type Emulators } from '../../local/emulators.js';
import { createAwsClients, type AwsClients } from '../../functions/adapters/aws-clients.js';
import {
  createPoller,
  currentInvocation,
  type ConcurrencyPool,
  type Poller,
  type PollerOptions,
  type SqsBatchHandler,
} from '../../local/poller.js';

let emulators: Emulators;
let clients: AwsClients;
let queueCount = 0;

beforeAll(async () => {
  emulators = await startEmulators();
  clients = createAwsClients({ sqsEndpoint: emulators.sqsEndpoint, dynamoEndpoint: emulators.dynamoEndpoint });
});

afterAll(async () => {
  await emulators?.stop();
});

/** A fresh queue per test, with a 1 s visibility timeout so redeliveries come quickly. */
async function freshQueue(): Promise<string> {
  const created = await clients.sqs.send(
    new CreateQueueCommand({ QueueName: `poller-test-${++queueCount}`, Attributes: { VisibilityTimeout: '1' } }),
  );
  return created.QueueUrl!;
}

async function send(queueUrl: string, bodies: string[]): Promise<void> {
  for (let i = 0; i < bodies.length; i += 10) {
    await clients.sqs.send(
      new SendMessageBatchCommand({
        QueueUrl: queueUrl,
        Entries: bodies.slice(i, i + 10).map((body, index) => ({
          Id: String(index),
          MessageBody: body,
          MessageAttributes: {
            kind: { DataType: 'String', StringValue: 'test' },
            blob: { DataType: 'Binary', BinaryValue: Buffer.from('hi') },
          },
        })),
      }),
    );
  }
}

async function depth(queueUrl: string): Promise<{ visible: number; notVisible: number }> {
  const answer = await clients.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return {
    visible: Number(answer.Attributes?.ApproximateNumberOfMessages),
    notVisible: Number(answer.Attributes?.ApproximateNumberOfMessagesNotVisible),
  };
}

function poller(queueUrl: string, handler: SqsBatchHandler, overrides: Partial<PollerOptions> = {}): Poller {
  return createPoller({
    sqs: clients.sqs,
    queueUrl,
    region: clients.region,
    handler,
    batchSize: 1,
    maxConcurrency: 5,
    functionTimeoutMs: 5_000,
    waitTimeSeconds: 1,
    ...overrides,
  });
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs = 8_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Poller (local SQS event source mapping)', () => {
  it('sums the time its invocations ran (what the AWS cost row bills)', async () => {
    // Prepare: two invocations of one message each, each held 300 ms
    const queueUrl = await freshQueue();
    await send(queueUrl, ['a', 'b']);
    const subject = poller(
      queueUrl,
      async () => {
        await sleep(300);
        return { batchItemFailures: [] };
      },
      { batchSize: 1, functionTimeoutMs: 4_000 },
    );

    // Act
    await subject.start();
    await until(() => subject.stats().deleted === 2);
    await subject.stop();

    // Assess: at least the two holds, and not a receive loop's worth more
    const { invocationMs, invocations } = subject.stats();
    expect(invocations).toBe(2);
    expect(invocationMs).toBeGreaterThanOrEqual(2 * 295);
    expect(invocationMs).toBeLessThan(2 * 300 + 1_000);
  });

  it('hands batches of up to the batch size as a well-formed SQSEvent and Context, and deletes them', async () => {
    // Prepare
    const queueUrl = await freshQueue();
    await send(queueUrl, ['a', 'b', 'c', 'd', 'e', 'f', 'g']);
    const events: SQSEvent[] = [];
    const contexts: { context: Context; remaining: number }[] = [];
    const subject = poller(
      queueUrl,
      async (event, context) => {
        events.push(event);
        contexts.push({ context, remaining: context.getRemainingTimeInMillis() });
        return { batchItemFailures: [] };
      },
      { batchSize: 3, functionTimeoutMs: 4_000 },
    );

    // Act
    await subject.start();
    await until(() => subject.stats().deleted === 7);
    await subject.stop();

    // Assess
    expect(events.every((event) => event.Records.length >= 1 && event.Records.length <= 3)).toBe(true);
    expect(events.flatMap((event) => event.Records.map((record) => record.body)).sort()).toEqual([
      'a',
      'b',
      'c',
      'd',
      'e',
      'f',
      'g',
    ]);
    const record = events[0]!.Records[0]!;
    expect(record.eventSource).toBe('aws:sqs');
    expect(record.eventSourceARN).toMatch(/^arn:aws:sqs:[a-z0-9-]+:\d+:poller-test-\d+$/);
    expect(record.awsRegion).toBe(clients.region);
    expect(record.md5OfBody).toBe(createHash('md5').update(record.body).digest('hex'));
    expect(record.attributes.ApproximateReceiveCount).toBe('1');
    expect(Number(record.attributes.SentTimestamp)).toBeGreaterThan(Date.now() - 60_000);
    expect(Number(record.attributes.ApproximateFirstReceiveTimestamp)).toBeGreaterThanOrEqual(
      Number(record.attributes.SentTimestamp),
    );
    expect(record.attributes.SenderId).toEqual(expect.any(String));
    expect(record.messageAttributes.kind).toEqual({
      dataType: 'String',
      stringValue: 'test',
      stringListValues: [],
      binaryListValues: [],
    });
    expect(record.messageAttributes.blob?.binaryValue).toBe(Buffer.from('hi').toString('base64'));
    const { context, remaining } = contexts[0]!;
    expect(context.functionName).toBe('captcha-fleet-consumer');
    expect(context.awsRequestId).toMatch(/^[0-9a-f-]{36}$/);
    expect(context.invokedFunctionArn).toContain(':function:captcha-fleet-consumer');
    expect(remaining).toBeLessThanOrEqual(4_000);
    expect(remaining).toBeGreaterThan(3_000);
    expect(new Set(contexts.map((c) => c.context.awsRequestId)).size).toBe(contexts.length);
    expect(subject.stats()).toMatchObject({ received: 7, deleted: 7, failedItems: 0, invocations: events.length });
    expect(await depth(queueUrl)).toEqual({ visible: 0, notVisible: 0 });
  });

  it('deletes the successes only: listed failures come back after the visibility timeout', async () => {
    const queueUrl = await freshQueue();
    await send(queueUrl, ['ok-1', 'fail-1', 'ok-2', 'fail-2']);
    const seen: { body: string; receiveCount: string }[] = [];
    const subject = poller(
      queueUrl,
      async (event) => {
        for (const record of event.Records)
          seen.push({ body: record.body, receiveCount: record.attributes.ApproximateReceiveCount });
        // Fail the "fail" messages on their first delivery only.
        const failures = event.Records.filter(
          (record) => record.body.startsWith('fail') && record.attributes.ApproximateReceiveCount === '1',
        );
        return { batchItemFailures: failures.map((record) => ({ itemIdentifier: record.messageId })) };
      },
      { batchSize: 4 },
    );

    await subject.start();
    await until(() => subject.stats().deleted === 4);
    await subject.stop();

    expect(seen.filter((s) => s.body.startsWith('ok')).map((s) => s.receiveCount)).toEqual(['1', '1']);
    expect(seen.filter((s) => s.body === 'fail-1').map((s) => s.receiveCount)).toEqual(['1', '2']);
    expect(seen.filter((s) => s.body === 'fail-2').map((s) => s.receiveCount)).toEqual(['1', '2']);
    expect(subject.stats()).toMatchObject({ failedItems: 2, deleted: 4 });
  });

  it('deletes nothing when the handler throws or answers with an unknown item', async () => {
    const queueUrl = await freshQueue();
    await send(queueUrl, ['x', 'y']);
    let calls = 0;
    const subject = poller(
      queueUrl,
      async (): Promise<SQSBatchResponse> => {
        calls++;
        if (calls === 1) throw new Error('boom');
        if (calls === 2) return { batchItemFailures: [{ itemIdentifier: 'not-in-this-batch' }] };
        return { batchItemFailures: [] };
      },
      { batchSize: 2, maxConcurrency: 1 },
    );

    await subject.start();
    await until(() => subject.stats().deleted === 2);
    await subject.stop();

    expect(subject.stats()).toMatchObject({ errors: 1, badResponses: 1, deleted: 2 });
    expect(calls).toBeGreaterThanOrEqual(3);
  });

  it('kills an invocation past the function timeout: nothing deleted, its late result ignored', async () => {
    const queueUrl = await freshQueue();
    await send(queueUrl, ['slow']);
    const receiveCounts: string[] = [];
    const subject = poller(
      queueUrl,
      async (event) => {
        const count = event.Records[0]!.attributes.ApproximateReceiveCount;
        receiveCounts.push(count);
        if (count === '1') await sleep(400);
        return { batchItemFailures: [] };
      },
      { functionTimeoutMs: 150 },
    );

    await subject.start();
    await until(() => subject.stats().deleted === 1);
    await sleep(450);
    await subject.stop();

    expect(receiveCounts).toEqual(['1', '2']);
    expect(subject.stats()).toMatchObject({ timeouts: 1, deleted: 1, invocations: 2 });
  });

  it('treats an invocation killed as a crash like a timeout', async () => {
    const queueUrl = await freshQueue();
    await send(queueUrl, ['crash-me']);
    const subject = poller(queueUrl, async (event) => {
      if (event.Records[0]!.attributes.ApproximateReceiveCount === '1') {
        currentInvocation()!.kill('crash');
        await sleep(50);
      }
      return { batchItemFailures: [] };
    });

    await subject.start();
    await until(() => subject.stats().deleted === 1);
    await subject.stop();

    expect(subject.stats()).toMatchObject({ crashes: 1, deleted: 1, invocations: 2, timeouts: 0 });
  });

  it('keeps at most maxConcurrency invocations in flight, and follows a change while running', async () => {
    const queueUrl = await freshQueue();
    await send(
      queueUrl,
      Array.from({ length: 30 }, (_, i) => `m${i}`),
    );
    let running = 0;
    let observedMax = 0;
    const subject = poller(
      queueUrl,
      async () => {
        running++;
        observedMax = Math.max(observedMax, running);
        await sleep(60);
        running--;
        return { batchItemFailures: [] };
      },
      { maxConcurrency: 2, receivers: 4 },
    );

    await subject.start();
    await until(() => subject.stats().deleted >= 6);
    expect(observedMax).toBe(2);
    subject.setMaxConcurrency(5);
    await until(() => running === 5);
    // Lowering lets the five in flight finish, then no more than one runs at a time.
    subject.setMaxConcurrency(1);
    await until(() => running <= 1);
    let maxAfterLowering = 0;
    const sampler = setInterval(() => (maxAfterLowering = Math.max(maxAfterLowering, running)), 5);
    await until(() => subject.stats().deleted === 30);
    clearInterval(sampler);
    await subject.stop();

    expect(maxAfterLowering).toBe(1);
    expect(subject.stats().peakConcurrency).toBe(5);
    expect(subject.maxConcurrency).toBe(1);
  });

  it('shares a concurrency pool between lanes: never above its limit, and a slot freed in one lane serves the other', async () => {
    const [first, second] = [await freshQueue(), await freshQueue()];
    await send(
      first,
      Array.from({ length: 8 }, (_, i) => `a${i}`),
    );
    await send(
      second,
      Array.from({ length: 8 }, (_, i) => `b${i}`),
    );
    let running = 0;
    let observedMax = 0;
    const handler: SqsBatchHandler = async () => {
      running++;
      observedMax = Math.max(observedMax, running);
      await sleep(40);
      running--;
      return { batchItemFailures: [] };
    };
    const pool: ConcurrencyPool = { limit: 3, inUse: 0 };
    const lanes = [
      poller(first, handler, { maxConcurrency: 3, pool }),
      poller(second, handler, { maxConcurrency: 3, pool }),
    ];
    await Promise.all(lanes.map((lane) => lane.start()));
    await until(() => lanes.every((lane) => lane.stats().deleted === 8));
    await Promise.all(lanes.map((lane) => lane.stop()));

    expect(observedMax).toBe(3);
    expect(pool.peak).toBe(3);
    expect(pool.inUse).toBe(0);
  });

  it("ramps as Lambda's pollers do: a few at first, more each step while messages wait, never above the ceiling", async () => {
    // Prepare: 60 messages, each invocation held 500 ms; the ramp starts at 2 and adds 2 every 250 ms
    const queueUrl = await freshQueue();
    await send(
      queueUrl,
      Array.from({ length: 60 }, (_, i) => `m${i}`),
    );
    let running = 0;
    const seen: { at: number; running: number }[] = [];
    const started = Date.now();
    const subject = poller(
      queueUrl,
      async () => {
        running++;
        seen.push({ at: Date.now() - started, running });
        await sleep(500);
        running--;
        return { batchItemFailures: [] };
      },
      {
        maxConcurrency: 8,
        ramp: { initialConcurrency: 2, scaleUpPerMinute: 480, stepSeconds: 0.25, scaleDownSeconds: 5 },
      },
    );
    // Act
    await subject.start();
    await until(() => subject.stats().deleted === 60, 15_000);
    await subject.stop();
    // Assert: 2 at most before the first step, the ceiling reached later, never passed
    expect(Math.max(...seen.filter((s) => s.at < 200).map((s) => s.running))).toBeLessThanOrEqual(2);
    expect(Math.max(...seen.map((s) => s.running))).toBe(8);
    expect(subject.stats().peakConcurrency).toBe(8);
    const firstAtCeiling = seen.find((s) => s.running === 8)?.at ?? 0;
    expect(firstAtCeiling).toBeGreaterThanOrEqual(500);
  });

  it('restarts its ramp after a pause, and a raised ceiling is climbed at the ramp', async () => {
    const queueUrl = await freshQueue();
    await send(
      queueUrl,
      Array.from({ length: 30 }, (_, i) => `m${i}`),
    );
    const subject = poller(queueUrl, async () => ({ batchItemFailures: [] }), {
      maxConcurrency: 8,
      enabled: false,
      ramp: { initialConcurrency: 2, scaleUpPerMinute: 480, stepSeconds: 0.25, scaleDownSeconds: 5 },
    });
    await subject.start();
    expect(subject.allowed).toBe(0);
    subject.setEnabled(true);
    expect(subject.allowed).toBe(2);
    subject.setMaxConcurrency(1);
    expect(subject.allowed).toBe(1);
    subject.setMaxConcurrency(8);
    expect(subject.allowed).toBe(1);
    await until(() => subject.stats().deleted === 30, 10_000);
    await subject.stop();
  });

  it('receives nothing while disabled and resumes when enabled', async () => {
    const queueUrl = await freshQueue();
    const subject = poller(queueUrl, async () => ({ batchItemFailures: [] }), { enabled: false });
    await subject.start();
    await send(queueUrl, ['p1', 'p2']);
    await sleep(1_200);
    expect(subject.stats().invocations).toBe(0);
    expect(await depth(queueUrl)).toEqual({ visible: 2, notVisible: 0 });
    expect(subject.enabled).toBe(false);

    subject.setEnabled(true);
    await until(() => subject.stats().deleted === 2);
    await subject.stop();
    expect(subject.enabled).toBe(true);
  });

  it('stops promptly while a long poll is outstanding', async () => {
    const queueUrl = await freshQueue();
    const subject = poller(queueUrl, async () => undefined, { waitTimeSeconds: 5 });
    await subject.start();
    await sleep(100);
    const started = Date.now();
    await subject.stop();
    expect(Date.now() - started).toBeLessThan(1_000);
    // Nothing left holding a message: a receive now finds the queue empty and untouched.
    const answer = await clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, WaitTimeSeconds: 0 }));
    expect(answer.Messages ?? []).toEqual([]);
  });
});
