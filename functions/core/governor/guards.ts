/**
 * The guards of decide(), one concern each. A guard reads the tick's context and returns a
 * proposal (what to set, why, and the state to persist) or nothing, and then the next guard
 * in GUARD_ORDER (policy.ts) is asked. Pure; no guard edits the context.
 */
import { DEFAULT_MAX_OUTAGE_PROBE_BACKOFF } from './config.js';
import { PROJECTION_TICKS, type TickContext, testedAtCap } from './context.js';
import { ceilingFor, planCap } from './capacity.js';
import type { GovernorState, OverCapEstimate, PauseReason, ReasonCode } from './types.js';

/** Consumption stops: every lane disabled, tasks wait in the queue. */
export interface PauseProposal {
  kind: 'pause';
  reason: PauseReason;
  code: ReasonCode;
  message: string;
  /** An outage pause: when the next probe is due. */
  probeAt?: number;
  /** The next state, before the pause itself is recorded in it. */
  state: GovernorState;
}

/** Consumption goes on at a total ceiling, split over the lanes. */
export interface RunProposal {
  kind: 'run';
  total: number;
  code: ReasonCode;
  message: string;
  state: GovernorState;
  /** A signal is missing: the lanes keep their shares rather than being sized again. */
  hold?: boolean;
}

export type Proposal = PauseProposal | RunProposal;

/** One step of the decision: a proposal, or nothing to let the next guard decide. */
export type Guard = (ctx: TickContext) => Proposal | undefined;

function fmt(usd: number): string {
  return usd.toFixed(2);
}

function fmt4(usd: number): string {
  return usd.toFixed(4);
}

function pct(rate: number | undefined): string {
  return rate === undefined ? 'unknown' : `${(rate * 100).toFixed(1)} %`;
}

function seconds(ms: number): number {
  return Math.round(ms / 1000);
}

function pause(ctx: TickContext, reason: PauseReason, code: ReasonCode, message: string): PauseProposal {
  return { kind: 'pause', reason, code, message, state: ctx.base };
}

function run(total: number, code: ReasonCode, message: string, state: GovernorState): RunProposal {
  return { kind: 'run', total, code, message, state };
}

/** The state of a fleet that resumes now; `recovery` limits the ceiling while it proves itself. */
function resumed(ctx: TickContext, recovery: GovernorState['probe']['recovery']): GovernorState {
  return {
    ...ctx.base,
    pause: undefined,
    resumedAt: ctx.now,
    probe: { lastAt: ctx.now, recovery },
    outage: { ...ctx.base.outage, ticks: 0 },
  };
}

// ---- pause and resume: money and the key matter more than throughput ---------------------------

/** Account error codes by the cause an operator fixes; any other account code leaves the key unusable. */
const ACCOUNT_CAUSES: Readonly<Record<string, string>> = {
  ERROR_WRONG_USER_KEY: 'key rejected',
  ERROR_KEY_DOES_NOT_EXIST: 'key rejected',
  IP_BANNED: 'IP banned',
  ERROR_IP_BANNED: 'IP banned',
  ERROR_IP_NOT_ALLOWED: 'IP banned',
};

/**
 * The cause behind the account errors, from the code the consumer's metrics carry or, where
 * they carry none (CloudWatch counts, the local store), the code the balance read was refused with.
 */
export function accountCause(ctx: Pick<TickContext, 'signals'>): string {
  const { accountErrorCode, balanceError } = ctx.signals;
  const code = accountErrorCode ?? (balanceError?.kind === 'account' ? balanceError.code : undefined);
  if (code === undefined) return 'key or IP refused (no error code seen)';
  return `${ACCOUNT_CAUSES[code] ?? 'key unusable'} (${code})`;
}

/** Why the balance read failed, as far as the reader could tell: the solver unreachable, or the account's cause. */
function unreadableCause(ctx: Pick<TickContext, 'signals'>): string {
  const failed = ctx.signals.balanceError;
  if (failed?.kind === 'unreachable') return `solver unreachable (${failed.code})`;
  if (failed?.kind === 'account' || ctx.signals.accountErrorCode !== undefined) return accountCause(ctx);
  return failed === undefined ? 'no reason given' : `${failed.code}`;
}

