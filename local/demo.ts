/**
 * The demo workload of `npm start`: a mix of task types (reCAPTCHA, Turnstile, hCaptcha,
 * GeeTest, FunCaptcha, images, text) sent in a burst or at a rate, a few malformed messages to
 * show the DLQ path, then a watch until every task has a result, and an honest account of
 * where each one ended: a terminal record, the DLQ, still queued — or lost.
 */
import { randomBytes } from 'node:crypto';
import {
  ChangeMessageVisibilityBatchCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type Message,
} from '@aws-sdk/client-sqs';
import { BatchGetCommand } from '@aws-sdk/lib-dynamodb';
import { parseRedelivery, REDELIVERY_ATTRIBUTE } from '../functions/core/redelivery.js';
import { isTerminal, type TaskResult } from '../functions/core/results.js';
import { percentile } from '../functions/core/helpers/stats.js';
import { sleep } from '../functions/core/helpers/time.js';
import type { TaskMessage } from '../functions/core/task.js';
import { describeFaultPlan } from './faults/plan.js';
import type { FaultStats } from './faults/proxy.js';
import type { LocalStack } from './runtime.js';
import type { StoreOutage } from './store-watch.js';
import { randomString, stream, type Random } from './solver-sim/prng.js';
import { pickMethod, sampleTask, type MethodMix } from './sample-tasks.js';

/** A message the demo sent, valid or not, and how to recognise its outcome. */
export interface DemoItem {
  /** The task id (malformed messages have one too, even when the consumer cannot read it). */
  id: string;
  method: string;
  priority: 'normal' | 'high';
  /** The exact body sent (the DLQ keeps bodies unchanged). */
  body: string;
  /** Why this message is malformed, when it is. */
  malformed?: 'not_json' | 'unknown_method' | 'schema';
}

export interface WorkloadOptions {
  tasks: number;
  /** Of `tasks`, how many are malformed on purpose. */
  malformed: number;
  seed: number;
  /** Share of valid tasks sent with priority high. @default 0.1 */
  highShare?: number;
  /** Distinguishes this run's ids and page URLs from other runs against the same tables. */
  runId?: string;
}

/** Weights of the task types, roughly what a scraping fleet sees. */
const MIX: MethodMix = [
  { method: 'userrecaptcha', weight: 30 },
  { method: 'turnstile', weight: 20 },
  { method: 'hcaptcha', weight: 15 },
  { method: 'base64', weight: 15 },
  { method: 'geetest', weight: 8 },
  { method: 'funcaptcha', weight: 7 },
  { method: 'textcaptcha', weight: 5 },
];
const SITES = ['shop', 'login', 'tickets', 'search', 'signup'];

/** Build the workload: deterministic for a seed, distinct parameters per task (so the solver's duplicate-solve count means something). */
export function buildWorkload(options: WorkloadOptions): DemoItem[] {
  const random = stream(options.seed, 'demo-workload');
  const runId = options.runId ?? randomString(random, 'abcdefghijklmnopqrstuvwxyz0123456789', 6);
  const malformed = Math.min(options.malformed, options.tasks);
  const valid = options.tasks - malformed;
  const items: DemoItem[] = [];
  for (let n = 0; n < valid; n++) {
    const id = `demo-${runId}-${String(n + 1).padStart(4, '0')}`;
    const priority = random() < (options.highShare ?? 0.1) ? 'high' : 'normal';
    const task = {
      id,
      ...(priority === 'high' ? { priority } : {}),
      ...sampleTask(pickMethod(MIX, random), n, random, {
        sites: SITES,
        url: (site: string) => `https://${site}.demo.example.com/${runId}/page-${n + 1}`,
      }),
    } as TaskMessage;
    items.push({ id, method: task.method, priority, body: JSON.stringify(task) });
  }
  // Not-JSON second: with two malformed messages both DLQ paths show (with and without a record).
  const kinds: NonNullable<DemoItem['malformed']>[] = ['schema', 'not_json', 'unknown_method'];
  for (let m = 0; m < malformed; m++) {
    const id = `demo-${runId}-bad${m + 1}`;
    const kind = kinds[m % kinds.length] ?? 'schema';
    const body =
      kind === 'schema'
        ? JSON.stringify({ id, method: 'turnstile', params: { sitekey: '0x4AAAAAAADemoKey', pageurl: 'not-a-url' } })
        : kind === 'unknown_method'
          ? JSON.stringify({ id, method: 'audiocaptcha', params: { pageurl: 'https://demo.example.com/' } })
          : `not JSON at all (${id})`;
    items.push({
      id,
      method: kind === 'unknown_method' ? 'audiocaptcha' : kind === 'schema' ? 'turnstile' : '?',
      priority: 'normal',
      body,
      malformed: kind,
    });
  }
  // Malformed ones arrive among the others, as they would from a buggy producer.
  return shuffle(items, random);
}

