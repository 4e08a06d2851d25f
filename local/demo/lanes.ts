/** The lanes' pollers at this moment: what runs, and what may run at once. */
import type { LocalStack } from '../runtime.js';

/** Invocations the overflow lane's two pollers run now. */
export function overflowInFlight(overflow: NonNullable<LocalStack['overflow']>): number {
  return overflow.poller.stats().inFlight + overflow.highPoller.stats().inFlight;
}

/** Invocations running now on every lane, the overflow lane's included. */
export function runningInvocations(stack: LocalStack): number {
  return stack.pollerStats().inFlight + (stack.overflow ? overflowInFlight(stack.overflow) : 0);
}

/** Invocations the lanes may run at once now: enabled lanes' ceilings, within the shared pool. */
export function currentCeiling(stack: LocalStack): number {
  const lanes = [stack.pollers.normal, stack.pollers.high].filter((poller) => poller.enabled);
  return Math.min(
    stack.pool.limit,
    lanes.reduce((sum, poller) => sum + poller.maxConcurrency, 0),
  );
}
