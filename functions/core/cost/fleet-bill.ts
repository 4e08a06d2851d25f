/**
 * What the fleet costs on AWS: its counted calls (what the consumer, the governor and the event
 * source mapping do per task, per delivery, per tick) priced from the price table. The calls are
 * counted from the code, each with the place that makes it; sizes that depend on the tasks (a
 * task's message, a record with its answer) are parameters with the defaults below. Both solve
 * modes are billed: `wait` (each invocation waits through its solve) and `park` (the parked
 * design: thread leases, the governor's watch records the answers; `FleetUsage.parked`).
 */
import { consumerSizing, FUNCTION_SIZING, type FunctionSizing } from '../function-sizing.js';
import { type Bill, type BillLine, billOf, LOGS_UNIT, pricer, strongReadUnits, writeUnits } from './bill.js';
import { LEASE_META_ITEM_BYTES, LEASE_SLOT_ITEM_BYTES, shardKeys, WATCH_BATCH_MS } from '../thread-leases.js';
import { solverBytesOut } from './solver-traffic.js';
import { AWS_PRICES, PLAN_USD_PER_THREAD_HOUR, type PriceTable } from './prices.js';
import { parkedGovernorSizing } from '../watch-sizing.js';
import { METHOD_KIND, METHODS } from '../solver-protocol.js';
import { SQS_BATCH_ENTRIES } from '../task.js';
import { WINDOW_MINUTES, WINDOW_SLOT_ITEM_BYTES } from '../solve-window.js';
import {
  idleLongPolls,
  keptDataLines,
  LOG_RETENTION_DAYS,
  type StackResources,
  stackResources,
  standingLines,
} from './stack-charges.js';

/**
 * The consumer's calls, counted from functions/consumer/ (the happy path of one task, then what
 * a hand-back and an over-cap answer add). Quantities are calls; sizes turn them into units.
 */
export const CONSUMER_CALLS = {
  /** Every delivery: claim (results-repository claim: a conditional PutItem or UpdateItem). */
  writesPerDelivery: 1,
  /**
   * Every accepted submission: the solver id on the record (recordSolverId) and the thread
   * ledger's `accepted` (UpdateItem); before it, waitForRoom reads the ledger (GetItem, strong).
   */
  writesPerAcceptedSubmission: 2,
  readsPerSubmission: 1,
  /**
   * Every solved task: the ledger's `released`, the terminal record (complete) and its
   * announcement note (markAnnounced) — the last two on the item that holds the answer — and one
   * completion event (PutEvents).
   */
  ledgerWritesPerSolve: 1,
  answerWritesPerSolve: 2,
  eventsPerSolve: 1,
  /** Every hand-back: the claim released (release), the ledger's released or leftOver, ChangeMessageVisibility. */
  writesPerHandBack: 2,
  sqsPerHandBack: 1,
  /** Every over-cap answer: the ledger's `refused` (UpdateItem). */
  writesPerOverCap: 1,
  /**
   * Every invocation: the mapping's ReceiveMessage that brought its batch and the
   * DeleteMessageBatch of what it acknowledged (a parking invocation's ChangeMessageVisibility,
   * which hides its message, in place of the delete).
   */
  sqsPerInvocation: 2,
} as const;

/**
 * What the parked design changes in the consumer's calls (functions/consumer/task-run.ts,
 * lease-holding.ts, thread-tracking.ts with leases): a fresh submission reads the ledger once for
 * the governor's spend grant (waitForGrant, GetItem, strong), then takes a lease in place of the
 * waiting design's room check (a shard Query, eventually consistent, and a conditional PutItem of a slot);
 * the solver id's write also gives the claim up (the same one write); the ledger records the
 * acceptance and each refusal with the leases' count and no `released` (a solve the consumer reads
 * itself is added to `solved`); a refusal also writes the
 * slot's shard (its hold-off) and frees the slot (DeleteItem); a hand-back releases the claim only.
 */
export const PARKED_CONSUMER_CALLS = {
  /** The spend grant read before a fresh submission (a grant used up hands the task back unpaid). */
  ledgerReadsPerSubmission: 1,
  /** A solve a consumer reads itself (a resumed submission) is added to the ledger's `solved` (countSolved). */
  ledgerWritesPerSolve: 1,
  writesPerHandBack: 1,
} as const;

/**
 * The governor's watch over parked tasks (functions/governor/parked-watch.ts,
 * functions/adapters/parked-recorder.ts): per round one bulk res.php request (free at the
 * solver: not billed); per read of the leases (at most one a second) a strongly consistent Query
 * of every shard, and per new lease a GetItem of its task's record (eventually consistent); per
 * ready task the lease's DeleteItem, one result request to the solver, the answered record in one
 * conditional write (no announcement note), one completion event (counted with every solve) and
 * the message's delete, ten to a DeleteMessageBatch (`watchDeleteRequests`); the recorded answers are added to the thread ledger's `solved` in
 * batches (one UpdateItem per batch, at most every `solvedBatchSeconds`). Its ticks read every shard (the threads held) and the first shard
 * again (the lanes' ceilings) and write a shard's limit when it changes.
 */
