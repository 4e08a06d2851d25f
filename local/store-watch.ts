/**
 * The fleet's stores as the local governor's dependencies: each tick the governor probes SQS and
 * DynamoDB through the fleet's own clients (the fault proxy's, when there is one) and reads the
 * consumers' store calls from the local metrics store (the EMF they emitted), as it reads
 * CloudWatch in AWS (functions/adapters/store-health-signals.ts). Its availability stage judges
 * them like the solver: a store down for `outageTicks` ticks pauses the pollers (the local
 * mappings), every tick probes, the first tick on which every dependency answers resumes.
 *
 * The outage record here only listens to the governor's decisions (one state machine, the
 * governor's): when a store outage paused consumption and when a probe resumed it, for the
 * summary and the fault benchmark.
 */
import type { AwsClients } from '../functions/adapters/aws-clients.js';
import {
  type ConsumerStoreCalls,
  createStoreProber,
  createStoreSamplesReader,
  type StoreSamplesReader,
} from '../functions/adapters/store-health-signals.js';
import { METRICS } from '../functions/core/metric-names.js';
import { STORE_NAMES } from '../functions/core/store-health.js';
import type { TickRecord } from '../functions/governor/loop.js';
import type { MetricsStore } from './metrics-store.js';

/** One stretch during which the governor held consumption paused for a store outage. */
export interface StoreOutage {
  /** The stores down when the pause began (`dynamodb`, `sqs`; `governor-state` when its own state read failed). */
  store: string;
  /** From the watch's start, ms. */
  startMs: number;
  endMs: number | undefined;
  /** The governor's reason, in words. */
  reason: string;
}

export interface StoreWatchStats {
  outages: StoreOutage[];
  /** Outage pauses that ended in a resume (a probe answered). */
  resumes: number;
  /** Decisions heard. */
  ticks: number;
}

export interface StoreWatch {
  /** The governor's input: both stores' samples this tick. */
  readonly samples: StoreSamplesReader;
  /** Listen to a decision (the local governor's `onDecision`). */
  observe(record: TickRecord): void;
  /** Count outage times from now (the fault plan's start). */
  arm(): void;
  stats(): StoreWatchStats;
}

export interface StoreWatchOptions {
  clients: AwsClients;
  metrics: Pick<MetricsStore, 'sum'>;
  resultsTable: string;
  queueUrl: string;
  /** The consumers' window, ms. */
  windowMs: number;
}

/** The consumers' store calls over the last `windowMs` (since `since`, when later), both lanes together. */
function consumerCalls(
  metrics: Pick<MetricsStore, 'sum'>,
  windowMs: number,
  since: number | undefined,
): ConsumerStoreCalls {
  const span = since === undefined ? windowMs : Math.max(0, Math.min(windowMs, Date.now() - since));
  const read = (requests: string, errors: string) => ({
    requests: metrics.sum(requests, span),
    errors: metrics.sum(errors, span),
  });
  return {
    dynamodb: read(METRICS.dynamoRequests, METRICS.dynamoErrors),
    sqs: read(METRICS.sqsRequests, METRICS.sqsErrors),
  };
}

const STORE_DEPENDENCIES = new Set<string>([...STORE_NAMES, 'governor-state']);

/** The stores a decision saw down. */
function storesDown(record: TickRecord): string[] {
  return (record.signals.dependencies ?? [])
    .filter((d) => d.down === true && STORE_DEPENDENCIES.has(d.name))
    .map((d) => d.name);
}

/** The governor's store input and the record of its store outages. */
export function createStoreWatch(options: StoreWatchOptions): StoreWatch {
  const prober = createStoreProber({
    documents: options.clients.documents,
    sqs: options.clients.sqs,
    resultsTable: options.resultsTable,
    queueUrl: options.queueUrl,
  });
  const samples = createStoreSamplesReader(prober, async (since) =>
    consumerCalls(options.metrics, options.windowMs, since),
  );
  let started = Date.now();
  const stats: StoreWatchStats = { outages: [], resumes: 0, ticks: 0 };
  let pausedForStores = false;
  return {
    samples,
    arm() {
      started = Date.now();
    },
    observe(record) {
      stats.ticks++;
      const d = record.decision;
      const atMs = record.signals.now - started;
      const open = stats.outages.at(-1);
      const outagePause = d.paused && d.reason.code === 'PAUSE_OUTAGE';
      const stores = storesDown(record);
      if (outagePause && !pausedForStores && stores.length > 0) {
        stats.outages.push({ store: stores.join('+'), startMs: atMs, endMs: undefined, reason: d.reason.message });
        pausedForStores = true;
      } else if (!outagePause && pausedForStores) {
        if (open !== undefined) open.endMs = atMs;
        pausedForStores = false;
        if (!d.paused) stats.resumes++;
      }
    },
    stats: () => structuredClone(stats),
  };
}
