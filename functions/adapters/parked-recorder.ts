/**
 * Records a parked task's answer where the governor's watch sees it ready (the parked design):
 * the watch reads the answer with one result request, writes the same solved record the consumer
 * writes (core's `solvedFields`) in one conditional write that holds only while the task is
 * still parked under that submission (no delivery holds a claim on it), publishes its completion
 * event, and deletes the task's message through the receipt handle its lease kept. No second
 * delivery, no second claim, and no ready task waits behind a backlog for one.
 *
 * Whatever fails on the way hands the task to the consumers instead, as the waiting design would
 * have it: the message is shown again (ChangeMessageVisibility 0), so a consumer resumes the
 * submission, reads the answer (still at the solver) and records it. A solve the solver ended
 * without an answer (unsolvable: a resubmission needs the task's body) goes to the consumers the
 * same way. The record is not noted as announced (a write of the whole answered item): a rare
 * later delivery of the finished task publishes its event again, under the same event id.
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
import { type RecordBase, recordedStale, solvedFields } from '../core/solved-record.js';
import type { Task } from '../core/task.js';
import { announceResult } from './completion-events.js';
import { type Metrics, MetricResolution, MetricUnit } from './metrics.js';
import { countSpend } from './spend-metrics.js';

/** What recording a parked answer needs. */
export interface ParkedRecorderDeps {
  repository: Pick<ResultsRepository, 'completeParked' | 'markAnnounced'>;
  solver: Pick<SolverPort, 'solve'>;
  queue: Pick<TaskQueue, 'changeVisibility' | 'acknowledge'>;
  /** Batches the deletes of the recorded tasks' messages (the watch's DeleteBatch); absent, each is deleted at once. */
  deletes?: { add(message: DeliveredMessage): void };
  /** Counts the recorded solves into the parked fleet's metric window (the watch's WindowBatch); absent, not counted there. */
  window?: { add(solveMs: number): void };
  /** Publishes the solves' metrics once a batch (the watch's MetricsBatch); absent, once a solve. */
  metricsBatch?: { add(): void };
  events: CompletionEvents | undefined;
  /** The consumer's metrics (service `consumer`): a solve counts the same whoever records it. */
  metrics: Metrics;
  redactor: Redactor;
  clock?: Clock;
  /** How long the one result request may take, ms. @default 15000 */
  readMs?: number;
  log?: { info(m: string, a?: Record<string, unknown>): void; warn(m: string, a?: Record<string, unknown>): void };
}

/** One ready parked task, as the watch knows it. */
export interface ReadyParked {
  taskId: string;
  solverId: string;
  /** The record's fields before the answer (method, priority, times, provider), as the watch read it. */
  base: RecordBase;
  /** When the solver accepted the submission (the record's `solverAcceptedAt`), epoch ms. */
  acceptedAt: number | undefined;
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
  const readMs = deps.readMs ?? 15_000;

  /** The consumers take over: the message shown again. */
  const handBack = async (task: ReadyParked, why: string): Promise<'handed_back'> => {
    await deps.queue.changeVisibility(task.delivery, 0).catch(() => undefined);
    deps.log?.warn('parked task handed to the consumers', { taskId: task.taskId, why: deps.redactor.redact(why) });
    return 'handed_back';
  };

  return {
    async record(task) {
      let outcome: Awaited<ReturnType<SolverPort['solve']>>;
      try {
        outcome = await deps.solver.solve(minimalTask(task), {
          deadlineAt: clock() + readMs,
          resumeSolverId: task.solverId,
        });
      } catch (error) {
        return handBack(task, `answer not read: ${describe(error)}`);
      }
      const token = `watch:${task.taskId}:${randomUUID()}`;
      const completedAt = clock();
      const fields = solvedFields(
        task.base,
        { ...outcome, acceptedAt: task.acceptedAt ?? outcome.acceptedAt, provider: 'primary' },
        completedAt,
        Math.min(outcome.answeredAt, task.lastNotReadyAt ?? outcome.answeredAt),
      );
      let written: boolean;
      try {
        written = await deps.repository.completeParked(task.taskId, task.solverId, fields, {
          token,
          now: completedAt,
        });
      } catch (error) {
        return handBack(task, `answer not recorded: ${describe(error)}`);
      }
      // A delivery resumed it meanwhile (it holds a claim) or it is finished: theirs to end.
      if (!written) return 'skipped';
      countSolved(deps.metrics, fields, task.base.submittedAt);
      deps.window?.add(fields.solveMs);
      if (deps.metricsBatch !== undefined) deps.metricsBatch.add();
      else deps.metrics.publishStoredMetrics();
      const announced = await announceResult(
        { ...deps, clock, log: deps.log ?? { warn: () => undefined } },
        { taskId: task.taskId, attempts: 1, expiresAt: 0, ...fields, completedBy: token },
        { note: false },
      );
      // Not announced: the message comes back at once and its duplicate delivery publishes.
      if (!announced) await deps.queue.changeVisibility(task.delivery, 0).catch(() => undefined);
      else if (deps.deletes !== undefined) deps.deletes.add(task.delivery);
      else await deps.queue.acknowledge(task.delivery).catch(() => undefined);
      deps.log?.info('parked task solved', { taskId: task.taskId, solverId: task.solverId, solveMs: fields.solveMs });
      return 'recorded';
    },
  };
}

/** The task as a result request needs it: its id and method (the JSON API reads answers by type). */
function minimalTask(task: ReadyParked): Task {
  return {
    id: task.taskId,
    method: task.base.method,
    params: {},
    priority: task.base.priority ?? 'normal',
    submittedAt: task.base.submittedAt ?? 0,
  } as Task;
}

/** The consumer's solve metrics, for a solve the watch recorded. */
function countSolved(metrics: Metrics, fields: ReturnType<typeof solvedFields>, submittedAt: number | undefined): void {
  metrics.addMetric(METRICS.solveDuration, MetricUnit.Milliseconds, fields.solveMs, MetricResolution.High);
  metrics.addMetric(METRICS.solved, MetricUnit.Count, 1);
  countSpend(metrics, String(fields.method), fields.costUsd);
  if (recordedStale(fields)) metrics.addMetric(METRICS.tokensStale, MetricUnit.Count, 1);
  if (submittedAt !== undefined && fields.completedAt !== undefined)
    metrics.addMetric(METRICS.endToEnd, MetricUnit.Milliseconds, Math.max(0, fields.completedAt - submittedAt));
}

function describe(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
