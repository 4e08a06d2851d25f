/**
 * The governor's estimate of the threads other users of the key hold ("neighbours"), from the
 * thread ledger the consumer writes (functions/core/thread-ledger.ts). Pure.
 *
 * - An over-cap answer while the fleet held h threads says others hold ≥ plan − h: the
 *   **lower** bound. It decays with time since the last refusal that set or confirmed it (by
 *   1, 3, 7 … threads after 1, 2, 3 … decay periods), so threads neighbours hand back are found
 *   again: one refused probe per period while they stay, a climb within a few periods once they go.
 * - An accepted submission while the fleet held h says others hold ≤ plan − h − 1: the **upper**
 *   bound. It is never below the lower bound (a refusal is the stronger evidence: the held count
 *   includes answers the solver has finished but the consumer has not read yet), and it is 0
 *   until a refusal says otherwise (the fleet takes the plan as its own until told).
 *
 * The cap this fleet may use is what the upper bound leaves, plus one spare invocation while the
 * bounds disagree (the probe: it is accepted and lowers the upper bound, or refused and raises
 * the lower one), never above what the lower bound leaves: plan − upper ≤ cap ≤ plan − lower.
 */
import type { ThreadLedgerReading } from '../thread-ledger.js';
import { capFloor, planCap } from './capacity.js';
import { MIN_PROBE_COOLDOWN_MS, PROBE_COOLDOWN_TICKS } from './config.js';
import type { GovernorConfig, GovernorState } from './types.js';

/** Persisted in the governor state, so a cold start begins at the last estimate. */
export interface NeighbourEstimate {
  /** Others hold at least this many threads (from over-cap answers), before decay. */
  lower: number;
  /** Epoch ms the lower bound was last set or confirmed by a refusal (decay counts from here). */
  lowerAt: number;
  /** The ledger's acceptance counter then (decay also waits for acceptances; absent: time alone). */
  lowerAcceptances?: number;
  /** Others are taken to hold at most this many (from acceptances; raised by refusals). */
  upper: number;
  /** Epoch ms of the newest answer used. */
  updatedAt: number;
  /** Ledger counters already used, so an answer is counted once. */
  seen: { refusals: number; acceptances: number };
}

/** Plan size and timing the estimate needs. */
export interface NeighbourConfig {
  planThreads: number;
  /** Time after which the lower bound starts to widen, ms. */
  decayMs: number;
  /**
   * Accepted submissions per widening step: a probe refused costs one over-cap answer, so at
   * most one per this many accepted submissions (100: 1 %). Absent: time alone.
   */
  acceptancesPerProbe?: number;
}

/** Accepted submissions per widening step of the lower bound by default (one failed probe per 100: 1 %). */
export const DEFAULT_ACCEPTANCES_PER_PROBE = 100;

/** Largest number of doublings the decay counts (keeps 2^k finite and far above any plan). */
const MAX_DECAY_STEPS = 30;

/**
 * The lower bound at `now`, after decay: lower − (2^k − 1) for k whole decay periods, not below
 * 0. A period needs both `decayMs` and `acceptancesPerProbe` accepted submissions since the bound
 * was set, so probing costs at most one refusal per that many acceptances, however fast they come.
 */
export function lowerBoundAt(
  estimate: NeighbourEstimate,
  now: number,
  decay: Pick<NeighbourConfig, 'decayMs' | 'acceptancesPerProbe'>,
): number {
  const byTime = decay.decayMs > 0 ? Math.floor(Math.max(0, now - estimate.lowerAt) / decay.decayMs) : MAX_DECAY_STEPS;
  const perProbe = decay.acceptancesPerProbe;
  const accepted = estimate.seen.acceptances - (estimate.lowerAcceptances ?? estimate.seen.acceptances);
  const byAcceptances =
    perProbe === undefined || estimate.lowerAcceptances === undefined
      ? MAX_DECAY_STEPS
      : Math.floor(Math.max(0, accepted) / Math.max(1, perProbe));
  const widened = 2 ** Math.min(MAX_DECAY_STEPS, byTime, byAcceptances) - 1;
  return Math.max(0, estimate.lower - widened);
}

/**
 * Fold a ledger reading into the estimate. Only answers recorded since the last reading count
 * (the ledger keeps the newest refusal and the newest acceptance with their counters; a counter
 * that changed either way, as after the ledger item was recreated, means a new answer). The
 * lower bound keeps its undecayed value and time; decay goes on from there until a refusal at
 * or above the decayed level sets it again.
 * @param estimate the previous estimate, undefined before the first
 */
