/**
 * The discrete-event simulator. One run replays one trace against one policy on a virtual clock:
 * Poisson arrivals, a queue, consumers (Lambda invocations or pool workers) that take one task
 * at a time, the solver with its thread cap, foreign threads and a balance, and the signals the
 * governor would read (queue attributes fresh, CloudWatch metrics a minute late).
 *
 * Events are numbers (`taskId × 16 + kind`) in a binary heap, and tasks live in typed arrays:
 * a simulated day of 10⁶ tasks allocates almost nothing per event.
 */
import { assembleSignals, type MetricsWindow, type QueueReading } from '../functions/core/governor/signals.js';
import type { GovernorSignals } from '../functions/core/governor/types.js';
import type { LedgerEvent, ThreadLedgerReading } from '../functions/core/thread-ledger.js';
import { percentileOfSorted } from '../functions/core/helpers/stats.js';
import type { FleetSettings } from '../functions/core/settings.js';
import { DEFAULT_POLL, METHOD_KIND } from '../functions/core/solver-protocol.js';
import { at, bumpF64, bumpU16, bumpU8, f64, i32, u16, u8 } from './arrays.js';
import { EventHeap } from './heap.js';
import { DEFAULT_MODEL, type ModelParams } from './model.js';
import { OverflowLane, type OverflowResult, type OverflowSpec } from './overflow.js';
import { Rng } from './rng.js';
import { valueAt, type Trace } from './trace.js';

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
  /** A pay-per-solve overflow provider fed from the same queue (Lambda policies; lab/overflow.ts). */
  readonly overflow?: OverflowSpec;
  tick?(view: PolicyView): ControlAction;
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
  /** Solves accepted while the balance was under the halt level, and under the pause level. */
  startedPastHalt: number;
  startedPastPause: number;
  haltCrossedAt: number | null;
  scalingChanges: number;
  /** Worker-seconds (pools, billed while idle) or invocation-seconds (Lambda). */
  computeSeconds: number;
  computeUsd: number;
  usdPer1000Solves: number | null;
  invocations: number;
  solverUsd: number;
  reasons: Record<string, number>;
  /** The overflow lane's solves and spend, for a policy with one. */
  overflow?: OverflowResult;
  samples: Samples;
  /** Simulated seconds, events processed and wall-clock ms of the run. */
  simulatedSeconds: number;
  events: number;
  wallMs: number;
}

const K_ARRIVAL = 0;
const K_SUBMIT = 1;
const K_DONE = 2;
const K_TICK = 3;
const K_ESM = 4;
const K_READY = 5;
const K_SAMPLE = 6;
const K_WORLD = 7;
/** The solver finished a task whose invocation had already handed it back (or will read it later). */
const K_SOLVER_DONE = 8;
/** A resumed invocation reads an answer the solver finishes now. */
const K_READ = 9;
/** An invocation gives up polling (outage, deadline) and hands its task back. */
const K_GIVE_UP = 10;
/** A handed-back message becomes visible again. */
const K_VISIBLE = 11;
/** An overflow-lane solve ends: charged by the overflow provider and recorded. */
const K_OVERFLOW_DONE = 12;

/** Where a task stands at the solver. */
const NEW = 0;
const ACCEPTED = 1;
const SOLVED = 2;
/** Why an invocation gave up polling. */
const GAVE_UP_OUTAGE = 0;
const GAVE_UP_DEADLINE = 1;

const BUCKET_SECONDS = 10;
const RING = 256;
const DEFAULT_EPOCH_MS = Date.UTC(2025, 0, 1);

/** Replays `trace` against `policy`; deterministic for a given seed. */
export function simulate(trace: Trace, policy: Policy, options: RunOptions): RunResult {
  return new Simulation(trace, policy, options).run();
}

class Simulation {
  private readonly settings: FleetSettings;
  private readonly model: ModelParams;
  private readonly heap = new EventHeap<number>();
  private readonly arrivalRng: Rng;
  private readonly taskRng: Rng;
  private readonly jitterRng: Rng;
  private readonly epochMs: number;
  private readonly seed: number;
  private readonly duration: number;
  private readonly endLimit: number;
  private readonly sampleSeconds: number;
  private readonly plan: number;
  private readonly price: number;
  private readonly overflowLane: OverflowLane | undefined;
  private readonly methodCdf: Float64Array;
  private readonly methodMu: Float64Array;
  private readonly methodSigma: Float64Array;
  private readonly methodPoll: { first: number; interval: number }[];

  private t = 0;
  private lastT = 0;
  private events = 0;
  private finished = false;
  private arrivalsDone = false;
  private arrivalPiece = 0;

  // Tasks, by id.
  private taskCount = 0;
  private arrivedAt = new Float64Array(1 << 16);
  private acceptedAt = new Float64Array(1 << 16);
  private baseSolve = new Float64Array(1 << 16);
  private methodOf = new Uint8Array(1 << 16);
  /** Pool workers: over-cap and transient answers so far (the backoff's exponent). */
  private attempts = new Uint16Array(1 << 16);
  /** Lambda: receives so far (SQS ApproximateReceiveCount). */
  private receives = new Uint16Array(1 << 16);
  /** Lambda: over-cap and transient answers within the current invocation. */
  private overCapTries = new Uint8Array(1 << 16);
  private transientTries = new Uint8Array(1 << 16);
  private phase = new Uint8Array(1 << 16);
  private solverDoneAt = new Float64Array(1 << 16);
  private invocationStart = new Float64Array(1 << 16);
  private gaveUpWhy = new Uint8Array(1 << 16);
  /** Lambda: 1 while the task's invocation holds its thread in the thread ledger (accepted, answer not read). */
  private leased = new Uint8Array(1 << 16);

