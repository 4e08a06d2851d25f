import { describe, expect, it } from 'vitest';
import { shippedTraces } from '../../lab/bench.js';
import { DEFAULT_OVERFLOW, governorOverflowPolicy, OverflowLane } from '../../lab/overflow.js';
import { createPolicy } from '../../lab/policies.js';
import { simulate } from '../../lab/sim.js';

function spikeAndDrop() {
  const trace = shippedTraces().find((t) => t.name === 'spike-and-drop');
  if (trace === undefined) throw new Error('spike-and-drop is not shipped');
  return trace;
}

describe('lab overflow lane', () => {
  it('counts a charge that takes the hour past its cap as a breach', () => {
    // Prepare: a cap of two solves.
    const lane = new OverflowLane({ ...DEFAULT_OVERFLOW, pricePerSolveUsd: 0.5, capUsdPerHour: 1, capUsdPerDay: 10 });

    // Act: three solves in the same hour.
    for (let i = 0; i < 3; i++) {
      lane.start(10, 0);
      lane.finish(100 + i);
    }

    // Assess
    expect(lane.result().capBreaches).toBe(1);
  });

  it('solves part of the spike on the overflow provider, within the cap, at a lower p95', () => {
    const trace = spikeAndDrop();

    const without = simulate(trace, createPolicy('governor', trace.settings), { seed: 1 });
    const withOverflow = simulate(
      trace,
      governorOverflowPolicy(trace.settings, { ...DEFAULT_OVERFLOW, capUsdPerHour: 2, capUsdPerDay: 16 }),
      { seed: 1 },
    );

    expect(withOverflow.overflow?.solved).toBeGreaterThan(0);
    expect(withOverflow.overflow?.capBreaches).toBe(0);
    expect(withOverflow.overflow?.worstHourUsd).toBeLessThanOrEqual(2);
    expect(withOverflow.latency.p95).toBeLessThan(without.latency.p95 ?? 0);
  });
});
