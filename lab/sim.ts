/**
 * The discrete-event simulator. One run replays one trace against one policy on a virtual clock:
 * Poisson arrivals, the queue (lab/sim/queue.ts), consumers (Lambda invocations behind the SQS
 * mapping and its ramp, lab/sim/mapping.ts, or pool workers) that take one task at a time, the
 * solver with its thread cap, foreign threads, outages and a balance (lab/sim/solver.ts), the
 * consumer's retries and hand-backs with its own backoff functions (lab/sim/consumer.ts), and
 * the signals the governor would read: queue attributes and the thread ledger fresh
 * (lab/sim/ledger.ts), CloudWatch metrics a minute late (lab/sim/metrics.ts).
 *
 * Events are numbers (`taskId × 16 + kind`) in a binary heap, and tasks live in typed arrays
 * (lab/sim/tasks.ts): a simulated day of 10⁶ tasks allocates almost nothing per event.
 */
import {
  assembleSignals,
  METRICS_READ_MS,
  type MetricsWindow,
  type QueueReading,
} from '../functions/core/governor/signals.js';
import { consumerSizing, FUNCTION_SIZING, lambdaCpuSeconds } from '../functions/core/function-sizing.js';
import { governorConfigFrom } from '../functions/core/governor/policy.js';
import type { GovernorSignals } from '../functions/core/governor/types.js';
import { percentileOfSorted } from '../functions/core/helpers/stats.js';
import { MAPPING_MIN_CONCURRENCY, type FleetSettings } from '../functions/core/settings.js';
import { DEFAULT_POLL, METHOD_KIND } from '../functions/core/solver-protocol.js';
import { REFUSAL_HOLD_OFF_MS, ROOM_WAIT_MAX_MS } from '../functions/core/thread-ledger.js';
import { REQUEUE_DEFAULTS } from '../functions/core/backoff.js';
import { at, bumpU16, bumpU8, f64, u16, u8 } from './arrays.js';
import { EventHeap } from './heap.js';
import { DEFAULT_MODEL, type ModelParams, parkedInvocationSeconds } from './model.js';
import { Rng } from './rng.js';
import { ConsumerTiming } from './sim/consumer.js';
import { LabThreadLedger } from './sim/ledger.js';
import { SqsMapping } from './sim/mapping.js';
import { MetricsRing } from './sim/metrics.js';
import { OverflowLane } from './sim/overflow-lane.js';
import { ParkedDesign } from './sim/parked.js';
import { TaskQueue } from './sim/queue.js';
import { ACCEPT, NO_MONEY, OVER_CAP, SolverWorld, TRANSIENT } from './sim/solver.js';
import { ACCEPTED, NEW, SOLVED, TaskTable, growF64 } from './sim/tasks.js';
import type { ControlAction, Policy, PolicyView, RunOptions, RunResult, Samples } from './sim/types.js';
import type { Trace } from './trace.js';

export type {
  CapacityKind,
  ControlAction,
  Policy,
  PolicyView,
  RunOptions,
  RunResult,
  Samples,
} from './sim/types.js';

const K_ARRIVAL = 0;
const K_SUBMIT = 1;
const K_DONE = 2;
const K_TICK = 3;
/** A K_TICK event's id for a tick the governor's accepted probe woke (0: the cadence's). */
const TICK_WOKEN = 1;
/**
 * …for a tick the solver's return woke while the governor was paused for its outage: none if a
 * tick of the cadence came first and resumed (the product's reads between ticks end with the wait).
 */
const TICK_RECHECK = 2;
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
/** The governor's accepted probe finishes at the solver; the probe adapter reads it and frees its thread in the ledger. */
const K_PROBE_DONE = 13;
/** A leftover's lease ages out of the thread ledger. */
const K_LEFTOVER_EXPIRES = 14;
/** An invocation waiting for a free thread before it submits reaches its deadline's last second (it submits). */
const K_ROOM_TIMEOUT = 15;
/** A K_SAMPLE event's id for the lapse of a refusal's hold-off (0: the sampler's). */
const ROOM_LAPSE = 1;
/** A task's room wait (tasks.waiting): none in this invocation, waiting, woken by a freed thread (its bound still set). */
const WAIT_NONE = 0;
const WAIT_WAITING = 1;
const WAIT_WOKEN = 3;

const DEFAULT_EPOCH_MS = Date.UTC(2025, 0, 1);

/** Replays `trace` against `policy`; deterministic for a given seed. */
export function simulate(trace: Trace, policy: Policy, options: RunOptions): RunResult {
  return new Simulation(trace, policy, options).run();
}

/** The mix's solve-time draws: cumulative shares, log-normal μ and σ (σ < 0: exponential with mean μ), poll schedule. */
class MethodDraws {
  readonly cdf: Float64Array;
  readonly mu: Float64Array;
  readonly sigma: Float64Array;
  readonly poll: { first: number; interval: number }[];

  constructor(trace: Trace, schedule?: ModelParams['pollSchedule']) {
    const methods = trace.methods;
    this.cdf = new Float64Array(methods.length);
    this.mu = new Float64Array(methods.length);
    this.sigma = new Float64Array(methods.length);
    let cumulative = 0;
    methods.forEach((m, i) => {
      cumulative += m.share;
      this.cdf[i] = cumulative;
      if (m.distribution === 'exponential') {
        this.mu[i] = m.meanSeconds;
        this.sigma[i] = -1;
      } else {
        this.mu[i] = Math.log(m.medianSeconds);
        // p95 of a log-normal is median × e^(1.645 σ).
        this.sigma[i] = Math.log(m.p95Seconds / m.medianSeconds) / 1.6448536269514722;
      }
    });
    this.cdf[methods.length - 1] = 1;
    this.poll = methods.map((m) => {
      if (schedule !== undefined) return { first: schedule.firstSeconds, interval: schedule.intervalSeconds };
      const poll = DEFAULT_POLL[METHOD_KIND[m.method]];
      return { first: poll.firstPollMs / 1000, interval: poll.intervalMs / 1000 };
    });
  }
}

/** The run's counters: what the result reports. */
class Counters {
  solved = 0;
  submissions = 0;
  overCap = 0;
  accountErrors = 0;
  transientErrors = 0;
  deadLettered = 0;
  handBacks = 0;
  maxReceives = 0;
  idleThreadSeconds = 0;
  startedPastHalt = 0;
  startedPastPause = 0;
  haltCrossedAt: number | null = null;
  scalingChanges = 0;
  invocations = 0;
  computeSeconds = 0;
  backlogSeconds = 0;
  starvedSeconds = 0;
  overCapWhileStarved = 0;
  probes = 0;
  probesAccepted = 0;
  probeTasks = 0;
  heldTests = 0;
  busyThreadSecondsBacklog = 0;
  freeThreadSecondsBacklog = 0;
  latencies = new Float64Array(1 << 16);
  readonly reasons: Record<string, number> = {};
}

/**
 * The consumer's times at its memory, s: a warm invocation's before its submission (I/O and CPU),
 * what a cold start adds, the overflow consumer's before its submission, a read for a freed slot.
 */
interface ConsumerStart {
  warm: number;
  cold: number;
  overflow: number;
  read: number;
  memoryMb: number;
}

class Simulation {
  private readonly settings: FleetSettings;
  private readonly model: ModelParams;
  private readonly heap = new EventHeap<number>();
  private readonly arrivalRng: Rng;
  private readonly taskRng: Rng;
  private readonly consumer: ConsumerTiming;
  private readonly epochMs: number;
  private readonly duration: number;
  private readonly endLimit: number;
  private readonly sampleSeconds: number;
  private readonly overflowLane: OverflowLane | undefined;
  private readonly methods: MethodDraws;
  private readonly lambda: boolean;

