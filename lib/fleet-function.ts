/**
 * A Lambda function of the fleet, built one way: Node.js 24 / arm64, its handler's esbuild bundle
 * (lib/handler-bundle.ts: built from source in a checkout, prebuilt in the package), its own role
 * whose only built-in permission is writing to its own log group (no AWSLambdaBasicExecutionRole,
 * whose `logs:*` resources are `*`).
 */
import { type Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import type { FunctionSizing } from '../functions/core/function-sizing.js';
import { BUNDLE_HANDLER, handlerCode, handlerNameOf } from './handler-bundle.js';

/** Runtime of every fleet function (set explicitly: CDK's defaults move between versions). */
export const FLEET_RUNTIME = lambda.Runtime.NODEJS_24_X;

/** Properties of {@link FleetFunction}. */
export interface FleetFunctionProps {
  /** The handler's entry, `functions/<name>/handler.ts` (e.g. `functions/consumer/handler.ts`): its bundle is the code. */
  readonly entry: string;
  /** Function name (`<prefix>-consumer`, `<prefix>-governor`). */
  readonly functionName: string;
  /** Function description. */
  readonly description: string;
  /**
   * Function timeout (at most 15 minutes).
   * @see https://docs.aws.amazon.com/lambda/latest/dg/configuration-timeout.html
   */
  readonly timeout: Duration;
  /** Memory and architecture (functions/core/function-sizing.ts: the cost model bills the same). */
  readonly sizing: FunctionSizing;
  /** Environment variables (NODE_OPTIONS is added when `sourceMaps` is on). */
  readonly environment: Readonly<Record<string, string>>;
  /**
   * Node.js maps stack traces through the bundle's source map (`--enable-source-maps`). The map
   * ships with the bundle either way; on, it costs about 30 MB resident and some 300 ms of CPU
   * in a container's first two invocations (the deployed consumer on Node.js 24, one core here:
   * its first took a median 412 ms with it, 133 ms without; from its third on the same), which
   * at a function's share of a vCPU (0.145 at 256 MB) is seconds of a cold start (docs/cost.md,
   * row (f'')). Worth it where a stack trace can reach the logs.
   * @default true
   */
  readonly sourceMaps?: boolean;
  /**
   * Reserved concurrency.
   * @default - none: the function draws on the account's unreserved pool
   */
  readonly reservedConcurrentExecutions?: number;
  /**
   * Retention of the function's log group.
   * @default logs.RetentionDays.ONE_MONTH
   */
  readonly logRetention?: logs.RetentionDays;
}

/** One fleet function: bundled handler, its own role and its own log group. */
export class FleetFunction extends Construct {
  /** The function. */
  public readonly function: lambda.Function;
  /** Its role: writes its own logs, plus what the owning construct grants. */
  public readonly role: iam.Role;
  /** Its log group. */
  public readonly logGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: FleetFunctionProps) {
    super(scope, id);
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention ?? logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `${props.functionName}: its own logs plus what its construct grants`,
    });
    this.logGroup.grantWrite(this.role);

    this.function = new lambda.Function(this, 'Function', {
      functionName: props.functionName,
      description: props.description,
      code: handlerCode(handlerNameOf(props.entry)),
      handler: BUNDLE_HANDLER,
      runtime: FLEET_RUNTIME,
      architecture: props.sizing.architecture === 'arm64' ? lambda.Architecture.ARM_64 : lambda.Architecture.X86_64,
      memorySize: props.sizing.memoryMb,
      timeout: props.timeout,
      role: this.role,
      logGroup: this.logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      reservedConcurrentExecutions: props.reservedConcurrentExecutions,
      environment: {
        ...props.environment,
        ...((props.sourceMaps ?? true) ? { NODE_OPTIONS: '--enable-source-maps' } : {}),
      },
    });
  }
}
