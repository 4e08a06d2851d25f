/**
 * Records a parked task's answer where the governor's watch sees it ready (the parked design):
 * the watch claims the parked record (by its solver id: no live claim on it), reads the answer
 * with one result request, writes the same solved record the consumer writes (core's
 * `solvedFields`), announces it, and deletes the task's message through the receipt handle its
 * lease kept. No second delivery, and no ready task waits behind a backlog for one.
 *
 * Whatever fails on the way hands the task to the consumers instead, as the waiting design would
 * have it: the claim is given back and the message shown again (ChangeMessageVisibility 0), so a
 * consumer resumes the submission, reads the answer (still at the solver) and records it. An
 * answer the solver ended without one (unsolvable: a resubmission needs the task's body) goes to
 * the consumers the same way.
 */
import { randomUUID } from 'node:crypto';
import { METRICS } from '../core/metric-names.js';
import type {
  Clock,
  CompletionEvents,
  DeliveredMessage,
  ResultsRepository,
  SolverPort,
  TaskQueue,
} from '../core/ports.js';
import type { Redactor } from '../core/redaction.js';
import type { TaskResult } from '../core/results.js';
import { recordedStale, solvedFields } from '../core/solved-record.js';
import type { Task } from '../core/task.js';
import { announceResult } from './completion-events.js';
import { type Metrics, MetricResolution, MetricUnit } from './metrics.js';
import { countSpend } from './spend-metrics.js';

/** What recording a parked answer needs. */
export interface ParkedRecorderDeps {
  repository: Pick<ResultsRepository, 'claimParked' | 'complete' | 'release' | 'markAnnounced'>;
  solver: Pick<SolverPort, 'solve'>;
  queue: Pick<TaskQueue, 'changeVisibility' | 'acknowledge'>;
  events: CompletionEvents | undefined;
  /** The consumer's metrics (service `consumer`): a solve counts the same whoever records it. */
  metrics: Metrics;
  redactor: Redactor;
  clock?: Clock;
  /** How long the watch's claim protects the record while it writes, ms. @default 30000 */
  claimMs?: number;
  /** How long the one result request may take, ms. @default 15000 */
  readMs?: number;
  log?: { info(m: string, a?: Record<string, unknown>): void; warn(m: string, a?: Record<string, unknown>): void };
}

/** One ready parked task, as the watch knows it. */
export interface ReadyParked {
  taskId: string;
  solverId: string;
  method: string;
  /** The delivery that parked it (its message's receipt handle). */
  delivery: DeliveredMessage;
  /** The watch's last poll that found it not ready: the answer was issued after it (a token's expiry counts from it). */
  lastNotReadyAt?: number;
}

/** How one recording went: written and announced, handed to the consumers, or not the watch's to do. */
export type ParkedRecordOutcome = 'recorded' | 'handed_back' | 'skipped';

/** The recorder: `record()` never throws. */
export interface ParkedRecorder {
  record(task: ReadyParked): Promise<ParkedRecordOutcome>;
}

/** Build the recorder. */
export function createParkedRecorder(deps: ParkedRecorderDeps): ParkedRecorder {
  const clock = deps.clock ?? Date.now;
  const claimMs = deps.claimMs ?? 30_000;
  const readMs = deps.readMs ?? 15_000;

  /** The consumers take over: the claim given back, the message shown again. */
  const handBack = async (task: ReadyParked, claimToken: string | undefined, why: string): Promise<'handed_back'> => {
    if (claimToken !== undefined) await deps.repository.release(task.taskId, claimToken).catch(() => undefined);
    await deps.queue.changeVisibility(task.delivery, 0).catch(() => undefined);
    deps.log?.warn('parked task handed to the consumers', { taskId: task.taskId, why: deps.redactor.redact(why) });
    return 'handed_back';
  };

  const write = async (task: ReadyParked, claimed: TaskResult, claimToken: string): Promise<ParkedRecordOutcome> => {
    const now = clock();
    let outcome: Awaited<ReturnType<SolverPort['solve']>>;
    try {
      outcome = await deps.solver.solve(minimalTask(task, claimed), {
        deadlineAt: now + readMs,
        resumeSolverId: task.solverId,
      });
    } catch (error) {
      return handBack(task, claimToken, `answer not read: ${describe(error)}`);
    }
    const acceptedAt = claimed.solverAcceptedAt ?? outcome.acceptedAt;
    const completedAt = clock();
    const fields = solvedFields(
      baseOf(claimed),
      { ...outcome, acceptedAt, provider: 'primary' },
      completedAt,
      Math.min(outcome.answeredAt, task.lastNotReadyAt ?? outcome.answeredAt),
    );
    let written: boolean;
    try {
      written = await deps.repository.complete(task.taskId, claimToken, fields);
    } catch (error) {
      return handBack(task, claimToken, `answer not recorded: ${describe(error)}`);
    }
    if (!written) return 'skipped';
    countSolved(deps.metrics, fields, claimed);
    deps.metrics.publishStoredMetrics();
    const announced = await announceResult(
      { ...deps, clock, log: deps.log ?? { warn: () => undefined } },
      { ...claimed, ...fields, completedBy: claimToken },
    );
    // Not announced: the message comes back at once and its duplicate delivery publishes.
    if (!announced) await deps.queue.changeVisibility(task.delivery, 0).catch(() => undefined);
    else await deps.queue.acknowledge(task.delivery).catch(() => undefined);
    deps.log?.info('parked task solved', { taskId: task.taskId, solverId: task.solverId, solveMs: fields.solveMs });
    return 'recorded';
  };

  return {
    async record(task) {
      const claimToken = `watch:${task.taskId}:${randomUUID()}`;
      let claimed: TaskResult | undefined;
      try {
        claimed = await deps.repository.claimParked(task.taskId, task.solverId, {
          claimToken,
          now: clock(),
          leaseMs: claimMs,
        });
      } catch (error) {
        return handBack(task, undefined, `record not claimed: ${describe(error)}`);
      }
      if (claimed === undefined) return 'skipped';
      return write(task, claimed, claimToken);
    },
  };
}

/** The task as a result request needs it: its id and method (the JSON API reads answers by type). */
function minimalTask(task: ReadyParked, record: TaskResult): Task {
  return {
    id: task.taskId,
    method: record.method ?? task.method,
    params: {},
    priority: record.priority ?? 'normal',
    submittedAt: record.submittedAt ?? 0,
  } as Task;
}

/** The record's fields before the answer, as the claim wrote them. */
function baseOf(record: TaskResult) {
  const { method, priority, submittedAt, startedAt, queueWaitMs, provider } = record;
  return { method, priority, submittedAt, startedAt, queueWaitMs, provider };
}

/** The consumer's solve metrics, for a solve the watch recorded. */
function countSolved(metrics: Metrics, fields: ReturnType<typeof solvedFields>, record: TaskResult): void {
  metrics.addMetric(METRICS.solveDuration, MetricUnit.Milliseconds, fields.solveMs, MetricResolution.High);
  metrics.addMetric(METRICS.solved, MetricUnit.Count, 1);
  countSpend(metrics, String(fields.method), fields.costUsd);
  if (recordedStale(fields)) metrics.addMetric(METRICS.tokensStale, MetricUnit.Count, 1);
  if (record.submittedAt !== undefined && fields.completedAt !== undefined)
    metrics.addMetric(METRICS.endToEnd, MetricUnit.Milliseconds, Math.max(0, fields.completedAt - record.submittedAt));
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
