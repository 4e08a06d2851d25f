/**
 * The accounting of a demo run: where each task sent ended (exactly one outcome each), per lane,
 * what the solver, the consumer, the governor and the overflow provider did, from what the
 * watch collected, the DLQ and the simulators' counters.
 */
import { METRICS } from '../../functions/core/metric-names.js';
import { isTerminal, type TaskResult } from '../../functions/core/results.js';
import { percentile } from '../../functions/core/helpers/stats.js';
import { describeFaultPlan } from '../faults/plan.js';
import type { LocalStack } from '../runtime.js';
import { accountDlq, dlqTaskId, inspectDlq, inspectQueue } from './dlq.js';
import { currentCeiling, runningInvocations } from './lanes.js';
import { EMPTY_DEPTHS, queueDepths } from './queues.js';
import { endToEnd, failuresByCode, readRecords, refreshResults, solveTimes, unheardSolved } from './records.js';
import { withRetries } from './send.js';
import { TEXT_ANSWER_METHODS } from '../../functions/core/cost/fleet-bill.js';
import type { DemoSummary, LaneSummary, OverflowSummary, UnresolvedTask } from './summary.js';
import type { WatchedRun } from './summary.js';
import type { DemoItem } from './workload.js';

/** Where each sent task ended: exactly one outcome each (see `DemoSummary`). */
type Outcome = 'solved' | 'failed' | 'rejected' | 'inDlq' | 'unknown' | 'unresolved';

function outcomeOf(id: string, run: WatchedRun, dlqIds: ReadonlySet<string>): Outcome {
  const status = run.results.get(id)?.status;
  // A solved or failed record is the task's result, whatever copy of its message lingers.
  if (status === 'solved' || status === 'failed') return status;
  if (dlqIds.has(id)) return 'inDlq';
  if (status === 'rejected') return 'rejected';
  return run.unknownIds.has(id) ? 'unknown' : 'unresolved';
}

