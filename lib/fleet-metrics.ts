/**
 * CloudWatch metrics of the fleet as the dashboard and the alarms read them. Names come from
 * functions/core/metric-names.ts; the namespace is the fleet's own (`CaptchaFleet/<prefix>`,
 * settings.metricsNamespace), so another fleet's metrics never match; the dimension is the one
 * Powertools Metrics adds by default (`service`, from POWERTOOLS_SERVICE_NAME). Metrics with extra
 * dimensions (ErrorCode, Reason) are read through SEARCH on the dashboard, which alarms cannot use.
 */
import { Duration } from 'aws-cdk-lib';
import * as cw from 'aws-cdk-lib/aws-cloudwatch';
import { GOVERNOR_METRICS, METRICS, type REPORT_METRICS, SERVICES } from '../functions/core/metric-names.js';
import { consumerServiceOf, type SolverProvider } from '../functions/core/provider.js';
import type { FleetSettings } from '../functions/core/settings.js';

export const ONE_MINUTE = Duration.minutes(1);

export class FleetMetrics {
  constructor(private readonly settings: FleetSettings) {}

  /** A consumer metric (dimension service=consumer). */
  consumer(name: (typeof METRICS)[keyof typeof METRICS], statistic: string, label?: string): cw.Metric {
    return this.consumerOf('primary', name, statistic, label);
  }

  /** A metric of one provider's consumer (dimension service=consumer, or consumer-overflow for the overflow lane). */
  consumerOf(
    provider: SolverProvider,
    name: (typeof METRICS)[keyof typeof METRICS],
    statistic: string,
    label?: string,
  ): cw.Metric {
    return new cw.Metric({
      namespace: this.settings.metricsNamespace,
      metricName: name,
      dimensionsMap: { service: consumerServiceOf(provider) },
      statistic,
      period: ONE_MINUTE,
      ...(label ? { label } : {}),
    });
  }

  /** A governor metric (dimension service=governor). */
  governor(
    name: (typeof GOVERNOR_METRICS)[keyof typeof GOVERNOR_METRICS],
    statistic: string,
    label?: string,
  ): cw.Metric {
    return new cw.Metric({
      namespace: this.settings.metricsNamespace,
      metricName: name,
      dimensionsMap: { service: SERVICES.governor },
      statistic,
      period: ONE_MINUTE,
      ...(label ? { label } : {}),
    });
  }

  /** A report function metric (dimension service=reporter). */
  reporter(name: (typeof REPORT_METRICS)[keyof typeof REPORT_METRICS], statistic: string, label?: string): cw.Metric {
    return new cw.Metric({
      namespace: this.settings.metricsNamespace,
      metricName: name,
      dimensionsMap: { service: SERVICES.reporter },
      statistic,
      period: ONE_MINUTE,
      ...(label ? { label } : {}),
    });
  }

  /**
   * Every series of one metric of the fleet with the dimension set `service` + `dimension` (dashboards
   * only). The `{namespace, dimensions}` schema matches the namespace exactly: a bare search term
   * matches partially, and `CaptchaFleet/prod` would then also find `CaptchaFleet/prod-eu`.
   */
  search(name: string, dimension: string, statistic: string, label: string): cw.MathExpression {
    return new cw.MathExpression({
      expression: `SEARCH('{"${this.settings.metricsNamespace}",service,${dimension}} MetricName="${name}"', '${statistic}', 60)`,
      usingMetrics: {},
      label,
      period: ONE_MINUTE,
    });
  }

  /**
   * Transient and task-terminal error answers per solver request (in.php submissions + res.php
   * result requests), in percent: the same definition the governor's error-rate signal uses
   * (functions/core/governor/signals.ts). Per submission it would count every poll's transient
   * answer against one submission and read several times too high.
   */
  errorRatePercent(): cw.MathExpression {
    return minuteExpression(
      'IF(FILL(submissions, 0) + FILL(results, 0) > 0, 100 * (FILL(transient, 0) + FILL(task, 0)) / (FILL(submissions, 0) + FILL(results, 0)), 0)',
      {
        transient: this.consumer(METRICS.transientErrors, 'Sum'),
        task: this.consumer(METRICS.taskErrors, 'Sum'),
        submissions: this.consumer(METRICS.submissions, 'Sum'),
        results: this.consumer(METRICS.resultRequests, 'Sum'),
      },
      'error rate per solver request (%)',
    );
  }

  /**
   * Threads the arrivals and the backlog need beyond the free threads (the governor's shortfall:
   * needed − free, never below 0), from its NeededThreads and FreeThreads: an expression on the
   * dashboard rather than a metric of its own (one custom metric fewer to pay for). No datapoint
   * while the needed threads are unknown.
   */
  shortfall(): cw.MathExpression {
    return minuteExpression(
      'IF(needed > free, needed - free, 0)',
      {
        needed: this.governor(GOVERNOR_METRICS.needed, 'Maximum'),
        free: this.governor(GOVERNOR_METRICS.freeThreads, 'Minimum'),
      },
      'shortfall (needed − free)',
    );
  }

  /** Over-cap answers per submission, in percent. */
  overCapRatePercent(): cw.MathExpression {
    return minuteExpression(
      'IF(FILL(submissions, 0) > 0, 100 * FILL(overcap, 0) / submissions, 0)',
      {
        overcap: this.consumer(METRICS.overCapAnswers, 'Sum'),
        submissions: this.consumer(METRICS.submissions, 'Sum'),
      },
      'over-cap answers per submission (%)',
    );
  }
}

/** A metric math expression over the fleet's metrics, one datapoint a minute. */
function minuteExpression(
  expression: string,
  usingMetrics: Record<string, cw.IMetric>,
  label: string,
): cw.MathExpression {
  return new cw.MathExpression({ expression, usingMetrics, label, period: ONE_MINUTE });
}
