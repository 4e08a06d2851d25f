/**
 * The governor's policy: signals + state + config → decision. Pure: no I/O and no clock (time
 * arrives as `signals.now`), so the Lambda, the local runtime, the CLI and the policy lab all
 * run exactly this function.
 *
 * While the account is healthy the ceiling stands at the FREE threads at once (plan − reserved −
 * threads others were seen to hold), divided by the tasks one invocation solves: on Lambda an
 * unused ceiling costs nothing, so it does not trail demand. Guards lower or freeze it, each
 * with a reason code. See docs/governor.md.
 */
import { MAPPING_MIN_CONCURRENCY } from '../settings.js';
import { DEFAULT_DRAIN_TARGET_MS, DEFAULT_MAX_PROBE_BACKOFF, DEFAULT_OUTAGE_TRANSIENT_SHARE } from './config.js';
import type {
  Decision,
  GovernorConfig,
  GovernorSignals,
  GovernorState,
  Lane,
  LaneSignals,
  ReasonCode,
} from './types.js';

export { governorConfigFrom } from './config.js';

/** Weight of the newest balance delta in the smoothed spend rate: a ten-second delta is noisy (a few solves). */
const SPEND_SMOOTHING = 0.3;
/** The balance is projected this many ticks ahead: the next tick, plus one of margin for a noisy rate and a read up to a tick old. */
const PROJECTION_TICKS = 2;
/** Most recent-use samples kept in the state (bounds the DynamoDB item whatever the tick). */
const MAX_USE_SAMPLES = 64;

/** Threads the plan leaves this fleet: plan threads − threads reserved for other users of the key. */
export function planCap(config: GovernorConfig): number {
  return config.planThreads - config.reservedThreads;
}

/** Lowest total ceiling while not paused: the configured minimum, never under the mapping floor. */
export function minimumCeiling(config: GovernorConfig): number {
  return Math.max(MAPPING_MIN_CONCURRENCY, config.minConcurrency);
}

/** Lowest effective cap: the threads the minimum ceiling uses (the fleet cannot run on fewer without pausing). */
export function capFloor(config: GovernorConfig): number {
  return minimumCeiling(config) * config.tasksPerInvocation;
}

/**
 * Total ceiling (invocations, summed over lanes) an effective cap allows:
 * ⌊cap ÷ tasksPerInvocation⌋ clamped to [minimum, maxConcurrency], so ceiling × tasksPerInvocation ≤ cap.
 */
export function ceilingFor(effectiveCap: number, config: GovernorConfig): number {
  const byThreads = Math.floor(effectiveCap / config.tasksPerInvocation);
  return Math.max(minimumCeiling(config), Math.min(config.maxConcurrency, byThreads));
}

/** The state before the first tick: the full plan, ceilings at the free threads. */
export function initialState(config: GovernorConfig, now: number): GovernorState {
  const effectiveCap = Math.max(capFloor(config), planCap(config));
  return {
    effectiveCap,
    lastChangeAt: now,
    lastProbeAt: now,
    pausedReason: undefined,
    pausedSince: undefined,
    outageTicks: 0,
    ceilings: { normal: ceilingFor(effectiveCap, config), high: MAPPING_MIN_CONCURRENCY },
  };
}

interface Current {
  ceilings: Record<Lane, number>;
  enabled: Record<Lane, boolean>;
  /** Sum of the enabled lanes' ceilings. */
  total: number;
}

interface Demand {
  /** Visible messages over the lanes, when every lane's backlog is known. */
  backlog: number | undefined;
  inFlight: number | undefined;
  arrivalRate: number | undefined;
  neededThreads: number | undefined;
}

/**
 * Decide the ceilings for this tick.
 * @param signals what the queues, the consumer's metrics and the solver say now (missing = undefined)
 * @param state what the previous tick persisted (initialState for the first)
 * @param config governorConfigFrom(settings)
 */
