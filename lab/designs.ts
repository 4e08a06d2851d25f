/**
 * The consumer designs the lab compares (docs/cost.md): each reads the same simulated runs — the
 * governor in the waiting design (solveMode `wait`: every invocation waits through its solve),
 * the same with answers read on a poll schedule (what a task parked between polls sees), the
 * parked design as built (solveMode `park`, the default; lab/sim/parked.ts), the oracle — and
 * turns them into what that design does on AWS: its invocations, their seconds, its deliveries
 * and copies, priced by the fleet's cost model.
 *
 * Timing and latency come from the simulator; the built designs bill their own simulated counts,
 * and what a design not built changes in the counts (batches, poll rounds, short invocations) is
 * drawn here from the trace's own solve-time mix.
 */
import type { FleetUsage } from '../functions/core/cost/fleet-bill.js';
import { AWS_PRICES } from '../functions/core/cost/prices.js';
import { FUNCTION_SIZING, type FunctionSizing } from '../functions/core/function-sizing.js';
import { DEFAULT_POLL, METHOD_KIND } from '../functions/core/solver-protocol.js';
import { at } from './arrays.js';
import { billedHours, costOfUsage, type RunCost, type RunCostOptions, usageOfRun } from './cost.js';
import { type ProvisionedFigures, provisionedDynamo, withProvisionedDynamo } from './provisioned.js';
import { Rng } from './rng.js';
import type { RunResult } from './sim.js';
import type { Trace } from './trace.js';

/** What the designs assume beyond the simulator (seconds are billed Lambda time). */
export const DESIGN_TIMING = {
  /** A submit-and-park invocation: claim, ledger read, in.php, solver id on the record, the parked copy sent. */
  parkSubmitSeconds: 0.5,
  /** A poll round of one parked task: res.php (or its share of one bulk `action=get&ids=`), and the record when ready. */
  parkPollSeconds: 0.25,
  /** The event source mapping's batch for batched designs, and its batching window (seconds). */
  batchSize: 10,
  batchWindowSeconds: 1,
  /** The parked designs' poll schedule ((d') and (e)): sooner and tighter than the protocol's, since a round is cheap. */
  parkedPoll: { firstSeconds: 5, intervalSeconds: 2 } as PollSchedule,
  /** Log bytes of an invocation (START / REPORT lines, its EMF document) and of each task it carries. */
  logBytesPerInvocation: 1_500,
  logBytesPerDelivery: 700,
} as const;

/** The simulated runs a design reads. */
export interface DesignRuns {
  /** The governor in the waiting design (solveMode `wait`). */
  waiting: RunResult;
  /** The same with answers read at the next poll of the protocol schedule (trace.pollLoss). */
  protocolPolls: RunResult;
  /** The same on the parked designs' schedule (DESIGN_TIMING.parkedPoll). */
  tightPolls: RunResult;
  /** The parked design as built (solveMode `park`). */
  parked: RunResult;
  /** The parked design with the governor's watch running all minute, its rounds as built (PARKED_WATCH_ALL_MINUTE). */
  parkedAllMinute: RunResult;
  /** The waiting design with its consumer at 128 MB (its CPU at half the share). */
  waitingSmall: RunResult;
  /** The parked design with its consumer at 256 MB (as it was deployed before the parked consumer got its own memory). */
  parkedLarge: RunResult;
  oracle: RunResult;
}

/** One design's figures on one trace. */
export interface DesignResult {
  design: string;
  p95: number | null;
  /** p95 ÷ the oracle's (answers read as soon as ready). */
  p95VsOracle: number | null;
  overCapShare: number;
  overCapRejections: number;
  cost: RunCost;
  /** How the latency figure was obtained. */
  latencyFrom: string;
  /** A design with its tables in provisioned capacity: the capacity model's figures (lab/provisioned.ts). */
  provisioned?: ProvisionedFigures;
}

/** Mean poll rounds of a task parked between polls (first poll after 5 s images / 15 s tokens, then every 5 s), and the mean of the slowest of n solves ÷ the mean solve. */
export interface MixFigures {
  /** Poll rounds per task on the protocol's schedule, or on `schedule` (seconds). */
  pollsPerTask(schedule?: PollSchedule): number;
  slowestOf(n: number): number;
}

/** A parked task's polls: the first after `firstSeconds`, then every `intervalSeconds`. */
export interface PollSchedule {
  firstSeconds: number;
  intervalSeconds: number;
}