  // The thread ledger the consumer writes and the governor reads each tick (fresh, no lag).
  private ledgerHeld = 0;
  private ledgerRefusals = 0;
  private ledgerAcceptances = 0;
  private lastRefusal: LedgerEvent | undefined;
  private lastAcceptance: LedgerEvent | undefined;

  // The queue: a ring of task ids.
  private queue = new Int32Array(1 << 12);
  private qHead = 0;
  private qLen = 0;

  // Consumers and the solver.
  private busy = 0;
  /** Messages handed back and not yet visible again. */
  private hidden = 0;
  private ourThreads = 0;
  private outage = false;
  private foreign = 0;
  private factor = 1;
  private balance: number;
  private target: number;
  private enabled = true;
  private allowance = 0;
  /** Highest `busy` within each of the last ESM steps (a ring), for the slow scale-down. */
  private busyHighWater = new Float64Array(1);
  private stepHigh = 0;
  private stepIndex = 0;
  private warm = 0;
  private ready = 0;
  private starting = 0;

  // Measurements.
  private latencies = new Float64Array(1 << 16);
  private solved = 0;
  private submissions = 0;
  private overCap = 0;
  private accountErrors = 0;
  private transientErrors = 0;
  private deadLettered = 0;
  private handBacks = 0;
  private maxReceives = 0;
  private idleThreadSeconds = 0;
  private startedPastHalt = 0;
  private startedPastPause = 0;
  private haltCrossedAt: number | null = null;
  private scalingChanges = 0;
  private invocations = 0;
  private computeSeconds = 0;
  private backlogSeconds = 0;
  private busyThreadSecondsBacklog = 0;
  private freeThreadSecondsBacklog = 0;
  private peakBacklog = 0;
  private peakAt = 0;
  private drainSeconds: number | null = 0;
  private readonly reasons: Record<string, number> = {};
  private readonly samples: Samples = { t: [], backlog: [], ceiling: [], inFlight: [] };

  // Metric buckets for the lagged signals.
  private readonly bucketId = new Float64Array(RING).fill(-1);
  private readonly bCompletions = new Float64Array(RING);
  private readonly bSubmissions = new Float64Array(RING);
  private readonly bOverCap = new Float64Array(RING);
  private readonly bAccount = new Float64Array(RING);
  private readonly bTransient = new Float64Array(RING);
  private readonly bResultRequests = new Float64Array(RING);
  private readonly bSolveMs: number[][] = Array.from({ length: RING }, () => []);

  constructor(
    private readonly trace: Trace,
    private readonly policy: Policy,
    options: RunOptions,
  ) {
    this.settings = trace.settings;
    this.model = { ...DEFAULT_MODEL, ...options.model };
    const root = new Rng(options.seed);
    this.arrivalRng = root.fork(1);
    this.taskRng = root.fork(2);
    this.jitterRng = root.fork(3);
    this.epochMs = options.epochMs ?? DEFAULT_EPOCH_MS;
    this.seed = options.seed;
    this.duration = trace.durationSeconds;
    this.endLimit = this.duration + (options.drainLimitSeconds ?? Math.max(3600, this.duration));
    this.sampleSeconds = options.sampleSeconds ?? Math.max(5, this.duration / 720);
    this.plan = this.settings.planThreads;
    this.price = trace.balance.pricePerSolveUsd;
    this.balance =
      trace.balance.initialUsd +
      trace.balance.topUps.filter((topUp) => topUp.at === 0).reduce((sum, topUp) => sum + topUp.usd, 0);
    const methods = trace.methods;
    this.methodCdf = new Float64Array(methods.length);
    this.methodMu = new Float64Array(methods.length);
    this.methodSigma = new Float64Array(methods.length);
    let cumulative = 0;
    methods.forEach((m, i) => {
      cumulative += m.share;
      this.methodCdf[i] = cumulative;
      if (m.distribution === 'exponential') {
        // σ < 0 marks an exponential method; μ holds its mean.
        this.methodMu[i] = m.meanSeconds;
        this.methodSigma[i] = -1;
      } else {
        this.methodMu[i] = Math.log(m.medianSeconds);
        // p95 of a log-normal is median × e^(1.645 σ).
        this.methodSigma[i] = Math.log(m.p95Seconds / m.medianSeconds) / 1.6448536269514722;
      }
    });
    this.methodCdf[methods.length - 1] = 1;
    this.methodPoll = methods.map((m) => {
      const poll = DEFAULT_POLL[METHOD_KIND[m.method]];
      return { first: poll.firstPollMs / 1000, interval: poll.intervalMs / 1000 };
    });
    this.target = policy.initialTarget(this.settings);
    this.overflowLane = policy.overflow === undefined ? undefined : new OverflowLane(policy.overflow);
  }

