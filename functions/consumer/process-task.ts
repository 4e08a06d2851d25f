/**
 * One SQS record, start to finish: parse → claim → solve → record → announce, ending in an
 * outcome value (outcome.ts) that `settle` turns into the batch response: resolving
 * acknowledges the record, throwing RetryLaterError has SQS deliver it again (Powertools batch
 * turns the throw into a `batchItemFailures` entry). Every path ends in a terminal record, the
 * DLQ, or a retry.
 */
import type { SQSRecord } from 'aws-lambda';
import { parseTask } from '../core/task.js';
import type { RecordContext } from './context.js';
import { type Delivery, deliveryOf, recordLog } from './delivery.js';
import { type Outcome, settle, unexpected } from './outcome.js';
import { rejectRecord } from './rejection.js';
import { TaskRun } from './task-run.js';

export {
  backoffSeconds,
  type ConsumerDeps,
  type ConsumerTiming,
  type RecordContext,
  type RequeuePolicy,
  refusalGate,
  resolveTiming,
} from './context.js';
export { type Outcome, RetryLaterError, type RetryReason } from './outcome.js';
export { ANSWER_TOO_LARGE, ClaimLostError } from './task-run.js';

/** A record as read once per invocation: its delivery and its body parsed against the schema. */
export interface RecordRead {
  delivery: Delivery;
  parsed: ReturnType<typeof parseTask>;
}

/** Read a record: its delivery, and its body parsed (what `processRecord` works from). */
export function readRecord(record: SQSRecord, now: number): RecordRead {
  const delivery = deliveryOf(record, now);
  return { delivery, parsed: parseTask(record.body, delivery.fallbackId, delivery.sentAt) };
}

/**
 * Handle one record. Resolves to acknowledge; throws RetryLaterError to have SQS deliver it again.
 * @param read the record as the handler already read it (the refusals gate parses every body
 *   first, and a body of up to 1 MiB is not parsed twice); read here when absent
 */
export async function processRecord(record: SQSRecord, ctx: RecordContext, read?: RecordRead): Promise<void> {
  const { delivery, parsed } = read ?? readRecord(record, ctx.clock());
  const taskId = parsed.ok ? parsed.task.id : (parsed.rejection.id ?? record.messageId);
  const log = recordLog(ctx, {
    taskId,
    messageId: record.messageId,
    receiveCount: delivery.receiveCount,
    ...(parsed.ok ? { method: parsed.task.method } : {}),
  });
  delivery.taskId = taskId;
  if (parsed.ok) await ctx.refusalsFirst?.settled;
  let outcome: Outcome;
  try {
    outcome = parsed.ok
      ? await new TaskRun(delivery, parsed.task, ctx, log).run()
      : await rejectRecord(delivery, parsed.rejection, ctx, log);
  } catch (error) {
    // Unexpected (the table or a queue unreachable at a step with no plan of its own): retry
    // after a backoff rather than after the queue's long visibility timeout.
    outcome = unexpected(ctx, delivery, error);
  }
  try {
    await settle(outcome, delivery, taskId, ctx, log);
  } finally {
    if (!parsed.ok) ctx.refusalsFirst?.done();
  }
}
