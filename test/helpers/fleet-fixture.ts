/**
 * Emulator fixture for integration tests: the embedded SQS + DynamoDB emulators, the fleet's
 * queues and tables (from the same settings the stack uses), and a `deliver()` that plays
 * Lambda's SQS event source mapping for one batch (receive → invoke → delete what succeeded).
 */
import { randomUUID } from 'node:crypto';
import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type Message,
  type MessageAttributeValue,
} from '@aws-sdk/client-sqs';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { Context, SQSBatchResponse, SQSEvent, SQSMessageAttributes, SQSRecord } from 'aws-lambda';
import { createAwsClients, type AwsClients } from '../../functions/adapters/aws-clients.js';
import { resolveSettings, type FleetConfig, type FleetSettings } from '../../functions/core/settings.js';
import { startEmulators, type Emulators } from '../../local/emulators.js';
import type { FaultProxy } from '../../local/faults/proxy.js';
import { ensureFleetResources, type FleetResources } from '../../local/resources.js';

/** Both emulators and clients for them; one per test file. */
export interface EmulatorFixture {
  emulators: Emulators;
  clients: AwsClients;
  /** Fresh queues and tables under a new prefix, so tests in one file do not see each other. */
  createFleet(config?: FleetConfig): Promise<TestFleet>;
  stop(): Promise<void>;
}

export interface TestFleet {
  settings: FleetSettings;
  resources: FleetResources;
  clients: AwsClients;
}

let prefixes = 0;

/**
 * A test file's own fleet on the emulators, its leases table being what the file is about:
 * registers the `beforeAll` that starts it and the `afterAll` that stops it; read `fixture` and
 * `leasesTable` inside the tests.
 */
export function leasesTableOnEmulators(): { readonly fixture: EmulatorFixture; readonly leasesTable: string } {
  let fixture: EmulatorFixture | undefined;
  let leasesTable: string | undefined;
  beforeAll(async () => {
    fixture = await startEmulatorFixture();
    leasesTable = (await fixture.createFleet()).resources.tables.leases;
  });
  afterAll(async () => {
    await fixture?.stop();
  });
  return {
    get fixture() {
      if (fixture === undefined) throw new Error('the emulators start in beforeAll: read the fixture inside a test');
      return fixture;
    },
    get leasesTable() {
      if (leasesTable === undefined) throw new Error('the fleet is made in beforeAll: read its table inside a test');
      return leasesTable;
    },
  };
}

/**
 * A test file's emulators and the fault proxies its tests open: registers the `beforeAll` that
 * starts the emulators, the `afterAll` that stops them and the `afterEach` that closes every proxy
 * a test pushed to `proxies`; read `fixture` inside the tests.
 */
export function emulatorsWithProxies(): { readonly fixture: EmulatorFixture; readonly proxies: FaultProxy[] } {
  let fixture: EmulatorFixture | undefined;
  const proxies: FaultProxy[] = [];
  beforeAll(async () => {
    fixture = await startEmulatorFixture();
  });
  afterAll(async () => {
    await fixture?.stop();
  });
  afterEach(async () => {
    await Promise.all(proxies.splice(0).map((proxy) => proxy.close()));
  });
  return {
    get fixture() {
      if (fixture === undefined) throw new Error('the emulators start in beforeAll: read the fixture inside a test');
      return fixture;
    },
    proxies,
  };
}

/** Start the emulators (call in `beforeAll`, `stop()` in `afterAll`). */
export async function startEmulatorFixture(): Promise<EmulatorFixture> {
  const emulators = await startEmulators();
  const clients = createAwsClients({
    sqsEndpoint: emulators.sqsEndpoint,
    dynamoEndpoint: emulators.dynamoEndpoint,
    region: 'us-east-1',
  });
  return {
    emulators,
    clients,
    async createFleet(config: FleetConfig = {}) {
      const settings = resolveSettings({
        ...config,
        prefix: config.prefix ?? `t${++prefixes}-${randomUUID().slice(0, 8)}`,
      });
      const resources = await ensureFleetResources(clients, settings);
      return { settings, resources, clients };
    },
    async stop() {
      clients.sqs.destroy();
      clients.dynamo.destroy();
      await emulators.stop();
    },
  };
}

/** Send one message body (a task as JSON, or anything for malformed cases). */
export async function sendMessage(clients: AwsClients, queueUrl: string, body: string): Promise<string> {
  const sent = await clients.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body }));
  if (!sent.MessageId) throw new Error('SendMessage returned no id');
  return sent.MessageId;
}

