/**
 * The status summary of one decision: what `captcha-fleet status` shows without running the
 * governor. Pure; the loop stores it in the governor state on every tick.
 */
import type { OverflowConfig, OverflowDecision, OverflowSignals } from './overflow.js';
import type { Decision, GovernorSignals, GovernorStatus, Lane, OverflowStatus } from './types.js';

/**
 * Summarize a decision and the signals behind it. Unknown signals are left out (never 0); an
 * endless drain (arrivals outpace the ceiling) is `null`, since DynamoDB cannot store Infinity.
 */
export function governorStatusOf(signals: GovernorSignals, decision: Decision): GovernorStatus {
  const backlog: Partial<Record<Lane, number>> = {};
  const inFlight: Partial<Record<Lane, number>> = {};
  for (const lane of ['normal', 'high'] as const) {
    const l = signals.lanes[lane];
    if (l?.backlog !== undefined) backlog[lane] = l.backlog;
    if (l?.inFlight !== undefined) inFlight[lane] = l.inFlight;
  }
  const drain = decision.drainSeconds;
  return {
    at: signals.now,
    code: decision.reason.code,
    message: decision.reason.message,
    ceilings: { ...decision.ceilings },
    enabled: { ...decision.enabled },
    paused: decision.paused,
    freeThreads: decision.freeThreads,
    ...(decision.neededThreads !== undefined ? { neededThreads: decision.neededThreads } : {}),
    shortfall: decision.shortfall,
    ...(drain !== undefined ? { drainSeconds: Number.isFinite(drain) ? drain : null } : {}),
    shortfallWarning: decision.shortfallWarning,
    ...(signals.balance !== undefined ? { balance: signals.balance } : {}),
    backlog,
    inFlight,
    ...(signals.p95SolveMs !== undefined ? { p95SolveMs: signals.p95SolveMs } : {}),
    ...(signals.errorRate !== undefined ? { errorRate: signals.errorRate } : {}),
  };
}

/**
 * Summarize the overflow lane's decision: open or closed, why, its spend this UTC hour and day
 * against the caps, the price the budget used. Unknown signals (its in flight, its balance) are
 * left out.
 */
export function overflowStatusOf(
  decision: OverflowDecision,
  signals: OverflowSignals,
  config: Pick<OverflowConfig, 'capUsdPerHour' | 'capUsdPerDay'>,
): OverflowStatus {
  const inFlight = signals.provider.lanes.normal.inFlight;
  const balance = signals.provider.balance;
  const spend = decision.state.spend;
  return {
    enabled: decision.enabled,
    ceiling: decision.ceiling,
    code: decision.reason.code,
    message: decision.reason.message,
    excess: decision.excess,
    ...(inFlight !== undefined ? { inFlight } : {}),
    ...(balance !== undefined ? { balance } : {}),
    hourUsd: spend.hourUsd,
    dayUsd: spend.dayUsd,
    capUsdPerHour: config.capUsdPerHour,
    capUsdPerDay: config.capUsdPerDay,
    priceUsd: decision.priceUsd,
    priceLearned: decision.priceLearned,
  };
}