  run(): RunResult {
    const started = performance.now();
    this.setWorld();
    this.checkBalanceLevels();
    if (this.policy.capacity === 'lambda') {
      this.allowance = Math.min(this.model.esmInitialConcurrency, this.target);
      this.busyHighWater = new Float64Array(
        Math.max(1, Math.round(this.model.esmScaleDownSeconds / this.model.esmStepSeconds)),
      );
      this.heap.push(this.model.esmStepSeconds, K_ESM);
    } else if (this.policy.capacity === 'pool') {
      this.ready = this.target;
    }
    const topUpTimes = this.trace.balance.topUps.map((topUp) => topUp.at);
    const outageEdges = this.trace.outages.flatMap((o) => [o.start, o.end]);
    const changes = [...this.trace.foreignThreads.at, ...this.trace.solveTimeFactor.at, ...topUpTimes, ...outageEdges];
    for (const at of new Set(changes)) {
      if (at > 0) this.heap.push(at, K_WORLD);
    }
    if (this.policy.periodSeconds !== undefined && this.policy.tick) this.heap.push(0, K_TICK);
    this.heap.push(0, K_SAMPLE);
    this.scheduleArrival(0);

    const heap = this.heap;
    while (!this.finished && heap.size > 0) {
      const time = heap.peekTime();
      if (time > this.endLimit) break;
      const event = heap.pop() as number;
      this.advance(time);
      this.events++;
      const kind = event & 15;
      const id = (event - kind) / 16;
      switch (kind) {
        case K_ARRIVAL:
          this.arrive();
          break;
        case K_SUBMIT:
          this.submit(id);
          break;
        case K_DONE:
          this.done(id);
          break;
        case K_TICK:
          this.controlTick();
          break;
        case K_ESM:
          this.esmStep();
          break;
        case K_READY:
          this.starting--;
          if (this.ready < this.target) this.ready++;
          this.dispatch();
          break;
        case K_SAMPLE:
          this.sample();
          break;
        case K_WORLD:
          this.setWorld();
          this.dispatch();
          break;
        case K_SOLVER_DONE:
          this.solverFinish(id);
          break;
        case K_READ:
          this.read(id);
          break;
        case K_GIVE_UP:
          this.giveUp(id);
          break;
        case K_VISIBLE:
          this.hidden--;
          this.enqueue(id);
          this.dispatch();
          break;
        case K_OVERFLOW_DONE:
          this.overflowLane?.finish(this.t);
          this.record(id);
          this.dispatch();
          this.checkFinished();
          break;
      }
    }
    this.sample();
    return this.result(performance.now() - started);
  }

  // ---- traffic -------------------------------------------------------------------------------

  /** Schedules the next Poisson arrival after `from`, crossing rate pieces (memoryless, so exact). */
  private scheduleArrival(from: number): void {
    const { at: starts, value: rates } = this.trace.arrivals;
    let t = from;
    for (;;) {
      if (t >= this.duration) {
        this.arrivalsDone = true;
        this.checkFinished();
        return;
      }
      // Time only moves forward, so the current piece is a cursor, not a search.
      while (this.arrivalPiece + 1 < starts.length && at(starts, this.arrivalPiece + 1) <= t) this.arrivalPiece++;
      const piece = this.arrivalPiece;
      const end = Math.min(this.duration, starts[piece + 1] ?? this.duration);
      const rate = at(rates, piece);
      if (rate > 0) {
        const next = t + this.arrivalRng.exponential(rate);
        if (next < end) {
          this.heap.push(next, K_ARRIVAL);
          return;
        }
      }
      t = end;
    }
  }

  private arrive(): void {
    const id = this.taskCount++;
    if (id === this.arrivedAt.length) this.growTasks();
    this.arrivedAt[id] = this.t;
    // Method and intrinsic solve time are drawn at arrival, so every policy sees the same tasks.
    const u = this.taskRng.uniform();
    let m = 0;
    while (f64(this.methodCdf, m) < u) m++;
    this.methodOf[id] = m;
    const sigma = f64(this.methodSigma, m);
    this.baseSolve[id] =
      sigma < 0
        ? this.taskRng.exponential(1 / f64(this.methodMu, m))
        : this.taskRng.logNormal(f64(this.methodMu, m), sigma);
    this.enqueue(id);
    this.scheduleArrival(this.t);
    this.dispatch();
  }

  // ---- consumers -----------------------------------------------------------------------------

  /** How many consumers may hold a task now. */
  private limit(): number {
    switch (this.policy.capacity) {
      case 'lambda':
        return this.enabled ? Math.min(this.allowance, this.target) : 0;
      case 'pool':
        return this.ready;
      case 'oracle':
        // Clairvoyant: exactly the free threads, and it never spends past the pause level.
        return this.balance >= this.settings.pauseBalance && !this.outage ? Math.max(0, this.plan - this.foreign) : 0;
    }
  }

