/**
 * The stages about threads: `free-threads` (calculate: the one free-threads estimator, the thread
 * ledger, sets the total the free threads allow) and `neighbours` (while others leave the fleet
 * fewer threads than the mapping's floor, the mappings are disabled and the fleet probes with one
 * submission per tick, never more). The estimator's held test (parked: while a refusal holds the
 * fleet to a room it fills and tasks wait) is the calculation's. Pure.
 */
import { capFloor, carriedThreads, ceilingFor, clamp, planCap } from './capacity.js';
import { roomLimit, type ThreadLedgerReading } from '../thread-ledger.js';
import type { TickContext } from './context.js';
import { type Calculation, type Flow, pause, resumed, run, type Stage } from './flow.js';
import { type EstimateShape, initialEstimate, lagShare, onPlan, updateEstimate } from './neighbours.js';
import { PARKED_DEFAULT_SOLVE_SECONDS } from './submitters.js';
import type { GovernorConfig, NeighbourEstimate, ReasonCode } from './types.js';

/** The estimator's view of the plan for this config. */
export function estimateShape(config: GovernorConfig): EstimateShape {
  return {
    planCap: planCap(config),
    spare: config.tasksPerInvocation,
    floor: capFloor(config),
    tickMs: config.tickMs ?? 10_000,
    parked: config.parked === true,
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
    const before: NeighbourEstimate =
      base.overCap.neighbours !== undefined ? onPlan(base.overCap.neighbours, shape) : initialEstimate(shape, ctx.now);
    const reading = signals.threadLedger;
    const { estimate, change, lift } = reading
      ? updateEstimate(before, reading, shape, ctx.now, queuedWorkMs(ctx), testable(ctx, reading), signals.meanSolveMs)
      : { estimate: before, change: undefined, lift: undefined };
    // Leftovers (threads held for submissions handed back unanswered) keep the ceiling from
    // rising; while the plan has room they never cut it: the tasks come back to resume them, and
    // a mapping cut back starts its ramp over (minutes on a big plan).
    const carried =
      base.overCap.carried !== undefined && ctx.now < base.overCap.carried.until ? base.overCap.carried : undefined;
    const leftover = (reading?.leftover ?? 0) + carriedThreads(carried, ctx.now);
    const heldNow = ctx.current.total * config.tasksPerInvocation;
    // Below the plan the estimate is a refusal's: the plan was full, so threads the solver still
    // works on for handed-back submissions are not free to submit into; they cut the ceiling
    // until they are answered or expire (else every invocation the ceiling keeps is refused).
    const full = estimate.free < planCap(config);
    const estimated = full
      ? estimate.free - leftover
      : Math.max(Math.min(estimate.free, heldNow), estimate.free - leftover);
    const free = Math.max(estimated, haltedRefusalCount(ctx) - leftover);
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
          : lift !== undefined
            ? `Held by a refusal at ${before.free} thread(s) with tasks waiting: testing one invocation more (${estimate.free}), the hold lifted${held}.`
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
      ...(lift !== undefined ? { liftHold: lift } : {}),
    };
  },
};

/**
 * Under the halt hold a cut is for good (no scale-up until funded), so the ceiling goes no deeper
 * there than the refusals show: the newest refusal's count of threads, while it is in force.
 * Elsewhere the estimate dips under that count only for a while: a run of refusals (no acceptance
 * between: others take what the fleet frees) halves it, the consumers holding themselves to the
 * half on their own, and it stays at the lower of the two until an acceptance follows the newest
 * refusal, which lifts it back to that refusal's count. Held by the halt, the dip would stay for
 * the rest of it, the threads between idle while tasks wait. 0 when not halted or no refusal is
 * in force. The estimate itself is unchanged (a fleet others leave no thread still starves).
 */
function haltedRefusalCount(ctx: TickContext): number {
  const reading = ctx.signals.threadLedger;
  const refusal = reading?.lastRefusal;
  if (!ctx.halted || reading === undefined || refusal === undefined) return 0;
  const cap = planCap(ctx.config);
  return roomLimit(reading, cap, ctx.now) < cap ? Math.min(cap, refusal.held) : 0;
}

/**
 * Whether the parked fleet may test a refusal's hold this tick (the estimator's `heldTest` says
 * when): tasks wait, and the money is above its halt level (a test is a step up). On res.php at
 * any size: the watch asks about every parked submission each round, a second apart at most, and
 * in the lab a big fleet's tests are refused while the neighbour holds, as a small fleet's are
 * (`gen-s13-9-neighbours`, held at 115 of 459 threads on 15-s solves: 7 tests, 7 refused; the
 * test on the tick the neighbour left accepted, the plan back 10 s after). Until issue 17's twenty-third round no fleet
 * whose own answers free a thread in `LEASE_FREEING_LAG_MS` was tested (held threads × 1 s ≥ the
 * mean solve: a rule from the governor's synthetic probe, which held no lease, and on big plans
 * passed on the fleet's own freed threads), so a fleet of more than a few threads held by a
 * neighbour waited for the hold's lapse, a minute after each refusal, for every test
 * (`gen-s13-699-neighbours`: 209 threads, p95 × 1.48 of its floor; × 1.17 with the tests). The
 * JSON task API's watch asks about each submission every few seconds (`answerPollGapMs`), a lag
 * the lab does not model: the rule stands there.
 */
