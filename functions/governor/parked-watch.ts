/**
 * The governor's watch over parked tasks (the parked design, solveMode `park`). Its invocation
 * runs all minute anyway (a tick every 10 s); between ticks, every `pollMs`, the watch asks the
 * solver about every parked submission at once (res.php `action=get&ids=…`, one request per 100
 * ids a round; in AWS a round every 100 ms while it takes one request, slower as it takes more:
 * `watchPollMs`).
 * It reads the thread leases (a Query of every shard) at most every `viewEveryMs` and then learns
 * each new lease's submission from its task's record (once the holder has parked it: the id on
 * the record, no live claim); the rounds between reuse the last read, less the leases freed or
 * ended since. For each submission that is ready (or ended) it frees its lease and
 * makes its message visible again: a short consumer invocation resumes the submission, reads the
 * answer and records it. The watch reads no answer and writes no result: recording stays the
 * consumer's (one code path), and a watch that stops (an invocation's end, a crash) only delays
 * tasks until their lease ends and their message comes back by itself.
 *
 * A round frees the slots it found ready and goes on: the answers it records (a result request,
 * the conditional write, the event, the delete: about as long again as the round's own request)
 * finish beside the next rounds, at most `MAX_RECORDING` at a time, and `run` waits for them
 * before it ends. Before, each round waited for its records, so on a busy plan the rounds came
 * about 250 ms apart whatever their cadence, and every freed slot waited that much longer.
 *
 * The answers the watch records itself are solves the consumers never see: it adds them to the
 * thread ledger's `solved` counter (the governor's price per solve is the balance drop over that
 * counter's rise), one update per batch, at most every `solvedFlushMs` and once more at the end
 * of its run. A batch whose write fails is kept and added to the next one.
 */
import { sleep as wait } from '../core/helpers/time.js';
import type { Clock, PollState, PollTarget, ResultsRepository, SolverPort, TaskQueue } from '../core/ports.js';
import { isTerminal, type TaskResult } from '../core/results.js';
import { type LeaseKeeper, type LeaseSlot, liveSlots, renewWithinMs, WATCH_BATCH_MS } from '../core/thread-leases.js';
import type { SolvedCounter } from '../core/thread-ledger.js';
import type { ParkedRecorder } from '../adapters/parked-recorder.js';
import type { RecordBase } from '../core/solved-record.js';
import type { GovernorLog } from './loop.js';

/**
 * Answers the watch records at once, at most: a round that would start more waits for some to
 * finish (a slow solver or store slows the rounds instead of piling up requests).
 */
export const MAX_RECORDING = 256;

/** What the watch needs. */
export interface ParkedWatchOptions {
  leases: LeaseKeeper;
  /** The lane's shard keys. */
  shards: readonly string[];
  /** Reads a task's record (eventually consistent is enough: the watch asks again next round). */
  results: Pick<ResultsRepository, 'get'>;
  solver: Required<Pick<SolverPort, 'pollMany'>>;
  /** The task queues: a task the consumers finish has its message made visible (ChangeMessageVisibility 0). */
  queue: Pick<TaskQueue, 'changeVisibility'>;
  /**
   * Records a ready parked task's answer (functions/adapters/parked-recorder.ts). Absent: every
   * ready parked task is shown to the consumers instead, which record it in a second delivery.
   */
  recorder?: ParkedRecorder;
  /** The thread ledger's `solved` counter: the recorded answers are added to it in batches. */
  solved?: SolvedCounter;
  /** Longest a recorded answer waits before its batch is added to `solved`, ms. @default WATCH_BATCH_MS (10 000) */
  solvedFlushMs?: number;
  /**
   * The deletes of the recorded tasks' messages, batched (the recorder adds them): sent when due
   * after each round and all at the end of the run (and by `flushSolved`).
   */
  deletes?: { flushIfDue(): Promise<void>; flush(): Promise<void> };
  /** The recorded solves on their way to the parked fleet's metric window (the recorder adds them): written when due and at the end. */
  window?: { flushIfDue(): Promise<void>; flush(): Promise<void> };
  /** The recorded solves' metrics, published once a batch (the recorder adds them): when due and at the end. */
  metricsBatch?: { flushIfDue(): Promise<void>; flush(): Promise<void> };
  /**
   * Time between rounds, ms: a number, or the time after a round that asked about `polled`
   * submissions (the governor's: `watchPollMs` of the requests they take, 100–500 ms). @default 1000
   */
  pollMs?: number | ((polled: number) => number);
  /**
   * The shortest time between two result requests for one submission, ms, counted from the
   * solver's acceptance for the first (the governor's: `pollGapMs`, 3–5 s for the JSON task API,
   * whose providers refuse or drop a task asked more often; 0 for res.php, whose ids are asked
   * 100 to a request). A round asks only about the submissions whose gap has passed. @default 0
   */
  pollGapMs?: number;
  /**
   * After a round the solver answered for none of its submissions (each refused, rate-limited or
   * unreachable) or that failed, the next waits at least this long, ms: a solver that pushes back
   * is not asked ten times a second. @default 0
   */
  backoffPollMs?: number;
  /**
   * The leases are read (one Query a shard) at most this often, ms; the rounds between poll the
   * leases the last read found, less those freed or ended since (a lease taken meanwhile waits
   * for the next read: its solve has only begun). @default 1000
   */
  viewEveryMs?: number;
  /** A lease younger than this is not looked up yet (its holder is still parking it), ms. @default 300 */
  settleMs?: number;
  /**
   * The leases' length (leaseLengthMs). Given, a parked lease whose answer a round did not find
   * (still solving, or the solver unable to say) is renewed for this long once it ends within
   * `renewWithinMs` of it, and its message kept hidden as long: the solver may still hold its
   * thread. Absent: leases end by themselves.
   */
  leaseMs?: number;
  clock?: Clock;
  sleep?: (ms: number) => Promise<void>;
  log?: GovernorLog;
}

