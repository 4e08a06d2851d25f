/**
 * The local runtime wires completion events end to end (consumer → in-process stream → the
 * producer's `wait`), and keeps the governor's state in the local governor table, as in AWS.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { GOVERNOR_STATE_ID } from '../../functions/core/deployment.js';
import type { CompletionEvent } from '../../functions/core/events.js';
import { startLocalStack, type LocalStack } from '../../local/runtime.js';

let stack: LocalStack;

beforeAll(async () => {
  stack = await startLocalStack({
    config: { planThreads: 4 },
    visibilityTimeoutSeconds: 4,
    receiveWaitSeconds: 1,
    governor: { tickMs: 200 },
    solver: { seed: 5, medianMs: 30, transientErrorRate: 0, unsolvableRate: 0 },
  });
}, 30_000);

afterAll(async () => {
  await stack?.stop({ graceMs: 500 });
});

describe('local runtime: events and governor state', () => {
  it("the producer's wait ends on the consumer's completion event, with the token's freshness", async () => {
    const heard: CompletionEvent[] = [];
    const unsubscribe = stack.events.subscribe((event) => heard.push(event));
    const result = await stack.producer.solve(
      {
        method: 'turnstile',
        priority: 'high',
        params: { sitekey: '0x4AAAAAAAlocalEvents1', pageurl: 'https://events.example.com/a' },
      },
      { timeoutMs: 15_000, eventFallbackMs: 10_000 },
    );
    unsubscribe();
    expect(result).toMatchObject({ status: 'solved', priority: 'high', stale: false });
    // Turnstile tokens last 300 s: nearly all of it is left.
    expect(result.tokenExpiresInMs).toBeGreaterThan(290_000);
    expect(result.tokenExpiresInMs).toBeLessThanOrEqual(300_000);
    expect(heard.map((event) => [event.id, event.status, event.priority])).toEqual([[result.taskId, 'solved', 'high']]);
    // The token is a credential: local events carry it only when configured.
    expect(heard[0]?.answer).toBeUndefined();
    expect(stack.producer.counters()).toMatchObject({ waitsByEvent: 1, staleDeliveries: 0 });
  });

  it('keeps the governor state in the governor table, where another process can read the last decision', async () => {
    await stack.governor!.tickNow();
    const item = await stack.clients.documents.send(
      new GetCommand({
        TableName: stack.resources.tables.governor,
        Key: { id: GOVERNOR_STATE_ID },
        ConsistentRead: true,
      }),
    );
    const state = item.Item?.state as
      | { lastDecision?: { code: string; ceilings: Record<string, number>; balance?: number; freeThreads: number } }
      | undefined;
    expect(item.Item?.version).toBeGreaterThan(1);
    expect(state?.lastDecision?.code).toBe(stack.governor!.lastDecision?.reason.code);
    expect(state?.lastDecision?.freeThreads).toBe(4);
    expect(state?.lastDecision?.balance).toBeGreaterThan(0);
    expect(stack.governor!.stats().failedTicks).toBe(0);
  });
});