export const WATCH_CALLS = {
  /**
   * Seconds of each minute the watch runs: all but the relay's hand-over from one invocation's
   * watch to the next's (functions/core/watch-relay.ts): the holder's round under way (half a
   * round, 0.05 s), its check of the baton and the hand-over (a read and a write), the newcomer's
   * next read of the baton (half its 100 ms poll) and its first read of the leases with their
   * records: about 0.3 s.
   */
  secondsPerMinute: 59.7,
  /**
   * Rounds a minute at most: one every WATCH_POLL_MS (100 ms) while it runs and a round takes one
   * solver request (fewer as the parked submissions need more: `watchPollMs`); each a bulk poll,
   * no AWS call.
   */
  roundsPerMinute: 597,
  /** Reads of the leases a minute: one every WATCH_VIEW_MS (1 s) while it runs, a Query of every shard each. */
  viewsPerMinute: 59,
  /**
   * Billed seconds of a parked governor's invocation: from its start until its successor, a
   * minute later, has asked for the baton, plus the hand-over (0.1 s), plus its own wait for the
   * baton at its start (0.2 s on average).
   */
  governorSecondsPerInvocation: 60.3,
  /**
   * The relay's reads of the baton a minute (strongly consistent GetItem, one read unit): the
   * holder's before each round once its ticks are over (58 s) until its successor asks (2 s of
   * rounds 100 ms apart: 20), its hand-over (1), the successor's first read and its polls (3),
   * the holder's read of the successor's confirmation (1).
   */
  relayReadsPerMinute: 25,
  /**
   * …and its writes (conditional PutItem, one write unit): the successor's ask, the hand-over,
   * the successor's confirmation (functions/core/watch-relay.ts, HAND_OVER_CONFIRM_MS).
   */
  relayWritesPerMinute: 3,
  answerWritesPerRecord: 1,
  /**
   * Least time between two batches of recorded answers added to the ledger's `solved`
   * (parked-watch.ts `solvedFlushMs`), s; one more batch at the end of each invocation.
   */
  solvedBatchSeconds: WATCH_BATCH_MS / 1000,
} as const;

/**
 * The watch's writes of its recorded answers to the ledger's `solved` over `hours`: one per
 * batch, at most one every `solvedBatchSeconds` of its rounds and one at each invocation's end,
 * never more than the answers it recorded (a batch holds one at least).
 */
export function watchSolvedWrites(recordedByWatch: number, hours: number): number {
  const perMinute = Math.floor(WATCH_CALLS.governorSecondsPerInvocation / WATCH_CALLS.solvedBatchSeconds) + 1;
  return Math.min(recordedByWatch, Math.ceil(hours * 60 * perMinute));
}

/**
 * Methods whose answer is a few characters of text, not a token: the protocol's image kind
 * (METHOD_KIND: an image's, a text captcha's).
 */
export const TEXT_ANSWER_METHODS: ReadonlySet<string> = new Set(METHODS.filter((m) => METHOD_KIND[m] === 'image'));

/** Write units of one write of the answered record, over the usage's mix of text answers and tokens. */
function answeredRecordUnits(usage: Pick<FleetUsage, 'textAnswerShare'>, a: CostAssumptions): number {
  const text = textShare(usage);
  return (1 - text) * writeUnits(a.answeredRecordBytes) + text * writeUnits(a.textAnsweredRecordBytes);
}

/** The answered record's mean size over the usage's mix, bytes (what the table keeps). */
function answeredRecordBytes(usage: Pick<FleetUsage, 'textAnswerShare'>, a: CostAssumptions): number {
  const text = textShare(usage);
  return (1 - text) * a.answeredRecordBytes + text * a.textAnsweredRecordBytes;
}

function textShare(usage: Pick<FleetUsage, 'textAnswerShare'>): number {
  return Math.min(1, Math.max(0, usage.textAnswerShare ?? 0));
}

/**
 * The EMF documents the watch publishes over `hours` (functions/governor/metrics-batch.ts): one per
 * batch of recorded solves, as many as its solved batches, and one more each time a metric of a
 * batch reaches Powertools' 100 values.
 */
export function watchEmfDocuments(recordedByWatch: number, hours: number): number {
  return recordedByWatch === 0 ? 0 : watchSolvedWrites(recordedByWatch, hours) + Math.floor(recordedByWatch / 100);
}

/**
 * The watch's DeleteMessageBatch requests over `hours` (functions/governor/delete-batch.ts): one per
 * ten recorded answers, and the partial batches it sends with its solved batches, at most one every
 * `solvedBatchSeconds` and one at each invocation's end; never more than the answers.
 */
export function watchDeleteRequests(recordedByWatch: number, hours: number): number {
  const perMinute = Math.floor(WATCH_CALLS.governorSecondsPerInvocation / WATCH_CALLS.solvedBatchSeconds) + 1;
  return Math.min(recordedByWatch, Math.ceil(recordedByWatch / SQS_BATCH_ENTRIES) + Math.ceil(hours * 60 * perMinute));
}

/** `queries` shard Queries that each read `live` slots, counted as `ParkedUsage` counts them. */
export function shardReadsAt(live: number, queries: number): number[] {
  const counts = new Array<number>(live + 1).fill(0);
  counts[live] = queries;
  return counts;
}

