/**
 * The parked design in the lab (solveMode `park`): the thread leases, the parking invocation and
 * the governor's watch, with the product's own lease functions (functions/core/thread-leases.ts).
 *
 * - An invocation takes a slot before a fresh submission when a shard has room (`roomInShard`:
 *   below the shard's limit and, right after a refusal in it, below the slots held then) and the
 *   fleet-wide refusal room of the thread ledger is not full (`fleetRoomFull`: the shard's live
 *   slots below its share of `roomLimit` while the ledger's newest refusal is in force),
 *   trying the shards from a random one (functions/consumer/lease-holding.ts); with none it waits
 *   for one as the waiting design waits for room (the simulation's room wait, woken by a freed or
 *   opened slot at its next read, `leaseWaitPollSeconds` apart for a full shard and sooner for a
 *   smaller one, `waitPollSeconds`; up to its deadline while live
 *   leases hold every open slot, `fullOfLive`). Refused over the cap, it records the refusal in the slot's shard and gives the
 *   slot back.
 * - Accepted, the task parks: the invocation ends `PARKED_SUBMIT_SECONDS` after it began (its CPU at the consumer's memory: lab/model.ts parkedInvocationSeconds), the
 *   message stays hidden, the slot stays taken (functions/consumer/task-run.ts, submitToPark).
 * - The watch runs a round every `watchRoundSeconds` (one bulk poll of the solver; by default the
 *   governor's cadence for the plan, `watchRoundSecondsOf`) while the
 *   governor's invocation lives (`watchSecondsPerMinute` of each minute, at a fixed phase), and
 *   reads the leases at every round `watchViewSeconds` after its last read (the first of each
 *   minute included). At a read it looks up each new lease's record once the lease is
 *   `watchSettleSeconds` old (again at the next read if its holder had not parked it yet), and
 *   at its first round at or after the solve's end with the solver up frees the slot once the
 *   round's bulk poll has answered (`watchPollSeconds`) and records the answer `watchRecordSeconds` later: no second delivery (functions/governor/parked-watch.ts,
 *   functions/adapters/parked-recorder.ts). A solve that ends while its holder has not parked it
 *   yet frees the slot without a record, as the watch does.
 * - A lease whose end comes first (a long outage) frees its slot and the message is visible
 *   again; the delivery that resumes it reads a ready answer at once, else parks the submission
 *   again under any free slot. The watch never polls such a lease (the record's submission is
 *   older than the lease: parked-watch.ts `submissionOf`), it reads its record every round until
 *   the lease ends.
 *
 * The governor reads the leases' live slots as the threads held (acceptances and refusals from the
 * ledger), opens its decision's threads as the shards' limits, and clears a shard's refusal
 * hold-off an acceptance has answered (functions/governor/lease-step.ts). Events of its own live
 * in a heap of its own, which the simulation merges with its own.
 */
import { PARKED_SUBMIT_SECONDS } from '../../functions/core/governor/submitters.js';
import {
  filledAcceptance,
  fleetHeldUnder,
  fleetRoomFull,
  LEASE_SHARD_SLOTS,
  type LeaseSlot,
  leaseLengthMs,
  leaseWaitPollMs,
  renewWithinMs,
  fullOfLive,
  limitOf,
  liveHeld,
  PROBE_SLOT_BASE,
  PROBE_SLOTS,
  roomInShard,
  shardCapacity,
  shardKeys,
  shardLimits,
  type ShardView,
  watchPollMs,
} from '../../functions/core/thread-leases.js';
import { pollRequestsFor } from '../../functions/core/solver-protocol.js';
import type { ThreadLedgerReading } from '../../functions/core/thread-ledger.js';
import type { FleetSettings } from '../../functions/core/settings.js';
import { f64, u8 } from '../arrays.js';
import { EventHeap } from '../heap.js';
import type { ModelParams } from '../model.js';
import type { Rng } from '../rng.js';
import type { LabThreadLedger } from './ledger.js';
import type { SolverWorld } from './solver.js';
import { growF64, growU8, SOLVED, type TaskTable } from './tasks.js';
import type { ParkedCounts } from './types.js';

