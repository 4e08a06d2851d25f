/**
 * A message the schema refuses: a `rejected` record when its id can be read, its announcement,
 * then the DLQ with its reason. Returns the outcome; `settle` sends the dead letter.
 */
import { randomUUID } from 'node:crypto';
import type { TaskRejection } from '../core/task.js';
import { announceFound, announceOwn } from './announce.js';
import type { RecordContext } from './context.js';
import type { Delivery, RecordLog } from './delivery.js';
import type { Outcome } from './outcome.js';

/** The refused message's outcome. The record and the event come first: both are idempotent. */
export async function rejectRecord(
  delivery: Delivery,
  rejection: TaskRejection,
  ctx: RecordContext,
  log: RecordLog,
): Promise<Outcome> {
  const { deps, clock } = ctx;
  const { record } = delivery;
  if (rejection.id !== undefined) {
    const method = readMethod(record.body);
    const rejected = {
      errorCode: rejection.code,
      errorMessage: rejection.reason,
      ...(method !== undefined ? { method } : {}),
      completedAt: clock(),
    };
    const writer = `${record.messageId}:${delivery.receiveCount}:${randomUUID()}`;
    const found = await deps.repository.reject(rejection.id, rejected, writer);
    // Announced when this delivery wrote the record, or when a rejection of this id was recorded
    // but never announced (an earlier delivery's publish failed, or it is publishing now: then
    // this copy waits for its note); a valid task's record is left to that task. Before the DLQ
    // send, so a failing send (retried) cannot cost the event.
    const announced =
      found.outcome === 'written'
        ? await announceOwn(ctx, delivery, log, found.record, 'rejected')
        : found.record.status === 'rejected'
          ? await announceFound(ctx, delivery, log, found.record, 'rejected')
          : undefined;
    if (announced !== undefined && announced.kind !== 'ack') return announced;
  }
  return {
    kind: 'dead_letter',
    letter: {
      body: record.body,
      reason: rejection.code,
      reasonDetail: rejection.reason,
      ...(rejection.id !== undefined ? { taskId: rejection.id } : {}),
      sourceQueue: delivery.sourceQueue,
    },
  };
}

function readMethod(body: string): string | undefined {
  const match = /"method"\s*:\s*"([A-Za-z0-9_-]{1,40})"/.exec(body.slice(0, 4096));
  return match?.[1];
}
