/**
 * The `stabilize` stage (holds that keep the ceiling where it is) and the `rate-limit` stage (the
 * climb after an account pause, and the bounds of the mappings). Pure.
 *
 * stabilize: a needed signal unknown holds the ceiling (missing is never read as zero); a balance
 * under the halt level freezes it where it stood when it crossed (no scale-up, no ratchet), at the
 * minimum while no price per solve is learned; an error
 * rate over its threshold allows no increase; no work at all keeps the ceiling at the free
 * threads, so a burst starts at once (IDLE).
 *
 * rate-limit: after an account pause the ceiling starts at the minimum and doubles every
 * cooldown while healthy; nothing else is rate-limited upward (on Lambda an unused ceiling costs
 * nothing, so a big plan climbs back to its free threads at once).
 */
import type { TickContext } from './context.js';
import { type Flow, noIncrease, pct, run, seconds, type Stage, usd } from './flow.js';
import { countingPrice } from './price.js';
import type { GovernorState } from './types.js';

/**
 * The halt hold's ceiling: the ceiling as it stood when the balance crossed (bounded by the free
 * threads, at least the minimum), cleared once funded again. Not the use at the crossing: an idle
 * ceiling costs nothing (Lambda bills invocations, the solver bills solves), and a hold clamped to
 * a quiet minute's use would leave a backlog waiting for threads the plan has free while the
 * money lasts. The hold never rises (no scale-up under the halt level) and never ratchets down
 * on a dip in use.
 */
function haltCeiling(ctx: TickContext, flow: Flow): number | undefined {
  const { funds, config } = ctx;
  const held = flow.state.spend.haltCeiling;
  if (funds !== undefined && funds.usd >= config.haltBalance) return undefined;
  if (!ctx.halted) return held;
  const standing = held ?? noIncrease(ctx, flow);
  return priceUnknown(ctx, flow) ? Math.min(standing, ctx.minimum) : standing;
}

/**
 * No price per solve learned yet (a fleet that starts, or has not solved since it started, under
 * the halt level): the spend grant cannot count what the money pays for, and the spend rate of an
 * idle or new fleet says nothing of a burst at its width (a fresh fleet at a 20-thread ceiling
 * spent 19 solves past a pause level $0.05 away before its second balance read). So the hold is
 * the minimum until the balance drops beside solves the ledger counts (price.ts), and it never
 * rises again under the halt level: a start from nothing is a scale-up too. An account told its
 * price (an overflow provider's list price) knows it from the start.
 */
function priceUnknown(ctx: TickContext, flow: Flow): boolean {
  return countingPrice(flow.state.spend, ctx.config.priceHintUsd).source === 'assumed';
}

export const stabilizeStage: Stage = {
  name: 'stabilize',
  apply(ctx, flow) {
    if (flow.proposal.kind === 'pause') return flow;
    const halt = haltCeiling(ctx, flow);
    const state: GovernorState = { ...flow.state, spend: { ...flow.state.spend, haltCeiling: halt } };
    const { proposal } = flow;
    const hold = noIncrease(ctx, flow, halt);
    if (ctx.missing.length > 0) {
      const shrink = proposal.code === 'OVER_CAP_SHRINK';
      return {
        ...flow,
        state,
        proposal: run(
          Math.min(hold, proposal.total),
          shrink ? 'OVER_CAP_SHRINK' : 'HOLD_MISSING_SIGNAL',
          `${shrink ? `${proposal.message} ` : ''}Holding the ceiling: ${ctx.missing.join(', ')} unknown (missing is never read as zero).`,
          true,
        ),
      };
    }
    if (ctx.halted && ctx.funds !== undefined) {
      const total = Math.min(hold, halt ?? hold, proposal.total);
      // The account stage's budget for the last money above the pause level says why it is lower.
      if ((proposal.code === 'HALT_LOW_BALANCE' || proposal.code === 'SPEND_THE_REST') && total === proposal.total)
        return { ...flow, state };
      const crossing = ctx.state.spend.haltCeiling === undefined;
      const where = priceUnknown(ctx, flow)
        ? 'at the minimum until the price per solve is learned from the balance'
        : crossing
          ? 'frozen where it stands'
          : 'held where it stood when it crossed';
      return {
        ...flow,
        state,
        proposal: run(
          total,
          'HALT_LOW_BALANCE',
          `Scaling halted: balance $${usd(ctx.funds.usd)} is under the halt level $${usd(ctx.config.haltBalance)}; ceiling ${where} (${total}), no scale-up; work in progress goes on.`,
        ),
      };
    }
    if (ctx.erroring)
      return {
        ...flow,
        state,
        proposal: run(
          Math.min(hold, proposal.total),
          'HIGH_ERROR_RATE',
          `No increase: error rate ${pct(ctx.signals.errorRate)} is over ${pct(ctx.config.errorRateThreshold)}.`,
        ),
      };
    const { demand } = ctx;
    const idle = demand.backlog === 0 && demand.inFlight === 0 && (demand.arrivalRate ?? 0) === 0;
    if (idle && proposal.code === 'FREE_THREADS')
      return {
        ...flow,
        state,
        proposal: run(
          proposal.total,
          'IDLE',
          `No work queued; ceiling stays at the free threads (${proposal.total}) so a burst starts at once.`,
        ),
      };
    return { ...flow, state };
  },
};

export const rateLimitStage: Stage = {
  name: 'rate-limit',
  apply(ctx, flow) {
    const { proposal } = flow;
    const recovery = flow.state.probe.recovery;
    if (proposal.kind === 'pause' || recovery === undefined) return flow;
    const { cooldown, now } = ctx;
    const due = now - flow.state.probe.lastAt >= cooldown;
    const ceiling = due ? recovery.ceiling * 2 : recovery.ceiling;
    if (ceiling >= flow.allowed) {
      const state = { ...flow.state, probe: { lastAt: now, recovery: undefined } };
      const done = proposal.code === 'PROBE_RESUME' || proposal.code === 'FREE_THREADS';
      return done
        ? {
            ...flow,
            state,
            proposal: run(proposal.total, 'PROBE_RESUME', `Probe healthy: back at the free threads (${flow.allowed}).`),
          }
        : { ...flow, state };
    }
    const total = Math.min(proposal.total, ceiling);
    const state = due ? { ...flow.state, probe: { lastAt: now, recovery: { ...recovery, ceiling } } } : flow.state;
    const next = Math.max(0, Math.ceil((cooldown - (now - state.probe.lastAt)) / 1000));
    if (total >= proposal.total) return { ...flow, state };
    return {
      ...flow,
      state,
      proposal: run(
        total,
        'PROBE_RESUME',
        `Recovering after the account pause: ceiling ${total} of ${flow.allowed}, ${due ? `doubling again in ${seconds(cooldown)} s` : `next step in ${next} s`}.`,
        proposal.hold === true,
      ),
    };
  },
};
