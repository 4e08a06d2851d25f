/**
 * The governor: a function on an EventBridge `rate(1 minute)` schedule (it ticks inside the
 * invocation), reserved concurrency 1 so two never race (2 in the parked design: the next
 * invocation takes the watch over from the last, the relay, while the ticks stay one at a time). It may move only the consumer's
 * mappings and concurrency (and the overflow lane's, when configured), read only the fleet's queue
 * attributes, read metrics and the keys, read one probe key of the results table (the store's
 * health), and read and write only its own state item.
 */
import { Annotations, Duration, Stack, Validations } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { Construct } from 'constructs';
import {
  GOVERNOR_STATE_ID,
  STORE_PROBE_KEY,
  PROBE_LEASE_SHARD,
  THREAD_LEDGER_ID,
  WATCH_RELAY_SHARD,
} from '../functions/core/deployment.js';
import { ENV } from '../functions/core/environment.js';
import { COMPLETION_EVENT_DETAIL_TYPE } from '../functions/core/events.js';
import { SERVICES } from '../functions/core/metric-names.js';
import { solveWindowSlotIds } from '../functions/core/solve-window.js';
import type { Consumer } from './consumer.js';
import { grantConsumerControl, partitionsOnly } from './consumer-permissions.js';
import type { OverflowConsumer } from './overflow-consumer.js';
import { fleetEnvironment, type FleetEnvironmentInput } from './fleet-environment.js';
import { FUNCTION_SIZING } from '../functions/core/function-sizing.js';
import { governorCpuWarning, parkedGovernorSizing } from '../functions/core/watch-sizing.js';
import { FleetFunction } from './fleet-function.js';

/** The schedule fires once a minute; the governor ticks (settings.tickMs) inside the invocation. */
export const GOVERNOR_SCHEDULE = 'rate(1 minute)';
/**
 * Shorter than the schedule's period so one invocation ends before the next begins (with a
 * reserved concurrency of 1 an overlap would be throttled and retried late), and as long as that
 * allows: in the parked design the watch over parked tasks runs until a second before it, and
 * every second of a minute it does not run is a second a ready answer may wait to be recorded.
 */
export const GOVERNOR_TIMEOUT = Duration.seconds(58);
/**
 * The parked design's: its ticks still end within the first 58 s (functions/governor/handler.ts
 * TICK_WINDOW_MS), but its watch runs on until the next invocation's watch takes over from it
 * (functions/core/watch-relay.ts), so the two invocations overlap by a moment and a reserved
 * concurrency of two lets the next one start; 75 s bounds a watch whose successor does not come.
 */
export const GOVERNOR_PARKED_TIMEOUT = Duration.seconds(75);

/** Properties of {@link Governor}: the fleet's resources plus the consumer it moves. */
export interface GovernorProps extends Omit<FleetEnvironmentInput, 'service'> {
  /** The consumer whose mappings and reserved concurrency the governor sets. */
  readonly consumer: Consumer;
  /**
   * The overflow lane, when one is configured: the governor opens, sizes and closes its mapping,
   * keeps its reservation and reads the provider's balance.
   * @default - no overflow lane
   */
  readonly overflow?: OverflowConsumer;
  /**
   * The thread leases (solveMode `park`): the governor opens each tick's ceiling as slots, and
   * between ticks watches the parked tasks (it reads their records, asks the solver, and makes a
   * ready task's message visible again).
   * @default - none (the consumers wait through their solves)
   */
  readonly leasesTable?: dynamodb.ITable;
  /**
   * Reserve the governor's concurrency (2 parked: one invocation ticks while the next takes over
   * its watch; 1 waiting). False where the account's unreserved pool cannot spare it: the state's
   * conditional writes and the watch's baton keep two governors from acting at once anyway, and
   * the schedule starts one a minute.
   * @default true
   */
  readonly reserveConcurrency?: boolean;
}