/**
 * The governor's shard Queries over `hours` of a lane of `shards` shards: every shard at each of
 * the watch's reads of the leases (not each round: the rounds between reuse the last read), and
 * each tick every shard (the threads held) and the first again (the lanes' ceilings).
 */
export function governorShardQueries(
  hours: number,
  shards: number,
  ticksPerMinute: number = DEFAULT_COST_ASSUMPTIONS.governorTicksPerMinute,
): number {
  return hours * 60 * (WATCH_CALLS.viewsPerMinute * shards + ticksPerMinute * (shards + 1));
}

/**
 * The governor's calls, counted from functions/governor/ and its adapters: one invocation a
 * minute (rate(1 minute)) that ticks every tickMs inside it; per tick the queue attributes of
 * both lanes (GetQueueAttributes), the thread ledger, the governor state and the store probe
 * (three strongly consistent GetItem) and the state saved (one conditional write); once a minute
 * the consumer's metric window and the queues' CloudWatch metrics (GetMetricData).
 */
export const GOVERNOR_CALLS = {
  sqsPerTick: 2,
  readsPerTick: 3,
  writesPerTick: 1,
  /**
   * Metrics per GetMetricData minute: the consumer's window (10) and the consumers' store calls
   * (read once a minute; in an ordinary minute, no call failed and no store trial on, the errors
   * of DynamoDB and SQS alone: 2 for the consumer, 2 more for the overflow consumer when the fleet
   * has an overflow lane; a minute with a failed call asks for the requests too, a trial for
   * both); test/unit/cost checks it against the adapters' queries.
   */
  metricsPerMinute: 12,
  /**
   * …in the parked design, which reads the consumer's window from the governor table instead
   * (functions/core/solve-window.ts): the store calls' only.
   */
  parkedMetricsPerMinute: 2,
  overflowMetricsPerMinute: 2,
  /**
   * The queues' age and sent count (two lanes), read only while a lane has no earlier read
   * (functions/governor/loop.ts): once per cold start of a governor's container.
   */
  queueMetricsPerColdStart: 4,
  /** Cold starts of the governor's containers an hour (an assumption: Lambda recycles warm containers every few hours). */
  governorColdStartsPerHour: 1,
} as const;

/**
 * Metrics the parked design's watch adds to the governor's in an ordinary hour: ParkedRecorded
 * (WatchFailedRounds only in an hour with a failed round).
 */
export const PARKED_GOVERNOR_METRICS = 1;

/**
 * What the parked design changes in the consumer's metrics in an ordinary hour: Parked, and its own
 * SQS calls (SqsRequests: the ChangeMessageVisibility that hides a parked message; SqsErrors only
 * in an hour with a failed call) are added; ResultRequests goes (the governor's watch polls, the
 * consumer does not).
 */
export const PARKED_CONSUMER_METRICS = 1;

/**
 * Log bytes ingested (CloudWatch Logs bills what it ingests; each event counts 26 bytes more), by
 * part: the consumer's own JSON lines over an invocation (705 B measured: `npm start -- --tasks 40
 * --log-level info`, 40 908 B over 58 invocations, about 3 lines; waiting, `--concurrency 20`:
 * 677 B now, two lines; parked: 491 B, `npm start -- --tasks 40 --log-level info`, 19 641 B over
 * 40 invocations, 1.3 lines with the run's warnings, since the submission's line is a debug line
 * when the task parks at once; 500 here), its EMF document (at most 650 B
 * measured, waiting or parked, with a 24-character namespace; 700 here), Lambda's START, END and
 * REPORT lines (about 400 B, estimated); the watch's info line per task it records (274 B measured:
 * Powertools' JSON with a 42-character task id, its solver id and solve time; 300 here) and the EMF
 * documents of its solves, one a batch (functions/governor/metrics-batch.ts): its frame (a batch of
 * three solves: 375 B measured, 3-digit times; 400 here) and each solve's values in it (its solve
 * time, 1, its end-to-end time: about 16 B at 5-digit times; 20 here).
 * test/integration/consumer-metrics.test.ts measures the EMF documents against these.
 */
export const LOG_BYTES = {
  consumerLines: 705,
  parkedConsumerLines: 500,
  consumerEmf: 700,
  lambdaPlatform: 400,
  watchLine: 300,
  watchEmf: 400,
  watchEmfPerSolve: 20,
  perEvent: 26,
} as const;