function testable(ctx: TickContext, reading: ThreadLedgerReading): boolean {
  if (ctx.config.parked !== true || ctx.halted || (ctx.demand.backlog ?? 0) <= 0) return false;
  if ((ctx.config.answerPollGapMs ?? 0) <= 0) return true;
  const meanSolveMs = ctx.signals.meanSolveMs ?? PARKED_DEFAULT_SOLVE_SECONDS * 1000;
  return lagShare(reading.held, meanSolveMs) < 1;
}

/** The solve time the waiting tasks need in all, ms (the mean solve unknown: the parked design's default). */
function queuedWorkMs(ctx: TickContext): number {
  const mean = ctx.signals.meanSolveMs ?? PARKED_DEFAULT_SOLVE_SECONDS * 1000;
  return (ctx.demand.backlog ?? 0) * mean;
}

/** Most starved-probe credit kept: one probe a tick, never more. */
const MAX_PROBE_CREDIT = 1;

/**
 * Others leave the fleet fewer threads than the mapping's floor (two invocations).
 *
 * - None at all: a mapping at its floor would only retry into refusals. Disable the mappings
 *   (tasks wait in the queue, their receive counts unchanged) and probe with one submission of
 *   the governor's own per tick, while the refusals seen in starved ticks leave room for it (one
 *   per starved tick in all, each charged once, when the ledger shows it). An accepted probe
 *   climbs the estimate (the free-threads stage).
 * - Some (fewer than the floor): run the mapping at its floor and let the consumers' refusal hold
 *   keep them to those threads: one invocation solves on a thread while the other waits for it
 *   (the room full of the fleet's own solves, it waits up to its deadline rather than going
 *   back). The hold lapses once a minute, so a test costs at most one refusal a minute, and an
 *   acceptance above it climbs the estimate as anywhere else. The threads others leave work.
 */
export const neighboursStage: Stage = {
  name: 'neighbours',
  apply(ctx, flow) {
    // Without a probe adapter a paused fleet could never learn that threads came back: it runs at the floor.
    const starved = flow.free < 1 && ctx.config.probeSubmissions === true;
    const paused = ctx.state.pause;
    if (!starved) {
      const few = flow.free < capFloor(ctx.config) && flow.proposal.kind === 'run';
      if (paused?.reason !== 'threads' || flow.proposal.kind === 'pause') return few ? fewThreads(ctx, flow) : flow;
      // A starved spell's credit ends with it: the next one starts from its own first tick.
      const state = resumed(ctx, { ...flow.state, overCap: { ...flow.state.overCap, probeCredit: undefined } });
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
    // One refusal a starved tick in all: each tick adds one, each refusal the ledger shows takes
    // one (a refused probe's included, charged once, when it shows; a burst of the invocations
    // still running when others took the plan silences the probe until the ticks have paid for it).
    // A spell's first tick pays for the whole run of refusals that led to it (the ledger's
    // refusals since the fleet's last acceptance): the ticks before it saw some of them outside
    // the spell, though others held the plan already.
    const before = flow.state.overCap.probeCredit;
    const spent =
      before === undefined
        ? Math.max(ctx.signals.threadLedger?.refusalRun ?? 0, flow.refusedSinceLastTick)
        : flow.refusedSinceLastTick;
    const credit = Math.min(MAX_PROBE_CREDIT, (before ?? 0) + 1 - spent);
    const probe = credit >= 1;
    const state = { ...flow.state, overCap: { ...flow.state.overCap, probeCredit: credit } };
    return {
      ...flow,
      state,
      probe,
      proposal: pause(
        'threads',
        'WAIT_FOR_THREADS',
        `Waiting for threads: others hold the whole plan of ${planCap(ctx.config)}; mappings disabled, ${probe ? 'one probe submission this tick' : 'no probe this tick (the last refusals used its turn)'}.`,
      ),
    };
  },
};

/** A few threads, fewer than the mapping's floor: the floor, the consumers' hold keeping them to those threads. */
function fewThreads(ctx: TickContext, flow: Flow): Flow {
  if (flow.proposal.code !== 'FREE_THREADS' && flow.proposal.code !== 'OVER_CAP_SHRINK') return flow;
  return {
    ...flow,
    proposal: run(
      flow.allowed,
      'FEW_THREADS',
      `Few threads: others leave ${flow.free} of the plan's ${planCap(ctx.config)}, fewer than the mapping's floor; the mapping runs at its floor (${flow.allowed}) and the consumers' refusal hold keeps them to those threads (one waits while another solves).`,
    ),
  };
}