  private readonly tasks = new TaskTable();
  private readonly queue = new TaskQueue();
  private readonly solver: SolverWorld;
  private readonly mapping: SqsMapping;
  // Every refusal (the consumers', the probe's, either design) schedules its hold-off's lapse.
  private readonly ledger = new LabThreadLedger(() => this.holdLapseAfterRefusal());
  private readonly metrics = new MetricsRing();
  /** The metric window the governor read at the start of its current minute. */
  private metricsRead: { minute: number; window: MetricsWindow | undefined } | undefined;
  private readonly c = new Counters();
  private readonly samples: Samples = { t: [], backlog: [], ceiling: [], inFlight: [] };

  private t = 0;
  private lastT = 0;
  private events = 0;
  private finished = false;
  private arrivalsDone = false;
  private arrivalPiece = 0;
  /** Consumers holding a task (invocations or busy workers). */
  private busy = 0;
  /** Pools: workers ready, and starting. */
  private ready = 0;
  private starting = 0;
  /** Pools: the worker count the policy asked for. */
  private target: number;
  private previousRead: QueueReading | undefined;
  /** Invocations waiting for a freed thread before they submit, oldest first. */
  private readonly roomWaiters: number[] = [];
  /** How many of them wait now (WAIT_WAITING; the list keeps stale entries until they come up). */
  private waitingNow = 0;
  /** Threads the plan leaves the fleet (plan − reserved): what the consumer checks the ledger against. */
  private readonly planCap: number;
  /** Mean solve time of the trace's mix, seconds (a probe's draw). */
  private readonly meanSolveSeconds: number;
  /** The fair floor's frozen ceiling while the balance is under the halt level. */
  private haltCeiling: number | undefined;
  /** The governor's newest decision paused for an outage (`solverBack` wakes a tick when the solver answers again). */
  private pausedForOutage = false;
  /** A refused probe's task kept for the next probe (`probeKeepSpanSeconds`), and the governor invocation that keeps it. */
  private probeKept: { id: number; invocation: number } | undefined;
  /** Threads the mapping's floor needs: fewer free than this and the fleet is starved. */
  private readonly floorThreads: number;
  /** A warm consumer invocation's time before its submission, and what a cold start adds, s: I/O, and CPU at the function's memory. */
  private readonly startSeconds: ConsumerStart;
  /** Seconds of outage before the governor pauses (its outageTicks ticks): the parked floor rides out shorter ones. */
  private readonly outagePauseSeconds: number;
  /** The parked design's leases and watch (a policy that parks, lab/sim/parked.ts); undefined in the waiting design. */
  private readonly parked: ParkedDesign | undefined;

  constructor(
    private readonly trace: Trace,
    private readonly policy: Policy,
    private readonly options: RunOptions,
  ) {
    this.settings = trace.settings;
    this.model = { ...DEFAULT_MODEL, ...options.model };
    const root = new Rng(options.seed);
    this.arrivalRng = root.fork(1);
    this.taskRng = root.fork(2);
    this.consumer = new ConsumerTiming(this.model, root.fork(3));
    this.epochMs = options.epochMs ?? DEFAULT_EPOCH_MS;
    this.duration = trace.durationSeconds;
    this.endLimit = this.duration + (options.drainLimitSeconds ?? Math.max(3600, this.duration));
    this.sampleSeconds = options.sampleSeconds ?? Math.max(5, this.duration / 720);
    this.methods = new MethodDraws(trace, this.model.pollSchedule);
    this.solver = new SolverWorld(trace);
    this.lambda = policy.capacity === 'lambda';
    this.target = policy.initialTarget(this.settings);
    this.mapping = new SqsMapping(this.model, this.target);
    this.overflowLane = policy.overflow === undefined ? undefined : new OverflowLane(policy.overflow);
    this.planCap = this.settings.planThreads - this.settings.reservedThreads;
    this.meanSolveSeconds = trace.methods.reduce(
      (sum, m) =>
        sum +
        m.share *
          (m.distribution === 'exponential'
            ? m.meanSeconds
            : m.medianSeconds * Math.exp((Math.log(m.p95Seconds / m.medianSeconds) / 1.6448536269514722) ** 2 / 2)),
      0,
    );
    const governor = governorConfigFrom(this.settings);
    this.outagePauseSeconds = (governor.outageTicks * (governor.tickMs ?? this.settings.tickMs)) / 1000;
    this.floorThreads =
      Math.max(MAPPING_MIN_CONCURRENCY, this.settings.minConcurrency) * this.settings.tasksPerInvocation;
    this.startSeconds = this.invocationStartSeconds(policy);
    this.parked = policy.parked === true && this.lambda ? this.parkedDesign(root.fork(4)) : undefined;
  }

  /** The consumers' time before a submission: I/O, and their CPU at their memory's share of a vCPU. */
  private invocationStartSeconds(policy: Policy): ConsumerStart {
    const m = this.model;
    const memoryMb =
      m.consumerMemoryMb ??
      consumerSizing({
        solveMode: policy.parked === true ? 'park' : 'wait',
        tasksPerInvocation: this.settings.tasksPerInvocation,
        consumerMemoryMb: this.settings.consumerMemoryMb,
      }).memoryMb;
    return {
      warm: m.invocationOverheadSeconds + lambdaCpuSeconds(m.consumerCpuSeconds, memoryMb),
      cold: m.coldStartSeconds + lambdaCpuSeconds(m.consumerInitCpuSeconds, memoryMb),
      overflow:
        m.invocationOverheadSeconds + lambdaCpuSeconds(m.consumerCpuSeconds, FUNCTION_SIZING.overflowConsumer.memoryMb),
      read: lambdaCpuSeconds(m.consumerReadCpuSeconds, memoryMb),
      memoryMb,
    };
  }

  /** The parked design's component, wired to this run. */
  private parkedDesign(rng: Rng): ParkedDesign {
    const host = {
      now: () => this.t,
      epochMs: this.epochMs,
      tasks: this.tasks,
      solver: this.solver,
      ledger: this.ledger,
      invocationEnded: () => {
        this.busy--;
        this.queue.hidden++;
        this.dispatch();
      },
      shown: (id: number) => {
        this.queue.hidden--;
        this.queue.enqueue(id, this.t);
        this.dispatch();
      },
      recorded: (id: number) => {
        this.queue.hidden--;
        this.completed(id);
        this.dispatch();
        this.checkFinished();
      },
      roomOpened: () => {
        if (this.roomWaiters.length > 0) this.wakeWaiter();
      },
    };
    return new ParkedDesign(host, this.settings, this.model, rng, {
      invocationSeconds: parkedInvocationSeconds(this.startSeconds.memoryMb, this.model.consumerCpuSeconds),
      readSeconds: this.startSeconds.read,
    });
  }

  run(): RunResult {
    const started = performance.now();
    this.solver.setWorld(0);
    this.checkBalanceLevels();
    this.followWorld();
    if (this.lambda) this.heap.push(this.model.esmStepSeconds, K_ESM);
    else if (this.policy.capacity === 'pool') this.ready = this.target;
    for (const at of this.solver.changeTimes()) this.heap.push(at, K_WORLD);
    if (this.policy.periodSeconds !== undefined && this.policy.tick) this.heap.push(0, K_TICK);
    this.heap.push(0, K_SAMPLE);
    this.scheduleArrival(0);
    const heap = this.heap;
    while (!this.finished) {
      const time = heap.peekTime();
      const parkedTime = this.parked?.nextTime() ?? Infinity;
      if (Math.min(time, parkedTime) > this.endLimit) break;
      if (parkedTime < time) {
        this.advance(parkedTime);
        this.events++;
        this.parked?.handleNext();
        continue;
      }
      const event = heap.pop() as number;
      this.advance(time);
      this.events++;
      const kind = event & 15;
      this.handle(kind, (event - kind) / 16);
    }
    this.sample();
    return this.result(performance.now() - started);
  }

