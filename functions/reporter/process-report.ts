/**
 * One report message, start to finish: parse → read the record → decide (core/report.ts) →
 * claim → call the provider that solved the task, once → settle on the record → count. Ends
 * acknowledged (settled, refused, or dead-lettered with its reason) or thrown (a passing failure:
 * SQS delivers the message again after its visibility timeout).
 */
import type { Logger } from '@aws-lambda-powertools/logger';
import type { SQSRecord } from 'aws-lambda';
import type { ReportRepository } from '../adapters/report-repository.js';
import { type Metrics, MetricUnit } from '../adapters/metrics.js';
import { queueNameOf } from '../adapters/task-queue.js';
import { REPORT_METRICS } from '../core/metric-names.js';
import type { SolverPort, TaskQueue } from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import type { Redactor } from '../core/redaction.js';
import {
  decideReport,
  parseReportMessage,
  type ReportMessage,
  type ReportRefusal,
  type TaskReport,
} from '../core/report.js';
import type { TaskResult } from '../core/results.js';
import { SolverTaskError } from '../core/solver-protocol.js';

/** What the report function works with. */
export interface ReporterDeps {
  repository: ReportRepository;
  /** The solver of each provider this fleet has: a report goes to the one that solved the task. */
  solvers: Partial<Record<SolverProvider, SolverPort>>;
  /** Where malformed reports go, with their reason (the reports DLQ). */
  queue: Pick<TaskQueue, 'deadLetter'>;
  metrics: Metrics;
  logger: Logger;
  redactor?: Redactor;
  clock?: () => number;
  /**
   * How long a claimed report keeps other deliveries off while the provider is called, ms.
   * @default 60000 (the function's timeout is 30 s)
   */
  leaseMs?: number;
}

