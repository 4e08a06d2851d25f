/**
 * The `availability` stage: the fleet's dependencies, each with its own outage record: the
 * solver (judged from the governor's balance read and the consumer's metric window) and the
 * stores the loop reports (`signals.dependencies`). A dependency that has looked down for
 * `outageTicks` ticks in a row pauses consumption (both mappings disabled), so tasks wait in the
 * queue instead of burning receives; a shorter blip, which the consumer's in-invocation retries
 * mostly absorb, does not. While paused every tick is a probe (a balance read is cheap): the
 * first tick on which every dependency answers resumes at the ceiling the fleet held before the
 * outage (an outage says nothing about capacity). When a store was part of the outage, that resume
 * is a trial at the minimum ceiling, which the consumers' own store calls pass or fail
 * (functions/core/store-health.ts: the trial's steps live there). Pure.
 */
import { carriedThreads } from './capacity.js';
import { noteStoreOutage, resumeOnTrial, storeTrialStep, trialWait, withoutIdleTrial } from '../store-health.js';
import { type DependencyView, neverReadBalance, SOLVER, type TickContext } from './context.js';
import { type Flow, type PauseProposal, pause, resumed, run, type Stage, usd } from './flow.js';
import type { PauseState } from './types.js';

function names(deps: readonly DependencyView[]): string {
  return deps.map((d) => `${d.name}: ${d.seen}`).join('; ');
}

/** Paused for an outage: resume at the pre-outage ceiling once every dependency answers. */
function whileDown(ctx: TickContext, flow: Flow): Flow {
  const { funds, config } = ctx;
  const resumeTotal = ctx.state.pause?.resumeTotal;
  const unhealthy = ctx.dependencies.filter((d) => d.down !== false);
  if (unhealthy.length > 0)
    return {
      ...flow,
      state: noteStoreOutage(ctx, flow.state),
      proposal: {
        ...pause(
          'outage',
          'PAUSE_OUTAGE',
          `Still paused (outage): ${names(unhealthy)}; probing again next tick.`,
          resumeTotal,
        ),
        ...outageRecord(ctx.state.pause),
      },
    };
  const waiting = trialWait(ctx, flow);
  if (waiting !== undefined) return waiting;
  // Under a grant (the account stage's, near the pause level) the money decides by the count it
  // pays for, not by the projection, as when a money pause resumes.
  if (funds === undefined || (flow.grant === undefined && funds.projected < config.pauseBalance))
    return {
      ...flow,
      proposal: pause(
        'balance',
        'PAUSE_LOW_BALANCE',
        `Still paused: the solver answers again, but balance $${usd(funds?.usd ?? 0)} is under the pause level $${usd(config.pauseBalance)}; tasks wait in the queue until it is topped up.`,
      ),
    };
  return resumeAfterOutage(ctx, flow, funds.usd);
}

/** What an outage pause carries from tick to tick. */
function outageRecord(paused: PauseState | undefined): Partial<PauseProposal> {
  return {
    ...(paused?.heldAtPause !== undefined ? { heldAtPause: paused.heldAtPause } : {}),
    ...(paused?.solveP95Ms !== undefined ? { solveP95Ms: paused.solveP95Ms } : {}),
  };
}

/**
 * Every dependency answers again. The solver resumes the solves it paused, and those whose leases
 * aged out of the ledger while it was down are still its threads (carried) until they end: they
 * take what was left of their solve, all of them done within twice the p95 solve time the metrics
 * showed when the outage began (a thread lease, the longest any solve holds a thread, when that
 * is unknown) from the first tick the solver answered, fewer of them each tick until then
 * (`carriedThreads`: a straight line from all to none, an upper bound on those still running).
 * While they fill what the plan leaves, the fleet stays paused (a submission would be refused);
 * then it resumes at the ceiling it held before, less what is still carried, and climbs back to
 * it as they end (the free-threads stage subtracts what is left of them each tick).
 *
 * In the parked design no lease ages out so: the watch renews every lease the solver has not
 * answered for, the solver down or not, so the leases still count every solve it paused. What
 * the leases dropped since the pause are submissions the outage refused (their leases freed, no
 * solver thread) and solves answered since: nothing is carried, and it resumes at once.
 */
