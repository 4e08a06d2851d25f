/**
 * The consumers' store calls as the governor reads them from CloudWatch (mocked: no emulator
 * serves it): once a minute, the metrics' period, not every tick; a failed read is not kept; after
 * a resume, only the minutes since it.
 */
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { describe, expect, it, vi } from 'vitest';
import {
  createConsumerStoreCalls,
  DEFAULT_STORE_CALLS_EVERY_MS,
} from '../../functions/adapters/store-health-signals.js';

function cloudwatch(answers: Array<'ok' | 'fail'>) {
  const send = vi.fn(async (command: { input: { MetricDataQueries?: { Id?: string }[] } }) => {
    if (answers.shift() === 'fail') throw new Error('Throttling');
    return {
      MetricDataResults: (command.input.MetricDataQueries ?? []).map((q) => ({
        Id: q.Id,
        Values: q.Id?.startsWith('dynamodb_requests') ? [10] : [0],
      })),
    };
  });
  return { send } as unknown as CloudWatchClient & { send: typeof send };
}

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
});
