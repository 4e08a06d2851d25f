/**
 * What flows through the pipeline's stages: the proposal so far (run at a total ceiling, or
 * pause), the state to persist, whether to probe, and the free threads the estimator found.
 * Each stage takes the flow and returns the next one (or the same); none edits its input. Pure.
 */
import type { TickContext } from './context.js';
import type { SpendGrant } from '../thread-ledger.js';
import type { GovernorState, PauseReason, ReasonCode, StageName } from './types.js';

/** Consumption goes on at a total ceiling, split over the lanes. */
export interface RunProposal {
  kind: 'run';
  total: number;
  code: ReasonCode;
  message: string;
  /** A signal is missing: the lanes keep their shares rather than being sized again. */
  hold?: boolean;
}

/** Consumption stops: every lane disabled, tasks wait in the queue. */
export interface PauseProposal {
  kind: 'pause';
  reason: PauseReason;
  code: ReasonCode;
  message: string;
  /** An outage pause: the total ceiling to resume at. */
  resumeTotal?: number;
  /** An outage pause: the threads the ledger counted when it began. */
  heldAtPause?: number;
  /** An outage pause: the first tick every dependency answered again. */
  recoveredAt?: number;
  /** An outage pause: the p95 solve time when it began, ms. */
  solveP95Ms?: number;
  /** An account pause: the cause seen when it began. */
  cause?: string;
}

export type Proposal = RunProposal | PauseProposal;

/** The pipeline's running value. */
export interface Flow {
  proposal: Proposal;
  /** The state to persist so far. */
  state: GovernorState;
  /** Make one probe submission this tick. */
  probe: boolean;
  /** Total ceiling the free threads allow (invocations). */
  allowed: number;
  /** Threads the estimator says this fleet may hold beside others, leftovers included (may be under the mapping's floor). */
  free: number;
  /** Refusals the thread ledger recorded since the last tick (unknown: 0). */
  refusedSinceLastTick: number;
  /** The parked fleet's held test this tick: lift the hold of refusals at or before this epoch ms. */
  liftHold?: number;
  /** The spend grant the money side set (the consumers' solves the money above the pause level pays for). */
  grant?: SpendGrant;
}

/** The first stage: it reads the tick's context and calculates the flow the others refine. */
export interface Calculation {
  readonly name: StageName;
  calculate(ctx: TickContext): Flow;
}

/** One named stage: it reads the tick's context and the flow so far, and returns the next flow. */
export interface Stage {
  readonly name: StageName;
  apply(ctx: TickContext, flow: Flow): Flow;
}

export function run(total: number, code: ReasonCode, message: string, hold = false): RunProposal {
  return hold ? { kind: 'run', total, code, message, hold } : { kind: 'run', total, code, message };
}

export function pause(reason: PauseReason, code: ReasonCode, message: string, resumeTotal?: number): PauseProposal {
  return resumeTotal === undefined
    ? { kind: 'pause', reason, code, message }
    : { kind: 'pause', reason, code, message, resumeTotal };
}

/** The state of a fleet that resumes now; `recovery` limits the ceiling while it proves itself. */
export function resumed(ctx: TickContext, state: GovernorState, recovery?: GovernorState['probe']['recovery']) {
  return { ...state, pause: undefined, resumedAt: ctx.now, probe: { lastAt: ctx.now, recovery } };
}

/**
 * Total ceiling without an increase: the one the fleet stands at, within [minimum, allowed]. On
 * the tick a pause that says nothing about capacity ends, that is the ceiling before the pause
 * (never above the halt's frozen ceiling `halt`), not the paused mappings' nothing: an
 * outage (its record of the ceiling before it), or a starved spell under the halt level (others
 * held the whole plan: the ceiling the halt froze) ends where it began. Before, a hold on that
 * tick (the balance under the halt level, a signal unknown, the error rate high) held the resume
 * at the minimum, and under the halt level for good: a 23-thread plan halted at 23 ran on 2 for
 * the rest of its money with 9 000 tasks waiting after a 66-second outage (gen-s13-893-combined,
 * p95 × 3.60 of its floor), and a 20-thread plan the same after a neighbour held it whole for
 * 200 s (test/unit/lab-sim.test.ts: p95 × 4.5 of the floor's).
 */
export function noIncrease(ctx: TickContext, flow: Flow, halt?: number): number {
  const before = resumedFrom(ctx, flow.proposal, halt);
  if (before === undefined) return Math.max(ctx.minimum, Math.min(ctx.current.total, flow.allowed));
  return Math.max(ctx.minimum, Math.min(before, halt ?? before, flow.allowed));
}

/** The ceiling before the pause this tick ends, where that pause says nothing about capacity. */
function resumedFrom(ctx: TickContext, proposal: Proposal, halt: number | undefined): number | undefined {
  const pause = ctx.state.pause;
  if (proposal.kind !== 'run' || pause === undefined) return undefined;
  if (pause.reason === 'outage' && pause.resumeTotal !== undefined) return Math.min(pause.resumeTotal, proposal.total);
  return pause.reason === 'threads' && halt !== undefined ? Math.min(halt, proposal.total) : undefined;
}

export function usd(value: number, digits = 2): string {
  return value.toFixed(digits);
}

export function pct(rate: number | undefined): string {
  return rate === undefined ? 'unknown' : `${(rate * 100).toFixed(1)} %`;
}

export function seconds(ms: number): number {
  return Math.round(ms / 1000);
}
