/**
 * The verdict of a demo run and its exit code: 0 only when the summary's rows add up to the
 * tasks sent, each with a terminal record or a DLQ message, and no invariant broke.
 */
import { withinProtocolBounds } from '../../../local/demo/bounds.js';
import type { DemoSummary } from '../../../local/demo.js';
import {
  MAX_DEFAULT_DURATION_S,
  PAUSED_TICKS_BEFORE_STOP,
  runLimits,
  type StartOptions,
  WORK_ALLOWANCE,
} from './options.js';

/** The summary's partition of the tasks sent (each in exactly one row) adds up to them. */
export function rowsOf(s: DemoSummary): number {
  return s.solved + s.failed + s.rejected + s.inDlq + s.unknown + s.stillQueued + s.lost;
}

/** Exit 0 only when the rows add up to the tasks sent, each with a terminal record or a DLQ message. */
export function verdictOf(
  s: DemoSummary,
  options: StartOptions,
  maxDurationMs = runLimits(options).maxDurationMs,
): { code: number; message: string } {
  const rows = rowsOf(s);
  if (s.overflow && !s.overflow.withinCaps)
    return {
      code: 1,
      message: `OVER THE CAP: the overflow provider charged $${s.overflow.provider.spentUsd.toFixed(4)}, more than its caps ($${s.overflow.capUsdPerHour}/hour, $${s.overflow.capUsdPerDay}/day) allow over this run.`,
    };
  const broken = invariantsBroken(s);
  if (broken.length > 0) return { code: 1, message: `INVARIANT BROKEN: ${broken.join('; ')}.` };
  if (s.complete && rows === s.submitted && s.announcementsOwed === 0) {
    // A task paid twice or a second DLQ copy the protocols allow is said, not hidden under a plain OK.
    const bounded = withinProtocolBounds(s);
    const ok = bounded.length > 0 ? `OK within the protocols' bound (${bounded.join('; ')})` : 'OK';
    return {
      code: 0,
      message: `${ok}: ${s.submitted === 1 ? 'the 1 task' : `all ${s.submitted} tasks`} reached a result: ${s.solved} solved, ${s.failed} failed, ${s.rejected} rejected, ${s.inDlq} in the DLQ (${s.dlqWithRejectedRecord} of them with a rejected record).`,
    };
  }
  const why: string[] = [];
  if (rows !== s.submitted) why.push(`the summary's rows add up to ${rows}, not the ${s.submitted} task(s) sent`);
  if (s.unknown > 0) why.push(`${s.unknown} task(s) with a record that has no known status (not counted as finished)`);
  if (s.lost > 0) why.push(`${s.lost} task(s) LOST: no record, not in the DLQ, not queued`);
  if (s.stillQueued > 0)
    why.push(`${s.stillQueued} task(s) still queued when the run ended ${endedWhy(s, options, maxDurationMs)}`);
  if (s.announcementsOwed > 0)
    why.push(
      `${s.announcementsOwed} solved task(s) whose completion event is still owed (their records are not noted announced; the next delivery of each one's message publishes it)`,
    );
  if (s.unsent > 0) why.push(`${s.unsent} task(s) could not be sent (SQS refused them after retries)`);
  else if (s.submitted < options.tasks)
    why.push(`only ${s.submitted} of ${options.tasks} task(s) were sent before the run ended`);
  return { code: 1, message: `NOT COMPLETE: ${why.join('; ')}.` };
}

/**
 * What a run must never show, faults or not: a task paid twice, a valid task dead-lettered, a solve
 * unannounced, a second DLQ copy. Two of them the protocols allow at one moment each, and those
 * are not counted against the run: a submission accepted while its invocation crashed, or whose
 * answer (CapSolver's image, answered in its own response) an outage held past its request (its
 * id lost: no idempotency key at the solver) and a letter whose SendMessage committed while its
 * answer was lost, or whose source's delete a crash cut off (none at SQS). The summary's rows show
 * both counts.
 */
function invariantsBroken(s: DemoSummary): string[] {
  const broken: string[] = [];
  if (s.paidTwiceBeyondLostIds > 0)
    broken.push(`${s.paidTwiceBeyondLostIds} task(s) paid twice beyond the solver ids lost in crashes or outages`);
  if (s.validInDlq > 0) broken.push(`${s.validInDlq} valid task(s) in the DLQ`);
  if (s.solvedNotAnnounced > 0) broken.push(`${s.solvedNotAnnounced} solved task(s) never announced`);
  if (s.dlqDuplicatesUnexplained > 0)
    broken.push(`${s.dlqDuplicatesUnexplained} second DLQ copies of one message beyond what SQS cannot prevent`);
  return broken;
}

/** Why the run ended with tasks still queued, and why they wait when the governor paused. */
function endedWhy(s: DemoSummary, options: StartOptions, maxDurationMs: number): string {
  const ended =
    s.endedBy === 'interrupted'
      ? 'interrupted'
      : s.endedBy === 'paused'
        ? `stopped after ${PAUSED_TICKS_BEFORE_STOP} ticks paused with no invocation running; --max-duration waits longer`
        : `--max-duration ${Number((maxDurationMs / 1000).toFixed(1))} s`;
  // Paused when the run ended: its last decision paused (a pause it had resumed from explains
  // nothing), WAIT_FOR_THREADS (others hold the whole plan) included, which the code alone missed.
  const last = s.governor?.lastReason;
  const reason = last?.paused === true || last?.code.startsWith('PAUSE') ? last : undefined;
  if (reason !== undefined)
    return `(${ended}) — the governor paused consumption (${reason.code}: ${reason.message.replace(/\.$/, '')}), so tasks wait in the queue as designed`;
  if (options.solverBadKey) return `(${ended}): the solver rejects the key, so tasks wait in the queue as designed`;
  // No governor to pause on money (a fixed ceiling): the solver refuses what the balance no longer
  // pays for, and a longer run would only be refused longer. Before, the advice was a longer --max-duration.
  if (s.governor === undefined && s.solver.balanceEnd < options.solverPrice)
    return `(${ended}): the solver's balance ($${s.solver.balanceEnd.toFixed(3)}) no longer pays for a solve ($${options.solverPrice}), so it refuses the tasks; top it up (--solver-balance), or drop --concurrency so the governor pauses on a low balance instead of submitting into refusals`;
  if (s.endedBy === 'max_duration')
    return `(${ended}); give a longer --max-duration to wait for them${options.maxDuration === undefined ? ` (the default allows ${WORK_ALLOWANCE}× the work's time at the plan's pace, up to ${MAX_DEFAULT_DURATION_S} s)` : ''}`;
  return `(${ended})`;
}
