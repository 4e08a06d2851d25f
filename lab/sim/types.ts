/**
 * The simulator's contract with the policies it replays and the figures one run produces.
 */
import type { GovernorSignals } from '../../functions/core/governor/types.js';
import type { FleetSettings } from '../../functions/core/settings.js';
import type { SpendGrant } from '../../functions/core/thread-ledger.js';
import type { ModelParams } from '../model.js';
import type { OverflowLane, OverflowResult, OverflowSpec } from './overflow-lane.js';

/** How a policy's capacity becomes consumers. */
export type CapacityKind = 'lambda' | 'pool' | 'oracle';

/** What a policy sees at its control tick. */
export interface PolicyView {
  /** Seconds since the start of the run. */
  readonly now: number;
  /** Epoch ms (what `GovernorSignals.now` carries). */
  readonly nowMs: number;
  /** Visible tasks waiting in the queue. */
  readonly backlog: number;
  /** Consumers holding a task (invocations or busy workers). */
  readonly busy: number;
  /** Pools: live workers; Lambda: the ceiling. */
  readonly workers: number;
  /** Fresh balance, USD. */
  readonly balance: number;
  readonly settings: FleetSettings;
  /** The governor's signals with the lab's lag model. */
  governorSignals(): GovernorSignals;
  /** The overflow lane, for a policy that has one (lab/overflow.ts). */
  readonly overflowLane?: OverflowLane;
}

/** A policy's answer at a tick: the new ceiling (Lambda) or worker count (pools). */
export interface ControlAction {
  target: number;
  /** Lambda only: whether the mapping consumes. @default true */
  enabled?: boolean;
  /** Why, for the per-reason counters of the report. */
  reason?: string;
  /** Lambda only: make one probe submission of the governor's own now (a synthetic task, answered in the thread ledger). */
  probe?: boolean;
  /** Lambda only: the spend grant to write to the thread ledger (absent: none in force). */
  grant?: SpendGrant;
  /** Parked only: the held test's lift of the refusals' hold, at or before this epoch ms (`Decision.liftHold`). */
  liftHold?: number;
  /**
   * The parked design only: the thread leases the decision opens (`slots`, threadsOpened of
   * functions/core/thread-leases.ts) and the lane's thread ceiling they hold (what the governor
   * reads back as the lane's ceiling; `target` is then the mapping's submitters).
   */
  leases?: { slots: number; ceiling: number };
}

/** A scaling policy plugged into the simulator. */
export interface Policy {
  readonly name: string;
  readonly capacity: CapacityKind;
  /** Seconds between control ticks; `undefined` for policies without a control loop. */
  readonly periodSeconds: number | undefined;
  /** Pools: seconds a new worker takes to start. */
  readonly workerStartSeconds?: number;
  /** Ceiling or worker count at the start. */
  initialTarget(settings: FleetSettings): number;
  /**
   * Lambda only: a clairvoyant mapping (the fair floor). Its maximum concurrency is exactly the
   * free threads (plan − reserved − foreign, at most maxConcurrency) at every instant, and it is
   * disabled exactly while the solver is down, the balance is under the pause level or no thread
   * is free; Lambda's ramp, overheads, retries and hand-backs apply as to any mapping.
   */
  readonly clairvoyant?: boolean;
  /** A pay-per-solve overflow provider fed from the same queue (Lambda policies; lab/overflow.ts). */
  readonly overflow?: OverflowSpec;
  /**
   * Lambda only: the parked design (solveMode `park`, lab/sim/parked.ts). An invocation takes a
   * thread lease, submits and ends, its message hidden; the governor's watch records the answer.
   * The ticks' actions carry the leases they open (`ControlAction.leases`).
   */
  readonly parked?: boolean;
  tick?(view: PolicyView): ControlAction;
}

/**
 * The parked design's work in one run: what the consumers, the governor's watch and its ticks
 * did to the leases table, the results table and the queue beside the counts every run has.
 */
export interface ParkedCounts {
  /** Submissions parked: fresh ones, and resumed ones parked again (`reparked`). */
  parked: number;
  /** Of `parked`, resumed submissions parked again under a new lease (the watch does not poll them). */
  reparked: number;
  /** Slots taken (one conditional PutItem each). */
  leaseTakes: number;
  /**
   * …of them, in each minute of the run (index = minute): what the per-task writes follow over
   * time (lab/provisioned.ts sizes a provisioned table's capacity from it).
   */
  leaseTakesByMinute: number[];
  /**
   * Leases the watch renewed because the solver had not answered for their submission (a long
   * solve, an outage): one conditional UpdateItem and one ChangeMessageVisibility each.
   */
  leaseRenewals: number;
  /** Slots freed with a DeleteItem: by the watch (answer ready) and by consumers (refusals, hand-backs). */
  leaseReleases: number;
  /** Leases that ran to their end (the slot free by its `until`, the message visible again). */
  leasesExpired: number;
  /**
   * Shard Queries by the live slots each read: index = live slots in the shard, value = Queries.
   * The consumers' takes and their waits' reads (eventually consistent), and the governor's (the
   * watch's reads of the leases and the ticks' reads, strongly consistent).
   */
  consumerShardReads: number[];
  governorShardReads: number[];
  /** Watch rounds run (one bulk poll of the solver each, every `watchRoundSeconds` while the governor's invocation runs). */
  watchRounds: number;
  /** Watch rounds that read the leases (a Query of every shard, every `watchViewSeconds`). */
  watchViews: number;
  /** Records of leases the watch read (GetItem, eventually consistent). */
  recordReads: number;
  /** Parked tasks the watch recorded (no second delivery). */
  recordedByWatch: number;
  /**
   * Writes of shards' meta items: limits the governor changed, refusals, refusal hold-offs cleared
   * (a held test's clears every shard's, and lifts the ledger's hold: one write more).
   */
  metaWrites: number;
  /** Seconds invocations waited for a slot (billed Lambda time in `computeSeconds`). */
  slotWaitSeconds: number;
}

