/**
 * Names the AWS stack and the code it runs must agree on beyond the settings: the governor's
 * state item (IAM allows the governor that one key), the placeholder the stack puts in a new
 * secret, and the keys of the stack's outputs (the CLI reads them). Pure constants.
 */

/**
 * Partition key (`id`) of the only item the governor reads and writes in its table.
 * The stack's IAM policy pins `dynamodb:LeadingKeys` to this value: another key is denied.
 */
export const GOVERNOR_STATE_ID = 'governor-state';

/**
 * Partition key of the thread ledger item beside it (functions/adapters/thread-ledger.ts): the
 * consumer updates it, the governor reads it. The stack's IAM names it for both.
 */
export const THREAD_LEDGER_ID = 'thread-ledger';

/**
 * Partition key of the overflow consumer's ledger (its threads held, its solves): written by the
 * overflow consumer, read by the governor. The stack's IAM names it for both.
 */
export const OVERFLOW_LEDGER_ID = 'overflow-thread-ledger';

/**
 * Partition key (`shard`) of the watch relay's baton in the leases table
 * (functions/adapters/watch-baton.ts): read and written by the governor only, whose IAM names it.
 */
export const WATCH_RELAY_SHARD = 'primary#relay';

/**
 * Partition key (`shard`) of the governor probe's thread lease (functions/governor/thread-probe.ts):
 * the primary lane's first shard (`shardKeys(PRIMARY_LEASE_LANE, …)[0]`, which test/infra checks),
 * where the governor may put a lease item; its IAM names it.
 */
export const PROBE_LEASE_SHARD = 'primary#0';

/**
 * Key of the results table the governor's store probe reads (consistently) each tick: nothing
 * writes it, so the read costs half a read unit and says only whether DynamoDB answers. The
 * governor's IAM allows it this one key of the results table.
 */
export const STORE_PROBE_KEY = '__store-probe__';

/**
 * Value of a solver-key secret the stack created and nobody has filled yet. A handler that reads
 * it knows the operator has not put the key in, and can say so instead of calling the solver.
 */
export const SOLVER_KEY_PLACEHOLDER = 'REPLACE-ME-with-the-solver-API-key';

/** CloudFormation output keys of the captcha-fleet stack (`aws cloudformation describe-stacks`). */
export const STACK_OUTPUTS = {
  normalQueueUrl: 'TasksQueueUrl',
  highQueueUrl: 'HighPriorityQueueUrl',
  dlqUrl: 'DeadLetterQueueUrl',
  /** Producers' bad / good reports on answers. */
  reportsQueueUrl: 'ReportsQueueUrl',
  reporterFunctionName: 'ReporterFunctionName',
  resultsTable: 'ResultsTableName',
  governorTable: 'GovernorTableName',
  dashboardUrl: 'DashboardUrl',
  solverKeySecretArn: 'SolverKeySecretArn',
  eventBusName: 'EventBusName',
  consumerFunctionName: 'ConsumerFunctionName',
  governorFunctionName: 'GovernorFunctionName',
  alarmTopicArn: 'AlarmTopicArn',
  operatorPolicyArn: 'OperatorPolicyArn',
  sendTaskCommand: 'SendTaskCommand',
  fleetConfig: 'FleetConfig',
  /** Only with an overflow provider configured. */
  overflowKeySecretArn: 'OverflowKeySecretArn',
  overflowFunctionName: 'OverflowConsumerFunctionName',
} as const;

/** Default stack name (`-c stackName=…` overrides it). */
export const DEFAULT_STACK_NAME = 'CaptchaFleet';
