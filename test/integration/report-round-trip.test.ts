/**
 * Reports end to end on the local runtime (fauxqs + dynalite through the real SDK, the solver
 * simulator): a producer's `report()` goes through the reports queue to the report function,
 * which calls the provider that solved the task once with its solver id and marks the record;
 * refunds are counted in metrics; a repeated report calls nobody; refusals carry their reason.
 * Both wire protocols; the cost of each solve on the record and its completion event.
 */
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFleetStatus } from '../../clients/fleet-status.js';
import { ReportRefusedError } from '../../clients/producer-client.js';
import { renderSpend } from '../../bin/commands/status.js';
import type { CompletionEvent } from '../../functions/core/events.js';
import { REPORT_METRICS, METRICS } from '../../functions/core/metric-names.js';
import type { TaskResult } from '../../functions/core/results.js';
import { startLocalStack, type LocalStack } from '../../local/runtime.js';

const sim = { seed: 21, medianMs: 30, transientErrorRate: 0, unsolvableRate: 0 };

async function record(stack: LocalStack, taskId: string): Promise<TaskResult> {
  const out = await stack.observer.documents.send(
    new GetCommand({ TableName: stack.resources.tables.results, Key: { taskId }, ConsistentRead: true }),
  );
  return out.Item as TaskResult;
}

async function until(check: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const giveUpAt = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > giveUpAt) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('reports over in.php / res.php (configured prices)', () => {
  let stack: LocalStack;
  beforeAll(async () => {
    stack = await startLocalStack({
      config: { planThreads: 4, solverPricesUsd: { turnstile: 0.0025 } },
      concurrency: 2,
      visibilityTimeoutSeconds: 8,
      // The provider's own prices, as the operator configured them.
      solver: { ...sim, prices: { turnstile: 0.0025 } },
    });
  }, 30_000);
  afterAll(async () => {
    await stack?.stop({ graceMs: 500 });
  });

  it('bad → refund: the provider is called once, the record marked, the refund counted; a repeat calls nobody', async () => {
    const heard: CompletionEvent[] = [];
    const unsubscribe = stack.events.subscribe((event) => heard.push(event));
    const solved = await stack.producer.solve(
      {
        id: 'refund-1',
        method: 'turnstile',
        params: { sitekey: '0x4AAAAAAArefund01', pageurl: 'https://r.example.com/' },
      },
      { timeoutMs: 15_000 },
    );
    unsubscribe();
    expect(solved).toMatchObject({ status: 'solved', costUsd: 0.0025, costSource: 'configured', provider: 'primary' });
    expect(heard.find((event) => event.id === 'refund-1')).toMatchObject({ costUsd: 0.0025, costSource: 'configured' });
    expect(stack.metrics.sum(METRICS.spendUsd, 60_000, undefined, { Method: 'turnstile' })).toBeCloseTo(0.0025);
    const balanceBefore = stack.simulator.stats().balance;

    const report = await stack.producer.report('refund-1', 'bad', { timeoutMs: 10_000 });

    expect(report).toMatchObject({
      verdict: 'bad',
      state: 'accepted',
      provider: 'primary',
      solverId: solved.solverId,
      refundUsd: 0.0025,
    });
    expect(report.token).toBeUndefined();
    expect((await record(stack, 'refund-1')).report).toMatchObject({ state: 'accepted', verdict: 'bad' });
    expect(stack.simulator.stats()).toMatchObject({ reportBad: 1, reportsRefused: 0 });
    // The simulator credits a refunded solve back, as the providers do on review.
    expect(stack.simulator.stats().balance).toBeCloseTo(balanceBefore + 0.0025, 6);
    await until(() => stack.metrics.total(REPORT_METRICS.refunds).count === 1);
    expect(stack.metrics.total(REPORT_METRICS.refundsUsd).sum).toBeCloseTo(0.0025);

    // The same report again, from the client: answered from the record.
    expect(await stack.producer.report('refund-1', 'bad')).toEqual(report);
    // And as a raw message from any language: the function answers from the record too.
    await stack.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: stack.resources.reportQueueUrls.reports,
        MessageBody: JSON.stringify({ taskId: 'refund-1', verdict: 'bad' }),
      }),
    );
    await until(() => stack.metrics.total(REPORT_METRICS.reportsRepeated).count === 1);
    expect(stack.simulator.stats()).toMatchObject({ reportBad: 1, reportsRefused: 0 });
    expect(stack.metrics.total(REPORT_METRICS.refunds).count).toBe(1);

    // The other verdict on a settled report: refused, the first report stands.
    const otherWay = await stack.producer.report('refund-1', 'good').catch((error: unknown) => error);
    expect(otherWay).toBeInstanceOf(ReportRefusedError);
    expect(otherWay).toMatchObject({ reason: 'ALREADY_REPORTED' });
    expect((await record(stack, 'refund-1')).report?.verdict).toBe('bad');
  }, 40_000);

  it('refuses with a typed reason: unknown task, and a report the provider no longer takes (recorded)', async () => {
    const unknown = await stack.producer.report('never-sent-21', 'bad').catch((error: unknown) => error);
    expect(unknown).toMatchObject({ name: 'ReportRefusedError', reason: 'NOT_FOUND' });

    const late0 = await stack.producer.solve(
      {
        id: 'refund-late',
        method: 'turnstile',
        params: { sitekey: '0x4AAAAAAArefund02', pageurl: 'https://r.example.com/late' },
      },
      { timeoutMs: 15_000 },
    );
    expect(late0).toMatchObject({ status: 'solved' });
    // Past the provider's report window: it answers ERROR_WRONG_CAPTCHA_ID.
    stack.simulator.update({ reportWindowMs: 0 });
    await new Promise((resolve) => setTimeout(resolve, 20));
    const late = await stack.producer.report('refund-late', 'bad', { timeoutMs: 10_000 }).catch((e: unknown) => e);
    stack.simulator.update({ reportWindowMs: undefined });
    expect(late).toMatchObject({
      name: 'ReportRefusedError',
      reason: 'PROVIDER_REFUSED',
      code: 'ERROR_WRONG_CAPTCHA_ID',
    });
    expect((await record(stack, 'refund-late')).report).toMatchObject({
      state: 'refused',
      reason: 'PROVIDER_REFUSED',
      code: 'ERROR_WRONG_CAPTCHA_ID',
    });
    await until(() => stack.metrics.total(REPORT_METRICS.reportsRefused, { Reason: 'PROVIDER_REFUSED' }).count === 1);
    // Asked again: the refusal stands, the provider is not asked again.
    const refusedBefore = stack.simulator.stats().reportsRefused;
    const again = await stack.producer.report('refund-late', 'bad').catch((e: unknown) => e);
    expect(again).toMatchObject({ reason: 'PROVIDER_REFUSED' });
    expect(stack.simulator.stats().reportsRefused).toBe(refusedBefore);
  }, 40_000);

  it("status shows the last hour's spend, per provider and method, from the records", async () => {
    const status = await readFleetStatus({
      sqs: stack.observer.sqs,
      documents: stack.observer.documents,
      queueUrls: stack.resources.queueUrls,
      tables: stack.resources.tables,
    });
    // Two turnstile solves at the configured $0.0025 (refund-1, refund-late).
    expect(status.spend).toMatchObject({ windowMinutes: 60, source: 'results-table', unpriced: 0 });
    expect(status.spend.totalUsd).toBeCloseTo(0.005, 9);
    expect(status.spend.byProvider.primary).toBeCloseTo(0.005, 9);
    expect(status.spend.byMethod.turnstile).toBeCloseTo(0.005, 9);
    expect(renderSpend(status.spend)).toBe(
      'spend:    $0.0050 in the last 60 min (plan $0.0050) — turnstile $0.0050  (results-table)',
    );
  });

  it('status names where the unpriced solves of each provider get their price', () => {
    const spend = {
      windowMinutes: 60,
      totalUsd: undefined,
      byProvider: {},
      byMethod: {},
      unpriced: 77,
      unpricedByProvider: { primary: 46, overflow: 31 },
      source: 'results-table' as const,
    };
    // Before, solverPricesUsd was named for all 77, though it prices none of the overflow provider's.
    expect(renderSpend(spend)).toBe(
      "spend:    — no price known for the 77 solve(s) of the last 60 min (configure solverPricesUsd for the plan's 46, overflow.pricesUsd for the overflow provider's 31)  (results-table)",
    );
    expect(renderSpend({ ...spend, unpriced: 31, unpricedByProvider: { overflow: 31 } })).toContain(
      "(configure overflow.pricesUsd for the overflow provider's 31)",
    );
  });

  it('a malformed report goes to the reports DLQ with its reason', async () => {
    await stack.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: stack.resources.reportQueueUrls.reports,
        MessageBody: JSON.stringify({ taskId: 'refund-1', verdict: 'wrong', refund: true }),
      }),
    );
    let reason: string | undefined;
    await until(async () => {
      const out = await stack.observer.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: stack.resources.reportQueueUrls.dlq,
          MessageAttributeNames: ['All'],
          WaitTimeSeconds: 1,
        }),
      );
      reason = out.Messages?.[0]?.MessageAttributes?.reason?.StringValue;
      return reason !== undefined;
    });
    expect(reason).toBe('SCHEMA_VIOLATION');
    expect(stack.simulator.stats().reportBad).toBe(1);
  }, 20_000);
});

