/**
 * The watch of a demo run: send the workload, read the results and the queues until every task
 * is accounted for, the deadline, a stop, or a pause with nothing in flight; report progress.
 */
import type { TaskResult } from '../../functions/core/results.js';
import { percentile } from '../../functions/core/helpers/stats.js';
import { sleep } from '../../functions/core/helpers/time.js';
import type { LocalStack } from '../runtime.js';
import { accountDlq, inspectDlq } from './dlq.js';
import { currentCeiling, overflowInFlight, runningInvocations } from './lanes.js';
import { EMPTY_DEPTHS, type QueueCount, type QueueDepths, queueDepths } from './queues.js';
import { count, endToEnd, refreshResults, unheardSolved } from './records.js';
import { sendWorkload, withRetries } from './send.js';
import type { WatchedRun } from './summary.js';
import type { DemoItem } from './workload.js';

/** One lane at one moment, for the live view. */
export interface LaneProgress {
  /** Backlog: messages visible in the lane's queue, ready for a delivery. */
  backlog: number;
  /** In flight: messages received and not yet deleted (running, or handed back to wait out a retry). */
  inFlight: number;
  /** Waiting: messages delayed (sent with a delay), not yet visible. */
  waiting: number;
  /** Invocations this lane may run at once now; 0 while its mapping is disabled. */
  ceiling: number;
}

/** What the watch sees at one moment. */
export interface DemoProgress {
  elapsedMs: number;
  submitted: number;
  /** Backlog + in flight + waiting messages in both lanes. */
  queueDepth: number;
  /** Invocations running now. */
  invocations: number;
  solved: number;
  failed: number;
  rejected: number;
  dlqDepth: number;
  /** End-to-end p95 of the solved so far, ms. */
  p95Ms: number | undefined;
  /** Invocations allowed at once now (the governor moves it). */
  ceiling: number;
  /** The governor's latest reason code, when a governor runs. */
  governorReason: string | undefined;
  /** Tasks with a record that has no known status (reported, never counted as finished). */
  unknown: number;
  lanes: { high: LaneProgress; normal: LaneProgress };
  /** The overflow lane (with an overflow provider): invocations running and its ceiling (0 while closed). */
  overflow?: { inFlight: number; ceiling: number; solved: number };
}

export interface DemoOptions {
  /** Tasks per second; 0 sends everything at once. */
  rate: number;
  /** Give up watching after this long, ms. */
  maxDurationMs: number;
  /** How often to read the results, ms. @default 250 */
  watchIntervalMs?: number;
  onProgress?: (progress: DemoProgress) => void;
  /** Stop early (Ctrl-C): the summary reports what was reached. */
  signal?: AbortSignal;
  /**
   * End the run once the governor has kept consumption paused with nothing in flight for this
   * long (a rejected key or an empty balance would otherwise wait out `maxDurationMs`).
   * @default never
   */
  stopWhenPausedMs?: number;
  /**
   * …but not before this long after the run started, ms: a fault plan's windows still to come
   * (a store outage pauses the fleet as designed, and the run waits for it to end).
   * @default 0
   */
  stopWhenPausedFromMs?: number;
}

/** Send the workload and watch the results until every task is accounted for, the deadline, or a stop. */
export async function watchDemo(
  stack: LocalStack,
  items: readonly DemoItem[],
  options: DemoOptions,
): Promise<WatchedRun> {
  const run: WatchedRun = {
    started: Date.now(),
    simStart: stack.simulator.stats(),
    overflowSimStart: stack.overflow?.simulator.stats(),
    results: new Map(),
    unknownIds: new Set(),
    submitted: 0,
    sentIds: new Set(),
    endedBy: 'complete',
    pauseReason: null,
    announced: new Set(),
    unsent: new Set(),
    messageIds: new Map(),
  };
  const unsubscribe = stack.events.subscribe((event) => run.announced.add(event.id));
  try {
    return await watchUntilDone(stack, items, options, run);
  } finally {
    unsubscribe();
  }
}

