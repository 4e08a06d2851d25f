/**
 * The fleet at a glance: backlog and oldest task per lane, in flight, ceiling vs needed vs actual
 * concurrency, p50/p95 solve time, solved / failed / rejected per minute, error and over-cap
 * rates, balance, DLQ depth, governor decisions by reason; with an overflow provider, the overflow
 * lane (ceiling vs excess, spend against the caps, its balance, solves and p95 per provider, its
 * decisions); spend per provider and per method, and reports (refunds asked, good, refused by
 * reason); and the alarms.
 */
import { Aws, Duration } from 'aws-cdk-lib';
import * as cw from 'aws-cdk-lib/aws-cloudwatch';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { GOVERNOR_METRICS, METRICS, REPORT_METRICS } from '../functions/core/metric-names.js';
import type { FleetSettings, OverflowSettings } from '../functions/core/settings.js';
import { FleetMetrics, ONE_MINUTE } from './fleet-metrics.js';
import type { TaskQueues } from './task-queues.js';

/** Properties of {@link FleetDashboard}. */
export interface FleetDashboardProps {
  /** Fleet settings: the dashboard's name (the prefix), annotations and the metrics namespace. */
  readonly settings: FleetSettings;
  /** The lanes and the DLQ. */
  readonly queues: TaskQueues;
  /** The consumer function. */
  readonly consumer: lambda.IFunction;
  /** The governor function. */
  readonly governor: lambda.IFunction;
  /**
   * The overflow consumer function, when `settings.overflow` is set: adds the overflow rows.
   * @default - no overflow rows
   */
  readonly overflowConsumer?: lambda.IFunction;
  /**
   * The reports queue's DLQ (reports that could not be made, and malformed ones).
   * @default - not shown
   */
  readonly reportsDlq?: sqs.IQueue;
  /** Alarms shown in the status widget. */
  readonly alarms: readonly cw.IAlarm[];
}

/** The fleet's CloudWatch dashboard. */
export class FleetDashboard extends Construct {
  /** The dashboard (named after the prefix). */
  public readonly dashboard: cw.Dashboard;
  /** Console URL of the dashboard. */
  public readonly url: string;

