/**
 * The fleet's own stores as dependencies the governor watches (DESIGN.md invariant 9, which
 * docs/governor.md extends to DynamoDB and SQS: when a store is down, consumption pauses and tasks
 * wait; receive counts do not burn toward the DLQ). Two parts:
 *
 * - **Evidence.** One tick's evidence of each store — the governor's own probe of it this tick,
 *   and the consumers' calls and failures (their EMF, which reaches CloudWatch through Logs, not
 *   through either store) — judged down, up or unknown: the `{name, down, detail, consumers}` the
 *   availability stage reads (`GovernorSignals.dependencies`). While paused for an outage no
 *   consumer runs and their window holds only the calls from before the pause; after a resume only
 *   the calls since it are read (`consumerCallsView`).
 * - **The way back.** Counting down ticks, pausing and probing every tick are the availability
 *   stage's, the same state machine as a solver outage (functions/core/governor/stage-availability.ts).
 *   A store outage's resume is a trial (a circuit breaker's half-open state): the probe is one read
 *   of a key nobody writes and one GetQueueAttributes, and a store can answer those while the
 *   consumers' writes, sends and deletes keep failing (a throttled write path, a partial outage).
 *   So the fleet resumes at the minimum ceiling; the consumers' calls since the resume decide: a
 *   failed trial pauses again on that tick, and the next trial waits twice as long (from
 *   `outageTicks` ticks up to eight times that); a passed one resumes at the pre-outage ceiling.
 *   A few invocations' receives are what a failed trial costs, not minutes of the whole fleet's.
 *
 * Pure: no I/O.
 */
import { PROBE_COOLDOWN_TICKS } from './governor/config.js';
import type { TickContext } from './governor/context.js';
import { type Flow, pause, run, seconds } from './governor/flow.js';
import type { DependencyHealth, GovernorConfig, GovernorState, StoreTrialState } from './governor/types.js';
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
  /**
   * The consumers' calls to the store over the metric window that failed after the SDK's
   * retries, and how many calls they made. `requests` is absent when it was not asked for: none
   * failed and no trial needs the count (`ConsumerCallsView.counts`).
   */
  consumers?: { requests?: number; errors: number };
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
  const share =
    calls?.requests !== undefined && calls.requests >= config.minRequests ? calls.errors / calls.requests : undefined;
  const name = sample.store;
  const consumers =
    share === undefined ? {} : ({ consumers: share > config.errorShare ? 'failing' : 'working' } as const);
  if (probe !== undefined && !probe.ok)
    return {
      name,
      down: true,
      detail: `the governor's ${label} probe failed (${probe.kind}: ${probe.detail})`,
      ...consumers,
    };
  if (share !== undefined && share > config.errorShare)
    return {
      name,
      down: true,
      detail: `${Math.round(share * 100)} % of the consumers' ${label} calls failed (${calls?.errors} of ${calls?.requests})`,
      ...consumers,
    };
  if (probe === undefined && share === undefined) return { name, down: undefined, detail: `no ${label} signal` };
  return { name, down: false, detail: `${label} answers`, ...consumers };
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
 * Which of the consumers' store calls a tick reads. `counts`: whether it needs how many calls
 * they made whatever failed. Only a store trial does (it passes on calls that worked, `working`);
 * any other tick can change its decision only on failures (`failing`), so the count is asked for
 * only when some failed: in AWS an ordinary minute reads the failures alone (half the metrics).
 */
export type ConsumerCallsView = { read: false } | { read: true; since?: number; counts: boolean };

/**
 * What a read of the consumers' store calls asks: `calls`, the calls and their failures;
 * `failures`, the failures, and the calls only when some failed (a count with none failed changes
 * no decision outside a store trial: `ConsumerCallsView`); `none`, nothing (a tick that may not
 * read them: paused for an outage). The consumer publishes a failure count only when some call
 * failed (functions/consumer/store-calls.ts), in the same document as the calls: none in a window
 * is none failed.
 */
