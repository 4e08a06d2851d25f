/**
 * What the pipeline benchmark computes from what it recorded: percentiles, and the use of the
 * solver plan's threads over time with where the unused thread-time went. Pure: every time is
 * an epoch ms passed in.
 */
import { availableParallelism, cpus, loadavg, totalmem } from 'node:os';

import { mean } from '../../functions/core/helpers/stats.js';
export { mean, percentile } from '../../functions/core/helpers/stats.js';

/** One task's life at the solver: it holds a plan thread from `acceptedAt` to `readyAt`. */
export interface ThreadInterval {
  acceptedAt: number;
  readyAt: number;
  /** When the fleet read the answer (the slot it held in the fleet is free only after this). */
  readAt?: number;
}

/** Fleet slots occupied at one moment: running invocations (or client workers) and the ceiling. */
export interface OccupancySample {
  at: number;
  /** Tasks being handled by the fleet now (invocations × tasks each). */
  slots: number;
  ceiling: number;
}

/** Samples `read()` every `everyMs` until stopped: how the fleet's slots were filled over time. */
export function startOccupancySampler(
  read: () => { slots: number; ceiling: number },
  everyMs = 10,
): { stop(): OccupancySample[] } {
  const samples: OccupancySample[] = [{ at: Date.now(), ...read() }];
  const timer = setInterval(() => samples.push({ at: Date.now(), ...read() }), everyMs);
  return {
    stop() {
      clearInterval(timer);
      samples.push({ at: Date.now(), ...read() });
      return samples;
    },
  };
}

/** Thread-ms the intervals held within [from, to]. */
export function threadTime(intervals: readonly ThreadInterval[], from: number, to: number): number {
  let total = 0;
  for (const { acceptedAt, readyAt } of intervals)
    total += Math.max(0, Math.min(to, readyAt) - Math.max(from, acceptedAt));
  return total;
}

/** The first moment at or after `from` when at least `target` threads were held; undefined if never. */
export function firstReach(intervals: readonly ThreadInterval[], target: number, from: number): number | undefined {
  const steps = intervals.flatMap((i) => [
    { at: i.acceptedAt, delta: 1 },
    { at: i.readyAt, delta: -1 },
  ]);
  // Releases before acquisitions at the same instant: a thread freed and retaken is not two.
  steps.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let held = 0;
  for (const step of steps) {
    held += step.delta;
    if (held >= target && step.at >= from) return step.at;
  }
  return undefined;
}

/** Where the plan's thread-time went while a backlog existed (shares of the capacity, sum 1). */
export interface LossBreakdown {
  /** Threads held by solves. */
  used: number;
  /** Fleet slots not filled: ceiling below the plan, ramp-up, receives not yet returned. */
  unfilledSlots: number;
  /** A slot held while the answer was ready and waited for the next poll. */
  pollWait: number;
  /** A slot held around the solve: receive, claim, submit, record, delete, over-cap backoff (the rest). */
  overhead: number;
  /** `overhead` in ms of one slot per task that got a thread in the window. */
  overheadPerTaskMs: number;
  /** `pollWait` in ms per task. */
  pollWaitPerTaskMs: number;
}

export interface UtilizationReport {
  planThreads: number;
  /** From the first submission to the last task getting a thread: work was waiting all along. */
  backlogMs: number;
  /** Thread-time held ÷ (plan threads × backlogMs). */
  utilization: number;
  /** The formula over the same window: solves/s ÷ (threads ÷ mean solve time). */
  formulaUtilization: number;
  solvesPerSecond: number;
  meanSolveMs: number;
  /** From the first submission until the held threads first reached the plan (or the slots the ceiling). */
  rampUpMs: number;
  /** From the first submission until the fleet's ceiling first allowed a slot per plan thread; undefined if it never did. */
  ceilingFullMs: number | undefined;
  /** Utilization within the backlog after the ramp-up. */
  steadyUtilization: number;
  /** From the last thread taken until the last answer was ready: the drain, with idle threads. */
  tailMs: number;
  /** Utilization from the first submission to the last answer, tail included. */
  runUtilization: number;
  loss: LossBreakdown;
}