  private dispatch(): void {
    const limit = this.limit();
    while (this.qLen > 0 && this.busy < limit) {
      const id = this.dequeue();
      if (this.policy.capacity === 'lambda' && !this.receive(id)) continue;
      if (++this.busy > this.stepHigh) this.stepHigh = this.busy;
      if (this.policy.capacity === 'lambda') {
        this.invocations++;
        this.invocationStart[id] = this.t;
        let overhead = this.model.invocationOverheadSeconds;
        if (this.busy > this.warm) {
          this.warm = this.busy;
          overhead += this.model.coldStartSeconds;
        }
        this.heap.push(this.t + overhead, id * 16 + K_SUBMIT);
      } else {
        this.submit(id);
      }
    }
    // What the primary leaves waiting goes to the overflow lane while it is open.
    const lane = this.overflowLane;
    while (lane !== undefined && this.qLen > 0 && lane.hasRoom()) {
      const id = this.dequeue();
      if (!this.receive(id)) continue;
      this.invocations++;
      const ends = lane.start(f64(this.baseSolve, id) * this.factor, this.model.invocationOverheadSeconds);
      this.acceptedAt[id] = this.t;
      this.heap.push(this.t + ends, id * 16 + K_OVERFLOW_DONE);
    }
  }

  /**
   * SQS hands the message to an invocation: one more receive, or the DLQ once it has been
   * received `maxReceiveCount` times (the redrive policy moves it instead of delivering it).
   */
  private receive(id: number): boolean {
    if (u16(this.receives, id) >= this.settings.maxReceiveCount) {
      this.deadLettered++;
      this.checkFinished();
      return false;
    }
    const receives = bumpU16(this.receives, id);
    if (receives > this.maxReceives) this.maxReceives = receives;
    this.overCapTries[id] = 0;
    this.transientTries[id] = 0;
    return true;
  }

  /** One in.php request (a resumed Lambda task polls its solver id instead). */
  private submit(id: number): void {
    if (u8(this.phase, id) !== NEW) {
      this.resume(id);
      return;
    }
    this.submissions++;
    this.bucket(this.t);
    const slot = this.slot;
    bumpF64(this.bSubmissions, slot);
    const lambda = this.policy.capacity === 'lambda';
    if (this.outage) {
      this.transientErrors++;
      bumpF64(this.bTransient, slot);
      if (lambda) this.retryOrHandBack(id, bumpU8(this.transientTries, id), this.model.consumerMaxTransientRetries);
      else this.poolRetry(id);
      return;
    }
    if (this.balance <= 0) {
      this.accountErrors++;
      bumpF64(this.bAccount, slot);
      if (lambda) this.handBack(id, this.model.accountHandBackBaseSeconds, this.model.accountHandBackMaxSeconds);
      else this.heap.push(this.t + this.model.accountRetrySeconds, id * 16 + K_SUBMIT);
      return;
    }
    if (this.ourThreads + this.foreign >= this.plan) {
      this.overCap++;
      bumpF64(this.bOverCap, slot);
      if (lambda) this.recordRefusal();
      if (lambda) this.retryOrHandBack(id, bumpU8(this.overCapTries, id), this.model.consumerMaxOverCapRetries);
      else this.poolRetry(id);
      return;
    }
    this.accept(id);
  }

  /** The consumer records an over-cap answer with the threads the fleet held then. */
  private recordRefusal(): void {
    this.ledgerRefusals++;
    this.lastRefusal = { at: this.epochMs + this.t * 1000, held: this.ledgerHeld };
  }

  /** The consumer frees the task's thread in the ledger (answer read, or the invocation gave up). */
  private releaseLease(id: number): void {
    if (u8(this.leased, id) === 0) return;
    this.leased[id] = 0;
    this.ledgerHeld--;
  }

  /** A pool worker keeps its task and retries after a doubling, jittered wait. */
  private poolRetry(id: number): void {
    const attempt = bumpU16(this.attempts, id);
    const wait = Math.min(this.model.backoffMaxSeconds, this.model.backoffBaseSeconds * 2 ** Math.min(30, attempt - 1));
    this.heap.push(this.t + wait * (0.5 + this.jitterRng.uniform()), id * 16 + K_SUBMIT);
  }

  /** The consumer's solver client: retry after a backoff, or give the task back after `max` retries. */
  private retryOrHandBack(id: number, answers: number, max: number): void {
    if (answers > max) {
      this.handBack(id, this.model.handBackBaseSeconds, this.model.handBackMaxSeconds);
      return;
    }
    this.heap.push(this.t + this.consumerBackoff(answers - 1), id * 16 + K_SUBMIT);
  }

  /** The solver client's wait before retry `attempt` (0-based): min(max, base × 2^attempt) × [0.5, 1). */
  private consumerBackoff(attempt: number): number {
    const m = this.model;
    return (
      Math.min(m.consumerBackoffMaxSeconds, m.consumerBackoffBaseSeconds * 2 ** attempt) *
      (0.5 + 0.5 * this.jitterRng.uniform())
    );
  }

  /** The invocation ends and the message comes back after the consumer's visibility backoff. */
  private handBack(id: number, baseSeconds: number, maxSeconds: number): void {
    this.releaseLease(id);
    this.busy--;
    this.handBacks++;
    this.hidden++;
    const ceiling = Math.min(maxSeconds, baseSeconds * 2 ** Math.max(0, u16(this.receives, id) - 1));
    const delay = Math.ceil(ceiling / 2 + (this.jitterRng.uniform() * ceiling) / 2);
    this.heap.push(this.t + delay, id * 16 + K_VISIBLE);
    this.dispatch();
  }

