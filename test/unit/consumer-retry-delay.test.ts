/**
 * How long a handed-back task stays hidden: the reason's backoff grows with its receives, but a
 * primary consumer of a fleet with an overflow provider hands a task its plan could not take
 * (transient answers: the plan's outage) back at the first step, so the overflow lane sees it.
 */
import { describe, expect, it } from 'vitest';
import { resolveTiming, type RecordContext } from '../../functions/consumer/context.js';
import type { Delivery } from '../../functions/consumer/delivery.js';
import { retry, type RetryReason } from '../../functions/consumer/outcome.js';
import { resolveSettings } from '../../functions/core/settings.js';
import type { SolverProvider } from '../../functions/core/provider.js';

const OVERFLOW = { baseUrl: 'http://127.0.0.1:1', capUsdPerHour: 1, capUsdPerDay: 10, priceHintUsd: 0.003 };

function contextOf(provider: SolverProvider, withOverflow: boolean): RecordContext {
  const settings = resolveSettings({ prefix: 'retry-delay', ...(withOverflow ? { overflow: OVERFLOW } : {}) });
  return { deps: { settings, provider }, timing: resolveTiming(settings) } as unknown as RecordContext;
}

const delivery = (receiveCount: number) => ({ receiveCount }) as Delivery;
const delayOf = (ctx: RecordContext, reason: RetryReason, receives: number) => {
  const outcome = retry(ctx, delivery(receives), reason);
  return outcome.kind === 'retry' ? outcome.delaySeconds : Number.NaN;
};

describe('the hand-back delay', () => {
  const base = resolveTiming(resolveSettings({ prefix: 'retry-delay' })).retryBaseSeconds;

  it('grows with the receives for a plan alone', () => {
    const ctx = contextOf('primary', false);
    expect(delayOf(ctx, 'transient', 6)).toBeGreaterThan(base * 2);
  });

  it("stays at the first step for the primary of a fleet with overflow on the plan's transient answers", () => {
    const ctx = contextOf('primary', true);
    for (const receives of [1, 3, 6, 9]) expect(delayOf(ctx, 'transient', receives)).toBeLessThanOrEqual(base);
    // Other reasons keep their own backoff: over cap waits for threads, not for another lane.
    expect(delayOf(ctx, 'over_cap', 6)).toBeGreaterThan(base * 2);
  });

  it('grows for the overflow lane itself (its outage has no other lane to go to)', () => {
    expect(delayOf(contextOf('overflow', true), 'transient', 6)).toBeGreaterThan(base * 2);
  });
});

describe("the wait for a dead holder's copy (orphan_wait)", () => {
  it('lasts a visibility timeout and a lease: the copy is receivable by the lease, and a lost receive hides it a visibility timeout', () => {
    const settings = resolveSettings({ prefix: 'orphan-wait' }, { functionTimeoutSeconds: 60 });
    const timing = resolveTiming(settings);
    expect(timing.orphanWaitMs).toBe(settings.visibilityTimeoutSeconds * 1000 + settings.leaseSeconds * 1000);
    // The local runtime's shorter lease (its function timeout) shortens it too.
    expect(resolveTiming(settings, { leaseMs: 11_000 }).orphanWaitMs).toBe(
      settings.visibilityTimeoutSeconds * 1000 + 11_000,
    );
  });
});
