import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  GetQueueAttributesCommand,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type Message,
} from '@aws-sdk/client-sqs';
import { startEmulators, type Emulators } from '../../local/emulators.js';
import { ensureFleetResources, type FleetResources } from '../../local/resources.js';
import { createAwsClients, type AwsClients } from '../../functions/adapters/aws-clients.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { describeRedrive, redrive, type RedriveTarget } from '../../clients/dlq-redrive.js';
import { parseRedelivery, REDELIVERY_ATTRIBUTE } from '../../functions/core/redelivery.js';

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
    expect(report.copied).toBe(0);
    expect(await depth(resources.queueUrls.dlq)).toBe(4);
    // Released at once: a second look sees all four again.
    expect((await redrive(target, { dryRun: true, includeRejected: false })).inventory.depth).toBe(4);
  });

  it('moves retryable messages back to their lane and leaves refused ones', async () => {
    const report = await redrive(target, { dryRun: false, includeRejected: false });
    expect(report).toMatchObject({ copied: 2, left: 2 });
    expect(report.nativeMove).toBeUndefined();
    expect(await bodies(resources.queueUrls.normal)).toEqual([task('retry-1')]);
    expect(await bodies(resources.queueUrls.high)).toEqual([task('retry-2', 'high')]);
    expect(await depth(resources.queueUrls.dlq)).toBe(2);
  });

  it('leaves an id conflict in the DLQ unless asked: moved back while the first task lives, it would only conflict again', async () => {
    // Prepare
    await clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: resources.queueUrls.dlq,
        MessageBody: task('retry-1'),
        MessageAttributes: { reason: { DataType: 'String', StringValue: 'ID_CONFLICT' } },
      }),
    );

    // Act
    const report = await redrive(target, { dryRun: false, includeRejected: false });

    // Assess
    expect(report).toMatchObject({ copied: 2, left: 3 });
    expect(report.inventory.byReason.ID_CONFLICT).toMatchObject({ count: 1, movable: false });
    expect(await depth(resources.queueUrls.dlq)).toBe(3);
  });

  it('moves refused messages too when asked', async () => {
    const report = await redrive(target, { dryRun: false, includeRejected: true });
    expect(report).toMatchObject({ copied: 4, left: 0 });
    expect(await depth(resources.queueUrls.dlq)).toBe(0);
    expect(await depth(resources.queueUrls.normal)).toBe(3);
  });

  it('moves consumer-sent messages by copy + delete in AWS too, never by SQS’s move task', async () => {
    // Prepare: none of the four carries DeadLetterQueueSourceArn (all were sent with SendMessage).
    const aws = awsLike({ sqsDeadLettered: () => false });
    // Act
    const report = await redrive({ ...target, sqs: aws.sqs, native: true }, { dryRun: false, includeRejected: true });
    // Assess
    expect(aws.moveTasks).toEqual([]);
    expect(report).toMatchObject({ copied: 4, left: 0 });
    expect(report.nativeMove).toBeUndefined();
    expect(await depth(resources.queueUrls.dlq)).toBe(0);
  });

  it('copies what the consumer sent, then starts SQS’s move task for what SQS dead-lettered itself', async () => {
    // Prepare: the two messages without a reason are SQS's own (it stamps DeadLetterQueueSourceArn).
    const aws = awsLike({ sqsDeadLettered: (body) => body.includes('retry-') });
    // Act
    const report = await redrive({ ...target, sqs: aws.sqs, native: true }, { dryRun: false, includeRejected: true });
    // Assess: the consumer's two were copied and deleted before the task started, for the other two.
    expect(aws.moveTasks).toEqual([{ SourceArn: resources.queueArns.dlq }]);
    expect(aws.calls.lastIndexOf('DeleteMessageCommand')).toBeLessThan(
      aws.calls.indexOf('StartMessageMoveTaskCommand'),
    );
    expect(report).toMatchObject({
      copied: 2,
      left: 0,
      nativeMove: { taskHandle: 'handle-1', messages: 2, status: 'RUNNING', movedSoFar: 0 },
    });
    expect(await depth(resources.queueUrls.normal)).toBe(2);
    expect(await depth(resources.queueUrls.dlq)).toBe(2);
  });

  it('leaves SQS’s move task alone while refused messages stay in the DLQ (the task would move them too)', async () => {
    // Prepare
    const aws = awsLike({ sqsDeadLettered: (body) => body.includes('retry-') });
    // Act
    const report = await redrive({ ...target, sqs: aws.sqs, native: true }, { dryRun: false, includeRejected: false });
    // Assess
    expect(aws.moveTasks).toEqual([]);
    expect(report).toMatchObject({ copied: 2, left: 2 });
  });

  it('reports the move task as started with its status, never as moved', () => {
    // Prepare
    const report = {
      dryRun: false,
      inventory: { depth: 3, hidden: 0, cut: false, byReason: {} },
      copied: 1,
      nativeMove: {
        taskHandle: 'h-1',
        messages: 2,
        status: 'FAILED',
        movedSoFar: 0,
        failureReason: 'CouldNotDetermineMessageSource',
      },
      left: 0,
    };
    // Act
    const lines = describeRedrive(report);
    // Assess
    expect(lines).toEqual([
      'copied 1 back to their lanes (copy + delete); 0 left in the DLQ',
      expect.stringContaining(
        'SQS move task started for 2 message(s) SQS dead-lettered itself (task h-1): status FAILED, 0 moved so far (CouldNotDetermineMessageSource)',
      ),
    ]);
    expect(lines.join('\n')).not.toMatch(/moved 2/);
  });
});

