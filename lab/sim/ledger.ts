/**
 * The thread ledger the consumer writes and the governor reads each tick (a DynamoDB item in
 * AWS; here the same counts, fresh): threads held, refusals and acceptances with the threads held
 * at each (functions/core/thread-ledger.ts).
 */
import {
  grantUsedUp,
  type LedgerEvent,
  roomLimit,
  type SpendGrant,
  type ThreadLedgerReading,
} from '../../functions/core/thread-ledger.js';

export class LabThreadLedger {
  held = 0;
  private refusals = 0;
  private acceptances = 0;
  private lastRefusal: LedgerEvent | undefined;
  private lastAcceptance: LedgerEvent | undefined;
  /** Refusals since the newest acceptance. */
  private refusalRun = 0;
  /** The governor lifted the hold of refusals at or before this epoch ms (its held test). */
  private liftedAt: number | undefined;

  /** @param onRefusal called after each refusal is recorded (the simulation schedules its hold-off's lapse). */
  constructor(private readonly onRefusal: () => void = () => undefined) {}

  /** The governor's held test lifts the hold of the refusals at or before `atMs` (never back). */
  liftHold(atMs: number): void {
    this.liftedAt = Math.max(this.liftedAt ?? Number.NEGATIVE_INFINITY, atMs);
  }

  /** An accepted submission at epoch ms `atMs`: one more thread held. */
  accepted(atMs: number): void {
    this.acceptances++;
    this.lastAcceptance = { at: atMs, held: this.held };
    this.refusalRun = 0;
    this.held++;
  }

  /** Answers read as solved (the governor's price per solve is the balance drop over its rise). */
  private solved = 0;
  /** The governor's spend grant, as it last wrote it. */
  private grant: SpendGrant | undefined;

  /** A thread the fleet held is free again (answer read, or the invocation gave up); `solved` when its answer was read as solved. */
  released(solved = false): void {
    this.held--;
    if (solved) this.solved++;
  }

  /**
   * The parked design: the governor's watch recorded an answer (no consumer read it), and adds it
   * to `solved` (functions/governor/parked-watch.ts; in AWS in batches a few seconds apart).
   */
  countSolved(): void {
    this.solved++;
  }

  /** The governor sets (or clears) its spend grant. */
  setGrant(grant: SpendGrant | undefined): void {
    this.grant = grant;
  }

  /** Whether the spend grant in force is used up at epoch ms `atMs` (a submission then waits, as the consumer's does). */
  grantUsedUp(atMs: number): boolean {
    return grantUsedUp({ grant: this.grant, acceptances: this.acceptances }, atMs);
  }

  /** Leftovers: held threads no invocation waits on any more (counted in `held` until their lease ages out). */
  leftover = 0;

  /** A delivery ends while the solver still works on its submission: the thread stays held, as a leftover. */
  leftOver(): void {
    this.leftover++;
  }

  /** A leftover's lease ages out, or the delivery that resumed its solver id read the answer: its thread leaves the count. */
  expired(): void {
    this.leftover--;
    this.held--;
  }

  /** An over-cap answer at epoch ms `atMs`, with the threads the fleet held then. */
  refused(atMs: number): void {
    this.refusals++;
    this.lastRefusal = { at: atMs, held: this.held };
    this.refusalRun++;
    this.onRefusal();
  }

  /**
   * An acceptance or a refusal recorded with `held` threads, the ledger's own held count left
   * alone: the parked design, whose leases count the threads (the consumer's and the probe's
   * `recordEvent`, functions/consumer/thread-tracking.ts, functions/governor/lease-step.ts).
   */
  recordEvent(event: 'acceptance' | 'refusal', atMs: number, held: number): void {
    if (event === 'acceptance') {
      this.acceptances++;
      this.lastAcceptance = { at: atMs, held };
      this.refusalRun = 0;
    } else {
      this.refusals++;
      this.lastRefusal = { at: atMs, held };
      this.refusalRun++;
      this.onRefusal();
    }
  }

  /** Threads the fleet may hold before a new submission waits (the consumer's roomLimit) at epoch ms `atMs`. */
  room(planCap: number, atMs: number): number {
    return roomLimit(
      {
        lastRefusal: this.lastRefusal,
        lastAcceptance: this.lastAcceptance,
        refusalRun: this.refusalRun,
        ...(this.liftedAt !== undefined ? { liftedAt: this.liftedAt } : {}),
      },
      planCap,
      atMs,
    );
  }

  /** The ledger as the governor reads it. */
  reading(): ThreadLedgerReading {
    return {
      held: this.held,
      refusals: this.refusals,
      acceptances: this.acceptances,
      ...(this.leftover > 0 ? { leftover: this.leftover } : {}),
      ...(this.lastRefusal ? { lastRefusal: this.lastRefusal } : {}),
      ...(this.lastAcceptance ? { lastAcceptance: this.lastAcceptance } : {}),
      refusalRun: this.refusalRun,
      ...(this.liftedAt !== undefined ? { liftedAt: this.liftedAt } : {}),
      solved: this.solved,
      ...(this.grant ? { grant: this.grant } : {}),
    };
  }
}