function shuffle<T>(items: T[], random: Random): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const [a, b] = [items[i] as T, items[j] as T];
    items[i] = b;
    items[j] = a;
  }
  return items;
}

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

/** One lane over the run, for the summary. */
export interface LaneSummary {
  submitted: number;
  solved: number;
  failed: number;
  rejected: number;
  /** End to end (submitted → terminal record) of the lane's solved tasks, ms. */
  p50Ms: number | null;
  p95Ms: number | null;
  /** Wait before a delivery claimed the task (submitted → started), ms. */
  startWaitP50Ms: number | null;
  startWaitP95Ms: number | null;
  /** The lane's ceiling: the first decision's and the highest (0 while disabled); fixed with --concurrency. */
  ceiling: { start: number | null; max: number | null };
  invocations: number;
  peakInFlight: number;
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
}

/**
 * Where the tasks ended and what it took. `solved`, `failed`, `rejected`, `inDlq`, `unknown`,
 * `stillQueued` and `lost` partition the tasks sent: each task is in exactly one of them.
 */
export interface DemoSummary {
  submitted: number;
  /** Tasks with a `solved` record. */
  solved: number;
  /** Tasks with a `failed` record. */
  failed: number;
  /** Tasks with a `rejected` record whose message is not (yet) in the DLQ. */
  rejected: number;
  /** Tasks whose message is in the DLQ, with or without a `rejected` record. */
  inDlq: number;
  /** Of `inDlq`, those that also have a `rejected` record (refused with a readable id). */
  dlqWithRejectedRecord: number;
  /** Tasks with a record that has no known status: not finished, and not counted as such. */
  unknown: number;
  /** Per lane (malformed messages travel on the normal lane). */
  lanes: { high: LaneSummary; normal: LaneSummary };
  stillQueued: number;
  lost: number;
  /** Tasks the workload could not send (SQS refused them after retries); not counted as submitted. */
  unsent: number;
  duplicateSolves: number;
  /**
   * Tasks paid for more than once: accepted submissions (not found unsolvable) of one task's
   * method and parameters, counted at the simulators, both providers together.
   */
  paidTwice: number;
  /** Of the solved, failed and rejected tasks, those whose completion event was heard. */
  announced: number;
  /** Solved tasks no completion event was heard for. */
  solvedNotAnnounced: number;
  /** Valid tasks (not malformed on purpose) whose message is in the DLQ. */
  validInDlq: number;
  /** DLQ messages beyond the first of one task (a second copy of one letter). */
  dlqDuplicates: number;
  /**
   * The fault proxy's plan and what it injected, when one ran, and the store outages the
   * store-health assessment saw meanwhile (when consumption would have paused).
   */
  faults?: { plan: string; stats: FaultStats; storeOutages: StoreOutage[]; storeResumes: number };
  /** End to end (submitted → terminal record) of the solved tasks, ms. */
  p50Ms: number | null;
  p95Ms: number | null;
  /** Solver time (accepted → answer read) of the solved tasks, ms. */
  solveP95Ms: number | null;
  durationMs: number;
  /** True when every task was sent and reached a terminal record or the DLQ. */
  complete: boolean;
  /** Why the run ended: all resolved, the time limit, a stop request, or a pause with nothing in flight. */
  endedBy: 'complete' | 'max_duration' | 'interrupted' | 'paused';
  failuresByCode: Record<string, number>;
  dlqByReason: Record<string, number>;
  /** DLQ messages no task of this run accounts for (earlier runs against the same queues). */
  foreignDlqMessages: number;
  solver: {
    submissions: number;
    solved: number;
    peakThreads: number;
    planThreads: number;
    overCapRejections: number;
    transientErrors: number;
    balanceStart: number;
    balanceEnd: number;
  };
  /** The split between the plan and the overflow provider; absent without one (see `OverflowSummary`). */
  overflow?: OverflowSummary;
  /** What the governor did; absent with a fixed ceiling. */
  governor?: {
    decisions: number;
    reasons: Record<string, number>;
    startCeiling: number | null;
    maxCeiling: number | null;
    pausedMs: number;
    failedTicks: number;
    lastReason: { code: string; message: string } | null;
    /** When the governor paused: for how long, the last pause's reason, and the probes it sent. */
    pause: { pausedMs: number; reason: { code: string; message: string } | null; probes: number } | null;
  };
  consumer: {
    invocations: number;
    /** Summed duration of the consumer's invocations, seconds (Lambda's billed time). */
    invocationSeconds: number;
    peakConcurrency: number;
    /** Ceiling at the end (the governor moves it). */
    ceiling: number;
    retriedItems: number;
    timeouts: number;
    crashes: number;
    /**
     * Submissions the provider accepted whose answer came back to an invocation already dead (a
     * request in flight when it crashed): no delivery can know their id, so the task is paid
     * again. The one window crashes leave (see docs/consumer.md, "Paid once").
     */
    idsLostInCrashes: number;
    errors: number;
  };
}

