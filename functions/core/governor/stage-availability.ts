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
import { noteStoreOutage, resumeOnTrial, storeTrialStep, trialWait, withoutIdleTrial } from '../store-health.js';
import type { DependencyView, TickContext } from './context.js';
import { type Flow, pause, resumed, run, type Stage, usd } from './flow.js';

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
        ...(ctx.state.pause?.heldAtPause !== undefined ? { heldAtPause: ctx.state.pause.heldAtPause } : {}),
      },
    };
  const waiting = trialWait(ctx, flow);
  if (waiting !== undefined) return waiting;
  if (funds === undefined || funds.projected < config.pauseBalance)
    return {
      ...flow,
      proposal: pause(
        'balance',
        'PAUSE_LOW_BALANCE',
        `Still paused: the solver answers again, but balance $${usd(funds?.usd ?? 0)} is under the pause level $${usd(config.pauseBalance)}; tasks wait in the queue until it is topped up.`,
      ),
    };
  // The solver resumes the solves it paused; those whose leases aged out are still its threads for a while.
  const aged = Math.max(0, (ctx.state.pause?.heldAtPause ?? 0) - (ctx.signals.threadLedger?.held ?? 0));
  const holdMs = 2 * (ctx.signals.meanSolveMs ?? 30_000);
  const carried = aged > 0 ? { threads: aged, until: ctx.now + holdMs } : undefined;
  const allowed = carried
    ? Math.max(ctx.minimum, flow.allowed - Math.ceil(aged / ctx.config.tasksPerInvocation))
    : flow.allowed;
  const total = Math.min(allowed, Math.max(ctx.minimum, resumeTotal ?? allowed));
  const state = resumed(ctx, flow.state);
  const resume = resumeOnTrial(ctx, total, { ...state, overCap: { ...state.overCap, carried } });
  return {
    ...flow,
    state: resume.state,
    proposal: run(
      resume.total,
      'OUTAGE_PROBE',
      resume.trial
        ? `Resumed on trial at ${resume.total}: every dependency answered this tick (the balance read: $${usd(funds.usd)}); the ceiling before the outage (${total}) once the consumers' own store calls work.`
        : `Resumed at ${total}, the ceiling before the outage: every dependency answered this tick (the balance read: $${usd(funds.usd)}).`,
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
    const down = ctx.dependencies.filter((d) => d.ticks >= ctx.config.outageTicks);
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
      },
    };
  },
};
