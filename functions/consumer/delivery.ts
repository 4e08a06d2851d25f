/**
 * One delivery of one SQS record: what the message says about itself (its receive count, the
 * fleet's redelivery attribute when it is a fresh copy, the id and times of the task it carries)
 * and the log every line of its handling goes through, redacted.
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import { queueNameOf } from '../adapters/task-queue.js';
import type { DeliveredMessage, MessageAttribute } from '../core/ports.js';
import { createRedactor, type Redactor } from '../core/redaction.js';
import { parseRedelivery, REDELIVERY_ATTRIBUTE, type Redelivery } from '../core/redelivery.js';
import type { RecordContext } from './context.js';

/** The facts of one delivery, read once. */
export interface Delivery {
  record: SQSRecord;
  message: DeliveredMessage;
  receiveCount: number;
  /** The fleet's attribute on a fresh copy of an earlier message (untrusted until its carry is verified). */
  redelivery: Redelivery | undefined;
  /** The id a task without one is claimed under: the first message's id, kept across copies. */
  fallbackId: string;
  /** The task's id once the body is read (its own id, else `fallbackId`). */
  taskId: string;
  /** The first message's SentTimestamp, epoch ms. */
  sentAt: number;
  /** The earliest receive of this task's message (any copy), epoch ms. */
  firstReceivedAt: number;
  sourceQueue: string;
  /** Set once this delivery has put a fresh copy in its message's place (the message is gone). */
  moved: boolean;
}

/** Read a record's delivery facts. */
export function deliveryOf(record: SQSRecord, now: number): Delivery {
  const redelivery = parseRedelivery(record.messageAttributes?.[REDELIVERY_ATTRIBUTE]?.stringValue);
  const sent = Number(record.attributes.SentTimestamp) || now;
  const firstReceived = Number(record.attributes.ApproximateFirstReceiveTimestamp);
  const received = Number.isFinite(firstReceived) && firstReceived > 0 ? firstReceived : now;
  return {
    record,
    message: {
      eventSourceArn: record.eventSourceARN,
      receiptHandle: record.receiptHandle,
      messageId: record.messageId,
    },
    receiveCount: Number(record.attributes.ApproximateReceiveCount) || 1,
    redelivery,
    fallbackId: redelivery?.taskId ?? record.messageId,
    taskId: redelivery?.taskId ?? record.messageId,
    sentAt: redelivery?.sentAt ?? sent,
    firstReceivedAt: Math.min(received, redelivery?.firstReceivedAt ?? received),
    sourceQueue: queueNameOf(record.eventSourceARN),
    moved: false,
  };
}

/** The message's attributes as they are to travel on a copy: every one but the fleet's own. */
export function passengerAttributes(delivery: Delivery): Record<string, MessageAttribute> {
  const out: Record<string, MessageAttribute> = {};
  for (const [name, value] of Object.entries(delivery.record.messageAttributes ?? {})) {
    if (name === REDELIVERY_ATTRIBUTE) continue;
    out[name] = {
      dataType: value.dataType,
      ...(value.stringValue !== undefined ? { stringValue: value.stringValue } : {}),
      ...(value.binaryValue !== undefined ? { binaryValue: value.binaryValue } : {}),
    };
  }
  return out;
}

type Attributes = Record<string, unknown>;

/** A record's log: the Powertools child with its keys, every message and attribute redacted first. */
export interface RecordLog {
  debug(message: string, attributes?: Attributes): void;
  info(message: string, attributes?: Attributes): void;
  warn(message: string, attributes?: Attributes): void;
  error(message: string, attributes?: Attributes): void;
}

const NO_SECRETS = createRedactor();

/** The redactor of the consumer's dependencies, or one that masks only the query form. */
export function redactorOf(ctx: RecordContext): Redactor {
  return ctx.deps.redactor ?? NO_SECRETS;
}

/** The log of one record, with `keys` on every line. */
export function recordLog(ctx: RecordContext, keys: Attributes): RecordLog {
  const child: Logger = ctx.deps.logger.createChild({ persistentKeys: { ...keys, requestId: ctx.requestId } });
  const redactor = redactorOf(ctx);
  const line =
    (write: (message: string, attributes: Attributes) => void) =>
    (message: string, attributes: Attributes = {}) =>
      write(redactor.redact(message), redactor.redactValue(attributes));
  return {
    debug: line((m, a) => child.debug(m, a)),
    info: line((m, a) => child.info(m, a)),
    warn: line((m, a) => child.warn(m, a)),
    error: line((m, a) => child.error(m, a)),
  };
}

/** Name and message of a thrown value, for a (redacted) log attribute. */
export function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
