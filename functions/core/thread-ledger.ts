/**
 * The thread ledger: what the consumer tells the governor about the solver's thread cap without
 * CloudWatch in the loop. The consumer counts the threads the fleet holds (one per accepted
 * submission, leased, so a crashed invocation cannot leave the count high) and records every
 * over-cap answer and every accepted submission with the threads the fleet held at that moment.
 * The governor reads it on every tick and keeps an estimate of the threads others hold
 * (functions/core/governor/neighbours.ts). Pure types; the DynamoDB adapter is
 * functions/adapters/thread-ledger.ts.
 */

/** The fleet's threads as the solver saw them at one answer. */
export interface LedgerEvent {
  /** Epoch ms of the answer (the consumer's clock). */
  at: number;
  /** Threads the fleet held when the answer came, not counting the submission answered. */
  held: number;
}

/** One read of the ledger. */
export interface ThreadLedgerReading {
  /** Threads the fleet holds now (accepted submissions whose answer is not yet read, within their lease). */
  held: number;
  /** Over-cap answers recorded so far (a counter: the reader compares successive reads). */
  refusals: number;
  /** Accepted submissions recorded so far (a counter). */
  acceptances: number;
  /**
   * Answers read as solved so far (a counter; absent on a ledger never told of one). The
   * governor's price per overflow solve is the provider's balance drop ÷ the rise of this counter.
   */
  solved?: number;
  /**
   * Threads held for submissions no invocation waits on any more (handed back at their deadline
   * or in an outage while the solver still works on them), within their lease; counted in `held`.
   * Absent on a ledger never told of one.
   */
  leftover?: number;
  /** The newest over-cap answer: refused while the fleet held `held` ⇒ others hold ≥ plan − held. */
  lastRefusal?: LedgerEvent;
  /**
   * Refusals recorded since the newest acceptance (0 once one was accepted): a run of them means
   * others take the threads the fleet frees. Absent on a ledger never told of one (read as 1
   * while a refusal is the newest answer).
   */
  refusalRun?: number;
  /** The newest accepted submission: accepted while the fleet held `held` ⇒ others hold ≤ plan − held − 1. */
  lastAcceptance?: LedgerEvent;
  /**
   * The governor lifted the hold of refusals recorded at or before this epoch ms (`liftHold`: a
   * test of one thread more its climb budget pays for, before the hold lapses by itself). A newer
   * refusal holds as any. Absent until it lifted one.
   */
  liftedAt?: number;
  /** The governor's spend grant, when it set one (the money above the pause level is nearly spent). */
  grant?: SpendGrant;
  /**
   * The grant's reservations (`grantTaken`): a delivery takes one with a conditional update
   * (`takeGrant`) before it submits under a grant, and gives it back if its submission ends
   * unaccepted. Present where the ledger keeps them (DynamoDB); the grant's `limit` then counts
   * in them, not in acceptances, and invocations that read the ledger at once cannot each take
   * the last solves. Absent: the grant counts in `acceptances`.
   */
  grantTaken?: number;
}

/**
 * What the money above the pause level still pays for, as the governor granted it on its last
 * tick: submissions may be accepted while the ledger's `grantTaken` (where it keeps reservations;
 * else its `acceptances`) counter is under `limit`,
 * until `until` (epoch ms; a grant the governor stopped refreshing lapses, and the solver's own
 * account answers pause the fleet as before).
 */
export interface SpendGrant {
  limit: number;
  until: number;
}

/** The count a grant's `limit` is in: the reservations where the ledger keeps them, else the acceptances. */
export function grantCount(reading: Pick<ThreadLedgerReading, 'grantTaken' | 'acceptances'>): number {
  return reading.grantTaken ?? reading.acceptances;
}

/** Whether a grant is in force at `now`. */
export function grantInForce(reading: Pick<ThreadLedgerReading, 'grant'>, now: number): boolean {
  return reading.grant !== undefined && now <= reading.grant.until;
}