/** Receive up to `max` visible messages with every attribute, as the event source mapping does. */
export async function receive(clients: AwsClients, queueUrl: string, max = 10): Promise<Message[]> {
  const received: Message[] = [];
  // Short polls until nothing more comes: the emulator may hand out fewer than asked at once.
  for (let round = 0; round < 5 && received.length < max; round++) {
    const answer = await clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: max - received.length,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
        WaitTimeSeconds: 0,
      }),
    );
    if (!answer.Messages?.length) break;
    received.push(...answer.Messages);
  }
  return received;
}

/** Messages in a queue: visible and in flight. */
export async function queueDepth(
  clients: AwsClients,
  queueUrl: string,
): Promise<{ visible: number; inFlight: number }> {
  const answer = await clients.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: queueUrl,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  return {
    visible: Number(answer.Attributes?.ApproximateNumberOfMessages),
    inFlight: Number(answer.Attributes?.ApproximateNumberOfMessagesNotVisible),
  };
}

/** The SQS event a Lambda event source mapping builds from received messages. */
export function toSqsEvent(messages: Message[], queueArn: string, region: string): SQSEvent {
  return {
    Records: messages.map(
      (message): SQSRecord => ({
        messageId: message.MessageId ?? '',
        receiptHandle: message.ReceiptHandle ?? '',
        body: message.Body ?? '',
        attributes: {
          ApproximateReceiveCount: message.Attributes?.ApproximateReceiveCount ?? '1',
          SentTimestamp: message.Attributes?.SentTimestamp ?? String(Date.now()),
          SenderId: message.Attributes?.SenderId ?? '000000000000',
          ApproximateFirstReceiveTimestamp: message.Attributes?.ApproximateFirstReceiveTimestamp ?? String(Date.now()),
        },
        messageAttributes: toRecordAttributes(message.MessageAttributes),
        md5OfBody: message.MD5OfBody ?? '',
        eventSource: 'aws:sqs',
        eventSourceARN: queueArn,
        awsRegion: region,
      }),
    ),
  };
}

function toRecordAttributes(attributes: Record<string, MessageAttributeValue> | undefined): SQSMessageAttributes {
  const out: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(attributes ?? {})) {
    out[name] = {
      dataType: value.DataType ?? 'String',
      ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
      ...(value.BinaryValue !== undefined ? { binaryValue: Buffer.from(value.BinaryValue).toString('base64') } : {}),
    } as SQSMessageAttributes[string];
  }
  return out;
}

/** A Lambda context whose invocation ends `remainingMs` from now. */
export function lambdaContext(remainingMs = 60_000): Context {
  const endsAt = Date.now() + remainingMs;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'captcha-fleet-consumer',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:us-east-1:000000000000:function:captcha-fleet-consumer',
    memoryLimitInMB: '512',
    awsRequestId: randomUUID(),
    logGroupName: '/aws/lambda/captcha-fleet-consumer',
    logStreamName: 'test',
    getRemainingTimeInMillis: () => Math.max(0, endsAt - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

export type BatchHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

export interface Delivery {
  messages: Message[];
  event: SQSEvent;
  response: SQSBatchResponse;
  /** Message ids deleted (acknowledged). */
  acknowledged: string[];
  failed: string[];
}

/**
 * One event source mapping round: receive up to `max` messages, invoke the handler, delete
 * every message not listed in `batchItemFailures` (what Lambda does with a partial response).
 */
export async function deliver(
  fleet: TestFleet,
  handler: BatchHandler,
  options: { queue?: 'normal' | 'high'; max?: number; remainingMs?: number } = {},
): Promise<Delivery> {
  const lane = options.queue ?? 'normal';
  const queueUrl = fleet.resources.queueUrls[lane];
  const messages = await receive(fleet.clients, queueUrl, options.max ?? 10);
  const event = toSqsEvent(messages, fleet.resources.queueArns[lane], fleet.clients.region);
  const response = await handler(event, lambdaContext(options.remainingMs));
  const failedIds = new Set(response.batchItemFailures.map((failure) => failure.itemIdentifier));
  const acknowledged: string[] = [];
  for (const message of messages) {
    if (failedIds.has(message.MessageId ?? '')) continue;
    await fleet.clients.sqs.send(
      new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }),
    );
    acknowledged.push(message.MessageId ?? '');
  }
  return { messages, event, response, acknowledged, failed: [...failedIds] };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
