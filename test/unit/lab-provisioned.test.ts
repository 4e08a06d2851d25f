import { describe, expect, it } from 'vitest';
import { costOfRun, costOfUsage, usageOfRun } from '../../lab/cost.js';
import { createPolicy } from '../../lab/policies.js';
import {
  AUTO_SCALING,
  autoScaledCapacity,
  followsTheClock,
  provisionedDynamo,
  withProvisionedDynamo,
} from '../../lab/provisioned.js';
import { simulate } from '../../lab/sim.js';
import { parseTrace } from '../../lab/trace.js';

const minutes = (n: number, unitsPerSecond: number) => Array.from({ length: n }, () => unitsPerSecond * 60);

describe('provisioned capacity under auto scaling (lab/provisioned.ts)', () => {
  it('holds a steady demand at the target utilization, nothing throttled', () => {
    // GIVEN 10 units a second for two hours
    const run = autoScaledCapacity(minutes(120, 10));
    // THEN sized at 10 / 0.7 from the start in whole units (15), kept there
    expect(run.peakUnitsPerSecond).toBe(15);
    expect(run.utilization).toBeCloseTo(10 / 15, 9);
    expect(run.unitHours).toBeCloseTo(2 * 15, 9);
    expect(run.throttledUnits).toBe(0);
  });

  it('throttles a tenfold surge while it climbs by the target’s ratio a scale-out, then follows it', () => {
    // GIVEN 10 units a second for 30 minutes, then 100
    const demand = [...minutes(30, 10), ...minutes(60, 100)];
    const run = autoScaledCapacity(demand);
    // THEN throttled: a scale-out sizes for what was consumed, and throttled requests are not
    // consumed, so each one raises the capacity by 1 / 0.7 at most, every two minutes above the
    // target plus one for the update: about seven for a tenfold surge
    const perStep = AUTO_SCALING.scaleOutMinutes + AUTO_SCALING.scaleOutDelayMinutes;
    const steps = Math.ceil(Math.log(10) / Math.log(1 / AUTO_SCALING.target));
    expect(run.throttledUnits).toBeGreaterThan(0);
    expect(run.throttledMinutes).toBeGreaterThan(perStep);
    expect(run.throttledMinutes).toBeLessThanOrEqual(steps * perStep + perStep);
    expect(run.peakUnitsPerSecond).toBeGreaterThanOrEqual(100 / AUTO_SCALING.target - 1e-9);
    // AND none once it has caught up
    const tail = autoScaledCapacity([...demand, ...minutes(30, 100)]);
    expect(tail.throttledMinutes).toBe(run.throttledMinutes);
  });

  it('scales in only after fifteen quiet minutes, four times a day and then once an hour', () => {
    // GIVEN demand that drops to a tenth and stays there for two hours
    const run = autoScaledCapacity([...minutes(10, 100), ...minutes(120, 10)]);
    // THEN the capacity stays sized for the surge for fifteen minutes: more unit-hours than the
    // quiet demand at the target would take from the drop on
    expect(run.unitHours).toBeGreaterThan((100 * 10 + 10 * 120) / 60 / AUTO_SCALING.target + 1);
    expect(run.decreases).toBe(1);
    // AND demand halving every 20 minutes: each step a scale-in, four at once, the fifth an hour after the fourth
    const halving = [100, 50, 25, 12, 6, 3, 1.5].flatMap((units) => minutes(20, units));
    expect(autoScaledCapacity(halving).decreases).toBe(4);
    expect(autoScaledCapacity([...halving, ...minutes(60, 1.5)]).decreases).toBe(5);
  });

  it('never provisions under its floor', () => {
    const run = autoScaledCapacity(minutes(60, 0), 1);
    expect(run.peakUnitsPerSecond).toBe(1);
    expect(run.unitHours).toBeCloseTo(1, 9);
  });

  it("splits the bill's DynamoDB lines into the governor's clock and the tasks'", () => {
    for (const item of [
      "leases: governor's shard reads (watch, ticks)",
      'watch relay: baton reads',
      'metric window: watch batches',
      'governor reads (ledger, state, store probe)',
      'watch: solved count (thread ledger)',
    ])
      expect(followsTheClock({ item }), item).toBe(true);
    for (const item of [
      'claims, solver ids',
      'leases: slots taken, freed',
      "leases: consumers' shard reads",
      'watch: results',
      'thread ledger (accepted, released, refused)',
    ])
      expect(followsTheClock({ item }), item).toBe(false);
  });

  it("bills a parked run's DynamoDB as capacity: its request lines replaced, its takes counted by minute, the rest of the bill unchanged", () => {
    // GIVEN 30 minutes of a steady load, then a surge, on the parked design
    const trace = parseTrace(
      {
        name: 'provisioned',
        durationSeconds: 3600,
        methods: [{ method: 'userrecaptcha', share: 1, medianSeconds: 15, p95Seconds: 35 }],
        arrivals: [
          { at: 0, perSecond: 0.5 },
          { at: 1800, perSecond: 2 },
        ],
      },
      'test',
    );
    const run = simulate(trace, createPolicy('governor', trace.settings), { seed: 3 });
    // THEN every lease take is in its minute
    const byMinute = run.parked?.leaseTakesByMinute ?? [];
    expect(byMinute.reduce((sum, n) => sum + n, 0)).toBe(run.parked?.leaseTakes);
    expect(byMinute.slice(40, 50).reduce((a, b) => a + b, 0)).toBeGreaterThan(
      byMinute.slice(10, 20).reduce((a, b) => a + b, 0),
    );
    // AND the bill keeps every line but DynamoDB's request units, which the capacity's replace
    const cost = costOfRun(trace, run);
    const figures = provisionedDynamo(cost, run, usageOfRun(trace, run).hours);
    const provisioned = withProvisionedDynamo(cost, figures);
    const requestUsd = cost.bill.lines
      .filter((line) => line.service === 'dynamodb' && /units$/.test(line.unit))
      .reduce((sum, line) => sum + line.usd, 0);
    expect(figures.onDemandUsd).toBeCloseTo(requestUsd, 12);
    expect(provisioned.awsUsd).toBeCloseTo(cost.awsUsd - requestUsd + figures.provisionedUsd, 12);
    expect(provisioned.byService.lambda).toBe(cost.byService.lambda);
    expect(provisioned.bill.lines.filter((line) => line.unit === 'unit-hours')).toHaveLength(2);
    // the capacity followed the surge: its peak above its mean over the hour
    expect(figures.writes.peakUnitsPerSecond).toBeGreaterThan(figures.writes.unitHours / 1);
    // AND every line the run's length moves (the same work billed over twice the hours) is spread
    // over the clock, whatever the bill names it (the watch's reads of the leases, counted by the
    // simulation, follow the clock without being billed from the hours: named above)
    const usage = usageOfRun(trace, run);
    const longer = costOfUsage('governor', trace, { ...usage, hours: usage.hours * 2 });
    const byHours = cost.bill.lines.filter((line) => {
      const same = longer.bill.lines.find((l) => l.item === line.item && l.unit === line.unit);
      return line.service === 'dynamodb' && /units$/.test(line.unit) && same?.quantity !== line.quantity;
    });
    expect(byHours.length).toBeGreaterThan(0);
    for (const line of byHours) expect(followsTheClock(line), line.item).toBe(true);
  });
});