/**
 * The watch's time between rounds for a plan of `planCap` threads, seconds: the model's
 * `watchRoundSeconds` when set, else the governor's cadence (`watchPollMs`) for a round that asks
 * about every thread of the plan (bulk res.php requests of 100 ids).
 */
export function watchRoundSecondsOf(model: Pick<ModelParams, 'watchRoundSeconds'>, planCap: number): number {
  if (model.watchRoundSeconds > 0) return model.watchRoundSeconds;
  return watchPollMs(pollRequestsFor('res-php', planCap), planCap) / 1000;
}

/** What the parked design needs of the simulation around it. */
export interface ParkedHost {
  /** Simulated seconds now. */
  now(): number;
  readonly epochMs: number;
  readonly tasks: TaskTable;
  readonly solver: SolverWorld;
  readonly ledger: LabThreadLedger;
  /** A parking invocation ends: its task's message is hidden until the watch records it or its lease ends. */
  invocationEnded(id: number): void;
  /** A parked task's message is visible again: its lease ended before the watch recorded it. */
  shown(id: number): void;
  /** The watch recorded a parked task's answer: the task is done. */
  recorded(id: number): void;
  /** A slot freed or opened: the invocations waiting for one look again. */
  roomOpened(): void;
}

/** The component's events: `id × 4 + kind`. */
const P_INVOCATION_END = 0;
const P_WATCH_FREE = 1;
const P_RECORDED = 2;
const P_LEASE_END = 3;

/** A task's parked state. */
const NONE = 0;
/** Parked; the watch frees its slot and records it at its round (`watchAt`). */
const WATCHED = 1;
/** Parked again by a resuming delivery: the watch reads its record each round and never polls it. */
const UNWATCHED = 2;
/** The watch freed its slot; the answer is being recorded. */
const RECORDING = 3;
/**
 * The watch saw it ready before its holder parked it: the slot frees at `watchAt`, and the watch
 * follows the answer, reading its record once a second, until the holder parks it (`parkedAt`),
 * then records it (the product's holderFollow, functions/governor/parked-watch.ts). Before the
 * product followed such answers, the lab left them, as the product did, until the lease ended and
 * the message came back.
 */
const EARLY = 4;
/** The product's gap between two reads of a followed answer's record (HOLDER_READ_GAP_MS), seconds. */
const HOLDER_READ_GAP_SECONDS = 1;

/** The delivery a lab lease names (the lab's messages have no receipt handle). */
const LAB_DELIVERY = { eventSourceArn: 'lab', receiptHandle: 'lab' } as const;

/** A slot a task holds. */
interface HeldLease {
  lease: LeaseSlot;
  /** The shard's index. */
  index: number;
  /** Live slots of the shard when it was taken, not counting it (the refusal's count, LeaseHolding). */
  others: number;
  /** The fleet-wide refusal room it was taken under (LeaseHolding: `fleetHeldUnder`). */
  room: number | undefined;
  takenAt: number;
  until: number;
}

/** The parked design's leases, parked tasks and watch in one run. */
export class ParkedDesign {
  private readonly heap = new EventHeap<number>();
  private readonly views: ShardView[];
  private readonly planCap: number;
  private readonly leaseSeconds: number;
  private readonly random: () => number;
  /** The watch's rounds are `rounds.period` apart from `phase`, in the first `watchSecondsPerMinute` of each minute… */
  private readonly phase: number;
  private readonly rounds: Cadence;
  /** …and its reads of the leases every `reads.period` (a whole number of rounds), from the minute's first round. */
  private readonly reads: Cadence;
  private readonly held = new Map<number, HeldLease>();
  /** Scratch for `freeSlot`: which indexes of a shard are taken. */
  private readonly takenScratch = new Uint8Array(LEASE_SHARD_SLOTS);
  /** When each waiting invocation began to wait for a slot (its polls read the shards meanwhile). */
  private readonly waitingSince = new Map<number, number>();
  private state = new Uint8Array(1 << 16);
  /** When the task's latest lease ends, seconds (a lease-end event of an earlier lease is stale). */
  private leaseEndAt = new Float64Array(1 << 16);
  /** The watch round that frees a WATCHED or EARLY task's slot, seconds. */
  private watchAt = new Float64Array(1 << 16);
  /** When an EARLY task's holder parks it (its invocation's end), seconds. */
  private parkedAt = new Float64Array(1 << 16);
  private live = 0;
  private parkedNow = 0;
  /** The governor's shard reads are counted up to here, seconds. */
  private accountedTo = 0;
  /** Threads held at the governor's last read (its probe's events carry it). */
  private lastHeldRead = 0;
  /** The lane's thread ceiling the governor last opened (read back as the lane's ceiling). */
  private ceiling: number | undefined;
  private readonly counts: ParkedCounts = {
    parked: 0,
    reparked: 0,
    leaseTakes: 0,
    leaseTakesByMinute: [],
    leaseReleases: 0,
    leasesExpired: 0,
    leaseRenewals: 0,
    consumerShardReads: [],
    governorShardReads: [],
    watchRounds: 0,
    watchViews: 0,
    recordReads: 0,
    recordedByWatch: 0,
    metaWrites: 0,
    slotWaitSeconds: 0,
  };

