/**
 * The governor's types, all in one place: signals in, a decision out, the state kept between
 * ticks, the stages of the pipeline and the overflow lane. `decideTick(signals, state, config)`
 * in `tick.ts` is pure; time arrives in the signals. Missing values are `undefined`, never 0.
 */

import type { SpendGrant, ThreadLedgerReading } from '../thread-ledger.js';

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
  /**
   * The fleet's own stores as dependencies (DynamoDB, SQS), each with its health this tick; the
   * solver is judged from the balance read and the metric window and is not listed here. Absent:
   * none reported (a store the loop cannot read is reported by the loop, see loop.ts).
   */
  dependencies?: readonly DependencyHealth[];
  /** What the governor's own probe submission (while starved) did since the last tick, when it made one. */
  probe?: ProbeOutcome;
}

/** One dependency's health this tick: down, up, or unknown (no evidence either way). */
export interface DependencyHealth {
  /** A stable name: `results-table`, `tasks-queue`, `governor-state`, … (`solver` is reserved). */
  name: string;
  down: boolean | undefined;
  /** Why, in words (an error name or code; never a secret). */
  detail?: string;
  /** A store: what the consumers' own calls to it said this tick, when they were enough to say (functions/core/store-health.ts). */
  consumers?: 'working' | 'failing';
}

