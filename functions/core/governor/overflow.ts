/**
 * The overflow policy: when the primary's thread plan cannot keep queue wait within a target,
 * open a lane to a pay-per-solve provider (the same in.php / res.php protocol), sized to the
 * excess, within a spend cap. Pure: no I/O and no clock (time arrives in the signals), so the
 * Lambda, the local runtime and the lab run exactly this function. See docs/governor.md.
 *
 * The provider gets the primary's guards literally: its signals go through `decide()` with its
 * own config and state (pause on its balance, account errors and outages; halt; hold on missing
 * signals), and the overflow lane never exceeds what that decision allows.
 *
 * Spend is budgeted per fixed UTC hour and UTC day. Before opening or growing, the policy books
 * what is already committed (the lane's in-flight solves × price) and the most solves the lane
 * can finish before the tick after next at the new ceiling (each slot at most one solve per
 * `minSolveMs`); only what fits under both caps is allowed. Until a price is learned from the
 * provider's balance deltas ÷ its solves, the configured price hint is the price and the lane
 * opens at most `probeCeiling` wide. The provider's balance above its pause level is budgeted the
 * same way, so the lane's solves never take it under that level.
 *
 * The primary's arrival rate, read on the shared queue, misses what the lane takes from it; the
 * lane's solves and in-flight growth are added back. An open lane stays open while the arrivals
 * outrun the primary, even on an empty queue (the lane emptied it), so a primary's outage keeps
 * the lane open for its length instead of closing it each time it catches up.
 */
import { type FleetSettings, MAPPING_MIN_CONCURRENCY } from '../settings.js';
import { DEFAULT_DRAIN_TARGET_MS, governorConfigFrom } from './config.js';
import { PROJECTION_TICKS } from './context.js';
import { decide } from './pipeline.js';
import { initialState } from './state.js';
import { withPriceSample } from './price.js';
import type {
  Decision,
  GovernorConfig,
  GovernorSignals,
  LaneSignals,
  OverflowConfig,
  OverflowDecision,
  OverflowLaneReading,
  OverflowMappings,
  OverflowReasonCode,
  OverflowSignals,
  OverflowSpend,
  OverflowState,
} from './types.js';

export { PRICE_WINDOW_READS } from './price.js';
export { OVERFLOW_REASON_CODES } from './types.js';
export type {
  OverflowConfig,
  OverflowDecision,
  OverflowLaneReading,
  OverflowReasonCode,
  OverflowSignals,
  OverflowSpend,
  OverflowState,
} from './types.js';

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** Default widest lane (invocations) before a price is learned. */
export const DEFAULT_OVERFLOW_PROBE_CEILING = 2;

/**
 * The policy's config from the fleet's settings; undefined when no overflow provider is
 * configured. The provider's own guards are the primary's, on its balance levels and with its
 * lane as the plan: `maxConcurrency` invocations, nothing reserved, no high lane.
 * @param overrides of the derived governor config the primary uses (tick, cooldowns), applied to the provider's too
 */
export function overflowConfigFrom(
  settings: FleetSettings,
  overrides: Partial<GovernorConfig> = {},
): OverflowConfig | undefined {
  const overflow = settings.overflow;
  if (overflow === undefined) return undefined;
  const base = governorConfigFrom(settings, overrides);
  const provider: GovernorConfig = {
    ...base,
    planThreads: overflow.maxConcurrency * settings.tasksPerInvocation,
    reservedThreads: 0,
    minConcurrency: MAPPING_MIN_CONCURRENCY,
    maxConcurrency: overflow.maxConcurrency,
    haltBalance: overflow.haltBalance,
    pauseBalance: overflow.pauseBalance,
    highLane: false,
    priceHintUsd: overflow.priceHintUsd,
    // An unknown provider balance closes the lane by itself (OVERFLOW_MISSING_SIGNAL), from its first tick.
    pauseUntilBalanceRead: false,
  };
  return {
    latencyTargetMs: overflow.latencyTargetSeconds * 1000,
    capUsdPerHour: overflow.capUsdPerHour,
    capUsdPerDay: overflow.capUsdPerDay,
    maxConcurrency: overflow.maxConcurrency,
    tasksPerInvocation: settings.tasksPerInvocation,
    priceHintUsd: overflow.priceHintUsd,
    probeCeiling: overflow.probeCeiling,
    minSolveMs: Math.round(overflow.minSolveSeconds * 1000),
    tickMs: base.tickMs ?? settings.tickMs,
    provider,
  };
}

