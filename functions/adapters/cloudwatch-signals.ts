/**
 * The consumer's metrics through CloudWatch GetMetricData, read once a minute (they lag about
 * a minute): p95 and mean solve time, and sums of submissions, result requests, over-cap,
 * transient, task and account errors and solved tasks over a window. Also the queues' age of the oldest message and
 * sent counts (AWS/SQS), which GetQueueAttributes does not give.
 *
 * The consumer emits through Powertools Metrics, whose only default dimension is
 * `service` (= its serviceName, here `consumer`); metrics with extra dimensions (Failed by
 * ErrorCode, Retried by Reason) are different metric streams and are not read here.
 *
 * A counter without datapoints over a window the query covered is 0 (CloudWatch stores no
 * zeros); a failed query is undefined, never zero.
 */
import {
  GetMetricDataCommand,
  type CloudWatchClient,
  type MetricDataQuery,
  type MetricDataResult,
} from '@aws-sdk/client-cloudwatch';
import type { Clock } from '../core/ports.js';
import { METRICS, SERVICES } from '../core/metric-names.js';
import { DEFAULT_METRICS_WINDOW_MS, type MetricsWindow } from '../core/governor/signals.js';

/** Period of each datapoint, seconds (the consumer's EMF resolution is at least a minute in the stores the governor reads). */
export const METRIC_PERIOD_SECONDS = 60;

const COUNTERS = {
  submissions: METRICS.submissions,
  resultRequests: METRICS.resultRequests,
  overCapAnswers: METRICS.overCapAnswers,
  transientErrors: METRICS.transientErrors,
  taskErrors: METRICS.taskErrors,
  accountErrors: METRICS.accountErrors,
  solved: METRICS.solved,
} as const;

type Counter = keyof typeof COUNTERS;

export interface CloudWatchSignalsOptions {
  cloudwatch: CloudWatchClient;
  namespace: string;
  /** The consumer's service dimension. @default 'consumer' */
  service?: string;
  /** @default 120 000 (two minutes) */
  windowMs?: number;
  clock?: Clock;
  /** Queue names (the AWS/SQS dimension QueueName) for oldest-message age and sent rates. */
  queueNames?: { normal: string; high?: string | undefined };
  onError?: (error: unknown) => void;
}

export interface QueueMetrics {
  oldestAgeSeconds: number | undefined;
  /** Messages sent per second over the window. */
  sentRate: number | undefined;
}

export interface CloudWatchSignals {
  /** The consumer's metric window; undefined when the query failed. */
  read(): Promise<MetricsWindow | undefined>;
  /** Oldest-message age and sent rate per lane; undefined fields when unknown. */
  readQueues(): Promise<{ normal: QueueMetrics; high?: QueueMetrics }>;
  /** The queries `read()` sends (for tests and the docs). */
  consumerQueries(): MetricDataQuery[];
  /** The percentile query, sent apart: some AWS-compatible endpoints (moto) cannot compute percentiles. */
  percentileQueries(): MetricDataQuery[];
}

/** Window [start, end) aligned to whole minutes, ending at the last full minute. */
export function metricWindow(now: number, windowMs: number): { start: Date; end: Date } {
  const end = Math.floor(now / 60_000) * 60_000;
  return { start: new Date(end - windowMs), end: new Date(end) };
}

