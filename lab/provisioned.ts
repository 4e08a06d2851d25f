/**
 * A lever on issue 19's bill the lab measures and the fleet does not build: its DynamoDB tables in
 * provisioned capacity with auto scaling (target tracking) instead of on demand. A fully used
 * write unit-hour is 3 600 writes for $0.00065, about 3.5 × cheaper than on demand's $0.625 a
 * million; the price is paying for capacity whether it is used or not, and capacity that follows
 * the traffic minutes late: a surge beyond it and its burst allowance is throttled.
 *
 * The model, per minute (auto scaling's documented behaviour, as configured by CDK's
 * `autoScaleWriteCapacity().scaleOnUtilization`): consumed capacity is the demand up to the
 * provisioned capacity, plus what the burst allowance (up to 300 s of unused capacity) covers;
 * the rest is throttled and retried the next minute. Scaling out follows two consecutive minutes
 * above the target utilization, and takes effect a minute after (the alarm, then the table's
 * update); scaling in follows fifteen minutes below the target less 20 points, at most four
 * decreases in the day and then one an hour. Reads and writes are sized separately; the fleet's
 * three tables (results, leases, governor) are pooled into one demand, each keeping one unit of
 * each at least.
 *
 * The demand: the bill's own DynamoDB units (functions/core/cost/fleet-bill.ts), those of the
 * governor's clock (its ticks, the watch's reads of the leases, the relay's baton, its batches)
 * spread evenly over the run, and those of the tasks (claims, solver ids, leases, the ledger,
 * the answered records, the consumers' shard reads) over the minutes their leases were taken in
 * (the parked run's `leaseTakesByMinute`). Latency is not modelled: a throttled request waits for
 * the SDK's retries; the row reports the units throttled.
 */
import { type BillLine, billOf } from '../functions/core/cost/bill.js';
import type { RunCost } from './cost.js';
import type { RunResult } from './sim.js';

/** Auto scaling as the model runs it (each figure AWS's documented default for target tracking). */
export const AUTO_SCALING = {
  /** Target utilization (consumed ÷ provisioned). */
  target: 0.7,
  /** Consecutive minutes above the target before a scale-out… */
  scaleOutMinutes: 2,
  /** …which takes effect this many minutes later. */
  scaleOutDelayMinutes: 1,
  /** Consecutive minutes below the target less `scaleInMargin` before a scale-in. */
  scaleInMinutes: 15,
  scaleInMargin: 0.2,
  /** Decreases a table may make at any time in a UTC day; after them, one an hour. */
  freeDecreasesPerDay: 4,
  /** Unused capacity kept for bursts, seconds of the provisioned rate. */
  burstSeconds: 300,
  /** Least capacity of a table, units a second (reads and writes each). */
  minUnitsPerTable: 1,
  /** The fleet's tables whose least capacity is paid (results, leases, governor). */
  tables: 3,
} as const;

/** Provisioned prices, us-east-1, read 2026-12-04 (DynamoDB pricing, provisioned capacity). */
export const PROVISIONED_PRICES = {
  /** A write capacity unit, an hour. */
  usdPerWriteUnitHour: 0.00065,
  /** A read capacity unit, an hour. */
  usdPerReadUnitHour: 0.00013,
} as const;

/** One kind of capacity (reads or writes) through a run. */
export interface CapacityRun {
  /** Capacity paid for: units a second × hours. */
  unitHours: number;
  /** Units demanded beyond the capacity and its burst allowance (retried the next minute). */
  throttledUnits: number;
  /** Minutes with a unit throttled. */
  throttledMinutes: number;
  /** Highest capacity provisioned, units a second. */
  peakUnitsPerSecond: number;
  /** Consumed ÷ provisioned over the run. */
  utilization: number;
  /** Scale-ins made (DynamoDB limits decreases: `freeDecreasesPerDay`, then one an hour). */
  decreases: number;
}

/**
 * Capacity that auto scaling provisions for `demand` (units each minute), in whole units a second,
 * starting sized for the first minute at the target (a table already warm), never under
 * `minUnitsPerSecond`.
 */
