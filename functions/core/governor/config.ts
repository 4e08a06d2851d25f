/**
 * The governor's configuration, derived from the fleet settings so the Lambda, the local
 * runtime, the CLI and the policy lab run the policy with the same numbers. Pure.
 */
import { MAPPING_MIN_CONCURRENCY, type FleetSettings } from '../settings.js';
import { pollGapMs } from '../solver-protocol.js';
import { CLOUDWATCH_LAG_MS, DEFAULT_METRICS_WINDOW_MS } from './signals.js';
import type { GovernorConfig } from './types.js';

/**
 * Ticks in a row a dependency looks down (a balance read that gets no answer, mostly transient
 * answers) before consumption pauses: a minute at the default 10 s tick. A shorter blip costs a
 * task one or two receives (the consumer's retries absorb part of it, a hand-back waits 3–10 s)
 * and pausing for it would cost more: a disabled mapping's pollers start over from five when it
 * is enabled again, minutes of ramp on a big plan.
 */
export const DEFAULT_OUTAGE_TICKS = 6;
/**
 * Between ticks, while paused for the solver's outage, the governor reads the balance this often,
 * ms; the first read that answers wakes a tick (functions/governor/outage-recheck.ts).
 */
export const OUTAGE_RECHECK_MS = 2_000;
/** Probe cooldown in ticks: long enough for the consumer's metric window to show the effect of a probe. */
export const PROBE_COOLDOWN_TICKS = 6;
/** Shortest probe cooldown, ms: metric windows (CloudWatch, the local store) need time to fill. */
export const MIN_PROBE_COOLDOWN_MS = 1_000;
/** Default time within which queued work should drain when sizing needed threads, ms. */
export const DEFAULT_DRAIN_TARGET_MS = 60_000;
/** Share of answers that are transient errors above which a tick counts toward an outage. */
export const DEFAULT_OUTAGE_TRANSIENT_SHARE = 0.5;

/**
 * The governor's timing where its metric window comes from CloudWatch (AWS, and the lab that
 * models it): the window covers `DEFAULT_METRICS_WINDOW_MS` and shows `CLOUDWATCH_LAG_MS` late, so
 * an outage or an over-cap answer stays in it that long (`metricsSpanMs`); a probe must be judged
 * on metrics taken after it, so the cooldown outlasts that span (3 min), or old over-cap answers
 * would shrink the cap a second time.
 */
export function cloudWatchTiming(tickMs: number): Pick<GovernorConfig, 'probeCooldownMs' | 'metricsSpanMs'> {
  const metricsSpanMs = DEFAULT_METRICS_WINDOW_MS + CLOUDWATCH_LAG_MS;
  return { probeCooldownMs: Math.max(PROBE_COOLDOWN_TICKS * tickMs, metricsSpanMs), metricsSpanMs };
}

/**
 * The price per solve the primary account is told before its balance shows one: the dearest of
 * `solverPricesUsd` (the fleet may send any of the methods priced), none when no price is set.
 */
function toldPrice(settings: FleetSettings): Pick<GovernorConfig, 'priceHintUsd'> {
  const prices = Object.values(settings.solverPricesUsd ?? {}).filter((p): p is number => p !== undefined);
  return prices.length === 0 ? {} : { priceHintUsd: Math.max(...prices) };
}

/**
 * Governor configuration from fleet settings.
 * @param settings resolved fleet settings (resolveSettings)
 * @param overrides fields to replace, e.g. `{ highLane: true }` when the high queue exists
 */
export function governorConfigFrom(settings: FleetSettings, overrides: Partial<GovernorConfig> = {}): GovernorConfig {
  const tickMs = settings.tickMs;
  return {
    planThreads: settings.planThreads,
    reservedThreads: settings.reservedThreads,
    minConcurrency: Math.max(MAPPING_MIN_CONCURRENCY, settings.minConcurrency),
    maxConcurrency: settings.maxConcurrency,
    tasksPerInvocation: settings.tasksPerInvocation,
    haltBalance: settings.haltBalance,
    pauseBalance: settings.pauseBalance,
    errorRateThreshold: settings.errorRateThreshold,
    shortfallBacklog: settings.shortfallBacklog,
    shortfallP95Ms: settings.shortfallP95Ms,
    probeCooldownMs: Math.max(MIN_PROBE_COOLDOWN_MS, PROBE_COOLDOWN_TICKS * tickMs),
    outageTicks: DEFAULT_OUTAGE_TICKS,
    highLane: false,
    drainTargetMs: DEFAULT_DRAIN_TARGET_MS,
    outageTransientShare: DEFAULT_OUTAGE_TRANSIENT_SHARE,
    tickMs,
    threadLeaseMs: settings.functionTimeoutSeconds * 1000,
    parked: settings.solveMode === 'park',
    answerPollGapMs: pollGapMs(settings.solverProtocol, settings.dialect),
    pauseUntilBalanceRead: true,
    ...toldPrice(settings),
    ...overrides,
  };
}
