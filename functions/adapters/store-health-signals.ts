/**
 * The store-health signal the governor reads each tick (functions/core/store-health.ts judges
 * it, the availability stage acts on it): its own probe of each store — one GetItem of a key nobody writes on the results table,
 * one GetQueueAttributes on the normal lane, each bounded in time — and the consumers' calls to
 * the stores and their failures over the metric window (their `DynamoRequests` / `DynamoErrors` /
 * `SqsRequests` / `SqsErrors`, both lanes' services summed; the failures alone in an ordinary
 * minute, the calls too when some failed or a store trial needs them; nothing while paused for
 * an outage). The consumers' figures travel as EMF through CloudWatch Logs, so they arrive
 * whichever store is down; the probe needs no consumer running (an idle fleet, or one the
 * governor paused).
 */
import { GetMetricDataCommand, type CloudWatchClient, type MetricDataQuery } from '@aws-sdk/client-cloudwatch';
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { GetCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { STORE_PROBE_KEY } from '../core/deployment.js';
import { METRICS, SERVICES } from '../core/metric-names.js';
import type { Clock, StoreName } from '../core/ports.js';
import type { StoreCallsWant, StoreProbe, StoreSample } from '../core/store-health.js';
import { DEFAULT_METRICS_WINDOW_MS } from '../core/governor/signals.js';
import { METRIC_PERIOD_SECONDS, metricWindow } from './cloudwatch-signals.js';
import { storeFailureKind } from './store-failure.js';

/** A probe that takes longer than this counts as unavailable, ms. */
export const STORE_PROBE_TIMEOUT_MS = 2_000;

export interface StoreProbeOptions {
  documents: DynamoDBDocumentClient;
  sqs: SQSClient;
  /** The results table (the probe reads STORE_PROBE_KEY, which nothing writes). */
  resultsTable: string;
  /** The normal lane's URL. */
  queueUrl: string;
  timeoutMs?: number;
  clock?: Clock;
}

/** The governor's direct read of each store. */
export type StoreProber = () => Promise<Record<StoreName, StoreProbe>>;

/** Build the prober. Never throws: a failed read is the probe's answer. */
export function createStoreProber(options: StoreProbeOptions): StoreProber {
  const clock = options.clock ?? Date.now;
  const timeoutMs = options.timeoutMs ?? STORE_PROBE_TIMEOUT_MS;
  const timed = async (read: (signal: AbortSignal) => Promise<unknown>): Promise<StoreProbe> => {
    const started = clock();
    try {
      await read(AbortSignal.timeout(timeoutMs));
      return { ok: true, latencyMs: clock() - started };
    } catch (error) {
      const kind = storeFailureKind(error);
      const name = error instanceof Error ? error.name : 'Error';
      return { ok: false, kind: kind === 'throttled' ? 'throttled' : 'unavailable', detail: name };
    }
  };
  return async () => {
    const [dynamodb, sqs] = await Promise.all([
      timed((abortSignal) =>
        options.documents.send(
          new GetCommand({ TableName: options.resultsTable, Key: { taskId: STORE_PROBE_KEY }, ConsistentRead: true }),
          { abortSignal },
        ),
      ),
      timed((abortSignal) =>
        options.sqs.send(
          new GetQueueAttributesCommand({
            QueueUrl: options.queueUrl,
            AttributeNames: ['ApproximateNumberOfMessages'],
          }),
          { abortSignal },
        ),
      ),
    ]);
    return { dynamodb, sqs };
  };
}

/**
 * The consumers' store calls over the window, per store; undefined when unknown (a failed read,
 * never zero). `requests` absent: not asked for (none failed, and no trial needed the count).
 */
export type ConsumerStoreCalls = Partial<Record<StoreName, { requests?: number; errors: number }>>;

const CALL_METRICS: Record<StoreName, { requests: string; errors: string }> = {
  dynamodb: { requests: METRICS.dynamoRequests, errors: METRICS.dynamoErrors },
  sqs: { requests: METRICS.sqsRequests, errors: METRICS.sqsErrors },
};

export interface ConsumerStoreCallsOptions {
  cloudwatch: Pick<CloudWatchClient, 'send'>;
  namespace: string;
  /** @default both consumers' services */
  services?: readonly string[];
  /** @default two minutes */
  windowMs?: number;
  /**
   * How often CloudWatch is asked, ms: an answer is used until it is this old. The metrics have a
   * one-minute period, so a read every tick (10 s) mostly returns the same datapoints and bills 8
   * metrics a tick; the governor's own probe of each store runs every tick regardless. A failed
   * read is not kept (the next tick asks again). @default 60 000, the metric window's cadence
   */
  everyMs?: number;
  clock?: Clock;
}

/**
 * The GetMetricData queries (Sum per service and metric) of `parts` (both by default): what the
 * governor's role needs `cloudwatch:GetMetricData` for.
 */
export function consumerStoreCallQueries(
  namespace: string,
  services: readonly string[],
  parts: readonly ('requests' | 'errors')[] = ['requests', 'errors'],
): MetricDataQuery[] {
  const queries: MetricDataQuery[] = [];
  for (const [s, service] of services.entries())
    for (const store of Object.keys(CALL_METRICS) as StoreName[])
      for (const part of parts)
        queries.push({
          Id: `${store}_${part}_${s}`,
          MetricStat: {
            Metric: {
              Namespace: namespace,
              MetricName: CALL_METRICS[store][part],
              Dimensions: [{ Name: 'service', Value: service }],
            },
            Period: METRIC_PERIOD_SECONDS,
            Stat: 'Sum',
          },
          ReturnData: true,
        });
  return queries;
}

/**
 * Read the consumers' store calls from CloudWatch: over the window, or only from the minute of
 * `since` on when that is later (after a resume, the calls before it are old news). A read is
 * kept `everyMs` for the same start (a read with the calls answers a later one for failures).
 */
export function createConsumerStoreCalls(
  options: ConsumerStoreCallsOptions,
): (since?: number, want?: StoreCallsWant) => Promise<ConsumerStoreCalls> {
  const services = options.services ?? [SERVICES.consumer, SERVICES.overflowConsumer];
  const clock = options.clock ?? Date.now;
  const windowMs = options.windowMs ?? DEFAULT_METRICS_WINDOW_MS;
  const everyMs = options.everyMs ?? DEFAULT_STORE_CALLS_EVERY_MS;
  let kept: { at: number; since: number | undefined; want: StoreCallsWant; calls: ConsumerStoreCalls } | undefined;
  return async (since, want = 'calls') => {
    if (want === 'none') return {};
    const now = clock();
    if (
      kept !== undefined &&
      kept.since === since &&
      (kept.want === want || kept.want === 'calls') &&
      now - kept.at < everyMs
    )
      return kept.calls;
    const window = metricWindow(now, windowMs);
    const end = window.end;
    // Datapoints are whole minutes: the minute of the resume holds its first calls (and, paused
    // before them, none older).
    const from = since === undefined ? 0 : Math.floor(since / 60_000) * 60_000;
    const start = new Date(Math.max(window.start.getTime(), from));
    // No whole minute since the resume yet: nothing to say (unknown, never zero calls).
    if (start.getTime() >= end.getTime()) return {};
    const ask = async (parts: readonly ('requests' | 'errors')[]) => {
      const answer = await options.cloudwatch.send(
        new GetMetricDataCommand({
          StartTime: start,
          EndTime: end,
          MetricDataQueries: consumerStoreCallQueries(options.namespace, services, parts),
        }),
      );
      return answer.MetricDataResults ?? [];
    };
    const stores = Object.keys(CALL_METRICS) as StoreName[];
    let counted = want === 'calls';
    let results: { Id?: string; Values?: number[] }[];
    try {
      results = await ask(counted ? ['requests', 'errors'] : ['errors']);
      if (!counted && stores.some((store) => sumOf(results, `${store}_errors_`) > 0)) {
        results = [...results, ...(await ask(['requests']))];
        counted = true;
      }
    } catch {
      return {};
    }
    const calls: ConsumerStoreCalls = {};
    for (const store of stores)
      calls[store] = {
        ...(counted ? { requests: sumOf(results, `${store}_requests_`) } : {}),
        errors: sumOf(results, `${store}_errors_`),
      };
    kept = { at: now, since, want: counted ? 'calls' : 'failures', calls };
    return calls;
  };
}

/** The sum of every value of the results whose id starts with `prefix`. */
function sumOf(results: readonly { Id?: string; Values?: number[] }[], prefix: string): number {
  return results
    .filter((r) => r.Id?.startsWith(prefix))
    .reduce((total, r) => total + (r.Values ?? []).reduce((a, b) => a + b, 0), 0);
}

/** The consumers' store calls are read from CloudWatch at most this often, ms (the metric window's cadence). */
export const DEFAULT_STORE_CALLS_EVERY_MS = 60_000;

/**
 * What the governor loop reads each tick: both stores' samples (the consumers' calls since `since`
 * when given; `want`, see StoreCallsWant, default `calls`). Never throws.
 */
export interface StoreSamplesReader {
  read(since?: number, want?: StoreCallsWant): Promise<StoreSample[]>;
}

/** The probe and the consumers' window, read together each tick. */
export function createStoreSamplesReader(
  prober: StoreProber,
  consumerCalls: (since?: number, want?: StoreCallsWant) => Promise<ConsumerStoreCalls>,
): StoreSamplesReader {
  return {
    async read(since, want) {
      const [probe, calls] = await Promise.all([
        prober().catch(() => undefined),
        consumerCalls(since, want).catch((): ConsumerStoreCalls => ({})),
      ]);
      return storeSamplesOf(probe, calls);
    },
  };
}

/** One tick's samples: the probe and the consumers' window together. */
export function storeSamplesOf(
  probe: Record<StoreName, StoreProbe> | undefined,
  calls: ConsumerStoreCalls,
): StoreSample[] {
  return (['dynamodb', 'sqs'] as const).map((store) => ({
    store,
    ...(probe !== undefined ? { probe: probe[store] } : {}),
    ...(calls[store] !== undefined ? { consumers: calls[store] } : {}),
  }));
}