  private handle(kind: number, id: number): void {
    switch (kind) {
      case K_ARRIVAL:
        this.arrive();
        return;
      case K_SUBMIT:
        this.submit(id);
        return;
      case K_DONE:
        this.solverFinish(id);
        this.read(id);
        return;
      case K_TICK:
        // id 1: a tick the governor's accepted probe woke (TICK_WOKEN); 2: the solver's return (TICK_RECHECK).
        if (id === TICK_RECHECK && !this.pausedForOutage) return;
        this.controlTick(id !== 0);
        return;
      case K_ESM:
        this.mapping.step(this.queue.length, this.busy);
        this.heap.push(this.t + this.model.esmStepSeconds, K_ESM);
        this.dispatch();
        return;
      case K_READY:
        this.starting--;
        if (this.ready < this.target) this.ready++;
        this.dispatch();
        return;
      case K_SAMPLE:
        // id ROOM_LAPSE: a refusal's hold-off lapses (the waiters see the room at their next read).
        if (id === ROOM_LAPSE) this.holdLapsed();
        else this.sample();
        return;
      case K_WORLD: {
        const wasDown = this.solver.outage;
        this.solver.setWorld(this.t);
        if (wasDown && !this.solver.outage) this.solverBack();
        this.followWorld();
        this.dispatch();
        return;
      }
      case K_SOLVER_DONE:
        this.solverFinish(id);
        return;
      case K_READ:
        this.read(id);
        return;
      case K_GIVE_UP:
        this.giveUp(id);
        return;
      case K_VISIBLE:
        this.queue.hidden--;
        this.queue.enqueue(id, this.t);
        this.dispatch();
        return;
      case K_PROBE_DONE:
        this.solver.finish();
        // A probe that carried a waiting task (`carryTask`, id − 1) solved it.
        if (id > 0) this.probeTaskSolved(id - 1);
        // The parked design's probe is counted by its thread lease, freed now (its leases count the threads).
        if (this.parked === undefined) this.ledger.released();
        else this.parked.releaseProbe();
        this.wakeWaiter();
        this.checkBalanceLevels();
        this.dispatch();
        return;
      case K_ROOM_TIMEOUT:
        this.roomTimeout(id);
        return;
      case K_LEFTOVER_EXPIRES:
        if (u8(this.tasks.orphaned, id) === 0) return;
        this.tasks.orphaned[id] = 0;
        this.ledger.expired();
        this.wakeWaiter();
        this.dispatch();
        return;
      case K_OVERFLOW_DONE:
        this.overflowLane?.finish(this.t);
        this.record(id);
        this.dispatch();
        this.checkFinished();
        return;
    }
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
    const id = this.tasks.add();
    const tasks = this.tasks;
    tasks.arrivedAt[id] = this.t;
    // Method and intrinsic solve time are drawn at arrival, so every policy sees the same tasks.
    const u = this.taskRng.uniform();
    let m = 0;
    while (f64(this.methods.cdf, m) < u) m++;
    tasks.methodOf[id] = m;
    const sigma = f64(this.methods.sigma, m);
    tasks.baseSolve[id] =
      sigma < 0
        ? this.taskRng.exponential(1 / f64(this.methods.mu, m))
        : this.taskRng.logNormal(f64(this.methods.mu, m), sigma);
    this.queue.enqueue(id, this.t);
    this.scheduleArrival(this.t);
    this.dispatch();
  }

  // ---- consumers -----------------------------------------------------------------------------

  /** How many consumers may hold a task now. */
  private limit(): number {
    switch (this.policy.capacity) {
      case 'lambda':
        return this.mapping.limit();
      case 'pool':
        return this.ready;
      case 'oracle':
        // Clairvoyant: exactly the free threads, and it never spends past the pause level.
        return this.funded() && !this.solver.outage ? Math.max(0, this.solver.plan - this.solver.foreign) : 0;
    }
  }

  private dispatch(): void {
    const limit = this.limit();
    const queue = this.queue;
    while (queue.length > 0 && this.busy < limit) {
      const id = queue.dequeue(this.t);
      if (this.lambda && !this.receive(id)) continue;
      const cold = this.mapping.started(++this.busy);
      if (this.lambda) {
        this.c.invocations++;
        this.tasks.invocationStart[id] = this.t;
        const overhead = this.startSeconds.warm + (cold ? this.startSeconds.cold : 0);
        this.heap.push(this.t + overhead, id * 16 + K_SUBMIT);
      } else {
        this.submit(id);
      }
    }
    this.dispatchOverflow();
  }

  /** What the primary leaves waiting goes to the overflow lane while it is open. */
  private dispatchOverflow(): void {
    const lane = this.overflowLane;
    while (lane !== undefined && this.queue.length > 0 && lane.hasRoom()) {
      const id = this.queue.dequeue(this.t);
      if (!this.receive(id)) continue;
      this.c.invocations++;
      const ends = lane.start(f64(this.tasks.baseSolve, id) * this.solver.factor, this.startSeconds.overflow);
      this.tasks.acceptedAt[id] = this.t;
      this.heap.push(this.t + ends, id * 16 + K_OVERFLOW_DONE);
    }
  }

  /**
   * SQS hands the message to an invocation: one more receive, or the DLQ once it has been
   * received `maxReceiveCount` times (the redrive policy moves it instead of delivering it).
   */
  private receive(id: number): boolean {
    const tasks = this.tasks;
    if (u16(tasks.receives, id) >= this.settings.maxReceiveCount) {
      this.c.deadLettered++;
      tasks.done[id] = 1;
      this.checkFinished();
      return false;
    }
    const receives = bumpU16(tasks.receives, id);
    if (receives > this.c.maxReceives) this.c.maxReceives = receives;
    tasks.overCapTries[id] = 0;
    tasks.transientTries[id] = 0;
    this.setWaiting(id, WAIT_NONE);
    return true;
  }

  /** One in.php request (a resumed Lambda task polls its solver id instead). */
  private submit(id: number): void {
    const tasks = this.tasks;
    if (u8(tasks.phase, id) !== NEW) {
      if (!this.parked?.resume(id)) this.resume(id);
      return;
    }
    const nowMs = this.epochMs + this.t * 1000;
    // The floor's invocations already under way keep its money rule too (it is exact, as the grant is).
    const unpaid = this.unpaid(nowMs);
    // Unpaid first: a parked invocation takes its lease in hasRoom.
    if (this.lambda && (unpaid || !this.hasRoom(id))) {
      // The consumer reads the ledger before it submits: while the fleet holds every thread it
      // may (the plan's, leftovers included, or right after a refusal no acceptance followed the
      // threads held then: the fleet-wide refusal signal) it waits for one to free rather than
      // submit into a refusal, at most ROOM_WAIT_MAX_MS and never past a second before its
      // deadline; then it hands the task back without a submission. Its polls (1 s × [0.5, 1.5))
      // find the freed thread at the next one: modelled as a wake-up on a freed thread. It waits
      // the same way while the governor's spend grant is used up (woken by the next grant).
      this.waitForRoom(id);
      return;
    }
    this.setWaiting(id, WAIT_NONE);
    this.c.submissions++;
    const answer = this.solver.answer();
    if (answer === ACCEPT) {
      this.metrics.submission(this.t, 'accepted');
      this.accept(id);
    } else if (answer === TRANSIENT) {
      this.c.transientErrors++;
      this.metrics.submission(this.t, 'transient');
      if (this.lambda)
        this.retryOrHandBack(id, bumpU8(tasks.transientTries, id), this.model.consumerMaxTransientRetries);
      else this.poolRetry(id);
    } else if (answer === NO_MONEY) {
      this.c.accountErrors++;
      this.metrics.submission(this.t, 'account');
      if (this.lambda) this.handBack(id, true);
      else this.heap.push(this.t + this.model.accountRetrySeconds, id * 16 + K_SUBMIT);
    } else if (answer === OVER_CAP) {
      this.c.overCap++;
      if (this.starved()) this.c.overCapWhileStarved++;
      this.metrics.submission(this.t, 'over_cap');
      if (this.parked) this.refusedParked(id);
      else if (this.lambda) {
        const held = this.ledger.held;
        this.ledger.refused(this.epochMs + this.t * 1000);
        // Refused while the fleet holds no thread: others hold the whole plan, a retry would be
        // refused again; the consumer hands the task back at once (holding some, it waits for one).
        if (held < 1) this.handBack(id, false);
        else this.retryOrHandBack(id, bumpU8(tasks.overCapTries, id), this.model.consumerMaxOverCapRetries);
      } else this.poolRetry(id);
    }
  }

