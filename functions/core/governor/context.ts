/**
 * One tick's context: what every stage of the pipeline reads. Built once per tick from the
 * signals, the previous state and the config, and never changed afterwards: a stage returns the
 * next flow, it does not edit this. Pure.
 */
import { DEFAULT_DRAIN_TARGET_MS, DEFAULT_OUTAGE_TRANSIENT_SHARE } from './config.js';
import { type Current, capFloor, clamp, minimumCeiling, planCap } from './capacity.js';
import { withPriceSample } from './price.js';
import { tickBalanceTtlMs } from './signals.js';
import type {
  DependencyState,
  GovernorConfig,
  GovernorSignals,
  GovernorState,
  Lane,
  LaneSignals,
  SpendState,
} from './types.js';

/** Weight of the newest balance delta in the smoothed spend rate: a ten-second delta is noisy (a few solves). */
const SPEND_SMOOTHING = 0.3;
/** The balance is projected this many ticks ahead: the next tick, plus one of margin for a noisy rate and a read up to a tick old. */
export const PROJECTION_TICKS = 2;
/** The solver's name among the dependencies. */
export const SOLVER = 'solver';
/**
 * A running fleet pauses for its account after this many of the governor's own balance reads in a
 * row refused for the key or IP, before the consumers' account errors reach the metric window (a
 * minute or two later, or never, when the consumers hand every task back first). One refusal alone
 * does not: a pause for the account waits out the probe's cooldown before it resumes.
 */
export const REFUSED_READS_TO_PAUSE = 2;

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

/** One dependency this tick: down, up or unknown, and its consecutive down ticks after this one. */
export interface DependencyView {
  name: string;
  down: boolean | undefined;
  ticks: number;
  /** What it looked like, in words. */
  seen: string;
}

/** Everything a stage reads. Read-only: stages build the next state from `base`. */
export interface TickContext {
  readonly signals: GovernorSignals;
  /** The state the previous tick persisted. */
  readonly state: GovernorState;
  readonly config: GovernorConfig;
  readonly now: number;
  /** Wait between recovery steps after an account pause, ms. */
  readonly cooldown: number;
  /** Lowest total ceiling while not paused. */
  readonly minimum: number;
  readonly lanes: readonly Lane[];
  readonly current: Current;
  readonly demand: Demand;
  /** The balance, when it could be read. */
  readonly funds: Funds | undefined;
  /** Within the grace after a resume: the consumer's metric window may still hold answers from before the pause. */
  readonly inGrace: boolean;
  /**
   * Account errors in the window that are not left over from before the last resume, or
   * `REFUSED_READS_TO_PAUSE` of the governor's balance reads in a row refused for the account.
   */
  readonly accountTrouble: boolean;
  /** The solver and the stores the loop reported, each judged this tick. */
  readonly dependencies: readonly DependencyView[];
  /** Signals that are unknown this tick, in words. */
  readonly missing: readonly string[];
  /** The balance is under the halt level. */
  readonly halted: boolean;
  /** The error rate, less its transient answers (an outage's sign, not a broken fleet's), is over its threshold. */
  readonly erroring: boolean;
  /** The next state every decision starts from: the cap clamped, the spend and the dependency counters updated. */
  readonly base: GovernorState;
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
  if (signals.accountErrors === undefined) missing.push('account errors');
  return missing;
}

/**
 * Spend rate from successive balance reads (no price signal needed). Frozen while paused, so the
 * projection that paused the fleet is the one that resumes it (no flapping at the level). The
 * price per solve is learned beside it: each interval's drop and the solves the thread ledger
 * counted in it (price.ts); an interval with a top-up is left out (its drop is hidden).
 */
function spendAfter(signals: GovernorSignals, state: GovernorState, config: GovernorConfig): SpendState {
  const balance = signals.balance;
  if (balance === undefined)
    return signals.balanceError?.kind === 'account'
      ? { ...state.spend, refusedReads: refusedAgain(state.spend.refusedReads, signals.now, config) }
      : { ...state.spend };
  const { refusedReads: _readAgain, ...spend } = state.spend;
  const seen = state.spend.lastRead;
  let perSecond = state.spend.perSecond;
  if (seen !== undefined && signals.now > seen.at && balance <= seen.usd && state.pause === undefined) {
    const observed = (seen.usd - balance) / ((signals.now - seen.at) / 1000);
    perSecond = perSecond === undefined ? observed : perSecond + SPEND_SMOOTHING * (observed - perSecond);
  }
  const price = priceAfter(signals, state.spend, balance);
  return { ...spend, ...price, lastRead: { at: signals.now, usd: balance }, perSecond };
}