/** The method whose cumulative share first passes `u` (the last one for rounding). */
function pickMethod(trace: Trace, u: number): Trace['methods'][number] | undefined {
  let left = u;
  for (const method of trace.methods) {
    left -= method.share;
    if (left < 0) return method;
  }
  return trace.methods[trace.methods.length - 1];
}

/** A result with `usd` more on its bill (a charge the fleet bill has no line for). */
function plus(result: DesignResult, usd: number): DesignResult {
  const awsUsd = result.cost.awsUsd + usd;
  return { ...result, cost: { ...result.cost, awsUsd, awsPerPlan: awsUsd / result.cost.planUsd } };
}

/** Draws the trace's solve-time mix (seeded) for the figures the designs need. */
export function mixFigures(trace: Trace, seed: number, draws = 20_000): MixFigures {
  const rng = new Rng(seed).fork(9);
  const solves: number[] = [];
  const protocol: PollSchedule[] = [];
  for (let i = 0; i < draws; i++) {
    const method = pickMethod(trace, rng.uniform());
    if (method === undefined) break;
    const seconds =
      method.distribution === 'exponential'
        ? rng.exponential(1 / method.meanSeconds)
        : rng.logNormal(
            Math.log(method.medianSeconds),
            Math.log(method.p95Seconds / method.medianSeconds) / 1.6448536269514722,
          );
    solves.push(seconds);
    const poll = DEFAULT_POLL[METHOD_KIND[method.method]];
    protocol.push({ firstSeconds: poll.firstPollMs / 1000, intervalSeconds: poll.intervalMs / 1000 });
  }
  const roundsOf = (seconds: number, s: PollSchedule) =>
    seconds <= s.firstSeconds ? 1 : 1 + Math.ceil((seconds - s.firstSeconds) / s.intervalSeconds);
  const mean = solves.reduce((a, b) => a + b, 0) / Math.max(1, solves.length);
  const slowest = new Map<number, number>();
  const slowestWhole = (n: number): number => {
    const known = slowest.get(n);
    if (known !== undefined) return known;
    let sum = 0;
    let groups = 0;
    for (let i = 0; i + n <= solves.length; i += n) {
      let max = 0;
      for (let j = i; j < i + n; j++) max = Math.max(max, solves[j] ?? 0);
      sum += max;
      groups++;
    }
    const ratio = groups > 0 ? sum / groups / mean : 1;
    slowest.set(n, ratio);
    return ratio;
  };
  return {
    pollsPerTask: (schedule) => {
      let polls = 0;
      solves.forEach((seconds, i) => {
        const own = schedule ?? protocol[i];
        if (own !== undefined) polls += roundsOf(seconds, own);
      });
      return polls / Math.max(1, solves.length);
    },
    slowestOf: (n) => {
      const low = Math.max(1, Math.floor(n));
      const share = n - low;
      return share === 0 ? slowestWhole(low) : slowestWhole(low) * (1 - share) + slowestWhole(low + 1) * share;
    },
  };
}

/** Mean messages an invocation carries when the mapping batches (up to `batchSize`, waiting `batchWindowSeconds`) at `perSecond` messages a second. */
function batchFill(perSecond: number): number {
  return Math.min(DESIGN_TIMING.batchSize, 1 + perSecond * DESIGN_TIMING.batchWindowSeconds);
}

/** Invocations for `messagesPerTask` deliveries of every task, batched, over the trace's arrival pieces. */
function batchedInvocations(trace: Trace, tasks: number, messagesPerTask: number): number {
  const { at: starts, value: rates } = trace.arrivals;
  let expected = 0;
  let invocations = 0;
  for (let i = 0; i < starts.length; i++) {
    const end = starts[i + 1] ?? trace.durationSeconds;
    const rate = at(rates, i);
    const arrivals = rate * (end - at(starts, i));
    expected += arrivals;
    if (arrivals > 0) invocations += (arrivals * messagesPerTask) / batchFill(rate * messagesPerTask);
  }
  // Scaled to the run's own task count (the pieces give the mix of rates, the run the total).
  return expected > 0 ? (invocations * tasks) / expected : tasks * messagesPerTask;
}

const SMALL: FunctionSizing = { memoryMb: 128, architecture: 'arm64' };

function ratio(a: number | null, b: number | null): number | null {
  return a !== null && b !== null && b > 0 ? a / b : null;
}

