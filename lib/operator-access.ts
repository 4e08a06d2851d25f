/**
 * What an operator needs to run `captcha-fleet status` and `captcha-fleet redrive` against the
 * stack, as one managed policy to attach to a user, group or role: read the queues and tables,
 * look into the DLQ, and move its messages back (StartMessageMoveTask, or message by message
 * when rejected messages must stay behind).
 */
import { Validations } from 'aws-cdk-lib';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { FleetSettings } from '../functions/core/settings.js';
import type { TaskQueues } from './task-queues.js';

/** Properties of {@link OperatorAccess}. */
export interface OperatorAccessProps {
  /** Fleet settings: the policy is named `<prefix>-operator`. */
  readonly settings: FleetSettings;
  /** The lanes and the DLQ operators inspect and redrive. */
  readonly queues: TaskQueues;
  /**
   * The reports queue, which `captcha-fleet report` sends to.
   * @default - no report permissions
   */
  readonly reportsQueue?: sqs.IQueue;
  /** The results table (read only). */
  readonly resultsTable: dynamodb.ITable;
  /** The governor's state table (read only). */
  readonly governorTable: dynamodb.ITable;
}

/** The operators' managed policy. */
export class OperatorAccess extends Construct {
  /** Attach it to the operators' user, group or role. */
  public readonly policy: iam.ManagedPolicy;

  constructor(scope: Construct, id: string, props: OperatorAccessProps) {
    super(scope, id);
    const { queues } = props;
    const lanes = [queues.normal.queueArn, queues.high.queueArn];
    const dlq = queues.deadLetterQueue.queueArn;
    this.policy = new iam.ManagedPolicy(this, 'Policy', {
      managedPolicyName: `${props.settings.prefix}-operator`,
      description: 'captcha-fleet operators: status, DLQ inspection and redrive, reports on answers',
      statements: [
        new iam.PolicyStatement({
          sid: 'QueueStatus',
          actions: ['sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:ListDeadLetterSourceQueues'],
          resources: [...lanes, dlq],
        }),
        new iam.PolicyStatement({
          sid: 'RedriveFromDlq',
          // StartMessageMoveTask needs receive, delete and get-attributes on the source (the DLQ);
          // the per-message redrive (rejected messages left behind) changes visibility as well.
          actions: [
            'sqs:StartMessageMoveTask',
            'sqs:ListMessageMoveTasks',
            'sqs:CancelMessageMoveTask',
            'sqs:ReceiveMessage',
            'sqs:DeleteMessage',
            'sqs:ChangeMessageVisibility',
          ],
          resources: [dlq],
        }),
        new iam.PolicyStatement({
          sid: 'RedriveToLanes',
          actions: ['sqs:SendMessage'],
          resources: lanes,
        }),
        ...(props.reportsQueue !== undefined
          ? [
              new iam.PolicyStatement({
                sid: 'ReportAnswers',
                actions: ['sqs:SendMessage', 'sqs:GetQueueUrl'],
                resources: [props.reportsQueue.queueArn],
              }),
            ]
          : []),
        new iam.PolicyStatement({
          sid: 'ReadResultsAndGovernorState',
          actions: ['dynamodb:GetItem', 'dynamodb:DescribeTable'],
          resources: [props.resultsTable.tableArn, props.governorTable.tableArn],
        }),
        new iam.PolicyStatement({
          sid: 'ReadFleetMetrics',
          // GetMetricData has no resource type: IAM accepts only "*".
          actions: ['cloudwatch:GetMetricData'],
          resources: ['*'],
        }),
      ],
    });
    Validations.of(this.policy).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'cloudwatch:GetMetricData supports no resource-level permissions; status reads p95, solved and failed through it.',
    });
  }
}
