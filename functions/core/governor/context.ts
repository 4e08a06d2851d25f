/**
 * One tick's context: what every guard of decide() reads. Built once per tick from the signals,
 * the previous state and the config, and never changed afterwards: a guard returns a proposal
 * with the next state, it does not edit this one. Pure.
 */
import { DEFAULT_DRAIN_TARGET_MS, DEFAULT_MAX_PROBE_BACKOFF, DEFAULT_OUTAGE_TRANSIENT_SHARE } from './config.js';
import { type Current, capFloor, ceilingFor, clamp, invocations, minimumCeiling, planCap } from './capacity.js';
import { assessNeighbours } from './neighbours.js';
import type { GovernorConfig, GovernorSignals, GovernorState, Lane, LaneSignals, SpendState } from './types.js';

/** Weight of the newest balance delta in the smoothed spend rate: a ten-second delta is noisy (a few solves). */
const SPEND_SMOOTHING = 0.3;
/** The balance is projected this many ticks ahead: the next tick, plus one of margin for a noisy rate and a read up to a tick old. */
export const PROJECTION_TICKS = 2;
/** Most recent-use samples kept in the state (bounds the DynamoDB item whatever the tick). */
const MAX_USE_SAMPLES = 64;

/** What the work asks for, summed over the active lanes (undefined when a lane does not say). */
export interface Demand {
  /** Visible messages over the lanes, when every lane's backlog is known. */
  backlog: number | undefined;
  inFlight: number | undefined;
  arrivalRate: number | undefined;
  neededThreads: number | undefined;
}

/** A balance that could be read, and where the spend rate takes it by the tick after next. */
export interface Funds {
  usd: number;
  projected: number;
}

/**
 * What the guards after the pauses see: the state once the over-cap estimate, the outage
 * counter and the halt hold have taken this tick's signals in, and the totals they allow.
 */
export interface RunningView {
  state: GovernorState;
  /** The over-cap shrink this tick made, in words (undefined when the cap did not shrink). */
  shrink: string | undefined;
  /** The rise of the cap the thread ledger's estimate allowed this tick, in words (neighbours.ts). */
  raise: string | undefined;
  /** Signals that are unknown this tick, in words. */
  missing: string[];
  /** The balance is under the halt level. */
  halted: boolean;
  /** The error rate is over its threshold. */
  erroring: boolean;
  /** Total ceiling the effective cap allows. */
  allowed: number;
  /** Total ceiling without an increase: current use, within [minimum, allowed]. */
  noIncrease: number;
  /** Total ceiling while scaling is halted. */
  haltTotal: number;
}

/** Everything a guard reads. Read-only: guards build the next state from `base` or `running.state`. */
export interface TickContext {
  readonly signals: GovernorSignals;
  /** The state the previous tick persisted. */
  readonly state: GovernorState;
  readonly config: GovernorConfig;
  readonly now: number;
  /** Wait between probes, ms. */
  readonly cooldown: number;
  /** How far back the consumer's metric window reaches, ms. */
  readonly span: number;
  /** Lowest total ceiling while not paused. */
  readonly minimum: number;
  readonly lanes: readonly Lane[];
  readonly current: Current;
  readonly demand: Demand;
  /** The balance, when it could be read. */
  readonly funds: Funds | undefined;
  /** Within the grace after a resume: the consumer's metric window may still hold answers from before the pause. */
  readonly inGrace: boolean;
  /** Account errors in the window that are not left over from before the last resume. */
  readonly accountTrouble: boolean;
  /** Whether this tick looks like a solver outage: true, false, or unknown (see outageEvidence). */
  readonly outageNow: boolean | undefined;
  /** The next state every decision starts from: cap clamped, recent use and spend updated. */
  readonly base: GovernorState;
  readonly running: RunningView;
}

/** Lanes the decision covers: `normal`, and `high` when configured and observed. */
function activeLanes(signals: GovernorSignals, config: GovernorConfig): Lane[] {
  return config.highLane && signals.lanes.high !== undefined ? ['normal', 'high'] : ['normal'];
}

function laneSignals(signals: GovernorSignals, lane: Lane): LaneSignals | undefined {
  return lane === 'normal' ? signals.lanes.normal : signals.lanes.high;
}

function currentCeilings(signals: GovernorSignals, state: GovernorState, lanes: readonly Lane[]): Current {
  const ceilings: Record<Lane, number> = {
    normal: signals.lanes.normal.ceiling,
    high: signals.lanes.high?.ceiling ?? state.ceilings.high,
  };
  const enabled: Record<Lane, boolean> = {
    normal: signals.lanes.normal.enabled,
    high: lanes.includes('high') && (signals.lanes.high?.enabled ?? false),
  };
  const total = (enabled.normal ? ceilings.normal : 0) + (enabled.high ? ceilings.high : 0);
  return { ceilings, enabled, total };
}

