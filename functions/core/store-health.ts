/**
 * The fleet's own stores as dependencies the governor watches (DESIGN.md invariant 9: when
 * DynamoDB or SQS is down, consumption pauses and tasks wait; receive counts do not burn toward
 * the DLQ). Samples in — the governor's own probe of each store this tick, and the consumers'
 * calls and failures over the metric window (their EMF, which reaches CloudWatch through Logs,
 * not through either store) — verdict out: healthy, an outage to pause for, or a probe.
 *
 * The semantics mirror the solver outage pause (functions/core/governor/guards.ts): an outage
 * after `outageTicks` ticks in a row that look like one; while paused, a probe after the
 * cooldown (the governor's direct read of the store), doubling after each failed probe up to
 * `maxProbeBackoff` × the cooldown; a probe that answers resumes at the minimum (the first tasks
 * are the probe), and failures in the first ticks after it pause again at once.
 *
 * When DynamoDB is down, the governor's own state item and the thread ledger are down with it:
 * this state is small and lives in the governor's memory (the caller keeps it between ticks),
 * never in a store it judges. A cold start mid-outage starts from nothing and pauses after
 * `outageTicks` ticks. Pure: no I/O.
 */
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

export interface StoreHealthConfig {
  /** Ticks in a row that look like an outage before consumption pauses. @default 3 */
  outageTicks: number;
  /** Share of the consumers' calls failing above which a tick looks like an outage. @default 0.5 */
  errorShare: number;
  /** Fewer consumer calls than this in the window say nothing either way. @default 5 */
  minRequests: number;
  /** First wait before probing a paused store, ms (the governor's probe cooldown). */
  probeCooldownMs: number;
  /** Largest multiplier of the cooldown between probes (doubling per failed probe). @default 2 */
  maxProbeBackoff: number;
  /**
   * After a resume, the consumers' window still holds the failures from before the pause: it is
   * not read for this long (the probe's own read still is). @default probeCooldownMs
   */
  graceMs?: number;
}

/** Defaults beside the governor's cooldown, which the caller passes. */
export function storeHealthConfig(
  probeCooldownMs: number,
  overrides: Partial<StoreHealthConfig> = {},
): StoreHealthConfig {
  return { outageTicks: 3, errorShare: 0.5, minRequests: 5, maxProbeBackoff: 2, probeCooldownMs, ...overrides };
}

/** One store's standing. */
export interface StoreStanding {
  status: 'healthy' | 'outage' | 'probing';
  /** Ticks in a row that looked like an outage. */
  badTicks: number;
  /** Outage: since when, epoch ms. */
  since?: number;
  /** Outage: when the next probe is due, epoch ms. */
  probeAt?: number;
  /** Probes that failed in this outage. */
  failedProbes: number;
  /** Probing: when consumption resumed, epoch ms. */
  resumedAt?: number;
  /** The latest evidence, in words. */
  reason?: string;
}

export type StoreHealthState = Partial<Record<StoreName, StoreStanding>>;

/** What the governor does about the stores this tick. */
export type StoreHealthVerdict =
  | { status: 'healthy' }
  /** Pause consumption (mappings disabled): tasks wait in the queue. */
  | { status: 'outage'; store: StoreName; since: number; probeAt: number; reason: string }
  /** Resume at the minimum ceiling: the first tasks are the probe. */
  | { status: 'probing'; store: StoreName; since: number; reason: string };

const LABEL: Record<StoreName, string> = { dynamodb: 'DynamoDB', sqs: 'SQS' };

/** Whether this tick looks like an outage of the store (undefined: nothing says either way), and why. */
function evidenceOf(
  sample: StoreSample | undefined,
  config: StoreHealthConfig,
  readConsumers: boolean,
): { bad: boolean | undefined; reason: string } {
  const label = LABEL[sample?.store ?? 'dynamodb'];
  const probe = sample?.probe;
  const calls = readConsumers ? sample?.consumers : undefined;
  const enough = calls !== undefined && calls.requests >= config.minRequests;
  const share = enough ? calls.errors / calls.requests : undefined;
  if (probe !== undefined && !probe.ok)
    return { bad: true, reason: `the governor's ${label} probe failed (${probe.kind}: ${probe.detail})` };
  if (share !== undefined && share > config.errorShare)
    return {
      bad: true,
      reason: `${Math.round(share * 100)} % of the consumers' ${label} calls failed (${calls?.errors} of ${calls?.requests})`,
    };
  if (probe === undefined && share === undefined) return { bad: undefined, reason: `no ${label} signal this tick` };
  return { bad: false, reason: `${label} answers` };
}

