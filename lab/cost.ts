/**
 * What a lab run would have cost on AWS: its counted work (invocations, their seconds, deliveries,
 * submissions, hand-backs) priced by the fleet's cost model (functions/core/cost/), beside the
 * thread plan's own cost over the same span. Lambda policies bill the consumer at the stack's
 * memory and architecture (functions/core/function-sizing.ts); pools bill the VMs that would
 * host them; every policy pays the same queue, table and event charges per task.
 */
import type { CostAssumptions, FleetBill, FleetUsage } from '../functions/core/cost/fleet-bill.js';
import { fleetBill, TEXT_ANSWER_METHODS } from '../functions/core/cost/fleet-bill.js';
import { FLEET_FUNCTION_ARCHITECTURE, type FunctionSizing } from '../functions/core/function-sizing.js';
import type { RunResult } from './sim.js';
import type { Trace } from './trace.js';

/** Workers one t4g.small hosts, by pool kind: threads in one process, or processes / pods of ~150 MB. */
export const WORKERS_PER_VM: Readonly<Record<string, number>> = {
  'thread-pool': 100,
  'thread-pool-plan': 100,
  'static-pool': 100,
  'process-pool': 10,
  'process-pool-plan': 10,
  hpa: 10,
  'hpa-plan': 10,
};

/** A run's cost: the AWS bill (total and by service) and the plan's. */
export interface RunCost {
  policy: string;
  planUsd: number;
  awsUsd: number;
  /** awsUsd ÷ planUsd. */
  awsPerPlan: number;
  byService: FleetBill['byService'];
  bill: FleetBill;
}

export interface RunCostOptions {
  consumerSizing?: FunctionSizing;
  governorSizing?: FunctionSizing;
  assumptions?: Partial<CostAssumptions>;
}

/** The hours a run bills its always-on parts for: the trace's span (the plan is billed the same). */
export function billedHours(trace: Trace): number {
  return trace.durationSeconds / 3600;
}

/** Peak workers of a pool run (its sampled target). */
function peakWorkers(run: RunResult): number {
  let peak = 0;
  for (const workers of run.samples.ceiling) if (workers > peak) peak = workers;
  return peak;
}

/** The share of a trace's tasks whose answer is text (TEXT_ANSWER_METHODS), by its methods' shares. */
export function textAnswerShareOf(trace: Pick<Trace, 'methods'>): number {
  const total = trace.methods.reduce((sum, m) => sum + m.share, 0);
  const text = trace.methods.reduce((sum, m) => sum + (TEXT_ANSWER_METHODS.has(m.method) ? m.share : 0), 0);
  return total > 0 ? text / total : 0;
}

/** The counted work of a run as the cost model takes it, in the design the run ran (waiting or parked). */
export function usageOfRun(trace: Trace, run: RunResult, options: RunCostOptions = {}): FleetUsage {
  const hours = billedHours(trace);
  const perVm = WORKERS_PER_VM[run.policy];
  // A probe that carried a task paid for that task's solve (among `solved`); a synthetic one for its own.
  const accepted = run.solved - (run.overflow?.solved ?? 0) + run.probesAccepted - run.probeTasks;
  const common = {
    hours,
    // Image and text captchas answer a few characters: their records take one write unit, not three.
    textAnswerShare: textAnswerShareOf(trace),
    tasks: run.arrivals,
    solved: run.solved,
    acceptedSubmissions: accepted,
    submissions: run.submissions,
    overCapAnswers: run.overCapRejections,
    handBacks: run.handBacks,
    copiesSent: 0,
  };
  if (perVm !== undefined)
    return {
      ...common,
      // A worker takes each task from the queue once: one receive and one delete per task.
      deliveries: run.solved,
      invocations: run.solved,
      invocationSeconds: 0,
      governor: false,
      poolVmHours: Math.max(1, Math.ceil(peakWorkers(run) / perVm)) * hours,
    };
  return {
    ...common,
    deliveries: run.invocations,
    invocations: run.invocations,
    invocationSeconds: run.computeSeconds,
    // The overflow consumer's invocations are billed at its own memory.
    ...(run.overflow !== undefined ? { overflowInvocationSeconds: run.overflow.invocationSeconds } : {}),
    // The consumer at the memory the run timed its CPU at.
    consumerSizing:
      options.consumerSizing ??
      (run.consumerMemoryMb === undefined
        ? undefined
        : { memoryMb: run.consumerMemoryMb, architecture: FLEET_FUNCTION_ARCHITECTURE }),
    // The governor's own invocations are billed to the runs it governs (with or without overflow).
    governor: run.policy.startsWith('governor'),
    // The lab's traces have one lane of work: a governor keeps the high lane's mapping disabled
    // (no work), a fixed maximum runs both.
    pollingMappings: run.policy.startsWith('governor') ? 1 : 2,
    overflowLane: run.overflow !== undefined,
    // The parked design's leases, watch and records (lab/sim/parked.ts).
    ...(run.parked !== undefined ? { parked: run.parked } : {}),
  };
}

/** A run's cost as the fleet is configured. */
export function costOfRun(trace: Trace, run: RunResult, options: RunCostOptions = {}): RunCost {
  return costOfUsage(run.policy, trace, usageOfRun(trace, run, options), options);
}

/** Prices a usage (a run's, or a design's reading of a run). */
export function costOfUsage(policy: string, trace: Trace, usage: FleetUsage, options: RunCostOptions = {}): RunCost {
  const sized = options.consumerSizing === undefined ? usage : { ...usage, consumerSizing: options.consumerSizing };
  const bill = fleetBill(sized, {
    planThreads: trace.settings.planThreads,
    // The trace's fleet keeps its answered records for its own resultTtlSeconds.
    assumptions: { resultRetentionHours: trace.settings.resultTtlSeconds / 3600, ...options.assumptions },
    governorSizing: options.governorSizing,
  });
  return {
    policy,
    planUsd: bill.planUsd,
    awsUsd: bill.usd,
    awsPerPlan: bill.planUsd > 0 ? bill.usd / bill.planUsd : 0,
    byService: bill.byService,
    bill,
  };
}
