/**
 * Reports on answers, schema v1: a producer says a solved task's answer was wrong (`bad`: the
 * provider refunds it) or right (`good`). The message any language can send to the reports queue,
 * the report as the result record keeps it, and the one decision of what a report on a record
 * means. Pure: no I/O.
 *
 * ```json
 * {"taskId": "order-42", "verdict": "bad"}
 * ```
 */
import { z } from 'zod';
import type { SolverProvider } from './provider.js';
import { type ReportRefusal, type TaskReport, type TaskResult, VERDICTS, type Verdict } from './results.js';
import { TASK_ID_PATTERN } from './task.js';

/** Largest report message accepted, bytes of UTF-8 JSON (a report is a few dozen). */
export const MAX_REPORT_BYTES = 1_024;

// The report as the record keeps it lives with the record (results.ts); re-exported for report's callers.
export { REPORT_REFUSALS, type ReportRefusal, type TaskReport, VERDICTS, type Verdict } from './results.js';

/** The report message (schema v1), strict: an unknown name is refused. */
export const ReportMessageSchema = z
  .strictObject({
    version: z.literal(1).optional().describe('schema version; 1 when absent'),
    taskId: z.string().regex(TASK_ID_PATTERN, 'taskId: 1-80 of A-Z a-z 0-9 _ -').describe('the solved task'),
    verdict: z
      .enum(VERDICTS)
      .describe('"bad": the answer was wrong (asks the provider for a refund); "good": it was right'),
  })
  .describe('captcha-fleet report message, schema v1');

export type ReportMessage = z.output<typeof ReportMessageSchema>;

/** A settled report: what `report()` and the CLI hand back. */
export type SettledReport = TaskReport & { state: 'accepted' | 'refused' };

/** What to do with a report on a record, decided in one place. */
export type ReportDecision =
  /** Call the provider, after claiming the report on the record. */
  | { kind: 'call'; provider: SolverProvider; solverId: string }
  /** Refuse: `write` says whether the refusal goes on the record (a finished, unreported task). */
  | { kind: 'refuse'; reason: ReportRefusal; message: string; write: boolean }
  /** Settled before: the same report again gets the first answer, the provider is not called. */
  | { kind: 'settled'; report: SettledReport }
  /** Another delivery is calling the provider now: come back after `leaseUntil`. */
  | { kind: 'in_progress'; leaseUntil: number };

/**
 * Decide a report. `token` is the delivery's (its SQS message id): a redelivery of the same
 * message takes its own pending report up again at once; another waits for the lease.
 */
export function decideReport(
  record: TaskResult | undefined,
  verdict: Verdict,
  options: { now: number; token: string },
): ReportDecision {
  if (record === undefined || record.expiresAt < Math.floor(options.now / 1000))
    return refuse(
      'NOT_FOUND',
      'no record of this task (not yet taken from its queue, never sent, or past the results TTL)',
      false,
    );
  const report = record.report;
  if (report !== undefined && report.state !== 'pending') {
    if (report.verdict === verdict) return { kind: 'settled', report: report as SettledReport };
    return refuse(
      'ALREADY_REPORTED',
      `already reported ${report.verdict} (${report.state}); the first report stands`,
      false,
    );
  }
  if (report !== undefined && report.token !== options.token && (report.leaseUntil ?? 0) >= options.now)
    return { kind: 'in_progress', leaseUntil: report.leaseUntil ?? options.now };
  if (record.status !== 'solved') {
    const finished = record.status !== 'solving';
    return refuse(
      'NOT_SOLVED',
      finished ? `the task ended ${record.status}: there is no answer to report` : 'the task is still solving',
      // A solving record is the consumer's: nothing is written on it (its answer may still come).
      finished && report === undefined,
    );
  }
  if (record.solverId === undefined)
    return refuse('NO_SOLVER_ID', 'the record names no solver id to report to the provider', report === undefined);
  return { kind: 'call', provider: record.solverProvider ?? record.provider ?? 'primary', solverId: record.solverId };
}

function refuse(reason: ReportRefusal, message: string, write: boolean): ReportDecision {
  return { kind: 'refuse', reason, message, write };
}

/** What a report message's body is: a report, or why not (the DLQ's reason codes). */
export type ParseReportResult =
  | { ok: true; report: ReportMessage }
  | { ok: false; code: 'MALFORMED_JSON' | 'SCHEMA_VIOLATION' | 'TOO_LARGE'; reason: string; taskId?: string };

/** Parse and bound a report message body. */
export function parseReportMessage(body: string): ParseReportResult {
  const bytes = Buffer.byteLength(body);
  if (bytes > MAX_REPORT_BYTES)
    return { ok: false, code: 'TOO_LARGE', reason: `the report is ${bytes} bytes; the limit is ${MAX_REPORT_BYTES}` };
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (error) {
    return { ok: false, code: 'MALFORMED_JSON', reason: `not JSON: ${(error as Error).message}` };
  }
  const parsed = ReportMessageSchema.safeParse(json);
  if (parsed.success) return { ok: true, report: parsed.data };
  const taskId = (json as { taskId?: unknown } | null)?.taskId;
  return {
    ok: false,
    code: 'SCHEMA_VIOLATION',
    reason: parsed.error.issues.map((issue) => `${issue.path.join('.') || '(report)'}: ${issue.message}`).join('; '),
    ...(typeof taskId === 'string' && TASK_ID_PATTERN.test(taskId) ? { taskId } : {}),
  };
}