/** The state before the first tick. */
export function initialOverflowState(config: OverflowConfig, now: number): OverflowState {
  return {
    provider: {
      ...initialState(config.provider, now),
      ceilings: { normal: MAPPING_MIN_CONCURRENCY, high: MAPPING_MIN_CONCURRENCY },
    },
    spend: { hourStart: floorTo(now, HOUR_MS), hourUsd: 0, dayStart: floorTo(now, DAY_MS), dayUsd: 0, reservedUsd: 0 },
  };
}

function floorTo(ms: number, unit: number): number {
  return Math.floor(ms / unit) * unit;
}

/**
 * Price the budget uses: the hint (the provider's list price for the dearest method sent), or the
 * price learned over the last reads when the balance shows solves dearer than that. Never a learned price
 * under the hint: the provider charges a solve when its worker answers, the consumer counts it
 * when it reads the answer, so a balance drop and the solves counted beside it need not cover the
 * same solves, and a ratio that comes out low would let the lane spend past the cap.
 */
export function budgetPrice(spend: OverflowSpend, config: OverflowConfig): number {
  return Math.max(config.priceHintUsd, spend.learnedPriceUsd ?? 0);
}

/**
 * The spend sums after this tick's balance read: the drop since the last read is added to the
 * current hour and day (a drop that happened before a window began counts in it: conservative).
 * A rise (a top-up) hides the drop, so the worst case the last tick booked is counted instead.
 * The price per solve is the drops ÷ the solves over the last `PRICE_WINDOW_READS` intervals, so
 * a mix that turns dearer shows within that many reads and a count that lags a drop evens out.
 */
export function spendAfterRead(spend: OverflowSpend, signals: OverflowSignals): OverflowSpend {
  const now = signals.provider.now;
  const hourStart = floorTo(now, HOUR_MS);
  const dayStart = floorTo(now, DAY_MS);
  const next: OverflowSpend = {
    ...spend,
    hourStart,
    hourUsd: hourStart === spend.hourStart ? spend.hourUsd : 0,
    dayStart,
    dayUsd: dayStart === spend.dayStart ? spend.dayUsd : 0,
  };
  const balance = signals.provider.balance;
  if (balance === undefined) return next;
  const seen = spend.lastRead;
  let spent = 0;
  if (seen !== undefined) spent = balance <= seen.usd ? seen.usd - balance : spend.reservedUsd;
  const solves = signals.solvesSinceLastRead;
  let window = spend.priceWindow ?? [];
  let learned = spend.learnedPriceUsd;
  // An interval with a drop or solves counted joins the window (a top-up's is left out: its drop
  // is hidden); the learned price is the window's drops ÷ its solves.
  if (seen !== undefined && balance <= seen.usd && solves !== undefined && (solves > 0 || spent > 0))
    ({ window, learned } = withPriceSample(window, { usd: seen.usd - balance, solves }, learned));
  return {
    ...next,
    hourUsd: next.hourUsd + spent,
    dayUsd: next.dayUsd + spent,
    lastRead: { at: now, usd: balance },
    ...(learned !== undefined ? { learnedPriceUsd: learned } : {}),
    ...(window.length > 0 ? { priceWindow: window } : {}),
  };
}

/** The primary's demand and capacity, as the overflow sizing reads them. */
interface PrimaryView {
  /** Threads the primary may use now: its enabled ceilings, within its free threads (0 while paused). */
  capacity: number;
  inFlight: number | undefined;
  backlog: number | undefined;
  /** Tasks per second arriving on the queue, the ones the overflow lane takes included. */
  arrivalRate: number | undefined;
  meanSolveMs: number | undefined;
  /** Whether the overflow lane is open now: an open lane stays open while the primary cannot keep up with the arrivals. */
  laneOpen: boolean;
}

function laneSum(signals: GovernorSignals, pick: (l: LaneSignals) => number | undefined): number | undefined {
  const lanes = [signals.lanes.normal, signals.lanes.high].filter((l): l is LaneSignals => l !== undefined);
  let total = 0;
  for (const lane of lanes) {
    const value = pick(lane);
    if (value === undefined) return undefined;
    total += value;
  }
  return total;
}

/**
 * Tasks per second the overflow lane took from the queue since the previous tick: its solves
 * plus the growth of its in flight. A queue reading that leaves the lane out (its in flight taken
 * out of the count, its solves not among the primary's completions) misses exactly these: add
 * them with `withLaneTake`. 0 when unknown (the first tick, or an unknown solve count).
 */