/** Sizes and timings the bill depends on; every field has a default (DEFAULT_COST_ASSUMPTIONS). */
export interface CostAssumptions {
  /** A task's message as the producer sends it, bytes (SQS bills per 64 KiB chunk). */
  taskBytes: number;
  /** The results item before the answer (claim, solver id), bytes. */
  recordBytes: number;
  /** The results item with its answer (complete, markAnnounced), bytes: a reCAPTCHA token is ~2 KB. */
  answeredRecordBytes: number;
  /**
   * …with a text answer (an image's or a text captcha's: TEXT_ANSWER_METHODS), bytes: the item
   * before the answer and under 100 B of text.
   */
  textAnsweredRecordBytes: number;
  /** The thread ledger item, bytes. */
  ledgerBytes: number;
  /** A lease slot item (shard, slot, task id, times, the delivery's queue and receipt handle), bytes. */
  leaseSlotBytes: number;
  /** A lease shard's meta item (limit, refusal hold-off, the lanes' ceilings), bytes. */
  leaseMetaBytes: number;
  /** A metric window slot item (a minute's counters and its solve-time histogram), bytes. */
  windowSlotBytes: number;
  /** Log bytes the governor's watch ingests per task it records: its info line and its values in the batch's EMF document (LOG_BYTES; each document's frame is counted per batch). */
  watchLogBytesPerRecord: number;
  /**
   * Log bytes an invocation of the consumer ingests: its own JSON lines, its EMF document and
   * Lambda's START / END / REPORT lines, seven events (LOG_BYTES: 1 987 B).
   */
  consumerLogBytesPerInvocation: number;
  /**
   * …a parked invocation's: its one info line (the submission's is a debug line when it parks at
   * once), its EMF document and Lambda's, six events (LOG_BYTES: 1 756 B).
   */
  parkedConsumerLogBytesPerInvocation: number;
  /** Log bytes a governor tick ingests (its decision line and EMF document; the invocation's START/REPORT spread over its ticks). */
  governorLogBytesPerTick: number;
  /**
   * Custom metrics the waiting consumer emits in an ordinary hour (name × dimensions); the parked
   * consumer's differ by `PARKED_CONSUMER_METRICS`. Prices configured per method
   * (`solverPricesUsd`) add SpendUsd streams (one, and one per method), not counted here.
   */
  consumerMetrics: number;
  /**
   * Custom metrics the governor's decisions emit in an ordinary hour (functions/governor/run.ts,
   * emitDecisionMetrics: every signal known, one decision reason); the parked design's watch adds
   * `PARKED_GOVERNOR_METRICS`.
   */
  governorMetrics: number;
  /**
   * Billed seconds of a waiting fleet's governor invocation: six ticks 10 s apart within its 58 s
   * timeout, the last at 50 s (functions/governor/run.ts stops when less than a 5 s margin would
   * be left). A parked fleet's lasts as long as its watch (`WATCH_CALLS.governorSecondsPerInvocation`).
   */
  governorSecondsPerInvocation: number;
  /** Governor ticks per minute (60 000 / tickMs). */
  governorTicksPerMinute: number;
  /** Event source mappings polling (normal and high lanes). */
  mappings: number;
  /** Long polls a mapping keeps open (Lambda: 5) and their length (20 s): the idle ReceiveMessage floor. */
  pollersPerMapping: number;
  longPollSeconds: number;
  /** Threads one t4g.small hosts for a thread pool (20–100 in one process). */
  threadsPerVm: number;
  /** How long an answered record is kept (the fleet's resultTtlSeconds), hours. */
  resultRetentionHours: number;
  /** How long the log groups keep their logs, days. */
  logRetentionDays: number;
  /**
   * Result requests of a solve whose submission no watch polls (the waiting consumer's, a pool's):
   * the protocol's first at 15 s for a token (5 s for an image), then one every 5 s (DEFAULT_POLL):
   * a median 15 s token solve asks once or twice.
   */
  pollsPerUnwatchedSolve: number;
}

export const DEFAULT_COST_ASSUMPTIONS: Readonly<CostAssumptions> = {
  taskBytes: 2_048,
  recordBytes: 900,
  answeredRecordBytes: 2_800,
  textAnsweredRecordBytes: 1_000,
  ledgerBytes: 700,
  leaseSlotBytes: LEASE_SLOT_ITEM_BYTES,
  leaseMetaBytes: LEASE_META_ITEM_BYTES,
  windowSlotBytes: WINDOW_SLOT_ITEM_BYTES,
  watchLogBytesPerRecord: LOG_BYTES.watchLine + LOG_BYTES.watchEmfPerSolve + LOG_BYTES.perEvent,
  consumerLogBytesPerInvocation:
    LOG_BYTES.consumerLines + LOG_BYTES.consumerEmf + LOG_BYTES.lambdaPlatform + 7 * LOG_BYTES.perEvent,
  parkedConsumerLogBytesPerInvocation:
    LOG_BYTES.parkedConsumerLines + LOG_BYTES.consumerEmf + LOG_BYTES.lambdaPlatform + 6 * LOG_BYTES.perEvent,
  governorLogBytesPerTick: 2_500,
  // SolveDuration, QueueWait, EndToEnd, Solved, SolverSubmissions, ResultRequests, DynamoRequests
  // (DynamoErrors only in an hour with a failed call): test/integration/consumer-metrics.test.ts
  // counts them from what the consumer emits.
  consumerMetrics: 7,
  // Ceiling, FreeThreads, Paused, NeededThreads, Balance, ThreadsHeld, Decision (one Reason; the
  // shortfall is the dashboard's expression of NeededThreads and FreeThreads):
  // test/unit/governor-adapters.test.ts counts them from what the governor emits.
  governorMetrics: 7,
  governorSecondsPerInvocation: 51,
  governorTicksPerMinute: 6,
  mappings: 2,
  pollersPerMapping: 5,
  longPollSeconds: 20,
  threadsPerVm: 100,
  // resultTtlSeconds' default, a day (functions/core/settings.ts); a run passes its own.
  resultRetentionHours: 24,
  logRetentionDays: LOG_RETENTION_DAYS,
  pollsPerUnwatchedSolve: 2,
};