/** What the watch did, summed since it started. */
export interface ParkedWatchStats {
  rounds: number;
  /** Rounds that read the leases (a Query of every shard); the others reused the last read. */
  views: number;
  /** Rounds that failed as a whole (the leases or the solver unreadable). */
  failedRounds: number;
  /** Parked submissions asked about, summed over the rounds. */
  polled: number;
  /** Leases freed because their answer was ready (or their solve ended). */
  released: number;
  /** Ready parked tasks the watch recorded itself. */
  recorded: number;
  /** Recorded answers added to the ledger's `solved` counter (the rest wait for the next batch). */
  solvedCounted: number;
  /** Writes of a batch to the ledger's `solved` counter (one UpdateItem each), failed ones included. */
  solvedWrites: number;
  /** Parked tasks shown to the consumers again (their solve ended without an answer, or recording failed). */
  shown: number;
  /** Messages that could not be made visible again (they come back at their lease's end). */
  showFailures: number;
  /** Parked leases renewed because the solver had not answered for them yet (with their messages' hiding). */
  renewed: number;
  /** Renewals that failed (the lease ends by itself; a message not kept hidden comes back to a consumer). */
  renewFailures: number;
  /** Parked tasks the last round saw. */
  parked: number;
  /** Live leases the last round saw (parked or still held by their invocation). */
  live: number;
}

/**
 * What the watch knows of one lease: its submission (once on the record), whether its task is
 * parked (no live claim: the watch shows its message again when ready), or that it freed it.
 */
type Known =
  | { kind: 'submitted'; target: PollTarget; parked: boolean; base: RecordBase; acceptedAt: number | undefined }
  | { kind: 'released' };