  constructor(
    private readonly host: ParkedHost,
    settings: FleetSettings,
    private readonly model: ModelParams,
    rng: Rng,
    /**
     * The consumer at its memory: a parked invocation's length, and the CPU time of a waiting
     * invocation's read for a slot (which comes on top of its pause), s.
     */
    private readonly consumer: { invocationSeconds: number; readSeconds: number } = {
      invocationSeconds: PARKED_SUBMIT_SECONDS,
      readSeconds: 0,
    },
  ) {
    this.planCap = settings.effectiveCap;
    this.views = shardKeys('primary', this.planCap).map((shard) => ({ shard, meta: undefined, slots: [] }));
    this.leaseSeconds = leaseLengthMs(settings) / 1000;
    this.random = () => rng.uniform();
    // A round lasts its bulk poll at least: the next starts when it ends, if that is later than its cadence.
    const roundSeconds = Math.max(0.05, watchRoundSecondsOf(model, this.planCap), model.watchPollSeconds);
    this.phase = rng.uniform() * roundSeconds;
    const activeSeconds = Math.min(60, Math.max(roundSeconds, model.watchSecondsPerMinute));
    const roundsPerMinute = Math.max(1, Math.floor(activeSeconds / roundSeconds + 1e-9));
    this.rounds = { period: roundSeconds, perMinute: roundsPerMinute };
    // A read at the first round `watchViewSeconds` after the last: every `every`-th round.
    const every = Math.max(1, Math.ceil(model.watchViewSeconds / roundSeconds - 1e-9));
    this.reads = { period: every * roundSeconds, perMinute: Math.ceil(roundsPerMinute / every) };
  }

  /** Tasks parked now whose invocation has ended (their solves in flight without one). */
  get parkedTasks(): number {
    return this.parkedNow;
  }

  /** The lane's thread ceiling as the leases hold it; undefined before the governor opened any. */
  get laneCeiling(): number | undefined {
    return this.ceiling;
  }

  /** Time of the component's next event; Infinity when none. */
  nextTime(): number {
    return this.heap.peekTime();
  }

  /** Runs the component's next event (its time is the simulation's now). */
  handleNext(): void {
    const event = this.heap.pop() as number;
    const kind = event & 3;
    const id = (event - kind) / 4;
    const t = this.host.now();
    switch (kind) {
      case P_INVOCATION_END:
        // From here the task is in flight without an invocation (counted once, not twice).
        this.parkedNow++;
        this.host.invocationEnded(id);
        return;
      case P_WATCH_FREE:
        this.watchFrees(id, t);
        return;
      case P_RECORDED:
        this.recordedByWatch(id);
        return;
      default:
        this.leaseEnded(id, t);
    }
  }

  /**
   * Whether every shard's open slots are held by live leases, or the fleet-wide refusal room is
   * full of them (the fleet's own solves, freed as they end): a waiting invocation then waits up
   * to its deadline (LeaseHolding.take: `fullOfLive`, its own solves filling the room).
   */
  fullOfLive(): boolean {
    const nowMs = this.ms(this.host.now());
    const fleetRoom = this.fleetRoom(nowMs);
    const shards = this.views.length;
    return this.views.every(
      (view, index) =>
        fullOfLive(view, this.planCap, index, nowMs) ||
        (view.slots.length > 0 && fleetRoomFull(fleetRoom, view.slots.length, shards, index)),
    );
  }