  /**
   * A redelivered task the solver already accepted: poll the kept solver id (nothing is paid
   * twice). In an outage the polls fail and the task goes back; otherwise the answer is read
   * when the solver finishes, unless an outage or the solve deadline comes first.
   */
  private resume(id: number): void {
    if (this.outage) {
      this.gaveUpWhy[id] = GAVE_UP_OUTAGE;
      this.heap.push(this.t + this.failedPollsSeconds(), id * 16 + K_GIVE_UP);
    } else if (u8(this.phase, id) === SOLVED) {
      this.read(id);
    } else {
      const readAt = this.pollUntil(id, f64(this.solverDoneAt, id));
      if (readAt !== undefined) this.heap.push(readAt, id * 16 + K_READ);
    }
  }

  /**
   * When a polling invocation reads an answer ready at `doneAt`; undefined when it gives up
   * first (an outage starts, or the solve deadline passes), with its K_GIVE_UP scheduled.
   */
  private pollUntil(id: number, doneAt: number): number | undefined {
    const deadline = f64(this.invocationStart, id) + this.settings.solveDeadlineSeconds;
    const outageAt = this.nextOutageStart(this.t);
    if (doneAt <= outageAt && doneAt <= deadline) return doneAt;
    if (outageAt < deadline) {
      this.gaveUpWhy[id] = GAVE_UP_OUTAGE;
      // The first poll after the outage begins fails, then the client's transient retries do.
      const firstFailure = outageAt + this.jitterRng.uniform() * this.model.pollIntervalSeconds;
      this.heap.push(firstFailure + this.failedPollsSeconds(), id * 16 + K_GIVE_UP);
    } else {
      this.gaveUpWhy[id] = GAVE_UP_DEADLINE;
      this.heap.push(deadline, id * 16 + K_GIVE_UP);
    }
    return undefined;
  }

  /** Time the consumer's transient retries take after a first failed poll. */
  private failedPollsSeconds(): number {
    let total = 0;
    for (let attempt = 0; attempt < this.model.consumerMaxTransientRetries; attempt++)
      total += this.consumerBackoff(attempt);
    return total;
  }

  /** The polling invocation gives up: failed result requests counted, the task handed back. */
  private giveUp(id: number): void {
    if (u8(this.gaveUpWhy, id) === GAVE_UP_OUTAGE) {
      const failed = 1 + this.model.consumerMaxTransientRetries;
      this.transientErrors += failed;
      this.bucket(this.t);
      bumpF64(this.bTransient, this.slot, failed);
      bumpF64(this.bResultRequests, this.slot, failed);
    }
    this.handBack(id, this.model.handBackBaseSeconds, this.model.handBackMaxSeconds);
  }

  /** The solver accepts the task and takes one of the plan's threads until it finishes. */
  private accept(id: number): void {
    this.ourThreads++;
    this.phase[id] = ACCEPTED;
    if (this.policy.capacity === 'lambda') {
      this.ledgerAcceptances++;
      this.lastAcceptance = { at: this.epochMs + this.t * 1000, held: this.ledgerHeld };
      this.ledgerHeld++;
      this.leased[id] = 1;
    }
    this.acceptedAt[id] = this.t;
    if (this.balance < this.settings.haltBalance) this.startedPastHalt++;
    if (this.balance < this.settings.pauseBalance) this.startedPastPause++;
    let hold = f64(this.baseSolve, id) * this.factor;
    if (this.trace.pollLoss) {
      // The answer is read at the next poll of the protocol schedule; the thread is paid until then.
      const poll = at(this.methodPoll, u8(this.methodOf, id));
      hold =
        hold <= poll.first
          ? poll.first
          : poll.first + Math.ceil((hold - poll.first) / poll.interval - 1e-9) * poll.interval;
    }
    const doneAt = this.solverClock(this.t, hold);
    this.solverDoneAt[id] = doneAt;
    if (this.policy.capacity !== 'lambda') {
      // Pool workers and the oracle keep polling through an outage and read the answer when it comes.
      this.heap.push(doneAt, id * 16 + K_DONE);
      return;
    }
    const readAt = this.pollUntil(id, doneAt);
    this.heap.push(doneAt, id * 16 + (readAt === doneAt ? K_DONE : K_SOLVER_DONE));
  }

  /** When a solve of `hold` seconds started at `from` ends: its clock stops during outages. */
  private solverClock(from: number, hold: number): number {
    let t = from;
    let left = hold;
    for (const outage of this.trace.outages) {
      if (outage.end <= t) continue;
      if (outage.start >= t + left) break;
      left -= Math.max(0, outage.start - t);
      t = outage.end;
    }
    return t + left;
  }

  /** Start of the first outage after `t` (Infinity if none). */
  private nextOutageStart(t: number): number {
    for (const outage of this.trace.outages) if (outage.start > t) return outage.start;
    return Infinity;
  }

  /** The solver finishes in the same instant the invocation reads the answer. */
  private done(id: number): void {
    this.solverFinish(id);
    this.read(id);
  }