/** The watch: `round()` once, or `run(…)` until shortly before the invocation ends. */
export interface ParkedWatch {
  /**
   * One round. By default it resolves once the answers it found are recorded; with
   * `{ recording: 'beside' }` once its slots are freed, its answers recorded beside the next
   * rounds (`settle` waits for them).
   */
  round(options?: { recording?: 'awaited' | 'beside' }): Promise<void>;
  /**
   * Rounds every `pollMs` while `remainingMs()` leaves at least `marginMs` (and, when given, until
   * `done()`, asked before each round: the relay's question whether the next invocation waits),
   * each recording its answers beside the next; then it waits for the last of them and flushes.
   */
  run(remainingMs: () => number, marginMs: number, done?: () => boolean | Promise<boolean>): Promise<void>;
  /** Wait for the answers being recorded (never throws). */
  settle(): Promise<void>;
  /**
   * Add the recorded answers not yet counted to the ledger's `solved`, once those being recorded
   * are (never throws; a failed write keeps them).
   */
  flushSolved(): Promise<void>;
  /**
   * Add the answers recorded so far and not yet counted to the ledger's `solved` now, without
   * waiting for those being recorded (never throws; a failed write keeps them). The governor's
   * tick calls it before it reads the balance and the ledger: the provider charges a solve when
   * it ends, so a count that waited for its batch (up to `solvedFlushMs`) set against the balance's
   * drop counted solves the drop had charged an interval before, and the price per solve read low
   * where the solves slowed (the spend grant then let solves start past the pause level).
   */
  countSolvedNow(): Promise<void>;
  /**
   * Answers the watch found ready and freed whose count is not on the ledger's `solved` yet: being
   * recorded, or recorded and waiting for their batch (a batch whose write is under way is on its
   * way: not counted here). The provider charged them when they became ready, and their leases are
   * freed, so the ledger's held and solved counts both miss them until their batch lands; the
   * governor's reading adds them to `solved` (lease-step.ts), or the price per solve is learned from
   * a drop that charged them beside a count that does not have them, and then from a count that
   * has them beside a drop that does not (a fresh `npm start` learned $0.0015 for a $0.003 solve
   * after its first second, 9 answers of 15 accepted freed and still recording at the read, and
   * ended 7–8 solves past the pause level on it).
   */
  answersUncounted(): number;
  readonly stats: ParkedWatchStats;
}

/**
 * How long the watch follows a ready answer whose holder still had its claim, ms: a holder polls
 * for a few seconds before it parks, and one that dies leaves its claim for at most a function's
 * timeout, after which the record shows no live claim and the answer is recorded here.
 */
const HOLDER_FOLLOW_MS = 16 * 60_000;
/** Between two reads of a followed answer's record, ms. */
const HOLDER_READ_GAP_MS = 1_000;

const keyOf = (slot: LeaseSlot) => `${slot.shard}/${slot.slot}/${slot.taskId}/${slot.takenAt}`;

