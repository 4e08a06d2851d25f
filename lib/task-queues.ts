/**
 * The task queues: a normal lane, a high-priority lane and their shared dead-letter queue.
 * SQS-managed encryption, TLS only, 14 days' retention; visibility and redrive from the settings
 * (visibility = 6 × the consumer's timeout, maxReceiveCount ≥ 5, as AWS advises for Lambda).
 */
import { Duration, Stack, Validations } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import type { Lane } from '../functions/core/governor/types.js';
import type { FleetSettings } from '../functions/core/settings.js';
import { SQS_MESSAGE_LIMIT_BYTES, TASK_QUEUE_MESSAGE_LIMIT_BYTES } from '../functions/core/task.js';

/** SQS's longest retention: tasks wait out a long pause or outage instead of expiring. */
export const QUEUE_RETENTION = Duration.days(14);

/** Properties of {@link TaskQueues}. */
export interface TaskQueuesProps {
  /** Fleet settings: queue names, visibility timeout and maxReceiveCount. */
  readonly settings: FleetSettings;
}

/** The two task lanes and their shared dead-letter queue. */
export class TaskQueues extends Construct {
  /** Normal-priority tasks. */
  public readonly normal: sqs.Queue;
  /** High-priority tasks (the producer client routes `priority: "high"` here). */
  public readonly high: sqs.Queue;
  /** Messages received `maxReceiveCount` times, and messages the consumer rejected. */
  public readonly deadLetterQueue: sqs.Queue;

  constructor(scope: Construct, id: string, props: TaskQueuesProps) {
    super(scope, id);
    const { settings } = props;
    const stack = Stack.of(this);
    const sourceArn = (name: string) => stack.formatArn({ service: 'sqs', resource: name });

    this.deadLetterQueue = new sqs.Queue(this, 'DeadLetterQueue', {
      queueName: settings.queueNames.dlq,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: QUEUE_RETENTION,
      // SQS's whole limit: a message of the lanes fits with its reason attributes.
      maxMessageSizeBytes: SQS_MESSAGE_LIMIT_BYTES,
      // Only the fleet's own lanes may use it as their DLQ. ARNs are built from the names so the
      // DLQ does not depend on the queues that depend on it.
      redriveAllowPolicy: {
        redrivePermission: sqs.RedrivePermission.BY_QUEUE,
        sourceQueues: [settings.queueNames.normal, settings.queueNames.high].map((name) =>
          sqs.Queue.fromQueueArn(this, `Source-${name}`, sourceArn(name)),
        ),
      },
    });
    Validations.of(this.deadLetterQueue).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason:
        'This queue is the dead-letter queue of both task lanes; a DLQ of the DLQ would only move the same messages again.',
    });

    const lane = (id: string, queueName: string) =>
      new sqs.Queue(this, id, {
        queueName,
        encryption: sqs.QueueEncryption.SQS_MANAGED,
        enforceSSL: true,
        retentionPeriod: QUEUE_RETENTION,
        visibilityTimeout: Duration.seconds(settings.visibilityTimeoutSeconds),
        // Room kept for the DLQ's reason attributes: whatever a lane holds can be dead-lettered with its reason.
        maxMessageSizeBytes: TASK_QUEUE_MESSAGE_LIMIT_BYTES,
        deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: settings.maxReceiveCount },
      });
    this.normal = lane('TasksQueue', settings.queueNames.normal);
    this.high = lane('HighPriorityQueue', settings.queueNames.high);
  }

  /** The queue of one lane. */
  lane(lane: Lane): sqs.Queue {
    return lane === 'high' ? this.high : this.normal;
  }
}
