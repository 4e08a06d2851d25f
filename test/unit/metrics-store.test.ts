import { describe, expect, it } from 'vitest';
import { createMetrics, MetricResolution, MetricUnit, type EmfDocument } from '../../functions/adapters/metrics.js';
import { datapointsOf, MetricsStore } from '../../local/metrics-store.js';

const point = (name: string, value: number, timestamp: number, dimensions?: Record<string, string>) => ({
  name,
  value,
  timestamp,
  ...(dimensions ? { dimensions } : {}),
});

describe('MetricsStore windows', () => {
  it('sums, counts and averages only the datapoints inside (now - window, now]', () => {
    // Prepare
    const store = new MetricsStore({ clock: () => 10_000 });
    store.record(point('Solved', 1, 1_000));
    store.record(point('Solved', 2, 5_000));
    store.record(point('Solved', 4, 9_000));
    store.record(point('Solved', 8, 10_000));

    // Act / Assess
    expect(store.sum('Solved', 5_000, 10_000)).toBe(4 + 8); // 5_000 is on the open edge
    expect(store.count('Solved', 5_000, 10_000)).toBe(2);
    expect(store.mean('Solved', 10_000, 10_000)).toBe((1 + 2 + 4 + 8) / 4);
    expect(store.sum('Solved', 2_000)).toBe(12); // `now` defaults to the clock
    expect(store.sum('Solved', 1_000, 8_000)).toBe(0);
  });

  it('answers undefined, not zero, for a mean or percentile with no data', () => {
    const store = new MetricsStore();
    expect(store.mean('SolveDuration', 60_000)).toBeUndefined();
    expect(store.percentile('SolveDuration', 95, 60_000)).toBeUndefined();
    expect(store.sum('SolveDuration', 60_000)).toBe(0);
  });

  it('computes nearest-rank percentiles of the window', () => {
    const store = new MetricsStore({ clock: () => 1_000 });
    for (let value = 1; value <= 100; value++) store.record(point('SolveDuration', value, 500));
    store.record(point('SolveDuration', 10_000, 100)); // outside a 600 ms window

    expect(store.percentile('SolveDuration', 95, 600)).toBe(95);
    expect(store.percentile('SolveDuration', 50, 600)).toBe(50);
    expect(store.percentile('SolveDuration', 100, 600)).toBe(100);
    expect(store.percentile('SolveDuration', 0, 600)).toBe(1);
    expect(store.percentile('SolveDuration', 100, 1_000)).toBe(10_000);
    expect(() => store.percentile('SolveDuration', 101, 600)).toThrow(RangeError);
  });

  it('filters by dimensions', () => {
    const store = new MetricsStore({ clock: () => 100 });
    store.record(point('Retried', 1, 50, { service: 'consumer', Reason: 'over_cap' }));
    store.record(point('Retried', 1, 60, { service: 'consumer', Reason: 'over_cap' }));
    store.record(point('Retried', 1, 70, { service: 'consumer', Reason: 'transient' }));

    expect(store.sum('Retried', 100, 100, { Reason: 'over_cap' })).toBe(2);
    expect(store.sum('Retried', 100, 100, { Reason: 'transient', service: 'consumer' })).toBe(1);
    expect(store.sum('Retried', 100, 100, { Reason: 'account' })).toBe(0);
    expect(store.sum('Retried', 100, 100)).toBe(3);
  });

  it('keeps totals past the retention horizon while dropping old datapoints', () => {
    let now = 0;
    const store = new MetricsStore({ retentionMs: 1_000, clock: () => now });
    store.record(point('Solved', 1, 0, { Reason: 'x' }));
    now = 5_000;
    store.record(point('Solved', 3, 5_000, { Reason: 'y' }));

    expect(store.sum('Solved', 10_000)).toBe(3); // the first datapoint was pruned
    expect(store.total('Solved')).toEqual({ count: 2, sum: 4 });
    expect(store.total('Solved', { Reason: 'x' })).toEqual({ count: 1, sum: 1 });
    expect(store.totals()).toEqual({ Solved: { count: 2, sum: 4 } });
    expect(() => store.total('Solved', { Reason: 'x', service: 'consumer' })).toThrow(RangeError);
  });
});

describe('MetricsStore fed by Powertools EMF', () => {
  it('reads every value of high-resolution arrays and the dimensions of single metrics', () => {
    // Prepare: real Powertools documents through the capturing sink
    const documents: EmfDocument[] = [];
    const store = new MetricsStore();
    const metrics = createMetrics({
      namespace: 'Test',
      serviceName: 'consumer',
      sink: (document) => {
        documents.push(document);
        store.ingest(document);
      },
    });

    // Act
    for (const ms of [120, 80, 300])
      metrics.addMetric('SolveDuration', MetricUnit.Milliseconds, ms, MetricResolution.High);
    metrics.addMetric('Solved', MetricUnit.Count, 1);
    metrics.addMetric('Solved', MetricUnit.Count, 1);
    const single = metrics.singleMetric();
    single.addDimension('ErrorCode', 'ERROR_CAPTCHA_UNSOLVABLE');
    single.addMetric('Failed', MetricUnit.Count, 1);
    metrics.publishStoredMetrics();

    // Assess
    expect(documents).toHaveLength(2);
    const now = Date.now();
    expect(store.count('SolveDuration', 60_000, now)).toBe(3);
    expect(store.percentile('SolveDuration', 95, 60_000, now)).toBe(300);
    expect(store.sum('Solved', 60_000, now, { service: 'consumer' })).toBe(2);
    expect(store.sum('Failed', 60_000, now, { ErrorCode: 'ERROR_CAPTCHA_UNSOLVABLE' })).toBe(1);
    const durationDefinition = documents[1]?._aws.CloudWatchMetrics[0]?.Metrics.find((m) => m.Name === 'SolveDuration');
    expect(durationDefinition?.StorageResolution).toBe(1);
  });

  it('skips non-numeric values', () => {
    const document = {
      _aws: {
        Timestamp: 1,
        CloudWatchMetrics: [{ Namespace: 'N', Dimensions: [['service']], Metrics: [{ Name: 'A', Unit: 'Count' }] }],
      },
      service: 'consumer',
      A: ['x', 2, Number.NaN],
    } as unknown as EmfDocument;
    expect(datapointsOf(document)).toEqual([
      { name: 'A', value: 2, timestamp: 1, unit: 'Count', dimensions: { service: 'consumer' } },
    ]);
  });
});