/** Build the watch. */
export function createParkedWatch(options: ParkedWatchOptions): ParkedWatch {
  const clock = options.clock ?? Date.now;
  const sleep = options.sleep ?? wait;
  const cadence = roundCadence(options.pollMs);
  /** The last round: the submissions it asked about, and whether the solver answered for any (none asked: yes). */
  let last = { polled: 0, answered: true };
  const pollMs = () => Math.max(cadence(last.polled), last.answered ? 0 : (options.backoffPollMs ?? 0));
  const settleMs = options.settleMs ?? 300;
  const liveLeases = leaseReader(options, () => {
    stats.views += 1;
  });
  const known = new Map<string, Known>();
  const stats = emptyStats();
  /** When each lease's submission was last seen not ready (a recorded token's expiry counts from it). */
  const notReadyAt = new Map<string, number>();
  /** When each lease's submission was last asked about (`pollGapMs` counts from it). */
  const polledAt = new Map<string, number>();
  const gapMs = options.pollGapMs ?? 0;
  const solved = solvedBatch(options, clock, stats);
  const recording = recordingBeside(options.log);
  const holders = holderFollow(options, stats, clock, (answer) => recording.begin(() => solved.answer(true)(answer())));

  /** A lease's submission once it is on the record, and whether its task is parked. */
  const learn = async (slot: LeaseSlot): Promise<void> => {
    const record = await readOrUnread(options, slot.taskId);
    if (record === UNREAD) return;
    if (record !== undefined && isTerminal(record.status)) {
      // Finished while its lease stood (by a holder that died before freeing it, a duplicate): free it.
      await release(slot);
      return;
    }
    const entry = record === undefined ? undefined : submittedOf(record, slot, clock());
    if (entry !== undefined) known.set(keyOf(slot), entry);
  };

  const release = async (slot: LeaseSlot): Promise<void> => {
    await options.leases.release(slot);
    known.set(keyOf(slot), { kind: 'released' });
  };

  /**
   * The answer is ready (or the solve ended): the solver's thread is free, whoever holds the
   * claim, so the lease is freed (a holder that died while polling cannot keep it). A parked
   * task's answer is recorded here when a recorder is given; a parked task the consumers must
   * finish (its solve ended, no recorder) has its message shown; one whose holder still polls is
   * followed until the holder records it or parks it (holderFollow).
   */
  const handBack = async (
    slot: LeaseSlot,
    entry: Extract<Known, { kind: 'submitted' }>,
    state: PollState,
  ): Promise<void> => {
    await release(slot);
    stats.released += 1;
    // Read now: the next round forgets what it knew of the leases freed before it.
    const lastNotReadyAt = notReadyAt.get(keyOf(slot));
    if (!entry.parked) return holders.follow(keyOf(slot), { slot, entry, state, lastNotReadyAt });
    const answer = solved.answer(state.state === 'ready' && options.recorder !== undefined);
    await recording.begin(() => answer(finishFreed(options, stats, { slot, entry, state, lastNotReadyAt })));
  };

  /** One round, then the solved batch when it is due (a failed round included: its count was made before). */
  const round = async (mode: Recording): Promise<void> => {
    try {
      await look();
      if (mode === 'awaited') await recording.settle();
    } finally {
      await solved.flushIfDue();
      await flushBatches(options, 'due');
    }
  };

  const look = async (): Promise<void> => {
    stats.rounds += 1;
    await holders.round();
    const now = clock();
    const [live, viewed] = await liveLeases(now, (slot) => known.get(keyOf(slot))?.kind === 'released');
    stats.live = live.length;
    const liveKeys = new Set(live.map(keyOf));
    for (const key of known.keys()) if (!liveKeys.has(key)) known.delete(key);
    for (const key of notReadyAt.keys()) if (!liveKeys.has(key)) notReadyAt.delete(key);
    for (const key of polledAt.keys()) if (!liveKeys.has(key)) polledAt.delete(key);
    // At a read of the leases: a lease not yet known, or whose holder still had its claim: (re)read its record.
    const unsettled = live.filter((slot) => {
      const entry = known.get(keyOf(slot));
      return (entry === undefined || (entry.kind === 'submitted' && !entry.parked)) && now - slot.takenAt >= settleMs;
    });
    if (viewed) await Promise.all(unsettled.map(learn));
    const watched = live.flatMap((slot) => {
      const entry = known.get(keyOf(slot));
      return entry?.kind === 'submitted' ? [{ slot, ...entry }] : [];
    });
    stats.parked = watched.filter((w) => w.parked).length;
    const { due, unanswered } = dueNow(watched, polledAt, gapMs, now);
    last = { polled: due.length, answered: true };
    if (due.length === 0) {
      await Promise.all(unanswered.map((slot) => renew(options, stats, slot, now)));
      return;
    }
    stats.polled += due.length;
    for (const w of due) polledAt.set(keyOf(w.slot), now);
    const states = await options.solver.pollMany(due.map((w) => w.target));
    last.answered = [...states.values()].some((state) => state.state !== 'unknown');
    const answeredAt = clock();
    const done: Array<{ w: (typeof watched)[number]; state: PollState }> = [];
    for (const w of due) {
      const state = states.get(w.target.solverId);
      if (state?.state === 'not_ready') notReadyAt.set(keyOf(w.slot), answeredAt);
      if (state !== undefined && isDone(state)) done.push({ w, state });
      else if (w.parked) unanswered.push(w.slot);
    }
    await Promise.all([
      ...done.map(({ w, state }) => handBack(w.slot, w, state)),
      ...unanswered.map((slot) => renew(options, stats, slot, answeredAt)),
    ]);
  };

  return {
    stats,
    round: (roundOptions) => round(roundOptions?.recording ?? 'awaited'),
    settle: recording.settle,
    countSolvedNow: () => solved.flush(),
    answersUncounted: solved.uncounted,
    async flushSolved() {
      await recording.settle();
      await solved.flush();
      await flushBatches(options, 'all');
    },
    async run(remainingMs, marginMs, done) {
      while (remainingMs() - pollMs() >= marginMs && !((await done?.()) ?? false)) {
        const started = clock();
        try {
          await round('beside');
        } catch (error) {
          last = { ...last, answered: false };
          stats.failedRounds += 1;
          options.log?.warn('parked watch round failed; trying again next round', {
            error: `${(error as Error).name}: ${(error as Error).message}`,
          });
        }
        await sleep(Math.max(0, started + pollMs() - clock()));
      }
      await recording.settle();
      await solved.flush();
      await flushBatches(options, 'all');
    },
  };
}

/**
 * A freed parked task: its answer recorded (true when the watch's write recorded it), or its
 * message shown to the consumers (its solve ended without an answer, or no recorder).
 */
