/**
 * Announce a terminal record at least once. The event goes out after the record is written; once
 * it has, the record notes it (`announcedAt`), so a redelivery stays silent. A publish that fails
 * hands the message back: its redelivery finds the record un-announced and publishes again.
 * Every publish of one record carries the same `eventId`, so subscribers drop the duplicates a
 * crash between the publish and the note can cause.
 */
import { MetricUnit } from '../adapters/metrics.js';
import { METRICS } from '../core/metric-names.js';
import type { TaskResult } from '../core/results.js';
import type { RecordContext } from './context.js';
import { describe, type RecordLog, redactorOf } from './delivery.js';

/** Whether a terminal record's event may still be owed (no note that it went out). */
export function announcementPending(ctx: RecordContext, record: TaskResult): boolean {
  return ctx.deps.events !== undefined && record.announcedAt === undefined;
}

/**
 * Publish the record's completion event and note it. True when the event went out (or there is
 * no events port); false when it could not be published, the caller then hands the message back.
 */
export async function announce(ctx: RecordContext, log: RecordLog, result: TaskResult): Promise<boolean> {
  const { deps } = ctx;
  const events = deps.events;
  if (events === undefined) return true;
  // The answer goes to the port, which decides whether events carry it (`eventsIncludeAnswer`);
  // the error text is redacted once more on its way out.
  const { claimToken: _claimToken, leaseUntil: _leaseUntil, completedBy: _completedBy, ...published } = result;
  const redactor = redactorOf(ctx);
  const clean: TaskResult = {
    ...published,
    ...(published.errorCode !== undefined ? { errorCode: redactor.redact(published.errorCode) } : {}),
    ...(published.errorMessage !== undefined ? { errorMessage: redactor.redact(published.errorMessage) } : {}),
  };
  try {
    await events.publish(clean);
  } catch (error) {
    deps.metrics.addMetric(METRICS.eventPublishFailures, MetricUnit.Count, 1);
    log.warn('completion event could not be published; the message goes back so a redelivery publishes it', {
      error: describe(error),
    });
    return false;
  }
  try {
    await deps.repository.markAnnounced(result.taskId, ctx.clock());
  } catch (error) {
    // The event went out; a later duplicate delivery may publish it again, with the same eventId.
    log.warn('completion event published but not noted on the record', { error: describe(error) });
  }
  return true;
}
