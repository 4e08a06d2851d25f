/**
 * The local runtime's CloudWatch: keeps the datapoints of captured EMF documents in memory and
 * answers the questions the local governor and the live view ask (sums, counts, means and
 * percentiles over a recent window, totals since start).
 */
import type { EmfDocument } from '../functions/adapters/metrics.js';
import { percentileOfSorted } from '../functions/core/helpers/stats.js';

/** One value of one metric at one time, with the dimensions it was emitted under. */
export interface Datapoint {
  name: string;
  value: number;
  /** Epoch ms. */
  timestamp: number;
  unit?: string;
  dimensions?: Readonly<Record<string, string>>;
}

export interface MetricsStoreOptions {
  /** Datapoints older than this are dropped (totals keep counting them). @default 3_600_000 */
  retentionMs?: number;
  /** Default `now` of the window queries. @default Date.now */
  clock?: () => number;
}

interface Total {
  count: number;
  sum: number;
}

/** Turn one EMF document into datapoints: every value of every metric, with its dimensions. */
export function datapointsOf(document: EmfDocument): Datapoint[] {
  const aws = document._aws;
  const timestamp = aws.Timestamp;
  const points: Datapoint[] = [];
  for (const directive of aws.CloudWatchMetrics) {
    const dimensionNames = new Set(directive.Dimensions.flat());
    const dimensions: Record<string, string> = {};
    for (const name of dimensionNames) {
      const value = document[name];
      if (typeof value === 'string') dimensions[name] = value;
    }
    for (const metric of directive.Metrics) {
      const raw = document[metric.Name];
      const values = Array.isArray(raw) ? raw : [raw];
      for (const value of values) {
        if (typeof value !== 'number' || !Number.isFinite(value)) continue;
        points.push({ name: metric.Name, value, timestamp, unit: metric.Unit, dimensions });
      }
    }
  }
  return points;
}

/** In-memory metric datapoints with windowed queries. */
export class MetricsStore {
  private readonly retentionMs: number;
  private readonly clock: () => number;
  /** Per metric name, datapoints in arrival order (timestamps mostly ascending). */
  private readonly points = new Map<string, Datapoint[]>();
  private readonly totalsByKey = new Map<string, Total>();

  constructor(options: MetricsStoreOptions = {}) {
    this.retentionMs = options.retentionMs ?? 3_600_000;
    this.clock = options.clock ?? Date.now;
  }

  /** Take an EMF document (what Powertools Metrics serializes); a ready-made `EmfSink`. */
  readonly ingest = (document: EmfDocument): void => {
    for (const point of datapointsOf(document)) this.record(point);
  };

  /** Add one datapoint. */
  record(point: Datapoint): void {
    const list = this.points.get(point.name) ?? [];
    list.push(point);
    this.points.set(point.name, list);
    for (const key of totalKeys(point)) {
      const total = this.totalsByKey.get(key) ?? { count: 0, sum: 0 };
      total.count += 1;
      total.sum += point.value;
      this.totalsByKey.set(key, total);
    }
    this.prune(list);
  }

  /** Sum of the values in `(now - windowMs, now]`. 0 when none. */
  sum(name: string, windowMs: number, now?: number, dimensions?: Record<string, string>): number {
    return this.window(name, windowMs, now, dimensions).reduce((acc, point) => acc + point.value, 0);
  }

  /** Number of values in the window (a count metric's datapoints, or a timing's samples). */
  count(name: string, windowMs: number, now?: number, dimensions?: Record<string, string>): number {
    return this.window(name, windowMs, now, dimensions).length;
  }

  /** Mean of the values in the window; undefined when there are none (missing is not zero). */
  mean(name: string, windowMs: number, now?: number, dimensions?: Record<string, string>): number | undefined {
    const points = this.window(name, windowMs, now, dimensions);
    if (points.length === 0) return undefined;
    return points.reduce((acc, point) => acc + point.value, 0) / points.length;
  }

  /**
   * Percentile `p` (0-100, nearest rank) of the values in the window; undefined when there are
   * none. Nearest rank returns a value that was observed, like CloudWatch's `pNN` statistic.
   */
  percentile(
    name: string,
    p: number,
    windowMs: number,
    now?: number,
    dimensions?: Record<string, string>,
  ): number | undefined {
    if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within 0-100, got ${p}`);
    const values = this.window(name, windowMs, now, dimensions)
      .map((point) => point.value)
      .sort((a, b) => a - b);
    return percentileOfSorted(values, p / 100);
  }

  /**
   * Count and sum of every value since the store started (not limited by retention), of all
   * datapoints or of those with one dimension value (e.g. `{ Reason: 'over_cap' }`).
   */
  total(name: string, dimensions?: Record<string, string>): { count: number; sum: number } {
    if (dimensions !== undefined && Object.keys(dimensions).length > 1) {
      throw new RangeError('totals are kept per single dimension; use a windowed query for several');
    }
    const total = this.totalsByKey.get(totalKey(name, dimensions ?? {}));
    return total ? { ...total } : { count: 0, sum: 0 };
  }

  /** Totals of every metric name (all dimensions together). */
  totals(): Record<string, { count: number; sum: number }> {
    const out: Record<string, { count: number; sum: number }> = {};
    for (const [key, total] of this.totalsByKey) {
      if (!key.includes('|')) out[key] = { ...total };
    }
    return out;
  }

  /** Metric names seen so far. */
  names(): string[] {
    return [...this.points.keys()].sort();
  }

  private window(
    name: string,
    windowMs: number,
    now: number | undefined,
    dimensions: Record<string, string> | undefined,
  ): Datapoint[] {
    const end = now ?? this.clock();
    const start = end - windowMs;
    const list = this.points.get(name) ?? [];
    return list.filter((point) => point.timestamp > start && point.timestamp <= end && matches(point, dimensions));
  }

  private prune(list: Datapoint[]): void {
    const horizon = this.clock() - this.retentionMs;
    // Cheap most of the time: only the head is old, and it is dropped in one splice.
    let drop = 0;
    while (drop < list.length && (list[drop] as Datapoint).timestamp < horizon) drop += 1;
    if (drop > 0) list.splice(0, drop);
  }
}

function matches(point: Datapoint, dimensions: Record<string, string> | undefined): boolean {
  if (dimensions === undefined) return true;
  return Object.entries(dimensions).every(([key, value]) => point.dimensions?.[key] === value);
}

/** Totals are kept per name and per name + each single dimension, so `total(name, {Reason})` works. */
function totalKeys(point: Datapoint): string[] {
  const keys = [point.name];
  for (const [key, value] of Object.entries(point.dimensions ?? {})) keys.push(totalKey(point.name, { [key]: value }));
  return keys;
}

function totalKey(name: string, dimensions: Record<string, string>): string {
  const entries = Object.entries(dimensions).sort(([a], [b]) => a.localeCompare(b));
  if (entries.length === 0) return name;
  return `${name}|${entries.map(([key, value]) => `${key}=${value}`).join(',')}`;
}