async function finishFreed(
  options: ParkedWatchOptions,
  stats: ParkedWatchStats,
  freed: {
    slot: LeaseSlot;
    entry: Extract<Known, { kind: 'submitted' }>;
    state: PollState;
    lastNotReadyAt: number | undefined;
  },
): Promise<boolean> {
  const { slot, entry, state, lastNotReadyAt } = freed;
  if (state.state !== 'ready' || options.recorder === undefined) {
    await showAgain(options, stats, slot);
    return false;
  }
  const outcome = await options.recorder.record({
    taskId: slot.taskId,
    solverId: entry.target.solverId,
    base: entry.base,
    acceptedAt: entry.acceptedAt,
    delivery: slot.delivery,
    ...(lastNotReadyAt !== undefined ? { lastNotReadyAt } : {}),
  });
  if (outcome !== 'recorded') return false;
  stats.recorded += 1;
  return true;
}

/** Whether a round waits for the answers it records, or records them beside the next rounds. */
type Recording = 'awaited' | 'beside';

/**
 * The answers being recorded beside the rounds: `begin` starts one once fewer than
 * `MAX_RECORDING` are under way (waiting for one to finish otherwise), `settle` waits for all.
 * A recording that throws is logged, never rethrown: its message comes back at its lease's end.
 */
function recordingBeside(log: GovernorLog | undefined) {
  const underWay = new Set<Promise<void>>();
  return {
    async begin(work: () => Promise<void>): Promise<void> {
      while (underWay.size >= MAX_RECORDING) await Promise.race(underWay);
      const done: Promise<void> = work()
        .catch((error: unknown) => {
          log?.warn('parked answer not recorded; its message returns when its lease ends', {
            error: `${(error as Error).name}: ${(error as Error).message}`,
          });
        })
        .finally(() => underWay.delete(done));
      underWay.add(done);
    },
    async settle(): Promise<void> {
      while (underWay.size > 0) await Promise.all([...underWay]);
    },
  };
}

/**
 * The watched submissions a round asks about: those whose gap since their last request (or
 * their acceptance) has passed. A parked one not asked about is still unanswered: its lease
 * renews as one the solver had not answered for.
 */
function dueNow<W extends { slot: LeaseSlot; parked: boolean; acceptedAt: number | undefined }>(
  watched: readonly W[],
  polledAt: ReadonlyMap<string, number>,
  gapMs: number,
  now: number,
): { due: W[]; unanswered: LeaseSlot[] } {
  const due: W[] = [];
  const unanswered: LeaseSlot[] = [];
  for (const w of watched) {
    const since = polledAt.get(keyOf(w.slot)) ?? w.acceptedAt ?? w.slot.takenAt;
    if (now - since >= gapMs) due.push(w);
    else if (w.parked) unanswered.push(w.slot);
  }
  return { due, unanswered };
}

/** The time after a round that asked the solver about `polled` submissions, ms (`pollMs`: fixed, or of them). */
function roundCadence(pollMs: ParkedWatchOptions['pollMs']): (polled: number) => number {
  return typeof pollMs === 'function' ? pollMs : () => pollMs ?? 1_000;
}

/** What the watch learns of a lease from its task's record: its submission, once on the record. */
function submittedOf(
  record: TaskResult,
  slot: LeaseSlot,
  now: number,
): Extract<Known, { kind: 'submitted' }> | undefined {
  const submission = submissionOf(record, slot);
  if (submission === undefined) return undefined;
  const { method, priority, submittedAt, startedAt, queueWaitMs, provider } = record;
  return {
    kind: 'submitted',
    target: submission,
    parked: isParked(record, now),
    base: { method, priority, submittedAt, startedAt, queueWaitMs, provider },
    acceptedAt: record.solverAcceptedAt,
  };
}

/**
 * A parked lease the solver has not answered for (still solving, or unable to say) keeps its
 * thread counted: once it ends within `renewWithinMs`, renewed for a whole lease, its message
 * hidden as long (a solve the solver paused in an outage resumes after it; had its lease ended,
 * a new submission would have gone over the plan). A failure leaves the lease to end by itself.
 */
