/**
 * The held test end to end on the emulators (docs/governor.md, "Held"): a neighbour takes all but
 * two of a parked fleet's threads, the consumers' refusals hold the fleet to what it held, and when
 * the neighbour hands the threads back the governor finds them in a few ticks — it opens one
 * invocation more and lifts the hold (the ledger's `liftedAt` on dynalite, the lease shards'
 * hold-offs), and a task's own submission tests it — where before the hold lapsed a minute after
 * the newest refusal. The local runtime runs the Lambda's loop, leases and ledger adapters.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoThreadLedger } from '../../functions/adapters/thread-ledger.js';
import type { TickRecord } from '../../functions/governor/loop.js';
import { REFUSAL_HOLD_OFF_MS } from '../../functions/core/thread-ledger.js';
import { sleep } from '../../functions/core/helpers/time.js';
import { startLocalStack, type LocalStack } from '../../local/runtime.js';
import { until } from '../helpers/until.js';

const PLAN = 40;
/** Threads the neighbour leaves the fleet while it holds. */
const LEFT = 2;
const TICK_MS = 500;

interface Seen {
  at: number;
  free: number;
  lift: boolean;
}

let stack: LocalStack;
const seen: Seen[] = [];
let outcome: { heldFrom: number; leftAt: number; lifts: number; liftedAt: number | undefined };

beforeAll(async () => {
  // Prepare: a parked 40-thread plan, 2.5-s solves (the fleet's own answers free under a thread
  // in the lease-freeing lag at two threads), ticks of half a second.
  stack = await startLocalStack({
    config: { planThreads: PLAN, maxReceiveCount: 8 },
    visibilityTimeoutSeconds: 8,
    receiveWaitSeconds: 1,
    governor: {
      tickMs: TICK_MS,
      onDecision: (record: TickRecord) => {
        seen.push({
          at: record.signals.now,
          free: record.decision.state.overCap.neighbours?.free ?? PLAN,
          lift: record.decision.liftHold !== undefined,
        });
      },
    },
    solver: { seed: 17, medianMs: 2_500, transientErrorRate: 0, unsolvableRate: 0 },
  });
  await stack.producer.submit(
    Array.from({ length: 1_500 }, (_, i) => ({
      method: 'turnstile' as const,
      params: { sitekey: `0x4AAAAAAAheld${String(i).padStart(8, '0')}`, pageurl: `https://held.example.com/${i}` },
    })),
  );
  // Act 1: the fleet earns its climb budget (1.5 % of its acceptances) on the whole plan.
  await until(() => stack.simulator.stats().accepted >= 450, 60_000);
  // Act 2: a neighbour takes all but two threads, and holds them until the held tests come.
  stack.simulator.update({ foreignThreads: PLAN - LEFT });
  const heldFrom = Date.now();
  await until(() => seen.some((s) => s.at > heldFrom && s.lift), 20_000);
  await sleep(2 * TICK_MS);
  // Act 3: it hands every thread back.
  stack.simulator.update({ foreignThreads: 0 });
  const leftAt = Date.now();
  await until(() => seen.some((s) => s.at > leftAt && s.free >= PLAN / 2), 20_000);
  const reading = await createDynamoThreadLedger({
    documents: stack.clients.documents,
    tableName: stack.resources.tables.governor,
    leaseMs: 60_000,
  }).read();
  outcome = {
    heldFrom,
    leftAt,
    lifts: seen.filter((s) => s.at > heldFrom && s.at < leftAt && s.lift).length,
    liftedAt: reading?.liftedAt,
  };
}, 120_000);

afterAll(async () => {
  await stack?.stop({ graceMs: 500 });
});

describe('a neighbour hands threads back while a refusal holds the parked fleet, on the emulators', () => {
  it('held the fleet to the threads the neighbour left, and tested the hold while it did', () => {
    const during = seen.filter((s) => s.at > outcome.heldFrom + 5_000 && s.at < outcome.leftAt);
    expect(during.length).toBeGreaterThan(0);
    expect(Math.min(...during.map((s) => s.free))).toBeLessThanOrEqual(LEFT + 1);
    expect(outcome.lifts).toBeGreaterThan(0);
    expect(outcome.liftedAt).toBeGreaterThan(outcome.heldFrom);
  });

  it('finds the threads handed back within a few ticks, not at the hold lapsing a minute after the refusal', () => {
    const found = seen.find((s) => s.at > outcome.leftAt && s.free >= PLAN / 2);
    expect(found).toBeDefined();
    expect((found?.at ?? Number.POSITIVE_INFINITY) - outcome.leftAt).toBeLessThan(REFUSAL_HOLD_OFF_MS / 3);
  });
});
