/**
 * The captcha-fleet stack: the CaptchaFleet construct alone (with the id `Default`, which CDK
 * leaves out of logical ids, so the template is what the stack held before the construct existed)
 * and the outputs producers and operators need.
 */
import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { STACK_OUTPUTS } from '../functions/core/deployment.js';
import { CaptchaFleet } from './captcha-fleet.js';
import { type CaptchaFleetProps, pickCaptchaFleetProps, resolveFleetStackConfig } from './config.js';

/** Properties of {@link CaptchaFleetStack}: the stack's own plus the fleet's (see CaptchaFleetProps). */
export interface CaptchaFleetStackProps extends StackProps, CaptchaFleetProps {}

/** An example task producers can send as-is (schema v1). */
export const EXAMPLE_TASK = {
  method: 'turnstile',
  params: { sitekey: '0x4AAAAAAAexample', pageurl: 'https://example.com/login' },
};

/** The whole fleet in one stack. */
export class CaptchaFleetStack extends Stack {
  /** The fleet. */
  public readonly fleet: CaptchaFleet;

  /** @throws ConfigError listing every configuration problem, before any resource is created. */
  constructor(scope: Construct, id: string, props: CaptchaFleetStackProps = {}) {
    const fleetProps = pickCaptchaFleetProps(props);
    // Validated before the stack exists: a bad configuration leaves nothing half-built in the app.
    resolveFleetStackConfig(fleetProps);
    super(scope, id, {
      description: 'captcha-fleet: SQS + Lambda CAPTCHA solving capped by the solver plan threads',
      ...props,
    });
    this.fleet = new CaptchaFleet(this, 'Default', fleetProps);
    this.outputs();
  }

  private outputs(): void {
    const { queues, tables, dashboard, solverKey, events, consumer, governor, alarms, overflow, operators, config } =
      this.fleet;
    const { reports } = this.fleet;
    const output = (key: string, value: string, description: string) =>
      new CfnOutput(this, key, { value, description });
    output(STACK_OUTPUTS.normalQueueUrl, queues.normal.queueUrl, 'Send normal-priority tasks here');
    output(
      STACK_OUTPUTS.highQueueUrl,
      queues.high.queueUrl,
      'Send high-priority tasks here (the producer client routes priority "high" here)',
    );
    output(STACK_OUTPUTS.dlqUrl, queues.deadLetterQueue.queueUrl, 'Dead-letter queue of both lanes');
    output(
      STACK_OUTPUTS.reportsQueueUrl,
      reports.queue.queueUrl,
      'Send {"taskId","verdict":"bad"|"good"} here to report an answer (a refund for a wrong one)',
    );
    output(STACK_OUTPUTS.reporterFunctionName, reports.function.functionName, 'Report function');
    output(STACK_OUTPUTS.resultsTable, tables.results.tableName, 'Results table (key taskId)');
    output(STACK_OUTPUTS.governorTable, tables.governor.tableName, 'Governor state table');
    output(STACK_OUTPUTS.dashboardUrl, dashboard.url, 'CloudWatch dashboard');
    output(STACK_OUTPUTS.solverKeySecretArn, solverKey.secret.secretArn, 'Put the solver API key in this secret');
    output(STACK_OUTPUTS.eventBusName, events.bus.eventBusName, 'EventBridge bus with one event per completed task');
    output(STACK_OUTPUTS.consumerFunctionName, consumer.function.functionName, 'Consumer Lambda function');
    output(STACK_OUTPUTS.governorFunctionName, governor.function.functionName, 'Governor Lambda function');
    output(STACK_OUTPUTS.alarmTopicArn, alarms.topic.topicArn, 'SNS topic the alarms notify');
    if (overflow !== undefined) {
      output(
        STACK_OUTPUTS.overflowKeySecretArn,
        overflow.key.secret.secretArn,
        "Put the overflow provider's API key in this secret",
      );
      output(STACK_OUTPUTS.overflowFunctionName, overflow.function.functionName, 'Overflow consumer Lambda function');
    }
    output(
      STACK_OUTPUTS.operatorPolicyArn,
      operators.policy.managedPolicyArn,
      'Attach to operators: status, DLQ inspection and redrive',
    );
    output(STACK_OUTPUTS.fleetConfig, JSON.stringify(config.fleetConfig), 'Fleet configuration the functions run with');
    output(
      STACK_OUTPUTS.sendTaskCommand,
      `aws sqs send-message --queue-url ${queues.normal.queueUrl} --message-body '${JSON.stringify(EXAMPLE_TASK)}'`,
      'Send one task from a shell',
    );
  }
}