/**
 * The emulator's SQS, plus what only AWS does: SQS stamps the messages it dead-letters with
 * DeadLetterQueueSourceArn, and serves the move task (mocked here, its requests recorded).
 */
function awsLike(options: { sqsDeadLettered: (body: string) => boolean }) {
  const moveTasks: unknown[] = [];
  const calls: string[] = [];
  const sqs = {
    send: async (command: { constructor: { name: string }; input: unknown }) => {
      const name = command.constructor.name;
      calls.push(name);
      if (name === 'StartMessageMoveTaskCommand') {
        moveTasks.push(command.input);
        return { TaskHandle: 'handle-1' };
      }
      if (name === 'ListMessageMoveTasksCommand')
        return { Results: [{ TaskHandle: 'handle-1', Status: 'RUNNING', ApproximateNumberOfMessagesMoved: 0 }] };
      const out = (await clients.sqs.send(command as never)) as { Messages?: Message[] };
      for (const message of out.Messages ?? []) {
        if (options.sqsDeadLettered(message.Body ?? ''))
          message.Attributes = { ...message.Attributes, DeadLetterQueueSourceArn: resources.queueArns.normal };
      }
      return out;
    },
  } as unknown as RedriveTarget['sqs'];
  return { sqs, moveTasks, calls };
}

describe('DLQ redrive on letters it did not foresee', () => {
  /** Send `body` to the DLQ with these string attributes. */
  const letter = async (body: string, attributes: Record<string, string> = {}) => {
    const sent = await clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: resources.queueUrls.dlq,
        MessageBody: body,
        MessageAttributes: Object.fromEntries(
          Object.entries(attributes).map(([name, value]) => [name, { DataType: 'String', StringValue: value }]),
        ),
      }),
    );
    return sent.MessageId as string;
  };

  it('lists and counts a reason of __proto__ or constructor, and moves what it says moves', async () => {
    // Before: grouped on a plain object, their letters vanished from the listing (17 letters, 13
    // counted), `constructor` printed "NaN … stays" and then moved, --json left both out.
    await letter(task('proto-1'), { reason: '__proto__' });
    await letter(task('ctor-1'), { reason: 'constructor' });
    await letter(task('ctor-2'), { reason: 'constructor' });
    const listed = await redrive(target, { dryRun: true, includeRejected: false });
    expect(Object.getOwnPropertyDescriptor(listed.inventory.byReason, '__proto__')?.value).toEqual({
      count: 1,
      example: undefined,
      movable: true,
    });
    expect(listed.inventory.byReason.constructor).toEqual({ count: 2, example: undefined, movable: true });
    expect(JSON.parse(JSON.stringify(listed.inventory.byReason)).constructor.count).toBe(2);
    expect(({} as { count?: unknown }).count).toBeUndefined();
    const moved = await redrive(target, { dryRun: false, includeRejected: false });
    // The two retryable letters of beforeEach and these three; the two refused stay.
    expect(moved).toMatchObject({ copied: 5, left: 2 });
  });

  it('gives a redriven task without an id the identity it was claimed under (its first message’s id)', async () => {
    // Before: the copy had a new message id, so the consumer claimed it as a new task: the producer
    // waiting on the first id never heard, and a submission paid for under it was made again.
    await clients.sqs.send(new PurgeQueueCommand({ QueueUrl: resources.queueUrls.dlq }));
    const anonymous = JSON.stringify({
      method: 'turnstile',
      params: { sitekey: '0x4AAAAAAAC3DHQFLr1GavRN', pageurl: 'https://shop.example/' },
    });
    const firstId = await letter(anonymous);
    // A refusal of the consumer's names its task in `taskId`.
    await letter(anonymous, { reason: 'SCHEMA_VIOLATION', taskId: 'named-by-consumer' });
    await letter(task('own-id'));
    await redrive(target, { dryRun: false, includeRejected: true });
    const copies = await clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: resources.queueUrls.normal,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        MessageAttributeNames: ['All'],
      }),
    );
    const identities = (copies.Messages ?? []).map(
      (m) =>
        parseRedelivery(m.MessageAttributes?.[REDELIVERY_ATTRIBUTE]?.StringValue)?.taskId ??
        JSON.parse(m.Body ?? '{}').id,
    );
    expect(identities.sort()).toEqual([firstId, 'named-by-consumer', 'own-id'].sort());
  });

  it('says when letters are held by another reader, and when the listing stopped at its limit', async () => {
    // Another reader (a redrive cut short) holds the two retryable letters for a minute. Before, a
    // listing then said "0 message(s)" and "(empty)" while they were there.
    await clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: resources.queueUrls.dlq, MaxNumberOfMessages: 10, VisibilityTimeout: 60 }),
    );
    const held = await redrive(target, { dryRun: true, includeRejected: false });
    expect(held.inventory).toMatchObject({ depth: 0, hidden: 4, cut: false });
    await clients.sqs.send(new PurgeQueueCommand({ QueueUrl: resources.queueUrls.dlq }));
    for (let i = 0; i < 5; i++) await letter(task(`many-${i}`));
    const first = await redrive(target, { dryRun: false, includeRejected: false, max: 3 });
    expect(first.inventory.cut).toBe(true);
    expect(describeRedrive(first)).toEqual([
      'listed 3 of about 5 (one run lists at most 10000); run it again for the rest',
      'copied 3 back to their lanes (copy + delete); about 2 left in the DLQ',
    ]);
  });
});