function resumeAfterOutage(ctx: TickContext, flow: Flow, balance: number): Flow {
  const paused = ctx.state.pause;
  const resumeTotal = paused?.resumeTotal;
  const aged =
    ctx.config.parked === true ? 0 : Math.max(0, (paused?.heldAtPause ?? 0) - (ctx.signals.threadLedger?.held ?? 0));
  const recoveredAt = paused?.recoveredAt ?? ctx.now;
  const lease = ctx.config.threadLeaseMs ?? 2 * (ctx.signals.meanSolveMs ?? 30_000);
  const until = recoveredAt + Math.min(lease, 2 * (paused?.solveP95Ms ?? lease));
  const carried = aged > 0 && ctx.now < until ? { threads: aged, since: recoveredAt, until } : undefined;
  const still = carriedThreads(carried, ctx.now);
  const room = flow.allowed - Math.ceil(still / ctx.config.tasksPerInvocation);
  if (still > 0 && room < ctx.minimum)
    return {
      ...flow,
      proposal: {
        ...pause(
          'outage',
          'PAUSE_OUTAGE',
          `Still paused: every dependency answers again, but the solver still works on the ${aged} solve(s) it paused through the outage (about ${still} now), which ${room > 0 ? `leave room for ${room} invocation(s), under the mapping's minimum concurrency of ${ctx.minimum} (a submission past that room would be refused)` : 'fill the plan'}; resuming as they end (by ${Math.ceil((until - ctx.now) / 1000)} s at most).`,
          resumeTotal,
        ),
        ...outageRecord(paused),
        recoveredAt,
      },
    };
  const total = Math.min(Math.max(ctx.minimum, room), Math.max(ctx.minimum, resumeTotal ?? room));
  const state = resumed(ctx, flow.state);
  const resume = resumeOnTrial(ctx, total, { ...state, overCap: { ...state.overCap, carried } });
  return {
    ...flow,
    state: resume.state,
    proposal: run(
      resume.total,
      'OUTAGE_PROBE',
      resume.trial
        ? `Resumed on trial at ${resume.total}: every dependency answered this tick (the balance read: $${usd(balance)}); the ceiling before the outage (${total}${still > 0 ? `, less the ${still} of the ${aged} solve(s) it paused the solver may still work on` : ''}) once the consumers' own store calls work.`
        : `Resumed at ${total}, the ceiling before the outage${still > 0 ? ` less the ${still} of the ${aged} solve(s) it paused the solver may still work on (fewer as they end)` : ''}: every dependency answered this tick (the balance read: $${usd(balance)}).`,
    ),
  };
}

export const availabilityStage: Stage = {
  name: 'availability',
  apply(ctx, flow) {
    const paused = ctx.state.pause;
    if (paused?.reason === 'outage') return flow.proposal.kind === 'pause' ? flow : whileDown(ctx, flow);
    if (flow.proposal.kind === 'pause' && flow.proposal.reason !== 'threads') return flow;
    const trial = storeTrialStep(ctx, withoutIdleTrial(flow));
    if (trial !== undefined) return trial;
    // A fresh fleet whose first balance reads get no answer has nothing running for the consumer's
    // retries to carry through a blip: its solver is down from the first such tick.
    const fresh = neverReadBalance(ctx);
    const down = ctx.dependencies.filter((d) => d.ticks >= (fresh && d.name === SOLVER ? 1 : ctx.config.outageTicks));
    if (down.length === 0) return withoutIdleTrial(flow);
    // Where to resume: what the mappings held before (the free threads when they held nothing).
    const before = ctx.current.total > 0 ? ctx.current.total : flow.allowed;
    return {
      ...flow,
      probe: false,
      state: noteStoreOutage(ctx, flow.state),
      proposal: {
        ...pause(
          'outage',
          'PAUSE_OUTAGE',
          `Paused: outage (${down.map((d) => `${d.name} looked down ${d.ticks} tick(s): ${d.seen}`).join('; ')}); tasks wait in the queue, their receive counts do not grow; probing every tick.`,
          Math.max(ctx.minimum, before),
        ),
        heldAtPause: ctx.signals.threadLedger?.held ?? 0,
        ...(ctx.signals.p95SolveMs !== undefined ? { solveP95Ms: ctx.signals.p95SolveMs } : {}),
      },
    };
  },
};