/** Who solved what, how fast, and what the overflow provider cost against its caps. */
export interface OverflowSummary {
  /** Solved tasks by the provider whose consumer solved them (the record's `provider`). */
  solved: { primary: number; overflow: number };
  /** End to end (submitted → result) of each provider's solved tasks, ms. */
  p95Ms: { primary: number | null; overflow: number | null };
  /** Solver time (accepted → answer read) of each provider's solved tasks, ms. */
  solveP95Ms: { primary: number | null; overflow: number | null };
  /** The overflow simulator's counters over the run. */
  provider: {
    submissions: number;
    solved: number;
    /** What the provider charged over the run (its balance drop), USD. */
    spentUsd: number;
    balanceStart: number;
    balanceEnd: number;
    pricePerSolve: number;
  };
  capUsdPerHour: number;
  capUsdPerDay: number;
  /**
   * False when the provider charged more than the caps allow over the run: the hourly cap times
   * the UTC hours the run touched, the daily cap times the UTC days (the caps' own windows).
   */
  withinCaps: boolean;
  latencyTargetMs: number;
  /** The overflow lane: invocations, most at once, the widest ceiling the governor set, and why it stood where it did (decisions by reason). */
  lane: { invocations: number; peakConcurrency: number; maxCeiling: number; reasons: Record<string, number> };
}

/** Send the workload through the stack and watch it to the end: watch, then summarise. */
export async function runDemo(
  stack: LocalStack,
  items: readonly DemoItem[],
  options: DemoOptions,
): Promise<DemoSummary> {
  const watched = await watchDemo(stack, items, options);
  return summarise(stack, items, watched);
}

/** What the watch collected: the terminal records, what was sent, and why it ended. */
interface WatchedRun {
  started: number;
  simStart: ReturnType<LocalStack['simulator']['stats']>;
  /** The overflow simulator's counters at the start, with an overflow provider. */
  overflowSimStart: ReturnType<LocalStack['simulator']['stats']> | undefined;
  results: Map<string, TaskResult>;
  /** Tasks whose record was read back without a known status (and no terminal one since). */
  unknownIds: Set<string>;
  submitted: number;
  sentIds: Set<string>;
  endedBy: DemoSummary['endedBy'];
  /** The latest decision that paused, as seen by the watch. */
  pauseReason: { code: string; message: string } | null;
  /** Tasks whose completion event was heard (a task may be announced more than once, with one event id). */
  announced: Set<string>;
  /** Tasks the sender gave up on. */
  unsent: Set<string>;
  /** SQS message ids of the messages sent raw (the malformed ones), to their demo ids. */
  messageIds: Map<string, string>;
}