/** Build the CloudWatch reader. */
export function createCloudWatchSignals(options: CloudWatchSignalsOptions): CloudWatchSignals {
  const clock = options.clock ?? Date.now;
  const windowMs = options.windowMs ?? DEFAULT_METRICS_WINDOW_MS;
  const dimensions = [{ Name: 'service', Value: options.service ?? SERVICES.consumer }];
  const metric = (name: string) => ({ Namespace: options.namespace, MetricName: name, Dimensions: dimensions });

  const percentileQueries = (): MetricDataQuery[] => [
    {
      Id: 'solve_p95',
      MetricStat: { Metric: metric(METRICS.solveDuration), Period: METRIC_PERIOD_SECONDS, Stat: 'p95' },
      ReturnData: true,
    },
  ];
  const consumerQueries = (): MetricDataQuery[] => [
    {
      Id: 'solve_avg',
      MetricStat: { Metric: metric(METRICS.solveDuration), Period: METRIC_PERIOD_SECONDS, Stat: 'Average' },
      ReturnData: true,
    },
    {
      Id: 'solve_n',
      MetricStat: { Metric: metric(METRICS.solveDuration), Period: METRIC_PERIOD_SECONDS, Stat: 'SampleCount' },
      ReturnData: true,
    },
    ...(Object.entries(COUNTERS) as Array<[Counter, string]>).map(([key, name]) => ({
      Id: `sum_${key.toLowerCase()}`,
      MetricStat: { Metric: metric(name), Period: METRIC_PERIOD_SECONDS, Stat: 'Sum' },
      ReturnData: true,
    })),
  ];

  const fetchAll = async (queries: MetricDataQuery[]): Promise<Map<string, MetricDataResult>> => {
    const { start, end } = metricWindow(clock(), windowMs);
    const results = new Map<string, MetricDataResult>();
    let nextToken: string | undefined;
    do {
      const out = await options.cloudwatch.send(
        new GetMetricDataCommand({
          MetricDataQueries: queries,
          StartTime: start,
          EndTime: end,
          ScanBy: 'TimestampDescending',
          NextToken: nextToken,
        }),
      );
      for (const r of out.MetricDataResults ?? []) {
        if (r.Id === undefined) continue;
        const seen = results.get(r.Id);
        if (seen) {
          seen.Values = [...(seen.Values ?? []), ...(r.Values ?? [])];
          seen.Timestamps = [...(seen.Timestamps ?? []), ...(r.Timestamps ?? [])];
        } else results.set(r.Id, { ...r, Values: [...(r.Values ?? [])], Timestamps: [...(r.Timestamps ?? [])] });
      }
      nextToken = out.NextToken;
    } while (nextToken);
    return results;
  };

  const values = (results: Map<string, MetricDataResult>, id: string): number[] =>
    (results.get(id)?.Values ?? []).filter((v) => Number.isFinite(v));
  const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

  return {
    consumerQueries,
    percentileQueries,
    async read() {
      try {
        // p95 only sizes the shortfall warning: when it cannot be read it is unknown, the rest stands.
        const [results, percentiles] = await Promise.all([
          fetchAll(consumerQueries()),
          fetchAll(percentileQueries()).catch((error: unknown) => {
            options.onError?.(error);
            return new Map<string, MetricDataResult>();
          }),
        ]);
        const avgs = values(results, 'solve_avg');
        const counts = values(results, 'solve_n');
        const weight = sum(counts);
        // Mean of per-minute means weighted by their sample counts; without counts, their plain mean.
        const meanSolveMs =
          avgs.length === 0
            ? undefined
            : counts.length === avgs.length && weight > 0
              ? sum(avgs.map((a, i) => a * (counts[i] as number))) / weight
              : sum(avgs) / avgs.length;
        const p95s = values(percentiles, 'solve_p95');
        const counter = (key: Counter) => sum(values(results, `sum_${key.toLowerCase()}`));
        return {
          windowMs,
          submissions: counter('submissions'),
          resultRequests: counter('resultRequests'),
          overCapAnswers: counter('overCapAnswers'),
          transientErrors: counter('transientErrors'),
          taskErrors: counter('taskErrors'),
          accountErrors: counter('accountErrors'),
          solved: counter('solved'),
          meanSolveMs,
          // Per-minute p95s cannot be merged exactly; the worst minute is the conservative reading.
          p95SolveMs: p95s.length === 0 ? undefined : Math.max(...p95s),
        };
      } catch (error) {
        options.onError?.(error);
        return undefined;
      }
    },
    async readQueues() {
      const names = options.queueNames;
      const unknown: QueueMetrics = { oldestAgeSeconds: undefined, sentRate: undefined };
      if (names === undefined) return { normal: unknown };
      const lanes = (names.high ? (['normal', 'high'] as const) : (['normal'] as const)) as ReadonlyArray<
        'normal' | 'high'
      >;
      const queries: MetricDataQuery[] = lanes.flatMap((lane) => {
        const queue = [{ Name: 'QueueName', Value: names[lane] as string }];
        return [
          {
            Id: `age_${lane}`,
            MetricStat: {
              Metric: { Namespace: 'AWS/SQS', MetricName: 'ApproximateAgeOfOldestMessage', Dimensions: queue },
              Period: METRIC_PERIOD_SECONDS,
              Stat: 'Maximum',
            },
            ReturnData: true,
          },
          {
            Id: `sent_${lane}`,
            MetricStat: {
              Metric: { Namespace: 'AWS/SQS', MetricName: 'NumberOfMessagesSent', Dimensions: queue },
              Period: METRIC_PERIOD_SECONDS,
              Stat: 'Sum',
            },
            ReturnData: true,
          },
        ];
      });
      try {
        const results = await fetchAll(queries);
        const one = (lane: 'normal' | 'high'): QueueMetrics => {
          // TimestampDescending: the first value is the latest minute.
          const ages = values(results, `age_${lane}`);
          return { oldestAgeSeconds: ages[0], sentRate: sum(values(results, `sent_${lane}`)) / (windowMs / 1000) };
        };
        return names.high ? { normal: one('normal'), high: one('high') } : { normal: one('normal') };
      } catch (error) {
        options.onError?.(error);
        return names.high ? { normal: unknown, high: unknown } : { normal: unknown };
      }
    },
  };
}
