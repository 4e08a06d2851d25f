/**
 * The governor's contract: signals in, a decision out. `decide(signals, state, config)` in
 * `policy.ts` is pure; time arrives in the signals. Missing values are `undefined`, never 0.
 */

import type { ThreadLedgerReading } from '../thread-ledger.js';
import type { NeighbourEstimate } from './neighbours.js';
import type { OverflowReasonCode, OverflowState } from './overflow.js';

export const LANES = ['high', 'normal'] as const;
export type Lane = (typeof LANES)[number];

/** What one queue (lane) looks like now. */
export interface LaneSignals {
  /** Visible messages (ApproximateNumberOfMessages). */
  backlog: number | undefined;
  /** Received, not yet deleted (ApproximateNumberOfMessagesNotVisible). */
  inFlight: number | undefined;
  /** Delayed messages (ApproximateNumberOfMessagesDelayed). */
  delayed: number | undefined;
  /** Age of the oldest message, seconds. */
  oldestAgeSeconds: number | undefined;
  /** Tasks arriving per second (recent). */
  arrivalRate: number | undefined;
  /** The mapping's maximum concurrency as it stands. */
  ceiling: number;
  /** False while the mapping is disabled (paused). */
  enabled: boolean;
}

export interface GovernorSignals {
  /** Epoch ms. */
  now: number;
  /** Lanes that exist; `normal` always does. */
  lanes: { normal: LaneSignals; high?: LaneSignals };
  /** Tasks completed per second (recent). */
  completionRate: number | undefined;
  meanSolveMs: number | undefined;
  p95SolveMs: number | undefined;
  /**
   * Share of solver requests in the last window that answered an error:
   * (transient + task errors) ÷ (in.php submissions + res.php result requests).
   */
  errorRate: number | undefined;
  /** Transient errors per solver request, same denominator (outage detector). */
  transientErrorRate: number | undefined;
  /** Over-cap answers per submission in the last window. */
  overCapRate: number | undefined;
  /** Over-cap answers in the last window (count). */
  overCapAnswers: number | undefined;
  /** Account errors in the last window, with the latest code. */
  accountErrors: number | undefined;
  accountErrorCode: string | undefined;
  /** USD; undefined when it could not be read. */
  balance: number | undefined;
  /**
   * Why the balance read failed, when it did and the reader can tell: `unreachable` (no answer,
   * HTTP 5xx, timeouts: the solver looks down), `account` (the key or IP refused), `other`.
   * Absent when the balance was read, or from readers that do not say (then it is only missing).
   */
  balanceError?: BalanceError | undefined;
  /**
   * The consumer's thread ledger (held threads, the newest refusal and acceptance with the
   * threads held then), read this tick. Absent when there is none or it could not be read: the
   * over-cap answers of the metric window are then used as before.
   */
  threadLedger?: ThreadLedgerReading;
}

/** A failed balance read, classified. The code is the solver's or the client's (never the key). */
export interface BalanceError {
  kind: 'unreachable' | 'account' | 'other';
  code: string;
}

/** Reason codes: stable strings for metrics and the `reasons` counters. */
export type ReasonCode =
  | 'FREE_THREADS'
  | 'HOLD_MISSING_SIGNAL'
  | 'HALT_LOW_BALANCE'
  | 'PAUSE_LOW_BALANCE'
  | 'PAUSE_ACCOUNT'
  | 'PAUSE_OUTAGE'
  | 'PROBE_RESUME'
  | 'HIGH_ERROR_RATE'
  | 'OVER_CAP_SHRINK'
  | 'OVER_CAP_PROBE'
  | 'OUTAGE_PROBE'
  | 'IDLE';

/** Every reason code, for counters and docs. */
export const REASON_CODES: readonly ReasonCode[] = [
  'FREE_THREADS',
  'HOLD_MISSING_SIGNAL',
  'HALT_LOW_BALANCE',
  'PAUSE_LOW_BALANCE',
  'PAUSE_ACCOUNT',
  'PAUSE_OUTAGE',
  'PROBE_RESUME',
  'HIGH_ERROR_RATE',
  'OVER_CAP_SHRINK',
  'OVER_CAP_PROBE',
  'OUTAGE_PROBE',
  'IDLE',
];

/** Why consumption is paused: money ran low, the solver refused the key or the IP, or the solver is down. */
export type PauseReason = 'balance' | 'account' | 'outage';