export function updateEstimate(
  estimate: NeighbourEstimate | undefined,
  reading: ThreadLedgerReading,
  now: number,
  config: NeighbourConfig,
): NeighbourEstimate {
  const plan = config.planThreads;
  // The first reading of a fleet (or after the state was lost) takes the newest answers as new.
  const seen = estimate?.seen ?? { refusals: 0, acceptances: 0 };
  const next: NeighbourEstimate = estimate
    ? { ...estimate, seen: { ...estimate.seen } }
    : { lower: 0, lowerAt: now, upper: 0, updatedAt: now, seen };
  let lower = lowerBoundAt(next, now, config);

  const refusal = reading.lastRefusal;
  if (refusal !== undefined && reading.refusals !== seen.refusals) {
    const bound = clamp(plan - refusal.held, 0, plan);
    if (bound >= lower) {
      lower = bound;
      next.lower = bound;
      next.lowerAt = Math.min(now, refusal.at);
      next.lowerAcceptances = reading.acceptances;
    }
    next.updatedAt = Math.max(next.updatedAt, refusal.at);
  }
  const acceptance = reading.lastAcceptance;
  if (acceptance !== undefined && reading.acceptances !== seen.acceptances) {
    next.upper = Math.min(next.upper, clamp(plan - acceptance.held - 1, 0, plan));
    next.updatedAt = Math.max(next.updatedAt, acceptance.at);
  }
  next.upper = Math.max(next.upper, lower);
  next.seen = { refusals: reading.refusals, acceptances: reading.acceptances };
  return next;
}

/**
 * Threads the fleet may use: what the upper bound leaves, plus one spare invocation
 * (`spareThreads`) while the lower bound allows more, never above what the lower bound leaves.
 */
export function capFromEstimate(
  estimate: NeighbourEstimate,
  now: number,
  config: NeighbourConfig & { spareThreads: number },
): number {
  const plan = config.planThreads;
  const lower = lowerBoundAt(estimate, now, config);
  const upper = Math.max(estimate.upper, lower);
  return Math.max(0, Math.min(plan - lower, plan - upper + (upper > lower ? config.spareThreads : 0)));
}

function clamp(value: number, low: number, high: number): number {
  return Math.max(low, Math.min(high, value));
}

/** Default decay period: six ticks (at least a second), as long as an over-cap probe cooldown without CloudWatch's lag. */
export function neighbourDecayMs(config: GovernorConfig): number {
  return config.neighbourDecayMs ?? Math.max(MIN_PROBE_COOLDOWN_MS, PROBE_COOLDOWN_TICKS * (config.tickMs ?? 10_000));
}

/** What the thread ledger did to the effective cap this tick, in words for the decision. */
export interface NeighbourAssessment {
  /** The next state: the estimate and the effective cap it allows. */
  state: GovernorState;
  /** The cap went down (a refusal raised the lower bound), in words. */
  shrink: string | undefined;
  /** The cap went up (an acceptance lowered the upper bound, or the lower one widened: a spare probes), in words. */
  raise: string | undefined;
}

/**
 * Fold this tick's ledger reading into the estimate and set the effective cap from it:
 * plan − upper (+ one spare invocation while the bounds disagree), never above plan − lower,
 * within [capFloor, planCap]. Replaces the blind shrink and probe of the metric window.
 */
export function assessNeighbours(
  reading: ThreadLedgerReading,
  base: GovernorState,
  now: number,
  config: GovernorConfig,
): NeighbourAssessment {
  const decayMs = neighbourDecayMs(config);
  const shape = { planThreads: config.planThreads, decayMs, acceptancesPerProbe: DEFAULT_ACCEPTANCES_PER_PROBE };
  const estimate = updateEstimate(base.overCap.neighbours, reading, now, shape);
  const free = capFromEstimate(estimate, now, { ...shape, spareThreads: config.tasksPerInvocation });
  const floor = capFloor(config);
  const effectiveCap = Math.max(floor, Math.min(planCap(config), free));
  const before = base.overCap.effectiveCap;
  const state: GovernorState = { ...base, overCap: { ...base.overCap, neighbours: estimate, effectiveCap } };
  const lower = lowerBoundAt(estimate, now, shape);
  const upper = Math.max(estimate.upper, lower);
  const others = lower === upper ? `${lower}` : `${lower}–${upper}`;
  const cap = `effective cap ${effectiveCap} of ${planCap(config)}`;
  if (effectiveCap < before) {
    const refused = reading.lastRefusal;
    const why = refused ? `refused while the fleet held ${refused.held} thread(s)` : 'the estimate narrowed';
    return { state, shrink: `Over cap (thread ledger): ${why}, so others hold ${others}; ${cap}.`, raise: undefined };
  }
  if (effectiveCap > before) {
    const spare = upper > lower ? '; one spare invocation probes for threads they handed back' : '';
    return {
      state,
      shrink: undefined,
      raise: `Thread ledger: others hold ${others} thread(s) (≥ from refusals, widening after ${Math.round(decayMs / 1000)} s and ${DEFAULT_ACCEPTANCES_PER_PROBE} acceptances without one; ≤ from acceptances); ${cap}${spare}.`,
    };
  }
  return { state, shrink: undefined, raise: undefined };
}