export function laneTakeRate(signals: OverflowSignals, previous: OverflowLaneReading | undefined): number {
  const inFlight = signals.provider.lanes.normal.inFlight;
  const solves = signals.solvesSinceLastRead;
  const now = signals.provider.now;
  if (previous === undefined || inFlight === undefined || solves === undefined || now <= previous.at) return 0;
  return Math.max(0, (solves + inFlight - previous.inFlight) / ((now - previous.at) / 1000));
}

function primaryView(
  primary: Decision,
  signals: GovernorSignals,
  lastMeanSolveMs: number | undefined,
  tasksPerInvocation: number,
  laneOpen: boolean,
): PrimaryView {
  // What the primary's mappings may hold now: a halt or an error hold can keep it under the free threads.
  const set =
    (primary.enabled.normal ? primary.ceilings.normal : 0) + (primary.enabled.high ? primary.ceilings.high : 0);
  const held = signals.threadLedger?.held;
  return {
    capacity: primary.paused ? 0 : Math.min(primary.freeThreads, set * tasksPerInvocation),
    // The plan's threads in use: the thread ledger's count where it is read. The queues' in flight
    // also counts messages that hold no thread (parked design: hand-backs hidden while they wait
    // for a lease or a retry), and the lane opened, and paid, with half a 4-thread plan idle
    // while both lanes had work. One invocation's threads short of the capacity still count as
    // all in use, as the estimator's "filled" does: a slot changing hands (a solve answered, the
    // next not submitted yet) is no free thread, and on a small plan of short solves the tick
    // seldom found every one held (a 60-task burst on 4 threads opened the lane once in three runs).
    inFlight: held !== undefined ? held + tasksPerInvocation : laneSum(signals, (l) => l.inFlight),
    backlog: laneSum(signals, (l) => l.backlog),
    arrivalRate: laneSum(signals, (l) => l.arrivalRate),
    meanSolveMs: signals.meanSolveMs ?? lastMeanSolveMs,
    laneOpen,
  };
}

/**
 * The primary's signals with the lane's take counted among the normal lane's arrivals, for a
 * caller whose queue reading leaves the lane out (the lab). The loop's `assembleSignals` counts
 * it already (its `sharedNormal`): never add it twice.
 */
export function withLaneTake(signals: GovernorSignals, takeRate: number): GovernorSignals {
  const normal = signals.lanes.normal;
  if (normal.arrivalRate === undefined || takeRate <= 0) return signals;
  return { ...signals, lanes: { ...signals.lanes, normal: { ...normal, arrivalRate: normal.arrivalRate + takeRate } } };
}

/**
 * Invocations the overflow lane needs so the backlog drains within the target: the rate the
 * work asks for (arrivals + backlog ÷ target) less what the primary's capacity solves (Little's
 * law on its mean solve time), times the provider's solve time. 0 while the primary has free
 * threads or keeps up; undefined when a signal it needs is unknown. A closed lane opens only for
 * a backlog; an open one stays open on an empty queue while the arrivals alone outrun the
 * primary (the queue is empty because the lane takes them: in a primary's outage, all of them).
 * A paused primary's rate is 0 whatever its solve time; paused before any solve was timed, the
 * lane asks for `probeCeiling` until one is.
 */
export function overflowExcess(
  view: PrimaryView,
  providerMeanSolveMs: number | undefined,
  config: OverflowConfig,
): number | undefined {
  const { capacity, inFlight, backlog, arrivalRate, meanSolveMs, laneOpen } = view;
  if (capacity > 0 && (inFlight === undefined || inFlight < capacity)) return inFlight === undefined ? undefined : 0;
  const known = (ms: number | undefined): ms is number => ms !== undefined && ms > 0;
  // A paused primary solves nothing whatever its solve time: only a working one needs it known.
  if (backlog === undefined || arrivalRate === undefined || (capacity > 0 && !known(meanSolveMs))) return undefined;
  const target = (config.latencyTargetMs > 0 ? config.latencyTargetMs : DEFAULT_DRAIN_TARGET_MS) / 1000;
  const primaryRate = capacity > 0 && known(meanSolveMs) ? capacity / (meanSolveMs / 1000) : 0;
  const asked = arrivalRate + backlog / target;
  // Draining within the target at the primary's rate: backlog ≤ (rate − arrivals) × target.
  if ((backlog === 0 && !laneOpen) || asked <= primaryRate) return 0;
  const solveMs = known(providerMeanSolveMs) ? providerMeanSolveMs : meanSolveMs;
  // Paused before any solve was timed (an outage from the start): open at the probe width until one is.
  if (!known(solveMs)) return config.probeCeiling;
  return Math.ceil(((asked - primaryRate) * (solveMs / 1000)) / config.tasksPerInvocation - 1e-9);
}

