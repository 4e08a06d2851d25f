/**
 * The consumer: one function fed by both lanes through two SQS event source mappings, each with
 * the batch size of the settings, partial batch responses and an initial maximum concurrency the
 * governor moves. Permissions: its queues, its table, the key, the completion-event bus.
 */
import { Duration } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Construct } from 'constructs';
import { THREAD_LEDGER_ID } from '../functions/core/deployment.js';
import { ENV } from '../functions/core/environment.js';
import type { Lane } from '../functions/core/governor/types.js';
import { SERVICES } from '../functions/core/metric-names.js';
import { grantConsumerWork } from './consumer-permissions.js';
import { consumerSizing } from '../functions/core/function-sizing.js';
import { FleetFunction } from './fleet-function.js';
import { fleetEnvironment, type FleetEnvironmentInput } from './fleet-environment.js';
import type { SolverKeySecret } from './solver-key-secret.js';

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
  /**
   * The thread leases (solveMode `park`): the consumer takes one before each submission and parks
   * its task; absent, every invocation waits through its solve.
   * @default - none (the consumer waits through its solves)
   */
  readonly leasesTable?: dynamodb.ITable;
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
      sizing: consumerSizing(settings),
      entry: 'functions/consumer/handler.ts',
      // Its logs never carry a stack (an error is logged by name and message, a batch item's
      // failure is returned, not thrown), and its cold starts multiply with the load: no maps.
      sourceMaps: false,
      functionName: `${settings.prefix}-consumer`,
      description: 'captcha-fleet consumer: claims, solves and records tasks from both lanes',
      timeout: Duration.seconds(settings.functionTimeoutSeconds),
      reservedConcurrentExecutions: this.reservedConcurrency,
      environment: {
        ...fleetEnvironment({ ...props, service: SERVICES.consumer }),
        ...(props.leasesTable ? { [ENV.leasesTable]: props.leasesTable.tableName } : {}),
      },
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

    grantConsumerWork(this.fleetFunction.role, props, { ledgerId: THREAD_LEDGER_ID, key: props.solverKey });
    if (props.leasesTable)
      this.fleetFunction.role.addToPrincipalPolicy(
        new iam.PolicyStatement({
          sid: 'ThreadLeases',
          // A shard's read (Query), a slot taken (conditional put) and given back (conditional
          // delete), a refusal on the shard's meta item: no scan, no other table.
          actions: ['dynamodb:Query', 'dynamodb:PutItem', 'dynamodb:DeleteItem', 'dynamodb:UpdateItem'],
          resources: [props.leasesTable.tableArn],
        }),
      );
  }

  /**
   * Let this consumer finish, at the overflow provider, a submission the overflow lane paid for and
   * left (its invocation died): it polls that provider with its key, never submits there, so a
   * task is never paid at both providers (DESIGN.md invariant 11). The overflow consumer gets no
   * such access to the plan's key.
   */
  resumeAtOverflow(overflowKey: SolverKeySecret): void {
    this.fleetFunction.function.addEnvironment(ENV.overflowKeySecretArn, overflowKey.secret.secretArn);
    overflowKey.grantRead(this.fleetFunction.role);
  }
}
