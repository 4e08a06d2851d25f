/**
 * The local runtime's chaos (local/chaos.ts) on the emulators: crashes at random moments kill an
 * invocation wherever its code is, and a dead invocation sends nothing more: its port calls never
 * settle and its SDK requests, retries included, never go out (Lambda stops the environment).
 */
import { CreateQueueCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { CreateTableCommand, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AwsClients, createAwsClients } from '../../functions/adapters/aws-clients.js';
import { sleep } from '../../functions/core/helpers/time.js';
import type { ResultsRepository, TaskQueue } from '../../functions/core/ports.js';
import {
  crashAtRandomMoments,
  guardDeadInvocationRequests,
  guardResultsRepository,
  SolverIdWatch,
  watchCarries,
} from '../../local/chaos.js';
import type { Emulators } from '../../local/emulators.js';
import { type EmulatorFixture, startEmulatorFixture } from '../helpers/fleet-fixture.js';
import { startFaultProxy } from '../../local/faults/proxy.js';
import { stream } from '../../local/solver-sim/prng.js';
import { createPoller, currentInvocation, type SqsBatchHandler } from '../../local/poller.js';

let fixture: EmulatorFixture;
let emulators: Emulators;
let clients: AwsClients;
let n = 0;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  ({ emulators, clients } = fixture);
});
afterAll(async () => {
  await fixture?.stop();
});

async function queueWith(bodies: string[]): Promise<string> {
  const { QueueUrl } = await clients.sqs.send(
    new CreateQueueCommand({ QueueName: `chaos-${++n}`, Attributes: { VisibilityTimeout: '30' } }),
  );
  for (const body of bodies) await clients.sqs.send(new SendMessageCommand({ QueueUrl, MessageBody: body }));
  return QueueUrl as string;
}

async function table(): Promise<string> {
  const name = `chaos-${++n}`;
  await clients.dynamo.send(
    new CreateTableCommand({
      TableName: name,
      KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
      AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
      BillingMode: 'PAY_PER_REQUEST',
    }),
  );
  return name;
}

async function written(tableName: string, id: string): Promise<boolean> {
  const answer = await clients.dynamo.send(new GetItemCommand({ TableName: tableName, Key: { id: { S: id } } }));
  return answer.Item !== undefined;
}

function run(queueUrl: string, handler: SqsBatchHandler) {
  return createPoller({
    sqs: clients.sqs,
    queueUrl,
    region: clients.region,
    handler,
    batchSize: 1,
    maxConcurrency: 4,
    functionTimeoutMs: 20_000,
    waitTimeSeconds: 1,
  });
}

describe('crashes at random moments', () => {
  it('kill an invocation at the drawn moment, wherever its code is: a write after that moment never happens', async () => {
    // Prepare: every invocation dies 1 s in (the median of a rate of ln 2 per second); one handler
    // writes after 2 s, one at once.
    const tableName = await table();
    const guarded = createAwsClients({ dynamoEndpoint: emulators.dynamoEndpoint, sqsEndpoint: emulators.sqsEndpoint });
    guardDeadInvocationRequests(guarded.dynamo);
    let crashes = 0;
    const crash = crashAtRandomMoments({ perSecond: Math.LN2, random: () => 0.5, onCrash: () => crashes++ });
    const queueUrl = await queueWith(['slow', 'quick']);
    const subject = run(queueUrl, (event) => {
      const call = (async () => {
        const body = event.Records[0]?.body ?? '';
        if (body === 'slow') await sleep(2_000);
        await guarded.documents.send(new PutCommand({ TableName: tableName, Item: { id: body } }));
        return { batchItemFailures: [] };
      })();
      crash(call);
      return call;
    });

    // Act
    await subject.start();
    for (let i = 0; i < 100 && subject.stats().invocations < 2; i++) await sleep(50);
    await sleep(2_500);
    await subject.stop({ graceMs: 100 });

    // Assess: the quick one wrote and ended before its moment; the slow one died first.
    expect(await written(tableName, 'quick')).toBe(true);
    expect(await written(tableName, 'slow')).toBe(false);
    expect(crashes).toBe(1);
    expect(subject.stats().crashes).toBe(1);
  });

  it('draw the moment from a constant hazard: about 1 − e^(−rate·t) of invocations lasting t die', async () => {
    // Prepare: 40 invocations of 250 ms at 2 crashes per second: 1 − e^(−0.5) ≈ 39 % die (seeded draws).
    let crashes = 0;
    const crash = crashAtRandomMoments({ perSecond: 2, random: stream(7, 'chaos-test'), onCrash: () => crashes++ });
    const queueUrl = await queueWith(Array.from({ length: 40 }, (_, i) => `m${i}`));
    const subject = createPoller({
      sqs: clients.sqs,
      queueUrl,
      region: clients.region,
      handler: () => {
        const call = sleep(250).then(() => ({ batchItemFailures: [] }));
        crash(call);
        return call;
      },
      batchSize: 1,
      maxConcurrency: 10,
      functionTimeoutMs: 20_000,
      waitTimeSeconds: 1,
    });

    // Act: each message once (the crashed ones stay invisible for the queue's 30 s).
    await subject.start();
    for (let i = 0; i < 200 && subject.stats().invocations < 40; i++) await sleep(50);
    await subject.stop({ graceMs: 1_000 });

    // Assess: within a generous band around 16 of 40.
    expect(subject.stats().invocations).toBe(40);
    expect(crashes).toBe(subject.stats().crashes);
    expect(crashes).toBeGreaterThanOrEqual(8);
    expect(crashes).toBeLessThanOrEqual(26);
  });
});

