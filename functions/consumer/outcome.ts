/**
 * Outcomes as values. Every path of a record's handling ends in one of three values: `ack`
 * (done), `retry` (hand it back, why and after how long, maybe with something for the next
 * delivery to carry on with) or `dead_letter` (refused, with its reason). `settle` turns the
 * value into what SQS and the batch response see, in this one place: deletes, dead letters,
 * visibility changes, fresh copies near the DLQ, and the throw Powertools' batch processor reads
 * as a failed item. Powertools' idempotency handler decides from a status value the same way.
 */
import { isStoreError, type DeadLetter, type StoreName } from '../core/ports.js';
import { MetricUnit } from '../adapters/metrics.js';
import { METRICS } from '../core/metric-names.js';
import { type Carry, REDELIVERY_ATTRIBUTE, type Redelivery } from '../core/redelivery.js';
import { TASK_QUEUE_MESSAGE_LIMIT_BYTES } from '../core/task.js';
import { backoffSeconds, MAX_VISIBILITY_SECONDS, type RecordContext } from './context.js';
import { type Delivery, describe, passengerAttributes, type RecordLog } from './delivery.js';
import { retryWrite } from './durable-writes.js';

/** Why a record is handed back to the queue; the `Reason` dimension of the Retried metric. */
export type RetryReason =
  | 'over_cap'
  | 'transient'
  | 'timeout'
  | 'account'
  | 'lease_held'
  | 'claim_lost'
  | 'error'
  /** The results table or a queue failed (throttled, unavailable): the task waits. */
  | 'store'
  /** The completion event could not be published: the redelivery publishes it. */
  | 'announce'
  /** Another provider holds the task's submission; its lane finishes it. */
  | 'held_elsewhere'
  /** A dead holder's copy of the message may carry its paid submission: given one round to arrive. */
  | 'orphan_wait';

/** Why a record was acknowledged (for the log). */
export type AckReason = 'solved' | 'failed' | 'duplicate' | 'conflict' | 'rejected';

export type Outcome =
  | { kind: 'ack'; why: AckReason }
  | {
      kind: 'retry';
      reason: RetryReason;
      delaySeconds: number;
      /**
       * The task waits for something outside it (a store, the holding lane, another delivery's
       * lease): copies made for it do not count toward `maxGenerations`.
       */
      waiting: boolean;
      /** A submission (and maybe its answer) for the next delivery, sealed. */
      carry?: Carry;
      /** What failed, for the log (redacted there). */
      detail?: string;
      /** The solver's code, when a solver answer was the cause. */
      code?: string;
      /**
       * Handed back by the governor's probe (RecordContext.probe): a task that waits for threads
       * others hold, whose copy near the DLQ counts as no wait of its own, so probes refused for
       * hours never walk it to the DLQ.
       */
      probe?: true;
    }
  | { kind: 'dead_letter'; letter: DeadLetter }
  /**
   * The task is parked (the parked design): its submission's id is on the record, its thread
   * leased; the message is hidden for `delaySeconds` (its lease's end) and the governor makes it
   * visible again as soon as the answer is ready.
   */
  | { kind: 'park'; delaySeconds: number };

