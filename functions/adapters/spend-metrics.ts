/**
 * What the solves cost, as metrics: `SpendUsd` per consumer (its `service` dimension says which
 * provider: `consumer` the plan, `consumer-overflow` the overflow provider) and per method
 * (`service` + `Method`), so the dashboard shows spend per method and provider, and an alarm or
 * `captcha-fleet status` can sum the last hour.
 */
import { type Metrics, MetricUnit } from './metrics.js';
import { METRICS } from '../core/metric-names.js';

/** Count one solve's cost (nothing when the cost is unknown: unknown is never counted as 0). */
export function countSpend(metrics: Metrics, method: string, costUsd: number | undefined): void {
  if (costUsd === undefined || !Number.isFinite(costUsd)) return;
  metrics.addMetric(METRICS.spendUsd, MetricUnit.NoUnit, costUsd);
  const single = metrics.singleMetric();
  single.addDimension('Method', method);
  single.addMetric(METRICS.spendUsd, MetricUnit.NoUnit, costUsd);
}
