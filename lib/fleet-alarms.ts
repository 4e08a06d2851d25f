/**
 * Alarms to one SNS topic (KMS-encrypted, TLS only; optional e-mail subscription): balance under
 * the halt level, DLQ (and reports DLQ) not empty, oldest task too old (each lane), p95 solve time too high,
 * error rate too high, governor errors, silence or blindness (holding on a missing signal), tasks
 * waiting with nothing solved, consumer throttles; with an overflow provider,
 * the spend cap holding the lane narrower than the backlog needs, and overflow consumer throttles.
 * Each alarm notifies on ALARM and on OK. The runbook in docs/deploy.md has a row per alarm.
 */
import { Duration, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as cw from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subscriptions from 'aws-cdk-lib/aws-sns-subscriptions';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { GOVERNOR_METRICS, METRICS, SERVICES } from '../functions/core/metric-names.js';
import type { FleetSettings, OverflowSettings } from '../functions/core/settings.js';
import { FleetMetrics, ONE_MINUTE } from './fleet-metrics.js';
import type { TaskQueues } from './task-queues.js';

/** Alarm ids (construct ids and the suffix of each alarm's name). */
export const ALARM_IDS = [
  'BalanceBelowHalt',
  'DeadLetterQueueNotEmpty',
  'ReportsDeadLetterQueueNotEmpty',
  'OldestTaskTooOld',
  'OldestHighPriorityTaskTooOld',
  'SolveTimeP95High',
  'ErrorRateHigh',
  'GovernorErrors',
  'GovernorSilent',
  'GovernorBlind',
  'TasksStalled',
  'ConsumerThrottled',
] as const;
export type AlarmId = (typeof ALARM_IDS)[number];

/** Alarms of the overflow lane, created only with an overflow provider configured. */
export const OVERFLOW_ALARM_IDS = ['OverflowCapReached', 'OverflowConsumerThrottled'] as const;
export type OverflowAlarmId = (typeof OVERFLOW_ALARM_IDS)[number];

/**
 * Minutes in a row the spend cap must hold the overflow lane narrower than the backlog asks before
 * OverflowCapReached fires: one capped tick is the budget working as meant; five minutes of them is
 * a backlog the cap leaves waiting past the target.
 */
export const OVERFLOW_CAP_ALARM_MINUTES = 5;

/** Minutes in a row in which most ticks held on a missing signal before GovernorBlind fires, and that share. */
export const BLIND_ALARM_MINUTES = 5;
export const BLIND_TICK_SHARE = 0.8;

/**
 * Minutes of tasks waiting with nothing solved before TasksStalled fires: ten, or two solve
 * deadlines where a deadline is longer (a small plan's long solves may leave a minute without one).
 */
export function stalledMinutes(settings: Pick<FleetSettings, 'solveDeadlineSeconds'>): number {
  return Math.max(10, 2 * Math.ceil(settings.solveDeadlineSeconds / 60));
}

/** The solved count the stall reads: the plan's consumer's, and the overflow consumer's when there is one. */
function solvedTerms(overflow: boolean): string {
  return overflow ? '(FILL(solved, 0) + FILL(overflowSolved, 0))' : 'FILL(solved, 0)';
}

/** Properties of {@link FleetAlarms}. */
export interface FleetAlarmsProps {
  /** Fleet settings: thresholds, names and the metrics namespace. */
  readonly settings: FleetSettings;
  /** The lanes and the DLQ (age and depth alarms). */
  readonly queues: TaskQueues;
  /** The reports queue's DLQ: reports the report function could not settle (depth alarm). */
  readonly reportsDlq: sqs.IQueue;
  /** The consumer function (throttle alarm). */
  readonly consumer: lambda.IFunction;
  /** The governor function (error and silence alarms). */
  readonly governor: lambda.IFunction;
  /**
   * The overflow consumer function, when `settings.overflow` is set (its throttle alarm; with it
   * comes the cap alarm).
   * @default - no overflow alarms
   */
  readonly overflowConsumer?: lambda.IFunction;
  /**
   * E-mail address subscribed to the alarm topic.
   * @default - no subscription
   */
  readonly alarmEmail?: string;
}

/** The fleet's alarms and the topic they notify. */
export class FleetAlarms extends Construct {
  /** The alarm topic (`<prefix>-alarms`). */
  public readonly topic: sns.Topic;
  /** Every alarm, by id. */
  public readonly alarms: Readonly<Record<AlarmId, cw.Alarm>>;
  /** The overflow lane's alarms, by id; undefined without an overflow provider. */
  public readonly overflowAlarms: Readonly<Record<OverflowAlarmId, cw.Alarm>> | undefined;
  readonly #settings: FleetSettings;

  constructor(scope: Construct, id: string, props: FleetAlarmsProps) {
    super(scope, id);
    const { settings, queues } = props;
    this.#settings = settings;
    const metrics = new FleetMetrics(settings);

    this.topic = this.#alarmTopic(settings, props.alarmEmail);

    const alarm = (alarmId: AlarmId, description: string, options: cw.AlarmProps) =>
      this.#alarm(alarmId, description, options);
    const oldest = (queue: typeof queues.normal, alarmId: AlarmId, laneName: string) =>
      alarm(alarmId, `The oldest ${laneName} task has waited longer than ${settings.oldestMessageAlarmSeconds} s.`, {
        metric: queue.metricApproximateAgeOfOldestMessage({ statistic: 'Maximum', period: ONE_MINUTE }),
        threshold: settings.oldestMessageAlarmSeconds,
        comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cw.TreatMissingData.NOT_BREACHING,
      });

    const notEmpty = (alarmId: AlarmId, queue: sqs.IQueue, description: string) =>
      alarm(alarmId, description, {
        metric: queue.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: ONE_MINUTE }),
        threshold: 1,
        comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cw.TreatMissingData.NOT_BREACHING,
      });

    this.alarms = {
      BalanceBelowHalt: alarm(
        'BalanceBelowHalt',
        `Solver balance under the halt level ($${settings.haltBalance}): the governor no longer scales up.`,
        {
          metric: metrics.governor(GOVERNOR_METRICS.balance, 'Minimum'),
          threshold: settings.haltBalance,
          comparisonOperator: cw.ComparisonOperator.LESS_THAN_THRESHOLD,
          evaluationPeriods: 1,
          // An unread balance is unknown, not zero: GovernorSilent covers a governor that reports nothing.
          treatMissingData: cw.TreatMissingData.IGNORE,
        },
      ),
      DeadLetterQueueNotEmpty: notEmpty(
        'DeadLetterQueueNotEmpty',
        queues.deadLetterQueue,
        'Messages are in the dead-letter queue: rejected tasks or tasks received too often.',
      ),
      ReportsDeadLetterQueueNotEmpty: notEmpty(
        'ReportsDeadLetterQueueNotEmpty',
        props.reportsDlq,
        'Reports are in the reports DLQ: malformed report messages, or reports the provider could not be asked about within their receives (its outage, account errors).',
      ),
      OldestTaskTooOld: oldest(queues.normal, 'OldestTaskTooOld', 'normal-priority'),
      OldestHighPriorityTaskTooOld: oldest(queues.high, 'OldestHighPriorityTaskTooOld', 'high-priority'),
      SolveTimeP95High: alarm(
        'SolveTimeP95High',
        `p95 solve time above ${settings.shortfallP95Ms / 1000} s for five minutes.`,
        {
          metric: metrics.consumer(METRICS.solveDuration, 'p95'),
          threshold: settings.shortfallP95Ms,
          comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
          evaluationPeriods: 5,
          datapointsToAlarm: 5,
          treatMissingData: cw.TreatMissingData.NOT_BREACHING,
        },
      ),
      ErrorRateHigh: alarm(
        'ErrorRateHigh',
        `More than ${settings.errorRateThreshold * 100} % of solver requests (submissions and result requests) answer an error (3 of 5 minutes).`,
        {
          metric: metrics.errorRatePercent(),
          threshold: settings.errorRateThreshold * 100,
          comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
          evaluationPeriods: 5,
          datapointsToAlarm: 3,
          treatMissingData: cw.TreatMissingData.NOT_BREACHING,
        },
      ),
      GovernorErrors: alarm('GovernorErrors', 'The governor failed; the fleet keeps its last ceilings (fail static).', {
        metric: props.governor.metricErrors({ statistic: 'Sum', period: ONE_MINUTE }),
        threshold: 1,
        comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
        evaluationPeriods: 1,
        treatMissingData: cw.TreatMissingData.NOT_BREACHING,
      }),
      GovernorSilent: alarm(
        'GovernorSilent',
        'No successful governor run for three minutes: no decision is being made.',
        {
          // Invocations less errors, per minute. Alarms cannot sum the Decision metric across its
          // Reason dimension (SEARCH is dashboard-only), so a completed run stands for a decision.
          metric: new cw.MathExpression({
            expression: 'FILL(runs, 0) - FILL(failures, 0)',
            usingMetrics: {
              runs: props.governor.metricInvocations({ statistic: 'Sum', period: ONE_MINUTE }),
              failures: props.governor.metricErrors({ statistic: 'Sum', period: ONE_MINUTE }),
            },
            label: 'successful governor runs',
            period: ONE_MINUTE,
          }),
          threshold: 1,
          comparisonOperator: cw.ComparisonOperator.LESS_THAN_THRESHOLD,
          evaluationPeriods: 3,
          datapointsToAlarm: 3,
          treatMissingData: cw.TreatMissingData.BREACHING,
        },
      ),
      ...this.#progressAlarms(metrics, queues, props.overflowConsumer !== undefined),
      ConsumerThrottled: alarm(
        'ConsumerThrottled',
        'Consumer invocations were throttled: messages return to the queue and may reach the DLQ unprocessed.',
        {
          metric: props.consumer.metricThrottles({ statistic: 'Sum', period: Duration.minutes(5) }),
          threshold: 1,
          comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cw.TreatMissingData.NOT_BREACHING,
        },
      ),
    };
    this.overflowAlarms =
      props.overflowConsumer !== undefined && settings.overflow !== undefined
        ? this.#overflowAlarms(metrics, settings.overflow, props.overflowConsumer)
        : undefined;
  }

  /** The alarm topic (`<prefix>-alarms`): KMS-encrypted with a key CloudWatch may use, TLS only, e-mail when given. */
  #alarmTopic(settings: FleetSettings, alarmEmail: string | undefined): sns.Topic {
    // CloudWatch can publish to an encrypted topic only with a customer managed key whose policy
    // lets cloudwatch.amazonaws.com use it (the AWS managed alias/aws/sns key does not).
    const key = new kms.Key(this, 'TopicKey', {
      description: `${settings.prefix} alarm topic encryption`,
      enableKeyRotation: true,
      pendingWindow: Duration.days(7),
      removalPolicy: RemovalPolicy.DESTROY,
    });
    key.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsPublish',
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['kms:Decrypt', 'kms:GenerateDataKey*'],
        resources: ['*'],
      }),
    );
    const topic = new sns.Topic(this, 'Topic', {
      topicName: `${settings.prefix}-alarms`,
      displayName: 'captcha-fleet alarms',
      masterKey: key,
      enforceSSL: true,
    });
    // enforceSSL writes the topic's policy, which replaces SNS's default one: without this grant
    // no alarm of the account may publish to it ("not authorized to perform: SNS:Publish").
    const stack = Stack.of(this);
    topic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'CloudWatchAlarmsPublish',
        principals: [new iam.ServicePrincipal('cloudwatch.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [topic.topicArn],
        conditions: {
          StringEquals: { 'aws:SourceAccount': stack.account },
          ArnLike: {
            'aws:SourceArn': `arn:${stack.partition}:cloudwatch:${stack.region}:${stack.account}:alarm:${settings.prefix}-*`,
          },
        },
      }),
    );
    if (alarmEmail !== undefined) topic.addSubscription(new subscriptions.EmailSubscription(alarmEmail));
    return topic;
  }

  /**
   * The alarms that see the fleet make no progress while every run succeeds: the governor holding
   * on a missing signal at every tick, and tasks waiting while nothing is solved.
   */
  #progressAlarms(
    metrics: FleetMetrics,
    queues: TaskQueues,
    overflow: boolean,
  ): Pick<Record<AlarmId, cw.Alarm>, 'GovernorBlind' | 'TasksStalled'> {
    const settings = this.#settings;
    const minutes = stalledMinutes(settings);
    return {
      GovernorBlind: this.#alarm(
        'GovernorBlind',
        `The governor has held the ceilings on a missing signal at ${BLIND_TICK_SHARE * 100} % of its ticks or more for ${BLIND_ALARM_MINUTES} minutes (HOLD_MISSING_SIGNAL): a read it needs fails, so it neither scales nor pauses.`,
        {
          // A read that fails is swallowed (missing is never read as zero) and the run succeeds:
          // neither GovernorErrors nor GovernorSilent sees a governor that cannot read its queues.
          // A share of the minute's ticks (each publishes Ceiling once), not a count: an invocation
          // ticks fewer times than 60 s ÷ tickMs, and a slow failing read stretches a tick.
          metric: new cw.MathExpression({
            expression: 'IF(FILL(ticks, 0) > 0, FILL(blind, 0) / ticks, 0)',
            usingMetrics: {
              blind: new cw.Metric({
                namespace: settings.metricsNamespace,
                metricName: GOVERNOR_METRICS.decision,
                dimensionsMap: { service: SERVICES.governor, Reason: 'HOLD_MISSING_SIGNAL' },
                statistic: 'Sum',
                period: ONE_MINUTE,
              }),
              ticks: metrics.governor(GOVERNOR_METRICS.ceiling, 'SampleCount'),
            },
            label: 'ticks held on a missing signal (share)',
            period: ONE_MINUTE,
          }),
          threshold: BLIND_TICK_SHARE,
          comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: BLIND_ALARM_MINUTES,
          datapointsToAlarm: BLIND_ALARM_MINUTES,
          treatMissingData: cw.TreatMissingData.NOT_BREACHING,
        },
      ),
      TasksStalled: this.#alarm(
        'TasksStalled',
        `Tasks have waited in the lanes while nothing was solved for ${minutes} minutes: the fleet is paused, blind, stuck, or every task it takes fails. The oldest-task alarms can miss it: SQS stops counting a message's age once it has been received three times, and a task near the DLQ goes back as a fresh copy.`,
        {
          metric: new cw.MathExpression({
            expression: `IF(FILL(normal, 0) + FILL(high, 0) > 0 AND ${solvedTerms(overflow)} == 0, 1, 0)`,
            usingMetrics: {
              normal: queues.normal.metricApproximateNumberOfMessagesVisible({
                statistic: 'Maximum',
                period: ONE_MINUTE,
              }),
              high: queues.high.metricApproximateNumberOfMessagesVisible({ statistic: 'Maximum', period: ONE_MINUTE }),
              solved: metrics.consumer(METRICS.solved, 'Sum'),
              ...(overflow ? { overflowSolved: metrics.consumerOf('overflow', METRICS.solved, 'Sum') } : {}),
            },
            label: 'tasks waiting, none solved',
            period: ONE_MINUTE,
          }),
          threshold: 1,
          comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: minutes,
          datapointsToAlarm: minutes,
          treatMissingData: cw.TreatMissingData.NOT_BREACHING,
        },
      ),
    };
  }

  /** One alarm named `<prefix>-<id>`, notifying the topic on ALARM and on OK, its runbook row named. */
  #alarm(alarmId: AlarmId | OverflowAlarmId, description: string, options: cw.AlarmProps): cw.Alarm {
    const created = new cw.Alarm(this, alarmId, {
      alarmName: `${this.#settings.prefix}-${alarmId}`,
      alarmDescription: `${description} Runbook: docs/deploy.md, "${alarmId}".`,
      ...options,
    });
    created.addAlarmAction(new cwActions.SnsAction(this.topic));
    created.addOkAction(new cwActions.SnsAction(this.topic));
    return created;
  }

  #overflowAlarms(
    metrics: FleetMetrics,
    overflow: OverflowSettings,
    overflowConsumer: lambda.IFunction,
  ): Record<OverflowAlarmId, cw.Alarm> {
    return {
      OverflowCapReached: this.#alarm(
        'OverflowCapReached',
        `The overflow spend cap ($${overflow.capUsdPerHour}/h, $${overflow.capUsdPerDay}/day) has held the overflow lane narrower than the backlog needs in each of the last ${OVERFLOW_CAP_ALARM_MINUTES} minutes: tasks wait past the ${overflow.latencyTargetSeconds} s target.`,
        {
          // The governor emits 1 on a tick where the cap binds while the backlog misses the target,
          // 0 otherwise: Maximum per minute is 1 when any tick of that minute was held by the cap.
          metric: metrics.governor(GOVERNOR_METRICS.overflowCapReached, 'Maximum'),
          threshold: 1,
          comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: OVERFLOW_CAP_ALARM_MINUTES,
          datapointsToAlarm: OVERFLOW_CAP_ALARM_MINUTES,
          // No datapoint is no governor run: GovernorSilent covers that, not this alarm.
          treatMissingData: cw.TreatMissingData.NOT_BREACHING,
        },
      ),
      OverflowConsumerThrottled: this.#alarm(
        'OverflowConsumerThrottled',
        'Overflow consumer invocations were throttled: messages return to their queue (normal, or high while the primary is paused) and may reach the DLQ unprocessed.',
        {
          metric: overflowConsumer.metricThrottles({ statistic: 'Sum', period: Duration.minutes(5) }),
          threshold: 1,
          comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
          evaluationPeriods: 1,
          treatMissingData: cw.TreatMissingData.NOT_BREACHING,
        },
      ),
    };
  }
}