/**
 * What the parked design did beyond the counts every mode has (solveMode `park`). Shard reads
 * are counted by the live slots each Query read (index = live slots in the shard, value =
 * Queries): a Query reads the shard's meta and its slot items, rounded up to 4 KB.
 */
export interface ParkedUsage {
  /** Slots taken (conditional PutItem). */
  leaseTakes: number;
  /** Slots freed with a DeleteItem (the watch's and the consumers'). */
  leaseReleases: number;
  /** The consumers' shard Queries before a submission and while they wait for a slot (eventually consistent), by live slots read. */
  consumerShardReads: readonly number[];
  /** The governor's shard Queries (the watch's reads of the leases and the ticks', strongly consistent), by live slots read. */
  governorShardReads: readonly number[];
  /** The watch's reads of a lease's task record (GetItem, eventually consistent). */
  recordReads: number;
  /** Parked tasks the watch recorded (the rest of the solved were recorded by a consumer). */
  recordedByWatch: number;
  /** Shard meta writes: limits, refusals, refusal hold-offs cleared. */
  metaWrites: number;
  /**
   * Leases the watch renewed while the solver had not answered for their submission (a long solve,
   * an outage): one conditional UpdateItem and one ChangeMessageVisibility each. @default 0
   */
  leaseRenewals?: number;
  /**
   * The watch's rounds, each one bulk poll of the solver per 100 parked submissions (data sent
   * out). @default - a round every WATCH_POLL_MS while the watch runs (WATCH_CALLS.roundsPerMinute)
   */
  watchRounds?: number;
}

/** What ran, counted: a lab run, a local run or a month of a plan all reduce to this. */
export interface FleetUsage {
  /** The span billed for what runs whether or not tasks come (governor, pollers, metrics, VMs), hours. */
  hours: number;
  /** Tasks the producers sent. */
  tasks: number;
  solved: number;
  /** Consumer deliveries (one task each) and the invocations that carried them. */
  deliveries: number;
  invocations: number;
  /** Billed seconds of the consumer's invocations. */
  invocationSeconds: number;
  /** Submissions the solver accepted, and its over-cap answers. */
  acceptedSubmissions: number;
  submissions: number;
  overCapAnswers: number;
  handBacks: number;
  /** Fresh copies of messages the consumer sent (carried, parked), each one SendMessage. */
  copiesSent: number;
  /**
   * Share of the solves whose answer is text (TEXT_ANSWER_METHODS: its record one write unit, not
   * a token's three). @default 0 (every answer a token)
   */
  textAnswerShare?: number;
  /**
   * The consumer's function. @default the stack's for one task an invocation (consumerSizing):
   * the parked consumer's with `parked`, the waiting one's without
   */
  consumerSizing?: FunctionSizing;
  /** Billed seconds of the overflow consumer's invocations (FUNCTION_SIZING.overflowConsumer). @default 0 */
  overflowInvocationSeconds?: number;
  /** The governor runs (Lambda policies governed by it). @default true */
  governor?: boolean;
  /** The fleet has an overflow lane: the governor reads the overflow consumer's store calls too. @default false */
  overflowLane?: boolean;
  /**
   * Event source mappings enabled, on average over the run: their pollers' idle long polls are
   * billed. The governor disables the high lane's while that lane has no work
   * (functions/core/governor/capacity.ts, splitOverLanes), so a governed fleet without
   * high-priority work polls with one. @default CostAssumptions.mappings (both)
   */
  pollingMappings?: number;
  /** The parked design's own calls (solveMode `park`); absent: every invocation waits through its solve. */
  parked?: ParkedUsage;
  /**
   * The fleet stack's standing resources (alarms, dashboard, secrets, key, the reports queue's
   * pollers), billed by the hour. @default - the stack's own (`stackResources`, with
   * `overflowLane`) when the governor runs (the fleet as deployed); none otherwise (a fixed
   * maximum or a pool: their own monitoring is theirs)
   */
  stack?: StackResources;
  /** Consumers are pool workers on VMs instead of Lambda: the VM-hours (t4g.small). */
  poolVmHours?: number;
  /**
   * The consumer runs as Lambda on instances Lambda manages (Managed Instances): no GB-seconds,
   * the instances' hours at this price instead, requests and logs as any Lambda.
   */
  managedInstances?: { hours: number; usdPerHour: number };
}

/** A bill of the fleet for `usage`, with the plan's own cost beside it. */
export interface FleetBill extends Bill {
  /** The thread plan over the same hours: planThreads × hours × its price per thread-hour. */
  readonly planUsd: number;
}