  /** The fleet-wide refusal room of the thread ledger at epoch ms `nowMs` (`fleetRoomOf`), undefined when none is in force. */
  private fleetRoom(nowMs: number): number | undefined {
    const room = this.host.ledger.room(this.planCap, nowMs);
    return room < this.planCap ? room : undefined;
  }

  /** Slots the consumers may take now, over every shard. */
  room(): number {
    const nowMs = this.ms(this.host.now());
    let room = 0;
    for (const [index, view] of this.views.entries()) room += roomInShard(view, this.planCap, index, nowMs);
    return room;
  }

  /**
   * Before a fresh submission: true when the task holds a slot, taken now if a shard has room
   * (one round over the shards from a random one); false when none has (the invocation waits).
   */
  take(id: number): boolean {
    if (this.held.has(id)) return true;
    const t = this.host.now();
    this.endWait(id, t);
    const nowMs = this.ms(t);
    const shards = this.views.length;
    // The ledger read before a fresh submission (the spend grant's): its refusal room holds every shard.
    const fleetRoom = this.fleetRoom(nowMs);
    const start = Math.floor(this.random() * shards);
    for (let k = 0; k < shards; k++) {
      const index = (start + k) % shards;
      const view = this.views[index] as ShardView;
      bump(this.counts.consumerShardReads, view.slots.length);
      if (roomInShard(view, this.planCap, index, nowMs) <= 0) continue;
      if (fleetRoomFull(fleetRoom, view.slots.length, shards, index)) continue;
      const slot = this.freeSlot(view, limitOf(view, this.planCap, index));
      if (slot === undefined) continue;
      this.hold(id, index, slot, t, fleetRoom);
      return true;
    }
    this.waitingSince.set(id, t);
    return false;
  }

  /** The solver accepted the task's submission: the ledger's acceptance, with the leases' count. */
  accepted(id: number): void {
    this.host.ledger.recordEvent('acceptance', this.ms(this.host.now()), this.fleetHeld(id));
  }

  /**
   * The solver refused the task's submission over the cap: the refusal goes into the ledger (the
   * fleet's live slots counted exactly, its own not counted) and into the slot's shard (with that
   * shard's slots held then), and the slot is given back.
   */
  refused(id: number): void {
    const at = this.ms(this.host.now());
    const held = this.held.get(id);
    // Counted exactly, every shard read (LeaseHolding.refusedHeld): the live slots less its own.
    for (const view of this.views) bump(this.counts.consumerShardReads, view.slots.length);
    this.host.ledger.recordEvent('refusal', at, liveHeld(this.views, at, held?.lease));
    if (held === undefined) return;
    const view = this.views[held.index] as ShardView;
    // The shard's hold-off keeps its takers to its others' slots at the refusal, read with the
    // ledger's count (LeaseHolding.othersAtRefusal), not at the take.
    const others = liveHeld([view], at, held.lease);
    view.meta = { ...view.meta, refusedAt: at, refusedHeld: others, refusals: (view.meta?.refusals ?? 0) + 1 };
    this.counts.metaWrites++;
    this.free(id, true);
  }

  /** The task's invocation gives its slot back (a hand-back, an answer read in the invocation); its wait ends. */
  release(id: number): void {
    this.endWait(id, this.host.now());
    if (this.held.has(id) && u8(this.state, id) === NONE) this.free(id, true);
  }