function priceAfter(signals: GovernorSignals, spend: SpendState, balance: number): Partial<SpendState> {
  const reading = signals.threadLedger;
  const solved = reading?.solved;
  const seen = spend.lastRead;
  const before = spend.solvedSeen;
  let { priceWindow, learnedPriceUsd, priceBoundUsd } = spend;
  if (seen !== undefined && balance <= seen.usd && solved !== undefined && before !== undefined && solved >= before) {
    const sample = { usd: seen.usd - balance, solves: solved - before, heldBefore: spend.heldSeen };
    if (sample.usd > 0 || sample.solves > 0)
      ({
        window: priceWindow,
        learned: learnedPriceUsd,
        bound: priceBoundUsd,
      } = withPriceSample(priceWindow, sample, learnedPriceUsd, priceBoundUsd));
  } else if (seen !== undefined && priceWindow !== undefined) {
    // A top-up, or counts unread: the interval is left out and the window starts over after it, so
    // every span of it runs between reads with nothing hidden (the price and its bound kept).
    priceWindow = [];
  }
  return {
    ...(priceWindow !== undefined ? { priceWindow } : {}),
    ...(learnedPriceUsd !== undefined ? { learnedPriceUsd } : {}),
    ...(priceBoundUsd !== undefined ? { priceBoundUsd } : {}),
    // The counts at this read: kept only as a set, so the next interval's counts span its own drop.
    solvedSeen: solved,
    heldSeen: reading?.held,
    ...(reading !== undefined ? { acceptedSeen: reading.acceptances } : {}),
  };
}

/**
 * The refused reads counted once more, unless the last was counted within the time the balance
 * reader keeps a read, a failed one too (`tickBalanceTtlMs`, half a tick), so a tick
 * woken early (an accepted probe) sees the same refusal again, which is not a second one.
 */
function refusedAgain(
  last: SpendState['refusedReads'],
  now: number,
  config: GovernorConfig,
): NonNullable<SpendState['refusedReads']> {
  const sameRead = last !== undefined && now - last.at < tickBalanceTtlMs(config.tickMs ?? 10_000);
  return sameRead ? last : { count: (last?.count ?? 0) + 1, at: now };
}

/** Until two reads give a rate, the balance itself is compared (an unknown rate is not a zero balance). */
function fundsOf(signals: GovernorSignals, state: GovernorState, spend: SpendState, config: GovernorConfig) {
  const balance = signals.balance;
  if (balance === undefined) return undefined;
  const seen = state.spend.lastRead;
  const tickMs = config.tickMs ?? (seen !== undefined ? Math.max(0, signals.now - seen.at) : 0);
  return { usd: balance, projected: balance - ((spend.perSecond ?? 0) * PROJECTION_TICKS * tickMs) / 1000 };
}

/**
 * Whether the solver looks down this tick, judged per solver request:
 * - the governor's own request to it, the balance read, got no answer (timeout, connection
 *   refused, HTTP 5xx, unparseable body): down whether or not the fleet is busy;
 * - or more than `outageTransientShare` of the consumer's solver requests in the metric window
 *   answered transient errors while every balance read of that window answered (in.php failing
 *   while getbalance works). A window that covers a failed balance read, or the grace after a
 *   resume, describes an outage already counted, a minute or two late: it is not new evidence.
 * False when the balance read answered and the window adds nothing; undefined when neither side says.
 */
function solverHealth(signals: GovernorSignals, config: GovernorConfig, recent: RecentDown): DependencyView['down'] {
  const unreachable = signals.balance === undefined && signals.balanceError?.kind === 'unreachable';
  const rate = recent.stale ? undefined : signals.transientErrorRate;
  const share = config.outageTransientShare ?? DEFAULT_OUTAGE_TRANSIENT_SHARE;
  if (unreachable || (rate !== undefined && rate > share)) return true;
  if (signals.balance !== undefined) return false;
  return rate === undefined ? undefined : false;
}

/** Whether the metric window may still show an outage already seen (after a resume, or a failed balance read). */
interface RecentDown {
  stale: boolean;
}

