/**
 * Counts one invocation's calls to the fleet's own stores, and those that failed for the store's
 * sake (throttled or unavailable, after the SDK's retries): `DynamoRequests` / `DynamoErrors` and
 * `SqsRequests` / `SqsErrors` in the invocation's EMF document. The governor's store-health signal
 * reads their ratio (functions/adapters/store-health-signals.ts): EMF travels through CloudWatch
 * Logs, so a consumer reports a DynamoDB or SQS outage through neither of them.
 */
import { MetricUnit } from '../adapters/metrics.js';
import { METRICS } from '../core/metric-names.js';
import { isStoreError, type ResultsRepository, type TaskQueue } from '../core/ports.js';
import type { ConsumerDeps } from './context.js';

interface Tally {
  requests: number;
  errors: number;
}

/** A proxy that counts each method call of `target` into `tally`. */
function counting<T extends object>(target: T, tally: Tally): T {
  return new Proxy(target, {
    get(object, property, receiver) {
      const value: unknown = Reflect.get(object, property, receiver);
      if (typeof value !== 'function') return value;
      return async (...args: unknown[]) => {
        tally.requests += 1;
        try {
          return await (value as (...a: unknown[]) => Promise<unknown>).apply(object, args);
        } catch (error) {
          if (isStoreError(error) && error.kind !== 'too_large') tally.errors += 1;
          throw error;
        }
      };
    },
  });
}

/** The dependencies with counted ports, and the emission of the counts (once, at the invocation's end). */
export function countStoreCalls(deps: ConsumerDeps): { deps: ConsumerDeps; emit(): void; dynamoErrors(): number } {
  const dynamo: Tally = { requests: 0, errors: 0 };
  const sqs: Tally = { requests: 0, errors: 0 };
  return {
    dynamoErrors: () => dynamo.errors,
    deps: {
      ...deps,
      repository: counting<ResultsRepository>(deps.repository, dynamo),
      queue: counting<TaskQueue>(deps.queue, sqs),
    },
    emit() {
      const m = deps.metrics;
      // Failures go out only when some call failed, in the same document as the calls: a window
      // with none has none failed (the governor reads the failures alone in an ordinary minute),
      // and a fleet whose calls all work pays for no error stream (CloudWatch bills a metric in
      // the hours it receives data).
      if (dynamo.requests > 0) m.addMetric(METRICS.dynamoRequests, MetricUnit.Count, dynamo.requests);
      if (dynamo.errors > 0) m.addMetric(METRICS.dynamoErrors, MetricUnit.Count, dynamo.errors);
      if (sqs.requests > 0) m.addMetric(METRICS.sqsRequests, MetricUnit.Count, sqs.requests);
      if (sqs.errors > 0) m.addMetric(METRICS.sqsErrors, MetricUnit.Count, sqs.errors);
    },
  };
}