  /**
   * The task's submission parks under the slot it holds: the invocation ends, the watch takes
   * over. `again`: a resuming delivery parks a submission the watch will not poll.
   */
  park(id: number, again = false): void {
    const held = this.held.get(id);
    if (held === undefined) throw new Error(`task ${id} parks without a lease`);
    const t = this.host.now();
    const tasks = this.host.tasks;
    this.ensure(id);
    this.counts.parked++;
    const ends = Math.max(t, f64(tasks.invocationStart, id) + this.consumer.invocationSeconds);
    this.heap.push(ends, id * 4 + P_INVOCATION_END);
    const settled = held.takenAt + this.model.watchSettleSeconds;
    if (again) {
      this.counts.reparked++;
      this.state[id] = UNWATCHED;
      this.counts.recordReads += this.before(held.until, this.reads) - this.before(settled, this.reads);
      this.heap.push(held.until, id * 4 + P_LEASE_END);
      return;
    }
    this.state[id] = WATCHED;
    const doneAt = f64(tasks.solverDoneAt, id);
    const seen = this.first(settled, this.reads);
    let look = seen;
    if (seen < ends) {
      // Looked up before its holder parked it (the claim still on the record): read again at the next read.
      this.counts.recordReads++;
      if (doneAt <= seen && seen < held.until && !this.inOutage(seen)) {
        this.parkedAt[id] = ends;
        this.schedule(id, seen, EARLY);
        this.heap.push(held.until, id * 4 + P_LEASE_END);
        return;
      }
      look = this.first(Math.max(ends, seen + this.reads.period / 2), this.reads);
    }
    this.counts.recordReads++;
    const ready = this.firstUpRound(Math.max(look, doneAt));
    // The watch frees the slot at its round; a lease that ends first needs its end (a long outage).
    if (ready < held.until) this.schedule(id, ready, WATCHED);
    else this.heap.push(held.until, id * 4 + P_LEASE_END);
  }

  /**
   * A resuming delivery in the parked design: false when it reads the answer now (ready, the
   * solver up) or finds no free slot (it polls through the solve as the waiting design does);
   * true when it parked the submission again (resumeOrPark, parkLive: any free slot, whatever the limit).
   */
  resume(id: number): boolean {
    if (u8(this.host.tasks.phase, id) === SOLVED && !this.host.solver.outage) return false;
    if (!this.takeHeld(id)) return false;
    this.park(id, true);
    return true;
  }

  /**
   * The governor's tick opens its decision's threads as the shards' limits (written when they
   * change); a held test (`liftHold`) clears the shards' hold-offs (up to now) and lifts the
   * ledger's hold of the refusals at or before it (functions/governor/lease-step.ts, then the loop).
   */
  open(leases: { slots: number; ceiling: number }, liftHold?: number): void {
    const lanesChanged = this.ceiling !== leases.ceiling;
    this.ceiling = leases.ceiling;
    let rose = false;
    if (liftHold !== undefined) {
      // Every shard's hold-off up to now (the product's shard refusal is written after the ledger's).
      const nowMs = this.ms(this.host.now());
      for (const view of this.views) {
        const refusedAt = view.meta?.refusedAt;
        this.counts.metaWrites++;
        if (refusedAt !== undefined && refusedAt < nowMs) clearHoldOff(view);
      }
      this.host.ledger.liftHold(liftHold);
      this.counts.metaWrites++;
      rose = true;
    }
    for (const [index, limit] of shardLimits(leases.slots, this.planCap).entries()) {
      const view = this.views[index] as ShardView;
      const before = limitOf(view, this.planCap, index);
      if (view.meta?.limit === limit && !(index === 0 && lanesChanged)) continue;
      view.meta = { ...view.meta, limit };
      this.counts.metaWrites++;
      if (limit > before) rose = true;
    }
    if (rose) this.host.roomOpened();
  }

  /**
   * The thread ledger as the governor reads it in the parked design: `held` from the leases (all
   * shards read, and the first again for the lanes' ceilings), the refusal hold-offs an
   * acceptance has answered since cleared.
   */
  private seenAcceptances: number | undefined;

  reading(): ThreadLedgerReading {
    for (const view of this.views) bump(this.counts.governorShardReads, view.slots.length);
    bump(this.counts.governorShardReads, (this.views[0] as ShardView).slots.length);
    this.lastHeldRead = this.live;
    const { leftover: _leftover, ...reading } = this.host.ledger.reading();
    const acceptedAt = reading.lastAcceptance?.at;
    let cleared = false;
    for (const view of this.views) {
      const refusedAt = view.meta?.refusedAt;
      if (acceptedAt === undefined || refusedAt === undefined || acceptedAt <= refusedAt) continue;
      clearHoldOff(view);
      this.counts.metaWrites++;
      cleared = true;
    }
    if (cleared) this.host.roomOpened();
    // As the product's leased reader: a fresh acceptance carries the leases' count (filledAcceptance).
    const fresh = this.seenAcceptances !== undefined && reading.acceptances > this.seenAcceptances;
    this.seenAcceptances = reading.acceptances;
    return { ...reading, held: this.live, ...filledAcceptance(reading, this.live, fresh) };
  }