  /** The solver frees the thread and charges the solve. */
  private solverFinish(id: number): void {
    this.ourThreads--;
    this.phase[id] = SOLVED;
    this.balance -= this.price;
    this.checkBalanceLevels();
  }

  /** The consumer reads the answer and records it; the task is done. */
  private read(id: number): void {
    this.releaseLease(id);
    this.busy--;
    this.record(id);
    this.bucket(this.t);
    bumpF64(this.bCompletions, this.slot);
    at(this.bSolveMs, this.slot).push((f64(this.solverDoneAt, id) - f64(this.acceptedAt, id)) * 1000);
    if (this.policy.capacity === 'pool' && this.ready > this.target) this.ready--;
    this.dispatch();
    this.checkFinished();
  }

  /** A task's latency joins the run's. */
  private record(id: number): void {
    const latency = this.t - f64(this.arrivedAt, id);
    if (this.solved === this.latencies.length) this.latencies = grow(this.latencies);
    this.latencies[this.solved++] = latency;
  }

  private controlTick(): void {
    const { tick, periodSeconds } = this.policy;
    // Scheduled only for policies with a control loop (see run()).
    if (tick === undefined || periodSeconds === undefined) return;
    const action = tick(this.view());
    if (action.reason !== undefined) this.reasons[action.reason] = (this.reasons[action.reason] ?? 0) + 1;
    const target = Math.max(0, Math.round(action.target));
    const enabled = action.enabled ?? true;
    if (target !== this.target || enabled !== this.enabled) this.scalingChanges++;
    this.enabled = enabled;
    if (this.policy.capacity === 'pool') this.setWorkers(target);
    else {
      this.target = target;
      this.allowance = Math.min(this.allowance, target);
    }
    this.heap.push(this.t + periodSeconds, K_TICK);
    this.dispatch();
  }

  private setWorkers(target: number): void {
    this.target = target;
    const have = this.ready + this.starting;
    if (target > have) {
      const start = this.policy.workerStartSeconds ?? 0;
      if (start <= 0) this.ready += target - have;
      else {
        this.starting += target - have;
        for (let i = have; i < target; i++) this.heap.push(this.t + start, K_READY);
      }
    } else if (target < this.ready) {
      // Idle workers leave now; busy ones finish their task first (see done()).
      this.ready = Math.max(this.busy, target);
    }
  }

  /**
   * Lambda's poller scaling: +5 per second (300 a minute) while messages wait and every
   * allowed invocation is busy; with an empty queue, down to the highest concurrency used in the
   * scale-down window (never under the start level).
   */
  private esmStep(): void {
    const initial = Math.min(this.model.esmInitialConcurrency, this.target);
    const ring = this.busyHighWater;
    ring[this.stepIndex++ % ring.length] = Math.max(this.stepHigh, this.busy);
    this.stepHigh = this.busy;
    if (this.qLen > 0 && this.busy >= Math.min(this.allowance, this.target)) {
      this.allowance = Math.min(
        this.target,
        this.allowance + (this.model.esmScaleUpPerMinute * this.model.esmStepSeconds) / 60,
      );
    } else if (this.qLen === 0) {
      let recent = 0;
      for (const high of ring) if (high > recent) recent = high;
      this.allowance = Math.min(this.target, Math.max(initial, Math.min(this.allowance, recent)));
    }
    this.heap.push(this.t + this.model.esmStepSeconds, K_ESM);
    this.dispatch();
  }

  // ---- world ---------------------------------------------------------------------------------

  private setWorld(): void {
    this.foreign = valueAt(this.trace.foreignThreads, this.t);
    this.factor = valueAt(this.trace.solveTimeFactor, this.t);
    this.outage = this.trace.outages.some((o) => o.start <= this.t && this.t < o.end);
    for (const topUp of this.trace.balance.topUps) if (topUp.at === this.t && this.t > 0) this.balance += topUp.usd;
  }

  private checkBalanceLevels(): void {
    if (this.haltCrossedAt === null && this.balance < this.settings.haltBalance) this.haltCrossedAt = this.t;
  }

  /** Integrates the time-weighted figures up to `now`. */
  private advance(now: number): void {
    const dt = now - this.lastT;
    if (dt > 0) {
      if (this.qLen > 0) {
        this.backlogSeconds += dt;
        this.busyThreadSecondsBacklog += this.ourThreads * dt;
        this.freeThreadSecondsBacklog += Math.max(0, this.plan - this.foreign) * dt;
        // Capacity no policy may use is not lost: the solver down, or the money under the pause level.
        if (!this.outage && this.balance >= this.settings.pauseBalance)
          this.idleThreadSeconds += Math.max(0, this.plan - this.foreign - this.ourThreads) * dt;
      }
      this.computeSeconds += (this.policy.capacity === 'pool' ? this.ready + this.starting : this.busy) * dt;
      this.lastT = now;
    }
    this.t = now;
  }

  private checkFinished(): void {
    if (
      this.arrivalsDone &&
      this.qLen === 0 &&
      this.busy === 0 &&
      this.hidden === 0 &&
      (this.overflowLane?.busy ?? 0) === 0
    )
      this.finished = true;
  }

