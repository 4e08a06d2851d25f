/**
 * The consumer: one function fed by both lanes through two SQS event source mappings, each with
 * the batch size of the settings, partial batch responses and an initial maximum concurrency the
 * governor moves. Permissions: its queues, its table, the key, the completion-event bus.
 */
import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Construct } from 'constructs';
import { THREAD_LEDGER_ID } from '../functions/core/deployment.js';
import { COMPLETION_EVENT_DETAIL_TYPE } from '../functions/core/events.js';
import type { Lane } from '../functions/core/governor/types.js';
import { SERVICES } from '../functions/core/metric-names.js';
import { FleetFunction } from './fleet-function.js';
import { fleetEnvironment, type FleetEnvironmentInput } from './fleet-environment.js';

/** The fleet's resources every function's environment is built from, plus the consumer's own props. */
export interface ConsumerProps extends Omit<FleetEnvironmentInput, 'service'> {
  /**
   * Initial `ScalingConfig.MaximumConcurrency` of each lane's mapping (2–1000); the governor moves
   * them from there.
   * @see https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html
   */
  readonly initialCeilings: Readonly<Record<Lane, number>>;
  /**
   * Reserve the sum of the mappings' maxima for the function.
   * @default true
   */
  readonly reserveConcurrency?: boolean;
}

/** The consumer function, its two SQS event source mappings and its permissions. */
export class Consumer extends Construct {
  /** The consumer function. */
  public readonly function: lambda.IFunction;
  /** The function with its role and log group. */
  public readonly fleetFunction: FleetFunction;
  /** The event source mapping of each lane (the governor needs their ids). */
  public readonly mappings: Readonly<Record<Lane, SqsEventSource>>;
  /** Reserved concurrency set at deploy, if any (the governor keeps it ≥ the sum of ceilings). */
  public readonly reservedConcurrency: number | undefined;

  constructor(scope: Construct, id: string, props: ConsumerProps) {
    super(scope, id);
    const { settings, queues } = props;
    const ceilings = props.initialCeilings;
    // A reservation below the sum of the mappings' maxima throttles: throttled messages go back
    // to the queue and can reach the DLQ unprocessed. So reserve exactly that sum.
    this.reservedConcurrency = (props.reserveConcurrency ?? true) ? ceilings.normal + ceilings.high : undefined;

    this.fleetFunction = new FleetFunction(this, 'Consumer', {
      entry: 'functions/consumer/handler.ts',
      functionName: `${settings.prefix}-consumer`,
      description: 'captcha-fleet consumer: claims, solves and records tasks from both lanes',
      timeout: Duration.seconds(settings.functionTimeoutSeconds),
      reservedConcurrentExecutions: this.reservedConcurrency,
      environment: fleetEnvironment({ ...props, service: SERVICES.consumer }),
    });
    this.function = this.fleetFunction.function;

    const source = (lane: Lane) =>
      new SqsEventSource(queues.lane(lane), {
        batchSize: settings.tasksPerInvocation,
        reportBatchItemFailures: true,
        maxConcurrency: ceilings[lane],
      });
    this.mappings = { normal: source('normal'), high: source('high') };
    // The event sources grant receive, delete, change-visibility and get-attributes on their queue.
    this.function.addEventSource(this.mappings.normal);
    this.function.addEventSource(this.mappings.high);

    const role = this.fleetFunction.role;
    // Malformed and schema-violating messages go to the DLQ with their reason, never dropped.
    queues.deadLetterQueue.grantSendMessages(role);
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ResultRecords',
        // Single-item conditional reads and writes only (claim, record, release): no scans, no deletes.
        actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
        resources: [props.resultsTable.tableArn],
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ThreadLedger',
        // Over-cap answers and held threads for the governor: ADD/SET on one item, and the read a
        // refused invocation waits on. No other key of the governor table.
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        resources: [props.governorTable.tableArn],
        conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [THREAD_LEDGER_ID] } },
      }),
    );
    props.solverKey.grantRead(role);
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'CompletionEvents',
        actions: ['events:PutEvents'],
        resources: [props.bus.eventBusArn],
        // With the bus policy (CompletionEvents.admitOnly), what a subscriber may trust: an event on
        // this bus with source settings.eventSource was put by this role, i.e. by the consumer's code
        // after it wrote that terminal record (or by whoever may change that code or assume the role).
        // It does not vouch for the task's content (producer input) or the answer (solver output);
        // an event can be missing (a publish that failed after its retries) or arrive twice
        // (EventBridge delivers to targets at least once): the results table stays the source of truth.
        conditions: {
          StringEquals: { 'events:source': settings.eventSource, 'events:detail-type': COMPLETION_EVENT_DETAIL_TYPE },
        },
      }),
    );
  }
}
