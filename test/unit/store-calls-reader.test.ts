/**
 * The consumers' store calls as the governor reads them from CloudWatch (mocked: no emulator
 * serves it): once a minute, the metrics' period, not every tick; a failed read is not kept; after
 * a resume, only the minutes since it; in an ordinary minute the failures alone, the calls asked
 * for only when some failed.
 */
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { describe, expect, it, vi } from 'vitest';
import {
  createConsumerStoreCalls,
  DEFAULT_STORE_CALLS_EVERY_MS,
} from '../../functions/adapters/store-health-signals.js';
import { GOVERNOR_CALLS } from '../../functions/core/cost/fleet-bill.js';

/**
 * CloudWatch answering each query: 10 DynamoDB calls a service; `dynamoErrors` failures of them
 * (none published when 0, as the consumer publishes them); SQS calls 4, none failed.
 */
function cloudwatch(answers: Array<'ok' | 'fail'>, dynamoErrors = 0) {
  const send = vi.fn(async (command: { input: { MetricDataQueries?: { Id?: string }[] } }) => {
    if (answers.shift() === 'fail') throw new Error('Throttling');
    const values = (id = ''): number[] => {
      if (id.startsWith('dynamodb_requests')) return [10];
      if (id.startsWith('sqs_requests')) return [4];
      if (id.startsWith('dynamodb_errors') && dynamoErrors > 0) return [dynamoErrors];
      return [];
    };
    return {
      MetricDataResults: (command.input.MetricDataQueries ?? []).map((q) => ({ Id: q.Id, Values: values(q.Id) })),
    };
  });
  return { send } as unknown as CloudWatchClient & { send: typeof send };
}

/** The reader of the consumer's service alone (a fleet without an overflow lane). */
const consumerReader = (cw: CloudWatchClient, clock?: () => number) =>
  createConsumerStoreCalls({
    cloudwatch: cw,
    namespace: 'CaptchaFleet',
    services: ['consumer'],
    ...(clock ? { clock } : {}),
  });

describe("the consumers' store calls", () => {
  it('are asked of CloudWatch once a minute, the answer kept in between', async () => {
    let now = 1_700_000_000_000;
    const cw = cloudwatch(['ok', 'ok']);
    const read = createConsumerStoreCalls({ cloudwatch: cw, namespace: 'CaptchaFleet', clock: () => now });
    const first = await read();
    for (let tick = 1; tick < 6; tick++) {
      now += 10_000;
      expect(await read()).toEqual(first);
    }
    expect(cw.send).toHaveBeenCalledTimes(1);
    now += 10_000; // a minute after the first read
    await read();
    expect(cw.send).toHaveBeenCalledTimes(2);
    expect(first.dynamodb).toEqual({ requests: 20, errors: 0 });
    expect(first.sqs).toEqual({ requests: 8, errors: 0 });
    // Each read asks for the 8 metrics the bill counts (GOVERNOR_CALLS.metricsPerMinute).
    expect(cw.send.mock.calls[0]?.[0].input.MetricDataQueries).toHaveLength(8);
    expect(DEFAULT_STORE_CALLS_EVERY_MS).toBe(60_000);
  });

  it('asks again on the next tick after a failed read (unknown, never kept)', async () => {
    let now = 1_700_000_000_000;
    const cw = cloudwatch(['fail', 'ok']);
    const read = createConsumerStoreCalls({ cloudwatch: cw, namespace: 'CaptchaFleet', clock: () => now });
    expect(await read()).toEqual({});
    now += 10_000;
    expect((await read()).dynamodb).toEqual({ requests: 20, errors: 0 });
    expect(cw.send).toHaveBeenCalledTimes(2);
  });

  it('after a resume reads only from the minute of the resume on, and says nothing before a whole minute has passed', async () => {
    // A minute boundary plus 50 s: the window's end is the boundary.
    let now = 1_700_000_040_000 + 50_000;
    const cw = cloudwatch(['ok', 'ok']);
    const read = createConsumerStoreCalls({ cloudwatch: cw, namespace: 'CaptchaFleet', clock: () => now });
    const resumedAt = now - 5_000;
    expect(await read(resumedAt)).toEqual({});
    expect(cw.send).not.toHaveBeenCalled();
    now += 20_000; // the minute of the resume is whole
    await read(resumedAt);
    const input = cw.send.mock.calls[0]?.[0].input as unknown as { StartTime: Date; EndTime: Date };
    expect(input.StartTime.getTime()).toBe(Math.floor(resumedAt / 60_000) * 60_000);
    expect(input.EndTime.getTime() - input.StartTime.getTime()).toBe(60_000);
    // The whole window again once asked without a resume (a new start is a new read).
    await read();
    expect(cw.send).toHaveBeenCalledTimes(2);
  });

  it('in an ordinary minute asks for the failures alone: none failed, no count', async () => {
    const now = 1_700_000_000_000;
    const cw = cloudwatch(['ok']);
    const read = consumerReader(cw, () => now);
    expect(await read(undefined, 'failures')).toEqual({ dynamodb: { errors: 0 }, sqs: { errors: 0 } });
    expect(cw.send).toHaveBeenCalledTimes(1);
    // The 2 metrics the bill counts (GOVERNOR_CALLS.parkedMetricsPerMinute): each store's errors.
    const ids = cw.send.mock.calls[0]?.[0].input.MetricDataQueries?.map((q) => q.Id);
    expect(ids).toEqual(['dynamodb_errors_0', 'sqs_errors_0']);
    expect(GOVERNOR_CALLS.parkedMetricsPerMinute).toBe(ids?.length);
  });

  it('asks for the calls too when some failed, in a second request of the same minute', async () => {
    const now = 1_700_000_000_000;
    const cw = cloudwatch(['ok', 'ok'], 7);
    const read = consumerReader(cw, () => now);
    const calls = await read(undefined, 'failures');
    expect(calls).toEqual({ dynamodb: { requests: 10, errors: 7 }, sqs: { requests: 4, errors: 0 } });
    expect(cw.send).toHaveBeenCalledTimes(2);
    const second = cw.send.mock.calls[1]?.[0].input.MetricDataQueries?.map((q) => q.Id);
    expect(second).toEqual(['dynamodb_requests_0', 'sqs_requests_0']);
    // Kept for the minute, for either ask: a read with the count answers both.
    expect(await read(undefined, 'calls')).toEqual(calls);
    expect(cw.send).toHaveBeenCalledTimes(2);
  });

  it('a read of the failures alone does not answer a later ask for the calls (a trial began)', async () => {
    let now = 1_700_000_000_000;
    const cw = cloudwatch(['ok', 'ok']);
    const read = consumerReader(cw, () => now);
    await read(undefined, 'failures');
    now += 10_000;
    expect(await read(undefined, 'calls')).toEqual({
      dynamodb: { requests: 10, errors: 0 },
      sqs: { requests: 4, errors: 0 },
    });
    expect(cw.send).toHaveBeenCalledTimes(2);
  });

  it('asks nothing of a tick that may not read them (paused for an outage)', async () => {
    const cw = cloudwatch(['ok']);
    const read = consumerReader(cw);
    expect(await read(undefined, 'none')).toEqual({});
    expect(cw.send).not.toHaveBeenCalled();
  });

  it('a failed second request is an unknown window, never a quiet one', async () => {
    const now = 1_700_000_000_000;
    const cw = cloudwatch(['ok', 'fail'], 3);
    const read = consumerReader(cw, () => now);
    expect(await read(undefined, 'failures')).toEqual({});
  });
});