/** Options of one run. */
export interface RunOptions {
  seed: number;
  model?: Partial<ModelParams>;
  /** Chart sampling period, seconds. @default durationSeconds / 720, at least 5 */
  sampleSeconds?: number;
  /** How long after the trace ends the run may go on draining, seconds. @default max(3600, duration) */
  drainLimitSeconds?: number;
  /** Epoch ms of virtual time 0. @default 2025-01-01T00:00:00Z */
  epochMs?: number;
}

/** Series for the report's charts. */
export interface Samples {
  t: number[];
  backlog: number[];
  ceiling: number[];
  inFlight: number[];
}

/** Everything measured in one run. Times in seconds; `null` where a figure does not apply. */
export interface RunResult {
  trace: string;
  policy: string;
  seed: number;
  arrivals: number;
  solved: number;
  /** Tasks neither solved nor in the DLQ when the run stopped (queued, waiting for money). */
  unfinished: number;
  /**
   * Tasks moved to the dead-letter queue: received `maxReceiveCount` times without a result
   * (Lambda policies; the pools keep a task in the worker until it is solved, so always 0).
   */
  deadLettered: number;
  /** Times an invocation handed its task back to the queue (over cap, transient, account, deadline). */
  handBacks: number;
  /** Most receives any task spent (solved or dead-lettered). */
  maxReceives: number;
  latency: { p50: number | null; p95: number | null; p99: number | null; mean: number | null };
  /**
   * p95 over every task not dead-lettered, an unfinished one counted at its wait when the run
   * stopped (equal to latency.p95 when none is unfinished): runs that finished different tasks read
   * over the same ones. The generated traces' p95 target stays on the solved tasks; its detail adds this.
   */
  p95EveryTask: number | null;
  peakBacklog: number;
  /** From the peak backlog to the queue's next empty moment; null if it never emptied. */
  drainSeconds: number | null;
  /** Busy solver thread-seconds ÷ free thread-seconds while tasks wait = solves/s ÷ (cap ÷ mean solve time). */
  utilizationWhileBacklog: number | null;
  backlogSeconds: number;
  /**
   * Lost capacity: free solver thread-seconds (plan − foreign − ours) while tasks waited in the
   * queue, the solver was up and the balance above the pause level, divided by the tasks that arrived.
   */
  idleThreadSecondsPerTask: number;
  /** Submissions (in.php requests) including refused ones. */
  submissions: number;
  overCapRejections: number;
  overCapShare: number;
  accountErrors: number;
  /** Transient answers (outages): failed submissions and failed result requests. */
  transientErrors: number;
  /**
   * Seconds during which others left the fleet fewer threads than the mapping's floor
   * (plan − reserved − foreign < the minimum ceiling × tasks per invocation), and the over-cap
   * answers in them (the target allows one per tick there).
   */
  starvedSeconds: number;
  overCapWhileStarved: number;
  /** The governor's own probe submissions, and how many the solver accepted. */
  probes: number;
  probesAccepted: number;
  /** Of those accepted, the probes that carried a waiting task (its solve is among `solved`; the rest were synthetic). */
  probeTasks: number;
  /**
   * Parked only: ticks whose decision tested a refusal's hold (one invocation more than the room,
   * the hold lifted: `ControlAction.liftHold`); refused while others still hold, each is an over-cap answer.
   */
  heldTests: number;
  /** Solves accepted while the balance was under the halt level, and under the pause level. */
  startedPastHalt: number;
  startedPastPause: number;
  haltCrossedAt: number | null;
  scalingChanges: number;
  /** Worker-seconds (pools, billed while idle) or invocation-seconds (Lambda). */
  computeSeconds: number;
  /** The consumer's memory the run timed its CPU at, MB (Lambda policies; lab/model.ts `consumerMemoryMb`). */
  consumerMemoryMb?: number;
  computeUsd: number;
  usdPer1000Solves: number | null;
  invocations: number;
  solverUsd: number;
  reasons: Record<string, number>;
  /** The overflow lane's solves and spend, for a policy with one. */
  overflow?: OverflowResult;
  /** What the parked design did (lab/sim/parked.ts): the counts its AWS bill is priced from. */
  parked?: ParkedCounts;
  samples: Samples;
  /** Simulated seconds, events processed and wall-clock ms of the run. */
  simulatedSeconds: number;
  events: number;
  wallMs: number;
}
