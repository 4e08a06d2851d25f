/**
 * The overflow lane (only with `fleet.overflow` set): a second consumer function,
 * `<prefix>-consumer-overflow`, running the same handler with `SOLVER_PROVIDER=overflow`, fed by its
 * own SQS event source mappings, one on each queue. Both are created disabled at the mapping floor:
 * the governor opens, sizes and closes them (docs/governor.md, "Overflow"). The normal one takes
 * the normal lane's excess over the plan; the high one is opened only while the primary is paused
 * (the high lane otherwise stays on the plan, which serves it first), so priority tasks never wait
 * behind a primary outage while normal tasks are overflowed. The governor keeps the sum of the two
 * maxima within the function's reserved concurrency. The function holds the overflow provider's
 * key and never the primary's: a bug or a compromise in the lane cannot spend the plan's account.
 */
import { Duration } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { OVERFLOW_LEDGER_ID } from '../functions/core/deployment.js';
import { ENV } from '../functions/core/environment.js';
import type { Lane } from '../functions/core/governor/types.js';
import { consumerServiceOf } from '../functions/core/provider.js';
import { MAPPING_MIN_CONCURRENCY, type OverflowSettings } from '../functions/core/settings.js';
import { grantConsumerControl, grantConsumerWork, partitionsOnly } from './consumer-permissions.js';
import { type FleetEnvironmentInput, sharedEnvironment } from './fleet-environment.js';
import { FUNCTION_SIZING } from '../functions/core/function-sizing.js';
import { FleetFunction } from './fleet-function.js';
import { SolverKeySecret } from './solver-key-secret.js';

/** Properties of {@link OverflowConsumer}: the fleet's resources (not the primary key) plus the lane's own. */
export interface OverflowConsumerProps extends Omit<FleetEnvironmentInput, 'service' | 'solverKey'> {
  /** The overflow provider's settings (`settings.overflow`, resolved). */
  readonly overflow: OverflowSettings;
  /**
   * Reserve `overflow.maxConcurrency` for the function: the widest the governor may open the
   * lane (the sum of its two mappings' maxima), so an open lane is never throttled into the DLQ.
   * @default true
   */
  readonly reserveConcurrency?: boolean;
  /**
   * The overflow provider's key's secret the app gives (`overflowKeySecret`) instead of one created or imported by name.
   * @default - `<prefix>/overflow-key`, or `overflow.keySecretName`'s
   */
  readonly keySecret?: secretsmanager.ISecret;
}

/** The overflow consumer, its mappings on the normal and high queues, its key and its permissions. */
export class OverflowConsumer extends Construct {
  /** The overflow consumer function (`<prefix>-consumer-overflow`). */
  public readonly function: lambda.IFunction;
  /** The function with its role and log group. */
  public readonly fleetFunction: FleetFunction;
  /**
   * Its event source mapping on each queue, both created disabled at the mapping floor: the
   * governor opens the normal one for the plan's excess, the high one only while the primary is paused.
   */
  public readonly mappings: Readonly<Record<Lane, SqsEventSource>>;
  /** The overflow provider's key: `<prefix>/overflow-key`, imported by `overflow.keySecretName`, or the app's `overflowKeySecret`. */
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
      ...(props.keySecret !== undefined ? { existingSecret: props.keySecret } : {}),
    });
    this.reservedConcurrency = (props.reserveConcurrency ?? true) ? overflow.maxConcurrency : undefined;

    this.fleetFunction = new FleetFunction(this, 'Consumer', {
      sizing: FUNCTION_SIZING.overflowConsumer,
      entry: 'functions/consumer/handler.ts',
      // Its logs never carry a stack (an error is logged by name and message, a batch item's
      // failure is returned, not thrown), and its cold starts multiply with the load: no maps.
      sourceMaps: false,
      functionName: overflow.functionName,
      description:
        'captcha-fleet overflow consumer: solves normal-lane excess, and high-lane tasks while the primary is paused, through the pay-per-solve provider',
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

    const source = (lane: Lane) =>
      new SqsEventSource(queues.lane(lane), {
        batchSize: settings.tasksPerInvocation,
        reportBatchItemFailures: true,
        // Closed until the governor opens it: normal when the plan is saturated and the backlog
        // past the target, high only while the primary is paused.
        enabled: false,
        maxConcurrency: MAPPING_MIN_CONCURRENCY,
      });
    this.mappings = { normal: source('normal'), high: source('high') };
    // The event sources grant receive, delete, change-visibility and get-attributes on their queue.
    this.function.addEventSource(this.mappings.normal);
    this.function.addEventSource(this.mappings.high);
    grantConsumerWork(this.fleetFunction.role, props, { ledgerId: OVERFLOW_LEDGER_ID, key: this.key });
  }

  /** The governor's environment for this lane: the mappings it moves, the function it reserves, the key it reads the balance with. */
  governorEnvironment(): Record<string, string> {
    return {
      [ENV.overflowMappingId]: this.mappings.normal.eventSourceMappingId,
      [ENV.overflowHighMappingId]: this.mappings.high.eventSourceMappingId,
      [ENV.overflowFunctionName]: this.function.functionName,
      [ENV.overflowKeySecretArn]: this.key.secret.secretArn,
    };
  }

  /** Let the governor open, size and close this lane, read its ledger and the provider's balance. */
  grantGovernor(role: iam.Role, governorTable: FleetEnvironmentInput['governorTable']): void {
    grantConsumerControl(role, {
      mappingsSid: 'OverflowMapping',
      concurrencySid: 'OverflowConcurrency',
      mappingArns: [this.mappings.normal.eventSourceMappingArn, this.mappings.high.eventSourceMappingArn],
      functionArn: this.function.functionArn,
    });
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'OverflowThreadLedger',
        // The overflow consumer's held threads and solve count (price learning), read once a tick.
        actions: ['dynamodb:GetItem'],
        resources: [governorTable.tableArn],
        conditions: partitionsOnly(OVERFLOW_LEDGER_ID),
      }),
    );
    // The provider's balance: spend against the caps and the price per solve are read from it.
    this.key.grantRead(role);
  }
}