export interface FleetBillOptions {
  planThreads: number;
  prices?: PriceTable;
  assumptions?: Partial<CostAssumptions>;
  /** The governor's function; by default as the stack sizes it (parked: from planThreads, watch-sizing.ts). */
  governorSizing?: FunctionSizing;
  planUsdPerThreadHour?: number;
}

/** Prices every counted call of `usage`. */
export function fleetBill(usage: FleetUsage, options: FleetBillOptions): FleetBill {
  const prices = options.prices ?? AWS_PRICES;
  // A parked fleet's governor invocation lasts as long as its watch.
  const parkedGovernor =
    usage.parked !== undefined ? { governorSecondsPerInvocation: WATCH_CALLS.governorSecondsPerInvocation } : {};
  const a = { ...DEFAULT_COST_ASSUMPTIONS, ...parkedGovernor, ...options.assumptions };
  const p = pricer(prices);
  const pool = usage.poolVmHours !== undefined;
  const lines: BillLine[] = [...computeLines(usage, prices), ...queueLines(usage, a, prices)];
  lines.push(...storeLines(usage, a, prices));
  if (usage.parked !== undefined) {
    lines.push(...parkedLines(usage, usage.parked, a, prices));
    // The window is the governor's: without one nothing writes or reads it.
    if (usage.governor ?? true) lines.push(...windowLines(usage, usage.parked, a, prices));
  }
  lines.push(p.events('completion events', usage.solved * CONSUMER_CALLS.eventsPerSolve));
  const logBytes = usage.parked !== undefined ? a.parkedConsumerLogBytesPerInvocation : a.consumerLogBytesPerInvocation;
  if (!pool) lines.push(p.logs('consumer logs + EMF', usage.invocations * logBytes));
  const governed = usage.governor ?? true;
  const consumerMetrics = a.consumerMetrics + (usage.parked !== undefined ? PARKED_CONSUMER_METRICS : 0);
  lines.push(p.customMetrics('consumer custom metrics', consumerMetrics, usage.hours));
  if (governed)
    lines.push(
      ...governorLines(
        usage.hours,
        a,
        { overflowLane: usage.overflowLane ?? false, parked: usage.parked !== undefined },
        options.governorSizing ??
          (usage.parked !== undefined
            ? parkedGovernorSizing({
                planThreads: options.planThreads,
                solverProtocol: 'res-php',
                dialect: 'captchaai',
              })
            : FUNCTION_SIZING.governor),
        prices,
      ),
    );
  lines.push(solverTrafficLine(usage, a, options.planThreads, governed, prices));
  const stack = usage.stack ?? (governed ? stackResources({ overflow: usage.overflowLane ?? false }) : undefined);
  if (stack !== undefined) lines.push(...standingLines(stack, usage.hours, a, prices));
  lines.push(
    ...keptDataLines(
      {
        records: usage.solved,
        recordBytes: answeredRecordBytes(usage, a),
        recordHours: a.resultRetentionHours,
        // Every log line above (GB ingested) is kept for the log groups' retention.
        logBytes: lines.reduce((sum, line) => sum + (line.unit === LOGS_UNIT ? line.quantity * 1e9 : 0), 0),
        logRetentionDays: a.logRetentionDays,
      },
      prices,
    ),
  );
  const planUsd = options.planThreads * usage.hours * (options.planUsdPerThreadHour ?? PLAN_USD_PER_THREAD_HOUR);
  return { ...billOf(lines), planUsd };
}

/**
 * What the fleet sends the solver (data transfer out, solver-traffic.ts): its submissions, the
 * watch's bulk polls of every parked submission and its fetch of each ready answer, the result
 * requests of the solves no watch polls, the governor's balance read a tick. The parked
 * submissions a round asks about are the live slots the governor's reads of the leases saw, over
 * the plan's shards.
 */
function solverTrafficLine(
  usage: FleetUsage,
  a: CostAssumptions,
  planThreads: number,
  governed: boolean,
  prices: PriceTable,
): BillLine {
  const parked = usage.parked;
  const watched = parked?.recordedByWatch ?? 0;
  const bytes = solverBytesOut({
    submissions: usage.submissions,
    submissionBytes: a.taskBytes,
    singlePolls: watched + Math.max(0, usage.solved - watched) * a.pollsPerUnwatchedSolve,
    watchRounds: parked === undefined ? 0 : (parked.watchRounds ?? usage.hours * 60 * WATCH_CALLS.roundsPerMinute),
    parkedPerRound:
      parked === undefined ? 0 : meanLive(parked.governorShardReads) * shardKeys('primary', planThreads).length,
    balanceReads: governed ? usage.hours * 60 * a.governorTicksPerMinute : 0,
  });
  return pricer(prices).dataOut('solver requests (data transfer out)', bytes);
}

/** Mean live slots of the Queries counted by live slots read (index = live slots, value = Queries). */
function meanLive(byLive: readonly number[]): number {
  let queries = 0;
  let slots = 0;
  byLive.forEach((count, live) => {
    queries += count;
    slots += count * live;
  });
  return queries > 0 ? slots / queries : 0;
}