/** The outcome of the governor's probe submission (one per tick while others hold the plan). */
export interface ProbeOutcome {
  /** Epoch ms of the answer. */
  at: number;
  outcome: 'accepted' | 'refused' | 'failed';
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
  | 'SPEND_THE_REST'
  | 'PAUSE_LOW_BALANCE'
  | 'PAUSE_ACCOUNT'
  | 'PAUSE_OUTAGE'
  | 'PROBE_RESUME'
  | 'HIGH_ERROR_RATE'
  | 'OVER_CAP_SHRINK'
  | 'OVER_CAP_PROBE'
  | 'OUTAGE_PROBE'
  | 'WAIT_FOR_THREADS'
  | 'FEW_THREADS'
  | 'IDLE';

/** Every reason code, for counters and docs. */
export const REASON_CODES: readonly ReasonCode[] = [
  'FREE_THREADS',
  'HOLD_MISSING_SIGNAL',
  'HALT_LOW_BALANCE',
  'SPEND_THE_REST',
  'PAUSE_LOW_BALANCE',
  'PAUSE_ACCOUNT',
  'PAUSE_OUTAGE',
  'PROBE_RESUME',
  'HIGH_ERROR_RATE',
  'OVER_CAP_SHRINK',
  'OVER_CAP_PROBE',
  'OUTAGE_PROBE',
  'WAIT_FOR_THREADS',
  'FEW_THREADS',
  'IDLE',
];

/**
 * Why consumption is paused: money ran low, the solver refused the key or the IP, a dependency
 * (the solver, a store) is down, or others hold so much of the plan that fewer threads than the
 * mapping's floor are left (the fleet then probes with one submission per tick).
 */
export type PauseReason = 'balance' | 'account' | 'outage' | 'threads';

/** What a recovery probe ceiling climbs back from (only an account pause climbs; an outage resumes where it was). */
export type RecoveryReason = 'resume';

/** A pause in force: every lane disabled, tasks wait in the queue. */
export interface PauseState {
  reason: PauseReason;
  /** Epoch ms the pause started (a continued pause keeps it). */
  since: number;
  /** An outage pause: the total ceiling before it, where the fleet resumes (an outage says nothing about capacity). */
  resumeTotal?: number;
  /** An outage pause: the threads the ledger counted when it began (the solver resumes those solves after it). */
  heldAtPause?: number;
  /** An outage pause: epoch ms of the first tick every dependency answered again (the solver's paused solves run from then). */
  recoveredAt?: number;
  /** An outage pause: the p95 solve time the metrics showed when it began, ms (the paused solves' length). */
  solveP95Ms?: number;
  /** An account pause: the cause seen when it began (a later tick's signals may no longer carry its code). */
  cause?: string;
}

/** Probing back what an account pause took away. */
export interface ProbeState {
  /** Epoch ms of the last recovery step. */
  lastAt: number;
  /**
   * While recovering from an account pause: the total ceiling may not exceed `ceiling`; it
   * doubles every probe cooldown until it reaches the free threads, then the recovery is cleared.
   */
  recovery?: { ceiling: number; reason: RecoveryReason };
}

/**
 * What the governor believes about the threads it may use beside others on the key, from the
 * thread ledger (neighbours.ts). Persisted, so a cold start begins at the last estimate.
 */
export interface NeighbourEstimate {
  /** Threads this fleet may hold (its own, leftovers included): plan − reserved − what others hold. */
  free: number;
  /**
   * The plan's threads (plan − reserved) the estimate was made on: a plan changed since (a
   * redeploy with other planThreads or reservedThreads) is rebased on, keeping what others were
   * seen to hold. Absent in states saved before it was kept.
   */
  planCap?: number;
  /** Threads the estimate may climb by on the next tick that finds the fleet at it without a refusal: doubles per such tick. */
  step: number;
  /**
   * Refusals a climb may still cost: 1.5 % of the accepted submissions since the estimate began,
   * less the refusals outside the starved probes, at most a few plans' worth (the target is at
   * most 2 % of submissions; an overshooting climb costs refusals).
   */
  budget: number;
  /** Ledger counters already used, so an answer is counted once. */
  seen: { refusals: number; acceptances: number };
  /** Epoch ms of the newest answer used. */
  updatedAt: number;
  /** Epoch ms of the acceptance the last climb came on (refusals soon after are the climb's cost). */
  climbedAt?: number;
  /** The last climb started below the mapping's floor (a starved probe's): its refusals are not charged to the budget. */
  climbedStarved?: boolean;
  /**
   * The last climb was a held test (neighbours.ts `heldTest`): its refusal is charged to the
   * budget, but is not a failed climb (tests come every few ticks the budget pays for; counted as
   * failures they would double the patient climb's wait to its most within minutes).
   */
  climbedHeld?: boolean;
  /**
   * Epoch ms of the first held test of the run the last climb belongs to (a run: held tests with
   * no other climb between, each within a refusal's hold-off and two ticks of the one before:
   * neighbours.ts `heldRunStart`); absent outside a run. The tests' spacing grows with the run's age
   * (neighbours.ts `heldTestSpacingMs`).
   */
  heldSince?: number;
  /**
   * Climbing out of a starved spell: a starved probe was accepted (others handed threads back)
   * and no refusal came since, so each level the fleet fills doubles its step without the budget.
   */
  releasing?: boolean;
  /**
   * The estimate the fleet last stood at, above the mapping's floor, when a submission was
   * accepted outside a refusal's hold: the level a starved spell's release climbs back to at once
   * (others took the threads and handed them back; the spell says nothing about the plan beyond).
   */
  standing?: number;
  /**
   * Climbs that failed (a refusal charged to them) since the fleet last filled the level of the
   * newest failure: each doubles the wait before a climb on borrowed budget (neighbours.ts, a
   * patient climb). Absent: none.
   */
  failed?: { count: number; level: number };
}

/** Solves the solver paused through an outage and still works on after it (OverCapEstimate.carried). */
export interface CarriedThreads {
  /** Threads they held when the solver answered again. */
  threads: number;
  /** When the solver answered again, epoch ms (absent in a state written before it was kept: no decline). */
  since?: number;
  /** When the last of them is done at the latest, epoch ms. */
  until: number;
}

/** The threads this fleet may use, as estimated from the thread ledger. */
export interface OverCapEstimate {
  /** Threads this fleet may use now (plan − reserved − what others hold), never under the mapping floor's. */
  effectiveCap: number;
  /** The estimate of others' threads behind it; absent before the first ledger reading. */
  neighbours?: NeighbourEstimate;
  /** While starved: probe submissions the refusals of the starved ticks leave room for (at most 1). */
  probeCredit?: number;
  /**
   * After an outage: threads the solver still holds for solves it paused through the outage,
   * beyond what the ledger's leases still count (they aged out while it lasted): `threads` when it
   * answered again (`since`), none by `until` (`carriedThreads`: fewer as they end).
   */
  carried?: CarriedThreads;
}

/** The money side: balance reads, the spend rate, the halt hold. */
export interface SpendState {
  /** The last balance read (USD) and when, for the spend rate. */
  lastRead?: { at: number; usd: number };
  /** Money spent per second, smoothed over successive balance reads; used to pause one tick early. */
  perSecond?: number;
  /** While the balance is under the halt level: the total ceiling frozen at the crossing (where it stood then). */
  haltCeiling?: number;
  /**
   * Price per solve learned from the balance, USD: the drops ÷ the solves the thread ledger
   * counted over the last `PRICE_WINDOW_READS` intervals between two reads (price.ts).
   */
  learnedPriceUsd?: number;
  /**
   * The most a solve can cost by the window (price.ts priceBound): the grant counts at it where it
   * is above `learnedPriceUsd` (the plain ratio reads low while counts lag charges).
   */
  priceBoundUsd?: number;
  /**
   * The last intervals' balance drops, the solves counted in them and the solves held at each one's
   * first read, oldest first; it starts over after an interval left out (a top-up, counts unread).
   */
  priceWindow?: Array<{ usd: number; solves: number; heldBefore?: number }>;
  /** The ledger's solved counter at the last balance read (absent when that read's counts were not). */
  solvedSeen?: number | undefined;
  /** The ledger's solves in flight (held) at the last balance read. */
  heldSeen?: number | undefined;
  /** The ledger's acceptance counter at the last balance read (the solves the fleet started between two reads). */
  acceptedSeen?: number;
  /** The spend grant the last tick decided (written to the thread ledger), until a tick decides none. */
  grant?: SpendGrant;
  /**
   * The governor's own balance reads in a row the solver refused for the key or IP (an account
   * error code), and when the last was counted; absent once a read works.
   * `REFUSED_READS_TO_PAUSE` of them pause a running fleet.
   */
  refusedReads?: { count: number; at: number };
}

/**
 * A store outage's way back (functions/core/store-health.ts): consumption resumes on trial, at the
 * minimum ceiling, until the consumers' own calls to the stores since the resume say they work;
 * a trial they say failed pauses again at once, and the next trial waits longer.
 */
export interface StoreTrialState {
  /** The stores seen down in this outage: the trial passes once the consumers' calls to each work. */
  stores: string[];
  /** Epoch ms the current trial began; absent while paused. */
  since?: number;
  /** The total ceiling to resume at once the trial passes (the one before the outage). */
  resumeTotal?: number;
  /** Trials in a row that failed. */
  failures: number;
  /** After a failed trial: no new one before this, epoch ms. */
  notBefore?: number;
}

/** One dependency's record: consecutive ticks it looked down (counted paused or not; healthy resets it). */
export interface DependencyState {
  ticks: number;
  /** Epoch ms of the last tick its own probe got no answer (the solver: the balance read). */
  lastDownAt?: number;
}

/**
 * Persisted between ticks (DynamoDB in AWS, memory locally) so ticks form one control loop.
 * Grouped by concern; a state written by an older shape is migrated on load
 * (`migrateGovernorState` in state.ts).
 */
export interface GovernorState {
  /** The ceilings the last decision set. */
  ceilings: Record<Lane, number>;
  /** Epoch ms of the last ceiling change. */
  lastChangeAt: number;
  /** The pause in force, if any. */
  pause?: PauseState;
  /** Epoch ms the fleet last resumed from a pause (the metric window's old answers are ignored for a grace period). */
  resumedAt?: number;
  probe: ProbeState;
  overCap: OverCapEstimate;
  spend: SpendState;
  /** Per dependency (`solver`, and the stores the loop reports): consecutive down ticks. */
  availability: Record<string, DependencyState>;
  /** While a store outage pauses the fleet, and while its resume is on trial (functions/core/store-health.ts). */
  storeTrial?: StoreTrialState;
  /** What the last tick decided and saw, for `captcha-fleet status` (built by decideTick). */
  lastDecision?: GovernorStatus;
  /** The overflow lane's state (its provider's guards, its spend), when an overflow provider is configured. */
  overflow?: OverflowState;
  /**
   * The thread ledger's count of answers read at the last tick that read it: the parked design's
   * submitters size on the answers read since (submitters.ts, `answeredPerSecond`).
   */
  answers?: { solved: number; at: number };
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
  /** Wait before the first probe of an account pause, and between the recovery's doublings, ms. */
  probeCooldownMs: number;
  /** Ticks in a row a dependency must look down (no balance answer, mostly transient answers) to pause for an outage. */
  outageTicks: number;
  /** Whether the high-priority lane exists. */
  highLane: boolean;
  /**
   * Whether the loop can make the governor's own probe submission (a probe adapter is wired).
   * With it, a fleet others leave fewer threads than the mapping's floor is paused and probes one
   * submission a tick; without it, it runs at the floor (its retries are then its probes).
   * @default false
   */
  probeSubmissions?: boolean;
  /** Time within which queued work should drain when sizing the threads it needs, ms. @default 60_000 */
  drainTargetMs?: number;
  /** Share of answers that are transient errors above which a tick counts toward an outage. @default 0.5 */
  outageTransientShare?: number;
  /** After a resume, the metric window's account errors and transient share are from before the pause and ignored for this long, ms. @default metricsSpanMs, else probeCooldownMs */
  accountErrorGraceMs?: number;
  /**
   * The parked design (solveMode `park`): the ceilings are thread leases and the mappings' maxima
   * the decision's `submitters` (the lanes as they stand are read from the leases then:
   * functions/governor/lease-step.ts). @default false
   */
  parked?: boolean;
  /**
   * The parked watch's gap between two result requests of one submission, ms: the JSON task API's
   * (a request per id, every few seconds); 0 on res.php, whose rounds ask about every parked
   * submission at once, a second apart at most. Where it is above 0, a fleet whose own answers
   * free a thread in the lease-freeing lag does not test a refusal's hold. @default 0
   */
  answerPollGapMs?: number;
  /** Time between ticks, ms: the balance is projected this far ahead (plus one tick of margin). @default the last observed interval */
  tickMs?: number;
  /** How far back the consumer's metric window reaches (window + lag), ms. @default 2 × probeCooldownMs */
  metricsSpanMs?: number;
  /**
   * The longest a solve holds a solver thread, ms: the consumer's function timeout, the thread
   * ledger's lease (a solver id is not answered past it). After an outage, the solves the solver
   * paused through it are counted as the fleet's threads this long at most.
   * @default twice the mean solve time
   */
  threadLeaseMs?: number;
  /**
   * A price per solve the account is told before the balance shows one, USD (the dearest of the
   * fleet's `solverPricesUsd`; an overflow provider's list price, `priceHintUsd`): the spend grant
   * counts by it until a price is learned, and under the halt level a fleet with neither this nor
   * a learned price holds the minimum (stage-stabilize.ts). @default none (the grant counts at
   * UNKNOWN_PRICE_USD until the balance shows the price)
   */
  priceHintUsd?: number;
  /**
   * A fleet that has never read its balance starts paused until a read works: no solve before the
   * money is known (stage-account.ts). The primary plan's (governorConfigFrom); the overflow lane
   * closes on an unknown provider balance by itself (`OVERFLOW_MISSING_SIGNAL`). @default false
   */
  pauseUntilBalanceRead?: boolean;
}

/** The pipeline's stages, in order (pipeline.ts). */
export const STAGE_NAMES = [
  'free-threads',
  'account',
  'availability',
  'neighbours',
  'stabilize',
  'rate-limit',
  'lanes',
] as const;
export type StageName = (typeof STAGE_NAMES)[number];

/** What one stage made of the decision: its value (a total ceiling, or paused) and why. */
export interface StageResult {
  stage: StageName;
  /** The total ceiling after the stage, or `paused`. */
  value: number | 'paused';
  code: ReasonCode;
  message: string;
  /** Whether this stage changed the value or the reason. */
  changed: boolean;
}

/** The primary's decision for one tick: its lanes, whether it pauses, and why. */
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
  /** Each stage's value and reason, in pipeline order. */
  stages: StageResult[];
  /** Make one probe submission this tick (others hold all but fewer threads than the mapping's floor). */
  probe: boolean;
  /**
   * The parked fleet's held test: a refusal holds it to a room it fills while tasks wait, and the
   * ceiling opens one invocation more; lift the hold of the refusals recorded at or before this
   * epoch ms (the ledger's `liftedAt`, and the lease shards' own hold-offs) so a consumer takes it.
   */
  liftHold?: number;
  /**
   * The spend grant to write to the thread ledger: the money above the pause level is nearly
   * spent, and the consumers may start this many more solves (absent: none in force; clear it).
   */
  spendGrant?: SpendGrant;
  /**
   * The parked design: each lane's mapping maximum (invocations that submit and park), when it
   * differs from its thread ceiling (submitters.ts); absent in the waiting design, where the
   * mappings take the ceilings.
   */
  submitters?: Record<Lane, number>;
  /** State to persist for the next tick. */
  state: GovernorState;
}