/** Where each task ended: a terminal record, its DLQ message (matched by body), a lane, or nowhere. */
export async function summarise(stack: LocalStack, items: readonly DemoItem[], run: WatchedRun): Promise<DemoSummary> {
  const { results, submitted } = run;
  // Read with retries: the summary is printed whatever an external endpoint does meanwhile. The
  // queues first, then the DLQ, then the records: a run stopped early (--max-duration, Ctrl-C)
  // still has its pollers and the watch at work while it is counted, and a task can only move
  // forward (a lane → a record or the DLQ); read in that order, one that left its lane is found
  // where it went. The records as the watch last read them, before the queues, counted the tasks
  // finished in between as lost (17 of 1 000 with --max-duration 8, their records solved).
  const depth = (await withRetries(() => queueDepths(stack))) ?? EMPTY_DEPTHS;
  const dlq = accountDlq(
    (await withRetries(() => inspectDlq(stack))) ?? [],
    items,
    run.messageIds,
    stack.repeatableLetters(),
  );
  const open = new Set([...run.sentIds].filter((id) => !isTerminal(results.get(id)?.status)));
  if (open.size > 0) await withRetries(() => refreshResults(stack, open, run));
  const rows: Record<Outcome, number> = { solved: 0, failed: 0, rejected: 0, inDlq: 0, unknown: 0, unresolved: 0 };
  let dlqWithRejectedRecord = 0;
  const unresolved: string[] = [];
  for (const id of run.sentIds) {
    const outcome = outcomeOf(id, run, dlq.ids);
    rows[outcome] += 1;
    if (outcome === 'inDlq' && results.get(id)?.status === 'rejected') dlqWithRejectedRecord += 1;
    if (outcome === 'unresolved') unresolved.push(id);
  }
  // Unresolved tasks still in a lane are not lost; SQS counts only approximately, so only as
  // many as the lanes hold (plus what is running) are counted queued.
  const stillQueued = Math.min(rows.unresolved, depth.total + runningInvocations(stack));
  const complete = rows.unresolved === 0 && rows.unknown === 0 && submitted === items.length;
  const malformed = new Set(items.filter((item) => item.malformed !== undefined).map((item) => item.id));
  const solvedIds = [...run.sentIds].filter((id) => results.get(id)?.status === 'solved');
  const methodOf = new Map(items.map((item) => [item.id, item.method]));
  const paid = payments(stack);
  const unheard = await unannounced(stack, unheardSolved(run), depth.total - stillQueued);
  return {
    submitted,
    solved: rows.solved,
    solvedText: solvedIds.filter((id) => TEXT_ANSWER_METHODS.has(methodOf.get(id) ?? '')).length,
    failed: rows.failed,
    rejected: rows.rejected,
    inDlq: rows.inDlq,
    dlqWithRejectedRecord,
    unknown: rows.unknown,
    lanes: {
      high: laneSummary(stack, 'high', items, run.sentIds, results),
      normal: laneSummary(stack, 'normal', items, run.sentIds, results),
    },
    stillQueued,
    lost: rows.unresolved - stillQueued,
    unresolvedTasks: await unresolvedTasks(stack, items, unresolved.slice(0, MAX_UNRESOLVED_SHOWN), run.messageIds),
    queuesAtEnd: {
      visible: depth.normal.visible + depth.high.visible,
      notVisible: depth.normal.notVisible + depth.high.notVisible,
      delayed: depth.normal.delayed + depth.high.delayed,
    },
    unsent: run.unsent.size,
    duplicateSolves: stack.simulator.stats().duplicateSolves - run.simStart.duplicateSolves,
    paidTwice: paid.paidTwice,
    idsCutInOutages: paid.cutInOutages,
    paidTwiceBeyondLostIds: paid.beyondLostIds,
    paidTwiceBeyond: paid.beyond,
    announced: [...run.sentIds].filter((id) => isTerminal(results.get(id)?.status) && run.announced.has(id)).length,
    solvedNotAnnounced: unheard.missing,
    announcementsOwed: unheard.owed,
    validInDlq: [...dlq.ids].filter((id) => !malformed.has(id)).length,
    dlqDuplicates: dlq.duplicates,
    dlqDuplicatesUnexplained: dlq.duplicatesUnexplained,
    ...(stack.faults
      ? {
          faults: {
            plan: describeFaultPlan(stack.faults.plan),
            stats: stack.faults.stats(),
            storeOutages: stack.storeHealth?.stats().outages ?? [],
            storeResumes: stack.storeHealth?.stats().resumes ?? 0,
          },
        }
      : {}),
    p50Ms: percentile(endToEnd(results.values()), 0.5) ?? null,
    p95Ms: percentile(endToEnd(results.values()), 0.95) ?? null,
    solveP95Ms: percentile(solveTimes(results.values()), 0.95) ?? null,
    durationMs: Date.now() - run.started,
    complete,
    endedBy: complete ? 'complete' : run.endedBy,
    failuresByCode: failuresByCode(results),
    dlqByReason: dlq.byReason,
    foreignDlqMessages: dlq.foreign,
    solver: solverSummary(stack, run.simStart),
    ...(stack.overflow && run.overflowSimStart
      ? { overflow: overflowSummary(stack.overflow, run, run.overflowSimStart, stack.governor?.stats().overflow) }
      : {}),
    ...(stack.governor ? { governor: governorSummary(stack.governor, run.pauseReason) } : {}),
    consumer: consumerSummary(stack),
  };
}

/**
 * The solved tasks no completion event was heard for, split. Owed: the record is not noted
 * announced, so the event has not gone out and the next delivery of the task's message publishes
 * it (a crash between the record and the event hides the message until its visibility ends, and a
 * run can end first) — at most as many as the lanes still hold messages beyond the tasks still
 * queued. Missing: noted announced and never heard, or owed with no message left to announce it
 * (a defect). A record that cannot be read counts as missing.
 */
async function unannounced(
  stack: LocalStack,
  ids: readonly string[],
  messagesLeft: number,
): Promise<{ owed: number; missing: number }> {
  if (ids.length === 0) return { owed: 0, missing: 0 };
  const records = (await withRetries(() => readRecords(stack, ids))) ?? [];
  const notNoted = records.filter((record) => record.announcedAt === undefined).length;
  const owed = Math.min(notNoted, Math.max(0, messagesLeft));
  return { owed, missing: ids.length - owed };
}