async function renew(
  options: ParkedWatchOptions,
  stats: ParkedWatchStats,
  slot: LeaseSlot,
  now: number,
): Promise<void> {
  const leaseMs = options.leaseMs;
  if (leaseMs === undefined || slot.until - now >= renewWithinMs(leaseMs)) return;
  const until = now + leaseMs;
  try {
    if (!(await options.leases.renew(slot, until))) return;
    // The cached read keeps the lease to its new end (leaseReader drops leases past `until`).
    slot.until = until;
    stats.renewed += 1;
    await options.queue.changeVisibility(slot.delivery, Math.ceil(leaseMs / 1000));
  } catch (error) {
    stats.renewFailures += 1;
    options.log?.warn('parked lease not renewed; it ends by itself', {
      taskId: slot.taskId,
      error: `${(error as Error).name}: ${(error as Error).message}`,
    });
  }
}

/** A parked task the consumers finish: its message shown again (a failure leaves it to its lease's end). */
async function showAgain(options: ParkedWatchOptions, stats: ParkedWatchStats, slot: LeaseSlot): Promise<void> {
  stats.shown += 1;
  try {
    await options.queue.changeVisibility(slot.delivery, 0);
  } catch (error) {
    stats.showFailures += 1;
    options.log?.warn('parked task not shown again; it returns when its lease ends', {
      taskId: slot.taskId,
      error: `${(error as Error).name}: ${(error as Error).message}`,
    });
  }
}

/** The watch's counts before its first round. */
function emptyStats(): ParkedWatchStats {
  return {
    rounds: 0,
    views: 0,
    failedRounds: 0,
    polled: 0,
    released: 0,
    recorded: 0,
    solvedCounted: 0,
    solvedWrites: 0,
    shown: 0,
    showFailures: 0,
    renewed: 0,
    renewFailures: 0,
    parked: 0,
    live: 0,
  };
}

/** The recorder's batches (the deletes, the metric window's solves, their metrics): what is due, or all of it. */
async function flushBatches(options: ParkedWatchOptions, which: 'due' | 'all'): Promise<void> {
  for (const batch of [options.deletes, options.window, options.metricsBatch])
    await (which === 'due' ? batch?.flushIfDue() : batch?.flush());
}

/**
 * The answers the watch recorded, on their way to the ledger's `solved` counter: one write per
 * batch, at most every `solvedFlushMs` (and when flushed); never throws, and a batch whose write
 * failed stays for the next.
 */
function solvedBatch(options: ParkedWatchOptions, clock: Clock, stats: ParkedWatchStats) {
  const flushMs = options.solvedFlushMs ?? WATCH_BATCH_MS;
  let uncounted = 0;
  let flushedAt = clock();
  /** The batch write under way, if any: a flush waits for it, so a tick reads the ledger with it landed. */
  let writing: Promise<void> | undefined;
  const write = async (count: number): Promise<void> => {
    stats.solvedWrites += 1;
    try {
      await options.solved?.countSolved(count);
      stats.solvedCounted += count;
    } catch (error) {
      uncounted += count;
      options.log?.warn('solved count not added to the thread ledger; kept for the next batch', {
        count,
        error: `${(error as Error).name}: ${(error as Error).message}`,
      });
    }
  };
  const flush = async (): Promise<void> => {
    while (writing !== undefined) await writing;
    const count = uncounted;
    if (options.solved === undefined || count === 0) return;
    // Taken before the write: a recording meanwhile joins the next batch, not this one twice.
    uncounted = 0;
    flushedAt = clock();
    const current = write(count);
    writing = current;
    try {
      await current;
    } finally {
      if (writing === current) writing = undefined;
    }
  };
  /** Ready answers freed and being recorded. */
  let recording = 0;
  return {
    /**
     * A freed answer's recording, counted from now (when `ready`: an answer the provider charged)
     * until it joins the batch, or is found not this watch's to record: in one step, so it is
     * never counted in both or in neither.
     */
    answer(ready: boolean) {
      if (ready) recording += 1;
      return async (recorded: Promise<boolean>): Promise<void> => {
        let counted = false;
        try {
          counted = await recorded;
        } finally {
          if (ready) recording -= 1;
          if (counted) uncounted += 1;
        }
      };
    },
    /** Answers being recorded or recorded and not yet in a batch write (ParkedWatch.answersUncounted). */
    uncounted: () => (options.solved === undefined ? 0 : recording + uncounted),
    flush,
    flushIfDue: () => (clock() - flushedAt >= flushMs ? flush() : Promise.resolve()),
  };
}

