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

/** The unit of the logs lines (GB ingested): the bill keeps what they ingest for the retention (keptDataLines). */
export const LOGS_UNIT = 'GB';

/** One line: `quantity` of `unit` at `usdPerUnit`. */
/**
 * @throws RangeError naming the line when its quantity is no count (NaN, negative, infinite): a
 *   bill of NaN or of minus some dollars, which a negative `hours` or a NaN `planThreads` gave
 *   before, is no bill.
 */
function priced(service: BillService, item: string, quantity: number, unit: string, usdPerUnit: number): BillLine {
  if (!Number.isFinite(quantity) || quantity < 0)
    throw new RangeError(`bill line "${item}": ${quantity} ${unit} is not a quantity (expected a finite number ≥ 0)`);
  return { service, item, quantity, unit, usd: quantity * usdPerUnit };
}

/** Priced line builders over one price table. */
export function pricer(prices: PriceTable) {
  const months = (count: number, hours: number) => (count * hours) / prices.hoursPerMonth;
  return {
    /** Lambda duration: `seconds` of invocations at the function's memory and architecture. */
    lambdaDuration(item: string, sizing: FunctionSizing, seconds: number): BillLine {
      if (!(Number.isInteger(sizing.memoryMb) && sizing.memoryMb >= 128 && sizing.memoryMb <= 10_240))
        throw new RangeError(
          `bill line "${item}": ${sizing.memoryMb} MB is no Lambda memory (expected a whole number from 128 to 10240)`,
        );
      const label = `${item} (${sizing.memoryMb} MB ${sizing.architecture})`;
      const gbSeconds = (seconds * sizing.memoryMb) / 1024;
      return priced('lambda', label, gbSeconds, 'GB-s', prices.lambda.usdPerGbSecond[sizing.architecture]);
    },
    lambdaRequests(item: string, requests: number): BillLine {
      return priced('lambda', item, requests, 'requests', prices.lambda.usdPerRequest);
    },
    /** SQS requests; a request carrying `bytes` of payload is billed per 64 KiB chunk. */
    sqsRequests(item: string, requests: number, bytes = 0): BillLine {
      return priced('sqs', item, requests * sqsChunks(prices, bytes), 'requests', prices.sqs.usdPerRequest);
    },
    dynamoWrites(item: string, units: number): BillLine {
      return priced('dynamodb', item, units, 'write units', prices.dynamodb.usdPerWriteUnit);
    },
    dynamoReads(item: string, units: number): BillLine {
      return priced('dynamodb', item, units, 'read units', prices.dynamodb.usdPerReadUnit);
    },
    logs(item: string, bytes: number): BillLine {
      return priced('cloudwatch', item, bytes / 1e9, LOGS_UNIT, prices.cloudwatch.logsUsdPerGb);
    },
    /**
     * `metrics` custom metrics emitted through `hours`, their share of the metric-month for those
     * hours (fractions kept). AWS prorates the metric-month by the hour a metric is published in;
     * a deployed fleet publishes its streams every hour (the governor ticks every minute), so it
     * pays every hour of the month, and a stretch of it (a trace, a few seconds of `npm start`) is
     * billed its share. A fleet deployed only for a few seconds would pay the whole hour: tried,
     * billing whole hours made a 7.5 s `npm start` × 81 of its plan, a figure of no deployed fleet.
     */
    customMetrics(item: string, metrics: number, hours: number): BillLine {
      return priced('cloudwatch', item, months(metrics, hours), 'metric-months', prices.cloudwatch.usdPerMetricMonth);
    },
    getMetricData(item: string, metrics: number): BillLine {
      return priced('cloudwatch', item, metrics, 'metrics requested', prices.cloudwatch.getMetricDataUsdPerMetric);
    },
    events(item: string, events: number): BillLine {
      return priced('eventbridge', item, events, 'events', prices.eventbridge.usdPerEvent);
    },
    /**
     * `count` of a resource billed by the month through `hours`, at `usdPerMonth` each: an
     * alarm's metrics, a dashboard, a secret, a key. Its share of the month for the hours given
     * (fractions kept): these exist all month while the stack does, whatever runs, and AWS bills
     * the month prorated by the hour the resource exists; a run is charged the share of them its
     * length takes, not an hour of each.
     */
    monthly(
      service: BillService,
      item: string,
      unit: string,
      count: number,
      hours: number,
      usdPerMonth: number,
    ): BillLine {
      return priced(service, item, months(count, hours), unit, usdPerMonth);
    },
    /** Bytes sent out of AWS to the internet (a third-party API). */
    dataOut(item: string, bytes: number): BillLine {
      return priced('datatransfer', item, bytes / 1e9, 'GB out', prices.dataTransfer.internetOutUsdPerGb);
    },
    /** `gbMonths` of data kept, at `usdPerGbMonth`. */
    storage(service: BillService, item: string, gbMonths: number, usdPerGbMonth: number): BillLine {
      return priced(service, item, gbMonths, 'GB-months', usdPerGbMonth);
    },
    /** EC2 hours at `usdPerHour` (an instance of the table: t4gSmallUsdPerHour, …). */
    ec2Hours(item: string, hours: number, usdPerHour: number): BillLine {
      return priced('ec2', item, hours, 'hours', usdPerHour);
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