  private sample(): void {
    const s = this.samples;
    s.t.push(this.t);
    s.backlog.push(this.qLen);
    s.ceiling.push(this.currentCeiling());
    s.inFlight.push(this.busy);
    if (!this.finished) this.heap.push(this.t + this.sampleSeconds, K_SAMPLE);
  }

  private currentCeiling(): number {
    switch (this.policy.capacity) {
      case 'lambda':
        return this.enabled ? this.target : 0;
      case 'pool':
        return this.target;
      case 'oracle':
        return this.limit();
    }
  }

  // ---- queue ---------------------------------------------------------------------------------

  private enqueue(id: number): void {
    if (this.qLen === this.queue.length) {
      const bigger = new Int32Array(this.queue.length * 2);
      for (let i = 0; i < this.qLen; i++) bigger[i] = i32(this.queue, (this.qHead + i) % this.queue.length);
      this.queue = bigger;
      this.qHead = 0;
    }
    this.queue[(this.qHead + this.qLen) % this.queue.length] = id;
    this.qLen++;
    if (this.qLen > this.peakBacklog) {
      this.peakBacklog = this.qLen;
      this.peakAt = this.t;
      this.drainSeconds = null;
    }
  }

  private dequeue(): number {
    const id = i32(this.queue, this.qHead);
    this.qHead = (this.qHead + 1) % this.queue.length;
    this.qLen--;
    if (this.qLen === 0 && this.drainSeconds === null) this.drainSeconds = this.t - this.peakAt;
    return id;
  }

  private growTasks(): void {
    this.arrivedAt = grow(this.arrivedAt);
    this.acceptedAt = grow(this.acceptedAt);
    this.baseSolve = grow(this.baseSolve);
    this.solverDoneAt = grow(this.solverDoneAt);
    this.invocationStart = grow(this.invocationStart);
    this.methodOf = growBytes(this.methodOf);
    this.overCapTries = growBytes(this.overCapTries);
    this.transientTries = growBytes(this.transientTries);
    this.phase = growBytes(this.phase);
    this.gaveUpWhy = growBytes(this.gaveUpWhy);
    this.leased = growBytes(this.leased);
    this.attempts = growShorts(this.attempts);
    this.receives = growShorts(this.receives);
  }

  // ---- signals -------------------------------------------------------------------------------

  private slot = 0;
  private scratch = new Float64Array(1024);
  private previousRead: QueueReading | undefined;

  /** Points `slot` at the metric bucket holding time `t`, clearing it on first use. */
  private bucket(t: number): void {
    const id = Math.floor(t / BUCKET_SECONDS);
    const slot = id % RING;
    if (this.bucketId[slot] !== id) {
      this.bucketId[slot] = id;
      this.bCompletions[slot] = 0;
      this.bSubmissions[slot] = 0;
      this.bOverCap[slot] = 0;
      this.bAccount[slot] = 0;
      this.bTransient[slot] = 0;
      this.bResultRequests[slot] = 0;
      at(this.bSolveMs, slot).length = 0;
    }
    this.slot = slot;
  }

  private view(): PolicyView {
    return {
      now: this.t,
      nowMs: this.epochMs + this.t * 1000,
      backlog: this.qLen,
      busy: this.busy,
      workers: this.policy.capacity === 'pool' ? this.ready : this.target,
      balance: this.balance,
      settings: this.settings,
      governorSignals: () => this.governorSignals(),
      overflowLane: this.overflowLane,
    };
  }

  /**
   * The governor's signals, assembled by the production code (`assembleSignals`) from what the
   * governor would read: the queue's attributes and the balance fresh, the consumer's metrics
   * over [now − lag − window, now − lag) and undefined until such a window has data (CloudWatch
   * answers nothing before the first datapoint). The previous tick's queue read feeds the
   * arrival-rate estimate, as in the Lambda.
   */
  governorSignals(): GovernorSignals {
    const lag = this.model.metricsLagSeconds;
    const window = this.model.metricsWindowSeconds;
    const from = this.t - lag - window;
    const to = this.t - lag;
    const nowMs = this.epochMs + this.t * 1000;
    let metrics: MetricsWindow | undefined;
    if (from >= 0) {
      let completions = 0;
      let submissions = 0;
      let overCap = 0;
      let account = 0;
      let transient = 0;
      let resultRequests = 0;
      let solves = 0;
      for (let id = Math.floor(from / BUCKET_SECONDS); id < Math.ceil(to / BUCKET_SECONDS); id++) {
        const slot = id % RING;
        if (this.bucketId[slot] !== id) continue;
        completions += f64(this.bCompletions, slot);
        submissions += f64(this.bSubmissions, slot);
        overCap += f64(this.bOverCap, slot);
        account += f64(this.bAccount, slot);
        transient += f64(this.bTransient, slot);
        resultRequests += f64(this.bResultRequests, slot);
        const times = at(this.bSolveMs, slot);
        if (solves + times.length > this.scratch.length) this.scratch = grow(this.scratch, solves + times.length);
        this.scratch.set(times, solves);
        solves += times.length;
      }
      let meanSolveMs: number | undefined;
      let p95SolveMs: number | undefined;
      if (solves > 0) {
        // A typed array sorts numerically in native code: this runs at every governor tick.
        const sorted = this.scratch.subarray(0, solves).sort();
        let sum = 0;
        for (const solveMs of sorted) sum += solveMs;
        meanSolveMs = sum / solves;
        p95SolveMs = percentileOfSorted(sorted, 0.95);
      }
      // The lab's solver answers transient errors only in outages, and no task errors. Only the
      // failed result requests are counted (the lab does not model each successful poll).
      metrics = {
        windowMs: window * 1000,
        submissions,
        resultRequests,
        overCapAnswers: overCap,
        transientErrors: transient,
        taskErrors: 0,
        accountErrors: account,
        solved: completions,
        failed: 0,
        meanSolveMs,
        p95SolveMs,
        accountErrorCode: account > 0 ? 'ERROR_ZERO_BALANCE' : undefined,
      };
    }
    const reading: QueueReading = {
      at: nowMs,
      visible: this.qLen,
      notVisible: this.busy + this.hidden,
      delayed: 0,
      oldestAgeSeconds: this.qLen > 0 ? this.t - f64(this.arrivedAt, i32(this.queue, this.qHead)) : 0,
    };
    const signals = assembleSignals({
      now: nowMs,
      queues: { normal: reading },
      previous: { normal: this.previousRead },
      metrics,
      // getbalance is on the solver's host: unreadable in an outage.
      balance: this.outage ? undefined : Math.max(0, this.balance),
      balanceError: this.outage ? { kind: 'unreachable', code: 'HTTP_503' } : undefined,
      threadLedger: this.policy.capacity === 'lambda' ? this.ledgerReading() : undefined,
      settings: { normal: { ceiling: this.target, enabled: this.enabled } },
    });
    this.previousRead = reading;
    return signals;
  }