/** Account errors (rejected key, banned IP) outside the grace after a resume: pause. */
export const pauseOnAccountErrors: Guard = (ctx) => {
  if (ctx.state.pause !== undefined || !ctx.accountTrouble) return undefined;
  return pause(
    ctx,
    'account',
    'PAUSE_ACCOUNT',
    `Paused: the solver answered ${ctx.signals.accountErrors} account error(s): ${accountCause(ctx)}; tasks wait in the queue until a balance read shows the key and IP work again.`,
  );
};

/** The balance is, or by the tick after next will be, under the pause level: pause. */
export const pauseOnLowBalance: Guard = (ctx) => {
  const { funds, config } = ctx;
  if (ctx.state.pause !== undefined || funds === undefined || funds.projected >= config.pauseBalance) return undefined;
  const why =
    funds.usd < config.pauseBalance
      ? `balance $${fmt(funds.usd)} is under the pause level $${fmt(config.pauseBalance)}`
      : `balance $${fmt(funds.usd)} will be under the pause level $${fmt(config.pauseBalance)} by the next tick (spending $${fmt4(ctx.base.spend.perSecond ?? 0)}/s)`;
  return pause(ctx, 'balance', 'PAUSE_LOW_BALANCE', `Paused: ${why}; tasks wait in the queue until it is topped up.`);
};

/** Wait before outage probe number `failed` + 1: the cooldown, doubled per failed probe, capped. */
function outageProbeWait(ctx: TickContext, failed: number): number {
  const cap = Math.max(1, ctx.config.maxOutageProbeBackoff ?? DEFAULT_MAX_OUTAGE_PROBE_BACKOFF);
  return ctx.cooldown * Math.min(cap, 2 ** failed);
}

/** What the outage looked like this tick, in words. */
function outageSeen(ctx: TickContext): string {
  const { signals } = ctx;
  const seen: string[] = [];
  if (signals.balance === undefined && signals.balanceError?.kind === 'unreachable')
    seen.push(`the balance read got no answer (${signals.balanceError.code})`);
  if (signals.transientErrorRate !== undefined && !ctx.inGrace)
    seen.push(`${pct(signals.transientErrorRate)} of the solver requests answered transient errors`);
  return seen.length > 0 ? seen.join('; ') : 'no answer';
}

/**
 * A solver outage: `outageTicks` ticks in a row looked like one, or the first tasks after an
 * outage probe failed. Pause like for account errors: tasks wait in the queue instead of burning
 * receives toward the DLQ. Before the missing-signal hold, which an outage makes fire (the
 * balance cannot be read) and which would keep the mappings consuming.
 */
export const pauseOnOutage: Guard = (ctx) => {
  const { state, config, now } = ctx;
  if (state.pause !== undefined) return undefined;
  const sustained = ctx.base.outage.ticks >= config.outageTicks;
  const probeFailed = state.probe.recovery?.reason === 'outage' && ctx.outageNow === true;
  if (!sustained && !probeFailed) return undefined;
  const failed = probeFailed ? (state.outage.failedProbes ?? 0) + 1 : 0;
  const wait = outageProbeWait(ctx, failed);
  const why = probeFailed
    ? 'the first tasks after the probe failed'
    : `${ctx.base.outage.ticks} tick(s) looked like an outage`;
  return {
    ...pause(
      ctx,
      'outage',
      'PAUSE_OUTAGE',
      `Paused: solver outage (${why}: ${outageSeen(ctx)}); tasks wait in the queue, their receive counts do not grow; probing the solver with a balance read in ${seconds(wait)} s.`,
    ),
    state: { ...ctx.base, outage: { ...ctx.base.outage, failedProbes: failed } },
    probeAt: now + wait,
  };
};

/**
 * An outage pause: at each probe time a balance read is the probe. When it answers with money
 * above the pause level, resume at the minimum (the first tasks are the probe) and double every
 * cooldown while healthy; when it does not, wait twice as long (up to the cap) before the next.
 */
