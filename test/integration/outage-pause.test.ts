/**
 * Outage = pause, not attrition, end to end on the emulators: the simulator answers HTTP 503 for
 * a window, the local governor (the Lambda's loop) pauses both pollers (PAUSE_OUTAGE), nothing
 * is received while paused, nothing reaches the DLQ, the probe resumes the fleet after the
 * window, and every task ends solved.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { ReasonCode } from '../../functions/core/governor/types.js';
import type { TickRecord } from '../../functions/governor/loop.js';
import { startLocalStack, type LocalStack } from '../../local/runtime.js';
import { sleep } from '../../functions/core/helpers/time.js';

interface Seen {
  at: number;
  code: ReasonCode;
  paused: boolean;
  pollersEnabled: boolean;
  received: number;
}

const TASKS = 16;
const TERMINAL = new Set(['solved', 'failed', 'rejected']);
const OUTAGE_MS = 8_000;

let stack: LocalStack;
const seen: Seen[] = [];
let outcome: { statuses: string[]; dlq: number; outageAnswers: number; outageStart: number };

beforeAll(async () => {
  // Prepare: the simulator's clock starts inside startLocalStack, not before this.
  const simulatorStartedBy = Date.now();
  stack = await startLocalStack({
    config: { planThreads: 4, maxReceiveCount: 5 },
    visibilityTimeoutSeconds: 4,
    receiveWaitSeconds: 1,
    governor: {
      tickMs: 200,
      onDecision: (record: TickRecord) => {
        const { normal, high } = stack.pollers;
        seen.push({
          at: record.signals.now,
          code: record.decision.reason.code,
          paused: record.decision.paused,
          pollersEnabled: normal.enabled || high.enabled,
          received: stack.pollerStats().received,
        });
      },
    },
    solver: { seed: 9, medianMs: 1_500, transientErrorRate: 0, unsolvableRate: 0 },
  });
  const ids = await stack.producer.submit(
    Array.from({ length: TASKS }, (_, i) => ({
      method: 'turnstile' as const,
      params: { sitekey: `0x4AAAAAAAoutage${String(i).padStart(6, '0')}`, pageurl: `https://outage.example.com/${i}` },
    })),
  );
  // Act: an outage from about a second from now, while the tasks are being solved.
  const outageStart = Date.now() + 1_000;
  stack.simulator.update({ outages: [{ startMs: outageStart - simulatorStartedBy, durationMs: OUTAGE_MS }] });
  const deadline = Date.now() + 60_000;
  let statuses: string[] = [];
  while (Date.now() < deadline) {
    const results = await Promise.all(ids.map((id) => stack.producer.get(id, { consistent: true })));
    statuses = results.map((r) => r?.status ?? 'pending');
    if (statuses.every((s) => TERMINAL.has(s))) break;
    await sleep(500);
  }
  const dlq = await stack.clients.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: stack.resources.queueUrls.dlq,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  const attrs = dlq.Attributes ?? {};
  outcome = {
    statuses,
    dlq: Number(attrs.ApproximateNumberOfMessages) + Number(attrs.ApproximateNumberOfMessagesNotVisible),
    outageAnswers: stack.simulator.stats().outageAnswers,
    outageStart,
  };
}, 90_000);

afterAll(async () => {
  await stack?.stop({ graceMs: 500 });
});

describe('a solver outage on the emulators', () => {
  it('happened: the simulator answered 503 inside the window', () => {
    expect(outcome.outageAnswers).toBeGreaterThan(0);
  });

  it('pauses with PAUSE_OUTAGE and disables the pollers', () => {
    // Assess
    const pause = seen.find((s) => s.code === 'PAUSE_OUTAGE');
    expect(pause).toBeDefined();
    expect(pause?.paused).toBe(true);
    expect(pause?.pollersEnabled).toBe(false);
    // Within the window: the outage is found while it lasts.
    expect((pause?.at ?? 0) - outcome.outageStart).toBeLessThan(OUTAGE_MS);
  });

  it('receives nothing while paused (receive counts stop growing)', () => {
    // Prepare: from one long poll (1 s) after the pause began to the end of that pause.
    const first = seen.findIndex((s) => s.code === 'PAUSE_OUTAGE');
    const end = seen.findIndex((s, i) => i > first && !s.paused);
    const settled = seen.slice(first, end).filter((s) => s.at >= (seen[first]?.at ?? 0) + 1_500);
    // Assess
    expect(settled.length).toBeGreaterThan(0);
    expect(new Set(settled.map((s) => s.received)).size).toBe(1);
    expect(settled.every((s) => !s.pollersEnabled)).toBe(true);
  });

  it('resumes through the outage probe after the window', () => {
    // Assess
    const first = seen.findIndex((s) => s.code === 'PAUSE_OUTAGE');
    const resume = seen.slice(first).find((s) => s.code === 'OUTAGE_PROBE');
    expect(resume).toBeDefined();
    expect(resume?.paused).toBe(false);
    expect(resume?.at ?? 0).toBeGreaterThanOrEqual(outcome.outageStart + OUTAGE_MS);
  });

  it('sends nothing to the DLQ and solves every task', () => {
    // Assess
    expect(outcome.dlq).toBe(0);
    expect(outcome.statuses).toEqual(Array.from({ length: TASKS }, () => 'solved'));
  });
});