  constructor(scope: Construct, id: string, props: FleetDashboardProps) {
    super(scope, id);
    const { settings, queues } = props;
    const metrics = new FleetMetrics(settings);
    const name = settings.prefix;
    const perMinute = { statistic: 'Sum', period: ONE_MINUTE };
    const max = { statistic: 'Maximum', period: ONE_MINUTE };
    const graph = (title: string, left: cw.IMetric[], extra: Partial<cw.GraphWidgetProps> = {}) =>
      new cw.GraphWidget({ title, left, width: 8, height: 6, ...extra });

    this.dashboard = new cw.Dashboard(this, 'Dashboard', {
      dashboardName: name,
      defaultInterval: Duration.hours(3),
    });
    this.dashboard.addWidgets(
      new cw.TextWidget({
        markdown: `# ${name}\nPlan ${settings.planThreads} threads, ${settings.reservedThreads} reserved for others, ${settings.tasksPerInvocation} task(s) per invocation, ceiling at most ${settings.maxConcurrency}. Halt scaling under $${settings.haltBalance}, pause under $${settings.pauseBalance}. Runbook: docs/deploy.md ("Operate").`,
        width: 24,
        height: 2,
      }),
    );
    this.dashboard.addWidgets(
      graph('Backlog (visible tasks)', [
        queues.normal.metricApproximateNumberOfMessagesVisible({ ...max, label: 'normal' }),
        queues.high.metricApproximateNumberOfMessagesVisible({ ...max, label: 'high' }),
      ]),
      graph(
        'Oldest task (s)',
        [
          queues.normal.metricApproximateAgeOfOldestMessage({ ...max, label: 'normal' }),
          queues.high.metricApproximateAgeOfOldestMessage({ ...max, label: 'high' }),
        ],
        { leftAnnotations: [{ value: settings.oldestMessageAlarmSeconds, label: 'alarm', color: cw.Color.RED }] },
      ),
      graph('In flight (received, not deleted)', [
        queues.normal.metricApproximateNumberOfMessagesNotVisible({ ...max, label: 'normal' }),
        queues.high.metricApproximateNumberOfMessagesNotVisible({ ...max, label: 'high' }),
      ]),
    );
    this.dashboard.addWidgets(
      graph('Ceiling vs needed vs actual concurrency', [
        metrics.governor(GOVERNOR_METRICS.ceiling, 'Maximum', 'ceiling (both lanes)'),
        metrics.governor(GOVERNOR_METRICS.freeThreads, 'Minimum', 'free threads'),
        metrics.governor(GOVERNOR_METRICS.needed, 'Maximum', 'needed threads'),
        metrics.shortfall(),
        metrics.governor(GOVERNOR_METRICS.threadsHeld, 'Maximum', 'threads held (leases when parked)'),
        props.consumer.metric('ConcurrentExecutions', { ...max, label: 'actual (consumer concurrent executions)' }),
      ]),
      graph(
        'Solve time (ms)',
        [metrics.consumer(METRICS.solveDuration, 'p50', 'p50'), metrics.consumer(METRICS.solveDuration, 'p95', 'p95')],
        { leftAnnotations: [{ value: settings.shortfallP95Ms, label: 'p95 alarm', color: cw.Color.RED }] },
      ),
      graph('Solved / failed / rejected per minute', [
        metrics.consumer(METRICS.solved, 'Sum', 'solved'),
        metrics.search(METRICS.failed, 'ErrorCode', 'Sum', 'failed'),
        metrics.consumer(METRICS.rejected, 'Sum', 'rejected'),
        metrics.consumer(METRICS.tokensStale, 'Sum', 'tokens delivered stale'),
      ]),
    );
    this.dashboard.addWidgets(
      graph('Error and over-cap rates (%)', [metrics.errorRatePercent(), metrics.overCapRatePercent()], {
        leftAnnotations: [{ value: settings.errorRateThreshold * 100, label: 'error alarm', color: cw.Color.RED }],
      }),
      graph('Balance (USD)', [metrics.governor(GOVERNOR_METRICS.balance, 'Minimum', 'balance')], {
        leftAnnotations: [
          { value: settings.haltBalance, label: 'halt scaling', color: cw.Color.ORANGE },
          { value: settings.pauseBalance, label: 'pause', color: cw.Color.RED },
        ],
      }),
      graph('Parked tasks: parked, recorded by the governor’s watch, failed watch rounds (per minute)', [
        metrics.consumer(METRICS.parked, 'Sum', 'parked by the consumers'),
        metrics.governor(GOVERNOR_METRICS.parkedRecorded, 'Sum', 'recorded by the watch'),
        metrics.governor(GOVERNOR_METRICS.watchFailedRounds, 'Sum', 'failed watch rounds'),
      ]),
      graph('Dead-letter queue depth', [
        queues.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ ...max, label: 'DLQ' }),
      ]),
    );
    this.dashboard.addWidgets(
      graph('Governor decisions by reason', [metrics.search(GOVERNOR_METRICS.decision, 'Reason', 'Sum', 'decisions')], {
        width: 12,
        right: [metrics.governor(GOVERNOR_METRICS.paused, 'Maximum', 'paused (1 = consumption stopped)')],
      }),
      graph(
        'Retries, duplicates, throttles, governor failures',
        [
          metrics.search(METRICS.retried, 'Reason', 'Sum', 'retried'),
          metrics.consumer(METRICS.duplicates, 'Sum', 'duplicate deliveries'),
          props.consumer.metricThrottles({ ...perMinute, label: 'consumer throttles' }),
          props.governor.metricErrors({ ...perMinute, label: 'governor errors' }),
          metrics.governor(GOVERNOR_METRICS.tickFailed, 'Sum', 'governor ticks failed'),
        ],
        { width: 12 },
      ),
    );
    this.dashboard.addWidgets(...spendAndReportRows(metrics, settings, props.reportsDlq));
    if (settings.overflow !== undefined && props.overflowConsumer !== undefined)
      this.dashboard.addWidgets(...overflowRows(metrics, settings.overflow, props.overflowConsumer));
    this.dashboard.addWidgets(
      new cw.AlarmStatusWidget({ title: 'Alarms', alarms: [...props.alarms], width: 24, height: 4 }),
    );

    this.url = `https://${Aws.REGION}.console.aws.amazon.com/cloudwatch/home?region=${Aws.REGION}#dashboards:name=${name}`;
  }
}

/**
 * What the solves cost (per provider: the plan's consumer and the overflow consumer; per method
 * and provider) and what producers reported: refunds asked for (and their cost), good answers,
 * refusals by reason, repeats and reports retried.
 */