export function decide(signals: GovernorSignals, state: GovernorState, config: GovernorConfig): Decision {
  const now = signals.now;
  const cooldown = config.probeCooldownMs;
  const tpi = config.tasksPerInvocation;
  const minimum = minimumCeiling(config);
  const lanes = activeLanes(signals, config);
  const current = currentCeilings(signals, state, lanes);
  const demand = demandOf(signals, lanes, config);
  const next: GovernorState = {
    ...state,
    ceilings: { ...state.ceilings },
    effectiveCap: clamp(state.effectiveCap, capFloor(config), Math.max(capFloor(config), planCap(config))),
  };

  const inGrace = state.resumedAt !== undefined && now - state.resumedAt < (config.accountErrorGraceMs ?? cooldown);
  const accountTrouble = signals.accountErrors !== undefined && signals.accountErrors > 0 && !inGrace;
  const balance = signals.balance;

  // Threads attempted now, kept for the metric window's span: over-cap answers in a lagging
  // window are judged against what the fleet held then, not against this tick alone.
  const span = config.metricsSpanMs ?? 2 * cooldown;
  const maxBackoff = Math.max(1, config.maxProbeBackoff ?? DEFAULT_MAX_PROBE_BACKOFF);
  const attemptedNow = demand.inFlight === undefined ? undefined : Math.min(current.total * tpi, demand.inFlight);
  const kept = (state.recentUse ?? []).filter((u) => u.at < now && now - u.at < span);
  next.recentUse = (attemptedNow === undefined ? kept : [...kept, { at: now, threads: attemptedNow }]).slice(
    -MAX_USE_SAMPLES,
  );

  // Spend rate from successive balance reads (no price signal needed). Frozen while paused, so
  // the projection that paused the fleet is the one that resumes it (no flapping at the level).
  const tickMs = config.tickMs ?? (state.balanceSeen !== undefined ? Math.max(0, now - state.balanceSeen.at) : 0);
  if (balance !== undefined) {
    const seen = state.balanceSeen;
    if (seen !== undefined && now > seen.at && balance <= seen.usd && state.pausedReason === undefined) {
      const observed = (seen.usd - balance) / ((now - seen.at) / 1000);
      next.spendPerSecond =
        state.spendPerSecond === undefined
          ? observed
          : state.spendPerSecond + SPEND_SMOOTHING * (observed - state.spendPerSecond);
    }
    next.balanceSeen = { at: now, usd: balance };
  }
  // Until two reads give a rate, the balance itself is compared (an unknown rate is not a zero balance).
  const projected =
    balance === undefined ? undefined : balance - ((next.spendPerSecond ?? 0) * PROJECTION_TICKS * tickMs) / 1000;

  // Pause guards first: money and the key matter more than throughput.
  if (state.pausedReason === undefined) {
    if (accountTrouble) {
      return paused(
        next,
        'PAUSE_ACCOUNT',
        `account`,
        `Paused: the solver answered ${signals.accountErrors} account error(s)${signals.accountErrorCode ? ` (${signals.accountErrorCode})` : ''}; tasks wait in the queue until a balance read shows the key and IP work again.`,
      );
    }
    if (projected !== undefined && projected < config.pauseBalance) {
      const why =
        (balance as number) < config.pauseBalance
          ? `balance $${fmt(balance as number)} is under the pause level $${fmt(config.pauseBalance)}`
          : `balance $${fmt(balance as number)} will be under the pause level $${fmt(config.pauseBalance)} by the next tick (spending $${fmt4(next.spendPerSecond ?? 0)}/s)`;
      return paused(
        next,
        'PAUSE_LOW_BALANCE',
        'balance',
        `Paused: ${why}; tasks wait in the queue until it is topped up.`,
      );
    }
  } else if (state.pausedReason === 'balance') {
    // A money pause: the balance read is the probe. Resume on the first read that shows funds,
    // straight at the free threads above the halt level (the slow probe is for key, IP and outages).
    if (projected === undefined || projected < config.pauseBalance) {
      const why =
        balance === undefined
          ? 'the balance cannot be read'
          : `balance $${fmt4(balance)}, less ${PROJECTION_TICKS} tick(s) of spending at the last rate, is still under the pause level $${fmt(config.pauseBalance)}`;
      return paused(next, 'PAUSE_LOW_BALANCE', 'balance', `Still paused (balance): ${why}.`);
    }
    next.pausedReason = undefined;
    next.pausedSince = undefined;
    next.resumedAt = now;
    next.lastProbeAt = now;
    next.probeCeiling = undefined;
    next.probeReason = undefined;
    next.outageTicks = 0;
    const free = ceilingFor(next.effectiveCap, config);
    if (signals.errorRate !== undefined && signals.errorRate > config.errorRateThreshold) {
      // Money is back but the answers are failing: no increase past the minimum until they recover.
      next.probeCeiling = minimum;
      next.probeReason = 'resume';
      if ((balance as number) < config.haltBalance) next.haltCeiling = minimum;
      return finish(
        signals,
        next,
        config,
        lanes,
        demand,
        current,
        minimum,
        'PROBE_RESUME',
        `Resumed at the minimum (${minimum}): balance $${fmt(balance as number)} read back, but the error rate ${pct(signals.errorRate)} is over ${pct(config.errorRateThreshold)}.`,
      );
    }
    if ((balance as number) >= config.haltBalance) {
      next.haltCeiling = undefined;
      return finish(
        signals,
        next,
        config,
        lanes,
        demand,
        current,
        free,
        'PROBE_RESUME',
        `Resumed at the free threads (${free}): balance $${fmt(balance as number)} read back above the halt level $${fmt(config.haltBalance)}.`,
      );
    }
    next.haltCeiling = minimum;
    return finish(
      signals,
      next,
      config,
      lanes,
      demand,
      current,
      minimum,
      'PROBE_RESUME',
      `Resumed at the minimum (${minimum}): balance $${fmt(balance as number)} is over the pause level but under the halt level $${fmt(config.haltBalance)}, so scaling stays halted.`,
    );
  } else {
    const waited = now - (state.pausedSince ?? now);
    const balanceOk = balance !== undefined && balance >= config.pauseBalance;
    if (waited < cooldown || !balanceOk) {
      const why =
        waited < cooldown
          ? `probing again in ${Math.ceil((cooldown - waited) / 1000)} s`
          : balance === undefined
            ? 'the balance cannot be read (key rejected, IP banned or solver unreachable)'
            : `balance $${fmt(balance)} is still under the pause level $${fmt(config.pauseBalance)}`;
      return paused(next, 'PAUSE_ACCOUNT', state.pausedReason, `Still paused (${state.pausedReason}): ${why}.`);
    }
    // The probe: a balance read succeeded (the key and IP work) and shows enough money. Resume small.
    next.pausedReason = undefined;
    next.pausedSince = undefined;
    next.resumedAt = now;
    next.lastProbeAt = now;
    next.probeCeiling = minimum;
    next.probeReason = 'resume';
    next.outageTicks = 0;
    const total = Math.min(minimum, ceilingFor(next.effectiveCap, config));
    return finish(
      signals,
      next,
      config,
      lanes,
      demand,
      current,
      total,
      'PROBE_RESUME',
      `Resumed at ${total} after the probe: balance $${fmt(balance)} read back above the pause level; doubling every ${Math.round(cooldown / 1000)} s while healthy.`,
    );
  }

  // Over-cap answers: someone else holds threads. Shrink the effective cap at once by the observed excess.
  let capReason: { code: ReasonCode; message: string } | undefined;
  // One shrink per metric span: answers inside the span after a shrink may predate it. A probe
  // that is not yet known to hold is the exception: it fired on a window without over-cap
  // answers, so answers seen since are new and the probe failed. Shrink back at once (to the
  // level it started from), rather than let every excess invocation retry until the span ends.
  const probeFailed = state.unprovenProbeAt !== undefined;
  if (
    signals.overCapAnswers !== undefined &&
    signals.overCapAnswers > 0 &&
    (probeFailed || now - (state.lastShrinkAt ?? -Infinity) >= Math.max(cooldown, span))
  ) {
    // The answers came while the fleet attempted about the peak of its recent use (in flight,
    // including the invocations backing off), not this tick's use nor the window's average.
    const peak = Math.min(
      next.effectiveCap,
      Math.max(attemptedNow ?? current.total * tpi, ...next.recentUse.map((u) => u.threads)),
    );
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
      state.provenThreads ?? 0,
      Math.min(peak - 1, Math.max(held, peak - backingOff(signals.overCapAnswers))),
    );
    const shrunk = clamp(target, capFloor(config), next.effectiveCap - 1);
    next.lastShrinkAt = now;
    next.lastProbeAt = now;
    next.provenThreads = undefined;
    next.unprovenProbeAt = undefined;
    // Every failed probe costs a burst of over-cap answers: wait twice as long before the next.
    if (probeFailed) {
      next.probeBackoff = Math.min(maxBackoff, 2 * (state.probeBackoff ?? 1));
      next.failedProbeCap = state.effectiveCap;
    }
    // Refused at the peak: the free threads are below it. Probes climb back by halving the gap.
    next.refusedThreads = peak;
    if (shrunk < next.effectiveCap) {
      const cut = next.effectiveCap - shrunk;
      next.effectiveCap = shrunk;
      const nextProbe = Math.round((cooldown * (next.probeBackoff ?? 1)) / 1000);
      capReason = {
        code: 'OVER_CAP_SHRINK',
        message: probeFailed
          ? `${signals.overCapAnswers} over-cap answer(s) after the probe: it failed; effective cap back to ${shrunk} of ${planCap(config)}, next probe in ${nextProbe} s at the earliest.`
          : `${signals.overCapAnswers} over-cap answer(s): others hold about ${cut} more thread(s); effective cap now ${shrunk} of ${planCap(config)}, probing back while in flight reaches it.`,
      };
    }
  } else if (
    probeFailed &&
    signals.overCapAnswers === 0 &&
    testedAtCap(next, state.unprovenProbeAt as number, now, span, config)
  ) {
    // The metric window covered in flight at the probed cap without over-cap answers: the probe
    // held. At the level that failed before (or above), the backoff has done its job: reset it.
    next.unprovenProbeAt = undefined;
    if (next.effectiveCap >= (state.failedProbeCap ?? 0)) {
      next.probeBackoff = undefined;
      next.failedProbeCap = undefined;
    }
  }

  const missing = missingSignals(signals, lanes);
  const halted = balance !== undefined && balance < config.haltBalance;
  const erroring = signals.errorRate !== undefined && signals.errorRate > config.errorRateThreshold;

  // Outage detector: mostly transient answers for several ticks in a row.
  const share = config.outageTransientShare ?? DEFAULT_OUTAGE_TRANSIENT_SHARE;
  if (signals.transientErrorRate !== undefined)
    next.outageTicks = signals.transientErrorRate > share ? state.outageTicks + 1 : 0;

  const allowed = ceilingFor(next.effectiveCap, config);
  const noIncrease = Math.max(minimum, Math.min(current.total, allowed));
  // Scaling halts at the crossing with the ceiling clamped to current use, then holds there:
  // re-clamping every tick would ratchet it down with every dip in use.
  if (balance !== undefined && !halted) next.haltCeiling = undefined;
  if (halted && next.haltCeiling === undefined && demand.inFlight !== undefined) {
    next.haltCeiling = Math.min(noIncrease, Math.max(minimum, invocations(demand.inFlight, tpi)));
  }
  const haltTotal = Math.min(noIncrease, next.haltCeiling ?? noIncrease);

  if (missing.length > 0) {
    return finish(
      signals,
      next,
      config,
      lanes,
      demand,
      current,
      noIncrease,
      capReason?.code ?? 'HOLD_MISSING_SIGNAL',
      `${capReason ? capReason.message + ' ' : ''}Holding the ceiling: ${missing.join(', ')} unknown (missing is never read as zero).`,
      { hold: true },
    );
  }
  if (capReason !== undefined) {
    const total = halted ? haltTotal : erroring ? noIncrease : Math.min(allowed, next.probeCeiling ?? allowed);
    return finish(signals, next, config, lanes, demand, current, total, capReason.code, capReason.message);
  }
  if (halted) {
    const crossing = state.haltCeiling === undefined;
    return finish(
      signals,
      next,
      config,
      lanes,
      demand,
      current,
      haltTotal,
      'HALT_LOW_BALANCE',
      `Scaling halted: balance $${fmt(balance as number)} is under the halt level $${fmt(config.haltBalance)}; ceiling ${crossing ? 'clamped to current use' : 'held at the use when it crossed'} (${haltTotal}), work in progress goes on.`,
    );
  }
  if (next.outageTicks >= config.outageTicks) {
    const total = Math.max(minimum, Math.min(allowed, Math.floor(current.total / 2)));
    next.outageTicks = 0;
    next.probeCeiling = total;
    next.probeReason = 'outage';
    next.lastProbeAt = now;
    return finish(
      signals,
      next,
      config,
      lanes,
      demand,
      current,
      total,
      'OUTAGE_STEP_DOWN',
      `Solver outage: mostly transient errors for ${config.outageTicks} ticks (${pct(signals.transientErrorRate)} of answers); stepping down to ${total} and probing back every ${Math.round(cooldown / 1000)} s.`,
    );
  }
  if (erroring) {
    return finish(
      signals,
      next,
      config,
      lanes,
      demand,
      current,
      noIncrease,
      'HIGH_ERROR_RATE',
      `No increase: error rate ${pct(signals.errorRate)} is over ${pct(config.errorRateThreshold)}.`,
    );
  }

  // Healthy. Probe back what earlier guards took away, one step per cooldown.
  let probe: { code: ReasonCode; message: string } | undefined;
  if (now - state.lastProbeAt >= cooldown) {
    if (next.probeCeiling !== undefined) {
      const doubled = next.probeCeiling * 2;
      const code: ReasonCode = next.probeReason === 'resume' ? 'PROBE_RESUME' : 'OUTAGE_PROBE';
      next.lastProbeAt = now;
      if (doubled >= allowed) {
        next.probeCeiling = undefined;
        next.probeReason = undefined;
        probe = { code, message: `Probe healthy: back at the free threads (${allowed}).` };
      } else {
        next.probeCeiling = doubled;
        probe = {
          code,
          message: `Probe healthy: ceiling up to ${doubled} of ${allowed}; doubling again in ${Math.round(cooldown / 1000)} s.`,
        };
      }
    } else if (
      next.effectiveCap < planCap(config) &&
      signals.overCapAnswers === 0 &&
      now - (state.lastShrinkAt ?? -Infinity) >= cooldown &&
      testedAtCap(next, state.lastProbeAt, now, span, config) &&
      now - state.lastProbeAt >= cooldown * probeWait(next, overCapStep(next))
    ) {
      const step = overCapStep(next);
      next.provenThreads = ceilingFor(next.effectiveCap, config) * tpi;
      next.effectiveCap = Math.min(planCap(config), next.effectiveCap + step);
      next.lastProbeAt = now;
      next.unprovenProbeAt = now;
      probe = {
        code: 'OVER_CAP_PROBE',
        message: `In flight reached the effective cap and no over-cap answers followed: probing back up, effective cap ${next.effectiveCap} of ${planCap(config)}.`,
      };
    }
  }
  const freeCeiling = ceilingFor(next.effectiveCap, config);
  const total = Math.min(freeCeiling, next.probeCeiling ?? freeCeiling);
  if (probe !== undefined)
    return finish(signals, next, config, lanes, demand, current, total, probe.code, probe.message);
  if (next.probeCeiling !== undefined) {
    return finish(
      signals,
      next,
      config,
      lanes,
      demand,
      current,
      total,
      next.probeReason === 'resume' ? 'PROBE_RESUME' : 'OUTAGE_PROBE',
      `Recovering: ceiling ${total} of ${freeCeiling}, next step in ${Math.max(0, Math.ceil((cooldown - (now - next.lastProbeAt)) / 1000))} s.`,
    );
  }
  const idle = demand.backlog === 0 && demand.inFlight === 0 && (demand.arrivalRate ?? 0) === 0;
  if (idle) {
    return finish(
      signals,
      next,
      config,
      lanes,
      demand,
      current,
      total,
      'IDLE',
      `No work queued; ceiling stays at the free threads (${total}) so a burst starts at once.`,
    );
  }
  return finish(
    signals,
    next,
    config,
    lanes,
    demand,
    current,
    total,
    'FREE_THREADS',
    `Ceiling at the free threads: ${total} invocation(s) × ${tpi} task(s) of ${next.effectiveCap} usable thread(s).`,
  );

  function paused(s: GovernorState, code: ReasonCode, why: string, message: string): Decision {
    s.pausedReason = why;
    s.pausedSince = state.pausedReason === undefined ? now : (state.pausedSince ?? now);
    s.outageTicks = 0;
    if (state.pausedReason === undefined) s.lastChangeAt = now;
    return {
      ceilings: { ...current.ceilings },
      enabled: { normal: false, high: false },
      paused: true,
      freeThreads: ceilingFor(s.effectiveCap, config) * tpi,
      ...shortfallOf(demand, signals, config, ceilingFor(s.effectiveCap, config) * tpi, 0),
      reason: { code, message },
      state: s,
    };
  }
}

