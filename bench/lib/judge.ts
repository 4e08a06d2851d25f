/**
 * What a local run must never show, read from its summary: shared by `npm run bench:faults` (the
 * stores' bad days) and `npm run bench:sweep` (drawn flags over the axes of `start`).
 */
import type { DemoSummary } from '../../local/demo.js';
import { withinProtocolBounds } from '../../local/demo/bounds.js';

/** What broke an invariant, and what the protocols allow and the run shows within their bounds. */
export interface Judged {
  broken: string[];
  bounded: string[];
}

/**
 * What the run must never show (`broken`), and what the protocols allow when a fault strikes at
 * the one moment they leave open (`bounded`): a submission accepted while its invocation dies,
 * or whose answer (CapSolver's image, answered in its own response) an outage held until after
 * the request was given up (no idempotency key at in.php or createTask, so its id is lost and the
 * task paid again), and a
 * letter whose SendMessage committed while its answer was lost, or whose source's delete a crash
 * cut off (none at SQS either, so it is sent again). Every task paid twice must be one a lost id
 * explains, and every second DLQ copy one such a letter explains; anything beyond is broken.
 * With `queuedBreaks`, a task still queued at the end breaks the run too (a run long enough to
 * drain after its faults); without, a run may end with tasks waiting where its verdict says why
 * (paused on money or for threads others hold, or cut by --max-duration), and only a lost or
 * unknown task breaks it.
 */
export function judge(summary: DemoSummary, options: { queuedBreaks: boolean }): Judged {
  const broken: string[] = [];
  const bounded = withinProtocolBounds(summary);
  const lostIds = summary.consumer.idsLostInCrashes;
  const cut = summary.idsCutInOutages;
  const cutIds = cut > 0 ? ` and the ${cut} cut in outages` : '';
  if (summary.paidTwiceBeyondLostIds > 0)
    broken.push(
      `${summary.paidTwice} paid twice, ${summary.paidTwiceBeyondLostIds} beyond the ${lostIds} id(s) lost in crashes${cutIds} (${summary.paidTwiceBeyond
        .map((t) => `${t.taskId ?? '?'}: ${t.submissions.map(submissionLine).join(', ')}`)
        .join('; ')})`,
    );
  if (summary.validInDlq > 0) broken.push(`${summary.validInDlq} valid in the DLQ`);
  if (summary.dlqDuplicatesUnexplained > 0)
    broken.push(
      `${summary.dlqDuplicates} second DLQ copies, ${summary.dlqDuplicatesUnexplained} beyond the letters SQS cannot keep from repeating`,
    );
  const queued = options.queuedBreaks ? summary.stillQueued : 0;
  if (summary.lost + queued + summary.unknown > 0)
    broken.push(
      `${summary.lost} lost, ${summary.stillQueued} still queued, ${summary.unknown} unknown${unresolvedOf(summary)}`,
    );
  if (summary.unsent > 0) broken.push(`${summary.unsent} never sent`);
  if (summary.solvedNotAnnounced > 0) broken.push(`${summary.solvedNotAnnounced} solved unannounced`);
  return { broken, bounded };
}

/** Where each unresolved task stood at the end: ` (id: solving, 3 claims, last 12 s ago, lease 0 s, id on record)`. */
function unresolvedOf(summary: DemoSummary): string {
  if (summary.unresolvedTasks.length === 0) return '';
  const one = (t: DemoSummary['unresolvedTasks'][number]) => {
    const r = t.record;
    const seen =
      t.message === null
        ? 'no lane shows its message'
        : `visible in ${t.message.lane}, received ${t.message.receiveCount}×`;
    if (r === undefined) return `${t.id}: no record, ${seen}`;
    const since = r.sinceClaimMs === null ? '?' : `${Math.round(r.sinceClaimMs / 1000)} s`;
    return `${t.id}: ${r.status}, ${r.attempts} claim(s), last ${since} ago, lease ${Math.ceil(r.leaseLeftMs / 1000)} s left${r.solverId ? ', solver id on record' : ''}${r.orphanWaited ? ', orphan wait done' : ''}, ${seen}`;
  };
  const q = summary.queuesAtEnd;
  return ` (${summary.unresolvedTasks.map(one).join('; ')}; lanes at the end: ${q.visible} visible, ${q.notVisible} in flight, ${q.delayed} delayed; ceiling ${summary.consumer.ceiling}, governor ${summary.governor?.lastReason?.code ?? 'none'})`;
}

/** One paid submission of a task paid twice: its id, its fate, when the solver accepted it, and its own task when another. */
function submissionLine(s: DemoSummary['paidTwiceBeyond'][number]['submissions'][number]): string {
  const at = s.acceptedAt > 0 ? ` at ${new Date(s.acceptedAt).toISOString().slice(11, 23)}` : '';
  return `${s.id} ${s.fate}${at}${s.taskId !== undefined ? ` (task ${s.taskId})` : ''}`;
}