/** Whether a grant in force is used up: no more submissions until the governor grants more. */
export function grantUsedUp(
  reading: Pick<ThreadLedgerReading, 'grant' | 'acceptances' | 'grantTaken'>,
  now: number,
): boolean {
  const grant = reading.grant;
  return grant !== undefined && grantInForce(reading, now) && grantCount(reading) >= grant.limit;
}

/** The governor's side of the grant: set it each tick it is in force, clear it when not. */
export interface SpendGrantWriter {
  setGrant(grant: SpendGrant | undefined): Promise<void>;
}

/**
 * The governor's side of a held fleet's test (the parked design): lift the hold of the refusals
 * recorded at or before `refusedAt` (the ledger's `liftedAt`), so the consumers take the one
 * thread more the governor opened this tick instead of waiting out the hold-off.
 */
export interface RefusalHoldLifter {
  liftHold(refusedAt: number): Promise<void>;
}

/**
 * The governor's watch's side (the parked design): the answers it recorded itself, added to the
 * ledger's `solved` counter in one update per batch. Without it the counter sees only the answers
 * a consumer read, and the price per solve learned from it would be far too high.
 */
export interface SolvedCounter {
  /** Add `count` (> 0) solves to the ledger's `solved` counter. */
  countSolved(count: number): Promise<void>;
}

/** A thread the fleet took (the lease bucket its count went into); hand it back to `released`. */
export interface ThreadLease {
  /** Lease bucket (epoch ms ÷ lease length, floored). */
  bucket: number;
}

/** What the consumer writes: one single-item update per answer, one per freed thread. */
export interface ThreadLedgerRecorder {
  /** The solver accepted a submission: the fleet holds one more thread. */
  accepted(now: number): Promise<ThreadLease>;
  /** The thread of an accepted submission is free again (answer read, failed, given up); `solved` when its answer was read as solved. */
  released(lease: ThreadLease, outcome?: { solved: boolean }): Promise<void>;
  /**
   * The delivery ends while the solver still works on its accepted submission (its deadline
   * passed, or an outage outlasted its retries): the thread stays counted, as a leftover, until
   * its lease ages out or the delivery that resumes the submission's `solverId` reads its answer.
   */
  leftOver(lease: ThreadLease, solverId?: string): Promise<void>;
  /** The delivery that resumed `solverId` read its answer (or its failure): that leftover's thread is free. */
  leftoverAnswered(solverId: string): Promise<void>;
  /** The solver refused a submission over the cap. Resolves to the threads the fleet held then. */
  refused(now: number): Promise<number>;
  /**
   * An acceptance or a refusal with the threads the fleet held then as the caller counted them
   * (the parked design counts held threads as thread leases, functions/core/thread-leases.ts):
   * the counters and the newest event move as for `accepted` / `refused`, the held buckets do not.
   */
  recordEvent(event: 'acceptance' | 'refusal', at: number, held: number): Promise<void>;
  /** The ledger as it stands (an invocation refused over the cap waits on `held` to fall). */
  read(): Promise<ThreadLedgerReading | undefined>;
  /**
   * The parked design: a delivery that reads an answer itself (a resumed submission) adds the
   * solve to `solved`, as the watch adds the ones it records (SolvedCounter). Absent: not counted.
   */
  countSolved?(count: number): Promise<void>;
  /**
   * Take one of the grant's reservations: one conditional update, `grantTaken` below the grant's
   * `limit`. True when taken; false when the grant is used up (others took the last ones since
   * this delivery read it). Absent: the ledger keeps no reservations.
   */
  takeGrant?(): Promise<boolean>;
  /** Give a reservation back: its submission ended unaccepted (refused to the end, never sent). */
  returnGrant?(): Promise<void>;
}

/** What the governor reads once per tick. */
export interface ThreadLedgerReader {
  /** The ledger as it stands, or undefined when it could not be read (never read as zero). */
  read(): Promise<ThreadLedgerReading | undefined>;
}

