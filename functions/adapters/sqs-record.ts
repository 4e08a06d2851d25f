/**
 * An SQS message as Lambda's SQS event source hands it to a function (`SQSRecord`), and what a
 * function's partial batch response says about it: the local runtime's stand-in for the mapping
 * (local/poller.ts) and the governor's probe, which receives a waiting task and invokes the
 * consumer with it (functions/governor/probe-carrier.ts), build and read them the same way.
 */
import { createHash } from 'node:crypto';
import type { Message, MessageAttributeValue } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent, SQSMessageAttributes, SQSRecord } from 'aws-lambda';

/** Where a record came from: its queue's ARN and region, and the time for attributes SQS left out. */
export interface RecordSource {
  queueArn: string;
  region: string;
  now: number;
}

/** The message as Lambda's record: its attributes in Lambda's shape, the body's MD5 when SQS sent none. */
export function lambdaRecordOf(message: Message, source: RecordSource): SQSRecord {
  const attributes = message.Attributes ?? {};
  const body = message.Body ?? '';
  const record: SQSRecord = {
    messageId: message.MessageId ?? '',
    receiptHandle: message.ReceiptHandle ?? '',
    body,
    attributes: {
      ApproximateReceiveCount: attributes.ApproximateReceiveCount ?? '1',
      SentTimestamp: attributes.SentTimestamp ?? String(source.now),
      SenderId: attributes.SenderId ?? 'AIDALOCALSENDER',
      ApproximateFirstReceiveTimestamp: attributes.ApproximateFirstReceiveTimestamp ?? String(source.now),
      ...optional('AWSTraceHeader', attributes.AWSTraceHeader),
      ...optional('SequenceNumber', attributes.SequenceNumber),
      ...optional('MessageGroupId', attributes.MessageGroupId),
      ...optional('MessageDeduplicationId', attributes.MessageDeduplicationId),
      ...optional('DeadLetterQueueSourceArn', attributes.DeadLetterQueueSourceArn),
    },
    messageAttributes: toLambdaAttributes(message.MessageAttributes),
    md5OfBody: message.MD5OfBody ?? createHash('md5').update(body, 'utf8').digest('hex'),
    eventSource: 'aws:sqs',
    eventSourceARN: source.queueArn,
    awsRegion: source.region,
  };
  if (message.MD5OfMessageAttributes !== undefined) record.md5OfMessageAttributes = message.MD5OfMessageAttributes;
  return record;
}

/**
 * The records a handler's answer lists as failed (Lambda leaves them in the queue and deletes the
 * rest), or undefined when the answer is malformed (Lambda then deletes nothing): no answer, or
 * one without `batchItemFailures`, lists none; an entry that names no record of the event is malformed.
 */
export function readFailures(value: unknown, event: SQSEvent): Set<string> | undefined {
  if (value === undefined || value === null) return new Set();
  if (typeof value !== 'object') return undefined;
  const failures = (value as Partial<SQSBatchResponse>).batchItemFailures;
  if (failures === undefined || failures === null) return new Set();
  if (!Array.isArray(failures)) return undefined;
  const ids = new Set(event.Records.map((record) => record.messageId));
  const failed = new Set<string>();
  for (const failure of failures) {
    const id = (failure as { itemIdentifier?: unknown } | null)?.itemIdentifier;
    if (typeof id !== 'string' || id === '' || !ids.has(id)) return undefined;
    failed.add(id);
  }
  return failed;
}

/** SQS's attribute shape → Lambda's (camelCase; binary as base64; list fields present). */
function toLambdaAttributes(attributes: Record<string, MessageAttributeValue> | undefined): SQSMessageAttributes {
  const out: SQSMessageAttributes = {};
  for (const [name, value] of Object.entries(attributes ?? {})) {
    out[name] = {
      dataType: value.DataType ?? 'String',
      stringListValues: value.StringListValues ?? [],
      binaryListValues: (value.BinaryListValues ?? []).map((item) => Buffer.from(item).toString('base64')),
      ...(value.StringValue !== undefined ? { stringValue: value.StringValue } : {}),
      ...(value.BinaryValue !== undefined ? { binaryValue: Buffer.from(value.BinaryValue).toString('base64') } : {}),
    };
  }
  return out;
}

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}
