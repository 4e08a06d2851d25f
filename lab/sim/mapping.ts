/**
 * Lambda's SQS event source mapping as the lab models it: the pollers start at
 * `esmInitialConcurrency` concurrent invocations, add `esmScaleUpPerMinute` a minute while
 * messages wait and every allowed invocation is busy, never above the mapping's maximum
 * concurrency (the ceiling); with the queue empty they shrink to the highest concurrency used in
 * the last `esmScaleDownSeconds`. A disabled mapping receives nothing, and once enabled again its
 * pollers start over from the initial concurrency. Execution environments stay warm once started.
 */
import type { ModelParams } from '../model.js';

export class SqsMapping {
  /** MaximumConcurrency. */
  ceiling: number;
  enabled = true;
  /** Concurrent invocations the pollers allow now (fractional while ramping). */
  allowance: number;
  /** Highest `busy` within each of the last ramp steps (a ring), for the slow scale-down. */
  private readonly highWater: Float64Array;
  private stepIndex = 0;
  /** Highest `busy` within the current step. */
  stepHigh = 0;
  /** Warm execution environments. */
  private warm = 0;

  constructor(
    private readonly model: ModelParams,
    ceiling: number,
  ) {
    this.ceiling = ceiling;
    this.allowance = Math.min(model.esmInitialConcurrency, ceiling);
    this.highWater = new Float64Array(Math.max(1, Math.round(model.esmScaleDownSeconds / model.esmStepSeconds)));
  }

  /** Invocations that may hold a task now. */
  limit(): number {
    return this.enabled ? Math.min(this.allowance, this.ceiling) : 0;
  }

  /** The governor (or an oracle) sets the maximum concurrency and whether the mapping consumes. */
  set(ceiling: number, enabled: boolean): void {
    if (!enabled) this.allowance = 0;
    else if (!this.enabled) this.allowance = Math.min(this.model.esmInitialConcurrency, ceiling);
    this.enabled = enabled;
    this.ceiling = ceiling;
    this.allowance = Math.min(this.allowance, ceiling);
  }

  /** One more invocation started with `busy` now running: whether it needs a cold start. */
  started(busy: number): boolean {
    if (busy > this.stepHigh) this.stepHigh = busy;
    if (busy <= this.warm) return false;
    this.warm = busy;
    return true;
  }

  /** One ramp step, with `backlog` visible messages and `busy` invocations. */
  step(backlog: number, busy: number): void {
    const initial = Math.min(this.model.esmInitialConcurrency, this.ceiling);
    const ring = this.highWater;
    ring[this.stepIndex++ % ring.length] = Math.max(this.stepHigh, busy);
    this.stepHigh = busy;
    if (!this.enabled) return;
    if (backlog > 0 && busy >= Math.min(this.allowance, this.ceiling)) {
      this.allowance = Math.min(
        this.ceiling,
        this.allowance + (this.model.esmScaleUpPerMinute * this.model.esmStepSeconds) / 60,
      );
    } else if (backlog === 0) {
      let recent = 0;
      for (const high of ring) if (high > recent) recent = high;
      this.allowance = Math.min(this.ceiling, Math.max(initial, Math.min(this.allowance, recent)));
    }
  }
}