  /** Threads held at the governor's last read: what its probe's acceptance and refusal carry. */
  lastHeld(): number {
    return this.lastHeldRead;
  }

  /** The counts of the run, up to `end` seconds. */
  result(end: number): ParkedCounts {
    this.account(end);
    return {
      ...this.counts,
      consumerShardReads: [...this.counts.consumerShardReads],
      governorShardReads: [...this.counts.governorShardReads],
      watchRounds: this.before(end, this.rounds),
      watchViews: this.before(end, this.reads),
    };
  }

  // ---- leases --------------------------------------------------------------------------------

  /** Any free slot of a shard, whatever its limit (a submission whose thread the solver holds already). */
  private takeHeld(id: number): boolean {
    if (this.held.has(id)) return true;
    const t = this.host.now();
    for (const [index, view] of this.views.entries()) {
      bump(this.counts.consumerShardReads, view.slots.length);
      const slot = this.freeSlot(view, shardCapacity(this.planCap, index));
      if (slot === undefined) continue;
      this.hold(id, index, slot, t, undefined);
      return true;
    }
    return false;
  }

  /**
   * The lowest slot index below `limit` no live lease holds; undefined when every one is taken.
   * (The consumers shuffle the free indexes, `freeSlotIndexes`, so that racing takers spread over
   * them; the lab has no racing takers, and which free index a lease takes changes nothing.)
   */
  private freeSlot(view: ShardView, limit: number): number | undefined {
    const taken = this.takenScratch.fill(0, 0, limit);
    for (const lease of view.slots) if (lease.slot < limit) taken[lease.slot] = 1;
    const free = taken.indexOf(0);
    return free >= 0 && free < limit ? free : undefined;
  }

  private hold(id: number, index: number, slot: number, t: number, room: number | undefined): void {
    this.account(t);
    this.ensure(id);
    const view = this.views[index] as ShardView;
    const until = t + this.leaseSeconds;
    const lease: LeaseSlot = {
      shard: view.shard,
      slot,
      taskId: String(id),
      takenAt: this.ms(t),
      until: this.ms(until),
      delivery: LAB_DELIVERY,
    };
    this.held.set(id, { lease, index, others: view.slots.length, room, takenAt: t, until });
    view.slots.push(lease);
    this.live++;
    this.countTake(t);
    this.leaseEndAt[id] = until;
  }

  /** The governor's probes' leases in the first shard, oldest first (functions/governor/thread-probe.ts). */
  private probeLeases: LeaseSlot[] = [];

  /**
   * The governor's probe takes its thread lease before it submits (the first free probe index of
   * the first shard, at most PROBE_SLOTS: two); false when all are held (no probe then).
   * Its live slot counts in the fleet's held threads and the shard's room like any other.
   */
  holdProbe(t: number, seconds: number): boolean {
    const view = this.views[0] as ShardView;
    const used = new Set(this.probeLeases.map((lease) => lease.slot));
    const slot = Array.from({ length: PROBE_SLOTS }, (_, k) => PROBE_SLOT_BASE + k).find((index) => !used.has(index));
    if (slot === undefined) return false;
    this.account(t);
    const lease: LeaseSlot = {
      shard: view.shard,
      slot,
      taskId: 'probe',
      takenAt: this.ms(t),
      until: this.ms(t + seconds),
      delivery: LAB_DELIVERY,
    };
    view.slots.push(lease);
    this.probeLeases.push(lease);
    this.live++;
    this.countTake(t);
    return true;
  }

  /** A slot taken at `t`, counted in all and in its minute. */
  private countTake(t: number): void {
    this.counts.leaseTakes++;
    const minute = Math.floor(t / 60);
    const byMinute = this.counts.leaseTakesByMinute;
    while (byMinute.length <= minute) byMinute.push(0);
    byMinute[minute] = (byMinute[minute] ?? 0) + 1;
  }