/**
 * The watch's reads of the leases: read afresh (true) when the last read is `viewEveryMs` old,
 * else the last read's live slots (false), less those the watch `freed` since or past their `until`.
 */
function leaseReader(options: ParkedWatchOptions, onRead: () => void) {
  const everyMs = options.viewEveryMs ?? 1_000;
  let last: { at: number; live: LeaseSlot[] } | undefined;
  return async (now: number, freed: (slot: LeaseSlot) => boolean): Promise<[LeaseSlot[], boolean]> => {
    if (last === undefined || now - last.at >= everyMs) {
      const live = (await options.leases.views(options.shards)).flatMap((view) => liveSlots(view, now));
      onRead();
      last = { at: now, live };
      return [live, true];
    }
    last.live = last.live.filter((slot) => slot.until > now && !freed(slot));
    return [last.live, false];
  };
}

const UNREAD = Symbol('unread');

/** The task's record (undefined: none), or UNREAD when it cannot be read now (a later round reads it again). */
async function readOrUnread(
  options: ParkedWatchOptions,
  taskId: string,
): Promise<TaskResult | undefined | typeof UNREAD> {
  try {
    return await options.results.get(taskId);
  } catch {
    return UNREAD;
  }
}

/** A ready answer whose holder still had its claim when the watch found it. */
interface HeldAnswer {
  slot: LeaseSlot;
  entry: Extract<Known, { kind: 'submitted' }>;
  state: PollState;
  lastNotReadyAt: number | undefined;
}

/**
 * Ready answers whose holder still had its claim (a resumed delivery polling before it parks),
 * followed until it records them (or the record moves on) or parks them, then recorded here
 * through `record`, for `HOLDER_FOLLOW_MS` at most; each record read at most once a second.
 * Before, such an answer was left to the holder, which could park instead (its poll window ran
 * out): nothing recorded it until its lease ended and the message came back.
 */
function holderFollow(
  options: ParkedWatchOptions,
  stats: ParkedWatchStats,
  clock: () => number,
  record: (answer: () => Promise<boolean>) => Promise<void>,
) {
  const followed = new Map<string, HeldAnswer & { until: number; readAt: number }>();
  const check = async (key: string, held: HeldAnswer & { until: number; readAt: number }, now: number) => {
    if (now < held.readAt) return;
    held.readAt = now + HOLDER_READ_GAP_MS;
    const current = await readOrUnread(options, held.slot.taskId);
    if (current === UNREAD) return;
    if (
      current === undefined ||
      current.solverId !== held.entry.target.solverId ||
      isTerminal(current.status) ||
      now > held.until
    ) {
      followed.delete(key);
      return;
    }
    if (!isParked(current, now)) return;
    followed.delete(key);
    await record(() => finishFreed(options, stats, { ...held, entry: { ...held.entry, parked: true } }));
  };
  return {
    /** Follow a ready answer (a recorder given); anything else is the holder's. */
    follow(key: string, held: HeldAnswer): void {
      if (held.state.state !== 'ready' || options.recorder === undefined) return;
      const now = clock();
      followed.set(key, { ...held, until: now + HOLDER_FOLLOW_MS, readAt: now });
    },
    async round(): Promise<void> {
      if (followed.size === 0) return;
      const now = clock();
      await Promise.all([...followed].map(([key, held]) => check(key, held, now)));
    },
  };
}

/** The solver has answered (or ended the solve): its thread is free, the message can come back. */
function isDone(state: PollState | undefined): boolean {
  return state?.state === 'ready' || state?.state === 'ended';
}

/**
 * The lease's submission on the record: one of the plan's, accepted after the lease was taken (an
 * older one is a previous delivery's, not this lease's); undefined until it is there.
 */
function submissionOf(record: TaskResult, slot: LeaseSlot): PollTarget | undefined {
  if (record.status !== 'solving' || record.solverId === undefined) return undefined;
  if ((record.solverProvider ?? 'primary') !== 'primary') return undefined;
  if (record.solverAcceptedAt !== undefined && record.solverAcceptedAt < slot.takenAt) return undefined;
  return { solverId: record.solverId, method: record.method ?? 'userrecaptcha' };
}

/** No live claim on the record: its holder parked the task (or died and its claim ran out). */
function isParked(record: TaskResult, now: number): boolean {
  return record.claimToken === undefined || (record.leaseUntil ?? 0) < now;
}
