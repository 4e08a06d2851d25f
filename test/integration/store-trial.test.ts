/**
 * A store that answers the governor's probe while the consumers' calls to it keep failing (here:
 * every write to the results table answered 503, its reads and every other table fine), end to
 * end on the emulators. The local governor (the Lambda's loop, tick 250 ms) pauses on the
 * consumers' failures; each resume is a trial at the minimum ceiling that the consumers' own
 * calls since it fail, so the fleet pauses again and the next trial waits longer: it never runs
 * above the minimum while the writes fail (before the trial it resumed at its whole ceiling and
 * flapped). Once the writes work the trial passes and the fleet is back at its ceiling; every task
 * ends solved, none in the DLQ.
 *
 * Judged on the governor's decisions, not on wall-clock times, so a slow machine changes how
 * many trials there are, not the verdict.
 */
import { GetQueueAttributesCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { minimumCeiling } from '../../functions/core/governor/capacity.js';
import { sleep } from '../../functions/core/helpers/time.js';
import type { TickRecord } from '../../functions/governor/loop.js';
import { type LocalStack, startLocalStack } from '../../local/runtime.js';

const TASKS = 40;
const TICK_MS = 250;
const WRITES_FAIL = { startMs: 1_000, durationMs: 12_000 };
const TERMINAL = new Set(['solved', 'failed', 'rejected']);

interface Seen {
  at: number;
  code: string;
  message: string;
  paused: boolean;
  total: number;
}

let stack: LocalStack;
let armedAt = 0;
const seen: Seen[] = [];
let outcome: { statuses: string[]; dlq: number };

beforeAll(async () => {
  // Prepare: the results table's writes fail for a window; its reads (the probe) do not.
  stack = await startLocalStack({
    config: { planThreads: 8, maxReceiveCount: 5 },
    visibilityTimeoutSeconds: 4,
    receiveWaitSeconds: 1,
    faults: {
      windows: [
        {
          service: 'dynamodb',
          kind: 'unavailable',
          status: 503,
          rate: 1,
          ...WRITES_FAIL,
          operations: ['PutItem', 'UpdateItem'],
          bodyIncludes: '"TableName":"captcha-fleet-results"',
        },
      ],
    },
    governor: {
      tickMs: TICK_MS,
      onDecision: (record: TickRecord) => {
        const d = record.decision;
        seen.push({
          at: record.signals.now,
          code: d.reason.code,
          message: d.reason.message,
          paused: d.paused,
          total: (d.enabled.normal ? d.ceilings.normal : 0) + (d.enabled.high ? d.ceilings.high : 0),
        });
      },
    },
    solver: { seed: 7, medianMs: 300, transientErrorRate: 0, unsolvableRate: 0 },
  });
  armedAt = Date.now() - (stack.faults?.elapsedMs() ?? 0);
  // Act: a burst as the writes start failing (the consumers' calls then say so), then a trickle.
  const ids: string[] = [];
  const send = async (i: number) => {
    const id = `trial-${i}`;
    const task = {
      id,
      method: 'turnstile',
      params: { sitekey: `0x4AAAAAAAtrial${String(i).padStart(7, '0')}`, pageurl: `https://trial.example.com/${i}` },
    };
    // Straight to SQS (around the proxy): the producer's id check would read the table meanwhile.
    await stack.observer.sqs.send(
      new SendMessageCommand({
        QueueUrl: stack.resources.queueUrls.normal,
        MessageBody: JSON.stringify({ ...task, submittedAt: Date.now() }),
      }),
    );
    ids.push(id);
  };
  await sleep(Math.max(0, armedAt + WRITES_FAIL.startMs - Date.now()));
  for (let i = 0; i < TASKS / 2; i++) await send(i);
  for (let i = TASKS / 2; i < TASKS; i++) {
    await send(i);
    await sleep(500);
  }
  const deadline = Date.now() + 120_000;
  let statuses: string[] = [];
  while (Date.now() < deadline) {
    const records = await Promise.all(
      ids.map((taskId) =>
        stack.observer.documents.send(
          new GetCommand({ TableName: stack.resources.tables.results, Key: { taskId }, ConsistentRead: true }),
        ),
      ),
    );
    statuses = records.map((r) => String(r.Item?.status ?? 'pending'));
    if (statuses.every((s) => TERMINAL.has(s))) break;
    await sleep(500);
  }
  const dlq = await stack.observer.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: stack.resources.queueUrls.dlq,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  const attrs = dlq.Attributes ?? {};
  outcome = {
    statuses,
    dlq: Number(attrs.ApproximateNumberOfMessages) + Number(attrs.ApproximateNumberOfMessagesNotVisible),
  };
}, 240_000);

afterAll(async () => {
  await stack?.stop({ graceMs: 500 });
});

const windowEnd = () => armedAt + WRITES_FAIL.startMs + WRITES_FAIL.durationMs;

describe('a results table whose writes fail while its probe answers', () => {
  it('pauses on the consumers’ failures', () => {
    const pause = seen.find((s) => s.code === 'PAUSE_OUTAGE' && s.message.includes('dynamodb'));
    expect(pause?.paused).toBe(true);
    expect(pause?.at ?? Number.POSITIVE_INFINITY).toBeLessThan(windowEnd());
  });

  it('never runs above the minimum ceiling while the writes fail, once it has paused: each resume is a trial that fails and pauses again', () => {
    const first = seen.findIndex((s) => s.code === 'PAUSE_OUTAGE');
    const during = seen.slice(first).filter((s) => s.at < windowEnd());
    const minimum = minimumCeiling(stack.governor?.config ?? ({} as never));
    expect(Math.max(...during.map((s) => s.total))).toBeLessThanOrEqual(minimum);
    // A trial the calls failed pauses again (the last trial may still be running when the writes come back).
    const trials = during.filter((s) => s.message.startsWith('Resumed on trial'));
    const failed = during.filter((s) => s.message.startsWith('Paused again: the trial after the outage failed'));
    expect(failed.length).toBeGreaterThanOrEqual(Math.min(1, trials.length - 1));
  });

  it('passes a trial once the writes work, back at its ceiling, and ends every task solved with nothing in the DLQ', () => {
    const passed = seen.find((s) => s.message.startsWith('Trial passed'));
    expect(passed).toBeDefined();
    expect(passed?.total ?? 0).toBeGreaterThan(minimumCeiling(stack.governor?.config ?? ({} as never)));
    expect(outcome.dlq).toBe(0);
    expect(outcome.statuses).toEqual(Array.from({ length: TASKS }, () => 'solved'));
  });
});