export function autoScaledCapacity(demand: readonly number[], minUnitsPerSecond = 1): CapacityRun {
  const a = AUTO_SCALING;
  // Capacity is set in whole units a second.
  let capacity = Math.max(minUnitsPerSecond, Math.ceil((demand[0] ?? 0) / 60 / a.target - 1e-9));
  let burst = 0;
  let carried = 0;
  let above = 0;
  let below = 0;
  let pending: { at: number; units: number } | undefined;
  let lastDecrease = Number.NEGATIVE_INFINITY;
  const run: CapacityRun = {
    unitHours: 0,
    throttledUnits: 0,
    throttledMinutes: 0,
    peakUnitsPerSecond: 0,
    utilization: 0,
    decreases: 0,
  };
  let consumedTotal = 0;
  let provisionedTotal = 0;
  demand.forEach((units, minute) => {
    if (pending !== undefined && pending.at <= minute) {
      capacity = Math.max(capacity, pending.units);
      pending = undefined;
    }
    const wanted = units + carried;
    const provisioned = capacity * 60;
    let consumed = Math.min(wanted, provisioned);
    carried = 0;
    if (wanted > provisioned) {
      const fromBurst = Math.min(burst, wanted - provisioned);
      burst -= fromBurst;
      consumed += fromBurst;
      carried = wanted - consumed;
      if (carried > 0) {
        run.throttledUnits += carried;
        run.throttledMinutes += 1;
      }
    } else burst = Math.min(capacity * a.burstSeconds, burst + provisioned - wanted);
    const utilization = consumed / provisioned;
    consumedTotal += consumed;
    provisionedTotal += provisioned;
    run.unitHours += capacity / 60;
    run.peakUnitsPerSecond = Math.max(run.peakUnitsPerSecond, capacity);
    above = utilization > a.target ? above + 1 : 0;
    below = utilization < a.target - a.scaleInMargin ? below + 1 : 0;
    const sized = Math.max(minUnitsPerSecond, Math.ceil(consumed / 60 / a.target - 1e-9));
    if (above >= a.scaleOutMinutes && pending === undefined && sized > capacity)
      pending = { at: minute + 1 + a.scaleOutDelayMinutes, units: sized };
    const mayDecrease = run.decreases < a.freeDecreasesPerDay || minute - lastDecrease >= 60;
    if (below >= a.scaleInMinutes && mayDecrease && sized < capacity) {
      capacity = sized;
      run.decreases += 1;
      lastDecrease = minute;
      below = 0;
    }
  });
  run.utilization = provisionedTotal > 0 ? consumedTotal / provisionedTotal : 0;
  return run;
}

/**
 * Bill lines whose units follow the governor's clock rather than the tasks: its ticks' reads and
 * state, the watch's reads of the leases, the relay's baton, the metric window and the solved
 * count it writes once a batch (fleet-bill.ts names them so).
 */
export function followsTheClock(line: Pick<BillLine, 'item'>): boolean {
  return /governor|relay|metric window|solved count/.test(line.item);
}

/** What the run's DynamoDB would cost provisioned, beside what it costs on demand. */
export interface ProvisionedFigures {
  /** The on-demand request charges it replaces (reads and writes; storage and backups stay). */
  onDemandUsd: number;
  provisionedUsd: number;
  writes: CapacityRun;
  reads: CapacityRun;
  /** The capacity's bill lines, in place of the request lines. */
  lines: BillLine[];
}

/** The run's DynamoDB requests in provisioned capacity (the parked design: its takes by minute). */
export function provisionedDynamo(cost: RunCost, run: RunResult, hours: number): ProvisionedFigures {
  const minutes = Math.max(1, Math.ceil(hours * 60));
  const takes = run.parked?.leaseTakesByMinute ?? [];
  const allTakes = takes.reduce((sum, n) => sum + n, 0);
  const lines = cost.bill.lines.filter((line) => line.service === 'dynamodb' && /units$/.test(line.unit));
  const demandOf = (unit: string): number[] => {
    const ofUnit = lines.filter((line) => line.unit === unit);
    const clock = ofUnit.filter(followsTheClock).reduce((sum, line) => sum + line.quantity, 0);
    const tasks = ofUnit.filter((line) => !followsTheClock(line)).reduce((sum, line) => sum + line.quantity, 0);
    return Array.from(
      { length: minutes },
      (_, m) => clock / minutes + (allTakes > 0 ? (tasks * (takes[m] ?? 0)) / allTakes : tasks / minutes),
    );
  };
  const floor = AUTO_SCALING.minUnitsPerTable;
  // The pooled demand keeps one table's least capacity; the other tables' are paid beside it.
  const others = (AUTO_SCALING.tables - 1) * floor * hours;
  const writes = autoScaledCapacity(demandOf('write units'), floor);
  const reads = autoScaledCapacity(demandOf('read units'), floor);
  const onDemandUsd = lines.reduce((sum, line) => sum + line.usd, 0);
  const capacity = (item: string, unitHours: number, price: number): BillLine => ({
    service: 'dynamodb',
    item,
    quantity: unitHours,
    unit: 'unit-hours',
    usd: unitHours * price,
  });
  const capacityLines = [
    capacity('write capacity (auto scaled)', writes.unitHours + others, PROVISIONED_PRICES.usdPerWriteUnitHour),
    capacity('read capacity (auto scaled)', reads.unitHours + others, PROVISIONED_PRICES.usdPerReadUnitHour),
  ];
  const provisionedUsd = capacityLines.reduce((sum, line) => sum + line.usd, 0);
  return { onDemandUsd, provisionedUsd, writes, reads, lines: capacityLines };
}

/** The run's cost with its DynamoDB requests in provisioned capacity: the request lines replaced by the capacity's. */
export function withProvisionedDynamo(cost: RunCost, figures: ProvisionedFigures): RunCost {
  const kept = cost.bill.lines.filter((line) => !(line.service === 'dynamodb' && /units$/.test(line.unit)));
  const bill = { ...billOf([...kept, ...figures.lines]), planUsd: cost.planUsd };
  return {
    ...cost,
    awsUsd: bill.usd,
    awsPerPlan: cost.planUsd > 0 ? bill.usd / cost.planUsd : 0,
    byService: bill.byService,
    bill,
  };
}
