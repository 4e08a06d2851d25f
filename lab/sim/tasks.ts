/**
 * The simulator's tasks, by id, in typed arrays: a simulated day of 10⁶ tasks allocates almost
 * nothing per event. Each array grows by doubling when the ids outrun it.
 */

/** Where a task stands at the solver. */
export const NEW = 0;
export const ACCEPTED = 1;
export const SOLVED = 2;

const INITIAL = 1 << 16;

/** Every per-task field the simulator keeps. */
export class TaskTable {
  count = 0;
  arrivedAt = new Float64Array(INITIAL);
  acceptedAt = new Float64Array(INITIAL);
  baseSolve = new Float64Array(INITIAL);
  methodOf = new Uint8Array(INITIAL);
  /** Pool workers: over-cap and transient answers so far (the backoff's exponent). */
  attempts = new Uint16Array(INITIAL);
  /** Lambda: receives so far (SQS ApproximateReceiveCount). */
  receives = new Uint16Array(INITIAL);
  /** Lambda: over-cap and transient answers within the current invocation. */
  overCapTries = new Uint8Array(INITIAL);
  transientTries = new Uint8Array(INITIAL);
  /** NEW, ACCEPTED or SOLVED. */
  phase = new Uint8Array(INITIAL);
  solverDoneAt = new Float64Array(INITIAL);
  invocationStart = new Float64Array(INITIAL);
  /** Lambda: 1 while the task's invocation holds its thread in the thread ledger (accepted, answer not read). */
  leased = new Uint8Array(INITIAL);
  /** Lambda: 1 while the invocation waits for room in the fleet before submitting, 3 once a freed thread woke it (its bound still set), else 0. */
  waiting = new Uint8Array(INITIAL);
  /** When the room wait of the current delivery next checks its bound (a later check event is the live one). */
  waitCheckAt = new Float64Array(INITIAL);
  /** Lambda: 1 while the solver holds a thread for a submission no invocation waits on (handed back unanswered). */
  orphaned = new Uint8Array(INITIAL);
  /** 1 once the task is answered or dead-lettered: the rest are unfinished when the run stops. */
  done = new Uint8Array(INITIAL);

  /** A new task id (the arrays grow when needed). */
  add(): number {
    const id = this.count++;
    if (id === this.arrivedAt.length) this.grow();
    return id;
  }

  private grow(): void {
    this.arrivedAt = growF64(this.arrivedAt);
    this.acceptedAt = growF64(this.acceptedAt);
    this.baseSolve = growF64(this.baseSolve);
    this.solverDoneAt = growF64(this.solverDoneAt);
    this.invocationStart = growF64(this.invocationStart);
    this.waitCheckAt = growF64(this.waitCheckAt);
    this.methodOf = growU8(this.methodOf);
    this.overCapTries = growU8(this.overCapTries);
    this.transientTries = growU8(this.transientTries);
    this.phase = growU8(this.phase);
    this.leased = growU8(this.leased);
    this.orphaned = growU8(this.orphaned);
    this.done = growU8(this.done);
    this.waiting = growU8(this.waiting);
    this.attempts = growU16(this.attempts);
    this.receives = growU16(this.receives);
  }
}

export function growU8(array: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const bigger = new Uint8Array(array.length * 2);
  bigger.set(array);
  return bigger;
}

export function growU16(array: Uint16Array<ArrayBuffer>): Uint16Array<ArrayBuffer> {
  const bigger = new Uint16Array(array.length * 2);
  bigger.set(array);
  return bigger;
}

export function growF64(array: Float64Array<ArrayBuffer>, atLeast = 0): Float64Array<ArrayBuffer> {
  const bigger = new Float64Array(Math.max(atLeast, array.length * 2));
  bigger.set(array);
  return bigger;
}
