/**
 * The primary's decision as a pipeline of named stages, in the manner of Kubernetes' replica
 * calculator and HPA behaviours (calculate → stabilize → rate-limit), each stage returning a
 * value and a reason: free-threads (calculate) → account → availability → neighbours →
 * stabilize → rate-limit → lanes. The first stages may pause (safer first: the key and the money,
 * then an outage, then a plan others hold); the later ones only hold or limit. Pure: no I/O and
 * no clock (time arrives in the signals). docs/governor.md has the stages as a table.
 */
import { ceilingFor, splitOverLanes } from './capacity.js';
import { type TickContext, tickContext } from './context.js';
import type { Flow, PauseProposal, RunProposal, Stage } from './flow.js';
import { accountStage } from './stage-account.js';
import { availabilityStage } from './stage-availability.js';
import { rateLimitStage, stabilizeStage } from './stage-stabilize.js';
import { answeredPerSecond, parkedSubmitters } from './submitters.js';
import { freeThreadsStage, neighboursStage } from './stage-threads.js';
import type {
  Decision,
  GovernorConfig,
  GovernorSignals,
  GovernorState,
  Lane,
  StageName,
  StageResult,
} from './types.js';

/** The stages after the calculation, in the order they run; `lanes` (the split over the lanes) closes the pipeline. */
export const STAGES: readonly Stage[] = [
  accountStage,
  availabilityStage,
  neighboursStage,
  stabilizeStage,
  rateLimitStage,
];

/** Every stage's name in pipeline order, as docs/governor.md's table lists them. */
export const PIPELINE: readonly StageName[] = [freeThreadsStage.name, ...STAGES.map((s) => s.name), 'lanes'];

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
function pausedDecision(ctx: TickContext, flow: Flow, proposal: PauseProposal, stages: StageResult[]): Decision {
  const before = ctx.state.pause;
  const same = before?.reason === proposal.reason;
  const since = same && before !== undefined ? before.since : ctx.now;
  const cause = proposal.cause ?? (same ? before?.cause : undefined);
  const pause = {
    reason: proposal.reason,
    since,
    ...(proposal.resumeTotal !== undefined ? { resumeTotal: proposal.resumeTotal } : {}),
    ...(proposal.heldAtPause !== undefined ? { heldAtPause: proposal.heldAtPause } : {}),
    ...(proposal.recoveredAt !== undefined ? { recoveredAt: proposal.recoveredAt } : {}),
    ...(proposal.solveP95Ms !== undefined ? { solveP95Ms: proposal.solveP95Ms } : {}),
    ...(cause !== undefined ? { cause } : {}),
  };
  const state: GovernorState = {
    ...flow.state,
    pause,
    lastChangeAt: before === undefined ? ctx.now : flow.state.lastChangeAt,
  };
  const freeThreads = ceilingFor(state.overCap.effectiveCap, ctx.config) * ctx.config.tasksPerInvocation;
  return {
    ceilings: { ...ctx.current.ceilings },
    enabled: { normal: false, high: false },
    paused: true,
    freeThreads,
    ...shortfallOf(ctx, freeThreads, 0),
    reason: { code: proposal.code, message: proposal.message },
    stages,
    probe: flow.probe,
    ...(flow.grant !== undefined ? { spendGrant: flow.grant } : {}),
    state,
  };
}

/** The total split over the lanes; the change time moves only when a lane changes. */
function runningDecision(ctx: TickContext, flow: Flow, proposal: RunProposal, stages: StageResult[]): Decision {
  const { current, config } = ctx;
  const { ceilings, enabled } = splitOverLanes(proposal.total, { ...ctx, hold: proposal.hold === true });
  const changed =
    ceilings.normal !== current.ceilings.normal ||
    ceilings.high !== current.ceilings.high ||
    enabled.normal !== current.enabled.normal ||
    enabled.high !== current.enabled.high;
  const state: GovernorState = { ...flow.state, ceilings, lastChangeAt: changed ? ctx.now : flow.state.lastChangeAt };
  const freeThreads = ceilingFor(state.overCap.effectiveCap, config) * config.tasksPerInvocation;
  const submitters = config.parked ? submittersOf(ctx, ceilings, enabled) : undefined;
  return {
    ceilings,
    enabled,
    ...(submitters !== undefined ? { submitters } : {}),
    paused: false,
    freeThreads,
    ...shortfallOf(ctx, freeThreads, proposal.total * config.tasksPerInvocation),
    reason: { code: proposal.code, message: proposal.message },
    stages,
    probe: false,
    ...(flow.liftHold !== undefined ? { liftHold: flow.liftHold } : {}),
    ...(flow.grant !== undefined ? { spendGrant: flow.grant } : {}),
    state,
  };
}

/** The parked design's mapping maxima for the split (submitters.ts). */
function submittersOf(ctx: TickContext, ceilings: Record<Lane, number>, enabled: Record<Lane, boolean>) {
  return parkedSubmitters({
    ceilings,
    enabled,
    tasksPerInvocation: ctx.config.tasksPerInvocation,
    held: ctx.signals.threadLedger?.held,
    backlog: ctx.demand.backlog,
    meanSolveMs: ctx.signals.meanSolveMs,
    answeredPerSecond: answeredPerSecond(ctx.state.answers, ctx.signals.threadLedger?.solved, ctx.now),
  });
}

function resultOf(stage: StageName, before: Flow | undefined, after: Flow): StageResult {
  const p = after.proposal;
  const value = p.kind === 'pause' ? 'paused' : p.total;
  const was = before?.proposal;
  const wasValue = was === undefined ? undefined : was.kind === 'pause' ? 'paused' : was.total;
  const changed = was === undefined || wasValue !== value || was.code !== p.code;
  return { stage, value, code: p.code, message: p.message, changed };
}

/**
 * The primary's decision for this tick: every stage in order, then the lanes.
 * @param signals what the queues, the thread ledger, the consumer's metrics and the solver say now (missing = undefined)
 * @param state what the previous tick persisted (initialState for the first)
 * @param config governorConfigFrom(settings)
 */
export function decide(signals: GovernorSignals, state: GovernorState, config: GovernorConfig): Decision {
  const ctx = tickContext(signals, state, config);
  let flow = freeThreadsStage.calculate(ctx);
  const stages: StageResult[] = [resultOf(freeThreadsStage.name, undefined, flow)];
  for (const stage of STAGES) {
    const next = stage.apply(ctx, flow);
    stages.push(resultOf(stage.name, flow, next));
    flow = next;
  }
  // Every tick, paused or not, keeps the ledger's count of answers read: the next tick's submitters size on its rise.
  const solved = signals.threadLedger?.solved;
  if (solved !== undefined) flow = { ...flow, state: { ...flow.state, answers: { solved, at: ctx.now } } };
  const p = flow.proposal;
  const decision = p.kind === 'pause' ? pausedDecision(ctx, flow, p, stages) : runningDecision(ctx, flow, p, stages);
  stages.push({
    stage: 'lanes',
    value: decision.paused
      ? 'paused'
      : (decision.enabled.normal ? decision.ceilings.normal : 0) + (decision.enabled.high ? decision.ceilings.high : 0),
    code: p.code,
    message: decision.paused
      ? 'Both mappings disabled.'
      : `normal ${decision.enabled.normal ? decision.ceilings.normal : 'off'}, high ${decision.enabled.high ? decision.ceilings.high : 'off'}.`,
    changed: false,
  });
  return decision;
}
