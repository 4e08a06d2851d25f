/**
 * The consumer's metrics as CloudWatch would hold them: counts in 10-second buckets on a ring
 * (completions, submissions, over-cap, account and transient answers, failed result requests,
 * solve times), read over a window that ends `lag` seconds ago, as the governor reads them.
 */
import type { MetricsWindow } from '../../functions/core/governor/signals.js';
import { percentileOfSorted } from '../../functions/core/helpers/stats.js';
import { at, bumpF64, f64 } from '../arrays.js';
import { growF64 } from './tasks.js';

const BUCKET_SECONDS = 10;
const RING = 256;

export class MetricsRing {
  private readonly bucketId = new Float64Array(RING).fill(-1);
  private readonly completions = new Float64Array(RING);
  private readonly submissions = new Float64Array(RING);
  private readonly overCap = new Float64Array(RING);
  private readonly account = new Float64Array(RING);
  private readonly transient = new Float64Array(RING);
  private readonly resultRequests = new Float64Array(RING);
  private readonly solveMs: number[][] = Array.from({ length: RING }, () => []);
  private scratch = new Float64Array(1024);

  /** The bucket holding time `t`, cleared on first use. */
  private slot(t: number): number {
    const id = Math.floor(t / BUCKET_SECONDS);
    const slot = id % RING;
    if (this.bucketId[slot] !== id) {
      this.bucketId[slot] = id;
      this.completions[slot] = 0;
      this.submissions[slot] = 0;
      this.overCap[slot] = 0;
      this.account[slot] = 0;
      this.transient[slot] = 0;
      this.resultRequests[slot] = 0;
      at(this.solveMs, slot).length = 0;
    }
    return slot;
  }

  /** A submission at `t` and how it was answered. */
  submission(t: number, answer: 'accepted' | 'over_cap' | 'transient' | 'account'): void {
    const slot = this.slot(t);
    bumpF64(this.submissions, slot);
    if (answer === 'over_cap') bumpF64(this.overCap, slot);
    else if (answer === 'transient') bumpF64(this.transient, slot);
    else if (answer === 'account') bumpF64(this.account, slot);
  }

  /** `count` result requests at `t` that answered a transient error. */
  failedPolls(t: number, count: number): void {
    const slot = this.slot(t);
    bumpF64(this.transient, slot, count);
    bumpF64(this.resultRequests, slot, count);
  }

  /** A solved task read at `t` after `solveMs` at the solver. */
  completion(t: number, solveMs: number): void {
    const slot = this.slot(t);
    bumpF64(this.completions, slot);
    at(this.solveMs, slot).push(solveMs);
  }

  /** The window [from, to) seconds as the governor's metrics reader returns it; undefined before 0. */
  window(from: number, to: number, windowSeconds: number): MetricsWindow | undefined {
    if (from < 0) return undefined;
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
      completions += f64(this.completions, slot);
      submissions += f64(this.submissions, slot);
      overCap += f64(this.overCap, slot);
      account += f64(this.account, slot);
      transient += f64(this.transient, slot);
      resultRequests += f64(this.resultRequests, slot);
      const times = at(this.solveMs, slot);
      if (solves + times.length > this.scratch.length) this.scratch = growF64(this.scratch, solves + times.length);
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
    return {
      windowMs: windowSeconds * 1000,
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
}