  /**
   * Whether the invocation may submit now: the parked design's lease (held, or taken now), else
   * the waiting design's ledger read (the fleet holds fewer threads than it may).
   */
  private hasRoom(id: number): boolean {
    if (this.parked) return this.parked.take(id);
    return this.ledger.held < this.ledger.room(this.planCap, this.epochMs + this.t * 1000);
  }

  /** Threads (or slots) the fleet may still take before a new submission waits. */
  private roomLeft(): number {
    if (this.parked) return this.parked.room();
    return this.ledger.room(this.planCap, this.epochMs + this.t * 1000) - this.ledger.held;
  }

  /**
   * The parked design's over-cap answer: the refusal in the ledger and the slot's shard, the slot
   * given back; the invocation waits for a slot and submits again (LeaseHolding.refused), until
   * its waits are spent.
   */
  private refusedParked(id: number): void {
    this.parked?.refused(id);
    if (bumpU8(this.tasks.overCapTries, id) > this.model.consumerMaxOverCapRetries) this.handBack(id, false);
    else this.heap.push(this.t, id * 16 + K_SUBMIT);
  }

  /**
   * A refusal's hold-off (the thread ledger's room, a lease shard's) lapses `REFUSAL_HOLD_OFF_MS`
   * after it with no event of its own: the invocations waiting for room read the ledger or the
   * shards on their own cadence (OverCapWaiting, LeaseHolding.take) and find the room then.
   */
  private holdLapseAfterRefusal(): void {
    // Just past it: the room holds through the hold-off's last millisecond (roomLimit, limitInForce).
    this.heap.push(this.t + (REFUSAL_HOLD_OFF_MS + 1) / 1000, ROOM_LAPSE * 16 + K_SAMPLE);
  }

  /** A refusal's hold-off lapsed: waiters find the room it leaves at their next reads. */
  private holdLapsed(): void {
    if (this.roomWaiters.length > 0 && this.roomLeft() > 0) this.wakeWaiter();
  }

  /** A new submission waits for room (a woken waiter that finds none waits on, its bound unchanged). */
  private waitForRoom(id: number): void {
    const tasks = this.tasks;
    if (u8(tasks.waiting, id) === WAIT_WOKEN) {
      this.setWaiting(id, WAIT_WAITING);
      this.roomWaiters.push(id);
      return;
    }
    const until = Math.min(this.t + ROOM_WAIT_MAX_MS / 1000, this.deadlineOf(id) - this.waitPollSeconds());
    if (until <= this.t) {
      this.handBack(id, false);
      return;
    }
    this.setWaiting(id, WAIT_WAITING);
    this.roomWaiters.push(id);
    this.checkRoomAt(id, until);
  }

  /** The room wait checks its bound at `at` (a check pushed for an earlier wait or bound is stale). */
  private checkRoomAt(id: number, at: number): void {
    this.tasks.waitCheckAt[id] = at;
    this.heap.push(at, id * 16 + K_ROOM_TIMEOUT);
  }

  /**
   * A room wait reaches its bound. The fleet full of its own solves (they free the room as they
   * end): the consumer waits on, up to its deadline, checked again every bound (it checks at each
   * poll); full of leftovers, or the grant used up: the task goes back without a submission.
   */
  private roomTimeout(id: number): void {
    const tasks = this.tasks;
    const waiting = u8(tasks.waiting, id);
    if (waiting === WAIT_NONE || f64(tasks.waitCheckAt, id) !== this.t) return;
    // Woken, its next look at the ledger already on its way: the bound is checked right after it.
    if (waiting === WAIT_WOKEN) {
      this.checkRoomAt(id, this.t + 1);
      return;
    }
    const last = this.deadlineOf(id) - this.waitPollSeconds();
    if (this.patientRoom() && this.t < last) {
      this.checkRoomAt(id, Math.min(this.t + ROOM_WAIT_MAX_MS / 1000, last));
      return;
    }
    this.setWaiting(id, WAIT_NONE);
    this.handBack(id, false);
  }

  /** The consumer's time between reads while it waits for room: the ledger's 1 s, the leases' `leaseWaitPollSeconds`. */
  private waitPollSeconds(): number {
    return this.parked ? this.model.leaseWaitPollSeconds : 1;
  }

  /**
   * Whether the money pays for no more solves now: the clairvoyant floor's exact balance, else
   * the governor's spend grant used up (a submission then waits, as the consumer's does).
   */
  private unpaid(nowMs: number): boolean {
    return this.policy.clairvoyant === true ? !this.funded() : this.ledger.grantUsedUp(nowMs);
  }

  /** Whether the room is full of the fleet's own solves (not leftovers, not an unpaid grant): the consumer's patient wait. */
  private patientRoom(): boolean {
    const nowMs = this.epochMs + this.t * 1000;
    const unpaid = this.unpaid(nowMs);
    // The parked design: every slot the governor opened held by a live lease (LeaseHolding.take).
    if (this.parked) return this.parked.fullOfLive() && !unpaid;
    const own = this.ledger.held - this.ledger.leftover;
    return own > 0 && own >= this.ledger.room(this.planCap, nowMs) && !unpaid;
  }

  /** The consumer frees the task's thread in the ledger (answer read, or the invocation gave up); `solved` when it read the answer. */
  private releaseLease(id: number, solved = false): void {
    if (u8(this.tasks.leased, id) === 0) return;
    this.tasks.leased[id] = 0;
    this.ledger.released(solved);
    this.wakeWaiter();
  }

  /**
   * A thread freed in the ledger, or an acceptance lifted a refusal's hold: the oldest
   * invocations waiting for room, as many as there is room for (at least one), find it at the
   * waiters' next reads. Every waiting invocation reads on its own jittered cadence
   * (LeaseHolding.take, OverCapWaiting), so a freed thread is found at the first of their reads,
   * a second one at the second: the woken take the earliest of the waiters' next reads in order.
   */
  private wakeWaiter(): void {
    let room = Math.max(1, this.roomLeft());
    let reads: number[] | undefined;
    let k = 0;
    while (this.roomWaiters.length > 0 && room > 0) {
      const id = this.roomWaiters.shift() as number;
      if (u8(this.tasks.waiting, id) !== WAIT_WAITING) continue;
      if (reads === undefined) {
        const cadence = this.parked?.waitPollSeconds();
        // Each read takes its CPU at the consumer's share of a vCPU: the pause comes after it, and
        // a read finds the thread only when it has ended.
        const read = this.startSeconds.read;
        reads = this.consumer
          .firstReads(
            this.waitingNow,
            room,
            () =>
              read + (cadence === undefined ? this.consumer.ledgerPollDelay() : this.consumer.leasePollDelay(cadence)),
          )
          .map((at) => at + read);
      }
      // It reads the ledger again at that read (and waits on if the thread was taken meanwhile).
      this.setWaiting(id, WAIT_WOKEN);
      this.heap.push(this.t + (reads[Math.min(k, reads.length - 1)] as number), id * 16 + K_SUBMIT);
      k++;
      room--;
    }
  }