  /** The probe was refused, or the solver answered it: its lease is released (the oldest probe's first). */
  releaseProbe(): void {
    const lease = this.probeLeases.shift();
    if (lease === undefined) return;
    this.account(this.host.now());
    const slots = (this.views[0] as ShardView).slots;
    slots.splice(slots.indexOf(lease), 1);
    this.live--;
    this.counts.leaseReleases++;
    this.host.roomOpened();
  }

  /** The slot frees: deleted by its holder or the watch, or past its end. */
  private free(id: number, deleted: boolean): void {
    const held = this.held.get(id);
    if (held === undefined) return;
    this.account(this.host.now());
    const slots = (this.views[held.index] as ShardView).slots;
    slots.splice(slots.indexOf(held.lease), 1);
    this.held.delete(id);
    this.live--;
    if (deleted) this.counts.leaseReleases++;
    else this.counts.leasesExpired++;
    this.host.roomOpened();
  }

  /** The fleet's held threads as a delivery saw them at its take, its own not counted (LeaseHolding.fleetHeld). */
  private fleetHeld(id: number): number {
    const held = this.held.get(id);
    return fleetHeldUnder(held?.others ?? 0, this.views.length, held?.room);
  }

  /**
   * A waiting consumer's time between its rounds over the shards now, seconds: `leaseWaitPollSeconds`
   * for a round that reads a full shard, sooner for one that reads less (LeaseHolding.take, `leaseWaitPollMs`).
   */
  waitPollSeconds(): number {
    const items = this.views.map((view) => view.slots.length);
    return leaseWaitPollMs(items, this.model.leaseWaitPollSeconds * 1000) / 1000;
  }

  /** A wait for a slot ends: its seconds, and the shard reads of its polls (a round over the shards every `waitPollSeconds`). */
  private endWait(id: number, t: number): void {
    const since = this.waitingSince.get(id);
    if (since === undefined) return;
    this.waitingSince.delete(id);
    this.counts.slotWaitSeconds += t - since;
    const polls = Math.floor((t - since) / (this.waitPollSeconds() + this.consumer.readSeconds) + 1e-9);
    if (polls > 0) for (const view of this.views) bump(this.counts.consumerShardReads, view.slots.length, polls);
  }

  // ---- the watch -----------------------------------------------------------------------------

  /** The round at `at` finds the task's answer: its slot frees once the round's bulk poll has answered (`watchPollSeconds`). */
  private schedule(id: number, at: number, state: number): void {
    const freeAt = at + this.model.watchPollSeconds;
    this.state[id] = state;
    this.watchAt[id] = freeAt;
    this.heap.push(freeAt, id * 4 + P_WATCH_FREE);
  }

  /** The watch's round finds the answer ready: the slot frees, and the answer is recorded. */
  private watchFrees(id: number, t: number): void {
    const state = u8(this.state, id);
    if ((state !== WATCHED && state !== EARLY) || f64(this.watchAt, id) !== t) return;
    this.free(id, true);
    let recordAt = t;
    if (state === EARLY) {
      // Followed: its record read once a second from this round until the holder has parked it.
      const reads = Math.max(0, Math.ceil((f64(this.parkedAt, id) - t) / HOLDER_READ_GAP_SECONDS - 1e-9));
      this.counts.recordReads += reads + 1;
      recordAt = this.first(t + reads * HOLDER_READ_GAP_SECONDS, this.rounds);
    }
    this.state[id] = RECORDING;
    this.heap.push(recordAt + this.model.watchRecordSeconds, id * 4 + P_RECORDED);
  }

  private recordedByWatch(id: number): void {
    this.state[id] = NONE;
    this.parkedNow--;
    this.counts.recordedByWatch++;
    // A solve the consumers never saw: the watch counts it in the ledger (the price per solve).
    this.host.ledger.countSolved();
    this.host.recorded(id);
  }