/** Lanes the decision covers: `normal`, and `high` when configured and observed. */
function activeLanes(signals: GovernorSignals, config: GovernorConfig): Lane[] {
  return config.highLane && signals.lanes.high !== undefined ? ['normal', 'high'] : ['normal'];
}

function currentCeilings(signals: GovernorSignals, state: GovernorState, lanes: Lane[]): Current {
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

function missingSignals(signals: GovernorSignals, lanes: Lane[]): string[] {
  const missing: string[] = [];
  for (const lane of lanes) {
    const l = signals.lanes[lane] as LaneSignals;
    if (l.backlog === undefined) missing.push(`${lane} backlog`);
    if (l.inFlight === undefined) missing.push(`${lane} in flight`);
  }
  if (signals.balance === undefined) missing.push('balance');
  if (signals.errorRate === undefined) missing.push('error rate');
  if (signals.overCapAnswers === undefined) missing.push('over-cap answers');
  if (signals.accountErrors === undefined) missing.push('account errors');
  return missing;
}

function demandOf(signals: GovernorSignals, lanes: Lane[], config: GovernorConfig): Demand {
  const sum = (pick: (l: LaneSignals) => number | undefined): number | undefined => {
    let total = 0;
    for (const lane of lanes) {
      const value = pick(signals.lanes[lane] as LaneSignals);
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

function shortfallOf(
  demand: Demand,
  signals: GovernorSignals,
  config: GovernorConfig,
  freeThreads: number,
  usedThreads: number,
) {
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

/**
 * Split a total ceiling over the lanes. The high lane gets what its in-flight, backlog and
 * arrival rate need first (at least the mapping floor); normal the rest. A lane without work
 * (high) or without room (normal, under the floor) is disabled, so the enabled ceilings never
 * sum above the total.
 */
function split(
  total: number,
  signals: GovernorSignals,
  config: GovernorConfig,
  lanes: Lane[],
  current: Current,
  hold: boolean,
): { ceilings: Record<Lane, number>; enabled: Record<Lane, boolean> } {
  const floor = MAPPING_MIN_CONCURRENCY;
  const keptHigh = Math.max(floor, current.ceilings.high);
  if (!lanes.includes('high'))
    return { ceilings: { normal: total, high: keptHigh }, enabled: { normal: true, high: false } };
  const high = signals.lanes.high as LaneSignals;
  let highNeed: number;
  if (hold) {
    if (!current.enabled.high)
      return { ceilings: { normal: total, high: keptHigh }, enabled: { normal: true, high: false } };
    highNeed = current.ceilings.high;
  } else {
    const queued = (high.backlog ?? 0) + (high.inFlight ?? 0);
    const arriving =
      high.arrivalRate !== undefined && signals.meanSolveMs !== undefined
        ? (high.arrivalRate * signals.meanSolveMs) / 1000
        : (high.arrivalRate ?? 0) > 0
          ? 1
          : 0;
    if (queued === 0 && arriving === 0)
      return { ceilings: { normal: total, high: keptHigh }, enabled: { normal: true, high: false } };
    highNeed = Math.ceil((queued + arriving) / config.tasksPerInvocation - 1e-9);
  }
  const highCeiling = Math.min(total, Math.max(floor, highNeed));
  const rest = total - highCeiling;
  if (rest < floor) {
    return {
      ceilings: { normal: Math.max(floor, current.ceilings.normal), high: Math.max(floor, total) },
      enabled: { normal: false, high: true },
    };
  }
  return { ceilings: { normal: rest, high: highCeiling }, enabled: { normal: true, high: true } };
}

function finish(
  signals: GovernorSignals,
  state: GovernorState,
  config: GovernorConfig,
  lanes: Lane[],
  demand: Demand,
  current: Current,
  total: number,
  code: ReasonCode,
  message: string,
  options: { hold?: boolean } = {},
): Decision {
  const { ceilings, enabled } = split(total, signals, config, lanes, current, options.hold === true);
  const changed =
    ceilings.normal !== current.ceilings.normal ||
    ceilings.high !== current.ceilings.high ||
    enabled.normal !== current.enabled.normal ||
    enabled.high !== current.enabled.high;
  state.ceilings = ceilings;
  if (changed) state.lastChangeAt = signals.now;
  const freeThreads = ceilingFor(state.effectiveCap, config) * config.tasksPerInvocation;
  return {
    ceilings,
    enabled,
    paused: false,
    freeThreads,
    ...shortfallOf(demand, signals, config, freeThreads, total * config.tasksPerInvocation),
    reason: { code, message },
    state,
  };
}

/**
 * Whether demand has tested the effective cap since the last probe, long enough ago for the
 * metric window to cover it (half the window + lag: the lag is at most that). Probing while the
 * fleet does not fill its cap tests nothing and lets the cap drift above the free threads.
 */
function testedAtCap(state: GovernorState, since: number, now: number, span: number, config: GovernorConfig): boolean {
  const capThreads = ceilingFor(state.effectiveCap, config) * config.tasksPerInvocation;
  return (state.recentUse ?? []).some((u) => u.at > since && now - u.at >= span / 2 && u.threads >= capThreads);
}

/** Threads an over-cap probe adds: half the gap to one below the refused level after a deep shrink, else 1. */
function overCapStep(state: GovernorState): number {
  return state.refusedThreads !== undefined && state.refusedThreads - 1 > state.effectiveCap
    ? Math.ceil((state.refusedThreads - 1 - state.effectiveCap) / 2)
    : 1;
}

/**
 * Multiplier of the cooldown before an over-cap probe of `step` threads: the backoff for a probe
 * that reaches the level a probe failed at, 1 for one that re-climbs below it (after a shrink
 * that went deeper than the failed probe's level, that ground is known to hold).
 */
function probeWait(state: GovernorState, step: number): number {
  const reaches = state.failedProbeCap === undefined || state.effectiveCap + step >= state.failedProbeCap;
  return reaches ? (state.probeBackoff ?? 1) : 1;
}

/** Invocations backing off after over-cap answers: at most one per answer, at least one. */
function backingOff(overCapAnswers: number): number {
  return Math.max(1, overCapAnswers);
}

function invocations(messages: number, tasksPerInvocation: number): number {
  return Math.ceil(messages / tasksPerInvocation);
}

function clamp(value: number, low: number, high: number): number {
  return Math.max(low, Math.min(high, value));
}

function fmt(usd: number): string {
  return usd.toFixed(2);
}

function fmt4(usd: number): string {
  return usd.toFixed(4);
}

function pct(rate: number | undefined): string {
  return rate === undefined ? 'unknown' : `${(rate * 100).toFixed(1)} %`;
}
