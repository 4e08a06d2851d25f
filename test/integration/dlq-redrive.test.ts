import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  GetQueueAttributesCommand,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
} from '@aws-sdk/client-sqs';
import { startEmulators, type Emulators } from '../../local/emulators.js';
import { ensureFleetResources, type FleetResources } from '../../local/resources.js';
import { createAwsClients, type AwsClients } from '../../functions/adapters/aws-clients.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { redrive, type RedriveTarget } from '../../clients/dlq-redrive.js';

let emulators: Emulators;
let clients: AwsClients;
let resources: FleetResources;
let target: RedriveTarget;

const task = (id: string, priority?: 'high') =>
  JSON.stringify({
    id,
    method: 'turnstile',
    params: { sitekey: '0x4AAAAAAAC3DHQFLr1GavRN', pageurl: 'https://shop.example/' },
    ...(priority ? { priority } : {}),
  });

async function depth(url: string): Promise<number> {
  const out = await clients.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return (
    Number(out.Attributes?.ApproximateNumberOfMessages ?? 0) +
    Number(out.Attributes?.ApproximateNumberOfMessagesNotVisible ?? 0)
  );
}

async function bodies(url: string): Promise<string[]> {
  const out = await clients.sqs.send(
    new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 0 }),
  );
  return (out.Messages ?? []).map((m) => m.Body ?? '');
}

beforeAll(async () => {
  emulators = await startEmulators();
  clients = createAwsClients({ sqsEndpoint: emulators.sqsEndpoint, dynamoEndpoint: emulators.dynamoEndpoint });
  resources = await ensureFleetResources(clients, resolveSettings({ prefix: 'redrive-test' }));
  target = {
    sqs: clients.sqs,
    dlqUrl: resources.queueUrls.dlq,
    dlqArn: resources.queueArns.dlq,
    queueUrls: resources.queueUrls,
    native: false,
  };
});

afterAll(async () => {
  await emulators?.stop();
});

beforeEach(async () => {
  for (const url of Object.values(resources.queueUrls))
    await clients.sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
  const dlq = resources.queueUrls.dlq;
  const refused = (body: string, reason: string) =>
    clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: dlq,
        MessageBody: body,
        MessageAttributes: {
          reason: { DataType: 'String', StringValue: reason },
          reasonDetail: { DataType: 'String', StringValue: `${reason} detail` },
        },
      }),
    );
  await refused('{not json', 'MALFORMED_JSON');
  await refused(JSON.stringify({ id: 'bad-1', method: 'audio', params: {} }), 'UNKNOWN_METHOD');
  // Exhausted receives: SQS moved them and they carry no reason of ours.
  await clients.sqs.send(new SendMessageCommand({ QueueUrl: dlq, MessageBody: task('retry-1') }));
  await clients.sqs.send(new SendMessageCommand({ QueueUrl: dlq, MessageBody: task('retry-2', 'high') }));
});

describe('DLQ redrive', () => {
  it('lists the DLQ grouped by reason on a dry run and moves nothing', async () => {
    const report = await redrive(target, { dryRun: true, includeRejected: false });
    expect(report.inventory.depth).toBe(4);
    expect(report.inventory.byReason).toEqual({
      MALFORMED_JSON: { count: 1, example: 'MALFORMED_JSON detail', movable: false },
      UNKNOWN_METHOD: { count: 1, example: 'UNKNOWN_METHOD detail', movable: false },
      RECEIVES_EXHAUSTED: { count: 2, example: undefined, movable: true },
    });
    expect(report.moved).toBe(0);
    expect(await depth(resources.queueUrls.dlq)).toBe(4);
    // Released at once: a second look sees all four again.
    expect((await redrive(target, { dryRun: true, includeRejected: false })).inventory.depth).toBe(4);
  });

  it('moves retryable messages back to their lane and leaves refused ones', async () => {
    const report = await redrive(target, { dryRun: false, includeRejected: false });
    expect(report).toMatchObject({ strategy: 'copy', moved: 2, left: 2 });
    expect(await bodies(resources.queueUrls.normal)).toEqual([task('retry-1')]);
    expect(await bodies(resources.queueUrls.high)).toEqual([task('retry-2', 'high')]);
    expect(await depth(resources.queueUrls.dlq)).toBe(2);
  });

  it('moves refused messages too when asked', async () => {
    const report = await redrive(target, { dryRun: false, includeRejected: true });
    expect(report).toMatchObject({ moved: 4, left: 0 });
    expect(await depth(resources.queueUrls.dlq)).toBe(0);
    expect(await depth(resources.queueUrls.normal)).toBe(3);
  });

  it('uses SQS StartMessageMoveTask in AWS when everything in the DLQ is to move', async () => {
    const started: unknown[] = [];
    const sqs = {
      send: (command: { constructor: { name: string }; input: unknown }) => {
        if (command.constructor.name === 'StartMessageMoveTaskCommand') {
          started.push(command.input);
          return Promise.resolve({ TaskHandle: 'handle-1' });
        }
        return clients.sqs.send(command as never);
      },
    };
    const report = await redrive(
      { ...target, sqs: sqs as never, native: true },
      { dryRun: false, includeRejected: true },
    );
    expect(report).toMatchObject({ strategy: 'native', moved: 4, taskHandle: 'handle-1' });
    expect(started).toEqual([{ SourceArn: resources.queueArns.dlq }]);
    // The native task does the moving; nothing was copied by hand.
    expect(await depth(resources.queueUrls.normal)).toBe(0);
  });
});