// ---- the overflow lane ------------------------------------------------------------------------

/** Why the overflow lane stands where it does: stable strings for metrics. */
export type OverflowReasonCode =
  | 'OVERFLOW_CLOSED'
  | 'OVERFLOW_OPEN'
  | 'OVERFLOW_PROBE'
  | 'OVERFLOW_CAP'
  | 'OVERFLOW_GUARD'
  | 'OVERFLOW_MISSING_SIGNAL';

/** Every overflow reason code, for counters and docs. */
export const OVERFLOW_REASON_CODES: readonly OverflowReasonCode[] = [
  'OVERFLOW_CLOSED',
  'OVERFLOW_OPEN',
  'OVERFLOW_PROBE',
  'OVERFLOW_CAP',
  'OVERFLOW_GUARD',
  'OVERFLOW_MISSING_SIGNAL',
];

/** The overflow provider's configuration. */
export interface OverflowConfig {
  /** Queue wait the backlog should drain within (the p95 target), ms. @default 30_000 */
  latencyTargetMs: number;
  /** Spend caps, USD, per fixed UTC hour and per UTC day. */
  capUsdPerHour: number;
  capUsdPerDay: number;
  /** The lane's widest ceiling (invocations). */
  maxConcurrency: number;
  tasksPerInvocation: number;
  /**
   * Price per solve, USD: the provider's list price for the dearest method sent. The budget never
   * prices a solve lower; a learned price above it raises it.
   */
  priceHintUsd: number;
  /** Widest ceiling while no price is learned yet. @default 2 */
  probeCeiling: number;
  /** Fastest solve the provider can return, ms: bounds the solves one slot finishes before the next tick. */
  minSolveMs: number;
  /** Time between ticks, ms (the budget covers this many ms × PROJECTION_TICKS). */
  tickMs: number;
  /** The provider's own governor config: its guards' balance levels, error threshold, outage ticks. */
  provider: GovernorConfig;
}

