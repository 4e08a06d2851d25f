/**
 * One delivery's part of the thread ledger: every over-cap answer and every accepted submission
 * is recorded as it comes (with the threads the fleet holds then, which the ledger copies), and
 * the thread an accepted submission took is handed back when its answer is read, when it fails,
 * or when the delivery ends. The governor reads the ledger on its next tick
 * (functions/core/governor/neighbours.ts), without CloudWatch's minute in between.
 *
 * Refused over the cap, an invocation waits for one of the fleet's threads to free (the ledger's
 * held count falls below the count at its refusal), polling with jitter, and only then submits
 * again, instead of retrying into the same refusal; a neighbour's freed thread is invisible, so a
 * wait also ends after `overCapWaitMaxMs`. The thread cap holds: the retry is one submission of
 * an invocation the ceiling already counts.
 *
 * A delivery that ends while the solver still works on its accepted submission (its deadline
 * passed, an outage outlasted its retries, the claim was lost) does not free that thread: it
 * stays counted, as a leftover tagged with its solver id, until the delivery that resumes the id
 * reads its answer (or its failure), or its lease ages out. The governor keeps the ceiling from
 * rising into threads the solver still holds, and the next invocation does not submit on top.
 *
 * The writes run beside the solve, never in its way: the solver client's answer hook is
 * synchronous, and a ledger that cannot be written costs a log line, never a task. `settle()`
 * waits for them before the delivery ends, so none is cut off when Lambda freezes the invocation.
 */
import { sleep } from '../core/helpers/time.js';
import type { Clock, SolverAnswer } from '../core/ports.js';
import { redactKey } from '../core/solver-protocol.js';
import {
  grantInForce,
  grantUsedUp,
  roomLimit,
  type ThreadLease,
  type ThreadLedgerReading,
  type ThreadLedgerRecorder,
} from '../core/thread-ledger.js';

/**
 * Threads held under which a refusal means others hold the whole plan: refused while the fleet
 * holds none, a wait would end in another refusal. Refused while it holds one or more, the wait
 * ends when one of its own solves does (the thread it frees is the fleet's to take again).
 */
const NONE_HELD = 1;

/**
 * The last reading of each ledger this process read (Lambda reuses it across invocations): what an
 * unreadable ledger is judged by (pollLedger).
 */
const lastReadings = new WeakMap<ThreadLedgerRecorder, ThreadLedgerReading>();

/** The reading with its grant used up (none left to reserve). */
function usedUp(reading: ThreadLedgerReading): ThreadLedgerReading {
  return { ...reading, grantTaken: Number.POSITIVE_INFINITY };
}

/** The ledger without the reservation a delivery holds itself (it submits under it again). */
function withoutOwnReservation(reading: ThreadLedgerReading, reserved: boolean): ThreadLedgerReading {
  return reserved && reading.grantTaken !== undefined ? { ...reading, grantTaken: reading.grantTaken - 1 } : reading;
}

/** How a refused invocation waits for a thread. */
export interface OverCapWaiting {
  /** Ledger reads while waiting are this far apart, with jitter (×0.5–1.5), ms. */
  pollMs: number;
  /**
   * Longest one wait lasts: after a refusal, before submitting again (a neighbour may have freed
   * a thread); before a first submission, before the task is handed back (waitForRoom), ms.
   */
  maxWaitMs: number;
  /** Waits (each followed by one submission) before the task is handed back. */
  maxWaits: number;
  /** Jitter source in [0, 1). @default Math.random */
  random?: () => number;
  /** @default the shared sleep helper */
  sleep?: (ms: number) => Promise<void>;
}

