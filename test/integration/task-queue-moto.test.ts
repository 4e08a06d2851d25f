/**
 * SqsTaskQueue.acknowledgeMany against moto_server, which answers DeleteMessageBatch entries it
 * refuses as AWS does (the embedded emulator takes any receipt handle). Skipped without moto_server.
 */
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SqsTaskQueue } from '../../functions/adapters/task-queue.js';
import { HAS_MOTO, type MotoServer, startMotoServer } from '../helpers/moto.js';

describe.skipIf(!HAS_MOTO)('deleting many messages (moto_server)', () => {
  let moto: MotoServer | undefined;
  let sqs: SQSClient;
  beforeAll(async () => {
    moto = await startMotoServer();
    sqs = new SQSClient({
      endpoint: moto.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
    });
  });
  afterAll(async () => {
    sqs?.destroy();
    await moto?.stop();
  });

  it('counts the entries SQS refuses and deletes the rest, ten to a request', async () => {
    // Prepare: fourteen messages received (in flight), and one receipt handle SQS does not know.
    const { QueueUrl } = await sqs.send(new CreateQueueCommand({ QueueName: 'moto-delete-many' }));
    const dlq = await sqs.send(new CreateQueueCommand({ QueueName: 'moto-delete-many-dlq' }));
    const queueUrl = QueueUrl as string;
    for (let n = 0; n < 14; n++)
      await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: `{"n":${n}}` }));
    const handles: string[] = [];
    for (let round = 0; round < 10 && handles.length < 14; round++) {
      const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10 }));
      for (const m of got.Messages ?? []) handles.push(m.ReceiptHandle as string);
    }
    const arn = 'arn:aws:sqs:us-east-1:123456789012:moto-delete-many';
    const queue = new SqsTaskQueue({ sqs, dlqUrl: dlq.QueueUrl as string, sourceQueueUrls: [queueUrl] });
    // Act
    const result = await queue.acknowledgeMany([
      ...handles.map((receiptHandle) => ({ eventSourceArn: arn, receiptHandle })),
      { eventSourceArn: arn, receiptHandle: 'not-a-receipt-handle' },
    ]);
    // Assess
    expect(handles).toHaveLength(14);
    expect(result).toEqual({ failed: 1, requests: 2 });
    const attributes = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }));
    expect(attributes.Attributes?.ApproximateNumberOfMessages).toBe('0');
    expect(attributes.Attributes?.ApproximateNumberOfMessagesNotVisible).toBe('0');
  });
});
