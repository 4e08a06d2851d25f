/**
 * Builders for the governor's pure tests: a healthy tick's signals with the parts a test changes,
 * and the enabled ceiling a decision adds up to.
 */
import type { Decision, GovernorSignals, GovernorState, LaneSignals } from '../../functions/core/governor/types.js';

/** Epoch ms the governor tests start at. */
export const T0 = 1_700_000_000_000;

/** A lane with work queued and the mapping enabled at 8. */
export function laneSignals(overrides: Partial<LaneSignals> = {}): LaneSignals {
  return {
    backlog: 100,
    inFlight: 8,
    delayed: 0,
    oldestAgeSeconds: 5,
    arrivalRate: 1,
    ceiling: 8,
    enabled: true,
    ...overrides,
  };
}

/** A healthy tick at `now`: every signal known, no errors, $50 of balance. */
export function governorSignals(
  now: number,
  overrides: Partial<GovernorSignals> = {},
  normal: Partial<LaneSignals> = {},
): GovernorSignals {
  return {
    now,
    lanes: { normal: laneSignals(normal) },
    completionRate: 0.5,
    meanSolveMs: 10_000,
    p95SolveMs: 20_000,
    errorRate: 0,
    transientErrorRate: 0,
    overCapRate: 0,
    overCapAnswers: 0,
    accountErrors: 0,
    accountErrorCode: undefined,
    balance: 50,
    ...overrides,
  };
}

/** The ceiling of the lanes a decision enables, summed. */
export function enabledTotal(decision: Decision): number {
  return (
    (decision.enabled.normal ? decision.ceilings.normal : 0) + (decision.enabled.high ? decision.ceilings.high : 0)
  );
}

/**
 * The state of a fleet that has solved before: its price per solve learned from the balance (and
 * bounded by it: price.ts priceBound; unbounded, the grant counts at the assumed price). The
 * halt hold freezes such a fleet's ceiling where it stood; one with no price learned is held at
 * the minimum instead (stage-stabilize.ts), which the tests of the hold itself do not mean to test.
 */
export function priceLearned(state: GovernorState, usd = 0.001): GovernorState {
  return { ...state, spend: { ...state.spend, learnedPriceUsd: usd, priceBoundUsd: usd } };
}

/**
 * The state of a fleet that has read its balance before. A fresh one whose first balance read
 * fails starts paused until a read works (stage-account.ts: no solve before the money is known),
 * which the tests of a running fleet's missing signals and outages do not mean to test.
 */
export function balanceReadBefore(state: GovernorState, usd = 50): GovernorState {
  return { ...state, spend: { ...state.spend, lastRead: { at: state.lastChangeAt, usd } } };
}