/**
 * Thread use while a backlog existed. The window starts at the first submission (so the ramp-up
 * counts against the fleet) and ends when the last task got a thread (after that nothing waits).
 */
export function utilizationReport(input: {
  planThreads: number;
  startedAt: number;
  intervals: readonly ThreadInterval[];
  samples: readonly OccupancySample[];
}): UtilizationReport | undefined {
  const { planThreads, startedAt, intervals, samples } = input;
  if (intervals.length === 0) return undefined;
  const end = Math.max(...intervals.map((i) => i.acceptedAt));
  const lastReady = Math.max(...intervals.map((i) => i.readyAt));
  const backlogMs = Math.max(1, end - startedAt);
  const capacity = planThreads * backlogMs;
  const used = threadTime(intervals, startedAt, end);
  const solveTimes = intervals.map((i) => i.readyAt - i.acceptedAt);
  const meanSolveMs = mean(solveTimes) ?? 0;
  const solvedInWindow = intervals.filter((i) => i.readyAt > startedAt && i.readyAt <= end).length;
  const solvesPerSecond = solvedInWindow / (backlogMs / 1000);

  const fullAt =
    firstReach(intervals, planThreads, startedAt) ??
    samples.find((s) => s.at >= startedAt && s.slots >= Math.min(planThreads, s.ceiling) && s.slots > 0)?.at ??
    startedAt;
  const rampEnd = Math.min(Math.max(fullAt, startedAt), end);
  const steadyMs = end - rampEnd;

  let pollWait = 0;
  for (const i of intervals)
    if (i.readAt !== undefined) pollWait += Math.max(0, Math.min(end, i.readAt) - Math.max(startedAt, i.readyAt));
  let unfilled = 0;
  for (const [k, sample] of samples.entries()) {
    const previous = samples[k - 1];
    if (previous === undefined) continue;
    const from = Math.max(startedAt, previous.at);
    const to = Math.min(end, sample.at);
    if (to > from) unfilled += Math.max(0, planThreads - previous.slots) * (to - from);
  }
  // A sample holds until the next one, so one taken just before the start still counts from the start.
  const fullSample = samples.find((s, k) => s.ceiling >= planThreads && (samples[k + 1]?.at ?? Infinity) > startedAt);
  const ceilingFullAt = fullSample === undefined ? undefined : Math.max(startedAt, fullSample.at);
  const tasksInWindow = intervals.filter((i) => i.acceptedAt <= end).length;
  const overhead = capacity - used - unfilled - pollWait;
  return {
    planThreads,
    backlogMs,
    utilization: used / capacity,
    formulaUtilization: solvesPerSecond / (planThreads / (meanSolveMs / 1000)),
    solvesPerSecond,
    meanSolveMs,
    rampUpMs: rampEnd - startedAt,
    ceilingFullMs: ceilingFullAt === undefined ? undefined : Math.max(0, ceilingFullAt - startedAt),
    steadyUtilization: steadyMs > 0 ? threadTime(intervals, rampEnd, end) / (planThreads * steadyMs) : 0,
    tailMs: Math.max(0, lastReady - end),
    runUtilization: threadTime(intervals, startedAt, lastReady) / (planThreads * Math.max(1, lastReady - startedAt)),
    loss: {
      used: used / capacity,
      unfilledSlots: unfilled / capacity,
      pollWait: pollWait / capacity,
      overhead: overhead / capacity,
      overheadPerTaskMs: overhead / tasksInWindow,
      pollWaitPerTaskMs: pollWait / tasksInWindow,
    },
  };
}

/** The machine the figures came from. */
export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  node: string;
  platform: string;
  memoryGiB: number;
  /** 1-minute load average when the run started: other jobs on the machine skew the figures. */
  loadAverage1m: number;
}

export function machineInfo(): MachineInfo {
  return {
    cpus: availableParallelism(),
    cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
    node: process.version,
    platform: `${process.platform}-${process.arch}`,
    memoryGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10,
    loadAverage1m: Math.round((loadavg()[0] ?? 0) * 100) / 100,
  };
}