export const whilePausedForOutage: Guard = (ctx) => {
  const { funds, config, now } = ctx;
  const paused = ctx.state.pause;
  if (paused?.reason !== 'outage') return undefined;
  const probeAt = paused.probeAt ?? paused.since + ctx.cooldown;
  if (now < probeAt) {
    return {
      ...pause(
        ctx,
        'outage',
        'PAUSE_OUTAGE',
        `Still paused (outage): probing the solver in ${Math.ceil((probeAt - now) / 1000)} s.`,
      ),
      probeAt,
    };
  }
  if (funds === undefined) {
    const failed = (ctx.state.outage.failedProbes ?? 0) + 1;
    const wait = outageProbeWait(ctx, failed);
    return {
      ...pause(
        ctx,
        'outage',
        'PAUSE_OUTAGE',
        `Still paused (outage): the probe failed (${outageSeen(ctx)}); probing again in ${seconds(wait)} s.`,
      ),
      state: { ...ctx.base, outage: { ...ctx.base.outage, failedProbes: failed } },
      probeAt: now + wait,
    };
  }
  if (funds.projected < config.pauseBalance) {
    return pause(
      ctx,
      'balance',
      'PAUSE_LOW_BALANCE',
      `Still paused: the solver answers again, but balance $${fmt(funds.usd)} is under the pause level $${fmt(config.pauseBalance)}; tasks wait in the queue until it is topped up.`,
    );
  }
  const state = resumed(ctx, { ceiling: ctx.minimum, reason: 'outage' });
  const total = Math.min(ctx.minimum, ceilingFor(state.overCap.effectiveCap, config));
  return run(
    total,
    'OUTAGE_PROBE',
    `Resumed at ${total} after the outage probe: the solver answered a balance read ($${fmt(funds.usd)}); the first tasks are the probe, doubling every ${seconds(ctx.cooldown)} s while healthy.`,
    state,
  );
};

/**
 * A money pause: the balance read is the probe. Resume on the first read that shows funds,
 * straight at the free threads above the halt level (the slow probe is for key, IP and outages).
 */
export const whilePausedForBalance: Guard = (ctx) => {
  const { funds, config, signals, minimum } = ctx;
  if (ctx.state.pause?.reason !== 'balance') return undefined;
  if (funds === undefined || funds.projected < config.pauseBalance) {
    const why =
      funds === undefined
        ? 'the balance cannot be read'
        : `balance $${fmt4(funds.usd)}, less ${PROJECTION_TICKS} tick(s) of spending at the last rate, is still under the pause level $${fmt(config.pauseBalance)}`;
    return pause(ctx, 'balance', 'PAUSE_LOW_BALANCE', `Still paused (balance): ${why}.`);
  }
  const state = resumed(ctx, undefined);
  const usd = fmt(funds.usd);
  const underHalt = funds.usd < config.haltBalance;
  if (signals.errorRate !== undefined && signals.errorRate > config.errorRateThreshold) {
    // Money is back but the answers are failing: no increase past the minimum until they recover.
    const spend = underHalt ? { ...state.spend, haltCeiling: minimum } : state.spend;
    return run(
      minimum,
      'PROBE_RESUME',
      `Resumed at the minimum (${minimum}): balance $${usd} read back, but the error rate ${pct(signals.errorRate)} is over ${pct(config.errorRateThreshold)}.`,
      { ...state, spend, probe: { ...state.probe, recovery: { ceiling: minimum, reason: 'resume' } } },
    );
  }
  if (!underHalt) {
    const free = ceilingFor(state.overCap.effectiveCap, config);
    return run(
      free,
      'PROBE_RESUME',
      `Resumed at the free threads (${free}): balance $${usd} read back above the halt level $${fmt(config.haltBalance)}.`,
      { ...state, spend: { ...state.spend, haltCeiling: undefined } },
    );
  }
  return run(
    minimum,
    'PROBE_RESUME',
    `Resumed at the minimum (${minimum}): balance $${usd} is over the pause level but under the halt level $${fmt(config.haltBalance)}, so scaling stays halted.`,
    { ...state, spend: { ...state.spend, haltCeiling: minimum } },
  );
};

/**
 * A key or IP pause: wait a cooldown, then probe with a balance read. When it answers (the key
 * and IP work) with enough money, resume small and double while healthy.
 */
