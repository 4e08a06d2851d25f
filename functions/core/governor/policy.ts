/**
 * The governor's policy: signals + state + config → decision. Pure: no I/O and no clock (time
 * arrives as `signals.now`), so the Lambda, the local runtime, the CLI and the policy lab all
 * run exactly this function.
 *
 * While the account is healthy the ceiling stands at the FREE threads at once (plan − reserved −
 * threads others were seen to hold), divided by the tasks one invocation solves: on Lambda an
 * unused ceiling costs nothing, so it does not trail demand. Guards lower, freeze or pause it,
 * each with a reason code, in the order of GUARD_ORDER. See docs/governor.md.
 */
import { ceilingFor, splitOverLanes } from './capacity.js';
import { type TickContext, tickContext } from './context.js';
import {
  type Guard,
  type PauseProposal,
  type Proposal,
  type RunProposal,
  atFreeThreads,
  haltOnLowBalance,
  holdOnHighErrorRate,
  holdOnMissingSignal,
  holdRecovery,
  pauseOnAccountErrors,
  pauseOnLowBalance,
  probeOverCap,
  probeRecovery,
  shrinkOnOverCap,
  pauseOnOutage,
  stayReadyWhileIdle,
  whilePausedForAccount,
  whilePausedForBalance,
  whilePausedForOutage,
} from './guards.js';
import { probeForFreedThreads } from './neighbour-guards.js';
import type { Decision, GovernorConfig, GovernorSignals, GovernorState } from './types.js';

export { capFloor, ceilingFor, minimumCeiling, planCap } from './capacity.js';
export { governorConfigFrom } from './config.js';
export { initialState, migrateGovernorState } from './state.js';

/**
 * The guards in the order they are asked; the first proposal wins, and `atFreeThreads` decides
 * when none proposes. Safer first: pauses (key, money, outage) before holds, holds before
 * increases. The outage pause comes before the missing-signal hold: an outage makes the balance
 * unreadable, and holding would keep the mappings consuming. docs/governor.md has it as a table.
 */
export const GUARD_ORDER: readonly Guard[] = [
  pauseOnAccountErrors,
  pauseOnLowBalance,
  pauseOnOutage,
  whilePausedForBalance,
  whilePausedForAccount,
  whilePausedForOutage,
  holdOnMissingSignal,
  shrinkOnOverCap,
  haltOnLowBalance,
  holdOnHighErrorRate,
  probeRecovery,
  holdRecovery,
  probeOverCap,
  probeForFreedThreads,
  stayReadyWhileIdle,
];

/** Capacity shortfall against the free threads, and how long the backlog takes to drain. */
function shortfallOf(ctx: TickContext, freeThreads: number, usedThreads: number) {
  const { demand, signals, config } = ctx;
  const needed = demand.neededThreads;
  const shortfall = needed === undefined ? 0 : Math.max(0, needed - freeThreads);
  let drainSeconds: number | undefined;
  if (demand.backlog === 0) drainSeconds = 0;
  else if (demand.backlog !== undefined && signals.meanSolveMs !== undefined && signals.meanSolveMs > 0) {
    const net = (usedThreads * 1000) / signals.meanSolveMs - (demand.arrivalRate ?? 0);
    drainSeconds = net > 0 ? demand.backlog / net : Number.POSITIVE_INFINITY;
  }
  const shortfallWarning =
    shortfall > 0 &&
    ((demand.backlog ?? 0) > config.shortfallBacklog || (signals.p95SolveMs ?? 0) > config.shortfallP95Ms);
  return { neededThreads: needed, shortfall, drainSeconds, shortfallWarning };
}

/** Every lane disabled; the ceilings kept for when it resumes. */
function pausedDecision(ctx: TickContext, proposal: PauseProposal): Decision {
  const before = ctx.state.pause;
  const since = before === undefined ? ctx.now : before.since;
  const state: GovernorState = {
    ...proposal.state,
    pause:
      proposal.probeAt === undefined
        ? { reason: proposal.reason, since }
        : { reason: proposal.reason, since, probeAt: proposal.probeAt },
    lastChangeAt: before === undefined ? ctx.now : proposal.state.lastChangeAt,
  };
  const freeThreads = ceilingFor(state.overCap.effectiveCap, ctx.config) * ctx.config.tasksPerInvocation;
  return {
    ceilings: { ...ctx.current.ceilings },
    enabled: { normal: false, high: false },
    paused: true,
    freeThreads,
    ...shortfallOf(ctx, freeThreads, 0),
    reason: { code: proposal.code, message: proposal.message },
    state,
  };
}

/** The total split over the lanes; the change time moves only when a lane changes. */
function runningDecision(ctx: TickContext, proposal: RunProposal): Decision {
  const { current, config } = ctx;
  const { ceilings, enabled } = splitOverLanes(proposal.total, { ...ctx, hold: proposal.hold === true });
  const changed =
    ceilings.normal !== current.ceilings.normal ||
    ceilings.high !== current.ceilings.high ||
    enabled.normal !== current.enabled.normal ||
    enabled.high !== current.enabled.high;
  const state: GovernorState = {
    ...proposal.state,
    ceilings,
    lastChangeAt: changed ? ctx.now : proposal.state.lastChangeAt,
  };
  const freeThreads = ceilingFor(state.overCap.effectiveCap, config) * config.tasksPerInvocation;
  return {
    ceilings,
    enabled,
    paused: false,
    freeThreads,
    ...shortfallOf(ctx, freeThreads, proposal.total * config.tasksPerInvocation),
    reason: { code: proposal.code, message: proposal.message },
    state,
  };
}

/** The decision a proposal makes. */
function decisionOf(ctx: TickContext, proposal: Proposal): Decision {
  return proposal.kind === 'pause' ? pausedDecision(ctx, proposal) : runningDecision(ctx, proposal);
}

/**
 * Decide the ceilings for this tick.
 * @param signals what the queues, the consumer's metrics and the solver say now (missing = undefined)
 * @param state what the previous tick persisted (initialState for the first)
 * @param config governorConfigFrom(settings)
 */
export function decide(signals: GovernorSignals, state: GovernorState, config: GovernorConfig): Decision {
  const ctx = tickContext(signals, state, config);
  for (const guard of GUARD_ORDER) {
    const proposal = guard(ctx);
    if (proposal !== undefined) return decisionOf(ctx, proposal);
  }
  return decisionOf(ctx, atFreeThreads(ctx));
}