/** Send the workload and watch the results until every task is accounted for, the deadline, or a stop. */
async function watchDemo(stack: LocalStack, items: readonly DemoItem[], options: DemoOptions): Promise<WatchedRun> {
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
    if (sendingDone && (waitingFor <= 0 || (quiet && waitingFor <= depth.dlq))) break;
    if (sendingDone && pausedIdle(options.stopWhenPausedMs)) {
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

/** True once the governor has kept the fleet paused, no invocation running, for `forMs` (never without it). */
function pausedIdleClock(stack: LocalStack): (forMs: number | undefined) => boolean {
  let since: number | undefined;
  return (forMs) => {
    // No invocation running: messages handed back stay hidden until their retry (and an emulator
    // may count them in flight until the next receive, which a paused lane never makes).
    const idle = stack.governor?.lastDecision?.paused === true && runningInvocations(stack) === 0;
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

/** Invocations the overflow lane's two pollers run now. */
function overflowInFlight(overflow: NonNullable<LocalStack['overflow']>): number {
  return overflow.poller.stats().inFlight + overflow.highPoller.stats().inFlight;
}

/** Invocations running now on every lane, the overflow lane's included. */
function runningInvocations(stack: LocalStack): number {
  return stack.pollerStats().inFlight + (stack.overflow ? overflowInFlight(stack.overflow) : 0);
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
async function summarise(stack: LocalStack, items: readonly DemoItem[], run: WatchedRun): Promise<DemoSummary> {
  const { results, submitted } = run;
  // Read with retries: the summary is printed whatever an external endpoint does meanwhile.
  const dlq = accountDlq((await withRetries(() => inspectDlq(stack))) ?? [], items, run.messageIds);
  const depth = (await withRetries(() => queueDepths(stack))) ?? EMPTY_DEPTHS;
  const rows: Record<Outcome, number> = { solved: 0, failed: 0, rejected: 0, inDlq: 0, unknown: 0, unresolved: 0 };
  let dlqWithRejectedRecord = 0;
  for (const id of run.sentIds) {
    const outcome = outcomeOf(id, run, dlq.ids);
    rows[outcome] += 1;
    if (outcome === 'inDlq' && results.get(id)?.status === 'rejected') dlqWithRejectedRecord += 1;
  }
  // Unresolved tasks still in a lane are not lost; SQS counts only approximately, so only as
  // many as the lanes hold (plus what is running) are counted queued.
  const stillQueued = Math.min(rows.unresolved, depth.total + runningInvocations(stack));
  const complete = rows.unresolved === 0 && rows.unknown === 0 && submitted === items.length;
  const malformed = new Set(items.filter((item) => item.malformed !== undefined).map((item) => item.id));
  const solvedIds = [...run.sentIds].filter((id) => results.get(id)?.status === 'solved');
  return {
    submitted,
    solved: rows.solved,
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
    unsent: run.unsent.size,
    duplicateSolves: stack.simulator.stats().duplicateSolves - run.simStart.duplicateSolves,
    paidTwice: paidTwice(stack),
    announced: [...run.sentIds].filter((id) => isTerminal(results.get(id)?.status) && run.announced.has(id)).length,
    solvedNotAnnounced: solvedIds.filter((id) => !run.announced.has(id)).length,
    validInDlq: [...dlq.ids].filter((id) => !malformed.has(id)).length,
    dlqDuplicates: dlq.duplicates,
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
 * The DLQ's messages matched to this run's tasks by id, never by body (a producer adds fields
 * to what it sends, and a body may repeat): the `taskId` attribute of the consumer's own letters,
 * the SQS message id for messages sent raw (a letter names it as `sourceMessageId`; SQS's redrive
 * keeps it), the id the fleet's redelivery attribute names, else the body's own `id`.
 */
function accountDlq(
  messages: readonly Message[],
  items: readonly DemoItem[],
  messageIds: ReadonlyMap<string, string>,
): { ids: Set<string>; byReason: Record<string, number>; foreign: number; duplicates: number } {
  const known = new Set(items.map((item) => item.id));
  const ids = new Set<string>();
  const byReason: Record<string, number> = {};
  let foreign = 0;
  let matched = 0;
  for (const message of messages) {
    const id = dlqTaskId(message, messageIds);
    if (id === undefined || !known.has(id)) {
      foreign++;
      continue;
    }
    matched++;
    ids.add(id);
    // No reason attribute: SQS moved it after maxReceiveCount receives (the consumer never refused it).
    const reason = message.MessageAttributes?.reason?.StringValue ?? 'maxReceiveCount';
    byReason[reason] = (byReason[reason] ?? 0) + 1;
  }
  return { ids, byReason, foreign, duplicates: matched - ids.size };
}

/** The task id a DLQ message stands for (see accountDlq). */
export function dlqTaskId(message: Message, messageIds: ReadonlyMap<string, string>): string | undefined {
  const attributes = message.MessageAttributes ?? {};
  const named = attributes.taskId?.StringValue;
  if (named !== undefined) return named;
  const source = attributes.sourceMessageId?.StringValue ?? message.MessageId;
  const sent = source === undefined ? undefined : messageIds.get(source);
  if (sent !== undefined) return sent;
  const redelivered = parseRedelivery(attributes[REDELIVERY_ATTRIBUTE]?.StringValue)?.taskId;
  if (redelivered !== undefined) return redelivered;
  try {
    const id = (JSON.parse(message.Body ?? '') as { id?: unknown } | null)?.id;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** Tasks (by method and parameters) with more than one paid submission, both providers together. */
function paidTwice(stack: LocalStack): number {
  const paid = new Map<string, number>();
  for (const simulator of [stack.simulator, stack.overflow?.simulator])
    for (const [signature, n] of simulator?.paidSubmissions() ?? [])
      paid.set(signature, (paid.get(signature) ?? 0) + n);
  return [...paid.values()].filter((n) => n > 1).length;
}

function failuresByCode(results: Map<string, TaskResult>): Record<string, number> {
  const byCode: Record<string, number> = {};
  for (const result of results.values()) {
    if (result.status === 'failed')
      byCode[result.errorCode ?? 'unknown'] = (byCode[result.errorCode ?? 'unknown'] ?? 0) + 1;
  }
  return byCode;
}

function solveTimes(results: Iterable<TaskResult>): number[] {
  return [...results]
    .filter((r) => r.status === 'solved' && typeof r.solveMs === 'number')
    .map((r) => r.solveMs as number);
}

function solverSummary(
  stack: LocalStack,
  simStart: ReturnType<LocalStack['simulator']['stats']>,
): DemoSummary['solver'] {
  const sim = stack.simulator.stats();
  return {
    submissions: sim.submissions - simStart.submissions,
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
  return {
    invocations: poller.invocations,
    invocationSeconds: poller.invocationMs / 1000,
    peakConcurrency: poller.peakConcurrency,
    ceiling: currentCeiling(stack),
    retriedItems: poller.failedItems,
    timeouts: poller.timeouts,
    crashes: poller.crashes,
    idsLostInCrashes: stack.idsLostInCrashes(),
    errors: poller.errors + poller.badResponses,
  };
}

/** Send valid tasks through the producer client and malformed ones raw, at the rate asked. Never throws. */
async function sendWorkload(
  stack: LocalStack,
  items: readonly DemoItem[],
  rate: number,
  deadline: number,
  signal: AbortSignal | undefined,
  run: WatchedRun,
): Promise<void> {
  const started = Date.now();
  const sent = (batch: readonly DemoItem[]) => {
    run.submitted += batch.length;
    for (const item of batch) run.sentIds.add(item.id);
  };
  let next = 0;
  while (next < items.length) {
    if (signal?.aborted || Date.now() >= deadline) return;
    // In a burst everything is due at once; at a rate, what the clock says is due.
    const due =
      rate > 0 ? Math.min(items.length, Math.floor(((Date.now() - started) / 1000) * rate) + 1) : items.length;
    const batch = items.slice(next, due);
    next = due;
    const valid = batch.filter((item) => item.malformed === undefined);
    // Ten at a time (one SendMessageBatch each) so the progress line sees them go.
    for (let i = 0; i < valid.length; i += 10) {
      const chunk = valid.slice(i, i + 10);
      const done = await withRetries(
        () => stack.producer.submit(chunk.map((item) => JSON.parse(item.body) as TaskMessage)),
        SEND_TRIES,
      );
      if (done) sent(chunk);
      else for (const item of chunk) run.unsent.add(item.id);
    }
    for (const item of batch.filter((candidate) => candidate.malformed !== undefined)) {
      // Straight to SQS: the producer client would refuse it, which is its job. The message id
      // is what the DLQ is matched by.
      const answer = await withRetries(
        () =>
          stack.observer.sqs.send(
            new SendMessageCommand({ QueueUrl: stack.resources.queueUrls.normal, MessageBody: item.body }),
          ),
        SEND_TRIES,
      );
      if (answer?.MessageId !== undefined) run.messageIds.set(answer.MessageId, item.id);
      if (answer !== undefined) sent([item]);
      else run.unsent.add(item.id);
    }
    if (next < items.length) await sleep(Math.max(10, Math.min(100, 1000 / rate)));
  }
}

/**
 * A call tried again (0.2 s, 0.4 s, … at most 2 s apart) while it fails, `tries` times: a resend
 * of a task is safe (its id makes it a duplicate), and a producer keeps its tasks through a
 * queue's bad minute. Undefined when it still fails.
 */
async function withRetries<T>(call: () => Promise<T>, tries = 5): Promise<T | undefined> {
  for (let attempt = 0; attempt < tries; attempt++) {
    try {
      return await call();
    } catch {
      if (attempt < tries - 1) await sleep(Math.min(2_000, 200 * 2 ** attempt));
    }
  }
  return undefined;
}

/** Tries of one send: about four minutes at 2 s apart, longer than the fault plans' SQS outages. */
const SEND_TRIES = 120;

async function refreshResults(
  stack: LocalStack,
  pending: Set<string>,
  { results, unknownIds }: Pick<WatchedRun, 'results' | 'unknownIds'>,
): Promise<void> {
  const ids = [...pending];
  for (let i = 0; i < ids.length; i += 100) {
    let keys: Record<string, unknown>[] = ids.slice(i, i + 100).map((taskId) => ({ taskId }));
    // Unprocessed keys are asked for again (DynamoDB may throttle part of a batch).
    for (let round = 0; keys.length > 0 && round < 5; round++) {
      const answer = await stack.observer.documents.send(
        new BatchGetCommand({
          RequestItems: { [stack.resources.tables.results]: { Keys: keys, ConsistentRead: true } },
        }),
      );
      for (const item of answer.Responses?.[stack.resources.tables.results] ?? []) {
        const result = item as TaskResult;
        if (isTerminal(result.status)) {
          results.set(result.taskId, result);
          pending.delete(result.taskId);
          unknownIds.delete(result.taskId);
        } else if (result.status !== 'solving') unknownIds.add(result.taskId);
        else unknownIds.delete(result.taskId);
      }
      keys =
        (answer.UnprocessedKeys?.[stack.resources.tables.results]?.Keys as Record<string, unknown>[] | undefined) ?? [];
    }
  }
}

/** One queue's messages, in the words of docs/local.md. */
interface QueueCount {
  /** Backlog: visible, ready for a delivery. */
  visible: number;
  /** In flight: received and not yet deleted. */
  notVisible: number;
  /** Waiting: delayed, not yet visible. */
  delayed: number;
}

interface QueueDepths {
  total: number;
  dlq: number;
  normal: QueueCount;
  high: QueueCount;
  /** The last read failed: these are older figures. */
  unread?: boolean;
}

const NO_MESSAGES: QueueCount = { visible: 0, notVisible: 0, delayed: 0 };
/** Before the first read: nothing known, nothing taken as done. */
const EMPTY_DEPTHS: QueueDepths = { total: 0, dlq: 0, normal: NO_MESSAGES, high: NO_MESSAGES, unread: true };

const messages = (count: QueueCount) => count.visible + count.notVisible + count.delayed;

async function queueDepths(stack: LocalStack): Promise<QueueDepths> {
  const read = async (queueUrl: string): Promise<QueueCount> => {
    const answer = await stack.observer.sqs.send(
      new GetQueueAttributesCommand({
        QueueUrl: queueUrl,
        AttributeNames: [
          'ApproximateNumberOfMessages',
          'ApproximateNumberOfMessagesNotVisible',
          'ApproximateNumberOfMessagesDelayed',
        ],
      }),
    );
    const a = answer.Attributes ?? {};
    return {
      visible: Number(a.ApproximateNumberOfMessages ?? 0),
      notVisible: Number(a.ApproximateNumberOfMessagesNotVisible ?? 0),
      delayed: Number(a.ApproximateNumberOfMessagesDelayed ?? 0),
    };
  };
  const [normal, high, dlq] = await Promise.all([
    read(stack.resources.queueUrls.normal),
    read(stack.resources.queueUrls.high),
    read(stack.resources.queueUrls.dlq),
  ]);
  return {
    total: messages(normal) + messages(high),
    dlq: messages(dlq),
    normal,
    high,
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

/**
 * Read every DLQ message without consuming it: receive them all (hidden meanwhile), then make
 * them visible again so they stay for `captcha-fleet redrive` and for inspection.
 */
async function inspectDlq(stack: LocalStack): Promise<Message[]> {
  const queueUrl = stack.resources.queueUrls.dlq;
  const seen = new Map<string, Message>();
  for (let empty = 0; empty < 2; ) {
    const answer = await stack.observer.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        VisibilityTimeout: 30,
        MessageAttributeNames: ['All'],
      }),
    );
    const messages = answer.Messages ?? [];
    if (messages.length === 0) empty++;
    for (const message of messages) seen.set(message.MessageId ?? String(seen.size), message);
  }
  const all = [...seen.values()];
  for (let i = 0; i < all.length; i += 10) {
    await stack.observer.sqs
      .send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: all
            .slice(i, i + 10)
            .map((message, n) => ({ Id: String(n), ReceiptHandle: message.ReceiptHandle, VisibilityTimeout: 0 })),
        }),
      )
      .catch(() => undefined);
  }
  return all;
}

/** Invocations the lanes may run at once now: enabled lanes' ceilings, within the shared pool. */
function currentCeiling(stack: LocalStack): number {
  const lanes = [stack.pollers.normal, stack.pollers.high].filter((poller) => poller.enabled);
  return Math.min(
    stack.pool.limit,
    lanes.reduce((sum, poller) => sum + poller.maxConcurrency, 0),
  );
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
    lastReason: reason ? { code: reason.code, message: reason.message } : null,
    pause: paused ? { pausedMs: stats.pausedMs, reason: pauseReason, probes } : null,
  };
}

function count(results: Map<string, TaskResult>, status: TaskResult['status']): number {
  let n = 0;
  for (const result of results.values()) if (result.status === status) n++;
  return n;
}

function endToEnd(results: Iterable<TaskResult>): number[] {
  const values: number[] = [];
  for (const result of results) {
    if (result.status === 'solved' && result.completedAt !== undefined && result.submittedAt !== undefined)
      values.push(result.completedAt - result.submittedAt);
  }
  return values;
}

/** A short random id for a run. */
export function newRunId(): string {
  return randomBytes(4).toString('hex');
}