/** The wait before probe number `failed` + 1: the cooldown, doubled per failed probe, capped. */
function probeWait(config: StoreHealthConfig, failed: number): number {
  return config.probeCooldownMs * Math.min(Math.max(1, config.maxProbeBackoff), 2 ** failed);
}

/** One store's next standing. */
function nextStanding(
  previous: StoreStanding | undefined,
  sample: StoreSample | undefined,
  now: number,
  config: StoreHealthConfig,
): StoreStanding {
  const was: StoreStanding = previous ?? { status: 'healthy', badTicks: 0, failedProbes: 0 };
  const grace = config.graceMs ?? config.probeCooldownMs;
  const inGrace = was.status === 'probing' && was.resumedAt !== undefined && now - was.resumedAt < grace;
  const { bad, reason } = evidenceOf(sample, config, !inGrace);
  const badTicks = bad === undefined ? was.badTicks : bad ? was.badTicks + 1 : 0;
  const pause = (failedProbes: number, since: number): StoreStanding => ({
    status: 'outage',
    badTicks,
    since,
    probeAt: now + probeWait(config, failedProbes),
    failedProbes,
    reason,
  });
  if (was.status === 'outage') {
    if (now < (was.probeAt ?? now)) return { ...was, badTicks, ...(bad ? { reason } : {}) };
    // The probe is the governor's own read this tick.
    if (sample?.probe?.ok === true)
      return {
        status: 'probing',
        badTicks: 0,
        failedProbes: was.failedProbes,
        resumedAt: now,
        reason: `${reason} again`,
      };
    return pause(was.failedProbes + 1, was.since ?? now);
  }
  if (was.status === 'probing') {
    // The first tasks after the probe failed: pause again at once, waiting longer before the next.
    if (bad === true) return pause(was.failedProbes + 1, now);
    if (!inGrace && bad === false) return { status: 'healthy', badTicks: 0, failedProbes: 0, reason };
    return { ...was, badTicks };
  }
  if (badTicks >= config.outageTicks) return pause(0, now);
  return { status: 'healthy', badTicks, failedProbes: 0, reason };
}

/**
 * Judge the stores this tick. `previous` is what the last tick returned (undefined at a cold
 * start); a store with no sample keeps its standing, its bad-tick count unchanged.
 */
export function assessStoreHealth(
  previous: StoreHealthState | undefined,
  samples: readonly StoreSample[],
  now: number,
  config: StoreHealthConfig,
): { state: StoreHealthState; verdict: StoreHealthVerdict } {
  const state: StoreHealthState = {};
  for (const store of STORE_NAMES) {
    const sample = samples.find((s) => s.store === store);
    state[store] = nextStanding(previous?.[store], sample, now, config);
  }
  return { state, verdict: verdictOf(state) };
}

/** The worst standing decides: an outage of either store pauses, else a probe of either holds the fleet at the minimum. */
function verdictOf(state: StoreHealthState): StoreHealthVerdict {
  for (const store of STORE_NAMES) {
    const s = state[store];
    if (s?.status === 'outage')
      return {
        status: 'outage',
        store,
        since: s.since ?? 0,
        probeAt: s.probeAt ?? 0,
        reason: `${LABEL[store]} outage: ${s.reason ?? 'no answer'}`,
      };
  }
  for (const store of STORE_NAMES) {
    const s = state[store];
    if (s?.status === 'probing')
      return {
        status: 'probing',
        store,
        since: s.resumedAt ?? 0,
        reason: `probing ${LABEL[store]} after its outage: ${s.reason ?? ''}`.trim(),
      };
  }
  return { status: 'healthy' };
}