  /** A task's room wait changes state (`waitingNow` counts the waiting). */
  private setWaiting(id: number, state: number): void {
    const was = u8(this.tasks.waiting, id);
    if (was === state) return;
    if (was === WAIT_WAITING) this.waitingNow--;
    if (state === WAIT_WAITING) this.waitingNow++;
    this.tasks.waiting[id] = state;
  }

  /**
   * The solver still works on the task's submission as its delivery ends: the ledger keeps the
   * thread counted, as a leftover, until the lease bucket of that moment ages out.
   */
  private leaveOver(id: number): void {
    this.tasks.leased[id] = 0;
    this.tasks.orphaned[id] = 1;
    this.ledger.leftOver();
    const leaseMs = this.settings.functionTimeoutSeconds * 1000;
    // Counted from the moment its delivery gave up on it (the ledger moves it to that lease bucket).
    const leftMs = this.epochMs + this.t * 1000;
    const expiresMs = (Math.floor(leftMs / leaseMs) + 2) * leaseMs;
    this.heap.push(Math.max(this.t, (expiresMs - this.epochMs) / 1000), id * 16 + K_LEFTOVER_EXPIRES);
  }

  /** A pool worker keeps its task and retries after a doubling, jittered wait. */
  private poolRetry(id: number): void {
    const attempt = bumpU16(this.tasks.attempts, id);
    this.heap.push(this.t + this.consumer.poolRetryDelay(attempt), id * 16 + K_SUBMIT);
  }

  /** The consumer's solver client: retry after a backoff, or give the task back after `max` retries. */
  private retryOrHandBack(id: number, answers: number, max: number): void {
    if (answers > max) {
      this.handBack(id, false);
      return;
    }
    this.heap.push(this.t + this.consumer.retryDelay(answers - 1), id * 16 + K_SUBMIT);
  }

  /** The invocation ends and the message comes back after the consumer's visibility backoff. */
  private handBack(id: number, account: boolean): void {
    if (
      u8(this.tasks.phase, id) === ACCEPTED &&
      u8(this.tasks.leased, id) === 1 &&
      this.model.consumerKeepsUnansweredLease
    )
      this.leaveOver(id);
    this.releaseLease(id);
    this.parked?.release(id);
    this.busy--;
    this.c.handBacks++;
    this.queue.hidden++;
    const delay = this.consumer.handBackDelay(u16(this.tasks.receives, id), account);
    this.heap.push(this.t + delay, id * 16 + K_VISIBLE);
    this.dispatch();
  }

  /**
   * A redelivered task the solver already accepted: poll the kept solver id (nothing is paid
   * twice). The answer is read when the solver has it, unless an outage outlasts the client's
   * retries or the solve deadline comes first (see pollUntil).
   */
  private resume(id: number): void {
    const solved = u8(this.tasks.phase, id) === SOLVED;
    const readAt = this.pollUntil(id, solved ? this.t : f64(this.tasks.solverDoneAt, id));
    if (readAt === this.t && solved) this.read(id);
    else if (readAt !== undefined) this.heap.push(readAt, id * 16 + K_READ);
  }

  /**
   * When a polling invocation reads an answer ready at `doneAt`; undefined when it gives up
   * first, with its K_GIVE_UP scheduled. Polls are `pollIntervalSeconds` apart: the first poll
   * inside an outage fails (none does when the outage falls between two polls), then the solver
   * client retries it after its backoffs; a retry after the outage ended succeeds (a blip the
   * retries absorb), the last one failing hands the task back. The solve deadline ends it too.
   */
  private pollUntil(id: number, doneAt: number): number | undefined {
    const deadline = f64(this.tasks.invocationStart, id) + this.settings.solveDeadlineSeconds;
    let t = this.t;
    for (;;) {
      const outage = this.solver.outageAfter(t);
      if (outage === undefined || outage.start >= Math.min(doneAt, deadline)) break;
      const firstFailure =
        outage.start <= t ? t : outage.start + this.consumer.uniform() * this.model.pollIntervalSeconds;
      if (firstFailure >= outage.end) {
        t = outage.end;
        continue;
      }
      if (firstFailure >= deadline) break;
      const retried = this.retriedPoll(firstFailure, outage.end);
      this.c.transientErrors += retried.failed;
      this.metrics.failedPolls(retried.at, retried.failed);
      t = retried.at;
      if (!retried.absorbed) {
        this.heap.push(t, id * 16 + K_GIVE_UP);
        return undefined;
      }
    }
    if (doneAt <= deadline) return Math.max(doneAt, t);
    this.heap.push(deadline, id * 16 + K_GIVE_UP);
    return undefined;
  }

  /** The client's transient retries of a poll that failed at `from` in an outage ending at `end`. */
  private retriedPoll(from: number, end: number): { at: number; failed: number; absorbed: boolean } {
    let at = from;
    let failed = 1;
    for (let attempt = 0; attempt < this.model.consumerMaxTransientRetries; attempt++) {
      at += this.consumer.retryDelay(attempt);
      if (at >= end) return { at, failed, absorbed: true };
      failed++;
    }
    return { at, failed, absorbed: false };
  }

  /** The polling invocation gives up (its failed polls were counted when they were scheduled): the task goes back. */
  private giveUp(id: number): void {
    this.handBack(id, false);
  }

  /** The solver accepts the task and takes one of the plan's threads until it finishes. */
  private accept(id: number): void {
    const tasks = this.tasks;
    const solver = this.solver;
    solver.ourThreads++;
    tasks.phase[id] = ACCEPTED;
    if (this.parked) this.parked.accepted(id);
    else if (this.lambda) {
      const lifted = this.ledger.room(this.planCap, this.epochMs + this.t * 1000) < this.planCap;
      this.ledger.accepted(this.epochMs + this.t * 1000);
      tasks.leased[id] = 1;
      // An acceptance lifts a refusal's hold on the fleet's room.
      if (lifted) this.wakeWaiter();
    }
    tasks.acceptedAt[id] = this.t;
    if (solver.balance < this.settings.haltBalance) this.c.startedPastHalt++;
    // With the money rule's hair of tolerance (funded()): cents and prices make exact ties common.
    if (solver.balance < this.settings.pauseBalance - 1e-9) this.c.startedPastPause++;
    // The floor closes as soon as its solves in flight would take the balance under the pause level.
    if (this.policy.clairvoyant && solver.price > 0) this.followWorld();
    // A solve the solver has not answered within a function timeout ends there: the id expires
    // (the consumer's lease on its thread lasts at least that long, so the ledger never loses it).
    let hold = this.solverHold(id);
    if (this.trace.pollLoss) {
      // The answer is read at the next poll of the protocol schedule; the thread is paid until then.
      const poll = at(this.methods.poll, u8(tasks.methodOf, id));
      hold =
        hold <= poll.first
          ? poll.first
          : poll.first + Math.ceil((hold - poll.first) / poll.interval - 1e-9) * poll.interval;
    }
    const doneAt = solver.solverClock(this.t, hold);
    tasks.solverDoneAt[id] = doneAt;
    if (this.parked) {
      // The task parks: the solver frees its thread at doneAt; the watch records it after.
      this.heap.push(doneAt, id * 16 + K_SOLVER_DONE);
      this.parked.park(id);
      return;
    }
    if (!this.lambda) {
      // Pool workers and the oracle keep polling through an outage and read the answer when it comes.
      this.heap.push(doneAt, id * 16 + K_DONE);
      return;
    }
    const readAt = this.pollUntil(id, doneAt);
    this.heap.push(doneAt, id * 16 + (readAt === doneAt ? K_DONE : K_SOLVER_DONE));
  }