async function watchUntilDone(
  stack: LocalStack,
  items: readonly DemoItem[],
  options: DemoOptions,
  run: WatchedRun,
): Promise<WatchedRun> {
  const deadline = run.started + options.maxDurationMs;
  const pending = new Set(items.map((item) => item.id));
  // The sender never throws: a chunk SQS keeps refusing is counted unsent and the run goes on.
  const sender = sendWorkload(stack, items, options.rate, deadline, options.signal, run);
  let sendingDone = false;
  void sender.finally(() => (sendingDone = true));

  let lastProgress = 0;
  const pausedIdle = pausedIdleClock(stack);
  let depth: QueueDepths = EMPTY_DEPTHS;
  let lastDlqCheck = 0;
  for (;;) {
    // A watch read that fails (an external endpoint's bad moment) keeps the last view: the run
    // goes on and the summary is still printed.
    await refreshResults(stack, pending, run).catch(() => undefined);
    depth = await queueDepths(stack).catch(() => ({ ...depth, unread: true }));
    const progress = progressOf(stack, run, depth);
    const decision = stack.governor?.lastDecision;
    if (decision?.paused) run.pauseReason = { code: decision.reason.code, message: decision.reason.message };
    if (Date.now() - lastProgress >= 200) {
      options.onProgress?.(progress);
      lastProgress = Date.now();
    }
    // Done when nothing is left to work on: every task has a record, or the lanes are empty,
    // nothing runs, and what has no record can be in the DLQ.
    const quiet = sendingDone && !depth.unread && depth.total === 0 && progress.invocations === 0;
    const waitingFor = pending.size - run.unsent.size;
    // A solved task's event may still be owed (a crash between its record and its event): its
    // message's next delivery publishes it, and the run waits for that while the lanes hold any.
    if (
      sendingDone &&
      ((waitingFor <= 0 && (quiet || unheardSolved(run).length === 0)) || (quiet && waitingFor <= depth.dlq))
    )
      break;
    // Delayed messages alone (a copy of a finished task's message, sent with a delay as insurance
    // while a write lagged) do not hold the run: done once every task without a record is in the
    // DLQ by id. Checked at most once a second, only when nothing else is left in the lanes.
    if (
      sendingDone &&
      waitingFor <= depth.dlq &&
      onlyDelayed(depth) &&
      progress.invocations === 0 &&
      Date.now() - lastDlqCheck >= 1_000
    ) {
      lastDlqCheck = Date.now();
      const letters = await inspectDlq(stack).catch(() => undefined);
      const inDlq = letters && accountDlq(letters, items, run.messageIds).ids;
      if (inDlq && [...pending].every((id) => run.unsent.has(id) || inDlq.has(id))) break;
    }
    const mayStopPaused = Date.now() - run.started >= (options.stopWhenPausedFromMs ?? 0);
    if (sendingDone && mayStopPaused && pausedIdle(options.stopWhenPausedMs)) {
      run.endedBy = 'paused';
      break;
    }
    if (options.signal?.aborted) {
      run.endedBy = 'interrupted';
      break;
    }
    if (Date.now() >= deadline) {
      run.endedBy = 'max_duration';
      break;
    }
    await sleep(options.watchIntervalMs ?? 250);
  }
  await sender;
  await withRetries(() => refreshResults(stack, pending, run));
  return run;
}

/**
 * True once the governor has kept the fleet paused, no invocation running, for `forMs` (never
 * without it). An outage's pause (`PAUSE_OUTAGE`) does not count: it resumes by itself once the
 * solver or the store answers again, at the governor's next probe or trial (a failed trial puts
 * the next one up to eight times further off), which can come well after the outage's window has
 * ended; the run waits for it, up to its --max-duration.
 */
function pausedIdleClock(stack: LocalStack): (forMs: number | undefined) => boolean {
  let since: number | undefined;
  return (forMs) => {
    const decision = stack.governor?.lastDecision;
    // No invocation running: messages handed back stay hidden until their retry (and an emulator
    // may count them in flight until the next receive, which a paused lane never makes).
    const idle =
      decision?.paused === true && decision.reason.code !== 'PAUSE_OUTAGE' && runningInvocations(stack) === 0;
    since = idle ? (since ?? Date.now()) : undefined;
    return forMs !== undefined && since !== undefined && Date.now() - since >= forMs;
  };
}

function progressOf(stack: LocalStack, run: WatchedRun, depth: QueueDepths): DemoProgress {
  const overflow = stack.overflow ? overflowProgress(stack.overflow, run.results) : undefined;
  return {
    elapsedMs: Date.now() - run.started,
    submitted: run.submitted,
    queueDepth: depth.total,
    invocations: stack.pollerStats().inFlight + (overflow?.inFlight ?? 0),
    solved: count(run.results, 'solved'),
    failed: count(run.results, 'failed'),
    rejected: count(run.results, 'rejected'),
    dlqDepth: depth.dlq,
    p95Ms: percentile(endToEnd(run.results.values()), 0.95),
    ceiling: currentCeiling(stack),
    governorReason: stack.governor?.lastDecision?.reason.code,
    unknown: run.unknownIds.size,
    lanes: { high: laneProgress(stack, 'high', depth.high), normal: laneProgress(stack, 'normal', depth.normal) },
    ...(overflow ? { overflow } : {}),
  };
}

function overflowProgress(
  overflow: NonNullable<LocalStack['overflow']>,
  results: Map<string, TaskResult>,
): NonNullable<DemoProgress['overflow']> {
  let solved = 0;
  for (const result of results.values()) if (result.status === 'solved' && result.provider === 'overflow') solved++;
  const lanes = [overflow.poller, overflow.highPoller];
  return {
    inFlight: overflowInFlight(overflow),
    ceiling: lanes.reduce((sum, p) => sum + (p.enabled ? p.maxConcurrency : 0), 0),
    solved,
  };
}

function laneProgress(stack: LocalStack, lane: 'normal' | 'high', depth: QueueCount): LaneProgress {
  const poller = stack.pollers[lane];
  return {
    backlog: depth.visible,
    inFlight: depth.notVisible,
    waiting: depth.delayed,
    ceiling: poller.enabled ? poller.maxConcurrency : 0,
  };
}

/** The lanes hold nothing visible and nothing in flight: only messages sent with a delay, if any. */
function onlyDelayed(depth: QueueDepths): boolean {
  return !depth.unread && [depth.normal, depth.high].every((lane) => lane.visible === 0 && lane.notVisible === 0);
}
