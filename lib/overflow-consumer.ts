/**
 * The overflow lane (only with `fleet.overflow` set): a second consumer function,
 * `<prefix>-consumer-overflow`, running the same handler with `SOLVER_PROVIDER=overflow`, fed by its
 * own SQS event source mapping on the normal queue. The mapping is created disabled at the mapping
 * floor: the governor opens it, sizes it and closes it (docs/governor.md, "Overflow"). The high lane
 * stays on the plan, which serves it first. The function holds the overflow provider's key and
 * never the primary's: a bug or a compromise in the lane cannot spend the plan's account.
 */
import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { Construct } from 'constructs';
import { OVERFLOW_LEDGER_ID } from '../functions/core/deployment.js';
import { ENV } from '../functions/core/environment.js';
import { consumerServiceOf } from '../functions/core/provider.js';
import { MAPPING_MIN_CONCURRENCY, type OverflowSettings } from '../functions/core/settings.js';
import { grantConsumerWork } from './consumer-permissions.js';
import { type FleetEnvironmentInput, sharedEnvironment } from './fleet-environment.js';
import { FleetFunction } from './fleet-function.js';
import { SolverKeySecret } from './solver-key-secret.js';

/** Properties of {@link OverflowConsumer}: the fleet's resources (not the primary key) plus the lane's own. */
export interface OverflowConsumerProps extends Omit<FleetEnvironmentInput, 'service' | 'solverKey'> {
  /** The overflow provider's settings (`settings.overflow`, resolved). */
  readonly overflow: OverflowSettings;
  /**
   * Reserve `overflow.maxConcurrency` for the function: the widest the governor may open the
   * lane, so an open lane is never throttled into the DLQ.
   * @default true
   */
  readonly reserveConcurrency?: boolean;
}

/** The overflow consumer, its mapping on the normal queue, its key and its permissions. */
export class OverflowConsumer extends Construct {
  /** The overflow consumer function (`<prefix>-consumer-overflow`). */
  public readonly function: lambda.IFunction;
  /** The function with its role and log group. */
  public readonly fleetFunction: FleetFunction;
  /** Its event source mapping on the normal queue (created disabled; the governor opens it). */
  public readonly mapping: SqsEventSource;
  /** The overflow provider's key: `<prefix>/overflow-key`, or imported by `overflow.keySecretName`. */
  public readonly key: SolverKeySecret;
  /** Reserved concurrency set at deploy, if any. */
  public readonly reservedConcurrency: number | undefined;

  constructor(scope: Construct, id: string, props: OverflowConsumerProps) {
    super(scope, id);
    const { settings, queues, overflow } = props;
    this.key = new SolverKeySecret(this, 'Key', {
      settings,
      provider: 'overflow',
      existingSecretName: overflow.keySecretName,
    });
    this.reservedConcurrency = (props.reserveConcurrency ?? true) ? overflow.maxConcurrency : undefined;

    this.fleetFunction = new FleetFunction(this, 'Consumer', {
      entry: 'functions/consumer/handler.ts',
      functionName: overflow.functionName,
      description: 'captcha-fleet overflow consumer: solves normal-lane tasks through the pay-per-solve provider',
      timeout: Duration.seconds(settings.functionTimeoutSeconds),
      reservedConcurrentExecutions: this.reservedConcurrency,
      environment: {
        // No SOLVER_KEY_SECRET_ARN: this function is given no way to the primary key.
        ...sharedEnvironment({ ...props, service: consumerServiceOf('overflow') }),
        [ENV.solverProvider]: 'overflow',
        [ENV.overflowKeySecretArn]: this.key.secret.secretArn,
      },
    });
    this.function = this.fleetFunction.function;

    this.mapping = new SqsEventSource(queues.normal, {
      batchSize: settings.tasksPerInvocation,
      reportBatchItemFailures: true,
      // Closed until the governor finds the plan saturated and the backlog past the target.
      enabled: false,
      maxConcurrency: MAPPING_MIN_CONCURRENCY,
    });
    // The event source grants receive, delete, change-visibility and get-attributes on the normal queue.
    this.function.addEventSource(this.mapping);
    grantConsumerWork(this.fleetFunction.role, props, { ledgerId: OVERFLOW_LEDGER_ID, key: this.key });
  }

  /** The governor's environment for this lane: the mapping it moves, the function it reserves, the key it reads the balance with. */
  governorEnvironment(): Record<string, string> {
    return {
      [ENV.overflowMappingId]: this.mapping.eventSourceMappingId,
      [ENV.overflowFunctionName]: this.function.functionName,
      [ENV.overflowKeySecretArn]: this.key.secret.secretArn,
    };
  }

  /** Let the governor open, size and close this lane, read its ledger and the provider's balance. */
  grantGovernor(role: iam.Role, governorTable: FleetEnvironmentInput['governorTable']): void {
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'OverflowMapping',
        actions: ['lambda:GetEventSourceMapping', 'lambda:UpdateEventSourceMapping'],
        resources: [this.mapping.eventSourceMappingArn],
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'OverflowConcurrency',
        actions: ['lambda:GetFunctionConcurrency', 'lambda:PutFunctionConcurrency'],
        resources: [this.function.functionArn],
      }),
    );
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'OverflowThreadLedger',
        // The overflow consumer's held threads and solve count (price learning), read once a tick.
        actions: ['dynamodb:GetItem'],
        resources: [governorTable.tableArn],
        conditions: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [OVERFLOW_LEDGER_ID] } },
      }),
    );
    // The provider's balance: spend against the caps and the price per solve are read from it.
    this.key.grantRead(role);
  }
}
