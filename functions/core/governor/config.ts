/**
 * The governor's configuration, derived from the fleet settings so the Lambda, the local
 * runtime, the CLI and the policy lab run the policy with the same numbers. Pure.
 */
import { MAPPING_MIN_CONCURRENCY, type FleetSettings } from '../settings.js';
import type { GovernorConfig } from './types.js';

/** Ticks of mostly transient answers, or of a balance read that does not answer, that count as a solver outage. */
export const DEFAULT_OUTAGE_TICKS = 3;
/** Probe cooldown in ticks: long enough for the consumer's metric window to show the effect of a probe. */
export const PROBE_COOLDOWN_TICKS = 6;
/** Shortest probe cooldown, ms: metric windows (CloudWatch, the local store) need time to fill. */
export const MIN_PROBE_COOLDOWN_MS = 1_000;
/** Default time within which queued work should drain when sizing needed threads, ms. */
export const DEFAULT_DRAIN_TARGET_MS = 60_000;
/** Share of answers that are transient errors above which a tick counts toward an outage. */
export const DEFAULT_OUTAGE_TRANSIENT_SHARE = 0.5;
/**
 * Largest multiplier of the over-cap probe cooldown: each failed probe doubles the wait before
 * the next (a failed probe costs a burst of over-cap answers, each retried), a probe that holds
 * resets it. 16 × the cooldown is 96 s locally (1 s ticks) and 48 min in AWS.
 */
export const DEFAULT_MAX_PROBE_BACKOFF = 16;
/**
 * Largest multiplier of the probe cooldown between outage probes: a failed probe doubles the
 * wait, up to 2 × the cooldown (6 min in AWS, 12 s locally). A failed probe costs one balance
 * read, so the cap is low: the fleet resumes at most that long after the solver answers again.
 */
export const DEFAULT_MAX_OUTAGE_PROBE_BACKOFF = 2;

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
    maxProbeBackoff: DEFAULT_MAX_PROBE_BACKOFF,
    maxOutageProbeBackoff: DEFAULT_MAX_OUTAGE_PROBE_BACKOFF,
    tickMs,
    ...overrides,
  };
}
