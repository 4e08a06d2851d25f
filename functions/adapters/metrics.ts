/**
 * Powertools Metrics (CloudWatch EMF) for the handlers. In Lambda the EMF documents go to
 * stdout, where CloudWatch picks them up. The local runtime and the tests pass a `sink` and
 * receive the same documents as objects instead.
 *
 * Metrics 2.35 has no output option: its `logger` option carries only its own warnings, and
 * EMF is always written with a private `Console` on stdout. The supported extension point is
 * the public API, so {@link CapturingMetrics} subclasses `Metrics` and overrides
 * `publishStoredMetrics()` (which `addMetric` also calls for single metrics and when a buffer
 * fills) to hand `serializeMetrics()` to the sink.
 */
import { Metrics, MetricResolution, MetricUnit } from '@aws-lambda-powertools/metrics';

export { Metrics, MetricResolution, MetricUnit };

/** The logger shape Powertools Metrics accepts for its own warnings. */
export type MetricsWarningLogger = NonNullable<NonNullable<ConstructorParameters<typeof Metrics>[0]>['logger']>;

/** One EMF document as Powertools serializes it. */
export interface EmfDocument {
  _aws: {
    Timestamp: number;
    CloudWatchMetrics: Array<{
      Namespace: string;
      Dimensions: string[][];
      Metrics: Array<{ Name: string; Unit: string; StorageResolution?: number }>;
    }>;
  };
  [key: string]: unknown;
}

/** Receives every EMF document instead of stdout. */
export type EmfSink = (document: EmfDocument) => void;

export interface CreateMetricsOptions {
  namespace: string;
  /** The `service` dimension (e.g. `consumer`). */
  serviceName: string;
  /** When set, EMF goes here instead of stdout. */
  sink?: EmfSink;
  /** Receives Powertools' own warnings (invalid dimensions and the like). */
  logger?: MetricsWarningLogger;
  defaultDimensions?: Record<string, string>;
}

/** Powertools Metrics that can hand its EMF to a sink instead of stdout. */
export class CapturingMetrics extends Metrics {
  readonly #options: CreateMetricsOptions;

  constructor(options: CreateMetricsOptions & { singleMetric?: boolean }) {
    super({
      namespace: options.namespace,
      serviceName: options.serviceName,
      ...(options.defaultDimensions ? { defaultDimensions: options.defaultDimensions } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
      ...(options.singleMetric ? { singleMetric: true } : {}),
    });
    this.#options = options;
  }

  override publishStoredMetrics(): this {
    const sink = this.#options.sink;
    if (sink === undefined) {
      // Skipping empty flushes keeps Powertools' "no metrics" warning out of the logs.
      if (this.hasStoredMetrics()) super.publishStoredMetrics();
      return this;
    }
    try {
      if (this.hasStoredMetrics()) sink(this.serializeMetrics() as EmfDocument);
    } finally {
      this.clearMetrics();
      this.clearDimensions();
      this.clearMetadata();
    }
    return this;
  }

  /** A single metric that goes to the same place as this instance's documents. */
  override singleMetric(): CapturingMetrics {
    return new CapturingMetrics({ ...this.#options, singleMetric: true });
  }
}

/** Build the metrics of one service; pass `sink` to capture EMF (local runtime, tests). */
export function createMetrics(options: CreateMetricsOptions): CapturingMetrics {
  return new CapturingMetrics(options);
}