/** Compute: Lambda invocations, instances Lambda manages, or the VMs a pool runs on. */
function computeLines(usage: FleetUsage, prices: PriceTable): BillLine[] {
  const p = pricer(prices);
  if (usage.poolVmHours !== undefined)
    return [p.ec2Hours('pool VMs (t4g.small)', usage.poolVmHours, prices.ec2.t4gSmallUsdPerHour)];
  if (usage.managedInstances !== undefined) {
    const { hours, usdPerHour } = usage.managedInstances;
    return [
      p.ec2Hours('managed instances (+ markup, NAT)', hours, usdPerHour),
      p.lambdaRequests('consumer requests', usage.invocations),
    ];
  }
  const sizing =
    usage.consumerSizing ??
    consumerSizing({ solveMode: usage.parked !== undefined ? 'park' : 'wait', tasksPerInvocation: 1 });
  const overflow = usage.overflowInvocationSeconds ?? 0;
  return [
    p.lambdaDuration('consumer duration', sizing, usage.invocationSeconds),
    ...(overflow > 0
      ? [p.lambdaDuration('overflow consumer duration', FUNCTION_SIZING.overflowConsumer, overflow)]
      : []),
    p.lambdaRequests('consumer requests', usage.invocations),
  ];
}

/** Queue: producers' sends, the mapping's receives and deletes (or hides), hand-backs, copies, idle long polls. */
function queueLines(usage: FleetUsage, a: CostAssumptions, prices: PriceTable): BillLine[] {
  const p = pricer(prices);
  const lines = [
    p.sqsRequests('producer SendMessage', usage.tasks, a.taskBytes),
    p.sqsRequests('receive + delete (or hide)', usage.invocations * CONSUMER_CALLS.sqsPerInvocation),
    p.sqsRequests('hand-backs (ChangeMessageVisibility)', usage.handBacks * CONSUMER_CALLS.sqsPerHandBack),
  ];
  if (usage.copiesSent > 0) lines.push(p.sqsRequests('fresh copies (SendMessage)', usage.copiesSent, a.taskBytes));
  const mappings = Math.min(a.mappings, Math.max(0, usage.pollingMappings ?? a.mappings));
  lines.push(p.sqsRequests('idle long polls (ReceiveMessage)', idleLongPolls(mappings, usage.hours, a)));
  return lines;
}

/**
 * Results table and thread ledger, as the consumers write them: the waiting design's calls, or
 * the parked design's (its consumer-recorded solves, the ones a resuming delivery read).
 */
function storeLines(usage: FleetUsage, a: CostAssumptions, prices: PriceTable): BillLine[] {
  const p = pricer(prices);
  const parked = usage.parked !== undefined;
  const calls = parked ? PARKED_CONSUMER_CALLS : CONSUMER_CALLS;
  const record = writeUnits(a.recordBytes);
  const ledger = writeUnits(a.ledgerBytes);
  // Never below 0: a local run's watch may have recorded more than its summary counted solved (it
  // goes on recording while the run is counted), which billed a negative count of writes.
  const byConsumer = Math.max(0, usage.solved - (usage.parked?.recordedByWatch ?? 0));
  const ledgerReads = parked ? PARKED_CONSUMER_CALLS.ledgerReadsPerSubmission : CONSUMER_CALLS.readsPerSubmission;
  return [
    p.dynamoWrites(
      'claims, solver ids',
      usage.deliveries * CONSUMER_CALLS.writesPerDelivery * record + usage.acceptedSubmissions * record,
    ),
    p.dynamoWrites(
      'results, announcement notes',
      byConsumer * CONSUMER_CALLS.answerWritesPerSolve * answeredRecordUnits(usage, a),
    ),
    p.dynamoWrites(
      'thread ledger (accepted, released, refused)',
      (usage.acceptedSubmissions + byConsumer * calls.ledgerWritesPerSolve + usage.overCapAnswers) * ledger,
    ),
    p.dynamoWrites('hand-backs (release, ledger)', usage.handBacks * calls.writesPerHandBack * record),
    p.dynamoReads(
      'thread ledger reads before a submission',
      usage.submissions * ledgerReads * strongReadUnits(a.ledgerBytes),
    ),
  ];
}

