/**
 * The handlers' environment (functions/core/environment.ts ENV), from the stack's resources.
 * The key itself never appears here: only the secret's ARN.
 */
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as events from 'aws-cdk-lib/aws-events';
import { ENV } from '../functions/core/environment.js';
import type { FleetSettings, ParsedFleetConfig } from '../functions/core/settings.js';
import type { SolverKeySecret } from './solver-key-secret.js';
import type { TaskQueues } from './task-queues.js';

/** The fleet's resources a function's environment is built from. */
export interface FleetEnvironmentInput {
  /** Powertools service name (SERVICES): the `service` dimension of the function's metrics. */
  readonly service: string;
  /** Fleet settings (names, limits, the metrics namespace). */
  readonly settings: FleetSettings;
  /** The operator's configuration with defaults applied: passed to the handlers as JSON. */
  readonly fleetConfig: ParsedFleetConfig;
  /** The lanes and their dead-letter queue. */
  readonly queues: TaskQueues;
  /** The results table (key `taskId`). */
  readonly resultsTable: dynamodb.ITable;
  /** The governor's state table. */
  readonly governorTable: dynamodb.ITable;
  /** The secret holding the solver key (only its ARN reaches the environment). */
  readonly solverKey: SolverKeySecret;
  /** The completion-event bus. */
  readonly bus: events.IEventBus;
}

/** Variables every fleet function of the primary solver gets (the primary key's secret ARN among them). */
export function fleetEnvironment(input: FleetEnvironmentInput): Record<string, string> {
  return sharedEnvironment(input, input.solverKey.secret.secretArn);
}

/**
 * Variables every fleet function gets, with the primary key's secret ARN only when given: the
 * overflow consumer gets no way to the primary key.
 */
export function sharedEnvironment(
  input: Omit<FleetEnvironmentInput, 'solverKey'>,
  solverKeySecretArn?: string,
): Record<string, string> {
  return {
    [ENV.config]: JSON.stringify(input.fleetConfig),
    [ENV.normalQueueUrl]: input.queues.normal.queueUrl,
    [ENV.highQueueUrl]: input.queues.high.queueUrl,
    [ENV.dlqUrl]: input.queues.deadLetterQueue.queueUrl,
    [ENV.resultsTable]: input.resultsTable.tableName,
    [ENV.governorTable]: input.governorTable.tableName,
    ...(solverKeySecretArn !== undefined ? { [ENV.solverKeySecretArn]: solverKeySecretArn } : {}),
    [ENV.eventBusName]: input.bus.eventBusName,
    POWERTOOLS_SERVICE_NAME: input.service,
    POWERTOOLS_METRICS_NAMESPACE: input.settings.metricsNamespace,
  };
}