export type StoreCallsWant = 'calls' | 'failures' | 'none';

/** What a tick's view asks of the reader. */
export function storeCallsWant(view: ConsumerCallsView): StoreCallsWant {
  if (!view.read) return 'none';
  return view.counts ? 'calls' : 'failures';
}

/**
 * Which of the consumers' store calls this tick may read: none while paused for an outage (no
 * consumer runs; the window holds the calls from before the pause), only those since the last
 * resume while the window (`metricsSpanMs`, else twice the probe cooldown) still reaches back
 * before it (the calls before the pause are old news; those since are the resume's own
 * evidence), else the whole window; with their count while a store trial is on.
 */
export function consumerCallsView(
  state: GovernorState | undefined,
  now: number,
  config: GovernorConfig,
): ConsumerCallsView {
  if (state === undefined) return { read: true, counts: false };
  if (state.pause?.reason === 'outage') return { read: false };
  const span = config.metricsSpanMs ?? 2 * config.probeCooldownMs;
  const counts = state.storeTrial !== undefined;
  return state.resumedAt !== undefined && now - state.resumedAt < span
    ? { read: true, since: state.resumedAt, counts }
    : { read: true, counts };
}

/** The stores consumers call: a trial waits for their calls to these. */
const CONSUMER_STORES: ReadonlySet<string> = new Set<string>(STORE_NAMES);

/** A failed trial's wait before the next: `outageTicks` ticks, doubling per failure, at most eight times that. */
function trialWaitMs(config: GovernorConfig, failures: number): number {
  const base = config.outageTicks * (config.tickMs ?? config.probeCooldownMs / PROBE_COOLDOWN_TICKS);
  return base * 2 ** Math.min(3, Math.max(0, failures - 1));
}

/** The consumer stores that look down this tick. */
function storesDown(ctx: TickContext): string[] {
  return ctx.dependencies.filter((d) => CONSUMER_STORES.has(d.name) && d.down === true).map((d) => d.name);
}

/**
 * An outage pause (begun or going on) that a store is part of: remember which stores, so its
 * resume goes on trial. The state is returned as it was when no store looks down.
 */
export function noteStoreOutage(ctx: TickContext, state: GovernorState): GovernorState {
  const down = storesDown(ctx);
  if (down.length === 0) return state;
  const trial = state.storeTrial ?? { stores: [], failures: 0 };
  const stores = [...new Set([...trial.stores, ...down])];
  // Paused: no trial runs (a failed one's wait, `notBefore`, stands).
  const { since: _since, resumeTotal: _resumeTotal, ...kept } = trial;
  return { ...state, storeTrial: { ...kept, stores } };
}

/**
 * Paused for an outage and every dependency answers: a failed trial's wait may still hold the
 * fleet (a proposal to stay paused); undefined when it may resume.
 */
export function trialWait(ctx: TickContext, flow: Flow): Flow | undefined {
  const trial = ctx.state.storeTrial;
  if (trial?.notBefore === undefined || ctx.now >= trial.notBefore) return undefined;
  return {
    ...flow,
    proposal: pause(
      'outage',
      'PAUSE_OUTAGE',
      `Still paused (outage): ${trial.stores.join(' and ')} answer the probe, but the consumers' calls failed on the last trial (${trial.failures} in a row); next trial in ${seconds(trial.notBefore - ctx.now)} s.`,
      ctx.state.pause?.resumeTotal,
    ),
  };
}

/**
 * Resume from an outage at `total`: straight there, or, when a store was part of the outage, on
 * trial at the minimum ceiling (the state records the trial; the caller words the reason).
 */
