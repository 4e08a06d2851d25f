/**
 * The local runtime's poll schedule. The protocol's defaults (first result request after 15 s
 * for tokens, 5 s for images) suit real solvers; against a simulator answering in milliseconds
 * they would make every solve wait seconds and overrun a compressed function timeout. So,
 * until the adaptive schedule has learned a method, the protocol's shape is kept but scaled to
 * the simulator's median; after that the adaptive schedule (the same code as in AWS) decides.
 */
import {
  createAdaptivePollSchedule,
  type AdaptiveScheduleOptions,
  type PollPlan,
  type PollSchedule,
} from '../functions/core/poll-schedule.js';
import type { SolverMethod } from '../functions/core/solver-protocol.js';

/** The protocol polls a token (~20 s median) first at 15 s, then every 5 s: 0.75 and 0.25 of the median. */
const FIRST_POLL_SHARE = 0.75;
const INTERVAL_SHARE = 0.25;
/** No two requests closer than this, ms (a few ms of HTTP per request locally). */
const FLOOR_MS = 10;
/** The protocol's token median the shares above come from, ms. */
const PROTOCOL_TOKEN_MEDIAN_MS = 20_000;

/**
 * A provider's gap between two result requests of one submission (`pollGapMs`) on the local
 * clock: scaled as the protocol's schedule is, to the simulator's median (`medianMs`); unscaled
 * when the simulator has no single median (its per-method real-world times).
 */
export function localPollGapMs(gapMs: number, medianMs: number | undefined): number {
  if (gapMs <= 0 || medianMs === undefined) return gapMs;
  return Math.max(FLOOR_MS, Math.round((gapMs * medianMs) / PROTOCOL_TOKEN_MEDIAN_MS));
}

export interface LocalPollScheduleOptions extends AdaptiveScheduleOptions {
  /** The simulator's median solve time, ms. */
  medianMs: number;
}

/** An adaptive schedule whose starting plans are the protocol's, scaled to `medianMs`. */
export function createLocalPollSchedule(options: LocalPollScheduleOptions): PollSchedule {
  const { medianMs, ...adaptive } = options;
  const inner = createAdaptivePollSchedule({ minSamples: 4, ...adaptive });
  const firstPollMs = Math.max(FLOOR_MS, Math.round(medianMs * FIRST_POLL_SHARE));
  const intervalMs = Math.max(FLOOR_MS, Math.round(medianMs * INTERVAL_SHARE));
  return {
    kind: inner.kind,
    plan(method) {
      const plan = inner.plan(method);
      return plan.source === 'protocol-default' ? scaledPlan(method, firstPollMs, intervalMs) : plan;
    },
    observe: (method, observation) => inner.observe(method, observation),
    estimateWaitMs: (method, observation) => inner.estimateWaitMs(method, observation),
    stats: () => inner.stats(),
  };
}

/** First poll, then a constant interval: the protocol's plan on a smaller clock. */
function scaledPlan(method: SolverMethod, firstPollMs: number, intervalMs: number): PollPlan {
  return {
    method,
    source: 'protocol-default',
    firstPollMs,
    minIntervalMs: intervalMs,
    offsetsMs: [firstPollMs],
    tailStartMs: intervalMs,
    tailMaxMs: intervalMs,
    nextPollAt(notBeforeMs) {
      if (notBeforeMs <= firstPollMs) return firstPollMs;
      return firstPollMs + Math.ceil((notBeforeMs - firstPollMs) / intervalMs) * intervalMs;
    },
  };
}
