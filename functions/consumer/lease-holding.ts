/**
 * One delivery's thread lease in the parked design (functions/core/thread-leases.ts): a slot is
 * taken before each fresh submission (waiting while every open slot is held: up to the deadline
 * while live leases hold them all, else at most `maxWaitMs`; its reads `leaseWaitPollMs` apart
 * for a full shard, sooner for a smaller one), kept when the task parks (the governor frees it once the solver answers), and given
 * back otherwise: a refused submission, a failure, or a task that ends in this invocation. An
 * over-cap refusal is recorded in the slot's shard and in the thread ledger: the shard's takers
 * hold off below the slots held then until the governor's next look, and every consumer, in
 * every shard, holds the fleet below the ledger's refusal room (`roomLimit`, read with the spend
 * grant before the take: the fleet-wide refusal signal, `fleetRoomOf`).
 */
import { sleep } from '../core/helpers/time.js';
import type { Clock, DeliveredMessage } from '../core/ports.js';
import type { ThreadLedgerReading } from '../core/thread-ledger.js';
import {
  fleetHeldUnder,
  fleetRoomFull,
  fleetRoomOf,
  freeSlotIndexes,
  fullOfLive,
  leaseWaitPollMs,
  type LeaseLane,
  type LeaseSlot,
  liveHeld,
  liveSlots,
  shardCapacity,
  type ShardView,
  slotsInForce,
  takeProbeSlot,
} from '../core/thread-leases.js';
import type { ConsumerTiming } from './context.js';
import { describe, type RecordLog } from './delivery.js';
import type { OverCapWaiting } from './thread-tracking.js';

/**
 * How a delivery waits for a slot: the over-cap waits' bounds (`maxWaitMs`, `maxWaits`), its reads
 * of the shards `leaseWaitPollMs` apart.
 */
export function leaseWaiting(timing: Pick<ConsumerTiming, 'overCapWaiting' | 'leaseWaitPollMs'>): OverCapWaiting {
  return { ...timing.overCapWaiting, pollMs: timing.leaseWaitPollMs };
}

/** What a take reads of the thread ledger: its newest refusal and acceptance (the fleet-wide refusal room). */
export type RefusalSignal = Pick<ThreadLedgerReading, 'lastRefusal' | 'lastAcceptance' | 'refusalRun'>;

/** Slots tried per shard read before reading again (a take lost to another consumer). */
const TAKES_PER_READ = 3;

/** The lease of one delivery of one task. */
export class LeaseHolding {
  private held: LeaseSlot | undefined;
  /** The live slots of the held slot's shard when it was taken, not counting it. */
  private othersAtTake = 0;
  /** The lane's shards as read at a refusal of this delivery's submission (`refusedHeld`), until its shard records it. */
  private refusalRead: Promise<readonly ShardView[] | undefined> | undefined;
  /** The fleet-wide refusal room in force when the slot was taken under it (undefined: none, or a slot taken whatever the limits). */
  private roomAtTake: number | undefined;
  private waits = 0;
  /** The thread ledger as read before this take (its refusal room holds every shard, `fleetRoomOf`). */
  private ledger: RefusalSignal | undefined;

  constructor(
    private readonly lane: LeaseLane,
    private readonly taskId: string,
    private readonly delivery: DeliveredMessage,
    private readonly clock: Clock,
    private readonly waiting: OverCapWaiting,
    private readonly log: RecordLog,
  ) {}

  /**
   * The fleet's held threads when this delivery last looked, its own not counted: the live slots
   * of the shard it took from, scaled to the whole plan when the lane has several shards, and
   * under the refusal room it took its slot in (`fleetHeldUnder`).
   */
  fleetHeld(): number {
    return fleetHeldUnder(this.othersAtTake, this.lane.shards.length, this.roomAtTake);
  }

  /**
   * The fleet's held threads at a refusal of this delivery's submission, its own slot not counted:
   * every shard of the lane read and its live slots counted exactly. A take reads one shard and
   * scales it (`fleetHeld`), a step of the shards' number on a lane of many, and the room a
   * refusal leaves is that count: scaled up, the fleet fills it and is refused again; scaled down,
   * it idles threads for the hold-off. A refusal is rare, so the reads are few. A read that fails
   * gives the scaled count.
   */
  async refusedHeld(): Promise<number> {
    const own = this.held;
    const views = await this.readAtRefusal();
    return views === undefined ? this.fleetHeld() : liveHeld(views, this.clock(), own);
  }

