/**
 * A bill: line items priced from the price table (prices.ts), each with its quantity and unit,
 * summed per service. The builders take counted quantities (GB-seconds, requests, write units…)
 * and never a price: every price comes from the table passed in.
 */
import type { FunctionSizing } from '../function-sizing.js';
import type { PriceTable } from './prices.js';

/** The services a bill line belongs to. */
export type BillService =
  | 'lambda'
  | 'sqs'
  | 'dynamodb'
  | 'cloudwatch'
  | 'eventbridge'
  | 'secretsmanager'
  | 'kms'
  | 'datatransfer'
  | 'ec2';

/** One priced line. */
export interface BillLine {
  readonly service: BillService;
  /** What is billed, in words ("consumer duration", "results table writes"). */
  readonly item: string;
  readonly quantity: number;
  /** Unit of `quantity` ("GB-s", "requests", "write units", "GB", "metric-months", "hours"). */
  readonly unit: string;
  readonly usd: number;
}

/** A bill: its lines, their sum and the sum per service. */
export interface Bill {
  readonly lines: readonly BillLine[];
  readonly usd: number;
  readonly byService: Readonly<Record<BillService, number>>;
}

/** Sums lines into a bill (a service with no line is $0). */
export function billOf(lines: readonly BillLine[]): Bill {
  const byService: Record<BillService, number> = {
    lambda: 0,
    sqs: 0,
    dynamodb: 0,
    cloudwatch: 0,
    eventbridge: 0,
    secretsmanager: 0,
    kms: 0,
    datatransfer: 0,
    ec2: 0,
  };
  let usd = 0;
  for (const line of lines) {
    byService[line.service] += line.usd;
    usd += line.usd;
  }
  return { lines, usd, byService };
}

/** Priced line builders over one price table. */
export function pricer(prices: PriceTable) {
  return {
    /** Lambda duration: `seconds` of invocations at the function's memory and architecture. */
    lambdaDuration(item: string, sizing: FunctionSizing, seconds: number): BillLine {
      const gbSeconds = (seconds * sizing.memoryMb) / 1024;
      return {
        service: 'lambda',
        item: `${item} (${sizing.memoryMb} MB ${sizing.architecture})`,
        quantity: gbSeconds,
        unit: 'GB-s',
        usd: gbSeconds * prices.lambda.usdPerGbSecond[sizing.architecture],
      };
    },
    lambdaRequests(item: string, requests: number): BillLine {
      return {
        service: 'lambda',
        item,
        quantity: requests,
        unit: 'requests',
        usd: requests * prices.lambda.usdPerRequest,
      };
    },
    /** SQS requests; a request carrying `bytes` of payload is billed per 64 KiB chunk. */
    sqsRequests(item: string, requests: number, bytes = 0): BillLine {
      const billed = requests * sqsChunks(prices, bytes);
      return { service: 'sqs', item, quantity: billed, unit: 'requests', usd: billed * prices.sqs.usdPerRequest };
    },
    dynamoWrites(item: string, units: number): BillLine {
      return {
        service: 'dynamodb',
        item,
        quantity: units,
        unit: 'write units',
        usd: units * prices.dynamodb.usdPerWriteUnit,
      };
    },
    dynamoReads(item: string, units: number): BillLine {
      return {
        service: 'dynamodb',
        item,
        quantity: units,
        unit: 'read units',
        usd: units * prices.dynamodb.usdPerReadUnit,
      };
    },
    logs(item: string, bytes: number): BillLine {
      const gb = bytes / 1e9;
      return { service: 'cloudwatch', item, quantity: gb, unit: 'GB', usd: gb * prices.cloudwatch.logsUsdPerGb };
    },
    /** `metrics` custom metrics emitted through `hours` (AWS prorates the metric-month by the hour). */
    customMetrics(item: string, metrics: number, hours: number): BillLine {
      const months = (metrics * hours) / prices.hoursPerMonth;
      return {
        service: 'cloudwatch',
        item,
        quantity: months,
        unit: 'metric-months',
        usd: months * prices.cloudwatch.usdPerMetricMonth,
      };
    },
    getMetricData(item: string, metrics: number): BillLine {
      return {
        service: 'cloudwatch',
        item,
        quantity: metrics,
        unit: 'metrics requested',
        usd: metrics * prices.cloudwatch.getMetricDataUsdPerMetric,
      };
    },
    events(item: string, events: number): BillLine {
      return {
        service: 'eventbridge',
        item,
        quantity: events,
        unit: 'events',
        usd: events * prices.eventbridge.usdPerEvent,
      };
    },
    /**
     * `count` of a resource billed by the month (AWS prorates it by the hour) through `hours`, at
     * `usdPerMonth` each: an alarm's metrics, a dashboard, a secret, a key.
     */
    monthly(
      service: BillService,
      item: string,
      unit: string,
      count: number,
      hours: number,
      usdPerMonth: number,
    ): BillLine {
      const months = (count * hours) / prices.hoursPerMonth;
      return { service, item, quantity: months, unit, usd: months * usdPerMonth };
    },
    /** Bytes sent out of AWS to the internet (a third-party API). */
    dataOut(item: string, bytes: number): BillLine {
      const gb = bytes / 1e9;
      return {
        service: 'datatransfer',
        item,
        quantity: gb,
        unit: 'GB out',
        usd: gb * prices.dataTransfer.internetOutUsdPerGb,
      };
    },
    /** `gbMonths` of data kept, at `usdPerGbMonth`. */
    storage(service: BillService, item: string, gbMonths: number, usdPerGbMonth: number): BillLine {
      return { service, item, quantity: gbMonths, unit: 'GB-months', usd: gbMonths * usdPerGbMonth };
    },
    /** EC2 hours at `usdPerHour` (an instance of the table: t4gSmallUsdPerHour, …). */
    ec2Hours(item: string, hours: number, usdPerHour: number): BillLine {
      return { service: 'ec2', item, quantity: hours, unit: 'hours', usd: hours * usdPerHour };
    },
  };
}

/** SQS bills a request per 64 KiB chunk of its payload (at least one). */
export function sqsChunks(prices: PriceTable, bytes: number): number {
  return Math.max(1, Math.ceil(bytes / prices.sqs.chunkBytes));
}

/** DynamoDB write units of one write of an item of `bytes` (1 KB per unit, rounded up). */
export function writeUnits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / 1024));
}

/** DynamoDB read units of one strongly consistent read of an item of `bytes` (4 KB per unit). */
export function strongReadUnits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / 4096));
}