/** What a recovery probe ceiling climbs back from. */
export type RecoveryReason = 'outage' | 'resume';

/** A pause in force: every lane disabled, tasks wait in the queue. */
export interface PauseState {
  reason: PauseReason;
  /** Epoch ms the pause started (a continued pause keeps it). */
  since: number;
  /** An outage pause: epoch ms of the next probe (a balance read); failed probes push it back. */
  probeAt?: number;
}

/** Probing back what the guards took away: over-cap probes and the recovery after a pause or an outage. */
export interface ProbeState {
  /** Epoch ms of the last probe (over-cap or recovery). */
  lastAt: number;
  /**
   * While recovering from an outage or a pause: the total ceiling may not exceed `ceiling`; it
   * doubles every probe cooldown until it reaches the free threads, then the recovery is cleared.
   */
  recovery?: { ceiling: number; reason: RecoveryReason };
}

/** One sample of the threads the fleet attempted at a tick. */
export interface UseSample {
  at: number;
  threads: number;
}

/** What the governor believes about the threads others hold on the key (over-cap answers). */
export interface OverCapEstimate {
  /** Threads this fleet may use now, after over-cap shrinkage; probes back toward the plan. */
  effectiveCap: number;
  /** Epoch ms of the last over-cap shrink (one shrink per cooldown: metric windows lag). */
  lastShrinkAt?: number;
  /**
   * Threads the fleet attempted (min(ceiling × tasks per invocation, in flight)) at recent ticks,
   * kept for as long as the consumer's metric window reaches back: an over-cap answer in that
   * window came while the fleet held about the peak of these, not the window's average use.
   */
  recentUse?: UseSample[];
  /** Threads in use at the cap when the last probe found no over-cap answers: the floor for the next shrink (used once). */
  provenThreads?: number;
  /** Threads attempted when the solver last refused: over-cap probes climb back toward one below it by halving the gap. */
  refusedThreads?: number;
  /**
   * Epoch ms of the last over-cap probe while it is not yet known to hold: cleared when the
   * metric window covers in flight at the probed cap without over-cap answers (it held), or by
   * the shrink its over-cap answers cause (it failed).
   */
  unprovenProbeAt?: number;
  /**
   * Multiplier of the over-cap probe cooldown (1 when absent) for probes to `failedProbeCap` and
   * above: each failed probe doubles it, up to `maxProbeBackoff`, since every failed probe costs a
   * burst of over-cap answers; a probe that holds at that level or above resets it.
   */
  probeBackoff?: number;
  /** Effective cap of the last failed over-cap probe: probes below it climb at the plain cooldown, the backoff applies from it up. */
  failedProbeCap?: number;
  /** The threads others hold, bounded by the thread ledger's refusals and acceptances (neighbours.ts); kept across cold starts. */
  neighbours?: NeighbourEstimate;
}

/** The money side: balance reads, the spend rate, the halt hold. */
export interface SpendState {
  /** The last balance read (USD) and when, for the spend rate. */
  lastRead?: { at: number; usd: number };
  /** Money spent per second, smoothed over successive balance reads; used to pause one tick early. */
  perSecond?: number;
  /** While the balance is under the halt level: the total ceiling frozen at the crossing (current use then). */
  haltCeiling?: number;
}

/** Signs of a solver outage. */
export interface OutageState {
  /** Consecutive ticks that looked like a solver outage (counted paused or not; a resume restarts it). */
  ticks: number;
  /** Outage probes that failed since the outage began (the wait before the next doubles); cleared when the recovery completes. */
  failedProbes?: number;
}

/**
 * Persisted between ticks (DynamoDB in AWS, memory locally) so ticks form one control loop.
 * Grouped by concern; a state written by the older flat shape is migrated on load
 * (`migrateGovernorState` in state.ts).
 */
export interface GovernorState {
  /** The ceilings the last decision set. */
  ceilings: Record<Lane, number>;
  /** Epoch ms of the last ceiling change (cooldowns). */
  lastChangeAt: number;
  /** The pause in force, if any. */
  pause?: PauseState;
  /** Epoch ms the fleet last resumed from a pause (account errors of the old window are ignored for a grace period). */
  resumedAt?: number;
  probe: ProbeState;
  overCap: OverCapEstimate;
  spend: SpendState;
  outage: OutageState;
  /** What the last tick decided and saw, for `captcha-fleet status` (written by the loop on every tick). */
  lastDecision?: GovernorStatus;
  /** The overflow lane's state (its provider's guards, its spend), when an overflow provider is configured. */
  overflow?: OverflowState;
}