export const whilePausedForAccount: Guard = (ctx) => {
  const { funds, config, cooldown } = ctx;
  const paused = ctx.state.pause;
  if (paused?.reason !== 'account') return undefined;
  const waited = ctx.now - paused.since;
  if (waited < cooldown || funds === undefined || funds.usd < config.pauseBalance) {
    let why: string;
    if (waited < cooldown) why = `${accountCause(ctx)}; probing again in ${Math.ceil((cooldown - waited) / 1000)} s`;
    else if (funds === undefined) why = `the balance cannot be read: ${unreadableCause(ctx)}`;
    else why = `balance $${fmt(funds.usd)} is still under the pause level $${fmt(config.pauseBalance)}`;
    return pause(ctx, 'account', 'PAUSE_ACCOUNT', `Still paused (${paused.reason}): ${why}.`);
  }
  const state = resumed(ctx, { ceiling: ctx.minimum, reason: 'resume' });
  const total = Math.min(ctx.minimum, ceilingFor(state.overCap.effectiveCap, config));
  return run(
    total,
    'PROBE_RESUME',
    `Resumed at ${total} after the probe: balance $${fmt(funds.usd)} read back above the pause level; doubling every ${seconds(cooldown)} s while healthy.`,
    state,
  );
};

// ---- running: hold, shrink, halt, errors -----------------------------------------------

/** A signal is unknown: hold the ceiling (missing is never read as zero). */
export const holdOnMissingSignal: Guard = (ctx) => {
  const r = ctx.running;
  if (r.missing.length === 0) return undefined;
  return {
    ...run(
      r.noIncrease,
      r.shrink !== undefined ? 'OVER_CAP_SHRINK' : 'HOLD_MISSING_SIGNAL',
      `${r.shrink !== undefined ? `${r.shrink} ` : ''}Holding the ceiling: ${r.missing.join(', ')} unknown (missing is never read as zero).`,
      r.state,
    ),
    hold: true,
  };
};

/** The effective cap shrank on over-cap answers: apply it at once (within the halt and error holds). */
export const shrinkOnOverCap: Guard = (ctx) => {
  const r = ctx.running;
  if (r.shrink === undefined) return undefined;
  const recovery = r.state.probe.recovery?.ceiling ?? r.allowed;
  let total = Math.min(r.allowed, recovery);
  if (r.halted) total = r.haltTotal;
  else if (r.erroring) total = r.noIncrease;
  return run(total, 'OVER_CAP_SHRINK', r.shrink, r.state);
};

/** The balance is under the halt level: the ceiling freezes at the use when it crossed. */
export const haltOnLowBalance: Guard = (ctx) => {
  const { running: r, funds, config } = ctx;
  if (!r.halted || funds === undefined) return undefined;
  const crossing = ctx.state.spend.haltCeiling === undefined;
  return run(
    r.haltTotal,
    'HALT_LOW_BALANCE',
    `Scaling halted: balance $${fmt(funds.usd)} is under the halt level $${fmt(config.haltBalance)}; ceiling ${crossing ? 'clamped to current use' : 'held at the use when it crossed'} (${r.haltTotal}), work in progress goes on.`,
    r.state,
  );
};

/** The error rate is over its threshold: no increase. */
export const holdOnHighErrorRate: Guard = (ctx) => {
  const { running: r, config, signals } = ctx;
  if (!r.erroring) return undefined;
  return run(
    r.noIncrease,
    'HIGH_ERROR_RATE',
    `No increase: error rate ${pct(signals.errorRate)} is over ${pct(config.errorRateThreshold)}.`,
    r.state,
  );
};

// ---- healthy: probe back what earlier guards took away, one step per cooldown ------------------

function cooldownPassed(ctx: TickContext): boolean {
  return ctx.now - ctx.state.probe.lastAt >= ctx.cooldown;
}

/** Recovering after a pause, healthy for a cooldown: double the recovery ceiling. */
export const probeRecovery: Guard = (ctx) => {
  const { running: r, cooldown } = ctx;
  const recovery = r.state.probe.recovery;
  if (recovery === undefined || !cooldownPassed(ctx)) return undefined;
  const code: ReasonCode = recovery.reason === 'resume' ? 'PROBE_RESUME' : 'OUTAGE_PROBE';
  const doubled = recovery.ceiling * 2;
  if (doubled >= r.allowed) {
    // Recovered: an outage that comes back later is a new one, its probes start at one cooldown.
    const outage = recovery.reason === 'outage' ? { ...r.state.outage, failedProbes: undefined } : r.state.outage;
    const state = { ...r.state, outage, probe: { lastAt: ctx.now, recovery: undefined } };
    return run(r.allowed, code, `Probe healthy: back at the free threads (${r.allowed}).`, state);
  }
  const state = { ...r.state, probe: { lastAt: ctx.now, recovery: { ...recovery, ceiling: doubled } } };
  return run(
    doubled,
    code,
    `Probe healthy: ceiling up to ${doubled} of ${r.allowed}; doubling again in ${seconds(cooldown)} s.`,
    state,
  );
};