/** Longest a new submission waits for room in the fleet before its task is handed back, ms. */
export const ROOM_WAIT_MAX_MS = 15_000;
/** How long a refusal newer than every acceptance holds the fleet's room down, at most, ms. */
export const REFUSAL_HOLD_OFF_MS = 60_000;

/**
 * The threads the fleet may hold before a new submission waits: the plan's (less reserved), or,
 * while a refusal is in force, what it left. The fleet-wide refusal signal: one invocation
 * refused tells every other that the plan is full at that count, so they hold off (and submit as
 * the fleet's own threads free) instead of each being refused in turn before the governor's next
 * tick.
 *
 * - A refusal while the fleet held `h`: at most `h` are the fleet's to hold. It stays in force
 *   until an acceptance while the fleet held at least `h` (the plan had room past the refused
 *   count: others left), or `holdOffMs` after it (then one submission tests the count again), so
 *   a ledger that misses an acceptance cannot hold the fleet down for long, or until the governor
 *   lifts it (`liftedAt`: the parked design's test of one thread more, sooner than the
 *   hold-off). An acceptance below `h` only shows a freed thread of the fleet's own taken back,
 *   and does not lift it (lifting it there made every freed thread cost one more refusal).
 * - A refusal that follows another with no acceptance between (a run): others take the threads
 *   the fleet frees (a neighbour stepping up, or taking the whole plan). The room is the threads
 *   held at the newest, halved for each refusal of the run after the first (`runRoom`: h/2 at
 *   the second, h/4 at the third, …): a fleet that others leave none stops submitting within a
 *   few refusals, and one they leave some finds that count again with its next acceptance (which
 *   ends the run, and the newest refusal's count holds once more). Halving once per refusal was
 *   not enough where others take every thread the fleet frees: the fleet's own solves end about as
 *   fast as the room halved, so the room stayed above what it held and each half-life of its held
 *   count cost one more refusal (a neighbour taking a whole 853-thread plan: 23 refusals in 14
 *   ticks, where one probe a tick is the target).
 */
export function roomLimit(
  reading: Pick<ThreadLedgerReading, 'lastRefusal' | 'lastAcceptance' | 'refusalRun' | 'liftedAt'>,
  planCap: number,
  now: number,
  holdOffMs: number = REFUSAL_HOLD_OFF_MS,
): number {
  const refusal = reading.lastRefusal;
  if (refusal === undefined || now - refusal.at > holdOffMs) return planCap;
  if (reading.liftedAt !== undefined && refusal.at <= reading.liftedAt) return planCap;
  const acceptance = reading.lastAcceptance;
  const accepted = acceptedSinceRefusal(reading);
  if (accepted && acceptance !== undefined && acceptance.held >= refusal.held) return planCap;
  const run = accepted ? 0 : (reading.refusalRun ?? 1);
  return Math.min(planCap, run >= 2 ? runRoom(refusal.held, run) : refusal.held);
}

/**
 * The room a run of `run` refusals (no acceptance between; `run` ≥ 2) leaves the consumers: the
 * threads held at the newest, halved `run` − 1 times.
 */
export function runRoom(held: number, run = 2): number {
  return Math.floor(held / 2 ** Math.max(1, run - 1));
}

/**
 * Whether the newest acceptance came after the newest refusal: the refusal run says so (an
 * acceptance resets it); a ledger without it, the answers' clocks.
 */
export function acceptedSinceRefusal(
  reading: Pick<ThreadLedgerReading, 'lastRefusal' | 'lastAcceptance' | 'refusalRun'>,
): boolean {
  const { lastRefusal: refusal, lastAcceptance: acceptance, refusalRun: run } = reading;
  if (acceptance === undefined) return false;
  if (refusal === undefined) return true;
  return run !== undefined ? run === 0 : acceptance.at > refusal.at;
}