/** Unresolved tasks the summary describes one by one. */
const MAX_UNRESOLVED_SHOWN = 20;

/**
 * Each unresolved task's record as it stands now (read straight from the table), and its message
 * when a lane shows it visible (read without consuming it).
 */
async function unresolvedTasks(
  stack: LocalStack,
  items: readonly DemoItem[],
  ids: readonly string[],
  messageIds: ReadonlyMap<string, string>,
): Promise<UnresolvedTask[]> {
  if (ids.length === 0) return [];
  const records = new Map(((await withRetries(() => readRecords(stack, ids))) ?? []).map((r) => [r.taskId, r]));
  const lanes = new Map(items.map((item) => [item.id, item.priority]));
  const visible = new Map<string, NonNullable<UnresolvedTask['message']>>();
  for (const lane of ['normal', 'high'] as const)
    for (const message of (await withRetries(() => inspectQueue(stack, stack.resources.queueUrls[lane]))) ?? []) {
      const id = dlqTaskId(message, messageIds);
      const receiveCount = Number(message.Attributes?.ApproximateReceiveCount ?? 0);
      if (id !== undefined) visible.set(id, { lane, receiveCount });
    }
  const now = Date.now();
  return ids.map((id) => {
    const r = records.get(id);
    return {
      id,
      lane: lanes.get(id) ?? 'normal',
      message: visible.get(id) ?? null,
      ...(r !== undefined
        ? {
            record: {
              status: String(r.status),
              attempts: r.attempts,
              sinceClaimMs: r.startedAt !== undefined ? now - r.startedAt : null,
              leaseLeftMs: Math.max(0, (r.leaseUntil ?? 0) - now),
              solverId: r.solverId !== undefined,
              orphanWaited: r.orphanWaitAt !== undefined,
            },
          }
        : {}),
    };
  });
}

/**
 * Tasks (by method and parameters) with more than one paid submission, both providers together,
 * and of those the ones a lost id does not explain: more paid submissions than one plus the ids a
 * crash lost (`lostSolverIds`: their invocation died before their id was kept anywhere) or an
 * outage cut (`answersCutInOutages`: the answer that carried the id came after the client had
 * closed its request). Each of the latter is described by its submissions' fates. The governor's
 * probes are left out: each is the same synthetic task, paid by design
 * (`governor.pause.threadProbes` counts them), no producer's task paid again.
 */
function payments(stack: LocalStack): {
  paidTwice: number;
  cutInOutages: number;
  beyondLostIds: number;
  beyond: DemoSummary['paidTwiceBeyond'];
} {
  const paid = new Map<string, string[]>();
  const acceptedAt = new Map<string, number>();
  const providers = [
    ['primary', stack.simulator],
    ['overflow', stack.overflow?.simulator],
  ] as const;
  const probes = stack.probeSolverIds();
  const cut = new Set<string>();
  for (const [provider, simulator] of providers) {
    for (const [signature, submissions] of simulator?.paidSubmissions() ?? []) {
      for (const { id, acceptedAt: at } of submissions) acceptedAt.set(`${provider}:${id}`, at);
      const tasks = submissions.map(({ id }) => `${provider}:${id}`).filter((id) => !probes.has(id));
      if (tasks.length > 0) paid.set(signature, [...(paid.get(signature) ?? []), ...tasks]);
    }
    for (const id of simulator?.answersCutInOutages() ?? [])
      if (!probes.has(`${provider}:${id}`)) cut.add(`${provider}:${id}`);
  }
  const lost = stack.lostSolverIds();
  const known = stack.knownSolverIds();
  let paidTwice = 0;
  const beyond: DemoSummary['paidTwiceBeyond'] = [];
  for (const ids of paid.values()) {
    if (ids.length < 2) continue;
    paidTwice += 1;
    if (ids.filter((id) => lost.has(id) || cut.has(id)).length >= ids.length - 1) continue;
    const fate = (id: string) =>
      lost.has(id) ? 'lost' : cut.has(id) ? 'cut in an outage' : known.has(id) ? 'kept' : 'never known';
    const taskId = ids.map((id) => known.get(id)).find((id) => id !== undefined);
    beyond.push({
      ...(taskId !== undefined ? { taskId } : {}),
      submissions: ids.map((id) => {
        const ownTask = known.get(id);
        return {
          id,
          fate: fate(id),
          acceptedAt: acceptedAt.get(id) ?? 0,
          ...(ownTask !== undefined && ownTask !== taskId ? { taskId: ownTask } : {}),
        };
      }),
    });
  }
  return {
    paidTwice,
    cutInOutages: cut.size,
    beyondLostIds: beyond.length,
    beyond: beyond.slice(0, MAX_UNRESOLVED_SHOWN),
  };
}

