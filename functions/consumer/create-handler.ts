/**
 * The consumer's Lambda handler, built from its dependencies so the same code runs in Lambda
 * (wired in `handler.ts`) and in the local runtime (wired by it with emulators and a simulator).
 */
import { BatchProcessor, EventType, processPartialResponse } from '@aws-lambda-powertools/batch';
import type { Context, SQSRecord } from 'aws-lambda';
import {
  processRecord,
  readRecord,
  refusalGate,
  resolveTiming,
  type ConsumerDeps,
  type RecordContext,
} from './process-task.js';
import type { ProbeDelivery } from './context.js';
import { type ConsumerEvent, type ConsumerResponse, probeKeepOf } from '../core/probe-invocation.js';
import { countStoreCalls } from './store-calls.js';

export type { ConsumerDeps, ConsumerTiming, Outcome, RetryReason, RequeuePolicy } from './process-task.js';
export { RetryLaterError, ClaimLostError, backoffSeconds } from './process-task.js';

/** Lambda's SQS handler with partial batch responses. */
export type ConsumerHandler = (event: ConsumerEvent, context: Context) => Promise<ConsumerResponse>;

/**
 * Build the handler. Records of one batch are solved concurrently (`processInParallel: true`,
 * Powertools' default in 2.35, set explicitly because the thread-cap arithmetic assumes it:
 * a batch of N holds N solver threads at once).
 */
export function createConsumerHandler(deps: ConsumerDeps): ConsumerHandler {
  const clock = deps.clock ?? Date.now;
  const timing = resolveTiming(deps.settings, deps.timing);
  return async (event, context) => {
    // The invocation's calls to DynamoDB and SQS are counted (and their failures) for the
    // governor's store-health signal; per invocation, as several may run at once in one process.
    const counted = countStoreCalls(deps);
    // Every record is read once, here: the refusals gate counts the batch's refusals before any starts.
    const now = clock();
    const reads = new Map(event.Records.map((record) => [record.messageId, readRecord(record, now)]));
    const refused = [...reads.values()].filter((read) => !read.parsed.ok).length;
    const keep = probeKeepOf(event);
    const probe: ProbeDelivery | undefined =
      event.probe === true && event.Records.length === 1
        ? { ...(keep !== undefined ? { keepSeconds: keep } : {}) }
        : undefined;
    const ctx: RecordContext = {
      deps: counted.deps,
      clock,
      timing,
      stopAt: clock() + context.getRemainingTimeInMillis(),
      requestId: context.awsRequestId,
      acknowledgeEach: event.Records.length > 1,
      dynamoErrors: counted.dynamoErrors,
      // A batch's refusals settle before its tasks start (RecordContext.refusalsFirst).
      ...(event.Records.length > 1 ? { refusalsFirst: refusalGate(refused) } : {}),
      ...(probe !== undefined ? { probe } : {}),
    };
    // One processor per invocation: it keeps the batch's state on the instance, and the local
    // runtime may run several invocations of this handler at once in one process.
    const processor = new BatchProcessor(EventType.SQS);
    try {
      const response = await processPartialResponse(
        event,
        (record: SQSRecord) => processRecord(record, ctx, reads.get(record.messageId)),
        processor,
        {
          context,
          processInParallel: true,
          // Every record failing is still a partial response (all listed), not a thrown batch:
          // the visibility changes made per record then decide when each comes back.
          throwOnFullBatchFailure: false,
        },
      );
      return probe === undefined ? response : { ...response, probe: probe.answer ?? 'none' };
    } finally {
      counted.emit();
      deps.metrics.publishStoredMetrics();
    }
  };
}
