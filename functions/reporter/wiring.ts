/**
 * Wire the report function from the parsed environment: the results table, the reports DLQ,
 * metrics (service `reporter`), and a solver for each provider the fleet has — the plan's with
 * the solver key, the overflow provider's with its key — since a report goes to the provider that
 * solved the task. `handler.ts` uses it in Lambda; the local runtime passes its own clients,
 * solvers and metrics sink.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { createAwsClients, type AwsClients } from '../adapters/aws-clients.js';
import { createMetrics, type EmfSink } from '../adapters/metrics.js';
import { DynamoReportRepository } from '../adapters/report-repository.js';
import { solverFromEnvironment } from '../adapters/solver-from-environment.js';
import { fleetKeyLoaders } from '../adapters/solver-key.js';
import { SqsTaskQueue } from '../adapters/task-queue.js';
import { ENV, type FleetEnvironment } from '../core/environment.js';
import { SERVICES } from '../core/metric-names.js';
import type { SolverPort } from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import { createRedactor } from '../core/redaction.js';
import { ConfigError } from '../core/settings.js';
import { createReporterHandler, type ReporterHandler } from './create-handler.js';

export interface ReporterWiringOptions {
  environment: FleetEnvironment;
  /** Defaults to clients for `environment.endpoint` (or AWS). */
  clients?: AwsClients;
  logger?: Logger;
  /** Capture EMF documents instead of writing them to stdout (local runtime). */
  metricsSink?: EmfSink;
  /** Defaults to the undici clients of the environment's providers. */
  solvers?: Partial<Record<SolverProvider, SolverPort>>;
  clock?: () => number;
  leaseMs?: number;
}

/** Build the report handler. */
export function createReporterFromEnvironment(options: ReporterWiringOptions): ReporterHandler {
  const { environment } = options;
  const urls = environment.reportQueueUrls;
  if (urls === undefined)
    throw new ConfigError([
      {
        field: ENV.reportsQueueUrl,
        problem: 'the report function has no reports queue and DLQ',
        fix: `set ${ENV.reportsQueueUrl} and ${ENV.reportsDlqUrl} (the stack does)`,
      },
    ]);
  const clients = options.clients ?? createAwsClients(environment.endpoint ? { endpoint: environment.endpoint } : {});
  const logger = options.logger ?? new Logger({ serviceName: SERVICES.reporter });
  const metrics = createMetrics({
    namespace: environment.settings.metricsNamespace,
    serviceName: SERVICES.reporter,
    logger,
    ...(options.metricsSink ? { sink: options.metricsSink } : {}),
  });
  const solverLog = {
    debug: (message: string, attributes?: Record<string, unknown>) => logger.debug(message, attributes ?? {}),
    warn: (message: string, attributes?: Record<string, unknown>) => logger.warn(message, attributes ?? {}),
  };
  const solvers = options.solvers ?? {
    primary: solverFromEnvironment(environment, clients.region, solverLog, undefined, 'primary'),
    ...(environment.settings.overflow !== undefined && environment.overflowKeySource !== undefined
      ? { overflow: solverFromEnvironment(environment, clients.region, solverLog, undefined, 'overflow') }
      : {}),
  };
  // The keys it reports with, known to its redactor before the first log line, as the consumer's
  // (a provider's error text that echoed one was recorded and logged as it came).
  const redactor = createRedactor();
  for (const load of Object.values(fleetKeyLoaders(environment, clients.region, true)))
    void load().then(redactor.add, () => undefined);
  return createReporterHandler({
    repository: new DynamoReportRepository({ documents: clients.documents, tableName: environment.tables.results }),
    solvers,
    queue: new SqsTaskQueue({ sqs: clients.sqs, dlqUrl: urls.dlq, sourceQueueUrls: [urls.reports] }),
    metrics,
    logger,
    redactor,
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
  });
}