/**
 * Widest ceiling the caps allow: what is left of the hour's and the day's cap, less the
 * committed solves (in flight × price), divided by the most one invocation can spend before the
 * tick after next (tasks per invocation × one solve per `minSolveMs`, rounded up).
 */
export function affordableCeiling(spend: OverflowSpend, inFlight: number, price: number, config: OverflowConfig) {
  const left = Math.min(config.capUsdPerHour - spend.hourUsd, config.capUsdPerDay - spend.dayUsd);
  const committed = inFlight * price;
  const horizonMs = PROJECTION_TICKS * config.tickMs;
  const perInvocation = config.tasksPerInvocation * Math.ceil(horizonMs / Math.max(1, config.minSolveMs)) * price;
  const room = left - committed;
  const affordable = room <= 0 || perInvocation <= 0 ? 0 : Math.floor(room / perInvocation + 1e-9);
  return { affordable: Math.max(0, affordable), committed, perInvocation };
}

/**
 * Widest ceiling the provider's money allows: its balance less its pause level and the committed
 * solves, divided by what one invocation can spend before the tick after next (as for the caps).
 * The guard pauses on a balance already under the level; this keeps the lane's solves, those in
 * flight included, from taking it there.
 */
export function fundedCeiling(
  balance: number,
  budget: { committed: number; perInvocation: number },
  pauseBalance: number,
): number {
  const room = balance - pauseBalance - budget.committed;
  return room <= 0 || budget.perInvocation <= 0 ? 0 : Math.floor(room / budget.perInvocation + 1e-9);
}

function usd(value: number): string {
  return value.toFixed(2);
}

/**
 * Decide the overflow lane for this tick.
 * @param primary this tick's decide() for the primary
 * @param primarySignals the signals that decision read: the normal lane's in flight excludes the overflow
 *   lane's, and its arrival rate counts every task that arrived on the queue, the ones the lane took
 *   included (the loop's `assembleSignals` with `sharedNormal`; the lab through `withLaneTake`)
 * @param signals the overflow provider's signals
 * @param state what the previous tick persisted (initialOverflowState for the first)
 */