/** A record handed back to the queue on purpose; the batch processor reports it as failed. */
export class RetryLaterError extends Error {
  override readonly name = 'RetryLaterError';
  constructor(
    readonly reason: RetryReason,
    readonly taskId: string,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

/** A record left in flight on purpose because its task is parked; the batch processor reports it as failed. */
export class TaskParkedSignal extends Error {
  override readonly name = 'TaskParkedSignal';
  constructor(readonly taskId: string) {
    super(`task ${taskId} parked until its answer is ready`);
  }
}

/** Reasons that wait for something outside the task (see `Outcome.waiting`). */
const WAITING: ReadonlySet<RetryReason> = new Set(['store', 'announce', 'held_elsewhere', 'lease_held', 'orphan_wait']);

/** A retry outcome with its delay from the reason's backoff. */
export function retry(
  ctx: RecordContext,
  delivery: Delivery,
  reason: RetryReason,
  extra: { delaySeconds?: number; carry?: Carry; detail?: string; code?: string } = {},
): Outcome {
  const { timing } = ctx;
  const n = delivery.receiveCount;
  // The governor's probe refused: the task back at once, or kept hidden for its next probe (the
  // event's keep), no wait of its own counted (Outcome.probe).
  const probe = ctx.probe !== undefined && reason === 'over_cap';
  const delaySeconds = probe
    ? (ctx.probe?.keepSeconds ?? 0)
    : (extra.delaySeconds ??
      (reason === 'store' || reason === 'orphan_wait'
        ? backoffSeconds(n, timing.storeRetryBaseSeconds, timing.storeRetryMaxSeconds)
        : reason === 'account'
          ? backoffSeconds(n, timing.accountRetryBaseSeconds, timing.accountRetryMaxSeconds)
          : backoffSeconds(
              reason === 'transient' && overflowCanTake(ctx) ? 1 : n,
              timing.retryBaseSeconds,
              timing.retryMaxSeconds,
            )));
  return {
    kind: 'retry',
    reason,
    delaySeconds,
    waiting: WAITING.has(reason) || probe,
    ...(probe ? { probe: true as const } : {}),
    ...(extra.carry !== undefined ? { carry: extra.carry } : {}),
    ...(extra.detail !== undefined ? { detail: extra.detail } : {}),
    ...(extra.code !== undefined ? { code: extra.code } : {}),
  };
}

/**
 * A primary consumer whose fleet has an overflow provider: a task its solver could not take
 * (transient answers: the plan's outage) is handed back at the first step's delay, not a growing
 * one, since the overflow lane takes the work while the plan is down and a long invisibility
 * only hides the task from it. The governor pauses the primary's mappings within a few ticks, so
 * these receives stop; near the DLQ a fresh copy carries the task on as for any retry.
 */
function overflowCanTake(ctx: RecordContext): boolean {
  return (ctx.deps.provider ?? 'primary') === 'primary' && ctx.deps.settings.overflow !== undefined;
}

/** The outcome of a thrown value nobody expected: a store failure waits, anything else retries. */
export function unexpected(ctx: RecordContext, delivery: Delivery, error: unknown): Outcome {
  const store: StoreName | undefined = isStoreError(error) ? error.store : undefined;
  return retry(ctx, delivery, store !== undefined ? 'store' : 'error', {
    detail: `${store !== undefined ? `${store} ` : ''}${describe(error)}`,
  });
}

/** Settle an outcome: resolve to acknowledge, throw RetryLaterError to hand the record back. */
export async function settle(
  outcome: Outcome,
  delivery: Delivery,
  taskId: string,
  ctx: RecordContext,
  log: RecordLog,
): Promise<void> {
  if (outcome.kind === 'ack') return acknowledge(delivery, ctx, log, ctx.acknowledgeEach);
  if (outcome.kind === 'dead_letter') return settleLetter(outcome.letter, delivery, taskId, ctx, log);
  if (outcome.kind === 'park') return park(outcome.delaySeconds, delivery, taskId, ctx, log);
  countRetried(ctx, outcome.reason);
  if (await requeueInstead(outcome, delivery, ctx, log)) return;
  const level = outcome.reason === 'account' || outcome.reason === 'error' ? 'error' : 'warn';
  log[level]('task handed back to the queue', {
    reason: outcome.reason,
    code: outcome.code,
    detail: outcome.detail,
    retryInSeconds: outcome.delaySeconds,
  });
  await hide(delivery, outcome.delaySeconds, ctx, log);
  throw new RetryLaterError(
    outcome.reason,
    taskId,
    `task ${taskId} handed back (${outcome.reason}${outcome.code ? ` ${outcome.code}` : ''})`,
  );
}

/**
 * Leave a parked task's message in flight: hidden until its lease ends (if the hide fails, it
 * returns after the queue's own visibility timeout, or sooner when the governor shows it), and
 * reported as a failed item so the event source does not delete it.
 */
async function park(
  delaySeconds: number,
  delivery: Delivery,
  taskId: string,
  ctx: RecordContext,
  log: RecordLog,
): Promise<never> {
  ctx.deps.metrics.addMetric(METRICS.parked, MetricUnit.Count, 1);
  await hide(delivery, delaySeconds, ctx, log);
  throw new TaskParkedSignal(taskId);
}

/** Delete a finished message now (when asked), else leave it to the batch response. */
async function acknowledge(delivery: Delivery, ctx: RecordContext, log: RecordLog, now: boolean): Promise<void> {
  if (!now || delivery.moved) return;
  try {
    await ctx.deps.queue.acknowledge(delivery.message);
  } catch (error) {
    // The batch response still lists it as done: the event source deletes it.
    log.warn('finished message not deleted at once; the batch response acknowledges it', { error: describe(error) });
  }
}

/**
 * Send a refused message's letter, then delete the message. A message that comes back after an
 * earlier delivery sent its letter but could not delete it (SQS failing longer than the retries)
 * finds that delivery's note and is only deleted: one letter per message. What SQS still cannot
 * prevent: a second letter after a send whose answer was lost, or a crash between the letter and
 * the delete (no idempotency key, no transaction); every letter names its source message.
 */
async function settleLetter(
  letter: DeadLetter,
  delivery: Delivery,
  taskId: string,
  ctx: RecordContext,
  log: RecordLog,
): Promise<void> {
  // A copy already stands in for this message (made near the DLQ): its delivery writes the letter.
  if (delivery.moved) return;
  const source = delivery.record.messageId;
  // Only a redelivery can have an earlier letter (a refused message is never copied).
  if (delivery.receiveCount > 1 && (await letterNoted(source, ctx, log))) {
    log.info('message already dead-lettered by an earlier delivery; deleted without a second letter');
    await deleteLettered(delivery, ctx, log);
    return;
  }
  try {
    await ctx.deps.queue.deadLetter({ ...letter, sourceMessageId: source });
  } catch (error) {
    return settle(unexpected(ctx, delivery, error), delivery, taskId, ctx, log);
  }
  ctx.deps.metrics.addMetric(METRICS.rejected, MetricUnit.Count, 1);
  log.warn('message refused to the DLQ', { reason: letter.reason, reasonDetail: letter.reasonDetail });
  if (await deleteLettered(delivery, ctx, log)) return;
  try {
    await ctx.deps.repository.noteLetter(source, ctx.clock());
  } catch (error) {
    log.warn('letter not noted; if the message comes back it is dead-lettered again', { error: describe(error) });
  }
}

/** Whether an earlier delivery noted this message's letter; unknown (a failed read) is no: the letter goes out. */
async function letterNoted(source: string, ctx: RecordContext, log: RecordLog): Promise<boolean> {
  try {
    return await ctx.deps.repository.letterNoted(source);
  } catch (error) {
    log.warn('letter note not read; the letter is sent', { error: describe(error) });
    return false;
  }
}

/**
 * Delete a message whose letter is in the DLQ, at once and retried while SQS throttles or fails
 * (for as long as the invocation keeps to record an outcome, `recordMarginMs`, within its end): a
 * message that came back (a batch-mate's crash, or a delete that failed, the event source's
 * included) would be dead-lettered a second time. False when it still failed: the batch response
 * asks the event source to delete it, and the caller notes the letter in case that fails too.
 */
async function deleteLettered(delivery: Delivery, ctx: RecordContext, log: RecordLog): Promise<boolean> {
  if (delivery.moved) return true;
  try {
    await retryWrite(() => ctx.deps.queue.acknowledge(delivery.message), {
      until: Math.min(ctx.stopAt - ctx.timing.requeueReserveMs, ctx.clock() + ctx.timing.recordMarginMs),
      clock: ctx.clock,
      timing: ctx.timing.writeRetry,
    });
    return true;
  } catch (error) {
    log.warn('dead-lettered message not deleted; the batch response acknowledges it', { error: describe(error) });
    return false;
  }
}

/**
 * Delay a message's next delivery; if that fails it returns after the queue's own visibility
 * timeout: later, not lost. A message already replaced by a fresh copy (`moved`: near the DLQ, or
 * carrying a submission's id the table was slow to take) is gone: nothing to hide.
 */
export async function hide(delivery: Delivery, seconds: number, ctx: RecordContext, log: RecordLog): Promise<void> {
  if (delivery.moved) return;
  const visibility = Math.min(MAX_VISIBILITY_SECONDS, Math.max(0, Math.ceil(seconds)));
  try {
    await ctx.deps.queue.changeVisibility(delivery.message, visibility);
  } catch (error) {
    log.warn('visibility could not be changed', { visibility, error: describe(error) });
  }
}

function countRetried(ctx: RecordContext, reason: RetryReason): void {
  // A metric with its own dimension goes out as a single metric, so the invocation's other
  // metrics keep their plain `service` dimension.
  const single = ctx.deps.metrics.singleMetric();
  single.addDimension('Reason', reason);
  single.addMetric(METRICS.retried, MetricUnit.Count, 1);
}

/**
 * Near the DLQ, or with something to carry, the record goes back as a fresh copy of its message
 * (receive count from zero) rather than as the same message: a store's bad minute then never
 * burns a valid task to the DLQ, and an answer read but not recorded travels to the next
 * delivery. A message that fails delivery after delivery for no outside reason is copied at most
 * `maxGenerations` times, then left to SQS's redrive.
 */
async function requeueInstead(
  outcome: Extract<Outcome, { kind: 'retry' }>,
  delivery: Delivery,
  ctx: RecordContext,
  log: RecordLog,
): Promise<boolean> {
  const policy = ctx.timing.requeue;
  const nearDlq = delivery.receiveCount >= ctx.deps.settings.maxReceiveCount - policy.beforeReceives;
  const generation = delivery.redelivery?.generation ?? 0;
  const waiting =
    outcome.waiting && (outcome.probe === true || (delivery.redelivery?.waits ?? 0) < policy.maxWaitCopies);
  const allowed = waiting || generation < policy.maxGenerations;
  // A carry always travels (even beside an earlier copy: that one may lack it); else near the DLQ only.
  if (outcome.carry === undefined && (delivery.moved || !nearDlq || !allowed)) return false;
  const sent = await sendCopy(delivery, ctx, log, {
    // A probe's copy is visible at once: its keep was for the message the governor would carry again.
    delaySeconds: outcome.probe === true ? 0 : outcome.delaySeconds,
    failing: !waiting,
    counted: outcome.probe !== true,
    ...(outcome.carry !== undefined ? { carry: outcome.carry } : {}),
    why: outcome.reason,
  });
  return sent;
}

/**
 * Put a fresh copy of the delivery's message in its queue in its place (SendMessage, then
 * DeleteMessage of the original). The copy keeps the task's identity (the id it was claimed
 * under, first send and receive times) and, when given, carries a sealed submission. A copy that
 * carries one (a paid id, an answer read) is the only place it is kept when the table will not
 * take it: its send is retried while SQS is throttled or unavailable, up to the invocation's end.
 * False when the copy could not be sent (the message is then left as it is).
 */
export async function sendCopy(
  delivery: Delivery,
  ctx: RecordContext,
  log: RecordLog,
  options: { delaySeconds: number; failing: boolean; carry?: Carry; why: string; counted?: boolean },
): Promise<boolean> {
  const previous = delivery.redelivery;
  const carry = options.carry ?? previous?.carry;
  const redelivery: Redelivery = {
    v: 1,
    taskId: delivery.taskId,
    sentAt: delivery.sentAt,
    firstReceivedAt: delivery.firstReceivedAt,
    generation: (previous?.generation ?? 0) + (options.failing ? 1 : 0),
    // A probe's copy (`counted` false) is no wait of the task's own.
    waits: (previous?.waits ?? 0) + (options.failing || options.counted === false ? 0 : 1),
    // A carry travels on from copy to copy until a delivery records it (a newer one replaces it).
    ...(carry !== undefined ? { carry } : {}),
  };
  const value = JSON.stringify(redelivery);
  const attributes = {
    ...fittingPassengers(delivery, value),
    [REDELIVERY_ATTRIBUTE]: { dataType: 'String', stringValue: value },
  };
  const send = () =>
    ctx.deps.queue.requeue(delivery.message, {
      body: delivery.record.body,
      attributes,
      delaySeconds: Math.min(900, Math.max(0, Math.ceil(options.delaySeconds))),
    });
  try {
    const { deleted } =
      carry === undefined
        ? await send()
        : await retryWrite(send, {
            until: ctx.stopAt - ctx.timing.requeueReserveMs / 2,
            clock: ctx.clock,
            timing: ctx.timing.writeRetry,
          });
    delivery.moved = true;
    ctx.deps.metrics.addMetric(METRICS.requeued, MetricUnit.Count, 1);
    log.info('message put back as a fresh copy', {
      why: options.why,
      generation: redelivery.generation,
      carries: carry === undefined ? 'nothing' : carry.answer !== undefined ? 'answer' : 'solver id',
      delaySeconds: options.delaySeconds,
      originalDeleted: deleted,
    });
    return true;
  } catch (error) {
    log.warn('fresh copy of the message could not be sent; it stays as it is', { error: describe(error) });
    return false;
  }
}

/** The message's own attributes, as many as fit beside the fleet's (SQS: ten, and the lane's size limit). */
function fittingPassengers(delivery: Delivery, fleetValue: string): ReturnType<typeof passengerAttributes> {
  const passengers = Object.entries(passengerAttributes(delivery)).slice(0, 9);
  let bytes =
    Buffer.byteLength(delivery.record.body) +
    Buffer.byteLength(REDELIVERY_ATTRIBUTE) +
    Buffer.byteLength('String') +
    Buffer.byteLength(fleetValue);
  const kept: ReturnType<typeof passengerAttributes> = {};
  for (const [name, attribute] of passengers) {
    const size =
      Buffer.byteLength(name) +
      Buffer.byteLength(attribute.dataType) +
      Buffer.byteLength(attribute.stringValue ?? '') +
      Math.ceil(((attribute.binaryValue ?? '').length * 3) / 4);
    if (bytes + size > TASK_QUEUE_MESSAGE_LIMIT_BYTES) continue;
    bytes += size;
    kept[name] = attribute;
  }
  return kept;
}

/**
 * A delivery of a valid task that comes this close to the DLQ copies its message before anything
 * else, its claim included: the ones before it ended without an outcome (crashed, timed out), so
 * this one might too, at any point, and SQS's redrive would then take a task that may be paid
 * for. The copy comes back after a claim's lease; if this delivery finishes the task, the copy is
 * acknowledged as a duplicate (and a refusal leaves its letter to the copy's delivery).
 */
export async function refreshNearDlq(delivery: Delivery, ctx: RecordContext, log: RecordLog): Promise<void> {
  const policy = ctx.timing.requeue;
  if (delivery.receiveCount < ctx.deps.settings.maxReceiveCount - policy.refreshBeforeReceives) return;
  if ((delivery.redelivery?.generation ?? 0) >= policy.maxGenerations) return;
  await sendCopy(delivery, ctx, log, {
    delaySeconds: Math.ceil(ctx.timing.leaseMs / 1000),
    failing: true,
    why: 'near_dlq',
  });
}

/** Seconds until `until`, at least `floor`. */
export function secondsUntil(until: number, now: number, floor = 0): number {
  return Math.max(floor, Math.ceil((until - now) / 1000));
}

/** Re-exported for the handler's callers. */
export { backoffSeconds } from './context.js';
