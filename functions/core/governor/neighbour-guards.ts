/**
 * The guard of the thread ledger's estimate (neighbours.ts). Its shrink goes through
 * `shrinkOnOverCap` like any over-cap shrink; this guard names the rise: the cap the estimate
 * allows went up (an acceptance proved a thread free, or the lower bound widened and one spare
 * invocation probes for threads others handed back). Pure.
 */
import type { Guard } from './guards.js';

/** The estimate raised the cap this tick, and the fleet is healthy: go to it, as an over-cap probe. */
export const probeForFreedThreads: Guard = (ctx) => {
  const r = ctx.running;
  if (r.raise === undefined) return undefined;
  return { kind: 'run', total: r.allowed, code: 'OVER_CAP_PROBE', message: r.raise, state: r.state };
};