/** Tracks the solver threads one delivery holds, in the ledger. */
export class ThreadTracking {
  private readonly pending = new Set<Promise<unknown>>();
  /** The thread of the current accepted submission, until it is freed. */
  private lease: Promise<ThreadLease | undefined> | undefined;
  /** Threads the fleet held at this delivery's latest refusal. */
  private refusedHeld: Promise<number | undefined> | undefined;
  /** The solver id of the current accepted submission (a leftover is tagged with it). */
  private solverId: string | undefined;
  /** The solver id this delivery resumed (a predecessor's leftover it frees when it reads the answer). */
  private resumed: string | undefined;
  private waits = 0;
  /** The ledger as waitForGrant last read it (the parked design's fleet-wide refusal room comes from it). */
  private grantReading: ThreadLedgerReading | undefined;
  /** This delivery holds a reservation of the grant its submission has not spent yet. */
  private reserved = false;
  /**
   * Its last reservation could not be written (the ledger answered the read, refused the write):
   * the next check waits one poll as for a used-up grant before it reads again.
   */
  private unwritten = false;

  constructor(
    private readonly ledger: ThreadLedgerRecorder | undefined,
    private readonly clock: Clock,
    private readonly log: { warn(message: string, attributes?: Record<string, unknown>): void },
    private readonly waiting?: OverCapWaiting,
    /** Threads the plan leaves the fleet (plan − reserved): a submission waits while the fleet holds them all. */
    private readonly planCap?: number,
    /**
     * The parked design: the fleet's held threads as its thread leases count them, when this
     * delivery last looked. Acceptances and refusals are then recorded with that count, and the
     * ledger's own held buckets are left alone (the leases hold the threads; functions/core/thread-leases.ts).
     */
    private readonly leasedHeld?: () => number,
    /**
     * The parked design, at a refusal: the fleet's held threads counted exactly (every lease shard
     * read; LeaseHolding.refusedHeld), recorded in place of `leasedHeld`'s scaled count.
     */
    private readonly refusalHeld?: () => Promise<number>,
  ) {}

  /**
   * Before a new submission: while the fleet already holds every thread it may (the plan's, or
   * the threads it held at a refusal no acceptance has followed yet: the fleet-wide refusal
   * signal, roomLimit; leftovers included), wait for one to free rather than submit into a
   * refusal, at most `maxWaitMs` and never past `deadlineAt`; and while the governor's spend grant
   * is used up (the money above the pause level pays for no more solves), wait for a new grant. Resolves true to submit, false when
   * the fleet is still full at the end of the wait: the caller hands the task back (with its
   * visibility delay), so the invocation's slot is free for the tasks whose answers free threads.
   * An unreadable ledger does not wait.
   */
  async waitForRoom(deadlineAt: number): Promise<boolean> {
    const waiting = this.waiting;
    const cap = this.planCap;
    if (waiting === undefined || cap === undefined) return true;
    const bounded = Math.min(deadlineAt - waiting.pollMs, this.clock() + waiting.maxWaitMs);
    return this.pollLedger((reading, now) => {
      const room = roomLimit(reading, cap, now);
      const granted = !grantUsedUp(reading, now);
      if (reading.held < room && granted) return 'go';
      // The room full of the fleet's own solves frees as they end: wait for one, up to the
      // deadline (two invocations can share one free thread). Full of leftovers, whose tasks must
      // come back to free them, or held by the grant: the bounded wait, then the task goes back.
      const own = reading.held - (reading.leftover ?? 0);
      const patient = own >= room && own > 0 && granted;
      return patient ? deadlineAt - waiting.pollMs : bounded;
    });
  }