/** The governor function and its schedule. */
export class Governor extends Construct {
  /** The governor function. */
  public readonly function: lambda.IFunction;
  /** The function with its role and log group. */
  public readonly fleetFunction: FleetFunction;
  /** Concurrency the governor reserves (undefined when none is reserved). */
  public readonly reservedConcurrency: number | undefined;
  /** The once-a-minute schedule (`<prefix>-governor-schedule`). */
  public readonly schedule: events.Rule;

  constructor(scope: Construct, id: string, props: GovernorProps) {
    super(scope, id);
    const { settings, queues, consumer } = props;
    const stack = Stack.of(this);
    this.reservedConcurrency = (props.reserveConcurrency ?? true) ? (props.leasesTable ? 2 : 1) : undefined;

    this.fleetFunction = new FleetFunction(this, 'Governor', {
      // Parked, the watch's CPU grows with the plan (functions/core/watch-sizing.ts).
      sizing: props.leasesTable
        ? parkedGovernorSizing(settings)
        : { ...FUNCTION_SIZING.governor, memoryMb: settings.governorMemoryMb ?? FUNCTION_SIZING.governor.memoryMb },
      entry: 'functions/governor/handler.ts',
      functionName: `${settings.prefix}-governor`,
      description: 'captcha-fleet governor: sets the consumer mappings ceilings from queue, metrics and balance',
      timeout: props.leasesTable ? GOVERNOR_PARKED_TIMEOUT : GOVERNOR_TIMEOUT,
      reservedConcurrentExecutions: this.reservedConcurrency,
      environment: {
        ...fleetEnvironment({ ...props, service: SERVICES.governor }),
        [ENV.consumerFunctionName]: consumer.function.functionName,
        [ENV.mappingIds]: stack.toJsonString({
          normal: consumer.mappings.normal.eventSourceMappingId,
          high: consumer.mappings.high.eventSourceMappingId,
        }),
        ...props.overflow?.governorEnvironment(),
        ...(props.leasesTable ? { [ENV.leasesTable]: props.leasesTable.tableName } : {}),
      },
    });
    const cpuWarning = props.leasesTable ? governorCpuWarning(settings) : undefined;
    if (cpuWarning) Annotations.of(this).addWarningV2('captcha-fleet:governor-cpu', cpuWarning);
    const fn = this.fleetFunction.function;
    this.function = fn;
    // A missed tick is better than a late one: the next schedule comes within a minute.
    fn.configureAsyncInvoke({ retryAttempts: 0, maxEventAge: Duration.minutes(1) });

    this.schedule = new events.Rule(this, 'Schedule', {
      // Named so operators can stop the governor: `aws events disable-rule --name <prefix>-governor-schedule`.
      ruleName: `${settings.prefix}-governor-schedule`,
      description: 'captcha-fleet governor, once a minute',
      schedule: events.Schedule.expression(GOVERNOR_SCHEDULE),
      targets: [new targets.LambdaFunction(fn, { retryAttempts: 0, maxEventAge: Duration.minutes(1) })],
    });

    const role = this.fleetFunction.role;
    grantConsumerControl(role, {
      mappingsSid: 'ConsumerMappings',
      concurrencySid: 'ConsumerConcurrency',
      mappingArns: [consumer.mappings.normal.eventSourceMappingArn, consumer.mappings.high.eventSourceMappingArn],
      functionArn: consumer.function.functionArn,
    });
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'QueueSignals',
        actions: ['sqs:GetQueueAttributes'],
        resources: [queues.normal.queueArn, queues.high.queueArn, queues.deadLetterQueue.queueArn],
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ThreadLedger',
        // The consumer's thread ledger: read once a tick; updated by the governor's own probe
        // submission (its answer, as a consumer's), by the spend grant near the pause level and
        // by the parked fleet's held test (the refusals' hold lifted: `liftedAt`).
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        resources: [props.governorTable.tableArn],
        conditions: partitionsOnly(THREAD_LEDGER_ID),
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'StoreProbe',
        // The governor's probe of DynamoDB each tick: one read of a key nothing writes on the
        // results table (SQS is probed with the GetQueueAttributes above). No task's record.
        actions: ['dynamodb:GetItem'],
        resources: [props.resultsTable.tableArn],
        conditions: partitionsOnly(STORE_PROBE_KEY),
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'StateItem',
        // Read, then a conditional put on the version it read: no update, delete or scan.
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
        resources: [props.governorTable.tableArn],
        conditions: partitionsOnly(GOVERNOR_STATE_ID),
      }),
    );
    props.solverKey.grantRead(role);
    props.overflow?.grantGovernor(role, props.governorTable);
    if (props.leasesTable) this.grantParkedWatch(role, props, props.leasesTable);

    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ConsumerMetrics',
        // GetMetricData has no resource type: IAM accepts only "*". The governor's own metrics
        // need no permission: they leave as EMF through its log group.
        actions: ['cloudwatch:GetMetricData'],
        resources: ['*'],
      }),
    );
    Validations.of(role).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'cloudwatch:GetMetricData (p95, error and over-cap rates of the consumer) supports no resource-level permissions; every other governor statement names its resources.',
    });
  }

  /**
   * The parked design: the leases (every shard read each second, limits set, a ready task's slot
   * freed, the probe's own lease put in the first shard); the probe's waiting task (received, the
   * consumer invoked with it); the records of parked tasks (read for their submission's id, then claimed and written
   * solved by the watch: the same conditional updates the consumer makes, no delete, no scan); the
   * two lanes' messages (a recorded task's deleted, another shown again); its completion event on
   * the fleet's bus, as the consumer publishes it.
   */
  private grantParkedWatch(role: iam.IRole, props: GovernorProps, leasesTable: dynamodb.ITable): void {
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ThreadLeases',
        actions: ['dynamodb:Query', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
        resources: [leasesTable.tableArn],
      }),
    );
    // The governor's probe holds a thread lease while others hold the plan (thread-probe.ts): it
    // puts one in the lane's first shard only (frees it with the DeleteItem above).
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ProbeLease',
        actions: ['dynamodb:PutItem'],
        resources: [leasesTable.tableArn],
        conditions: partitionsOnly(PROBE_LEASE_SHARD),
      }),
    );
    // The metric window the governor reads instead of the consumer's CloudWatch metrics: its slots
    // read, the watch's solves added (or a slot started afresh); the ledger's own statement covers
    // the removal of its stale minute counters.
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'SolveWindow',
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem'],
        resources: [props.governorTable.tableArn],
        conditions: partitionsOnly(...solveWindowSlotIds(THREAD_LEDGER_ID)),
      }),
    );
    // The watch relay's baton: one item in a partition of its own, read and written by the governor only.
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'WatchRelay',
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem'],
        resources: [leasesTable.tableArn],
        conditions: partitionsOnly(WATCH_RELAY_SHARD),
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ParkedRecords',
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        resources: [props.resultsTable.tableArn],
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ParkedMessages',
        actions: ['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage'],
        resources: [props.queues.normal.queueArn, props.queues.high.queueArn],
      }),
    );
    // The probe carries a waiting task (functions/governor/probe-carrier.ts): one message received
    // from a lane (deleted with ParkedMessages once the consumer finished it, or handed back with it
    // when the probe kept it refused) and the consumer invoked with it; the consumer does the rest
    // under its own role.
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ProbeTasks',
        actions: ['sqs:ReceiveMessage'],
        resources: [props.queues.normal.queueArn, props.queues.high.queueArn],
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ProbeInvocation',
        actions: ['lambda:InvokeFunction'],
        resources: [props.consumer.function.functionArn],
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ParkedCompletionEvents',
        actions: ['events:PutEvents'],
        resources: [props.bus.eventBusArn],
        conditions: {
          StringEquals: {
            'events:source': props.settings.eventSource,
            'events:detail-type': COMPLETION_EVENT_DETAIL_TYPE,
          },
        },
      }),
    );
  }
}