/**
 * A summary of one decision and the signals behind it, persisted with the state so an operator
 * can read what the governor last did without running it. Unknown signals are absent (never 0);
 * `drainSeconds` is `null` when arrivals outpace the ceiling (the drain never ends).
 */
export interface GovernorStatus {
  /** Epoch ms of the tick. */
  at: number;
  code: ReasonCode;
  message: string;
  ceilings: Record<Lane, number>;
  enabled: Record<Lane, boolean>;
  paused: boolean;
  freeThreads: number;
  neededThreads?: number;
  shortfall: number;
  drainSeconds?: number | null;
  shortfallWarning: boolean;
  balance?: number;
  backlog: Partial<Record<Lane, number>>;
  inFlight: Partial<Record<Lane, number>>;
  p95SolveMs?: number;
  errorRate?: number;
  /** The overflow lane this tick, when an overflow provider is configured. */
  overflow?: OverflowStatus;
}

/** What `status` shows of the overflow lane: its ceiling, why, and its spend against the caps. */
export interface OverflowStatus {
  enabled: boolean;
  ceiling: number;
  code: OverflowReasonCode;
  message: string;
  /** Invocations the backlog asked for. */
  excess: number;
  inFlight?: number;
  balance?: number;
  hourUsd: number;
  dayUsd: number;
  capUsdPerHour: number;
  capUsdPerDay: number;
  priceUsd: number;
  priceLearned: boolean;
}

export interface GovernorConfig {
  planThreads: number;
  reservedThreads: number;
  minConcurrency: number;
  maxConcurrency: number;
  tasksPerInvocation: number;
  haltBalance: number;
  pauseBalance: number;
  errorRateThreshold: number;
  shortfallBacklog: number;
  shortfallP95Ms: number;
  /** Wait between probes: over-cap probes, doubling after a resume, the first outage and account probes, ms. */
  probeCooldownMs: number;
  /** Ticks of mostly transient answers, or of a balance read that does not answer, that pause for an outage. */
  outageTicks: number;
  /** Whether the high-priority lane exists. */
  highLane: boolean;
  /** Time within which queued work should drain when sizing the threads it needs, ms. @default 60_000 */
  drainTargetMs?: number;
  /** Share of answers that are transient errors above which a tick counts toward an outage. @default 0.5 */
  outageTransientShare?: number;
  /** After a resume, account errors younger than this are from before the pause and ignored, ms. @default probeCooldownMs */
  accountErrorGraceMs?: number;
  /** Time between ticks, ms: the balance is projected this far ahead (plus one tick of margin). @default the last observed interval */
  tickMs?: number;
  /** How far back the consumer's metric window reaches (window + lag), ms. @default 2 × probeCooldownMs */
  metricsSpanMs?: number;
  /** Largest multiplier of the over-cap probe cooldown after failed probes. @default 16 */
  maxProbeBackoff?: number;
  /** Largest multiplier of the probe cooldown between outage probes after failed ones. @default 2 */
  maxOutageProbeBackoff?: number;
  /** Quiet time after which the lower bound of the threads others hold starts to widen, ms. @default 6 ticks (at least 1 s) */
  neighbourDecayMs?: number;
}

export interface Decision {
  /** Maximum concurrency per lane (a disabled lane keeps its last value, ≥ the mapping floor). */
  ceilings: Record<Lane, number>;
  /** Whether each lane's mapping consumes. A lane without work or room is disabled; paused disables both. */
  enabled: Record<Lane, boolean>;
  paused: boolean;
  /** Threads this fleet may use now: effective cap as invocations × tasks per invocation. */
  freeThreads: number;
  /** Threads the work needs (arrival rate × mean solve time + backlog drain), when known. */
  neededThreads: number | undefined;
  /** Threads missing against the free threads (0 when none). */
  shortfall: number;
  /** Seconds to drain the backlog at the current ceiling, when known. */
  drainSeconds: number | undefined;
  /** Whether operators should be warned of a capacity shortfall. */
  shortfallWarning: boolean;
  reason: { code: ReasonCode; message: string };
  /** State to persist for the next tick. */
  state: GovernorState;
}
