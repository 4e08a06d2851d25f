/**
 * The captcha-fleet stack: composes the constructs (queues, tables, key, events, consumer, the
 * overflow lane when configured, governor, operator access, alarms, dashboard) and prints what
 * producers and operators need.
 */
import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { STACK_OUTPUTS } from '../functions/core/deployment.js';
import { resolveFleetStackConfig, type FleetStackOptions, type ResolvedFleetStackConfig } from './config.js';
import { CompletionEvents } from './completion-events.js';
import { Consumer } from './consumer.js';
import { FleetAlarms } from './fleet-alarms.js';
import { FleetDashboard } from './fleet-dashboard.js';
import { FleetTables } from './fleet-tables.js';
import { Governor } from './governor.js';
import { OperatorAccess } from './operator-access.js';
import { OverflowConsumer } from './overflow-consumer.js';
import { SolverKeySecret } from './solver-key-secret.js';
import { TaskQueues } from './task-queues.js';

/** Properties of {@link CaptchaFleetStack}: the stack's own plus the fleet's options (see FleetStackOptions). */
export interface CaptchaFleetStackProps extends StackProps, FleetStackOptions {}

/** An example task producers can send as-is (schema v1). */
export const EXAMPLE_TASK = {
  method: 'turnstile',
  params: { sitekey: '0x4AAAAAAAexample', pageurl: 'https://example.com/login' },
};

/** The whole fleet in one stack. */
export class CaptchaFleetStack extends Stack {
  /** The validated configuration the constructs were built from. */
  public readonly config: ResolvedFleetStackConfig;
  public readonly queues: TaskQueues;
  public readonly tables: FleetTables;
  public readonly solverKey: SolverKeySecret;
  public readonly events: CompletionEvents;
  public readonly consumer: Consumer;
  /** The overflow lane; undefined unless `fleet.overflow` is set (the stack then creates nothing for it). */
  public readonly overflow: OverflowConsumer | undefined;
  public readonly governor: Governor;
  public readonly operators: OperatorAccess;
  public readonly alarms: FleetAlarms;
  public readonly dashboard: FleetDashboard;

  /** @throws ConfigError listing every configuration problem, before any resource is created. */
  constructor(scope: Construct, id: string, props: CaptchaFleetStackProps = {}) {
    const config = resolveFleetStackConfig(props);
    super(scope, id, {
      description: 'captcha-fleet: SQS + Lambda CAPTCHA solving capped by the solver plan threads',
      ...props,
    });
    this.config = config;
    const { settings, fleetConfig } = config;

    this.queues = new TaskQueues(this, 'Queues', { settings });
    this.tables = new FleetTables(this, 'Tables', { settings, resultsRemoval: config.resultsRemoval });
    this.solverKey = new SolverKeySecret(this, 'SolverKey', {
      settings,
      existingSecretName: config.solverKeySecretName,
    });
    this.events = new CompletionEvents(this, 'CompletionEvents', { settings });
    const shared = {
      settings,
      fleetConfig,
      queues: this.queues,
      resultsTable: this.tables.results,
      governorTable: this.tables.governor,
      solverKey: this.solverKey,
      bus: this.events.bus,
    };
    this.consumer = new Consumer(this, 'Consumer', {
      ...shared,
      initialCeilings: config.initialCeilings,
      reserveConcurrency: config.reserveConsumerConcurrency,
    });
    this.overflow =
      settings.overflow === undefined
        ? undefined
        : new OverflowConsumer(this, 'Overflow', {
            ...shared,
            overflow: settings.overflow,
            reserveConcurrency: config.reserveConsumerConcurrency,
          });
    if (this.overflow !== undefined) this.consumer.resumeAtOverflow(this.overflow.key);
    this.events.admitOnly(
      this.consumer.fleetFunction.role,
      ...(this.overflow !== undefined ? [this.overflow.fleetFunction.role] : []),
    );
    this.governor = new Governor(this, 'Governor', {
      ...shared,
      consumer: this.consumer,
      ...(this.overflow !== undefined ? { overflow: this.overflow } : {}),
    });
    this.operators = new OperatorAccess(this, 'Operators', {
      settings,
      queues: this.queues,
      resultsTable: this.tables.results,
      governorTable: this.tables.governor,
    });
    this.alarms = new FleetAlarms(this, 'Alarms', {
      settings,
      queues: this.queues,
      consumer: this.consumer.function,
      governor: this.governor.function,
      ...(this.overflow !== undefined ? { overflowConsumer: this.overflow.function } : {}),
      ...(config.alarmEmail !== undefined ? { alarmEmail: config.alarmEmail } : {}),
    });
    this.dashboard = new FleetDashboard(this, 'Dashboard', {
      settings,
      queues: this.queues,
      consumer: this.consumer.function,
      governor: this.governor.function,
      ...(this.overflow !== undefined ? { overflowConsumer: this.overflow.function } : {}),
      alarms: [...Object.values(this.alarms.alarms), ...Object.values(this.alarms.overflowAlarms ?? {})],
    });

    this.outputs(config);
  }

  private outputs(config: ResolvedFleetStackConfig): void {
    const output = (key: string, value: string, description: string) =>
      new CfnOutput(this, key, { value, description });
    output(STACK_OUTPUTS.normalQueueUrl, this.queues.normal.queueUrl, 'Send normal-priority tasks here');
    output(
      STACK_OUTPUTS.highQueueUrl,
      this.queues.high.queueUrl,
      'Send high-priority tasks here (the producer client routes priority "high" here)',
    );
    output(STACK_OUTPUTS.dlqUrl, this.queues.deadLetterQueue.queueUrl, 'Dead-letter queue of both lanes');
    output(STACK_OUTPUTS.resultsTable, this.tables.results.tableName, 'Results table (key taskId)');
    output(STACK_OUTPUTS.governorTable, this.tables.governor.tableName, 'Governor state table');
    output(STACK_OUTPUTS.dashboardUrl, this.dashboard.url, 'CloudWatch dashboard');
    output(STACK_OUTPUTS.solverKeySecretArn, this.solverKey.secret.secretArn, 'Put the solver API key in this secret');
    output(
      STACK_OUTPUTS.eventBusName,
      this.events.bus.eventBusName,
      'EventBridge bus with one event per completed task',
    );
    output(STACK_OUTPUTS.consumerFunctionName, this.consumer.function.functionName, 'Consumer Lambda function');
    output(STACK_OUTPUTS.governorFunctionName, this.governor.function.functionName, 'Governor Lambda function');
    output(STACK_OUTPUTS.alarmTopicArn, this.alarms.topic.topicArn, 'SNS topic the alarms notify');
    if (this.overflow !== undefined) {
      output(
        STACK_OUTPUTS.overflowKeySecretArn,
        this.overflow.key.secret.secretArn,
        "Put the overflow provider's API key in this secret",
      );
      output(
        STACK_OUTPUTS.overflowFunctionName,
        this.overflow.function.functionName,
        'Overflow consumer Lambda function',
      );
    }
    output(
      STACK_OUTPUTS.operatorPolicyArn,
      this.operators.policy.managedPolicyArn,
      'Attach to operators: status, DLQ inspection and redrive',
    );
    output(STACK_OUTPUTS.fleetConfig, JSON.stringify(config.fleetConfig), 'Fleet configuration the functions run with');
    output(
      STACK_OUTPUTS.sendTaskCommand,
      `aws sqs send-message --queue-url ${this.queues.normal.queueUrl} --message-body '${JSON.stringify(EXAMPLE_TASK)}'`,
      'Send one task from a shell',
    );
  }
}