  /**
   * The parked design, before a fresh submission takes its thread lease: while the governor's
   * spend grant is used up (the money above the pause level pays for no more solves), wait for a
   * new grant, at most `maxWaitMs` and never past `deadlineAt`, as waitForRoom does. Resolves true
   * to submit, false when the grant is still used up at the end: the caller hands the task back
   * without a submission. An unreadable ledger does not wait. No reservation is taken here: the
   * delivery takes its thread lease first, then its reservation (`reserveLeased`), so that every
   * reservation is held by a delivery the governor counts among the held threads (the leases).
   * Taken before the lease, a reservation held through a wait for a slot was among the
   * reservations the grant counts from but not among the leases whose solves its money sets
   * aside: the money was granted to it twice.
   */
  async waitForGrant(deadlineAt: number): Promise<boolean> {
    const waiting = this.waiting;
    if (waiting === undefined) return true;
    // A reservation held since an earlier submission (refused over the cap, its lease given back)
    // goes back: the resubmission takes one again once it holds a lease.
    this.endReservation(false);
    const until = Math.min(deadlineAt - waiting.pollMs, this.clock() + waiting.maxWaitMs);
    const decide = (reading: ThreadLedgerReading, now: number) => (grantUsedUp(reading, now) ? until : ('go' as const));
    return this.pollLedger(decide, { reserve: false });
  }

  /**
   * The parked design, once its thread lease is held: take the reservation of the grant the last
   * check (waitForGrant) let it through under, when that grant is in force on a ledger that keeps
   * them. True when taken or not needed; false when others took the last ones since the read, or
   * when it could not be written (throttled, down): the caller gives its lease back and waits for
   * a new grant (after a write that failed, a poll at least before it reads again).
   */
  async reserveLeased(): Promise<boolean> {
    const reading = this.grantReading;
    if (reading === undefined || !this.mustReserve(reading, this.clock())) return true;
    return this.reserveGrant();
  }

  /**
   * Read the ledger every `pollMs` (jittered) until `decide` says go, or until the time it
   * returns has passed. True to go, false at the bound. The last reading stays for
   * `lastGrantReading`. With `reserve` (the waiting design, which submits at once) a go under a
   * grant is also a reservation taken. A ledger that cannot be read (throttled, down) does not
   * wait, unless the last reading this process had of it showed a spend grant still in force:
   * then the grant is taken as used up (a submission no reservation counts could spend money the
   * grant does not pay for) and the read is tried again until the bound; once that grant's
   * `until` has passed (a governor that cannot read the ledger either lets it lapse), it does not wait.
   */
  private async pollLedger(
    decide: (reading: ThreadLedgerReading, now: number) => 'go' | number,
    options: { reserve: boolean } = { reserve: true },
  ): Promise<boolean> {
    const ledger = this.ledger;
    const waiting = this.waiting;
    if (ledger === undefined || waiting === undefined) return true;
    const random = waiting.random ?? Math.random;
    const pause = waiting.sleep ?? sleep;
    for (;;) {
      const reading = await ledger.read().catch(() => undefined);
      this.grantReading = reading;
      const now = this.clock();
      // Its last reservation not written, the first reading after counts the grant used up: a
      // ledger that answers reads and refuses writes would otherwise send it round its lease at once.
      const unwritten = this.unwritten;
      this.unwritten = false;
      let until: 'go' | number;
      if (reading === undefined) {
        const last = lastReadings.get(ledger);
        if (last === undefined || !grantInForce(last, now)) return true;
        until = decide(usedUp(last), now);
      } else {
        lastReadings.set(ledger, reading);
        // A reservation this delivery holds (a resubmission's) is its own, not one the grant lacks.
        until = decide(unwritten ? usedUp(reading) : withoutOwnReservation(reading, this.reserved), now);
      }
      // Under a grant, the go is a reservation taken (others reading the same count, a batch's
      // deliveries among them, may have taken the last ones since); none taken, wait as for a used-up grant.
      if (
        until === 'go' &&
        reading !== undefined &&
        options.reserve &&
        this.mustReserve(reading, now) &&
        !(await this.reserveGrant())
      ) {
        until = decide(usedUp(reading), now);
        // This wait is the poll an unwritten reservation waits: the next reading decides afresh.
        this.unwritten = false;
      }
      if (until === 'go') return true;
      const left = until - now;
      if (left <= 0) return false;
      await pause(Math.min(left, waiting.pollMs * (0.5 + random())));
    }
  }