function demandOf(signals: GovernorSignals, lanes: readonly Lane[], config: GovernorConfig): Demand {
  const sum = (pick: (l: LaneSignals) => number | undefined): number | undefined => {
    let total = 0;
    for (const lane of lanes) {
      const l = laneSignals(signals, lane);
      const value = l === undefined ? undefined : pick(l);
      if (value === undefined) return undefined;
      total += value;
    }
    return total;
  };
  const backlog = sum((l) => l.backlog);
  const inFlight = sum((l) => l.inFlight);
  const arrivalRate = sum((l) => l.arrivalRate);
  const mean = signals.meanSolveMs;
  const drain = config.drainTargetMs ?? DEFAULT_DRAIN_TARGET_MS;
  // Little's law for the arrivals, plus the threads that drain the queued work within the drain target.
  const neededThreads =
    arrivalRate !== undefined && backlog !== undefined && mean !== undefined
      ? Math.ceil((arrivalRate * mean) / 1000 + (backlog * mean) / drain - 1e-9)
      : undefined;
  return { backlog, inFlight, arrivalRate, neededThreads };
}

function missingSignals(signals: GovernorSignals, lanes: readonly Lane[]): string[] {
  const missing: string[] = [];
  for (const lane of lanes) {
    const l = laneSignals(signals, lane);
    if (l?.backlog === undefined) missing.push(`${lane} backlog`);
    if (l?.inFlight === undefined) missing.push(`${lane} in flight`);
  }
  if (signals.balance === undefined) missing.push('balance');
  if (signals.errorRate === undefined) missing.push('error rate');
  if (signals.overCapAnswers === undefined) missing.push('over-cap answers');
  if (signals.accountErrors === undefined) missing.push('account errors');
  return missing;
}

/**
 * Spend rate from successive balance reads (no price signal needed). Frozen while paused, so the
 * projection that paused the fleet is the one that resumes it (no flapping at the level).
 */
function spendAfter(signals: GovernorSignals, state: GovernorState): SpendState {
  const balance = signals.balance;
  if (balance === undefined) return { ...state.spend };
  const seen = state.spend.lastRead;
  let perSecond = state.spend.perSecond;
  if (seen !== undefined && signals.now > seen.at && balance <= seen.usd && state.pause === undefined) {
    const observed = (seen.usd - balance) / ((signals.now - seen.at) / 1000);
    perSecond = perSecond === undefined ? observed : perSecond + SPEND_SMOOTHING * (observed - perSecond);
  }
  return { ...state.spend, lastRead: { at: signals.now, usd: balance }, perSecond };
}

/** Until two reads give a rate, the balance itself is compared (an unknown rate is not a zero balance). */
function fundsOf(signals: GovernorSignals, state: GovernorState, spend: SpendState, config: GovernorConfig) {
  const balance = signals.balance;
  if (balance === undefined) return undefined;
  const seen = state.spend.lastRead;
  const tickMs = config.tickMs ?? (seen !== undefined ? Math.max(0, signals.now - seen.at) : 0);
  return { usd: balance, projected: balance - ((spend.perSecond ?? 0) * PROJECTION_TICKS * tickMs) / 1000 };
}

/** Whether demand has tested the effective cap since `since`, long enough ago for the metric window to cover it. */
export function testedAtCap(
  overCap: GovernorState['overCap'],
  since: number,
  now: number,
  span: number,
  config: GovernorConfig,
): boolean {
  // Half the window + lag: the lag is at most that. Probing while the fleet does not fill its
  // cap tests nothing and lets the cap drift above the free threads.
  const capThreads = ceilingFor(overCap.effectiveCap, config) * config.tasksPerInvocation;
  return (overCap.recentUse ?? []).some((u) => u.at > since && now - u.at >= span / 2 && u.threads >= capThreads);
}

/** Invocations backing off after over-cap answers: at most one per answer, at least one. */
function backingOff(overCapAnswers: number): number {
  return Math.max(1, overCapAnswers);
}

interface OverCapInputs {
  signals: GovernorSignals;
  state: GovernorState;
  config: GovernorConfig;
  base: GovernorState;
  cooldown: number;
  span: number;
  attempted: number;
}

/**
 * Over-cap answers: someone else holds threads. Shrink the effective cap at once by the observed
 * excess, one shrink per metric span (answers inside the span after a shrink may predate it). A
 * probe not yet known to hold is the exception: it fired on a window without over-cap answers,
 * so answers seen since are new and the probe failed. Shrink back at once (to the level it
 * started from), rather than let every excess invocation retry until the span ends.
 */
