/**
 * The stages about threads: `free-threads` (calculate: the one free-threads estimator, the thread
 * ledger, sets the total the free threads allow) and `neighbours` (while others leave the fleet
 * fewer threads than the mapping's floor, the mappings are disabled and the fleet probes with one
 * submission per tick, never more). Pure.
 */
import { capFloor, ceilingFor, clamp, planCap } from './capacity.js';
import { type Calculation, pause, resumed, run, type Stage } from './flow.js';
import { type EstimateShape, initialEstimate, updateEstimate } from './neighbours.js';
import type { GovernorConfig, NeighbourEstimate, ReasonCode } from './types.js';

/** The estimator's view of the plan for this config. */
export function estimateShape(config: GovernorConfig): EstimateShape {
  return {
    planCap: planCap(config),
    spare: config.tasksPerInvocation,
    floor: capFloor(config),
    tickMs: config.tickMs ?? 10_000,
  };
}

/**
 * Calculate: fold this tick's ledger reading into the estimate; the free threads less the
 * leftovers (threads held for submissions no invocation waits on) set the total. An unread
 * ledger keeps the last estimate (unknown is not zero, and not the plan either).
 */
export const freeThreadsStage: Calculation = {
  name: 'free-threads',
  calculate(ctx) {
    const { config, base, signals } = ctx;
    const shape = estimateShape(config);
    const before: NeighbourEstimate = base.overCap.neighbours ?? initialEstimate(shape, ctx.now);
    const reading = signals.threadLedger;
    const { estimate, change } = reading
      ? updateEstimate(before, reading, shape, ctx.now)
      : { estimate: before, change: undefined };
    // Leftovers (threads held for submissions handed back unanswered) keep the ceiling from
    // rising; while the plan has room they never cut it: the tasks come back to resume them, and
    // a mapping cut back starts its ramp over (minutes on a big plan).
    const carried =
      base.overCap.carried !== undefined && ctx.now < base.overCap.carried.until ? base.overCap.carried : undefined;
    const leftover = (reading?.leftover ?? 0) + (carried?.threads ?? 0);
    const heldNow = ctx.current.total * config.tasksPerInvocation;
    // Below the plan the estimate is a refusal's: the plan was full, so threads the solver still
    // works on for handed-back submissions are not free to submit into; they cut the ceiling
    // until they are answered or expire (else every invocation the ceiling keeps is refused).
    const full = estimate.free < planCap(config);
    const free = full ? estimate.free - leftover : Math.max(Math.min(estimate.free, heldNow), estimate.free - leftover);
    const effectiveCap = clamp(free, capFloor(config), Math.max(capFloor(config), planCap(config)));
    const allowed = ceilingFor(effectiveCap, config);
    const code: ReasonCode =
      change === 'down' ? 'OVER_CAP_SHRINK' : change === 'up' ? 'OVER_CAP_PROBE' : 'FREE_THREADS';
    const others = planCap(config) - estimate.free;
    const held = leftover > 0 ? `; ${leftover} held for submissions handed back unanswered` : '';
    const message =
      reading === undefined
        ? `Ceiling at the free threads of the last estimate (${allowed}): the thread ledger could not be read this tick.`
        : change === 'down'
          ? `Over cap (thread ledger): refused while the fleet held ${reading.lastRefusal?.held ?? '?'} thread(s), so others hold about ${others}; ceiling ${allowed}${held}.`
          : change === 'up'
            ? `Thread ledger: the fleet filled ${before.free} thread(s) without a refusal; climbing to ${estimate.free} (others hold at most ${others})${held}.`
            : `Ceiling at the free threads: ${allowed} invocation(s) × ${config.tasksPerInvocation} task(s) of ${effectiveCap} usable thread(s)${held}.`;
    const refused = reading === undefined ? 0 : Math.max(0, reading.refusals - before.seen.refusals);
    return {
      proposal: run(allowed, code, message),
      state: { ...base, overCap: { ...base.overCap, effectiveCap, neighbours: estimate, carried } },
      probe: false,
      allowed,
      // Leftovers are the fleet's own threads (their tasks come back and resume them): not a sign of neighbours.
      free: estimate.free,
      refusedSinceLastTick: refused,
    };
  },
};

/** Most starved-probe credit kept: one probe a tick, never more. */
const MAX_PROBE_CREDIT = 1;
/**
 * Least credit kept: the refusals of a burst (invocations still running when others took the
 * plan) are charged to the probes, but delay the next one by at most this many ticks. Without
 * the bound, a burst of thousands would silence the probe for hours after the threads came back.
 */
const MIN_PROBE_CREDIT = -6;

/**
 * Others leave the fleet fewer threads than the mapping's floor (two invocations): a mapping at
 * its floor would only retry into refusals. Disable the mappings (tasks wait in the queue, their
 * receive counts unchanged) and probe with one submission of the governor's own per tick, while
 * the refusals seen in starved ticks leave room for it (one per starved tick in all). An accepted
 * probe climbs the estimate (the free-threads stage); at the floor the fleet resumes.
 */
export const neighboursStage: Stage = {
  name: 'neighbours',
  apply(ctx, flow) {
    // Without a probe adapter a paused fleet could never learn that threads came back: it runs at the floor.
    const starved = flow.free < capFloor(ctx.config) && ctx.config.probeSubmissions === true;
    const paused = ctx.state.pause;
    if (!starved) {
      if (paused?.reason !== 'threads' || flow.proposal.kind === 'pause') return flow;
      const state = resumed(ctx, flow.state);
      return {
        ...flow,
        state,
        proposal: run(
          flow.allowed,
          'OVER_CAP_PROBE',
          `Threads handed back: the probe found ${flow.free} free; resumed at ${flow.allowed}.`,
        ),
      };
    }
    if (flow.proposal.kind === 'pause' && flow.proposal.reason !== 'threads') return flow;
    const credit = Math.max(
      MIN_PROBE_CREDIT,
      Math.min(MAX_PROBE_CREDIT, (flow.state.overCap.probeCredit ?? MAX_PROBE_CREDIT) + 1 - flow.refusedSinceLastTick),
    );
    const probe = credit >= 1;
    const state = {
      ...flow.state,
      overCap: { ...flow.state.overCap, probeCredit: probe ? credit - 1 : credit },
    };
    return {
      ...flow,
      state,
      probe,
      proposal: pause(
        'threads',
        'WAIT_FOR_THREADS',
        `Waiting for threads: others hold all but ${flow.free} of the plan's ${planCap(ctx.config)}, fewer than the mapping's floor; mappings disabled, ${probe ? 'one probe submission this tick' : 'no probe this tick (the last refusals used its turn)'}.`,
      ),
    };
  },
};