function solverSummary(
  stack: LocalStack,
  simStart: ReturnType<LocalStack['simulator']['stats']>,
): DemoSummary['solver'] {
  const sim = stack.simulator.stats();
  return {
    submissions: sim.submissions - simStart.submissions,
    accepted: sim.accepted - simStart.accepted,
    solved: sim.solved - simStart.solved,
    peakThreads: sim.peakThreads,
    planThreads: sim.planThreads,
    overCapRejections: sim.overCapRejections - simStart.overCapRejections,
    transientErrors: sim.transientErrors - simStart.transientErrors,
    balanceStart: simStart.balance,
    balanceEnd: sim.balance,
  };
}

function overflowSummary(
  overflow: NonNullable<LocalStack['overflow']>,
  run: WatchedRun,
  start: ReturnType<LocalStack['simulator']['stats']>,
  lane: { maxCeiling?: number | undefined; reasons?: Partial<Record<string, number>> } | undefined,
): OverflowSummary {
  // A record written before providers were recorded was the plan's: only `overflow` is overflow.
  const primary: TaskResult[] = [];
  const spill: TaskResult[] = [];
  for (const r of run.results.values())
    if (r.status === 'solved') (r.provider === 'overflow' ? spill : primary).push(r);
  const sim = overflow.simulator.stats();
  const poller = overflow.poller.stats();
  const highPoller = overflow.highPoller.stats();
  const spentUsd = Math.max(0, start.balance - sim.balance);
  const windows = (unit: number) => Math.floor(Date.now() / unit) - Math.floor(run.started / unit) + 1;
  const allowed = Math.min(
    overflow.settings.capUsdPerHour * windows(3_600_000),
    overflow.settings.capUsdPerDay * windows(86_400_000),
  );
  return {
    solved: { primary: primary.length, overflow: spill.length },
    p95Ms: {
      primary: percentile(endToEnd(primary), 0.95) ?? null,
      overflow: percentile(endToEnd(spill), 0.95) ?? null,
    },
    solveP95Ms: {
      primary: percentile(solveTimes(primary), 0.95) ?? null,
      overflow: percentile(solveTimes(spill), 0.95) ?? null,
    },
    provider: {
      submissions: sim.submissions - start.submissions,
      solved: sim.solved - start.solved,
      spentUsd,
      balanceStart: start.balance,
      balanceEnd: sim.balance,
      pricePerSolve: overflow.simulator.options().pricePerSolve,
    },
    capUsdPerHour: overflow.settings.capUsdPerHour,
    capUsdPerDay: overflow.settings.capUsdPerDay,
    withinCaps: spentUsd <= allowed + 1e-9,
    latencyTargetMs: overflow.settings.latencyTargetSeconds * 1000,
    lane: {
      invocations: poller.invocations + highPoller.invocations,
      // The lane's pool is shared by its two pollers: its peak is theirs together.
      peakConcurrency: overflow.pool.peak ?? Math.max(poller.peakConcurrency, highPoller.peakConcurrency),
      // The governor counts every decision; the watch would only sample them.
      maxCeiling: lane?.maxCeiling ?? 0,
      reasons: { ...(lane?.reasons ?? {}) } as Record<string, number>,
    },
  };
}