  /**
   * Whether a go must take a reservation of the grant: one in force on a ledger that keeps them,
   * and none held that this delivery's submission has not spent (a resubmission keeps its own).
   */
  private mustReserve(reading: ThreadLedgerReading, now: number): boolean {
    return (
      !this.reserved &&
      this.ledger?.takeGrant !== undefined &&
      reading.grantTaken !== undefined &&
      grantInForce(reading, now)
    );
  }

  /**
   * Take a reservation. True when taken; false when the grant is used up (others took the last
   * ones since the read) or when the reservation could not be written: a submission no
   * reservation counts could spend money the grant does not pay for (the governor grants from
   * the reservations it reads), so an unwritable reservation waits as a used-up grant does, and
   * the task goes back unsubmitted at the wait's end. A write whose answer was lost may have
   * taken one all the same: it stays among those taken, one solve fewer until the governor's next
   * grant (which counts from the reservations it reads), never one more.
   */
  private async reserveGrant(): Promise<boolean> {
    const taken = await (this.ledger?.takeGrant?.() ?? Promise.resolve(true)).catch((error: unknown) => {
      this.log.warn('grant reservation not written; waiting as for a used-up grant', {
        error: redactKey(`${(error as Error).name}: ${(error as Error).message}`),
      });
      this.unwritten = true;
      return false;
    });
    this.reserved = taken;
    return taken;
  }

  /** The reservation this delivery holds is spent (its submission accepted) or given back (it ended unaccepted). */
  private endReservation(spent: boolean): void {
    if (!this.reserved) return;
    this.reserved = false;
    const ledger = this.ledger;
    if (!spent && ledger?.returnGrant !== undefined) this.track(ledger.returnGrant(), 'grant return');
  }

  /**
   * The ledger as the last spend-grant check read it (undefined before one, or when it could not
   * be read): the parked design takes its slot under that reading's refusal room, at no read more.
   */
  get lastGrantReading(): ThreadLedgerReading | undefined {
    return this.grantReading;
  }

  /**
   * After an over-cap refusal: wait until one of the fleet's threads frees (or `maxWaitMs`), never
   * past `deadlineAt`. Resolves true when the caller should submit again, false when it should
   * give the task back (no ledger, waits used up, or no time left).
   */
  async waitForFreeThread(deadlineAt: number): Promise<boolean> {
    const waiting = this.waiting;
    if (this.ledger === undefined || waiting === undefined || this.waits >= waiting.maxWaits) return false;
    const until = Math.min(deadlineAt, this.clock() + waiting.maxWaitMs);
    if (until <= this.clock() + waiting.pollMs / 2) return false;
    this.waits += 1;
    const refusedHeld = await this.refusedHeld;
    // Refused while the fleet held fewer threads than a mapping's floor: others hold the plan, and a
    // wait would end in another refusal; the governor probes for the threads they hand back.
    if (refusedHeld !== undefined && refusedHeld < NONE_HELD) return false;
    const random = waiting.random ?? Math.random;
    const pause = waiting.sleep ?? sleep;
    for (;;) {
      const left = until - this.clock();
      if (left <= 0) return true;
      await pause(Math.min(left, waiting.pollMs * (0.5 + random())));
      const reading = await this.ledger.read().catch(() => undefined);
      // Unknown counts as freed: submit again rather than wait blind.
      if (reading === undefined || refusedHeld === undefined || reading.held < refusedHeld) return true;
    }
  }

  /** The solver accepted this delivery's submission under `solverId`. */
  submitted(solverId: string): void {
    this.solverId = solverId;
  }

  /** This delivery polls a predecessor's submission instead of submitting. */
  resuming(solverId: string): void {
    this.resumed = solverId;
  }