/** What the overflow provider says this tick (its account, its lane). */
export interface OverflowSignals {
  /** The provider as a governor sees it: its balance, errors, outage signs, its lane's in flight and ceiling. */
  provider: GovernorSignals;
  /** Solves the overflow lane completed since the previous tick's balance read (price learning); undefined when unknown. */
  solvesSinceLastRead: number | undefined;
}

/** The money side of the overflow provider, persisted between ticks. */
export interface OverflowSpend {
  /** Start (epoch ms) of the UTC hour and day the sums cover. */
  hourStart: number;
  hourUsd: number;
  dayStart: number;
  dayUsd: number;
  /** The last balance read. */
  lastRead?: { at: number; usd: number };
  /** The worst case the last tick booked (committed + next solves): the spend assumed when a top-up hides the delta. */
  reservedUsd: number;
  /**
   * Price per solve learned from the balance, USD: the drops ÷ the solves counted over the last
   * `PRICE_WINDOW_READS` intervals between two reads (`priceWindow`).
   */
  learnedPriceUsd?: number;
  /** The last intervals' balance drops and the solves counted in them, oldest first (top-ups left out). */
  priceWindow?: Array<{ usd: number; solves: number }>;
}

/** The overflow lane as the previous tick read it: the base of the rate at which it takes work from the queue. */
export interface OverflowLaneReading {
  /** Epoch ms of the read. */
  at: number;
  inFlight: number;
}

