/**
 * The solver client alone against the simulator, with a backlog worked by as many workers as
 * the plan has threads: the fleet at its cap with no SQS, DynamoDB or invocation overhead in
 * between. This is where the fixed and the adaptive poll schedules are compared, because the
 * local stack offers no way to choose its schedule (docs/bench-pipeline.md says what option it
 * would need).
 */
import { randomBytes } from 'node:crypto';
import { createSolverClient } from '../../functions/adapters/solver-client.js';
import { createFixedPollSchedule, type PollSchedule, type PollStats } from '../../functions/core/poll-schedule.js';
import type { SolveOutcome } from '../../functions/core/ports.js';
import { createLocalPollSchedule } from '../../local/poll-schedule-local.js';
import { createSolverSimulator, type SolverSimStats } from '../../local/solver-sim/index.js';
import { startOccupancySampler, type OccupancySample, type ThreadInterval } from './measure.js';
import { asTasks, buildBenchTasks } from './workload.js';

export type ScheduleKind = 'fixed' | 'adaptive';

export interface ClientRunOptions {
  tasks: number;
  seed: number;
  planThreads: number;
  medianMs: number;
  schedule: ScheduleKind;
  /** Deadline of one solve, ms (the local stack's is 10 s). */
  solveDeadlineMs?: number;
}

export interface ClientRunResult {
  startedAt: number;
  finishedAt: number;
  solved: number;
  failed: number;
  sim: SolverSimStats;
  intervals: ThreadInterval[];
  samples: OccupancySample[];
  /** The schedule's own counters (its wait is an estimate; the simulator's is exact). */
  schedule: PollStats;
  /** The plan the schedule starts from, ms: what "fixed" means at this median. */
  startPlan: { firstPollMs: number; intervalMs: number };
}

/**
 * The schedule the local runtime uses (local/poll-schedule-local.ts: the protocol's shape scaled
 * to the simulator's median until a method has history, then adaptive), or the protocol's
 * fixed schedule scaled exactly the same way, read from that schedule's own starting plan.
 */
export function scheduleFor(
  kind: ScheduleKind,
  medianMs: number,
): { schedule: PollSchedule; startPlan: { firstPollMs: number; intervalMs: number } } {
  const local = createLocalPollSchedule({ medianMs });
  const plan = local.plan('userrecaptcha');
  const startPlan = { firstPollMs: plan.firstPollMs, intervalMs: plan.minIntervalMs };
  if (kind === 'adaptive') return { schedule: local, startPlan };
  const pollDefaults = { image: startPlan, token: startPlan };
  return { schedule: createFixedPollSchedule({ pollDefaults }), startPlan };
}

/** Solve `options.tasks` tasks with `planThreads` workers sharing one client; stop everything. */
export async function runClientOnly(options: ClientRunOptions): Promise<ClientRunResult> {
  const key = randomBytes(16).toString('hex');
  const sim = createSolverSimulator({
    seed: options.seed,
    planThreads: options.planThreads,
    medianMs: options.medianMs,
    validKeys: [key],
  });
  const { url } = await sim.listen(0, '127.0.0.1');
  const { schedule, startPlan } = scheduleFor(options.schedule, options.medianMs);
  // Retries compressed as in the local runtime.
  const client = createSolverClient({
    baseUrl: url,
    key,
    dialect: 'captchaai',
    schedule,
    retry: { baseBackoffMs: 100, maxBackoffMs: 1_000 },
  });
  try {
    const tasks = asTasks(buildBenchTasks(options.tasks, options.seed, `c${options.seed}`), Date.now());
    const outcomes: SolveOutcome[] = [];
    let failed = 0;
    let next = 0;
    let busy = 0;
    const sampler = startOccupancySampler(() => ({ slots: busy, ceiling: options.planThreads }));
    const startedAt = Date.now();
    const worker = async () => {
      while (next < tasks.length) {
        const task = tasks[next++];
        if (task === undefined) break;
        busy++;
        try {
          outcomes.push(await client.solve(task, { deadlineAt: Date.now() + (options.solveDeadlineMs ?? 10_000) }));
        } catch {
          failed++;
        } finally {
          busy--;
        }
      }
    };
    await Promise.all(Array.from({ length: options.planThreads }, worker));
    const finishedAt = Date.now();
    const samples = sampler.stop();
    const intervals: ThreadInterval[] = [];
    for (const outcome of outcomes) {
      const info = sim.taskInfo(Number(outcome.solverId));
      if (info) intervals.push({ acceptedAt: info.acceptedAt, readyAt: info.readyAt, readAt: outcome.answeredAt });
    }
    return {
      startedAt,
      finishedAt,
      solved: outcomes.length,
      failed,
      sim: sim.stats(),
      intervals,
      samples,
      schedule: schedule.stats().total,
      startPlan,
    };
  } finally {
    await client.close();
    await sim.close();
  }
}
