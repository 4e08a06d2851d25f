/**
 * One benchmark run on the local stack (`startLocalStack`: embedded emulators, the simulator,
 * the consumer behind the local pollers, the governor unless the ceiling is fixed): send the
 * tasks, wait for every terminal record, then read what happened from the outside — the
 * results table's timings, the simulator's counters and its per-task accept/ready times, the
 * pollers' concurrency pool sampled over time.
 */
import { BatchGetCommand, type BatchGetCommandOutput } from '@aws-sdk/lib-dynamodb';
import type { TaskResult } from '../../functions/core/results.js';
import type { TaskMessage } from '../../functions/core/task.js';
import type { LocalGovernorStats } from '../../local/governor-local.js';
import { startLocalStack, type LocalStack } from '../../local/runtime.js';
import type { SolverSimStats } from '../../local/solver-sim/index.js';
import { startOccupancySampler, type OccupancySample, type ThreadInterval } from './measure.js';
import { buildBenchTasks } from './workload.js';
import { scheduleFor, type ScheduleKind } from './client-run.js';

export interface StackRunOptions {
  tasks: number;
  seed: number;
  /** Threads of the simulated plan, and the fleet's `planThreads`. */
  planThreads: number;
  /** SQS batch size (tasks per invocation). */
  batchSize: number;
  /** The simulator's median solve time, ms (log-normal, σ 0.35); 0 = answers ready at once. */
  medianMs: number;
  /** The solver client's poll schedule. @default the local runtime's (adaptive) */
  schedule?: ScheduleKind;
  /** A fixed ceiling (`--concurrency`): the governor is off. */
  concurrency?: number;
  /** The governor's tick, ms. */
  tickMs?: number;
  /** Tasks per second; 0 sends them all at once (a backlog). */
  rate: number;
  /** Give up waiting after this long, ms. */
  timeoutMs: number;
}

export interface StackRunResult {
  /** Epoch ms the first task was sent. */
  startedAt: number;
  /** Epoch ms of the last terminal record's completion event. */
  finishedAt: number;
  /** Tasks that reached a terminal record (they all should). */
  terminal: number;
  results: TaskResult[];
  sim: SolverSimStats;
  /** Every task the simulator accepted, with its answer's read time where the results tell it. */
  intervals: ThreadInterval[];
  samples: OccupancySample[];
  governor: LocalGovernorStats | undefined;
  /** Most invocations at once across both lanes. */
  peakInvocations: number;
  /** Start-up of the stack, ms (not part of any figure). */
  startupMs: number;
}

/** Run `options.tasks` tasks through a fresh local stack and stop it. */
export async function runOnStack(options: StackRunOptions): Promise<StackRunResult> {
  const runId = `s${options.seed}-${Date.now().toString(36)}`;
  const messages = buildBenchTasks(options.tasks, options.seed, runId);
  const wanted = new Set(messages.map((m) => m.id));
  const startup = Date.now();
  const stack = await startLocalStack({
    config: { planThreads: options.planThreads, tasksPerInvocation: options.batchSize },
    solver: { seed: options.seed, medianMs: options.medianMs, unsolvableRate: 0, transientErrorRate: 0 },
    seed: options.seed,
    ...(options.schedule ? { pollSchedule: scheduleFor(options.schedule, options.medianMs).schedule } : {}),
    ...(options.concurrency !== undefined
      ? { concurrency: options.concurrency }
      : { governor: { tickMs: options.tickMs ?? 1_000 } }),
  });
  const startupMs = Date.now() - startup;
  try {
    let finishedAt = 0;
    let terminal = 0;
    let allDone!: () => void;
    const done = new Promise<void>((resolve) => (allDone = resolve));
    const unsubscribe = stack.events.subscribe((event) => {
      if (!wanted.delete(event.id)) return;
      terminal++;
      finishedAt = Date.now();
      if (wanted.size === 0) allDone();
    });
    // Every bench task goes to the normal lane, so its ceiling (within the shared pool) is the fleet's.
    const sampler = startOccupancySampler(() => ({
      slots: stack.pool.inUse * options.batchSize,
      ceiling: Math.min(stack.pool.limit, stack.pollers.normal.maxConcurrency) * options.batchSize,
    }));
    const startedAt = Date.now();
    await send(stack, messages, options.rate, startedAt);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([done, new Promise<void>((resolve) => (timer = setTimeout(resolve, options.timeoutMs)))]);
    clearTimeout(timer);
    unsubscribe();
    const samples = sampler.stop();
    const results = await readResults(
      stack,
      messages.map((m) => m.id),
    );
    const sim = stack.simulator.stats();
    return {
      startedAt,
      finishedAt: finishedAt || Date.now(),
      terminal,
      results,
      sim,
      intervals: threadIntervals(stack, results, sim.accepted),
      samples,
      governor: stack.governor?.stats(),
      peakInvocations: stack.pollerStats().peakConcurrency,
      startupMs,
    };
  } finally {
    await stack.stop({ graceMs: 1_000 });
  }
}