function assessOverCap(input: OverCapInputs): { state: GovernorState; shrink: string | undefined } {
  const { signals, state, config, base, cooldown, span } = input;
  const now = signals.now;
  const answers = signals.overCapAnswers;
  const unproven = state.overCap.unprovenProbeAt;
  const probeFailed = unproven !== undefined;
  if (answers !== undefined && answers > 0) {
    if (probeFailed || now - (state.overCap.lastShrinkAt ?? Number.NEGATIVE_INFINITY) >= Math.max(cooldown, span))
      return shrinkCap(input, answers, probeFailed);
    return { state: base, shrink: undefined };
  }
  if (unproven !== undefined && answers === 0 && testedAtCap(base.overCap, unproven, now, span, config)) {
    // The metric window covered in flight at the probed cap without over-cap answers: the probe
    // held. At the level that failed before (or above), the backoff has done its job: reset it.
    const reset = base.overCap.effectiveCap >= (state.overCap.failedProbeCap ?? 0);
    const overCap = {
      ...base.overCap,
      unprovenProbeAt: undefined,
      ...(reset ? { probeBackoff: undefined, failedProbeCap: undefined } : {}),
    };
    return { state: { ...base, overCap }, shrink: undefined };
  }
  return { state: base, shrink: undefined };
}

function shrinkCap(input: OverCapInputs, answers: number, probeFailed: boolean) {
  const { signals, state, config, base, cooldown, attempted } = input;
  const before = base.overCap;
  // The answers came while the fleet attempted about the peak of its recent use (in flight,
  // including the invocations backing off), not this tick's use nor the window's average.
  const peak = Math.min(before.effectiveCap, Math.max(attempted, ...(before.recentUse ?? []).map((u) => u.threads)));
  // Threads held = peak − invocations backing off. Those are at most the refused submissions
  // (each shows at most one missing thread) and at least 1 (someone was refused). What
  // completions say the fleet held on average (Little's law) is a floor: it really held those.
  const held =
    signals.completionRate !== undefined && signals.meanSolveMs !== undefined
      ? Math.round((signals.completionRate * signals.meanSolveMs) / 1000)
      : 0;
  // A level the solver accepted at the cap before the last probe is a better floor still: the
  // probe above it failed, so the free threads are that level (used once: others may grow).
  // It wins over the peak, which ticks sample and can miss (the true peak lies between ticks).
  const target = Math.max(
    state.overCap.provenThreads ?? 0,
    Math.min(peak - 1, Math.max(held, peak - backingOff(answers))),
  );
  const shrunk = clamp(target, capFloor(config), before.effectiveCap - 1);
  const maxBackoff = Math.max(1, config.maxProbeBackoff ?? DEFAULT_MAX_PROBE_BACKOFF);
  const overCap = {
    ...before,
    lastShrinkAt: signals.now,
    provenThreads: undefined,
    unprovenProbeAt: undefined,
    // Every failed probe costs a burst of over-cap answers: wait twice as long before the next.
    ...(probeFailed
      ? {
          probeBackoff: Math.min(maxBackoff, 2 * (state.overCap.probeBackoff ?? 1)),
          failedProbeCap: state.overCap.effectiveCap,
        }
      : {}),
    // Refused at the peak: the free threads are below it. Probes climb back by halving the gap.
    refusedThreads: peak,
    effectiveCap: Math.min(before.effectiveCap, shrunk),
  };
  const next: GovernorState = { ...base, probe: { ...base.probe, lastAt: signals.now }, overCap };
  if (shrunk >= before.effectiveCap) return { state: next, shrink: undefined };
  const nextProbe = Math.round((cooldown * (overCap.probeBackoff ?? 1)) / 1000);
  const shrink = probeFailed
    ? `${answers} over-cap answer(s) after the probe: it failed; effective cap back to ${shrunk} of ${planCap(config)}, next probe in ${nextProbe} s at the earliest.`
    : `${answers} over-cap answer(s): others hold about ${before.effectiveCap - shrunk} more thread(s); effective cap now ${shrunk} of ${planCap(config)}, probing back while in flight reaches it.`;
  return { state: next, shrink };
}

