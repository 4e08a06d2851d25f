import { describe, expect, it } from 'vitest';
import { shippedTraces } from '../../lab/bench.js';
import { DEFAULT_OVERFLOW, governorOverflowPolicy, type OverflowSpec } from '../../lab/overflow.js';
import { OverflowLane } from '../../lab/sim/overflow-lane.js';
import { createPolicy } from '../../lab/policies.js';
import { simulate } from '../../lab/sim.js';
import { parseTrace } from '../../lab/trace.js';

function spikeAndDrop() {
  const trace = shippedTraces().find((t) => t.name === 'spike-and-drop');
  if (trace === undefined) throw new Error('spike-and-drop is not shipped');
  return trace;
}

/** Half an hour at 1 task/s on 50 threads; the primary solver is down from minute 5 to minute 15. */
const OUTAGE = { at: 300, durationSeconds: 600, perSecond: 1 };
const outageTrace = parseTrace(
  {
    name: 'short-outage',
    durationSeconds: 1800,
    fleet: { planThreads: 50 },
    arrivals: [{ at: 0, perSecond: OUTAGE.perSecond }],
    methods: [{ method: 'userrecaptcha', share: 1, medianSeconds: 18, p95Seconds: 40 }],
    outages: [{ at: OUTAGE.at, durationSeconds: OUTAGE.durationSeconds }],
  },
  'short-outage',
);

function withOverflow(spec: Partial<OverflowSpec>) {
  const cap = spec.capUsdPerHour ?? DEFAULT_OVERFLOW.capUsdPerHour;
  const policy = governorOverflowPolicy(outageTrace.settings, { ...DEFAULT_OVERFLOW, capUsdPerDay: 8 * cap, ...spec });
  return simulate(outageTrace, policy, { seed: 1 });
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

  it('counts a solve started under its pause level', () => {
    const lane = new OverflowLane({ ...DEFAULT_OVERFLOW, initialBalanceUsd: 0.5 });

    lane.start(10, 0);

    expect(lane.result().startedPastPause).toBe(1);
  });

  it('solves part of the spike on the overflow provider, within the cap, at a lower p95', () => {
    const trace = spikeAndDrop();

    const without = simulate(trace, createPolicy('governor', trace.settings), { seed: 1 });
    const overflow = simulate(
      trace,
      governorOverflowPolicy(trace.settings, { ...DEFAULT_OVERFLOW, capUsdPerHour: 2, capUsdPerDay: 16 }),
      { seed: 1 },
    );

    expect(overflow.overflow?.solved).toBeGreaterThan(0);
    expect(overflow.overflow?.capBreaches).toBe(0);
    expect(overflow.overflow?.worstHourUsd).toBeLessThanOrEqual(2);
    expect(overflow.latency.p95).toBeLessThan(without.latency.p95 ?? 0);
  });
});

describe('lab overflow lane through an outage of the primary', () => {
  it('moves the outage to the overflow provider, within the cap, with the lane open throughout', () => {
    // Prepare: a cap of $3/h covers the 600 tasks of the outage at $0.00299.
    const without = simulate(outageTrace, createPolicy('governor', outageTrace.settings), { seed: 1 });

    // Act
    const run = withOverflow({ capUsdPerHour: 3 });

    // Assess: most of the outage's tasks solved on the overflow provider, p95 near the 30 s
    // target instead of the outage's length, every task solved, none to the DLQ, nothing past the cap.
    const lane = run.overflow;
    const outageTasks = OUTAGE.perSecond * OUTAGE.durationSeconds;
    expect(without.latency.p95).toBeGreaterThan(OUTAGE.durationSeconds / 2);
    expect(lane?.solved).toBeGreaterThan(0.8 * outageTasks);
    expect(run.latency.p95).toBeLessThan(60);
    expect(run.solved).toBe(run.arrivals);
    expect(run.deadLettered).toBe(0);
    expect(lane?.capBreaches).toBe(0);
    expect(lane?.worstHourUsd).toBeLessThanOrEqual(3);
    // Paused for the outage, the primary leaves the lane open: closed only before the first backlog.
    expect(run.reasons['PAUSE_OUTAGE+OVERFLOW_OPEN']).toBeGreaterThan(40);
    expect(run.reasons['PAUSE_OUTAGE+OVERFLOW_CLOSED'] ?? 0).toBeLessThanOrEqual(2);
  });

  it('holds the spend at the cap when the outage needs more, and the rest waits for the primary', () => {
    // Prepare / Act: $0.50 an hour buys about 100 of the outage's 600 solves.
    const run = withOverflow({ capUsdPerHour: 0.5 });

    // Assess
    const lane = run.overflow;
    expect(lane?.solved).toBeGreaterThan(0);
    expect(run.reasons['PAUSE_OUTAGE+OVERFLOW_CAP']).toBeGreaterThan(0);
    expect(lane?.capBreaches).toBe(0);
    expect(lane?.worstHourUsd).toBeLessThanOrEqual(0.5);
    expect(lane?.worstDayUsd).toBeLessThanOrEqual(4);
    expect(run.solved).toBe(run.arrivals);
    expect(run.deadLettered).toBe(0);
  });

  it("closes the lane on the overflow account's own pause level and never spends under it", () => {
    // Prepare / Act: the overflow account holds $2.20, under the outage's $1.80 above its $1
    // pause level; its guard halts under $2.
    const run = withOverflow({ capUsdPerHour: 3, initialBalanceUsd: 2.2 });

    // Assess: the lane solved while its guard narrowed it to what the money above $1 funds, and
    // its balance, the solves in flight included, never went under $1; the rest waited for the primary.
    const lane = run.overflow;
    expect(lane?.solved).toBeGreaterThan(0);
    expect(lane?.reasons.OVERFLOW_GUARD).toBeGreaterThan(0);
    expect(lane?.startedPastPause).toBe(0);
    expect(lane?.lowestBalanceUsd).toBeGreaterThanOrEqual(DEFAULT_OVERFLOW.pauseBalanceUsd);
    expect(lane?.spentUsd).toBeLessThanOrEqual(2.2 - DEFAULT_OVERFLOW.pauseBalanceUsd);
    expect(lane?.capBreaches).toBe(0);
    expect(run.solved).toBe(run.arrivals);
    expect(run.deadLettered).toBe(0);
  });
});