  /** Read every shard of the lane for a refusal's counts; undefined when a read failed. */
  private readAtRefusal(): Promise<readonly ShardView[] | undefined> {
    this.refusalRead = Promise.all(this.lane.shards.map((shard) => this.lane.leases.view(shard))).catch((error) => {
      this.log.warn('lease shards not read at a refusal; its count is the scaled one', { error: describe(error) });
      return undefined;
    });
    return this.refusalRead;
  }

  /**
   * The others' live slots in the refused slot's shard at the refusal, its own not counted: the
   * count its shard's hold-off keeps the takers to. Read with the ledger's count (`refusedHeld`),
   * or now. Not the count at the take: takers that read the shard at once (a burst) each saw the
   * others' slots not yet taken, and a refusal recorded at 0 while the fleet held its accepted
   * submissions closed the shard to every taker for the whole hold-off. A read that failed gives
   * the count at the take.
   */
  private async othersAtRefusal(lease: LeaseSlot): Promise<number> {
    const views = await (this.refusalRead ?? this.readAtRefusal());
    this.refusalRead = undefined;
    const view = views?.find((read) => read.shard === lease.shard);
    return view === undefined ? this.othersAtTake : liveHeld([view], this.clock(), lease);
  }

  /** The slot held now, if any. */
  get lease(): LeaseSlot | undefined {
    return this.held;
  }

  /**
   * Take a slot before a fresh submission: at once when one is open, else reading the shards
   * again every `waiting.pollMs` (×0.5–1.5; sooner when the round read less than a full shard,
   * `leaseWaitPollMs`) until one opens, never past `deadlineAt`. While the
   * slots the governor opened are all held by live leases (the fleet's own solves, freed as their
   * answers come: `fullOfLive`), it waits up to `deadlineAt`; otherwise (a refusal's hold-off, a
   * paused governor) at most `maxWaitMs`. False when none opened in time (the caller hands the
   * task back without a submission). A store failure is thrown (the task waits).
   *
   * `ledger`, the thread ledger as read just before (ThreadTracking.waitForGrant): while its
   * newest refusal is in force, a shard whose live slots fill its share of the refusal room
   * (`fleetRoomFull`) is closed too; full of live leases, the wait is the
   * patient one. The room lapses with the hold-off's time; an acceptance that lifts it is seen
   * at the next submission's read.
   */
  async take(deadlineAt: number, ledger?: RefusalSignal): Promise<boolean> {
    if (this.held !== undefined) return true;
    this.ledger = ledger;
    const random = this.waiting.random ?? Math.random;
    const pause = this.waiting.sleep ?? sleep;
    const { pollMs } = this.waiting;
    const bounded = Math.min(deadlineAt - pollMs, this.clock() + this.waiting.maxWaitMs);
    for (;;) {
      const round: number[] = [];
      const found = await this.tryShards(random, round);
      if (found === 'taken') return true;
      const left = (found === 'full' ? deadlineAt - pollMs : bounded) - this.clock();
      if (left <= 0) return false;
      // A round that read little (a small plan's shard) comes round sooner for the same read units.
      await pause(Math.min(left, leaseWaitPollMs(round, pollMs) * (0.5 + random())));
    }
  }

  /**
   * A slot for a submission the solver already holds a thread for (one resumed, or handed on):
   * taken whatever the governor's limit and hold-off, if any slot of a shard is free (the count
   * must see the thread). False when every slot is taken.
   */
  async takeHeld(): Promise<boolean> {
    if (this.held !== undefined) return true;
    const random = this.waiting.random ?? Math.random;
    for (const [index, shard] of this.lane.shards.entries()) {
      const view = await this.lane.leases.view(shard);
      if ((await this.tryShard(view, index, random, true)) === 'taken') return true;
    }
    return false;
  }

  /**
   * The governor's probe (RecordContext.probe): one of the probe's own slots (`PROBE_SLOT_BASE`
   * onwards, in the lane's first shard, where no other taker looks), whatever the governor's limit
   * and hold-off, at once or not at all: the plan's refusals are what the probe tests. False when
   * every probe slot is held (accepted probes not yet answered).
   */
  async takeProbe(): Promise<boolean> {
    if (this.held !== undefined) return true;
    const shard = this.lane.shards[0] as string;
    const now = this.clock();
    const view = await this.lane.leases.view(shard);
    const until = now + this.lane.leaseMs;
    const lease = await takeProbeSlot(this.lane.leases, {
      shard,
      taskId: this.taskId,
      takenAt: now,
      until,
      delivery: this.delivery,
    });
    if (lease === undefined) return false;
    this.held = lease;
    this.othersAtTake = liveSlots(view, now).length;
    return true;
  }

