/**
 * Create the fleet's queues and tables on any AWS-compatible endpoint, from the same settings
 * the CDK stack uses (one source of names, timeouts and redrive policy).
 */
import { CreateQueueCommand, GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import {
  CreateTableCommand,
  DescribeTableCommand,
  UpdateTimeToLiveCommand,
  ResourceInUseException,
} from '@aws-sdk/client-dynamodb';
import type { AwsClients } from '../functions/adapters/aws-clients.js';
import type { FleetSettings } from '../functions/core/settings.js';
import { SQS_MESSAGE_LIMIT_BYTES, TASK_QUEUE_MESSAGE_LIMIT_BYTES } from '../functions/core/task.js';

export interface FleetResources {
  queueUrls: { normal: string; high: string; dlq: string };
  queueArns: { normal: string; high: string; dlq: string };
  tables: { results: string; governor: string; leases: string };
  /** The reports queue (producers' bad / good reports) and its own DLQ. */
  reportQueueUrls: { reports: string; dlq: string };
  reportQueueArns: { reports: string; dlq: string };
}

/** The reports queue's receives before its DLQ, and its visibility timeout, seconds (lib/report-queue.ts alike). */
export const REPORT_QUEUE_MAX_RECEIVES = 5;
export const REPORT_QUEUE_VISIBILITY_SECONDS = 180;

/** Idempotent: existing resources are reused. */
export async function ensureFleetResources(
  clients: AwsClients,
  settings: FleetSettings,
  options: { reportVisibilitySeconds?: number } = {},
): Promise<FleetResources> {
  const dlq = await ensureQueue(clients, settings.queueNames.dlq, {
    MessageRetentionPeriod: String(14 * 86_400),
    MaximumMessageSize: String(SQS_MESSAGE_LIMIT_BYTES),
  });
  const redrive = JSON.stringify({ deadLetterTargetArn: dlq.arn, maxReceiveCount: settings.maxReceiveCount });
  const queueAttributes = {
    VisibilityTimeout: String(settings.visibilityTimeoutSeconds),
    MessageRetentionPeriod: String(14 * 86_400),
    // As in the stack (lib/task-queues.ts): room kept for the DLQ's reason attributes.
    MaximumMessageSize: String(TASK_QUEUE_MESSAGE_LIMIT_BYTES),
    RedrivePolicy: redrive,
  };
  const normal = await ensureQueue(clients, settings.queueNames.normal, queueAttributes);
  const high = await ensureQueue(clients, settings.queueNames.high, queueAttributes);
  const reportsDlq = await ensureQueue(clients, settings.queueNames.reportsDlq, {
    MessageRetentionPeriod: String(14 * 86_400),
  });
  const reports = await ensureQueue(clients, settings.queueNames.reports, {
    MessageRetentionPeriod: String(14 * 86_400),
    VisibilityTimeout: String(options.reportVisibilitySeconds ?? REPORT_QUEUE_VISIBILITY_SECONDS),
    RedrivePolicy: JSON.stringify({ deadLetterTargetArn: reportsDlq.arn, maxReceiveCount: REPORT_QUEUE_MAX_RECEIVES }),
  });
  await ensureTable(clients, settings.tableNames.results, 'taskId');
  await ensureTable(clients, settings.tableNames.governor, 'id');
  await ensureTable(clients, settings.tableNames.leases, 'shard', 'slot');
  try {
    await clients.dynamo.send(
      new UpdateTimeToLiveCommand({
        TableName: settings.tableNames.results,
        TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
      }),
    );
  } catch {
    // dynalite has no TTL; records then live until the emulator stops, which is fine locally.
  }
  return {
    queueUrls: { normal: normal.url, high: high.url, dlq: dlq.url },
    queueArns: { normal: normal.arn, high: high.arn, dlq: dlq.arn },
    tables: {
      results: settings.tableNames.results,
      governor: settings.tableNames.governor,
      leases: settings.tableNames.leases,
    },
    reportQueueUrls: { reports: reports.url, dlq: reportsDlq.url },
    reportQueueArns: { reports: reports.arn, dlq: reportsDlq.arn },
  };
}

async function ensureQueue(clients: AwsClients, name: string, attributes: Record<string, string>) {
  let url: string | undefined;
  try {
    url = (await clients.sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl;
  } catch {
    url = undefined;
  }
  url ??= (await clients.sqs.send(new CreateQueueCommand({ QueueName: name, Attributes: attributes }))).QueueUrl;
  if (!url) throw new Error(`could not create queue ${name}`);
  const described = await clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }),
  );
  const arn = described.Attributes?.QueueArn;
  if (!arn) throw new Error(`queue ${name} has no ARN`);
  return { url, arn };
}

/** A table keyed by `key` (string), and `sortKey` (number) when given. */
async function ensureTable(clients: AwsClients, name: string, key: string, sortKey?: string) {
  try {
    await clients.dynamo.send(
      new CreateTableCommand({
        TableName: name,
        KeySchema: [
          { AttributeName: key, KeyType: 'HASH' },
          ...(sortKey ? [{ AttributeName: sortKey, KeyType: 'RANGE' as const }] : []),
        ],
        AttributeDefinitions: [
          { AttributeName: key, AttributeType: 'S' },
          ...(sortKey ? [{ AttributeName: sortKey, AttributeType: 'N' as const }] : []),
        ],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
  } catch (error) {
    if (!(error instanceof ResourceInUseException)) throw error;
  }
  for (let i = 0; i < 50; i++) {
    const table = await clients.dynamo.send(new DescribeTableCommand({ TableName: name }));
    if (table.Table?.TableStatus === 'ACTIVE') return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`table ${name} did not become ACTIVE`);
}
