/**
 * A store outage = pause, not attrition, end to end on the emulators: the fault proxy answers
 * HTTP 503 to every DynamoDB request for a window, then to every SQS request for another. The
 * local governor (the Lambda's loop, probing both stores every tick) pauses both pollers
 * (PAUSE_OUTAGE, naming the store) within a few ticks, receives nothing while paused, resumes
 * through the probe after the window, sends nothing to the DLQ, and every task ends solved.
 */
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from '../../functions/core/helpers/time.js';
import type { ReasonCode } from '../../functions/core/governor/types.js';
import type { TickRecord } from '../../functions/governor/loop.js';
import type { FaultWindow } from '../../local/faults/plan.js';
import { type LocalStack, startLocalStack } from '../../local/runtime.js';

interface Seen {
  at: number;
  code: ReasonCode;
  paused: boolean;
  /** When the decision was made: after the tick's probes (`at` is when the tick began to read). */
  decidedAt: number;
  down: string[];
  pollersEnabled: boolean;
  received: number;
}

const TASKS = 24;
const TERMINAL = new Set(['solved', 'failed', 'rejected']);
const TICK_MS = 250;
const OUTAGE_MS = 8_000;
const WINDOWS: FaultWindow[] = [
  { service: 'dynamodb', kind: 'unavailable', startMs: 2_000, durationMs: OUTAGE_MS, rate: 1, status: 503 },
  { service: 'sqs', kind: 'unavailable', startMs: 16_000, durationMs: OUTAGE_MS, rate: 1, status: 503 },
];

let stack: LocalStack;
let armedAt = 0;
const seen: Seen[] = [];
let outcome: { statuses: string[]; dlq: number };

beforeAll(async () => {
  // Prepare
  stack = await startLocalStack({
    config: { planThreads: 6, maxReceiveCount: 5 },
    visibilityTimeoutSeconds: 4,
    receiveWaitSeconds: 1,
    faults: { windows: WINDOWS },
    governor: {
      tickMs: TICK_MS,
      onDecision: (record: TickRecord) => {
        const { normal, high } = stack?.pollers ?? {};
        seen.push({
          at: record.signals.now,
          code: record.decision.reason.code,
          paused: record.decision.paused,
          decidedAt: Date.now(),
          down: (record.signals.dependencies ?? []).filter((d) => d.down === true).map((d) => d.name),
          pollersEnabled: Boolean(normal?.enabled || high?.enabled),
          received: stack?.pollerStats().received ?? 0,
        });
      },
    },
    solver: { seed: 5, medianMs: 1_500, transientErrorRate: 0, unsolvableRate: 0 },
  });
  // The windows count from the proxy's arming, just before the stack returned.
  armedAt = Date.now() - (stack.faults?.elapsedMs() ?? 0);
  // Act: a steady trickle through both windows.
  const ids: string[] = [];
  for (let i = 0; i < TASKS; i++) {
    const task = {
      method: 'turnstile' as const,
      params: { sitekey: `0x4AAAAAAAstore${String(i).padStart(7, '0')}`, pageurl: `https://store.example.com/${i}` },
    };
    // A producer cannot send while SQS is down: it tries again a second later.
    for (;;) {
      try {
        ids.push(await stack.producer.submit(task));
        break;
      } catch {
        await sleep(1_000);
      }
    }
    await sleep(1_000);
  }
  const deadline = Date.now() + 90_000;
  let statuses: string[] = [];
  while (Date.now() < deadline) {
    // Read around the proxy: the watcher is not the fleet.
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
}, 180_000);

afterAll(async () => {
  await stack?.stop({ graceMs: 500 });
});

describe.each(WINDOWS.map((w) => [w.service, w] as const))('a %s outage on the emulators', (service, window) => {
  const start = () => armedAt + window.startMs;
  const end = () => start() + window.durationMs;
  const pauseOf = () => seen.find((s) => s.code === 'PAUSE_OUTAGE' && s.down.includes(service) && s.at >= start());

  it('pauses with PAUSE_OUTAGE within a few ticks of the store going down, and disables the pollers', () => {
    // Assess
    const pause = pauseOf();
    expect(pause).toBeDefined();
    expect(pause?.paused).toBe(true);
    // From the first tick that saw the store down: outageTicks down ticks, and a tick or two to spare.
    const firstDown = seen.find((s) => s.down.includes(service) && s.at >= start());
    const between = seen.filter((s) => s.at >= (firstDown?.at ?? 0) && s.at <= (pause?.at ?? 0));
    expect(between.length).toBeLessThanOrEqual((stack.governor?.config.outageTicks ?? 0) + 2);
    expect((pause?.at ?? 0) - start()).toBeLessThan(window.durationMs);
    const after = seen.find((s) => s.at > (pause?.at ?? 0));
    expect(after?.pollersEnabled).toBe(false);
  });

  it('receives nothing while paused (receive counts stop growing)', () => {
    // Prepare: from one long poll (1 s) after the pause began to the end of that pause.
    const pause = pauseOf();
    const first = seen.indexOf(pause as Seen);
    const end = seen.findIndex((s, i) => i > first && !s.paused);
    const settled = seen.slice(first, end).filter((s) => s.at >= (pause?.at ?? 0) + 1_500);
    // Assess
    expect(settled.length).toBeGreaterThan(0);
    expect(new Set(settled.map((s) => s.received)).size).toBe(1);
    expect(settled.every((s) => !s.pollersEnabled)).toBe(true);
  });

  it('resumes through the probe after the window', () => {
    // Assess
    const first = seen.indexOf(pauseOf() as Seen);
    const resume = seen.slice(first).find((s) => !s.paused);
    expect(resume?.code).toBe('OUTAGE_PROBE');
    // The probe that resumed came after the window: the decision it made, not the tick's start
    // (the tick reads its signals first and probes after; a window can end in between).
    expect(resume?.decidedAt ?? 0).toBeGreaterThanOrEqual(end());
    expect(stack.storeHealth?.stats().outages.some((o) => o.store.includes(service) && o.endMs !== undefined)).toBe(
      true,
    );
  });
});

describe('the run through both outages', () => {
  it('sends nothing to the DLQ and solves every task', () => {
    // Assess
    expect(outcome.dlq).toBe(0);
    expect(outcome.statuses).toEqual(Array.from({ length: TASKS }, () => 'solved'));
  });
});
