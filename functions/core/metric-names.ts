/**
 * Metric names and dimensions the consumer emits (EMF, namespace from settings) and the
 * governor, the dashboard and the alarms read. One list so the three never drift.
 */
export const METRICS = {
  /** Solve time (solver accepted → answer read), ms, high-resolution values (p95 comes from these). */
  solveDuration: 'SolveDuration',
  /** SQS sent → claim, ms. */
  queueWait: 'QueueWait',
  /** Submitted by the producer → terminal record, ms. */
  endToEnd: 'EndToEnd',
  solved: 'Solved',
  /** Dimension `ErrorCode`. */
  failed: 'Failed',
  /** Dimension `Reason` (over_cap, transient, lease_held, account). */
  retried: 'Retried',
  rejected: 'Rejected',
  /** in.php submissions (accepted or not). */
  submissions: 'SolverSubmissions',
  overCapAnswers: 'OverCapAnswers',
  transientErrors: 'TransientErrors',
  /** Task-terminal answers (unsolvable, bad parameters, …). */
  taskErrors: 'TaskErrors',
  accountErrors: 'AccountErrors',
  /** res.php get requests. */
  resultRequests: 'ResultRequests',
  /** Duplicate deliveries acknowledged without solving. */
  duplicates: 'DuplicateDeliveries',
  /** Token answers delivered after their expiry. */
  tokensStale: 'TokensDeliveredStale',
  /** Completion events not published (the record is written; the message is handed back and the redelivery publishes). */
  eventPublishFailures: 'EventPublishFailures',
  /** Tasks parked (the parked design): submitted, their message hidden until the governor sees the answer. */
  parked: 'Parked',
  /** Messages put back as a fresh copy (near the DLQ, or carrying a submission to the next delivery). */
  requeued: 'Requeued',
  /** The consumer's calls to DynamoDB (results table) in an invocation, and those that failed after the SDK's retries (throttled or unavailable). */
  dynamoRequests: 'DynamoRequests',
  dynamoErrors: 'DynamoErrors',
  /** The consumer's own calls to SQS (visibility, dead letters, deletes, copies), and those that failed. */
  sqsRequests: 'SqsRequests',
  sqsErrors: 'SqsErrors',
  /** What solves cost, USD (learned from the provider or configured), by `service` and by `service` + `Method`. */
  spendUsd: 'SpendUsd',
} as const;

/** Metrics the report function publishes (service `reporter`). */
export const REPORT_METRICS = {
  /** Bad reports the provider accepted: refunds asked for. */
  refunds: 'Refunds',
  /** The cost of the solves those refunds are for, USD (when known). */
  refundsUsd: 'RefundsUsd',
  /** Good reports the provider accepted. */
  goodReports: 'GoodReports',
  /** Dimension `Reason` (a ReportRefusal). */
  reportsRefused: 'ReportsRefused',
  /** A report already settled, sent again: answered from the record, the provider not called. */
  reportsRepeated: 'ReportsRepeated',
  /** Report calls that failed for a passing reason (transient, account): the message is retried. */
  reportErrors: 'ReportErrors',
} as const;

export type MetricName = (typeof METRICS)[keyof typeof METRICS];

/** Metrics the governor publishes. */
export const GOVERNOR_METRICS = {
  ceiling: 'Ceiling',
  needed: 'NeededThreads',
  balance: 'Balance',
  /** Dimension `Reason` (a ReasonCode). */
  decision: 'Decision',
  paused: 'Paused',
  /** A tick that failed (the fleet kept its last ceilings); the invocation then ends in an error for the Errors alarm. */
  tickFailed: 'TickFailed',
  /** Threads the fleet may use now (effective cap after over-cap shrinkage). */
  freeThreads: 'FreeThreads',
  /** Threads the fleet holds at the tick: the thread ledger's count, the live thread leases when it parks. */
  threadsHeld: 'ThreadsHeld',
  /** The parked design: parked tasks the governor's watch recorded since the last tick, and its rounds that failed. */
  parkedRecorded: 'ParkedRecorded',
  watchFailedRounds: 'WatchFailedRounds',
  /** Overflow lane (only with an overflow provider): its ceiling, 0 while closed. */
  overflowCeiling: 'OverflowCeiling',
  /** Invocations the backlog asks of the overflow lane (0 when the primary keeps up). */
  overflowExcess: 'OverflowExcess',
  /** Overflow spend this UTC hour and this UTC day, USD (from the provider's balance reads). */
  overflowSpendHour: 'OverflowSpendHourUsd',
  overflowSpendDay: 'OverflowSpendDayUsd',
  /** The overflow provider's balance, USD. */
  overflowBalance: 'OverflowBalance',
  /** Price per solve the budget used, USD. */
  overflowPrice: 'OverflowPriceUsd',
  /** 1 on a tick where the cap holds the lane narrower than the backlog asks (the alarm's signal). */
  overflowCapReached: 'OverflowCapReached',
  /** Dimension `Reason` (an OverflowReasonCode). */
  overflowDecision: 'OverflowDecision',
} as const;

/** Service dimension values (Powertools `serviceName`). */
export const SERVICES = {
  consumer: 'consumer',
  overflowConsumer: 'consumer-overflow',
  governor: 'governor',
  reporter: 'reporter',
} as const;
