/**
 * The fleet's own stores as dependencies the governor watches (DESIGN.md invariant 9, which
 * docs/governor.md extends to DynamoDB and SQS: when a store is down, consumption pauses and tasks
 * wait; receive counts do not burn toward the DLQ). This module judges one tick's evidence of each
 * store — the governor's own probe of it this tick, and the consumers' calls and failures over the
 * metric window (their EMF, which reaches CloudWatch through Logs, not through either store) — and
 * says, per store, down, up or unknown: the `{name, down, detail}` the governor's availability
 * stage reads (`GovernorSignals.dependencies`).
 *
 * It keeps no state: counting ticks in a row, pausing, probing every tick and resuming at the
 * ceiling held before the outage are the availability stage's, the same state machine as a solver
 * outage (functions/core/governor/stage-availability.ts). What it needs from that state is one
 * flag, `consumersStale`: while paused for an outage, and for the grace after a resume, the
 * consumers' window still holds the failures from before the pause and says nothing new (the
 * probe alone speaks then). Pure: no I/O.
 */
import type { DependencyHealth, GovernorConfig, GovernorState } from './governor/types.js';
import type { StoreFailureKind, StoreName } from './ports.js';

export const STORE_NAMES: readonly StoreName[] = ['dynamodb', 'sqs'];

/** The governor's own read of one store this tick. */
export type StoreProbe =
  | { ok: true; latencyMs?: number }
  | { ok: false; kind: Exclude<StoreFailureKind, 'too_large'>; detail: string };

/** What one tick knows of one store. Either part may be missing (not probed, no metrics yet). */
export interface StoreSample {
  store: StoreName;
  probe?: StoreProbe;
  /** The consumers' calls to the store over the metric window, and those that failed after the SDK's retries. */
  consumers?: { requests: number; errors: number };
}

export interface StoreEvidenceConfig {
  /** Share of the consumers' calls failing above which a tick looks like an outage. @default 0.5 */
  errorShare: number;
  /** Fewer consumer calls than this in the window say nothing either way. @default 5 */
  minRequests: number;
}

export const STORE_EVIDENCE_DEFAULTS: StoreEvidenceConfig = { errorShare: 0.5, minRequests: 5 };

const LABEL: Record<StoreName, string> = { dynamodb: 'DynamoDB', sqs: 'SQS' };

/**
 * One store this tick: down when the governor's probe failed or more than `errorShare` of the
 * consumers' calls failed (unless `consumersStale`), up when either answers, unknown when
 * neither says. The detail names error classes only (never a message that could carry a secret).
 */
export function storeHealthOf(
  sample: StoreSample,
  options: { consumersStale: boolean },
  config: StoreEvidenceConfig = STORE_EVIDENCE_DEFAULTS,
): DependencyHealth {
  const label = LABEL[sample.store];
  const probe = sample.probe;
  const calls = options.consumersStale ? undefined : sample.consumers;
  const share = calls !== undefined && calls.requests >= config.minRequests ? calls.errors / calls.requests : undefined;
  const name = sample.store;
  if (probe !== undefined && !probe.ok)
    return { name, down: true, detail: `the governor's ${label} probe failed (${probe.kind}: ${probe.detail})` };
  if (share !== undefined && share > config.errorShare)
    return {
      name,
      down: true,
      detail: `${Math.round(share * 100)} % of the consumers' ${label} calls failed (${calls?.errors} of ${calls?.requests})`,
    };
  if (probe === undefined && share === undefined) return { name, down: undefined, detail: `no ${label} signal` };
  return { name, down: false, detail: `${label} answers` };
}

/** Every sampled store this tick. */
export function storeDependencies(
  samples: readonly StoreSample[],
  options: { consumersStale: boolean },
  config: StoreEvidenceConfig = STORE_EVIDENCE_DEFAULTS,
): DependencyHealth[] {
  return samples.map((s) => storeHealthOf(s, options, config));
}

/**
 * Whether the consumers' window is old news this tick: paused for an outage (no consumer runs;
 * what the window holds is from before the pause), or within the grace after a resume (the
 * window still reaches back into the outage). The grace is the one the availability stage uses
 * for the solver's window: `accountErrorGraceMs`, else `metricsSpanMs`, else the probe cooldown.
 */
export function consumersStale(state: GovernorState | undefined, now: number, config: GovernorConfig): boolean {
  if (state === undefined) return false;
  if (state.pause?.reason === 'outage') return true;
  const grace = config.accountErrorGraceMs ?? config.metricsSpanMs ?? config.probeCooldownMs;
  return state.resumedAt !== undefined && now - state.resumedAt < grace;
}