  /** The solver frees the thread and charges the solve. */
  private solverFinish(id: number): void {
    this.solver.finish();
    this.tasks.phase[id] = SOLVED;
    this.checkBalanceLevels();
    if (this.policy.clairvoyant && this.solver.price > 0) this.followWorld();
  }

  /**
   * The clairvoyant floors' money rule: they start solves only while the balance, less the
   * solves they already have at the solver (charged when each finishes), is at the pause level
   * or over it, so they never spend past it (a rule on the balance alone would let every solve
   * in flight at the crossing be charged under the level: money the governor keeps). It is
   * checked at every submission, by invocations already under way too, as the governor's
   * consumers check its spend grant; before, the mapping followed it only under the halt level
   * and only when closing, so a wide fleet's solves in flight at the crossing, and its
   * invocations already started, spent past the pause level (up to $0.9 on a 907-thread plan).
   */
  private funded(): boolean {
    const s = this.solver;
    // In solves, with the governor grant's hair of tolerance: cents and prices make exact ties common.
    if (s.price > 0) return (s.balance - this.settings.pauseBalance) / s.price - s.ourThreads >= -1e-9;
    return s.balance >= this.settings.pauseBalance;
  }

  /**
   * The clairvoyant mapping (the fair floor) follows the free threads, the outages and the money
   * exactly, under the governor's own money rule: below the halt level it never scales up, its
   * ceiling frozen where it stood when the balance crossed (the free threads then, at least the
   * minimum).
   */
  private followWorld(): void {
    if (!this.policy.clairvoyant) return;
    const s = this.solver;
    let free = Math.min(this.settings.maxConcurrency, Math.max(0, s.plan - this.settings.reservedThreads - s.foreign));
    if (s.balance < this.settings.haltBalance) {
      this.haltCeiling ??= Math.max(MAPPING_MIN_CONCURRENCY, this.settings.minConcurrency, free);
      free = Math.min(free, this.haltCeiling);
    } else this.haltCeiling = undefined;
    // The parked floor rides out an outage the governor may ride out too (shorter than its
    // outageTicks ticks: its consumers retry through it and submit on), mapping and leases open;
    // closing for each blip restarted Lambda's ramp from 5 invocations (the governor beat it).
    const down = s.outage && !(this.parked !== undefined && this.shortOutageNow());
    const open = !down && this.funded() && free > 0;
    if (open !== this.mapping.enabled || (open && free !== this.mapping.ceiling)) {
      this.mapping.set(open ? free : this.mapping.ceiling, open);
      this.c.scalingChanges++;
    }
    // The parked floor: its leases are the free threads, as its mapping's submitters are.
    this.parked?.open({ slots: open ? free : 0, ceiling: open ? free : this.mapping.ceiling });
  }

  /** The outage under way lasts less than the governor's pause takes to come (outageTicks ticks). */
  private shortOutageNow(): boolean {
    const outage = this.solver.outageAfter(this.t);
    if (outage === undefined || outage.start > this.t) return false;
    return outage.end - outage.start < this.outagePauseSeconds;
  }

  /** The invocation's solve deadline, seconds. */
  private deadlineOf(id: number): number {
    return f64(this.tasks.invocationStart, id) + this.settings.solveDeadlineSeconds;
  }

  /** Others leave the fleet fewer threads than the mapping's floor needs. */
  private starved(): boolean {
    return this.solver.plan - this.settings.reservedThreads - this.solver.foreign < this.floorThreads;
  }

  /** The consumer reads the answer and records it; the task is done. */
  private read(id: number): void {
    this.releaseLease(id, true);
    // The parked design: a delivery that reads the answer itself adds it to the ledger's solved count.
    if (this.parked !== undefined) this.ledger.countSolved();
    this.parked?.release(id);
    if (u8(this.tasks.orphaned, id) === 1) {
      // The delivery that resumed a kept solver id read its answer: the leftover's thread is free.
      this.tasks.orphaned[id] = 0;
      this.ledger.expired();
      this.wakeWaiter();
    }
    this.busy--;
    this.completed(id);
    if (this.policy.capacity === 'pool' && this.ready > this.target) this.ready--;
    this.dispatch();
    this.checkFinished();
  }

  /** A solved task is recorded: its latency, and its solve time in the consumer's metrics. */
  private completed(id: number): void {
    const tasks = this.tasks;
    this.record(id);
    this.metrics.completion(this.t, (f64(tasks.solverDoneAt, id) - f64(tasks.acceptedAt, id)) * 1000);
  }

  /** A task's latency joins the run's. */
  private record(id: number): void {
    const c = this.c;
    if (c.solved === c.latencies.length) c.latencies = growF64(c.latencies);
    c.latencies[c.solved++] = this.t - f64(this.tasks.arrivedAt, id);
    this.tasks.done[id] = 1;
  }

  /**
   * p95 over every task that arrived and was not dead-lettered, an unfinished one counted at its
   * wait when the run stopped (a lower bound of its latency): two runs that finished different
   * tasks read over the same ones. The solved tasks' own p95 leaves out the tasks a run never
   * reached, so a run that solves fewer of an old backlog shows the lower p95.
   */
  private p95OfEveryTask(solved: Float64Array): number | null {
    const tasks = this.tasks;
    const unfinished = tasks.count - this.c.solved - this.c.deadLettered;
    if (unfinished <= 0) return percentileOfSorted(solved, 0.95) ?? null;
    const all = new Float64Array(solved.length + unfinished);
    all.set(solved);
    let n = solved.length;
    for (let id = 0; id < tasks.count; id++) if (u8(tasks.done, id) === 0) all[n++] = this.t - f64(tasks.arrivedAt, id);
    return percentileOfSorted(all.subarray(0, n).sort(), 0.95) ?? null;
  }

  // ---- control -------------------------------------------------------------------------------

  /**
   * One tick of the policy: the cadence's, or (`woken`) one the governor's accepted probe woke,
   * out of the cadence and without a probe of its own (functions/governor/run.ts, tick-wake.ts).
   */
  private controlTick(woken = false): void {
    const { tick, periodSeconds } = this.policy;
    // Scheduled only for policies with a control loop (see run()).
    if (tick === undefined || periodSeconds === undefined) return;
    const action: ControlAction = tick(this.view());
    if (action.reason !== undefined) this.c.reasons[action.reason] = (this.c.reasons[action.reason] ?? 0) + 1;
    this.pausedForOutage = action.reason === 'PAUSE_OUTAGE';
    const target = Math.max(0, Math.round(action.target));
    const enabled = action.enabled ?? true;
    if (this.policy.capacity === 'pool') {
      if (target !== this.target) this.c.scalingChanges++;
      this.setWorkers(target);
    } else {
      if (target !== this.mapping.ceiling || enabled !== this.mapping.enabled) this.c.scalingChanges++;
      this.mapping.set(target, enabled);
    }
    if (action.leases !== undefined && this.parked !== undefined) {
      this.parked.open(action.leases, action.liftHold);
      if (action.liftHold !== undefined) this.c.heldTests++;
    }
    if (action.probe === true && this.lambda && !woken) this.probe();
    // No longer starved (the mappings take tasks again): a task the probe kept goes back at once.
    else if (action.reason !== 'WAIT_FOR_THREADS') this.releaseKept();
    if (this.lambda) this.grant(action);
    if (!woken) this.heap.push(this.t + periodSeconds, K_TICK);
    this.dispatch();
  }

  /**
   * The solver answers again after an outage: a governor paused for it reads the balance between
   * ticks (functions/governor/outage-recheck.ts) and its first answer wakes a tick, out of the
   * cadence and without a probe (`outageRecheckSeconds`, at the mean: half a read's period, then
   * the read's answer and the tick's reads, `probeWakeSeconds`). In the lab an outage is the
   * solver's (the balance unreadable in it), so every pause for an outage reads it.
   */
  private solverBack(): void {
    const every = this.model.outageRecheckSeconds;
    if (!this.pausedForOutage || every <= 0) return;
    this.heap.push(this.t + every / 2 + this.model.probeWakeSeconds, TICK_RECHECK * 16 + K_TICK);
  }

