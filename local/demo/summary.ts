/**
 * What a demo run reports: where each task ended (a partition of the tasks sent), per lane, the
 * solver's and the consumer's counters, the governor's decisions, the overflow split and the
 * fault proxy's account. `--json` prints this object; the summary's table is drawn from it.
 */
import type { TaskResult } from '../../functions/core/results.js';
import type { SolveMode } from '../../functions/core/settings.js';
import type { LocalStack } from '../runtime.js';
import type { FaultStats } from '../faults/proxy.js';
import type { StoreOutage } from '../store-watch.js';

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

/**
 * Where the tasks ended and what it took. `solved`, `failed`, `rejected`, `inDlq`, `unknown`,
 * `stillQueued` and `lost` partition the tasks sent: each task is in exactly one of them.
 */
export interface DemoSummary {
  submitted: number;
  /** Tasks with a `solved` record. */
  solved: number;
  /**
   * Of `solved`, those whose answer is text (an image's or a text captcha's: TEXT_ANSWER_METHODS),
   * whose record the bill writes in one unit, not a token's three.
   */
  solvedText: number;
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
  /** The lanes' messages when the run ended (both lanes together), as SQS counts them. */
  queuesAtEnd: { visible: number; notVisible: number; delayed: number };
  /**
   * The tasks counted `stillQueued` or `lost` (the first 20), each as its record stood when the
   * run ended: what a stall looks like, against a run that only ran out of time.
   */
  unresolvedTasks: UnresolvedTask[];
  /** Tasks the workload could not send (SQS refused them after retries); not counted as submitted. */
  unsent: number;
  /**
   * Solves at the primary's simulator of the same method and parameters as an earlier one: a
   * task paid again, or a governor's probe after the first (each probe is the same task).
   */
  duplicateSolves: number;
  /**
   * Tasks paid for more than once: accepted submissions (not found unsolvable) of one task's
   * method and parameters, counted at the simulators, both providers together. The governor's
   * own probes are no task and not counted (`governor.pause.threadProbes` has them).
   */
  paidTwice: number;
  /**
   * Paid submissions whose answer the provider held through an outage (CapSolver's images are
   * answered in createTask's own response, once recognized) until after the client had closed
   * the request: the id never reached the fleet (docs/consumer.md, "What remains: the protocol's
   * window"). Counted at the simulators, both providers together.
   */
  idsCutInOutages: number;
  /**
   * Of `paidTwice`, the tasks no lost id explains: more paid submissions than one plus those of
   * its ids a crash lost (`consumer.idsLostInCrashes`) or an outage cut (`idsCutInOutages`).
   * The protocols have no idempotency key, so a lost id is paid again; anything beyond is a defect.
   */
  paidTwiceBeyondLostIds: number;
  /**
   * Those tasks (the first 20), each by its task (when a consumer learned one of its ids) and its
   * paid submissions: `lost` (its invocation died before the id was kept), `cut in an outage` (its
   * answer held past the request), `kept` (on the record or in a copy), or `never known` (no
   * consumer's code saw the acceptance: an in.php answer lost on the way back), each with when the
   * solver accepted it (epoch ms) and, when a consumer learned it for another task id than the
   * first's, that task id (the same method and parameters sent under two task ids).
   */
  paidTwiceBeyond: {
    taskId?: string;
    submissions: {
      id: string;
      fate: 'lost' | 'cut in an outage' | 'kept' | 'never known';
      acceptedAt: number;
      taskId?: string;
    }[];
  }[];
  /** Of the solved, failed and rejected tasks, those whose completion event was heard. */
  announced: number;
  /**
   * Solved tasks no completion event was heard for and none is owed: their record says the event
   * went out, or no message is left to announce them (a defect).
   */
  solvedNotAnnounced: number;
  /**
   * Solved tasks whose completion event is still owed when the run ended: the record is not noted
   * announced and the task's message is still in a lane, its next delivery publishes the event (a
   * crash between the record and the event, and the run ended before the message came back).
   */
  announcementsOwed: number;
  /** Valid tasks (not malformed on purpose) whose message is in the DLQ. */
  validInDlq: number;
  /** DLQ messages beyond the first of one task (a second copy of one letter). */
  dlqDuplicates: number;
  /**
   * Of `dlqDuplicates`, those SQS could have prevented: a letter is sent again, with no
   * idempotency key or transaction to stop it, when its SendMessage committed while its answer
   * was lost (the fault proxy's lost commits) or when a crash cut off its source message's delete
   * (local/faults/letters.ts); anything beyond is a defect.
   */
  dlqDuplicatesUnexplained: number;
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
    /** in.php / createTask requests, whatever their answer (an outage's 503s, refusals, errors included). */
    submissions: number;
    /** Submissions the solver took on as tasks (each paid unless found unsolvable). */
    accepted: number;
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
    /** The last decision's reason, and whether it kept consumption paused (a pause, or waiting for threads others hold). */
    lastReason: { code: string; message: string; paused?: boolean } | null;
    /** When the governor paused: for how long, the last pause's reason, and the probes it sent. */
    pause: {
      pausedMs: number;
      reason: { code: string; message: string } | null;
      /** Decisions that tried consuming again while paused (PROBE_RESUME, OUTAGE_PROBE). */
      probes: number;
      /**
       * The governor's own probe submissions (one a tick at most while others hold the plan:
       * WAIT_FOR_THREADS) and what the solver answered them.
       */
      threadProbes: { made: number; accepted: number; refused: number };
    } | null;
    /**
     * The parked design's watch (solveMode `park`): its rounds, the parked submissions it asked
     * about (summed over the rounds), the leases it freed, the tasks it recorded and the leases it
     * renewed while the solver had not answered for them.
     */
    watch?: { rounds: number; polled: number; released: number; recorded: number; renewed: number };
  };
  consumer: {
    /** The design the run's consumers ran (`--solve-mode`, the stack's `solveMode`). */
    solveMode: SolveMode;
    /** Tasks an invocation takes (`--batch-size`, the stack's `tasksPerInvocation`). */
    tasksPerInvocation: number;
    invocations: number;
    /** Messages the pollers handed the consumer (deliveries, each claimed; a batch's in one invocation). */
    received: number;
    /** Messages the consumer put back as fresh copies (near the DLQ, or carrying a submission): each a SendMessage. */
    requeued: number;
    /** Tasks the consumer parked (the parked design: its Parked metric, summed). */
    parked: number;
    /** Summed duration of the consumer's invocations, seconds (Lambda's billed time). */
    invocationSeconds: number;
    peakConcurrency: number;
    /** Ceiling at the end (the governor moves it). */
    ceiling: number;
    retriedItems: number;
    timeouts: number;
    crashes: number;
    /**
     * Submissions the provider accepted whose invocation died (crashed, or timed out) before their id was kept anywhere
     * (the record, or a copy of the message): the answer came back to an invocation already dead,
     * or the id's write was still in flight or failing when it died. No delivery can know their
     * id, so the task is paid again. The one window crashes leave (docs/consumer.md, "Paid once").
     */
    idsLostInCrashes: number;
    errors: number;
  };
}