function consumerSummary(stack: LocalStack): DemoSummary['consumer'] {
  const poller = stack.pollerStats();
  // The governor's probe invokes the consumer with a waiting task too (a receive of its own).
  const probe = stack.probeInvocations();
  return {
    solveMode: stack.settings.solveMode,
    tasksPerInvocation: stack.settings.tasksPerInvocation,
    invocations: poller.invocations + probe.invocations,
    received: poller.received + probe.invocations,
    requeued: stack.metrics.total(METRICS.requeued).sum,
    parked: stack.metrics.total(METRICS.parked).sum,
    invocationSeconds: (poller.invocationMs + probe.invocationMs) / 1000,
    peakConcurrency: poller.peakConcurrency,
    ceiling: currentCeiling(stack),
    retriedItems: poller.failedItems,
    timeouts: poller.timeouts,
    crashes: poller.crashes,
    idsLostInCrashes: stack.idsLostInCrashes(),
    errors: poller.errors + poller.badResponses,
  };
}

function laneSummary(
  stack: LocalStack,
  lane: 'normal' | 'high',
  items: readonly DemoItem[],
  sentIds: ReadonlySet<string>,
  results: Map<string, TaskResult>,
): LaneSummary {
  const mine = items.filter((item) => item.priority === lane && sentIds.has(item.id));
  const records = mine
    .map((item) => results.get(item.id))
    .filter((record): record is TaskResult => record !== undefined);
  const solved = records.filter((record) => record.status === 'solved');
  const endToEndMs = solved
    .filter((r) => r.completedAt !== undefined && r.submittedAt !== undefined)
    .map((r) => (r.completedAt as number) - (r.submittedAt as number));
  const startWaitMs = records
    .filter((r) => r.startedAt !== undefined && r.submittedAt !== undefined)
    .map((r) => (r.startedAt as number) - (r.submittedAt as number));
  const poller = stack.pollers[lane].stats();
  const governed = stack.governor?.stats().lanes[lane];
  const fixed = stack.governor === undefined ? stack.pollers[lane].maxConcurrency : undefined;
  return {
    submitted: mine.length,
    solved: solved.length,
    failed: records.filter((r) => r.status === 'failed').length,
    rejected: records.filter((r) => r.status === 'rejected').length,
    p50Ms: percentile(endToEndMs, 0.5) ?? null,
    p95Ms: percentile(endToEndMs, 0.95) ?? null,
    startWaitP50Ms: percentile(startWaitMs, 0.5) ?? null,
    startWaitP95Ms: percentile(startWaitMs, 0.95) ?? null,
    ceiling: { start: fixed ?? governed?.startCeiling ?? null, max: fixed ?? governed?.maxCeiling ?? null },
    invocations: poller.invocations,
    peakInFlight: poller.peakConcurrency,
  };
}

/** Reason codes of the decisions that tried consuming again while paused. */
const PROBE_CODES: readonly string[] = ['PROBE_RESUME', 'OUTAGE_PROBE'];

function governorSummary(
  governor: NonNullable<LocalStack['governor']>,
  pauseReason: WatchedRun['pauseReason'],
): NonNullable<DemoSummary['governor']> {
  const stats = governor.stats();
  const reason = governor.lastDecision?.reason;
  const probes = Object.entries(stats.reasons)
    .filter(([code]) => PROBE_CODES.includes(code))
    .reduce((sum, [, n]) => sum + (n ?? 0), 0);
  const paused = stats.pausedMs > 0 || pauseReason !== null;
  return {
    decisions: stats.decisions,
    reasons: { ...stats.reasons } as Record<string, number>,
    startCeiling: stats.startCeiling ?? null,
    maxCeiling: stats.maxCeiling ?? null,
    pausedMs: stats.pausedMs,
    failedTicks: stats.failedTicks,
    lastReason: reason
      ? { code: reason.code, message: reason.message, paused: governor.lastDecision?.paused === true }
      : null,
    pause: paused
      ? {
          pausedMs: stats.pausedMs,
          reason: pauseReason,
          probes,
          threadProbes: stats.threadProbes ?? { made: 0, accepted: 0, refused: 0 },
        }
      : null,
    ...(stats.watch
      ? {
          watch: {
            rounds: stats.watch.rounds,
            polled: stats.watch.polled,
            released: stats.watch.released,
            recorded: stats.watch.recorded,
            renewed: stats.watch.renewed,
          },
        }
      : {}),
  };
}