  /**
   * A parked task's lease reaches its end: its slot is free; a task still parked under it is
   * visible again. (Only parked leases have an end event: a lease its invocation holds is given
   * back or parked within the invocation, whose solve deadline comes before the lease's end.)
   */
  private leaseEnded(id: number, t: number): void {
    if (f64(this.leaseEndAt, id) !== t) return;
    if (u8(this.state, id) === WATCHED && this.renewed(id, t)) return;
    this.free(id, false);
    const state = u8(this.state, id);
    if (state === NONE || state === RECORDING) return;
    this.state[id] = NONE;
    this.parkedNow--;
    this.host.shown(id);
  }

  /**
   * A watched lease reaches its end only when the watch's rounds in its last `renewWithinMs` did
   * not find its answer (the solve still running, or the solver down): the watch renewed it at
   * the first of those rounds for a whole lease, its message still hidden (ParkedWatch,
   * `renewWithinMs`); it frees it at its first round the solver answers after the solve.
   */
  private renewed(id: number, t: number): boolean {
    const held = this.held.get(id);
    if (held === undefined) return false;
    const until = t - renewWithinMs(this.leaseSeconds * 1000) / 1000 + this.leaseSeconds;
    held.until = until;
    held.lease.until = this.ms(until);
    this.leaseEndAt[id] = until;
    this.counts.leaseRenewals++;
    const ready = this.firstUpRound(Math.max(t, f64(this.host.tasks.solverDoneAt, id)));
    if (ready < until) this.schedule(id, ready, WATCHED);
    else this.heap.push(until, id * 4 + P_LEASE_END);
    return true;
  }

  /** The governor's strongly consistent reads of every shard, at the watch's reads of the leases, counted up to `t`. */
  private account(t: number): void {
    if (t <= this.accountedTo) return;
    const reads = this.before(t, this.reads) - this.before(this.accountedTo, this.reads);
    if (reads > 0) for (const view of this.views) bump(this.counts.governorShardReads, view.slots.length, reads);
    this.accountedTo = t;
  }

  /** The watch's rounds (or reads of the leases) before `t` seconds. */
  private before(t: number, cadence: Cadence): number {
    const u = t - this.phase;
    if (u <= 0) return 0;
    const minutes = Math.floor(u / 60);
    const within = Math.ceil((u - minutes * 60) / cadence.period - 1e-9);
    return minutes * cadence.perMinute + Math.min(cadence.perMinute, within);
  }

  /** The watch's first round (or read of the leases) at or after `t`. */
  private first(t: number, cadence: Cadence): number {
    const u = Math.max(0, t - this.phase);
    let minute = Math.floor(u / 60);
    let k = Math.ceil((u - minute * 60) / cadence.period - 1e-9);
    if (k >= cadence.perMinute) {
      minute++;
      k = 0;
    }
    return this.phase + minute * 60 + k * cadence.period;
  }

  /** The first round at or after `t` whose bulk poll the solver answers (its polls fail in an outage). */
  private firstUpRound(t: number): number {
    let round = this.first(t, this.rounds);
    for (;;) {
      const outage = this.host.solver.outageAfter(round);
      if (outage === undefined || outage.start > round) return round;
      round = this.first(outage.end, this.rounds);
    }
  }

  private inOutage(t: number): boolean {
    const outage = this.host.solver.outageAfter(t);
    return outage !== undefined && outage.start <= t;
  }

  private ms(t: number): number {
    return this.host.epochMs + t * 1000;
  }

  private ensure(id: number): void {
    while (id >= this.state.length) {
      this.state = growU8(this.state);
      this.leaseEndAt = growF64(this.leaseEndAt);
      this.watchAt = growF64(this.watchAt);
      this.parkedAt = growF64(this.parkedAt);
    }
  }
}

/** Events `period` seconds apart, at most `perMinute` of them from each minute's start (the watch's invocation). */
interface Cadence {
  period: number;
  perMinute: number;
}

/** One more (or `n` more) at `index` of a count-by-size array. */
function bump(counts: number[], index: number, n = 1): void {
  while (counts.length <= index) counts.push(0);
  counts[index] = (counts[index] ?? 0) + n;
}

/** A shard's refusal hold-off cleared (the product's `clearRefusal`). */
function clearHoldOff(view: ShardView): void {
  const { refusedAt: _at, refusedHeld: _held, ...meta } = view.meta ?? {};
  view.meta = meta;
}