/** A task sent that has neither a terminal record nor a DLQ message when the run ends. */
export interface UnresolvedTask {
  id: string;
  lane: 'normal' | 'high';
  /** Its record, when it has one (`solving`, or a status not known). */
  record?: {
    status: string;
    /** Deliveries that claimed it, takeovers included. */
    attempts: number;
    /** Since its last claim or takeover, ms. */
    sinceClaimMs: number | null;
    /** Left on the claim's lease, ms (0 once released or run out). */
    leaseLeftMs: number;
    /** A paid submission's id is on the record. */
    solverId: boolean;
    /** A delivery waited once for a copy carrying a dead holder's id. */
    orphanWaited: boolean;
  };
  /**
   * Its message (or a copy of it) as the lanes showed it at the end: visible, with its receive
   * count; null when no lane showed it (in flight, delayed, or gone: SQS does not tell those apart).
   */
  message: { lane: 'normal' | 'high'; receiveCount: number } | null;
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

/** What the watch collected: the terminal records, what was sent, and why it ended. */
export interface WatchedRun {
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

/**
 * Deliveries the consumer handed back for another try (a retry): its batch item failures less
 * the parked ones (a parked message is a batch item failure too, its visibility set by the parking).
 */
export function handedBack(consumer: Pick<DemoSummary['consumer'], 'retriedItems' | 'parked'>): number {
  return Math.max(0, consumer.retriedItems - consumer.parked);
}