/** Recovering, the cooldown not yet over: stay at the recovery ceiling. */
export const holdRecovery: Guard = (ctx) => {
  const { running: r, cooldown, now } = ctx;
  const recovery = r.state.probe.recovery;
  if (recovery === undefined) return undefined;
  const total = Math.min(r.allowed, recovery.ceiling);
  const nextStep = Math.max(0, Math.ceil((cooldown - (now - r.state.probe.lastAt)) / 1000));
  return run(
    total,
    recovery.reason === 'resume' ? 'PROBE_RESUME' : 'OUTAGE_PROBE',
    `Recovering: ceiling ${total} of ${r.allowed}, next step in ${nextStep} s.`,
    r.state,
  );
};

/** Threads an over-cap probe adds: half the gap to one below the refused level after a deep shrink, else 1. */
function overCapStep(overCap: OverCapEstimate): number {
  return overCap.refusedThreads !== undefined && overCap.refusedThreads - 1 > overCap.effectiveCap
    ? Math.ceil((overCap.refusedThreads - 1 - overCap.effectiveCap) / 2)
    : 1;
}

/**
 * Multiplier of the cooldown before an over-cap probe of `step` threads: the backoff for a probe
 * that reaches the level a probe failed at, 1 for one that re-climbs below it (after a shrink
 * that went deeper than the failed probe's level, that ground is known to hold).
 */
function probeWait(overCap: OverCapEstimate, step: number): number {
  const reaches = overCap.failedProbeCap === undefined || overCap.effectiveCap + step >= overCap.failedProbeCap;
  return reaches ? (overCap.probeBackoff ?? 1) : 1;
}

/** In flight filled the shrunk cap with no over-cap answers since: probe one step back up. */
export const probeOverCap: Guard = (ctx) => {
  const { running: r, config, now, cooldown, state: before } = ctx;
  // With the thread ledger the estimate probes (one spare invocation): no blind step on top.
  if (ctx.signals.threadLedger !== undefined) return undefined;
  const overCap = r.state.overCap;
  const step = overCapStep(overCap);
  const ready =
    cooldownPassed(ctx) &&
    overCap.effectiveCap < planCap(config) &&
    ctx.signals.overCapAnswers === 0 &&
    now - (before.overCap.lastShrinkAt ?? Number.NEGATIVE_INFINITY) >= cooldown &&
    testedAtCap(overCap, before.probe.lastAt, now, ctx.span, config) &&
    now - before.probe.lastAt >= cooldown * probeWait(overCap, step);
  if (!ready) return undefined;
  const effectiveCap = Math.min(planCap(config), overCap.effectiveCap + step);
  const state: GovernorState = {
    ...r.state,
    probe: { ...r.state.probe, lastAt: now },
    overCap: {
      ...overCap,
      provenThreads: ceilingFor(overCap.effectiveCap, config) * config.tasksPerInvocation,
      effectiveCap,
      unprovenProbeAt: now,
    },
  };
  return run(
    ceilingFor(effectiveCap, config),
    'OVER_CAP_PROBE',
    `In flight reached the effective cap and no over-cap answers followed: probing back up, effective cap ${effectiveCap} of ${planCap(config)}.`,
    state,
  );
};

/** Nothing queued, in flight or arriving: stay at the free threads so a burst starts at once. */
export const stayReadyWhileIdle: Guard = (ctx) => {
  const { demand, running: r } = ctx;
  if (demand.backlog !== 0 || demand.inFlight !== 0 || (demand.arrivalRate ?? 0) !== 0) return undefined;
  return run(
    r.allowed,
    'IDLE',
    `No work queued; ceiling stays at the free threads (${r.allowed}) so a burst starts at once.`,
    r.state,
  );
};

/** Healthy: the ceiling at the free threads. Always proposes (the last step). */
export function atFreeThreads(ctx: TickContext): RunProposal {
  const { running: r, config } = ctx;
  return run(
    r.allowed,
    'FREE_THREADS',
    `Ceiling at the free threads: ${r.allowed} invocation(s) × ${config.tasksPerInvocation} task(s) of ${r.state.overCap.effectiveCap} usable thread(s).`,
    r.state,
  );
}