  /**
   * The governor's probe submission, once: in the parked design a waiting task it received
   * (`carryTask`), else a synthetic task of the mix's mean solve time. Refused, an over-cap
   * answer in the ledger (a carried task visible again at once); accepted, a thread the ledger
   * counts until the solver answers it (charged like any solve: a carried task's is that task's).
   * In the parked design that count is a thread lease it takes before it submits, as the
   * product's probe does (two in flight at most); the lab frees it when the solver finishes (the
   * product when its poll, or the watch, reads the answer, seconds later).
   */
  private probe(): void {
    const c = this.c;
    // The parked design's probe holds a thread lease from before it submits (thread-probe.ts).
    if (this.parked && !this.parked.holdProbe(this.t, this.settings.solveDeadlineSeconds)) return;
    c.probes++;
    c.submissions++;
    const carried = this.carryTask();
    const answer = this.solver.answer();
    const atMs = this.epochMs + this.t * 1000;
    if (answer !== ACCEPT) {
      this.parked?.releaseProbe();
      if (carried !== undefined) this.probeHandBack(carried);
    }
    if (answer === OVER_CAP) {
      c.overCap++;
      if (this.starved()) c.overCapWhileStarved++;
      if (this.parked) this.ledger.recordEvent('refusal', atMs, this.parked.lastHeld());
      else this.ledger.refused(atMs);
      return;
    }
    if (answer !== ACCEPT) return;
    c.probesAccepted++;
    // The acceptance wakes the governor for a tick at once (out of the cadence).
    if (this.model.probeWakeSeconds > 0) this.heap.push(this.t + this.model.probeWakeSeconds, TICK_WOKEN * 16 + K_TICK);
    this.solver.ourThreads++;
    // The parked design's probe records its acceptance with the leases' count (leasedProbeLedger).
    if (this.parked) this.ledger.recordEvent('acceptance', atMs, this.parked.lastHeld());
    else this.ledger.accepted(atMs);
    // An acceptance lifts a refusal's hold on the fleet's room.
    this.wakeWaiter();
    if (carried !== undefined) {
      c.probeTasks++;
      this.probeSolves(carried);
      return;
    }
    const hold = this.consumer.probeSolveSeconds(this.meanSolveSeconds);
    this.heap.push(this.solver.solverClock(this.t, hold * this.solver.factor), K_PROBE_DONE);
  }

  /**
   * The parked design's probe carries a waiting task (`probeWithWaitingTask`, the product's
   * probe-carrier.ts): the governor receives the message at the head of the queue (a receive
   * counted; one past its last goes to the DLQ, as SQS's redrive moves it, and the next is
   * received) and a consumer invocation submits it (billed as one). Undefined when none waits
   * (the synthetic probe), or the head is a task the solver accepted before (the product's
   * consumer resumes it, and the governor then probes with a synthetic task: the lab makes the
   * synthetic probe alone).
   */
  private carryTask(): number | undefined {
    if (this.parked === undefined || this.model.probeWithWaitingTask <= 0) return undefined;
    const kept = this.takeKept();
    if (kept !== undefined) {
      this.c.invocations++;
      this.c.computeSeconds += parkedInvocationSeconds(this.startSeconds.memoryMb, this.model.consumerCpuSeconds);
      return kept;
    }
    while (this.queue.length > 0 && u8(this.tasks.phase, this.queue.oldest()) === NEW) {
      const id = this.queue.dequeue(this.t);
      if (!this.receive(id)) continue;
      this.c.invocations++;
      this.c.computeSeconds += parkedInvocationSeconds(this.startSeconds.memoryMb, this.model.consumerCpuSeconds);
      return id;
    }
    return undefined;
  }

  /** A carried task the solver accepted: its solve is the probe's, recorded when the solver finishes it. */
  private probeSolves(id: number): void {
    const tasks = this.tasks;
    tasks.phase[id] = ACCEPTED;
    tasks.acceptedAt[id] = this.t;
    const doneAt = this.solver.solverClock(this.t, this.solverHold(id));
    tasks.solverDoneAt[id] = doneAt;
    this.heap.push(doneAt, (id + 1) * 16 + K_PROBE_DONE);
  }

  /**
   * A carried task the solver did not take goes back at once (the consumer's probe hand-back,
   * no delay): its visibility reset, in its place at the head of the queue; near the DLQ
   * (`REQUEUE_DEFAULTS.beforeReceives`) a fresh copy at the end instead, whose receive count
   * starts again and which no probe counts as a wait of its own, so probes never walk a task to
   * the DLQ.
   */
  private probeHandBack(id: number): void {
    this.c.handBacks++;
    if (u16(this.tasks.receives, id) < this.settings.maxReceiveCount - REQUEUE_DEFAULTS.beforeReceives) {
      // Kept for the next probe of the governor's invocation (`probeKeepSpanSeconds`), hidden meanwhile.
      if (this.model.probeKeepSpanSeconds > 0) {
        this.probeKept = { id, invocation: this.keepSpanOf(this.t) };
        this.queue.hidden++;
        return;
      }
      this.queue.requeueFront(id, this.t);
      return;
    }
    this.tasks.receives[id] = 0;
    this.queue.enqueue(id, this.t);
  }

  /**
   * How long the solver holds a thread for task `id` submitted now: its drawn solve time at the
   * solver's current pace, ended at a function timeout (a solve not answered by then: its id expires).
   */
  private solverHold(id: number): number {
    return Math.min(f64(this.tasks.baseSolve, id) * this.solver.factor, this.settings.functionTimeoutSeconds);
  }

  /** The governor invocation (its span's index) `t` falls in. */
  private keepSpanOf(t: number): number {
    return Math.floor(t / this.model.probeKeepSpanSeconds);
  }

  /** The kept task, taken, while the governor invocation that kept it lasts; one kept past it goes back first (undefined). */
  private takeKept(): number | undefined {
    const kept = this.probeKept;
    if (kept === undefined) return undefined;
    if (kept.invocation !== this.keepSpanOf(this.t)) {
      this.releaseKept();
      return undefined;
    }
    this.probeKept = undefined;
    this.queue.hidden--;
    return kept.id;
  }

  /** A kept task goes back at once, in its place at the head (the governor's release: visible again, no receive counted). */
  private releaseKept(): void {
    const kept = this.probeKept;
    if (kept === undefined) return;
    this.probeKept = undefined;
    this.queue.hidden--;
    this.queue.requeueFront(kept.id, this.t);
  }

  /** The probe's task is solved: recorded when the solver finishes it (the product's watch, a round later). */
  private probeTaskSolved(id: number): void {
    this.tasks.phase[id] = SOLVED;
    if (this.parked !== undefined) this.ledger.countSolved();
    this.completed(id);
    this.checkFinished();
  }