  /** One solver answer (from the client's `onSolverAnswer`): record refusals and acceptances, free threads. */
  onAnswer(answer: SolverAnswer): void {
    if (this.ledger === undefined) return;
    const ledger = this.ledger;
    if (this.leasedHeld !== undefined) {
      // A solve this delivery read itself counts in `solved` (the grant's price), as the watch's do.
      if (answer.outcome === 'answered' && ledger.countSolved !== undefined) {
        this.track(ledger.countSolved(1), 'solved count');
        return;
      }
      if (answer.request !== 'submit' || (answer.outcome !== 'accepted' && answer.outcome !== 'over_cap')) return;
      const event = answer.outcome === 'accepted' ? 'acceptance' : 'refusal';
      if (event === 'acceptance') this.endReservation(true);
      const at = this.clock();
      const held =
        event === 'refusal' && this.refusalHeld !== undefined ? this.refusalHeld() : Promise.resolve(this.leasedHeld());
      void this.track(
        held.then((count) => ledger.recordEvent(event, at, count)),
        event,
      );
      return;
    }
    if (answer.request === 'submit' && answer.outcome === 'over_cap') {
      this.refusedHeld = this.track(ledger.refused(this.clock()), 'refusal');
      return;
    }
    if (answer.request === 'submit' && answer.outcome === 'accepted') {
      // A resubmit (after an unsolvable answer) follows a freed thread; free it first if not yet.
      this.free();
      this.solverId = undefined;
      this.endReservation(true);
      this.lease = this.track(ledger.accepted(this.clock()), 'acceptance');
      return;
    }
    // The solver frees the thread once the answer is ready or the captcha failed; an answer read
    // is a solve the provider charges for, counted with the release. An answer in the
    // submission's own response ends it too (without this, its thread stayed counted as a
    // leftover until its lease aged out: a plan of 2 stood still for 20 s on CapSolver's images).
    const ended = answer.outcome === 'answered' || (answer.request === 'result' && answer.outcome === 'task_terminal');
    if (!ended) return;
    if (this.lease === undefined && this.resumed !== undefined) {
      const id = this.resumed;
      this.resumed = undefined;
      this.track(ledger.leftoverAnswered(id), 'leftover release');
      return;
    }
    if (answer.outcome === 'answered') this.free({ solved: true });
    else this.free();
  }

  /**
   * The delivery ends: a thread still held for an unanswered submission (timeout, outage, lost
   * claim) stays counted as a leftover; then wait for every ledger write.
   */
  async settle(): Promise<void> {
    // A reservation no acceptance spent goes back to the grant.
    this.endReservation(false);
    this.leaveOver();
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  private leaveOver(): void {
    const lease = this.lease;
    if (lease === undefined || this.ledger === undefined) return;
    this.lease = undefined;
    const ledger = this.ledger;
    const solverId = this.solverId;
    this.track(
      lease.then((taken) => (taken === undefined ? undefined : ledger.leftOver(taken, solverId))),
      'leftover',
    );
  }

  /**
   * Hand the held thread back, counting a solve when its answer was read. A delivery that holds
   * no lease (it resumed a predecessor's submission, or its acceptance was not written) counts
   * none: the governor then learns a price from fewer solves, so a higher one, never a lower.
   */
  private free(outcome?: { solved: true }): void {
    const lease = this.lease;
    if (lease === undefined || this.ledger === undefined) return;
    this.lease = undefined;
    const ledger = this.ledger;
    this.track(
      lease.then((taken) => (taken === undefined ? undefined : ledger.released(taken, outcome))),
      'release',
    );
  }

  /** Run a ledger write beside the solve; a failure is logged (redacted) and read as nothing written. */
  private track<T>(write: Promise<T>, what: string): Promise<T | undefined> {
    const settled = write.catch((error: unknown) => {
      this.log.warn('thread ledger not written; the governor sees this answer a tick late or not at all', {
        write: what,
        error: redactKey(`${(error as Error).name}: ${(error as Error).message}`),
      });
      return undefined;
    });
    this.pending.add(settled);
    void settled.finally(() => this.pending.delete(settled));
    return settled;
  }
}
