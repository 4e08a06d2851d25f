/**
 * The fault proxy against the embedded emulators, through the real AWS SDK: each fault class does
 * to a call what DynamoDB and SQS do on a bad day, only inside its window, and a write whose
 * answer is lost is committed all the same.
 */
import { GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients } from '../../functions/adapters/aws-clients.js';
import { storeFailureKind } from '../../functions/adapters/store-failure.js';
import type { FaultWindow } from '../../local/faults/plan.js';
import { startFaultProxy, type FaultProxy } from '../../local/faults/proxy.js';
import { startEmulatorFixture, type EmulatorFixture, type TestFleet } from '../helpers/fleet-fixture.js';

let fixture: EmulatorFixture;
let fleet: TestFleet;
const proxies: FaultProxy[] = [];

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  fleet = await fixture.createFleet();
});
afterAll(async () => {
  await fixture?.stop();
});
afterEach(async () => {
  await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
});

async function through(windows: FaultWindow[]) {
  const proxy = await startFaultProxy({
    upstreams: { sqs: fixture.emulators.sqsEndpoint, dynamodb: fixture.emulators.dynamoEndpoint },
    plan: { windows },
  });
  proxies.push(proxy);
  proxy.arm();
  return {
    proxy,
    clients: createAwsClients({ sqsEndpoint: proxy.url, dynamoEndpoint: proxy.url, region: 'us-east-1' }),
  };
}

const always = (service: FaultWindow['service'], kind: FaultWindow['kind'], extra: Partial<FaultWindow> = {}) =>
  ({ service, kind, startMs: 0, durationMs: 60_000, rate: 1, ...extra }) as FaultWindow;

const readTable = (clients: ReturnType<typeof createAwsClients>) =>
  clients.documents.send(new GetCommand({ TableName: fleet.resources.tables.results, Key: { taskId: 'probe' } }));
const readQueue = (clients: ReturnType<typeof createAwsClients>) =>
  clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: fleet.resources.queueUrls.normal, AttributeNames: ['QueueArn'] }),
  );

describe('the fault proxy', () => {
  it.each([
    ['throttle', 'dynamodb', 'ProvisionedThroughputExceededException', 'throttled'],
    ['throttle', 'sqs', 'ThrottlingException', 'throttled'],
    ['unavailable', 'dynamodb', 'ServiceUnavailable', 'unavailable'],
    ['unavailable', 'sqs', 'ServiceUnavailable', 'unavailable'],
    ['reset', 'dynamodb', 'TimeoutError', 'unavailable'],
    ['reset', 'sqs', 'TimeoutError', 'unavailable'],
  ] as const)(
    '%s on %s fails the call as %s, which the stores’ adapters read as %s',
    async (kind, service, name, meaning) => {
      const { clients, proxy } = await through([always(service, kind)]);
      const error = await (service === 'dynamodb' ? readTable(clients) : readQueue(clients)).catch((e: unknown) => e);
      expect((error as Error).name).toBe(name);
      expect(storeFailureKind(error)).toBe(meaning);
      // Each of the SDK's three tries was hurt.
      expect(proxy.stats()[service].injected[kind]).toBe(3);
    },
  );

  it('holds answers back when slow, and passes everything outside its windows', async () => {
    const { clients } = await through([always('dynamodb', 'slow', { delayMs: [300, 300] })]);
    const started = Date.now();
    await readTable(clients);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await expect(readQueue(clients)).resolves.toBeDefined();

    const { clients: later, proxy } = await through([
      { service: 'dynamodb', kind: 'unavailable', startMs: 60_000, durationMs: 1_000, rate: 1 },
    ]);
    await expect(readTable(later)).resolves.toBeDefined();
    expect(proxy.stats().dynamodb).toMatchObject({ requests: 1, injected: { unavailable: 0 } });
  });

  it('commits a write whose answer it loses: the caller sees an error, the item is there', async () => {
    const { clients } = await through([always('dynamodb', 'lost_commit', { count: 1 })]);
    const item = { taskId: `lost-${Date.now()}`, status: 'rejected', attempts: 0, expiresAt: 1 };

    // The SDK's retry of a conditional put meets its own first attempt.
    const error = await clients.documents
      .send(
        new PutCommand({
          TableName: fleet.resources.tables.results,
          Item: item,
          ConditionExpression: 'attribute_not_exists(taskId)',
        }),
      )
      .catch((e: unknown) => e);

    expect((error as Error).name).toBe('ConditionalCheckFailedException');
    const stored = await fleet.clients.documents.send(
      new GetCommand({ TableName: fleet.resources.tables.results, Key: { taskId: item.taskId } }),
    );
    expect(stored.Item).toEqual(item);
  });

  it('gives every overlapping window a share: a 5xx window at rate 1 hides none under it', async () => {
    const { clients, proxy } = await through([always('dynamodb', 'unavailable'), always('dynamodb', 'throttle')]);
    for (let n = 0; n < 8; n++) await readTable(clients).catch(() => undefined);
    const { injected } = proxy.stats().dynamodb;
    expect(injected.unavailable).toBeGreaterThan(0);
    expect(injected.throttle).toBeGreaterThan(0);
    expect(injected.unavailable + injected.throttle).toBe(proxy.stats().dynamodb.requests);
  });

  it('loses only writes (and receives), never a read, and hurts at most `count` requests', async () => {
    const { clients, proxy } = await through([always('sqs', 'lost_commit', { count: 2 })]);
    await readQueue(clients);
    await clients.sqs.send(new SendMessageCommand({ QueueUrl: fleet.resources.queueUrls.normal, MessageBody: 'a' }));
    expect(proxy.stats().sqs.injected.lost_commit).toBe(2);
    // The send was committed three times: twice with its answer lost, then answered.
    const depth = await fleet.clients.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: fleet.resources.queueUrls.normal,
        AttributeNames: ['ApproximateNumberOfMessages'],
      }),
    );
    expect(Number(depth.Attributes?.ApproximateNumberOfMessages)).toBe(3);
  });
});
