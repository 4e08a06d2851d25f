/**
 * The report function's Lambda handler, built from its dependencies so the same code runs in
 * Lambda (handler.ts) and in the local runtime. Partial batch responses: a report that could not
 * be made goes back alone.
 */
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { processReport, type ReporterDeps } from './process-report.js';

export type { ReporterDeps } from './process-report.js';
export { ReportRetryError } from './process-report.js';

export type ReporterHandler = (event: SQSEvent, context: Context) => Promise<SQSBatchResponse>;

export function createReporterHandler(deps: ReporterDeps): ReporterHandler {
  return async (event, context) => {
    // One processor per invocation (the local runtime may run several at once in one process).
    const processor = new BatchProcessor(EventType.SQS);
    try {
      return await processPartialResponse(event, (record: SQSRecord) => processReport(record, deps), processor, {
        context,
        processInParallel: true,
        throwOnFullBatchFailure: false,
      });
    } finally {
      deps.metrics.publishStoredMetrics();
    }
  };
}