/** A report handed back to the queue: the provider or the table could not be reached. */
export class ReportRetryError extends Error {
  override readonly name = 'ReportRetryError';
  constructor(
    readonly taskId: string,
    message: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

/** Rounds of read → decide → claim when the record changes under a claim. */
const ROUNDS = 3;

/** Handle one report record. Resolves to acknowledge; throws to have SQS deliver it again. */
export async function processReport(record: SQSRecord, deps: ReporterDeps): Promise<void> {
  const clock = deps.clock ?? Date.now;
  const parsed = parseReportMessage(record.body);
  if (!parsed.ok) {
    await deps.queue.deadLetter({
      body: record.body,
      reason: parsed.code,
      reasonDetail: parsed.reason,
      ...(parsed.taskId !== undefined ? { taskId: parsed.taskId } : {}),
      sourceQueue: queueNameOf(record.eventSourceARN),
      sourceMessageId: record.messageId,
    });
    countRefused(deps.metrics, parsed.code);
    deps.logger.warn('report refused to the DLQ', { reason: parsed.code, reasonDetail: parsed.reason });
    return;
  }
  const { taskId, verdict } = parsed.report;
  const log = deps.logger.createChild({ persistentKeys: { taskId, verdict, messageId: record.messageId } });
  for (let round = 0; round < ROUNDS; round++) {
    const now = clock();
    const current = await deps.repository.get(taskId);
    const decision = decideReport(current, verdict, { now, token: record.messageId });
    switch (decision.kind) {
      case 'settled':
        deps.metrics.addMetric(REPORT_METRICS.reportsRepeated, MetricUnit.Count, 1);
        log.info('report settled before; the provider is not called again', {
          state: decision.report.state,
          reason: decision.report.reason,
        });
        return;
      case 'in_progress':
        throw new ReportRetryError(taskId, `report of task ${taskId} is being made by another delivery`);
      case 'refuse': {
        const report = refusal(parsed.report, now, decision.reason, decision.message, current);
        if (decision.write && !(await deps.repository.refuse(taskId, report))) continue;
        countRefused(deps.metrics, decision.reason);
        log.warn('report refused', { reason: decision.reason, detail: decision.message });
        return;
      }
      case 'call': {
        const solver = deps.solvers[decision.provider];
        if (solver === undefined) {
          const message = `the ${decision.provider} provider that solved this task is not configured in this fleet`;
          const report = refusal(parsed.report, now, 'PROVIDER_UNAVAILABLE', message, current);
          if (!(await deps.repository.refuse(taskId, report))) continue;
          countRefused(deps.metrics, 'PROVIDER_UNAVAILABLE');
          log.warn('report refused', { reason: 'PROVIDER_UNAVAILABLE', detail: message });
          return;
        }
        const claim = {
          verdict,
          state: 'pending' as const,
          requestedAt: now,
          provider: decision.provider,
          solverId: decision.solverId,
          token: record.messageId,
          leaseUntil: now + (deps.leaseMs ?? 60_000),
        };
        if (!(await deps.repository.claim(taskId, claim, now))) continue;
        return callProvider(deps, solver, current as TaskResult, parsed.report, claim, log);
      }
    }
  }
  throw new ReportRetryError(taskId, `report of task ${taskId} kept conflicting after ${ROUNDS} rounds`);
}

/** The one provider call of a claimed report, and its settlement. */
async function callProvider(
  deps: ReporterDeps,
  solver: SolverPort,
  solved: TaskResult,
  message: ReportMessage,
  claim: TaskReport & { token: string; solverId: string },
  log: Logger,
): Promise<void> {
  const clock = deps.clock ?? Date.now;
  const context = solved.method !== undefined ? { method: solved.method } : {};
  try {
    if (message.verdict === 'bad') await solver.reportBad(claim.solverId, context);
    else await solver.reportGood(claim.solverId, context);
  } catch (error) {
    if (!(error instanceof SolverTaskError)) {
      // Transient, over cap, account, timeout: nothing was settled; the redelivery claims it again.
      await deps.repository.release(message.taskId, claim.token).catch(() => undefined);
      deps.metrics.addMetric(REPORT_METRICS.reportErrors, MetricUnit.Count, 1);
      const detail = redact(deps, (error as Error).message);
      log.warn('report not made; retried', { error: detail });
      throw new ReportRetryError(message.taskId, `report of task ${message.taskId} not made: ${detail}`, {
        cause: error,
      });
    }
    const reason: ReportRefusal = error.code === 'REPORT_NOT_SUPPORTED' ? 'NOT_SUPPORTED' : 'PROVIDER_REFUSED';
    const refused: TaskReport = {
      ...claim,
      state: 'refused',
      reason,
      code: error.code,
      message: redact(deps, error.message),
      reportedAt: clock(),
    };
    await settle(deps, message.taskId, claim.token, refused);
    countRefused(deps.metrics, reason);
    log.warn('report refused by the provider', { reason, code: error.code, provider: claim.provider });
    return;
  }
  const refundUsd = message.verdict === 'bad' ? solved.costUsd : undefined;
  const accepted: TaskReport = {
    ...claim,
    state: 'accepted',
    reportedAt: clock(),
    ...(refundUsd !== undefined ? { refundUsd } : {}),
  };
  await settle(deps, message.taskId, claim.token, accepted);
  if (message.verdict === 'bad') {
    deps.metrics.addMetric(REPORT_METRICS.refunds, MetricUnit.Count, 1);
    if (refundUsd !== undefined) deps.metrics.addMetric(REPORT_METRICS.refundsUsd, MetricUnit.NoUnit, refundUsd);
  } else deps.metrics.addMetric(REPORT_METRICS.goodReports, MetricUnit.Count, 1);
  log.info('report accepted by the provider', { provider: claim.provider, solverId: claim.solverId, refundUsd });
}

/**
 * Settle under the claim. A lost claim (the lease ran out during the call and another delivery
 * took it) is left to that delivery: the provider answers its second call as a duplicate.
 */
async function settle(deps: ReporterDeps, taskId: string, token: string, report: TaskReport): Promise<void> {
  if (!(await deps.repository.settle(taskId, token, report)))
    deps.logger.warn('report settled by another delivery', { taskId });
}

function refusal(
  message: ReportMessage,
  now: number,
  reason: ReportRefusal,
  text: string,
  record: TaskResult | undefined,
): TaskReport {
  return {
    verdict: message.verdict,
    state: 'refused',
    reason,
    message: text,
    requestedAt: now,
    reportedAt: now,
    ...(record?.solverId !== undefined ? { solverId: record.solverId } : {}),
    ...(record?.solverProvider !== undefined || record?.provider !== undefined
      ? { provider: (record.solverProvider ?? record.provider) as SolverProvider }
      : {}),
  };
}

function countRefused(metrics: Metrics, reason: string): void {
  const single = metrics.singleMetric();
  single.addDimension('Reason', reason);
  single.addMetric(REPORT_METRICS.reportsRefused, MetricUnit.Count, 1);
}

function redact(deps: ReporterDeps, text: string): string {
  return deps.redactor ? deps.redactor.redact(text) : text;
}
