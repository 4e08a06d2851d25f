/**
 * Announce a terminal record at least once, and once where deliveries meet. The event goes out
 * after the record is written; once it has, the record notes it (`announcedAt`), so a redelivery
 * stays silent. The writer publishes at once; a delivery that finds another's record un-noted
 * leaves it the announce window (`announceWindowMs`), then takes the announcement with a
 * conditional write, so two copies of one task delivered together do not both publish. A publish
 * that fails hands the message back: its redelivery finds the record un-announced and publishes
 * again. Every publish of one record carries the same `eventId`, so subscribers drop the
 * duplicates a crash between the publish and the note can cause.
 */
import { announceResult } from '../adapters/completion-events.js';
import type { TaskResult } from '../core/results.js';
import type { RecordContext } from './context.js';
import { type Delivery, describe, type RecordLog, redactorOf } from './delivery.js';
import { type AckReason, type Outcome, retry, secondsUntil } from './outcome.js';

/** Whether a terminal record's event may still be owed (no note that it went out). */
function announcementPending(ctx: RecordContext, record: TaskResult): boolean {
  return ctx.deps.events !== undefined && record.announcedAt === undefined;
}

/**
 * Publish the record's completion event and note it: for the delivery that wrote the record.
 * True when the event went out (or there is no events port); false when it could not be
 * published, the caller then hands the message back.
 */
function announce(ctx: RecordContext, log: RecordLog, result: TaskResult): Promise<boolean> {
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

/**
 * The record this delivery wrote (or took the announcement of): announced (once noted, a
 * redelivery stays silent) and acknowledged as `why`; a failed publish hands the message back.
 */
export async function announceOwn(
  ctx: RecordContext,
  delivery: Delivery,
  log: RecordLog,
  record: TaskResult,
  why: AckReason,
): Promise<Outcome> {
  if (!announcementPending(ctx, record)) return { kind: 'ack', why };
  return (await announce(ctx, log, record)) ? { kind: 'ack', why } : retry(ctx, delivery, 'announce');
}

/**
 * A terminal record another delivery (or the watch) wrote, found by this one: acknowledged when
 * its event is noted; handed back while its writer, or a delivery that took its announcement,
 * may still be publishing (the redelivery then finds it noted); else this delivery takes the
 * announcement and publishes it. The acknowledgement, when there is one, is `why`.
 */
export async function announceFound(
  ctx: RecordContext,
  delivery: Delivery,
  log: RecordLog,
  record: TaskResult,
  why: AckReason,
): Promise<Outcome> {
  if (!announcementPending(ctx, record)) return { kind: 'ack', why };
  const now = ctx.clock();
  const windowMs = ctx.timing.announceWindowMs;
  const heldUntil = Math.max((record.completedAt ?? 0) + windowMs, record.announcingUntil ?? 0);
  const waitFor = (until: number): Outcome =>
    retry(ctx, delivery, 'announce', {
      delaySeconds: secondsUntil(until, now, 1),
      detail: 'another delivery may be publishing the completion event; this copy comes back to find it noted',
    });
  if (now < heldUntil) return waitFor(heldUntil);
  let taken: boolean;
  try {
    taken = await ctx.deps.repository.takeAnnouncement(record.taskId, now, now + windowMs);
  } catch (error) {
    return retry(ctx, delivery, 'store', { detail: describe(error) });
  }
  if (!taken) return waitFor(now + windowMs);
  return announceOwn(ctx, delivery, log, record, why);
}