export function resumeOnTrial(
  ctx: TickContext,
  total: number,
  state: GovernorState,
): { total: number; state: GovernorState; trial: boolean } {
  const trial = state.storeTrial;
  if (trial === undefined || trial.stores.length === 0) return { total, state, trial: false };
  const ceiling = Math.min(total, ctx.minimum);
  const storeTrial: StoreTrialState = {
    stores: trial.stores,
    since: ctx.now,
    resumeTotal: total,
    failures: trial.failures,
  };
  return { total: ceiling, state: { ...state, storeTrial }, trial: true };
}

/**
 * A store outage's record that no trial follows (the outage became a money pause, say, and
 * another stage resumed): dropped, so a later outage without a store resumes straight.
 */
export function withoutIdleTrial(flow: Flow): Flow {
  const trial = flow.state.storeTrial;
  if (trial === undefined || trial.since !== undefined) return flow;
  const { storeTrial: _idle, ...state } = flow.state;
  return { ...flow, state };
}

/**
 * Running on trial: the consumers' calls since the resume decide. A store that looks down pauses
 * at once (no `outageTicks` count: the trial is the evidence), the next trial waiting longer;
 * every store of the outage answered by the consumers' own calls passes (the pre-outage ceiling
 * is allowed again); no word either way within the grace holds the trial ceiling, and after it
 * passes too (missing evidence is not a failure, and without consumer calls there is nothing to
 * burn). Undefined when not on trial.
 */
export function storeTrialStep(ctx: TickContext, flow: Flow): Flow | undefined {
  const trial = flow.state.storeTrial;
  if (trial?.since === undefined || flow.proposal.kind === 'pause') return undefined;
  const down = storesDown(ctx);
  if (down.length > 0) return trialFailed(ctx, flow, trial, down);
  const reported = ctx.signals.dependencies ?? [];
  const working = trial.stores.every((name) => reported.find((d) => d.name === name)?.consumers === 'working');
  const grace = ctx.config.accountErrorGraceMs ?? ctx.config.metricsSpanMs ?? ctx.config.probeCooldownMs;
  if (working || ctx.now - trial.since >= grace) return trialPassed(ctx, flow, trial, working);
  const ceiling = Math.min(flow.proposal.total, ctx.minimum);
  return {
    ...flow,
    proposal: run(
      ceiling,
      'OUTAGE_PROBE',
      `On trial after the outage at ${ceiling}: waiting for the consumers' calls to ${trial.stores.join(' and ')} to show they work (${seconds(ctx.now - trial.since)} s so far).`,
    ),
  };
}

/** The trial failed: paused again now, with the resume total kept and the next trial later. */
function trialFailed(ctx: TickContext, flow: Flow, trial: StoreTrialState, down: string[]): Flow {
  const failures = trial.failures + 1;
  const notBefore = ctx.now + trialWaitMs(ctx.config, failures);
  const seen = down.map((name) => ctx.dependencies.find((d) => d.name === name)?.seen ?? name).join('; ');
  return {
    ...flow,
    probe: false,
    state: { ...flow.state, storeTrial: { stores: trial.stores, failures, notBefore } },
    proposal: {
      ...pause(
        'outage',
        'PAUSE_OUTAGE',
        `Paused again: the trial after the outage failed (${seen}); next trial in ${seconds(notBefore - ctx.now)} s.`,
        trial.resumeTotal,
      ),
      heldAtPause: ctx.signals.threadLedger?.held ?? 0,
    },
  };
}

/** The trial passed: back at the ceiling before the outage (within the free threads), the trial forgotten. */
function trialPassed(ctx: TickContext, flow: Flow, trial: StoreTrialState, working: boolean): Flow {
  const { storeTrial: _passed, ...state } = flow.state;
  const total = Math.min(flow.allowed, Math.max(ctx.minimum, trial.resumeTotal ?? flow.allowed));
  const why = working
    ? `the consumers' calls to ${trial.stores.join(' and ')} work again`
    : 'nothing contradicted the probe within the grace';
  return {
    ...flow,
    state,
    proposal: run(total, 'OUTAGE_PROBE', `Trial passed: ${why}; back at ${total}, the ceiling before the outage.`),
  };
}