/** The parked design's own calls: the leases (consumers and governor) and the watch's records. */
function parkedLines(usage: FleetUsage, parked: ParkedUsage, a: CostAssumptions, prices: PriceTable): BillLine[] {
  const hours = usage.hours;
  const p = pricer(prices);
  const slot = writeUnits(a.leaseSlotBytes);
  const query = (live: number) => strongReadUnits(a.leaseMetaBytes + live * a.leaseSlotBytes);
  return [
    p.dynamoWrites('leases: slots taken, freed', (parked.leaseTakes + parked.leaseReleases) * slot),
    p.dynamoWrites('leases: shard limits, refusals', parked.metaWrites * writeUnits(a.leaseMetaBytes)),
    p.dynamoWrites('watch: leases renewed', (parked.leaseRenewals ?? 0) * slot),
    p.sqsRequests('watch: messages kept hidden (renewed leases)', parked.leaseRenewals ?? 0),
    p.dynamoReads("leases: consumers' shard reads", shardReadUnits(parked.consumerShardReads, query) / 2),
    p.dynamoReads("leases: governor's shard reads (watch, ticks)", shardReadUnits(parked.governorShardReads, query)),
    p.dynamoReads('watch: lease records read', (parked.recordReads * strongReadUnits(a.recordBytes)) / 2),
    p.dynamoWrites(
      'watch: results',
      parked.recordedByWatch * WATCH_CALLS.answerWritesPerRecord * answeredRecordUnits(usage, a),
    ),
    p.dynamoWrites(
      'watch: solved count (thread ledger)',
      watchSolvedWrites(parked.recordedByWatch, hours) * writeUnits(a.ledgerBytes),
    ),
    p.sqsRequests('watch: DeleteMessageBatch', watchDeleteRequests(parked.recordedByWatch, hours)),
    p.logs(
      'watch logs + EMF',
      parked.recordedByWatch * a.watchLogBytesPerRecord +
        watchEmfDocuments(parked.recordedByWatch, hours) * (LOG_BYTES.watchEmf + LOG_BYTES.perEvent),
    ),
    p.dynamoReads('watch relay: baton reads', hours * 60 * WATCH_CALLS.relayReadsPerMinute),
    p.dynamoWrites('watch relay: baton writes', hours * 60 * WATCH_CALLS.relayWritesPerMinute),
  ];
}

/**
 * The parked fleet's metric window (functions/core/solve-window.ts): the watch's solves, one write
 * a batch as its solved count, and each minute's first write once more (its slot started afresh:
 * the refused conditional update is billed too); a consumer's write for each delivery that saw an
 * error answer or read an answer itself (an ordinary parked delivery writes nothing: its
 * submission is the ledger's); the governor's read once a minute: two slots and the ledger.
 */
function windowLines(usage: FleetUsage, parked: ParkedUsage, a: CostAssumptions, prices: PriceTable): BillLine[] {
  const p = pricer(prices);
  const minutes = usage.hours * 60;
  const slot = writeUnits(a.windowSlotBytes);
  const errorAnswers = Math.max(0, usage.submissions - usage.acceptedSubmissions - usage.overCapAnswers);
  const byConsumer = Math.max(0, usage.solved - parked.recordedByWatch);
  return [
    p.dynamoWrites(
      'metric window: watch batches',
      (watchSolvedWrites(parked.recordedByWatch, usage.hours) + minutes) * slot,
    ),
    p.dynamoWrites('metric window: consumers', (errorAnswers + byConsumer) * slot),
    p.dynamoReads(
      'metric window: governor reads',
      minutes * (WINDOW_MINUTES * strongReadUnits(a.windowSlotBytes) + strongReadUnits(a.ledgerBytes)),
    ),
  ];
}

/** Read units of shard Queries counted by the live slots each read (strongly consistent; half for eventual). */
function shardReadUnits(byLive: readonly number[], units: (live: number) => number): number {
  let total = 0;
  byLive.forEach((queries, live) => {
    total += queries * units(live);
  });
  return total;
}

/** The governor over `hours`: its minute-long invocations, its reads per tick, its metrics. */
function governorLines(
  hours: number,
  a: CostAssumptions,
  { overflowLane, parked }: { overflowLane: boolean; parked: boolean },
  sizing: FunctionSizing = FUNCTION_SIZING.governor,
  prices: PriceTable,
): BillLine[] {
  const p = pricer(prices);
  const minutes = hours * 60;
  const ticks = minutes * a.governorTicksPerMinute;
  return [
    p.lambdaDuration('governor duration', sizing, minutes * a.governorSecondsPerInvocation),
    p.lambdaRequests('governor requests', minutes),
    p.sqsRequests('governor GetQueueAttributes', ticks * GOVERNOR_CALLS.sqsPerTick),
    p.dynamoReads('governor reads (ledger, state, store probe)', ticks * GOVERNOR_CALLS.readsPerTick),
    p.dynamoWrites('governor state', ticks * GOVERNOR_CALLS.writesPerTick),
    p.getMetricData(
      'governor GetMetricData',
      minutes *
        ((parked ? GOVERNOR_CALLS.parkedMetricsPerMinute : GOVERNOR_CALLS.metricsPerMinute) +
          (overflowLane ? GOVERNOR_CALLS.overflowMetricsPerMinute : 0)) +
        hours * GOVERNOR_CALLS.governorColdStartsPerHour * GOVERNOR_CALLS.queueMetricsPerColdStart,
    ),
    p.logs('governor logs + EMF', ticks * a.governorLogBytesPerTick),
    p.customMetrics('governor custom metrics', a.governorMetrics + (parked ? PARKED_GOVERNOR_METRICS : 0), hours),
  ];
}

/** The bill's services and their sums, in one line ("lambda $0.41 · sqs $0.01 · …"), those under a shown cent (or digit) left out. */
export function describeBill(bill: Bill, digits = 4): string {
  // A service that would print as $0.00… is left out (the bill's total still counts it).
  const shown = 0.5 * 10 ** -digits;
  return Object.entries(bill.byService)
    .filter(([, usd]) => usd >= shown)
    .sort((x, y) => y[1] - x[1])
    .map(([service, usd]) => `${service} $${usd.toFixed(digits)}`)
    .join(' · ');
}
