/**
 * The unit prices every cost figure of the project is computed from: one table, with its region
 * and the date it was read. The lab (lab/cost.ts), the docs' worked bills (scripts/cost-bill.ts)
 * and `npm start`'s summary all read this table; nothing else holds a price.
 */

/** One table of on-demand unit prices. */
export interface PriceTable {
  readonly region: string;
  /** When the prices were read from the public price pages (YYYY-MM-DD). */
  readonly asOf: string;
  readonly lambda: {
    /** Per GB-second of duration, by architecture. */
    readonly usdPerGbSecond: { readonly arm64: number; readonly x86_64: number };
    /** Per invocation. */
    readonly usdPerRequest: number;
  };
  readonly sqs: {
    /** Standard queue, per request; each 64 KiB chunk of a payload is a request. */
    readonly usdPerRequest: number;
    readonly chunkBytes: number;
  };
  readonly dynamodb: {
    /** On demand, per write request unit (1 KB of item per unit, rounded up). */
    readonly usdPerWriteUnit: number;
    /** On demand, per read request unit (4 KB strongly consistent, or 8 KB eventually consistent). */
    readonly usdPerReadUnit: number;
    /** Table storage (standard class), per GB a month, 100 bytes of overhead an item. */
    readonly storageUsdPerGbMonth: number;
    /** Point-in-time recovery (continuous backups), per GB of table a month. */
    readonly pitrUsdPerGbMonth: number;
  };
  readonly cloudwatch: {
    /** Logs ingestion (standard class), per GB. */
    readonly logsUsdPerGb: number;
    /** A custom metric (name + dimensions) for a month, prorated by the hour it is emitted in. */
    readonly usdPerMetricMonth: number;
    /** GetMetricData, per metric requested. */
    readonly getMetricDataUsdPerMetric: number;
    /** A standard-resolution alarm, per metric it reads (a metric math alarm bills each), a month. */
    readonly alarmUsdPerMetricMonth: number;
    /** A dashboard, a month. */
    readonly dashboardUsdPerMonth: number;
    /** Logs kept (archived, standard class), per GB a month. */
    readonly logsStorageUsdPerGbMonth: number;
  };
  readonly secretsManager: {
    /** A secret, a month (prorated by the hour). */
    readonly usdPerSecretMonth: number;
  };
  readonly kms: {
    /** A customer managed key, a month (prorated by the hour). */
    readonly usdPerKeyMonth: number;
  };
  readonly eventbridge: {
    /** Custom events (PutEvents), per 64 KB event. */
    readonly usdPerEvent: number;
  };
  readonly dataTransfer: {
    /** Data transfer out to the internet (Lambda and EC2 alike), per GB: the first 10 TB a month. */
    readonly internetOutUsdPerGb: number;
  };
  readonly ec2: {
    /** t4g.small on demand (2 vCPU, 2 GiB): the VM a thread pool of 20–100 threads runs on. */
    readonly t4gSmallUsdPerHour: number;
    /** c7g.large on demand: the smallest instance Lambda Managed Instances offers in this table. */
    readonly c7gLargeUsdPerHour: number;
    /** NAT gateway per hour (Managed Instances need an internet route to reach a solver API). */
    readonly natUsdPerHour: number;
  };
  readonly managedInstances: {
    /** Lambda Managed Instances charge the EC2 price plus this share. */
    readonly ec2Markup: number;
  };
  readonly durableFunctions: {
    /** Lambda durable functions: per durable operation (a step, a wait, a callback). */
    readonly usdPerOperation: number;
  };
  /** Hours in the month the monthly prices are prorated over (AWS uses 730). */
  readonly hoursPerMonth: number;
}

/**
 * us-east-1 on demand, read 2026-12-02 from the public price pages (Lambda, SQS, DynamoDB
 * after its Nov 2024 on-demand cut, CloudWatch, EventBridge, EC2); the standing charges (alarms,
 * dashboard, log and table storage, point-in-time recovery, the secret, the KMS key) and data
 * transfer out to the internet added 2026-12-04 from the same pages, unchanged since they were set.
 */
export const AWS_PRICES: PriceTable = {
  region: 'us-east-1',
  asOf: '2026-12-02',
  lambda: { usdPerGbSecond: { arm64: 0.0000133334, x86_64: 0.0000166667 }, usdPerRequest: 0.2 / 1e6 },
  sqs: { usdPerRequest: 0.4 / 1e6, chunkBytes: 64 * 1024 },
  dynamodb: {
    usdPerWriteUnit: 0.625 / 1e6,
    usdPerReadUnit: 0.125 / 1e6,
    storageUsdPerGbMonth: 0.25,
    pitrUsdPerGbMonth: 0.2,
  },
  cloudwatch: {
    logsUsdPerGb: 0.5,
    usdPerMetricMonth: 0.3,
    getMetricDataUsdPerMetric: 0.01 / 1000,
    alarmUsdPerMetricMonth: 0.1,
    dashboardUsdPerMonth: 3,
    logsStorageUsdPerGbMonth: 0.03,
  },
  secretsManager: { usdPerSecretMonth: 0.4 },
  kms: { usdPerKeyMonth: 1 },
  dataTransfer: { internetOutUsdPerGb: 0.09 },
  eventbridge: { usdPerEvent: 1 / 1e6 },
  ec2: { t4gSmallUsdPerHour: 0.0168, c7gLargeUsdPerHour: 0.0725, natUsdPerHour: 0.045 },
  managedInstances: { ec2Markup: 0.15 },
  durableFunctions: { usdPerOperation: 8 / 1e6 },
  hoursPerMonth: 730,
};

/** What a solver thread plan costs per thread-hour ($90 a month for 50 threads ≈ $0.0025). */
export const PLAN_USD_PER_THREAD_HOUR = 0.0025;