/** Every design on one trace. */
export function compareDesigns(trace: Trace, runs: DesignRuns, mix: MixFigures): DesignResult[] {
  const { waiting, protocolPolls, tightPolls, oracle } = runs;
  const t = DESIGN_TIMING;
  const today = usageOfRun(trace, waiting);
  const tightToday = usageOfRun(trace, tightPolls);
  const tasks = waiting.arrivals;
  const tightCount = mix.pollsPerTask(t.parkedPoll);
  const result = (
    design: string,
    run: RunResult,
    usage: FleetUsage,
    options: RunCostOptions = {},
    latency: { p95?: number | null; from?: string } = {},
  ): DesignResult => {
    const p95 = latency.p95 === undefined ? run.latency.p95 : latency.p95;
    return {
      design,
      p95,
      p95VsOracle: ratio(p95, oracle.latency.p95),
      overCapShare: run.overCapShare,
      overCapRejections: run.overCapRejections,
      cost: costOfUsage(design, trace, usage, options),
      latencyFrom:
        latency.from ??
        (run === protocolPolls
          ? 'simulated, answers read on the protocol poll schedule'
          : run === tightPolls
            ? 'simulated, answers read on the parked poll schedule'
            : 'simulated'),
    };
  };
  const perInvocation = (b: number) => ({
    consumerLogBytesPerInvocation: t.logBytesPerInvocation + b * t.logBytesPerDelivery,
  });
  const { batch, fill, park, bulk, lean, tightDeliveries, bulkInvocations } = modelledUsages(trace, runs, mix);
  const others = otherRuntimes(trace, { today, tightToday, tasks, tightPolls: tightCount }, (design, run, usage) =>
    result(design, run === 'today' ? waiting : tightPolls, usage),
  );
  const small = { consumerSizing: SMALL, governorSizing: SMALL };
  const parkedUsage = usageOfRun(trace, runs.parked);
  const parked = result(PARKED_DESIGN, runs.parked, parkedUsage);

  return [
    result('(a) wait (solveMode wait): each invocation waits through its solve', waiting, today),
    result('(b) wait at 128 MB', runs.waitingSmall, usageOfRun(trace, runs.waitingSmall)),
    result(
      `(c) batches of up to ${t.batchSize} solved in parallel`,
      waiting,
      batch,
      { assumptions: perInvocation(fill) },
      {
        p95: waiting.latency.p95 === null ? null : waiting.latency.p95 + t.batchWindowSeconds,
        from: `simulated + the ${t.batchWindowSeconds} s batching window`,
      },
    ),
    result('(d) park: delayed copy with the solver id, poll from short invocations', protocolPolls, park, {
      assumptions: perInvocation(1),
    }),
    result(
      `(d') park, poll ${t.parkedPoll.firstSeconds} s then every ${t.parkedPoll.intervalSeconds} s, batched (one bulk res.php get)`,
      tightPolls,
      bulk,
      { assumptions: perInvocation(tightDeliveries / bulkInvocations) },
    ),
    result("(e) (d') at 128 MB, governor at 128 MB, no re-claim per poll", tightPolls, lean, {
      ...small,
      assumptions: perInvocation(tightDeliveries / bulkInvocations),
    }),
    parked,
    // The governor's invocation then lives the whole minute: billed 60 s, not 51.
    result(
      "(f') (f) with the governor's watch running all minute, its rounds as built",
      runs.parkedAllMinute,
      usageOfRun(trace, runs.parkedAllMinute),
      { assumptions: { governorSecondsPerInvocation: 60 } },
    ),
    result(
      "(f'') (f) with its consumer at 256 MB, as deployed before",
      runs.parkedLarge,
      usageOfRun(trace, runs.parkedLarge),
    ),
    provisionedRow(parked, runs.parked, parkedUsage.hours),
    ...others,
  ];
}

/** The provisioned-capacity lever's row (lab/provisioned.ts): not built. */
export const PROVISIONED_DESIGN = '(g) (f) with its tables in provisioned capacity, auto scaled (70 % target)';

/** (f)'s row with its DynamoDB requests billed as auto-scaled provisioned capacity instead of on demand. */
function provisionedRow(onDemand: DesignResult, parked: RunResult, hours: number): DesignResult {
  const figures = provisionedDynamo(onDemand.cost, parked, hours);
  return {
    ...onDemand,
    design: PROVISIONED_DESIGN,
    cost: withProvisionedDynamo(onDemand.cost, figures),
    latencyFrom: 'simulated as (f); throttled requests not modelled in latency',
    provisioned: figures,
  };
}

/**
 * A lever of the parked design, modelled: the governor's watch running the whole minute (its
 * invocation then lasts the minute: billed 60 s), its rounds as built, so no
 * ready answer waits out the last seconds of a minute (lab/model.ts).
 */