  /** The governor writes its spend grant to the ledger; a new one wakes the invocations waiting for it. */
  private grant(action: ControlAction): void {
    const nowMs = this.epochMs + this.t * 1000;
    const usedUp = this.ledger.grantUsedUp(nowMs);
    this.ledger.setGrant(action.grant);
    if (usedUp && !this.ledger.grantUsedUp(nowMs)) this.wakeWaiter();
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
      // Idle workers leave now; busy ones finish their task first (see read()).
      this.ready = Math.max(this.busy, target);
    }
  }

  private view(): PolicyView {
    return {
      now: this.t,
      nowMs: this.epochMs + this.t * 1000,
      backlog: this.queue.length,
      busy: this.busy,
      workers: this.policy.capacity === 'pool' ? this.ready : this.mapping.ceiling,
      balance: this.solver.balance,
      settings: this.settings,
      governorSignals: () => this.governorSignals(),
      overflowLane: this.overflowLane,
    };
  }

  /**
   * The governor's signals, assembled by the production code (`assembleSignals`) from what the
   * governor would read: the queue's attributes, the thread ledger and the balance fresh, the
   * consumer's metrics over [now − lag − window, now − lag) and undefined until such a window
   * exists (CloudWatch answers nothing before the first datapoint). The previous tick's queue
   * read feeds the arrival-rate estimate, as in the Lambda.
   */
  governorSignals(): GovernorSignals {
    const lag = this.model.metricsLagSeconds;
    const window = this.model.metricsWindowSeconds;
    const nowMs = this.epochMs + this.t * 1000;
    const queue = this.queue;
    const reading: QueueReading = {
      at: nowMs,
      visible: queue.length,
      notVisible: this.busy + queue.hidden,
      delayed: 0,
      oldestAgeSeconds: queue.length > 0 ? this.t - f64(this.tasks.arrivedAt, queue.oldest()) : 0,
    };
    const outage = this.solver.outage;
    const signals = assembleSignals({
      now: nowMs,
      queues: { normal: reading },
      previous: { normal: this.previousRead },
      metrics: this.metricsWindow(lag, window),
      // getbalance is on the solver's host: unreadable in an outage.
      balance: outage ? undefined : Math.max(0, this.solver.balance),
      balanceError: outage ? { kind: 'unreachable', code: 'HTTP_503' } : undefined,
      threadLedger: this.parked ? this.parked.reading() : this.lambda ? this.ledger.reading() : undefined,
      // The parked design reads the lane's thread ceiling back from the leases (the mapping holds the submitters).
      settings: {
        normal: { ceiling: this.parked?.laneCeiling ?? this.mapping.ceiling, enabled: this.mapping.enabled },
      },
    });
    this.previousRead = reading;
    return signals;
  }

  /**
   * The consumer's metrics as the deployed governor holds them: read at the first tick of each
   * governor minute (its invocation; the loop's `metricsEveryMs`) and kept for the minute, so at
   * a tick the window ends `lag` seconds before the minute began, not before the tick.
   */
  private metricsWindow(lag: number, window: number): MetricsWindow | undefined {
    const every = METRICS_READ_MS / 1000;
    const minute = Math.floor(this.t / every) * every;
    if (this.metricsRead?.minute !== minute) {
      this.metricsRead = { minute, window: this.metrics.window(minute - lag - window, minute - lag, window) };
    }
    return this.metricsRead.window;
  }

  // ---- world and measurements ----------------------------------------------------------------

  private checkBalanceLevels(): void {
    if (this.c.haltCrossedAt === null && this.solver.balance < this.settings.haltBalance) this.c.haltCrossedAt = this.t;
  }

  /** Integrates the time-weighted figures up to `now`. */
  private advance(now: number): void {
    const dt = now - this.lastT;
    if (dt > 0) {
      const c = this.c;
      const solver = this.solver;
      if (this.queue.length > 0) {
        c.backlogSeconds += dt;
        c.busyThreadSecondsBacklog += solver.ourThreads * dt;
        c.freeThreadSecondsBacklog += Math.max(0, solver.plan - solver.foreign) * dt;
        // Capacity no policy may use is not lost: the solver down, or the money under the pause level.
        if (!solver.outage && solver.balance >= this.settings.pauseBalance)
          c.idleThreadSeconds += Math.max(0, solver.plan - solver.foreign - solver.ourThreads) * dt;
      }
      if (this.starved()) c.starvedSeconds += dt;
      c.computeSeconds += (this.policy.capacity === 'pool' ? this.ready + this.starting : this.busy) * dt;
      this.lastT = now;
    }
    this.t = now;
  }

  private checkFinished(): void {
    if (
      this.arrivalsDone &&
      this.queue.length === 0 &&
      this.busy === 0 &&
      this.queue.hidden === 0 &&
      (this.overflowLane?.busy ?? 0) === 0
    )
      this.finished = true;
  }

  private sample(): void {
    const s = this.samples;
    s.t.push(this.t);
    s.backlog.push(this.queue.length);
    s.ceiling.push(this.currentCeiling());
    s.inFlight.push(this.busy + (this.parked?.parkedTasks ?? 0));
    if (!this.finished) this.heap.push(this.t + this.sampleSeconds, K_SAMPLE);
  }

  private currentCeiling(): number {
    switch (this.policy.capacity) {
      case 'lambda':
        return this.mapping.enabled ? (this.parked?.laneCeiling ?? this.mapping.ceiling) : 0;
      case 'pool':
        return this.target;
      case 'oracle':
        return this.limit();
    }
  }

  private result(wallMs: number): RunResult {
    const c = this.c;
    const latencies = c.latencies.subarray(0, c.solved).sort();
    const pick = (q: number): number | null => percentileOfSorted(latencies, q) ?? null;
    let sum = 0;
    for (const latency of latencies) sum += latency;
    // A Lambda second is priced at the consumer's memory (computeUsdPerSecond is a 256 MB one's).
    const perSecond =
      this.model.computeUsdPerSecond *
      (this.lambda ? this.startSeconds.memoryMb / FUNCTION_SIZING.consumer.memoryMb : 1);
    const computeUsd =
      c.computeSeconds * perSecond + (this.lambda ? c.invocations * this.model.lambdaUsdPerRequest : 0);
    const arrivals = this.tasks.count;
    return {
      trace: this.trace.name,
      policy: this.policy.name,
      seed: this.options.seed,
      arrivals,
      solved: c.solved,
      unfinished: arrivals - c.solved - c.deadLettered,
      deadLettered: c.deadLettered,
      handBacks: c.handBacks,
      maxReceives: c.maxReceives,
      latency: {
        p50: pick(0.5),
        p95: pick(0.95),
        p99: pick(0.99),
        mean: latencies.length === 0 ? null : sum / latencies.length,
      },
      p95EveryTask: this.p95OfEveryTask(latencies),
      peakBacklog: this.queue.peakBacklog,
      drainSeconds: this.queue.drainSeconds,
      utilizationWhileBacklog:
        c.freeThreadSecondsBacklog > 0 ? c.busyThreadSecondsBacklog / c.freeThreadSecondsBacklog : null,
      backlogSeconds: c.backlogSeconds,
      idleThreadSecondsPerTask: arrivals > 0 ? c.idleThreadSeconds / arrivals : 0,
      submissions: c.submissions,
      overCapRejections: c.overCap,
      overCapShare: c.submissions > 0 ? c.overCap / c.submissions : 0,
      accountErrors: c.accountErrors,
      transientErrors: c.transientErrors,
      starvedSeconds: c.starvedSeconds,
      overCapWhileStarved: c.overCapWhileStarved,
      probes: c.probes,
      probesAccepted: c.probesAccepted,
      probeTasks: c.probeTasks,
      heldTests: c.heldTests,
      startedPastHalt: c.startedPastHalt,
      startedPastPause: c.startedPastPause,
      haltCrossedAt: c.haltCrossedAt,
      scalingChanges: c.scalingChanges,
      computeSeconds: c.computeSeconds,
      ...(this.lambda ? { consumerMemoryMb: this.startSeconds.memoryMb } : {}),
      computeUsd,
      usdPer1000Solves: c.solved > 0 ? (computeUsd / c.solved) * 1000 : null,
      invocations: c.invocations,
      solverUsd: (c.solved - (this.overflowLane?.solved ?? 0)) * this.solver.price,
      reasons: c.reasons,
      ...(this.overflowLane === undefined ? {} : { overflow: this.overflowLane.result() }),
      ...(this.parked === undefined ? {} : { parked: this.parked.result(this.t) }),
      samples: this.samples,
      simulatedSeconds: this.t,
      events: this.events,
      wallMs,
    };
  }
}