describe('reports over the JSON task API (the provider prices each solve)', () => {
  let stack: LocalStack;
  beforeAll(async () => {
    stack = await startLocalStack({
      config: { planThreads: 4, dialect: '2captcha', solverProtocol: 'create-task' },
      concurrency: 2,
      visibilityTimeoutSeconds: 8,
      solver: { ...sim, prices: { turnstile: 0.00145 } },
    });
  }, 30_000);
  afterAll(async () => {
    await stack?.stop({ graceMs: 500 });
  });

  it("records the provider's cost and refunds a bad answer through reportIncorrect", async () => {
    const solved = await stack.producer.solve(
      {
        id: 'json-refund',
        method: 'turnstile',
        params: { sitekey: '0x4AAAAAAAjsonrf01', pageurl: 'https://j.example.com/' },
      },
      { timeoutMs: 15_000 },
    );
    expect(solved).toMatchObject({ status: 'solved', costUsd: 0.00145, costSource: 'provider' });
    const report = await stack.producer.report('json-refund', 'bad', { timeoutMs: 10_000 });
    expect(report).toMatchObject({ state: 'accepted', refundUsd: 0.00145, solverId: solved.solverId });
    expect(stack.simulator.stats()).toMatchObject({ reportBad: 1 });
    await until(() => stack.metrics.total(REPORT_METRICS.refunds).count === 1);
  }, 40_000);
});
