/**
 * The fleet stack's standing charges: what its resources bill by the month whether or not a task
 * comes (the alarms, the dashboard, the solver keys' secrets, the alarm topic's KMS key, the
 * reports queue's pollers), and what its data costs while it is kept (each answered record until
 * its TTL, with point-in-time recovery on the table; the logs for their retention). Counted from
 * the stack as built: test/infra/standing-charges.test.ts synthesizes it, with and without an
 * overflow provider, and counts each resource against these figures. Pure.
 */
import { type BillLine, pricer } from './bill.js';
import type { PriceTable } from './prices.js';

/** Resources of the fleet's stack billed by the month. */
export interface StackResources {
  /** Metrics its alarms read (a metric math alarm is billed per metric in its expression). */
  alarmMetrics: number;
  dashboards: number;
  /** Solver keys' secrets (created, or imported by name: the fleet's key costs the same either way). */
  secrets: number;
  /** Customer managed KMS keys (the alarm topic's). */
  kmsKeys: number;
  /**
   * Event source mappings that poll all the time (the reports queue's); the lanes' mappings are
   * the governor's to enable and are billed with the usage (`FleetUsage.pollingMappings`).
   */
  alwaysPollingMappings: number;
}

/**
 * The stack without an overflow provider (either solve mode): eight single-metric alarms, the
 * error rate's math over four metrics, the governor's silence and blindness over two each and the
 * stalled tasks' over three (lib/fleet-alarms.ts); one dashboard; the solver key's secret; the
 * alarm topic's key; the reports queue's mapping.
 */
export const FLEET_STACK: Readonly<StackResources> = {
  alarmMetrics: 19,
  dashboards: 1,
  secrets: 1,
  kmsKeys: 1,
  alwaysPollingMappings: 1,
};

/**
 * What an overflow provider adds: its two alarms (spend cap reached, its consumer throttled), its
 * solves in the stalled tasks' math, and its key's secret. Its consumer's mappings poll only
 * while the governor opens its lane.
 */
export const OVERFLOW_STACK_ADDS: Readonly<Pick<StackResources, 'alarmMetrics' | 'secrets'>> = {
  alarmMetrics: 3,
  secrets: 1,
};

/** The stack's standing resources, with or without an overflow provider. */
export function stackResources(options: { overflow: boolean }): StackResources {
  if (!options.overflow) return { ...FLEET_STACK };
  return {
    ...FLEET_STACK,
    alarmMetrics: FLEET_STACK.alarmMetrics + OVERFLOW_STACK_ADDS.alarmMetrics,
    secrets: FLEET_STACK.secrets + OVERFLOW_STACK_ADDS.secrets,
  };
}

/** What the standing lines need to know of the pollers (CostAssumptions' figures). */
export interface PollerShape {
  pollersPerMapping: number;
  longPollSeconds: number;
}

/** The empty ReceiveMessage long polls `mappings` event source mappings make through `hours`. */
export function idleLongPolls(mappings: number, hours: number, pollers: PollerShape): number {
  return mappings * pollers.pollersPerMapping * ((hours * 3600) / pollers.longPollSeconds);
}

/** The stack's resources through `hours`: each its share of the month (pricer's `monthly`). */
export function standingLines(
  resources: StackResources,
  hours: number,
  pollers: PollerShape,
  prices: PriceTable,
): BillLine[] {
  const p = pricer(prices);
  const idlePolls = idleLongPolls(resources.alwaysPollingMappings, hours, pollers);
  return [
    p.monthly(
      'cloudwatch',
      `alarms (${resources.alarmMetrics} alarm metrics)`,
      'alarm-metric-months',
      resources.alarmMetrics,
      hours,
      prices.cloudwatch.alarmUsdPerMetricMonth,
    ),
    p.monthly(
      'cloudwatch',
      'dashboard',
      'dashboard-months',
      resources.dashboards,
      hours,
      prices.cloudwatch.dashboardUsdPerMonth,
    ),
    p.monthly(
      'secretsmanager',
      "solver keys' secrets",
      'secret-months',
      resources.secrets,
      hours,
      prices.secretsManager.usdPerSecretMonth,
    ),
    p.monthly('kms', "alarm topic's key", 'key-months', resources.kmsKeys, hours, prices.kms.usdPerKeyMonth),
    p.sqsRequests('reports queue: idle long polls', idlePolls),
  ];
}

/** What the kept-data lines read. */
export interface KeptData {
  /** Answered records written, and their mean size, bytes. */
  records: number;
  recordBytes: number;
  /** How long a record is kept (its TTL), hours. */
  recordHours: number;
  /** Log bytes ingested, and how long the log groups keep them, days. */
  logBytes: number;
  logRetentionDays: number;
}

/** Days the fleet's log groups keep their logs (lib/fleet-function.ts, a month). */
export const LOG_RETENTION_DAYS = 30;

/** DynamoDB bills 100 bytes of overhead an item on top of its attributes. */
export const DYNAMODB_ITEM_OVERHEAD_BYTES = 100;

/**
 * Data kept: each answered record for its TTL (table storage, and point-in-time recovery on the
 * same bytes), the logs for their retention. Logs are billed uncompressed here, an upper bound:
 * CloudWatch bills what it archives, gzip-compressed.
 */
export function keptDataLines(kept: KeptData, prices: PriceTable): BillLine[] {
  const p = pricer(prices);
  const recordGbMonths =
    ((kept.records * (kept.recordBytes + DYNAMODB_ITEM_OVERHEAD_BYTES)) / 1e9) *
    (kept.recordHours / prices.hoursPerMonth);
  const logGbMonths = (kept.logBytes / 1e9) * ((kept.logRetentionDays * 24) / prices.hoursPerMonth);
  return [
    p.storage('dynamodb', 'results kept (their TTL)', recordGbMonths, prices.dynamodb.storageUsdPerGbMonth),
    p.storage('dynamodb', 'results: point-in-time recovery', recordGbMonths, prices.dynamodb.pitrUsdPerGbMonth),
    p.storage('cloudwatch', 'logs kept (their retention)', logGbMonths, prices.cloudwatch.logsStorageUsdPerGbMonth),
  ];
}