function solverSeen(signals: GovernorSignals, stale: boolean): string {
  const seen: string[] = [];
  if (signals.balance === undefined && signals.balanceError?.kind === 'unreachable')
    seen.push(`the balance read got no answer (${signals.balanceError.code})`);
  if (signals.transientErrorRate !== undefined && !stale)
    seen.push(`${(signals.transientErrorRate * 100).toFixed(1)} % of the solver requests answered transient errors`);
  return seen.length > 0 ? seen.join('; ') : 'no answer';
}

/** The solver and the reported stores, each with its consecutive down ticks after this tick. */
function dependenciesOf(signals: GovernorSignals, state: GovernorState, config: GovernorConfig, inGrace: boolean) {
  const span = config.metricsSpanMs ?? 2 * config.probeCooldownMs;
  const lastDownAt = state.availability[SOLVER]?.lastDownAt;
  const unreachable = signals.balance === undefined && signals.balanceError?.kind === 'unreachable';
  const stale = inGrace || unreachable || (lastDownAt !== undefined && signals.now - lastDownAt < span);
  const reported = (signals.dependencies ?? []).filter((d) => d.name !== SOLVER);
  const inputs = [
    { name: SOLVER, down: solverHealth(signals, config, { stale }), seen: solverSeen(signals, stale) },
    ...reported.map((d) => ({ name: d.name, down: d.down, seen: d.detail ?? (d.down ? 'down' : 'up') })),
  ];
  const availability: Record<string, DependencyState> = {};
  const views: DependencyView[] = inputs.map((d) => {
    const before = state.availability[d.name]?.ticks ?? 0;
    // Unknown keeps the count: a tick without evidence neither confirms nor ends an outage.
    const ticks = d.down === undefined ? before : d.down ? before + 1 : 0;
    availability[d.name] = { ticks };
    return { ...d, ticks };
  });
  const solverDownAt = unreachable ? signals.now : lastDownAt;
  if (solverDownAt !== undefined)
    availability[SOLVER] = { ...(availability[SOLVER] as DependencyState), lastDownAt: solverDownAt };
  return { views, availability };
}

/** Build the tick's context. */
export function tickContext(signals: GovernorSignals, state: GovernorState, config: GovernorConfig): TickContext {
  const now = signals.now;
  const cooldown = config.probeCooldownMs;
  const lanes = activeLanes(signals, config);
  const current = currentCeilings(signals, state, lanes);
  const demand = demandOf(signals, lanes, config);
  const spend = spendAfter(signals, state, config);
  const grace = config.accountErrorGraceMs ?? config.metricsSpanMs ?? cooldown;
  const inGrace = state.resumedAt !== undefined && now - state.resumedAt < grace;
  const { views, availability } = dependenciesOf(signals, state, config, inGrace);
  const funds = fundsOf(signals, state, spend, config);
  const base: GovernorState = {
    ...state,
    ceilings: { ...state.ceilings },
    probe: { ...state.probe },
    overCap: {
      ...state.overCap,
      effectiveCap: clamp(state.overCap.effectiveCap, capFloor(config), Math.max(capFloor(config), planCap(config))),
    },
    spend,
    availability: { ...state.availability, ...availability },
  };
  return {
    signals,
    state,
    config,
    now,
    cooldown,
    minimum: minimumCeiling(config),
    lanes,
    current,
    demand,
    funds,
    inGrace,
    accountTrouble:
      (signals.accountErrors !== undefined && signals.accountErrors > 0 && !inGrace) ||
      (spend.refusedReads?.count ?? 0) >= REFUSED_READS_TO_PAUSE,
    dependencies: views,
    missing: missingSignals(signals, lanes),
    halted: funds !== undefined && funds.usd < config.haltBalance,
    // Transient answers are the availability stage's evidence; the hold is for the errors that are not.
    erroring:
      signals.errorRate !== undefined &&
      signals.errorRate - (signals.transientErrorRate ?? 0) > config.errorRateThreshold,
    base,
  };
}

/**
 * A fleet that has never read its balance and cannot now (`pauseUntilBalanceRead`): no read in
 * its state, no grant, and this tick's read failed.
 */
export function neverReadBalance(ctx: TickContext): boolean {
  const { spend } = ctx.state;
  return (
    ctx.config.pauseUntilBalanceRead === true &&
    ctx.funds === undefined &&
    spend.lastRead === undefined &&
    spend.grant === undefined
  );
}