function spendAndReportRows(
  metrics: FleetMetrics,
  settings: FleetSettings,
  reportsDlq: sqs.IQueue | undefined,
): cw.IWidget[] {
  const graph = (title: string, left: cw.IMetric[], extra: Partial<cw.GraphWidgetProps> = {}) =>
    new cw.GraphWidget({ title, left, width: 8, height: 6, leftYAxis: { min: 0 }, ...extra });
  return [
    graph('Spend (USD per minute), by provider', [
      metrics.consumerOf('primary', METRICS.spendUsd, 'Sum', 'plan'),
      ...(settings.overflow !== undefined ? [metrics.consumerOf('overflow', METRICS.spendUsd, 'Sum', 'overflow')] : []),
    ]),
    graph('Spend (USD per minute), by method and provider', [
      metrics.search(METRICS.spendUsd, 'Method', 'Sum', 'spend'),
    ]),
    graph(
      'Reports: refunds asked, good answers, refused',
      [
        metrics.reporter(REPORT_METRICS.refunds, 'Sum', 'refunds asked (bad, accepted)'),
        metrics.reporter(REPORT_METRICS.goodReports, 'Sum', 'good (accepted)'),
        metrics.search(REPORT_METRICS.reportsRefused, 'Reason', 'Sum', 'refused'),
        metrics.reporter(REPORT_METRICS.reportsRepeated, 'Sum', 'repeated (answered from the record)'),
        metrics.reporter(REPORT_METRICS.reportErrors, 'Sum', 'not made yet (retried)'),
        ...(reportsDlq !== undefined
          ? [
              reportsDlq.metricApproximateNumberOfMessagesVisible({
                statistic: 'Maximum',
                period: ONE_MINUTE,
                label: 'reports DLQ',
              }),
            ]
          : []),
      ],
      { right: [metrics.reporter(REPORT_METRICS.refundsUsd, 'Sum', 'refunds asked (USD)')] },
    ),
  ];
}

/**
 * The overflow lane's widgets: a heading, then ceiling vs excess vs actual, spend against the caps,
 * the provider's balance and price, and per provider (plan vs overflow) solves and p95, and the
 * overflow decisions by reason: a full-width heading, then three graphs to a row.
 */
function overflowRows(
  metrics: FleetMetrics,
  overflow: OverflowSettings,
  overflowConsumer: lambda.IFunction,
): cw.IWidget[] {
  const graph = (title: string, left: cw.IMetric[], extra: Partial<cw.GraphWidgetProps> = {}) =>
    new cw.GraphWidget({ title, left, width: 8, height: 6, ...extra });
  const fromZero = { leftYAxis: { min: 0 }, rightYAxis: { min: 0 } };
  return [
    new cw.TextWidget({
      markdown: `## Overflow to ${overflow.baseUrl}\nOpens when the plan's threads are all busy and the backlog would wait past ${overflow.latencyTargetSeconds} s; at most ${overflow.maxConcurrency} invocations, $${overflow.capUsdPerHour} per UTC hour and $${overflow.capUsdPerDay} per UTC day. Runbook: docs/deploy.md ("OverflowCapReached").`,
      width: 24,
      height: 2,
    }),
    graph(
      'Overflow lane: ceiling vs excess vs actual',
      [
        metrics.governor(GOVERNOR_METRICS.overflowCeiling, 'Maximum', 'ceiling (0 = closed)'),
        metrics.governor(GOVERNOR_METRICS.overflowExcess, 'Maximum', 'excess the backlog asks'),
        overflowConsumer.metric('ConcurrentExecutions', {
          statistic: 'Maximum',
          period: ONE_MINUTE,
          label: 'actual (overflow concurrent executions)',
        }),
      ],
      fromZero,
    ),
    graph(
      'Overflow spend (USD) vs caps',
      [metrics.governor(GOVERNOR_METRICS.overflowSpendHour, 'Maximum', 'this UTC hour')],
      {
        ...fromZero,
        right: [metrics.governor(GOVERNOR_METRICS.overflowSpendDay, 'Maximum', 'today (UTC)')],
        leftAnnotations: [{ value: overflow.capUsdPerHour, label: 'hourly cap', color: cw.Color.RED }],
        rightAnnotations: [{ value: overflow.capUsdPerDay, label: 'daily cap', color: cw.Color.ORANGE }],
      },
    ),
    graph('Overflow balance (USD)', [metrics.governor(GOVERNOR_METRICS.overflowBalance, 'Minimum', 'balance')], {
      ...fromZero,
      right: [metrics.governor(GOVERNOR_METRICS.overflowPrice, 'Maximum', 'price per solve')],
      leftAnnotations: [
        { value: overflow.haltBalance, label: 'halt growing', color: cw.Color.ORANGE },
        { value: overflow.pauseBalance, label: 'close', color: cw.Color.RED },
      ],
    }),
    graph('Solved per minute, by provider', [
      metrics.consumerOf('primary', METRICS.solved, 'Sum', 'plan'),
      metrics.consumerOf('overflow', METRICS.solved, 'Sum', 'overflow'),
    ]),
    graph('p95 solve time (ms), by provider', [
      metrics.consumerOf('primary', METRICS.solveDuration, 'p95', 'plan'),
      metrics.consumerOf('overflow', METRICS.solveDuration, 'p95', 'overflow'),
    ]),
    graph(
      'Overflow decisions by reason',
      [metrics.search(GOVERNOR_METRICS.overflowDecision, 'Reason', 'Sum', 'overflow decisions')],
      {
        right: [
          metrics.governor(
            GOVERNOR_METRICS.overflowCapReached,
            'Maximum',
            'cap reached (1 = the cap holds the lane back)',
          ),
        ],
      },
    ),
  ];
}