/** A burst in parallel batches of the producer, or one task at a time at `rate` per second. */
async function send(
  stack: LocalStack,
  messages: readonly TaskMessage[],
  rate: number,
  startedAt: number,
): Promise<void> {
  if (rate <= 0) {
    const chunk = 50;
    const chunks: TaskMessage[][] = [];
    for (let i = 0; i < messages.length; i += chunk) chunks.push(messages.slice(i, i + chunk));
    // A few producers at once, as a real burst comes from several workers.
    for (let i = 0; i < chunks.length; i += 4)
      await Promise.all(chunks.slice(i, i + 4).map((c) => stack.producer.submit(c)));
    return;
  }
  const sends: Promise<unknown>[] = [];
  for (const [n, message] of messages.entries()) {
    const due = startedAt + (n * 1000) / rate;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    sends.push(stack.producer.submit(message));
  }
  await Promise.all(sends);
}

/** Every record, read consistently 100 keys at a time (BatchGet's limit). */
async function readResults(stack: LocalStack, ids: readonly string[]): Promise<TaskResult[]> {
  const table = stack.resources.tables.results;
  const results: TaskResult[] = [];
  for (let i = 0; i < ids.length; i += 100) {
    let keys: Record<string, unknown>[] | undefined = ids.slice(i, i + 100).map((taskId) => ({ taskId }));
    for (let attempt = 0; keys && keys.length > 0 && attempt < 10; attempt++) {
      const answer: BatchGetCommandOutput = await stack.clients.documents.send(
        new BatchGetCommand({ RequestItems: { [table]: { Keys: keys, ConsistentRead: true } } }),
      );
      results.push(...((answer.Responses?.[table] ?? []) as TaskResult[]));
      keys = answer.UnprocessedKeys?.[table]?.Keys;
    }
  }
  return results;
}

/**
 * The simulator numbers the tasks it accepts consecutively, so every accepted task (even one
 * whose record was overwritten by a resubmission) is found from the lowest id the results name.
 * The answer's read time is the acceptance plus the solve time the consumer recorded.
 */
function threadIntervals(stack: LocalStack, results: readonly TaskResult[], accepted: number): ThreadInterval[] {
  const ids = results.map((r) => Number(r.solverId)).filter((id) => Number.isFinite(id));
  if (ids.length === 0) return [];
  const first = Math.min(...ids);
  const solveMsById = new Map(
    results.flatMap((r) => (r.solveMs === undefined ? [] : [[Number(r.solverId), r.solveMs] as const])),
  );
  const intervals: ThreadInterval[] = [];
  for (let id = first; id < first + accepted; id++) {
    const info = stack.simulator.taskInfo(id);
    if (!info) continue;
    const solveMs = solveMsById.get(id);
    intervals.push({
      acceptedAt: info.acceptedAt,
      readyAt: info.readyAt,
      ...(solveMs !== undefined ? { readAt: info.acceptedAt + solveMs } : {}),
    });
  }
  return intervals;
}
