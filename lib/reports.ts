/**
 * Reports on answers (a refund for a wrong one): the reports queue producers send
 * `{"taskId", "verdict"}` to, its own dead-letter queue, and the report function that reads it
 * (functions/reporter): it calls the provider that solved the task once, with the stored solver
 * id, and marks the task's record. A queue rather than a direct call: any language that can send
 * a task can send a report the same way, with the same credentials (`sqs:SendMessage`), and a
 * report made while the provider is down waits in the queue instead of failing in the producer.
 *
 * Permissions, and nothing else: receive and delete on its queue (the event source), send to its
 * DLQ (malformed reports, with their reason), GetItem and UpdateItem on the results table (no
 * PutItem, DeleteItem, Scan or Query), and read the keys of the providers it reports to.
 */
import { Duration, Validations } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { ENV } from '../functions/core/environment.js';
import { FUNCTION_SIZING } from '../functions/core/function-sizing.js';
import { SERVICES } from '../functions/core/metric-names.js';
import { MAX_REPORT_BYTES } from '../functions/core/report.js';
import { MAPPING_MIN_CONCURRENCY } from '../functions/core/settings.js';
import { FleetFunction } from './fleet-function.js';
import { type FleetEnvironmentInput, fleetEnvironment } from './fleet-environment.js';
import type { SolverKeySecret } from './solver-key-secret.js';
import { QUEUE_RETENTION } from './task-queues.js';

/** The report function's timeout: one provider call (15 s at most) and two table writes. */
export const REPORTER_TIMEOUT = Duration.seconds(30);
/** Receives of a report before SQS moves it to the reports DLQ (AWS guidance: at least 5). */
export const REPORT_MAX_RECEIVES = 5;

/** Properties of {@link Reports}. */
export interface ReportsProps extends Omit<FleetEnvironmentInput, 'service'> {
  /**
   * The overflow provider's key, when the fleet has one: a task it solved is reported to it.
   * @default - no overflow provider: every report goes to the plan's
   */
  readonly overflowKey?: SolverKeySecret;
}

/** The reports queue, its DLQ and the report function. */
export class Reports extends Construct {
  /** Producers send report messages here (`<prefix>-reports`). */
  public readonly queue: sqs.Queue;
  /** Reports received `maxReceiveCount` times, and malformed ones with their reason. */
  public readonly deadLetterQueue: sqs.Queue;
  /** The report function (`<prefix>-reporter`). */
  public readonly function: lambda.IFunction;
  /** The function with its role and log group. */
  public readonly fleetFunction: FleetFunction;

  constructor(scope: Construct, id: string, props: ReportsProps) {
    super(scope, id);
    const { settings } = props;
    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', {
      queueName: settings.queueNames.reportsDlq,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: QUEUE_RETENTION,
    });
    Validations.of(this.deadLetterQueue).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason: 'This queue is the dead-letter queue of the reports queue.',
    });
    this.queue = new sqs.Queue(this, 'Queue', {
      queueName: settings.queueNames.reports,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: QUEUE_RETENTION,
      // As AWS advises for a Lambda event source: 6 × the function's timeout.
      visibilityTimeout: Duration.seconds(6 * REPORTER_TIMEOUT.toSeconds()),
      // A report is a few dozen bytes; SQS refuses anything far past the function's own bound.
      maxMessageSizeBytes: Math.max(1_024, 4 * MAX_REPORT_BYTES),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: REPORT_MAX_RECEIVES },
    });

    this.fleetFunction = new FleetFunction(this, 'Reporter', {
      entry: 'functions/reporter/handler.ts',
      functionName: `${settings.prefix}-reporter`,
      description: 'captcha-fleet reports: a bad or good answer reported once to the provider that solved it',
      timeout: REPORTER_TIMEOUT,
      sizing: FUNCTION_SIZING.reporter,
      environment: {
        ...fleetEnvironment({ ...props, service: SERVICES.reporter }),
        [ENV.reportsQueueUrl]: this.queue.queueUrl,
        [ENV.reportsDlqUrl]: this.deadLetterQueue.queueUrl,
        ...(props.overflowKey !== undefined ? { [ENV.overflowKeySecretArn]: props.overflowKey.secret.secretArn } : {}),
      },
    });
    this.function = this.fleetFunction.function;
    // Reports are rare and cheap: two at once keep the provider's report calls slow and steady.
    this.function.addEventSource(
      new SqsEventSource(this.queue, {
        batchSize: 10,
        reportBatchItemFailures: true,
        maxConcurrency: MAPPING_MIN_CONCURRENCY,
      }),
    );
    this.grantReporterWork(this.fleetFunction.role, props.resultsTable, props);
  }

  private grantReporterWork(role: iam.Role, resultsTable: dynamodb.ITable, props: ReportsProps): void {
    this.deadLetterQueue.grantSendMessages(role);
    role.addToPrincipalPolicy(
      new iam.PolicyStatement({
        sid: 'ReportOnRecords',
        // Read the record, then conditional updates of its `report` only: no puts, deletes or scans.
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        resources: [resultsTable.tableArn],
      }),
    );
    props.solverKey.grantRead(role);
    props.overflowKey?.grantRead(role);
  }

  /** Let a producer send reports (`sqs:SendMessage` on the reports queue, nothing else). */
  grantSend(grantee: iam.IGrantable): void {
    this.queue.grantSendMessages(grantee);
  }
}