  /** The thread ledger as the governor reads it (a DynamoDB item in AWS; here the same counts, fresh). */
  private ledgerReading(): ThreadLedgerReading {
    return {
      held: this.ledgerHeld,
      refusals: this.ledgerRefusals,
      acceptances: this.ledgerAcceptances,
      ...(this.lastRefusal ? { lastRefusal: this.lastRefusal } : {}),
      ...(this.lastAcceptance ? { lastAcceptance: this.lastAcceptance } : {}),
    };
  }

  // ---- results -------------------------------------------------------------------------------

  private result(wallMs: number): RunResult {
    const latencies = this.latencies.subarray(0, this.solved).sort();
    const pick = (q: number): number | null => percentileOfSorted(latencies, q) ?? null;
    let sum = 0;
    for (const latency of latencies) sum += latency;
    const computeUsd =
      this.computeSeconds * this.model.computeUsdPerSecond +
      (this.policy.capacity === 'lambda' ? this.invocations * this.model.lambdaUsdPerRequest : 0);
    return {
      trace: this.trace.name,
      policy: this.policy.name,
      seed: this.seed,
      arrivals: this.taskCount,
      solved: this.solved,
      unfinished: this.taskCount - this.solved - this.deadLettered,
      deadLettered: this.deadLettered,
      handBacks: this.handBacks,
      maxReceives: this.maxReceives,
      latency: {
        p50: pick(0.5),
        p95: pick(0.95),
        p99: pick(0.99),
        mean: latencies.length === 0 ? null : sum / latencies.length,
      },
      peakBacklog: this.peakBacklog,
      drainSeconds: this.drainSeconds,
      utilizationWhileBacklog:
        this.freeThreadSecondsBacklog > 0 ? this.busyThreadSecondsBacklog / this.freeThreadSecondsBacklog : null,
      backlogSeconds: this.backlogSeconds,
      idleThreadSecondsPerTask: this.taskCount > 0 ? this.idleThreadSeconds / this.taskCount : 0,
      submissions: this.submissions,
      overCapRejections: this.overCap,
      overCapShare: this.submissions > 0 ? this.overCap / this.submissions : 0,
      accountErrors: this.accountErrors,
      transientErrors: this.transientErrors,
      startedPastHalt: this.startedPastHalt,
      startedPastPause: this.startedPastPause,
      haltCrossedAt: this.haltCrossedAt,
      scalingChanges: this.scalingChanges,
      computeSeconds: this.computeSeconds,
      computeUsd,
      usdPer1000Solves: this.solved > 0 ? (computeUsd / this.solved) * 1000 : null,
      invocations: this.invocations,
      solverUsd: (this.solved - (this.overflowLane?.solved ?? 0)) * this.price,
      reasons: this.reasons,
      ...(this.overflowLane === undefined ? {} : { overflow: this.overflowLane.result() }),
      samples: this.samples,
      simulatedSeconds: this.t,
      events: this.events,
      wallMs,
    };
  }
}

function growBytes(array: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const bigger = new Uint8Array(array.length * 2);
  bigger.set(array);
  return bigger;
}

function growShorts(array: Uint16Array<ArrayBuffer>): Uint16Array<ArrayBuffer> {
  const bigger = new Uint16Array(array.length * 2);
  bigger.set(array);
  return bigger;
}

function grow(array: Float64Array<ArrayBuffer>, atLeast = 0): Float64Array<ArrayBuffer> {
  const bigger = new Float64Array(Math.max(atLeast, array.length * 2));
  bigger.set(array);
  return bigger;
}
