/**
 * How Lambda's SQS event source mapping scales its invocations, as the lab's simulator and the
 * local runtime's poller both model it (one model, so `npm start` bursts as the lab and AWS do):
 * the pollers start at `initialConcurrency` concurrent invocations, add `scaleUpPerMinute` a
 * minute while messages wait and every allowed invocation is busy, never above the mapping's
 * maximum concurrency (the ceiling); with the queue empty they shrink to the highest concurrency
 * used within the last `scaleDownSeconds`. A disabled mapping receives nothing, and once enabled
 * again its pollers start over from the initial concurrency; a lowered ceiling lowers them with it.
 * AWS documents the start ("five batches at a time with five concurrent invocations") and the climb
 * ("up to 300 more instances per minute") in the Lambda guide's "Configuring scaling behavior for
 * SQS event source mappings" (standard mode; provisioned mode scales faster and is not modelled).
 * Pure: the caller steps it every `stepSeconds`.
 */

/** The ramp's constants. */
export interface MappingRampParams {
  /** Concurrent invocations the pollers start with. */
  initialConcurrency: number;
  /** Concurrent invocations added a minute at most while messages wait. */
  scaleUpPerMinute: number;
  /** The ramp's step, seconds. */
  stepSeconds: number;
  /** With the queue empty, the pollers shrink to the highest concurrency used within this window, seconds. */
  scaleDownSeconds: number;
}

/** AWS's standard (on-demand) mapping for an SQS queue. */
export const SQS_MAPPING_RAMP: Readonly<MappingRampParams> = {
  initialConcurrency: 5,
  scaleUpPerMinute: 300,
  stepSeconds: 1,
  scaleDownSeconds: 60,
};

/** One mapping's pollers: how many invocations they allow now. */
export class MappingRamp {
  /** MaximumConcurrency. */
  ceiling: number;
  enabled: boolean;
  /** Concurrent invocations the pollers allow now (fractional while ramping). */
  allowance: number;
  /** Highest busy count within each of the last steps (a ring), for the slow scale-down. */
  private readonly highWater: Float64Array;
  private stepIndex = 0;
  /** Highest busy count within the current step. */
  stepHigh = 0;

  constructor(
    private readonly params: Readonly<MappingRampParams>,
    ceiling: number,
    enabled = true,
  ) {
    this.ceiling = ceiling;
    this.enabled = enabled;
    this.allowance = enabled ? Math.min(params.initialConcurrency, ceiling) : 0;
    this.highWater = new Float64Array(Math.max(1, Math.round(params.scaleDownSeconds / params.stepSeconds)));
  }

  /** Invocations that may run now. */
  limit(): number {
    return this.enabled ? Math.min(this.allowance, this.ceiling) : 0;
  }

  /** The governor sets the maximum concurrency and whether the mapping consumes. */
  set(ceiling: number, enabled: boolean): void {
    if (!enabled) this.allowance = 0;
    else if (!this.enabled) this.allowance = Math.min(this.params.initialConcurrency, ceiling);
    this.enabled = enabled;
    this.ceiling = ceiling;
    this.allowance = Math.min(this.allowance, ceiling);
  }

  /** An invocation started with `busy` running now (the step's high-water mark). */
  observe(busy: number): void {
    if (busy > this.stepHigh) this.stepHigh = busy;
  }

  /** One step of the ramp, with `backlog` messages waiting and `busy` invocations running. */
  step(backlog: number, busy: number): void {
    const initial = Math.min(this.params.initialConcurrency, this.ceiling);
    const ring = this.highWater;
    ring[this.stepIndex++ % ring.length] = Math.max(this.stepHigh, busy);
    this.stepHigh = busy;
    if (!this.enabled) return;
    if (backlog > 0 && busy >= Math.min(this.allowance, this.ceiling)) {
      this.allowance = Math.min(
        this.ceiling,
        this.allowance + (this.params.scaleUpPerMinute * this.params.stepSeconds) / 60,
      );
    } else if (backlog === 0) {
      let recent = 0;
      for (const high of ring) if (high > recent) recent = high;
      this.allowance = Math.min(this.ceiling, Math.max(initial, Math.min(this.allowance, recent)));
    }
  }
}
