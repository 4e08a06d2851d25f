/**
 * Lambda's SQS event source mapping as the lab models it: the pollers' ramp of
 * functions/core/mapping-ramp.ts (the local runtime's poller runs the same one), its constants
 * from the run's model (`esm…`, overridable), and the warm execution environments: once started
 * they stay warm.
 */
import { MappingRamp } from '../../functions/core/mapping-ramp.js';
import type { ModelParams } from '../model.js';

export class SqsMapping extends MappingRamp {
  /** Warm execution environments. */
  private warm = 0;

  constructor(model: ModelParams, ceiling: number) {
    super(
      {
        initialConcurrency: model.esmInitialConcurrency,
        scaleUpPerMinute: model.esmScaleUpPerMinute,
        stepSeconds: model.esmStepSeconds,
        scaleDownSeconds: model.esmScaleDownSeconds,
      },
      ceiling,
    );
  }

  /** One more invocation started with `busy` now running: whether it needs a cold start. */
  started(busy: number): boolean {
    this.observe(busy);
    if (busy <= this.warm) return false;
    this.warm = busy;
    return true;
  }
}