export const PARKED_WATCH_ALL_MINUTE = { watchSecondsPerMinute: 60 } as const;

/** The built parked design's row in the comparison. */
export const PARKED_DESIGN = '(f) park (solveMode park, the default): thread leases, the governor watches and records';

/** What the designs not built would do, drawn from the waiting runs and the trace's mix. */
function modelledUsages(trace: Trace, runs: DesignRuns, mix: MixFigures) {
  const { waiting, protocolPolls, tightPolls } = runs;
  const t = DESIGN_TIMING;
  const tasks = waiting.arrivals;
  const polls = mix.pollsPerTask();
  const tightCount = mix.pollsPerTask(t.parkedPoll);
  // (c) a batch per invocation, solved in parallel: the slowest task holds it.
  const batchInvocations = batchedInvocations(trace, tasks, 1);
  const fill = tasks / batchInvocations;
  const heldPerInvocation = waiting.invocations > 0 ? waiting.computeSeconds / waiting.invocations : 0;
  const batch: FleetUsage = {
    ...usageOfRun(trace, waiting),
    invocations: batchInvocations,
    invocationSeconds: batchInvocations * heldPerInvocation * mix.slowestOf(fill),
  };
  // (d) submit, park (a delayed copy carrying the solver id), poll from short invocations.
  const parkDeliveries = tasks * (1 + polls);
  const park: FleetUsage = {
    ...usageOfRun(trace, protocolPolls),
    deliveries: parkDeliveries,
    invocations: parkDeliveries,
    invocationSeconds: tasks * (t.parkSubmitSeconds + polls * t.parkPollSeconds),
    copiesSent: tasks * polls,
  };
  // (d') the same on a tighter schedule, the parked copies batched: one bulk res.php?action=get&ids=… per invocation.
  const tightDeliveries = tasks * (1 + tightCount);
  const bulkInvocations = batchedInvocations(trace, tasks, 1 + tightCount);
  const bulk: FleetUsage = {
    ...usageOfRun(trace, tightPolls),
    deliveries: tightDeliveries,
    invocations: bulkInvocations,
    invocationSeconds: tasks * t.parkSubmitSeconds + bulkInvocations * t.parkPollSeconds,
    copiesSent: tasks * tightCount,
  };
  // (e) (d') at 128 MB, the governor at 128 MB, and a poll round that needs no new claim (the
  // parked copy carries the claim it was parked under, its lease held to the solve deadline).
  const lean: FleetUsage = { ...bulk, deliveries: tasks, consumerSizing: SMALL };
  return { batch, fill, park, bulk, lean, tightDeliveries, bulkInvocations };
}

/** Other runtimes for the same consumer: Lambda Managed Instances, durable functions. */
function otherRuntimes(
  trace: Trace,
  counts: { today: FleetUsage; tightToday: FleetUsage; tasks: number; tightPolls: number },
  price: (design: string, run: 'today' | 'parked', usage: FleetUsage) => DesignResult,
): DesignResult[] {
  const { today, tightToday, tasks, tightPolls } = counts;
  const t = DESIGN_TIMING;
  const hours = billedHours(trace);
  // Lambda Managed Instances: the consumer as today on one c7g.large (+15 %) behind a NAT gateway.
  const managedHourly =
    AWS_PRICES.ec2.c7gLargeUsdPerHour * (1 + AWS_PRICES.managedInstances.ec2Markup) + AWS_PRICES.ec2.natUsdPerHour;
  const managed = price('managed instances (1 × c7g.large + NAT)', 'today', {
    ...today,
    invocationSeconds: 0,
    managedInstances: { hours, usdPerHour: managedHourly },
  });
  // Durable functions: the invocation suspends between polls; $8 per million operations (a step per
  // submit and per poll, a wait between polls).
  const durableOps = tasks * (1 + 2 * tightPolls);
  const durable = price('durable functions (wait between polls)', 'parked', {
    ...tightToday,
    invocations: tasks * (1 + tightPolls),
    invocationSeconds: tasks * (t.parkSubmitSeconds + tightPolls * t.parkPollSeconds),
  });
  const durableUsd = durableOps * AWS_PRICES.durableFunctions.usdPerOperation;
  return [managed, plus(durable, durableUsd)];
}

/** The consumer's function in each design, for the docs. */
export const DESIGN_SIZING = { waiting: FUNCTION_SIZING.consumer, small: SMALL } as const;