/** The running view: over-cap estimate, outage counter and halt hold updated; the totals they allow. */
function runningView(ctx: Omit<TickContext, 'running'>, attempted: number): RunningView {
  const { signals, config, minimum, current, demand, funds } = ctx;
  // With the thread ledger the estimate of others' threads sets the cap (no blind shrink or
  // probe); without it (no ledger, or it could not be read) the metric window's over-cap answers do.
  const assessed =
    signals.threadLedger !== undefined
      ? assessNeighbours(signals.threadLedger, ctx.base, ctx.now, config)
      : { ...assessOverCap({ ...ctx, attempted }), raise: undefined };
  const halted = funds !== undefined && funds.usd < config.haltBalance;
  const erroring = signals.errorRate !== undefined && signals.errorRate > config.errorRateThreshold;
  const allowed = ceilingFor(assessed.state.overCap.effectiveCap, config);
  const noIncrease = Math.max(minimum, Math.min(current.total, allowed));
  // Scaling halts at the crossing with the ceiling clamped to current use, then holds there:
  // re-clamping every tick would ratchet it down with every dip in use.
  let haltCeiling = assessed.state.spend.haltCeiling;
  if (funds !== undefined && !halted) haltCeiling = undefined;
  if (halted && haltCeiling === undefined && demand.inFlight !== undefined) {
    haltCeiling = Math.min(noIncrease, Math.max(minimum, invocations(demand.inFlight, config.tasksPerInvocation)));
  }
  return {
    state: { ...assessed.state, spend: { ...assessed.state.spend, haltCeiling } },
    shrink: assessed.shrink,
    raise: assessed.raise,
    missing: missingSignals(signals, ctx.lanes),
    halted,
    erroring,
    allowed,
    noIncrease,
    haltTotal: Math.min(noIncrease, haltCeiling ?? noIncrease),
  };
}

/**
 * Whether this tick looks like a solver outage, judged per solver request:
 * - the governor's own request, the balance read, got no answer (timeout, connection refused,
 *   HTTP 5xx, unparseable body): the solver looks down whether or not the fleet is busy;
 * - or more than `outageTransientShare` of the consumer's solver requests (submissions + result
 *   requests) in the metric window answered transient errors (ignored within the grace after a
 *   resume: the window may still hold the answers from before the pause).
 * An idle fleet whose balance read answers is not an outage: an empty window is 0 % transient.
 * False when the window is known and mostly healthy; undefined when neither side says.
 */
function outageEvidence(signals: GovernorSignals, config: GovernorConfig, inGrace: boolean): boolean | undefined {
  const unreachable = signals.balance === undefined && signals.balanceError?.kind === 'unreachable';
  const rate = inGrace ? undefined : signals.transientErrorRate;
  const share = config.outageTransientShare ?? DEFAULT_OUTAGE_TRANSIENT_SHARE;
  if (unreachable || (rate !== undefined && rate > share)) return true;
  return rate === undefined ? undefined : false;
}

/** Build the tick's context. */
export function tickContext(signals: GovernorSignals, state: GovernorState, config: GovernorConfig): TickContext {
  const now = signals.now;
  const cooldown = config.probeCooldownMs;
  const lanes = activeLanes(signals, config);
  const current = currentCeilings(signals, state, lanes);
  const demand = demandOf(signals, lanes, config);
  // Threads attempted now, kept for the metric window's span: over-cap answers in a lagging
  // window are judged against what the fleet held then, not against this tick alone.
  const span = config.metricsSpanMs ?? 2 * cooldown;
  const tpi = config.tasksPerInvocation;
  const attemptedNow = demand.inFlight === undefined ? undefined : Math.min(current.total * tpi, demand.inFlight);
  const kept = (state.overCap.recentUse ?? []).filter((u) => u.at < now && now - u.at < span);
  const recentUse = (attemptedNow === undefined ? kept : [...kept, { at: now, threads: attemptedNow }]).slice(
    -MAX_USE_SAMPLES,
  );
  const spend = spendAfter(signals, state);
  const inGrace = state.resumedAt !== undefined && now - state.resumedAt < (config.accountErrorGraceMs ?? cooldown);
  const outageNow = outageEvidence(signals, config, inGrace);
  // Counted paused or not, so a pause for another reason does not hide an outage behind it.
  let outageTicks = state.outage.ticks;
  if (outageNow !== undefined) outageTicks = outageNow ? outageTicks + 1 : 0;
  const base: GovernorState = {
    ...state,
    ceilings: { ...state.ceilings },
    probe: { ...state.probe },
    overCap: {
      ...state.overCap,
      effectiveCap: clamp(state.overCap.effectiveCap, capFloor(config), Math.max(capFloor(config), planCap(config))),
      recentUse,
    },
    spend,
    outage: { ...state.outage, ticks: outageTicks },
  };
  const partial = {
    signals,
    state,
    config,
    now,
    cooldown,
    span,
    minimum: minimumCeiling(config),
    lanes,
    current,
    demand,
    funds: fundsOf(signals, state, spend, config),
    inGrace,
    outageNow,
    accountTrouble: signals.accountErrors !== undefined && signals.accountErrors > 0 && !inGrace,
    base,
  };
  return { ...partial, running: runningView(partial, attemptedNow ?? current.total * tpi) };
}
