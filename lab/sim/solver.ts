/**
 * The solver and the world around it: the plan's threads, the threads other users of the key
 * hold, the solve-time factor, the outage windows and the account balance, as the trace sets
 * them over time. A submission is accepted while our threads + foreign threads < plan threads;
 * solves accepted before or during an outage pause and finish after it (their thread stays taken).
 */
import { valueAt, type Trace } from '../trace.js';

/** How the solver answers a submission now. */
export const ACCEPT = 0;
export const OVER_CAP = 1;
export const TRANSIENT = 2;
export const NO_MONEY = 3;

export class SolverWorld {
  readonly plan: number;
  readonly price: number;
  /** Threads our submissions hold (accepted, not finished). */
  ourThreads = 0;
  foreign = 0;
  factor = 1;
  outage = false;
  balance: number;
  private readonly outages: readonly { start: number; end: number }[];

  constructor(private readonly trace: Trace) {
    this.plan = trace.settings.planThreads;
    this.price = trace.balance.pricePerSolveUsd;
    this.outages = trace.outages;
    this.balance =
      trace.balance.initialUsd +
      trace.balance.topUps.filter((topUp) => topUp.at === 0).reduce((sum, topUp) => sum + topUp.usd, 0);
  }

  /** Times at which the world changes (neighbours, slowdowns, top-ups, outage edges), after 0. */
  changeTimes(): number[] {
    const t = this.trace;
    const edges = t.outages.flatMap((o) => [o.start, o.end]);
    const all = [...t.foreignThreads.at, ...t.solveTimeFactor.at, ...t.balance.topUps.map((u) => u.at), ...edges];
    return [...new Set(all)].filter((at) => at > 0);
  }

  /** The world as it stands at `t` (called at 0 and at every change time). */
  setWorld(t: number): void {
    this.foreign = valueAt(this.trace.foreignThreads, t);
    this.factor = valueAt(this.trace.solveTimeFactor, t);
    this.outage = this.outages.some((o) => o.start <= t && t < o.end);
    for (const topUp of this.trace.balance.topUps) if (topUp.at === t && t > 0) this.balance += topUp.usd;
  }

  /** What in.php answers a submission now. */
  answer(): number {
    if (this.outage) return TRANSIENT;
    if (this.balance <= 0) return NO_MONEY;
    return this.ourThreads + this.foreign >= this.plan ? OVER_CAP : ACCEPT;
  }

  /** Threads neither we nor the neighbours hold. */
  freeThreads(): number {
    return Math.max(0, this.plan - this.foreign - this.ourThreads);
  }

  /** When a solve of `hold` seconds started at `from` ends: its clock stops during outages. */
  solverClock(from: number, hold: number): number {
    let t = from;
    let left = hold;
    for (const outage of this.outages) {
      if (outage.end <= t) continue;
      if (outage.start >= t + left) break;
      left -= Math.max(0, outage.start - t);
      t = outage.end;
    }
    return t + left;
  }

  /** The first outage that is not over at `t` (it may have begun), or undefined. */
  outageAfter(t: number): { start: number; end: number } | undefined {
    for (const outage of this.outages) if (outage.end > t) return outage;
    return undefined;
  }

  /** Start of the first outage after `t` (Infinity if none). */
  nextOutageStart(t: number): number {
    for (const outage of this.outages) if (outage.start > t) return outage.start;
    return Infinity;
  }

  /** The solver frees a thread and charges the solve. */
  finish(): void {
    this.ourThreads--;
    this.balance -= this.price;
  }
}
