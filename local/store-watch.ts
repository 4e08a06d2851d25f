/**
 * The store-health signal of the local runtime, watched beside the governor: each tick it
 * probes SQS and DynamoDB through the fleet's own clients (the fault proxy's, when there is
 * one), reads the consumers' store calls from the local metrics store (the EMF they emitted),
 * and judges them with the same pure assessment the governor's availability stage is to use
 * (functions/core/store-health.ts). It does not steer the pollers: it records when an outage
 * would have paused consumption and when a probe would have resumed it, for the summary and
 * the fault benchmark.
 */
import type { AwsClients } from '../functions/adapters/aws-clients.js';
import {
  createStoreProber,
  storeSamplesOf,
  type ConsumerStoreCalls,
} from '../functions/adapters/store-health-signals.js';
import { METRICS } from '../functions/core/metric-names.js';
import type { StoreName } from '../functions/core/ports.js';
import {
  assessStoreHealth,
  type StoreHealthState,
  type StoreHealthVerdict,
  storeHealthConfig,
} from '../functions/core/store-health.js';
import type { MetricsStore } from './metrics-store.js';

/** One stretch during which the assessment held an outage (consumption would be paused). */
export interface StoreOutage {
  store: StoreName;
  /** From the watch's start, ms. */
  startMs: number;
  endMs: number | undefined;
  reason: string;
}

export interface StoreWatchStats {
  outages: StoreOutage[];
  /** Outage probes that answered (a resume at the minimum). */
  resumes: number;
  ticks: number;
  verdict: StoreHealthVerdict;
}

export interface StoreWatch {
  stats(): StoreWatchStats;
  stop(): void;
}

export interface StoreWatchOptions {
  clients: AwsClients;
  metrics: MetricsStore;
  resultsTable: string;
  queueUrl: string;
  tickMs: number;
  /** The consumers' window, ms. @default 5 ticks */
  windowMs?: number;
  /** The probe cooldown, ms. @default the governor's: 6 ticks, at least 1 s */
  probeCooldownMs?: number;
}

/** The consumers' store calls over the last `windowMs`, both lanes together. */
function consumerCalls(metrics: MetricsStore, windowMs: number): ConsumerStoreCalls {
  const read = (requests: string, errors: string) => ({
    requests: metrics.sum(requests, windowMs),
    errors: metrics.sum(errors, windowMs),
  });
  return {
    dynamodb: read(METRICS.dynamoRequests, METRICS.dynamoErrors),
    sqs: read(METRICS.sqsRequests, METRICS.sqsErrors),
  };
}

/** Start watching; call `stop()` when done. */
export function startStoreWatch(options: StoreWatchOptions): StoreWatch {
  const started = Date.now();
  const prober = createStoreProber({
    documents: options.clients.documents,
    sqs: options.clients.sqs,
    resultsTable: options.resultsTable,
    queueUrl: options.queueUrl,
  });
  const config = storeHealthConfig(options.probeCooldownMs ?? Math.max(1_000, 6 * options.tickMs));
  const windowMs = options.windowMs ?? 5 * options.tickMs;
  const stats: StoreWatchStats = { outages: [], resumes: 0, ticks: 0, verdict: { status: 'healthy' } };
  let state: StoreHealthState | undefined;
  let running = false;
  const tick = async () => {
    if (running) return;
    running = true;
    try {
      const probe = await prober();
      const now = Date.now();
      const next = assessStoreHealth(
        state,
        storeSamplesOf(probe, consumerCalls(options.metrics, windowMs)),
        now,
        config,
      );
      record(stats, stats.verdict, next.verdict, now - started);
      state = next.state;
      stats.verdict = next.verdict;
      stats.ticks++;
    } finally {
      running = false;
    }
  };
  const timer = setInterval(() => void tick(), options.tickMs);
  return {
    stats: () => structuredClone(stats),
    stop: () => clearInterval(timer),
  };
}

/** Note an outage's start and end, and each resume after a probe. */
function record(stats: StoreWatchStats, was: StoreHealthVerdict, now: StoreHealthVerdict, atMs: number): void {
  const open = stats.outages.at(-1);
  if (now.status === 'outage' && (open === undefined || open.endMs !== undefined))
    stats.outages.push({ store: now.store, startMs: atMs, endMs: undefined, reason: now.reason });
  if (now.status !== 'outage' && open !== undefined && open.endMs === undefined) open.endMs = atMs;
  if (was.status === 'outage' && now.status === 'probing') stats.resumes++;
}
