/**
 * The report round trip against moto_server (SQS and DynamoDB on one URL) instead of the embedded
 * emulators: the same report function, conditional writes and queues, through the real SDK. moto
 * is not a dependency (a Python tool): without `moto_server` on PATH the test is skipped.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPORT_METRICS } from '../../functions/core/metric-names.js';
import type { TaskResult } from '../../functions/core/results.js';
import { startLocalStack, type LocalStack } from '../../local/runtime.js';
import { HAS_MOTO, type MotoServer, startMotoServer } from '../helpers/moto.js';

describe.skipIf(!HAS_MOTO)('report round trip on moto_server', () => {
  let moto: MotoServer | undefined;
  let stack: LocalStack | undefined;

  beforeAll(async () => {
    moto = await startMotoServer();
    stack = await startLocalStack({
      endpoint: moto.endpoint,
      config: { planThreads: 4, solverPricesUsd: { turnstile: 0.002 } },
      concurrency: 2,
      visibilityTimeoutSeconds: 8,
      solver: { seed: 7, medianMs: 30, transientErrorRate: 0, unsolvableRate: 0, prices: { turnstile: 0.002 } },
    });
  }, 60_000);

  afterAll(async () => {
    await stack?.stop({ graceMs: 500 });
    await moto?.stop();
  });

  it('bad → refund counted on the record and in metrics; a repeat calls nobody', async () => {
    const s = stack as LocalStack;
    const solved = await s.producer.solve(
      {
        id: 'moto-refund',
        method: 'turnstile',
        params: { sitekey: '0x4AAAAAAAmotorf01', pageurl: 'https://m.example.com/' },
      },
      { timeoutMs: 30_000 },
    );
    expect(solved).toMatchObject({ status: 'solved', costUsd: 0.002, costSource: 'configured' });

    const report = await s.producer.report('moto-refund', 'bad', { timeoutMs: 20_000 });

    expect(report).toMatchObject({ state: 'accepted', verdict: 'bad', solverId: solved.solverId, refundUsd: 0.002 });
    const stored = await s.observer.documents.send(
      new GetCommand({ TableName: s.resources.tables.results, Key: { taskId: 'moto-refund' }, ConsistentRead: true }),
    );
    expect((stored.Item as TaskResult).report).toMatchObject({ state: 'accepted', refundUsd: 0.002 });
    expect((stored.Item as TaskResult).report?.token).toBeUndefined();
    expect(s.simulator.stats().reportBad).toBe(1);
    const giveUpAt = Date.now() + 10_000;
    while (s.metrics.total(REPORT_METRICS.refunds).count < 1 && Date.now() < giveUpAt)
      await new Promise((resolve) => setTimeout(resolve, 50));
    expect(s.metrics.total(REPORT_METRICS.refunds).count).toBe(1);

    expect(await s.producer.report('moto-refund', 'bad')).toEqual(report);
    expect(s.simulator.stats().reportBad).toBe(1);
  }, 60_000);
});