export function decideOverflow(
  primary: Decision,
  primarySignals: GovernorSignals,
  signals: OverflowSignals,
  state: OverflowState,
  config: OverflowConfig,
): OverflowDecision {
  const guard = decide(signals.provider, state.provider, config.provider);
  const spend = spendAfterRead(state.spend, signals);
  const lastMeanSolveMs = primarySignals.meanSolveMs ?? state.lastMeanSolveMs;
  const inFlight = signals.provider.lanes.normal.inFlight;
  const price = budgetPrice(spend, config);
  const learned = spend.learnedPriceUsd !== undefined;
  const excess = overflowExcess(
    primaryView(
      primary,
      primarySignals,
      lastMeanSolveMs,
      config.tasksPerInvocation,
      signals.provider.lanes.normal.enabled,
    ),
    signals.provider.meanSolveMs,
    config,
  );
  const laneRead = inFlight === undefined ? {} : { lane: { at: signals.provider.now, inFlight } };
  const budget = affordableCeiling(spend, inFlight ?? 0, price, config);
  const base = { excess: excess ?? 0, affordable: budget.affordable, priceUsd: price, priceLearned: learned };
  const close = (code: OverflowReasonCode, message: string): OverflowDecision => {
    const reserved = budget.committed;
    return {
      ...base,
      enabled: false,
      ceiling: Math.max(MAPPING_MIN_CONCURRENCY, signals.provider.lanes.normal.ceiling),
      reason: { code, message },
      state: { provider: guard.state, spend: { ...spend, reservedUsd: reserved }, lastMeanSolveMs, ...laneRead },
    };
  };
  if (guard.paused) return close('OVERFLOW_GUARD', `Overflow closed by its provider's guard: ${guard.reason.message}`);
  // Spend that cannot be read cannot be budgeted: nothing new is started until it can.
  if (signals.provider.balance === undefined || inFlight === undefined)
    return close('OVERFLOW_MISSING_SIGNAL', "Overflow closed: the provider's balance or in flight is unknown.");
  if (excess === undefined)
    return close(
      'OVERFLOW_MISSING_SIGNAL',
      "Overflow closed: the primary's backlog, arrivals or solve time is unknown.",
    );
  if (excess === 0)
    return close(
      'OVERFLOW_CLOSED',
      'Overflow closed: the primary has free threads or drains the backlog within the target.',
    );
  const funded = fundedCeiling(signals.provider.balance, budget, config.provider.pauseBalance);
  const limits = [
    { code: 'OVERFLOW_OPEN' as const, at: Math.min(Math.max(MAPPING_MIN_CONCURRENCY, excess), config.maxConcurrency) },
    { code: 'OVERFLOW_GUARD' as const, at: Math.min(guard.ceilings.normal, funded) },
    { code: 'OVERFLOW_PROBE' as const, at: learned ? Number.POSITIVE_INFINITY : config.probeCeiling },
    { code: 'OVERFLOW_CAP' as const, at: budget.affordable },
  ];
  const ceiling = Math.min(...limits.map((l) => l.at));
  const code = limits.find((l) => l.at === ceiling)?.code ?? 'OVERFLOW_OPEN';
  // An event source mapping's maximum concurrency cannot go under the floor: narrower than that is closed.
  if (ceiling < MAPPING_MIN_CONCURRENCY) {
    const why =
      code === 'OVERFLOW_CAP'
        ? `at the cap: $${usd(spend.hourUsd)} this hour of $${usd(config.capUsdPerHour)}, $${usd(spend.dayUsd)} today of $${usd(config.capUsdPerDay)}, $${usd(budget.committed)} committed; the backlog still misses the target`
        : code === 'OVERFLOW_GUARD'
          ? `by its provider's guard: it allows ${guard.ceilings.normal}, and $${usd(signals.provider.balance)} less $${usd(budget.committed)} committed funds ${funded} above the pause level $${usd(config.provider.pauseBalance)}; under the mapping floor`
          : `the probe allows ${ceiling}, under the mapping floor`;
    return close(code, `Overflow closed ${why}.`);
  }
  const reserved = budget.committed + ceiling * budget.perInvocation;
  return {
    ...base,
    enabled: true,
    ceiling,
    reason: {
      code,
      message: `Overflow open at ${ceiling} (excess ${excess}, affordable ${budget.affordable} at $${price.toFixed(5)}/solve${learned ? '' : ' (hint)'}, provider allows ${guard.ceilings.normal}, funds ${funded}).`,
    },
    state: { provider: guard.state, spend: { ...spend, reservedUsd: reserved }, lastMeanSolveMs, ...laneRead },
  };
}

/**
 * The lane's ceiling over the overflow function's two mappings. The plan serves the high lane
 * first, so overflow takes the normal queue; only while the primary is paused (an outage, its
 * money, its key) does it take the high queue too, or priority tasks would wait behind the pause
 * while normal ones are solved. Then the high mapping gets its share of the ceiling by backlog
 * (rounded up; each enabled mapping at least the floor), or all of it when the ceiling cannot
 * feed two mappings. The two maxima never sum past the decision's ceiling.
 */
export function splitOverflowCeiling(
  decision: Pick<OverflowDecision, 'ceiling' | 'enabled'>,
  primaryPaused: boolean,
  backlog: { normal: number | undefined; high: number | undefined },
  hasHighMapping: boolean,
): OverflowMappings {
  const floor = MAPPING_MIN_CONCURRENCY;
  const normalOnly: OverflowMappings = {
    ceilings: { normal: decision.ceiling, high: floor },
    enabled: { normal: decision.enabled, high: false },
  };
  const high = backlog.high ?? 0;
  if (!decision.enabled || !primaryPaused || !hasHighMapping || high <= 0) return normalOnly;
  const total = decision.ceiling;
  if (total < 2 * floor) return { ceilings: { normal: floor, high: total }, enabled: { normal: false, high: true } };
  const normal = backlog.normal ?? 0;
  const share = Math.ceil((total * high) / (high + normal));
  const highCeiling = Math.min(total - floor, Math.max(floor, share));
  return {
    ceilings: { normal: total - highCeiling, high: highCeiling },
    enabled: { normal: true, high: true },
  };
}
