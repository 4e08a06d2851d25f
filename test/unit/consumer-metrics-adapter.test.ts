import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMetrics, MetricUnit, type EmfDocument } from '../../functions/adapters/metrics.js';

afterEach(() => {
  vi.restoreAllMocks();
});

describe('createMetrics', () => {
  it('writes EMF to stdout without a sink, as Lambda needs', () => {
    const written: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation(((chunk: string) => {
      written.push(String(chunk));
      return true;
    }) as typeof process.stdout.write);
    const metrics = createMetrics({ namespace: 'CaptchaFleet', serviceName: 'consumer' });

    metrics.addMetric('Solved', MetricUnit.Count, 1);
    metrics.publishStoredMetrics();
    metrics.publishStoredMetrics(); // nothing stored: no output, no warning

    expect(written).toHaveLength(1);
    const emf = JSON.parse(written[0] as string) as EmfDocument;
    expect(emf._aws.CloudWatchMetrics[0]?.Namespace).toBe('CaptchaFleet');
    expect(emf.Solved).toBe(1);
    expect(emf.service).toBe('consumer');
  });

  it('hands every document to the sink instead, single metrics included, and writes nothing', () => {
    const stdout = vi.spyOn(process.stdout, 'write').mockImplementation((() => true) as typeof process.stdout.write);
    const documents: EmfDocument[] = [];
    const metrics = createMetrics({
      namespace: 'CaptchaFleet',
      serviceName: 'consumer',
      sink: (d) => documents.push(d),
    });

    const single = metrics.singleMetric();
    single.addDimension('Reason', 'over_cap');
    single.addMetric('Retried', MetricUnit.Count, 1);
    metrics.addMetric('Solved', MetricUnit.Count, 1);
    metrics.publishStoredMetrics();

    expect(stdout).not.toHaveBeenCalled();
    expect(documents).toHaveLength(2);
    expect(documents[0]).toMatchObject({ Retried: 1, Reason: 'over_cap', service: 'consumer' });
    expect(documents[0]?._aws.CloudWatchMetrics[0]?.Dimensions).toEqual([['service', 'Reason']]);
    expect(documents[1]).toMatchObject({ Solved: 1, service: 'consumer' });
    expect(documents[1]).not.toHaveProperty('Reason');
  });
});