/** Persisted between ticks with the governor's state. */
export interface OverflowState {
  /** The provider's own governor state (its guards). */
  provider: GovernorState;
  spend: OverflowSpend;
  /** The primary's last known mean solve time, ms: sizes the excess while a pause empties the metric window. */
  lastMeanSolveMs?: number;
  /** The lane's in flight at the previous tick (absent before the first tick that read it). */
  lane?: OverflowLaneReading;
}

/** The overflow lane for this tick. */
export interface OverflowDecision {
  enabled: boolean;
  /** Maximum concurrency of the overflow mapping (a closed lane keeps at least the floor, disabled). */
  ceiling: number;
  reason: { code: OverflowReasonCode; message: string };
  /** Invocations the excess asks for (0 when the primary keeps up). */
  excess: number;
  /** Widest ceiling the caps allow this tick. */
  affordable: number;
  /** Price per solve the budget used, USD, and whether it was learned. */
  priceUsd: number;
  priceLearned: boolean;
  state: OverflowState;
}

/** What the overflow function's mappings are set to: the `normal` queue's, and the `high` queue's. */
export interface OverflowMappings {
  ceilings: { normal: number; high: number };
  enabled: { normal: boolean; high: boolean };
}

/** The overflow lane's inputs to a tick: its signals and how its mappings are split. */
export interface OverflowTickInput {
  signals: OverflowSignals;
  /** The visible backlog of each queue (the lane takes the high queue only while the primary is paused). */
  backlog: { normal: number | undefined; high: number | undefined };
  /** Whether the overflow function has a mapping on the high queue. */
  highMapping: boolean;
}

/** The whole decision of one tick, every lane: nothing edits it afterwards. */
export interface TickDecision {
  /** The primary's lanes (high and normal) and why. */
  primary: Decision;
  /** The overflow lane, when an overflow provider is configured. */
  overflow?: { decision: OverflowDecision; mappings: OverflowMappings; signals: OverflowSignals };
  /** What `captcha-fleet status` shows of this tick. */
  status: GovernorStatus;
  /** The state to persist: the primary's, with the overflow lane's and the status in it. */
  state: GovernorState;
}
