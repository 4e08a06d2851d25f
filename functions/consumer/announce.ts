/**
 * Announce a terminal record at least once. The event goes out after the record is written; once
 * it has, the record notes it (`announcedAt`), so a redelivery stays silent. A publish that fails
 * hands the message back: its redelivery finds the record un-announced and publishes again.
 * Every publish of one record carries the same `eventId`, so subscribers drop the duplicates a
 * crash between the publish and the note can cause.
 */
import { announceResult } from '../adapters/completion-events.js';
import type { TaskResult } from '../core/results.js';
import type { RecordContext } from './context.js';
import { type RecordLog, redactorOf } from './delivery.js';

/** Whether a terminal record's event may still be owed (no note that it went out). */
export function announcementPending(ctx: RecordContext, record: TaskResult): boolean {
  return ctx.deps.events !== undefined && record.announcedAt === undefined;
}

/**
 * Publish the record's completion event and note it. True when the event went out (or there is
 * no events port); false when it could not be published, the caller then hands the message back.
 */
export function announce(ctx: RecordContext, log: RecordLog, result: TaskResult): Promise<boolean> {
  const { deps } = ctx;
  return announceResult(
    {
      events: deps.events,
      repository: deps.repository,
      metrics: deps.metrics,
      redactor: redactorOf(ctx),
      clock: ctx.clock,
      log,
    },
    result,
  );
}