  /**
   * The solver refused this delivery's submission over the cap: the refusal goes into the shard
   * (with the slots held in it then, ours not counted: `othersAtRefusal`) and the slot is given
   * back (no solver thread was taken). True when the caller may wait for a slot and submit again
   * (`maxWaits`).
   */
  async refused(): Promise<boolean> {
    const lease = this.held;
    if (lease !== undefined) {
      const others = await this.othersAtRefusal(lease);
      try {
        await this.lane.leases.refused(lease.shard, this.clock(), others);
      } catch (error) {
        this.log.warn('refusal not recorded in the lease shard', { error: describe(error) });
      }
      await this.release();
    }
    this.waits += 1;
    return this.waits <= this.waiting.maxWaits;
  }

  /** The task parked: its slot stays taken until the governor sees the answer (or its `until`). */
  parked(): void {
    this.held = undefined;
  }

  /** Give the slot back (the submission ended in this invocation, or none was accepted). */
  async release(): Promise<void> {
    const lease = this.held;
    if (lease === undefined) return;
    this.held = undefined;
    try {
      await this.lane.leases.release(lease);
    } catch (error) {
      // Not freed now: the slot frees itself at its `until`; meanwhile the fleet holds one slot more.
      this.log.warn('lease not released; it ends at its deadline', { error: describe(error) });
    }
  }

  /**
   * One round over the shards, from a random one: the first open slot taken ('taken'), else
   * whether every shard read was full of live leases ('full') or not ('closed'); the slot items
   * each shard read held go into `itemsRead` (what the round cost). A shard whose open slots
   * other takers won first (the conditional take failed) is full of live leases too: its read
   * showed them free, and a live lease holds each now. Counted as closed, a delivery that lost
   * such a race after `maxWaitMs` handed its task back while the fleet's own solves, not a
   * refusal or a pause, held the slots: on a full plan, where every freed slot is raced for, 9 to
   * 14 tasks in 200 (`npm start -- --solver-latency-ms 3000`).
   */
  private async tryShards(random: () => number, itemsRead: number[]): Promise<'taken' | 'full' | 'closed'> {
    const { shards, planCap } = this.lane;
    const start = Math.floor(random() * shards.length);
    let full = true;
    for (let k = 0; k < shards.length; k++) {
      const index = (start + k) % shards.length;
      const view = await this.lane.leases.view(shards[index] as string);
      itemsRead.push(view.slots.length);
      const took = await this.tryShard(view, index, random);
      if (took === 'taken') return 'taken';
      full &&= took === 'lost' || fullOfLive(view, planCap, index, this.clock()) || this.ownSolvesFillRoom(view, index);
    }
    return full ? 'full' : 'closed';
  }

  /** The fleet-wide refusal room at `now`, from the ledger read before this take. */
  private fleetRoom(now: number): number | undefined {
    return fleetRoomOf(this.ledger, this.lane.planCap, now);
  }

  /**
   * The fleet-wide refusal room is what closes the shard, and the fleet's own live leases fill it:
   * they free as their answers come, so the wait is patient (as the waiting design's, waitForRoom).
   */
  private ownSolvesFillRoom(view: ShardView, index: number): boolean {
    const now = this.clock();
    const live = liveSlots(view, now).length;
    return live > 0 && fleetRoomFull(this.fleetRoom(now), live, this.lane.shards.length, index);
  }

  /**
   * Take one of the shard's free slots in force: 'taken', 'lost' when each one tried was taken by
   * another first, 'none' when the read showed none to try.
   */
  private async tryShard(
    view: ShardView,
    index: number,
    random: () => number,
    anyFree = false,
  ): Promise<'taken' | 'lost' | 'none'> {
    const now = this.clock();
    const { planCap, shards } = this.lane;
    const room = anyFree ? undefined : this.fleetRoom(now);
    const live = liveSlots(view, now).length;
    // Under the limit in force and the shard's share of the refusal room (roomInShard and
    // fleetRoomFull both at once): the count, and the slot indexes a take may use.
    const slots = anyFree
      ? shardCapacity(planCap, index)
      : slotsInForce(view, { planCap, shards: shards.length }, index, now, room);
    if (!anyFree && live >= slots) return 'none';
    const free = freeSlotIndexes(view, slots, now, random);
    if (free.length === 0) return 'none';
    for (const slot of free.slice(0, TAKES_PER_READ)) {
      const lease: LeaseSlot = {
        shard: view.shard,
        slot,
        taskId: this.taskId,
        takenAt: now,
        until: now + this.lane.leaseMs,
        delivery: this.delivery,
      };
      if (await this.lane.leases.take(lease)) {
        this.held = lease;
        this.othersAtTake = live;
        this.roomAtTake = room;
        return 'taken';
      }
    }
    return 'lost';
  }
}