describe('a dead invocation', () => {
  it('never sends its SDK retries: a write whose first attempt was throttled as the invocation died does not land', async () => {
    // Prepare: the proxy throttles the first PutItem and, as it does, the invocation dies.
    const tableName = await table();
    let dying: ReturnType<typeof currentInvocation>;
    const proxy = await startFaultProxy({
      upstreams: { sqs: emulators.sqsEndpoint, dynamodb: emulators.dynamoEndpoint },
      plan: {
        windows: [
          {
            service: 'dynamodb',
            kind: 'throttle',
            startMs: 0,
            durationMs: 60_000,
            rate: 1,
            operations: ['PutItem'],
            count: 1,
          },
        ],
      },
      onInjected: () => dying?.kill('crash'),
    });
    proxy.arm();
    const guarded = createAwsClients({ dynamoEndpoint: proxy.url, sqsEndpoint: emulators.sqsEndpoint });
    guardDeadInvocationRequests(guarded.dynamo);
    const queueUrl = await queueWith(['write-me']);
    const subject = run(queueUrl, async () => {
      dying = currentInvocation();
      await guarded.documents.send(new PutCommand({ TableName: tableName, Item: { id: 'write-me' } }));
      return { batchItemFailures: [] };
    });

    // Act: the SDK's retry would come within a second.
    await subject.start();
    for (let i = 0; i < 100 && subject.stats().crashes < 1; i++) await sleep(50);
    await sleep(1_500);
    await subject.stop({ graceMs: 100 });
    const stats = proxy.stats();
    await proxy.close();

    // Assess: one attempt reached the proxy, none after the death.
    expect(subject.stats().crashes).toBe(1);
    expect(stats.dynamodb.requests).toBe(1);
    expect(await written(tableName, 'write-me')).toBe(false);
  });
});

describe('the ids a crash loses', () => {
  it('are the paid submissions whose invocation died before their id was kept: its write pending, or asked for after the death; not one written, nor one carried in a copy', async () => {
    // Prepare: a repository whose writes of 102 and 103 never answer, and a queue whose copies land.
    const ids = new SolverIdWatch();
    const repository = guardResultsRepository(
      {
        recordSolverId: (_taskId: string, _token: string, solverId: string) =>
          solverId === '101' ? Promise.resolve(true) : new Promise<boolean>(() => undefined),
      } as unknown as ResultsRepository,
      { crashRate: 0, random: () => 1, ids },
    );
    const queue = watchCarries({ requeue: async () => ({ deleted: true }) } as unknown as TaskQueue, ids);
    const carryOf = (solverId: string) => ({
      'captcha-fleet': {
        dataType: 'String',
        stringValue: JSON.stringify({
          v: 1,
          taskId: 'task-c',
          sentAt: 1,
          firstReceivedAt: 1,
          generation: 0,
          waits: 1,
          carry: { provider: 'primary', solverId, acceptedAt: 1, mac: 'a'.repeat(64) },
        }),
      },
    });
    const queueUrl = await queueWith(['one']);
    const subject = run(queueUrl, async () => {
      const invocation = currentInvocation();
      await repository.recordSolverId('task-a', 'token', '101', 'primary');
      void repository.recordSolverId('task-b', 'token', '102', 'primary');
      void repository.recordSolverId('task-c', 'token', '103', 'primary');
      await queue.requeue(
        { eventSourceArn: '', receiptHandle: '', messageId: '' },
        { body: '{}', attributes: carryOf('103'), delaySeconds: 0 },
      );
      invocation?.kill('crash');
      // The acceptance of 104 reaches the dead invocation.
      void repository.recordSolverId('task-d', 'token', '104', 'primary');
      return { batchItemFailures: [] };
    });

    // Act
    await subject.start();
    for (let i = 0; i < 100 && subject.stats().crashes < 1; i++) await sleep(50);
    await subject.stop({ graceMs: 100 });

    // Assess
    expect([...ids.lost()].sort()).toEqual(['primary:102', 'primary:104']);
  });
});
