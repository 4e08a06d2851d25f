/**
 * Wire the consumer from the parsed environment: AWS clients, the results table, the queues,
 * metrics, the solver client with its key, and completion events when a bus is configured.
 * `handler.ts` uses it in Lambda; the local runtime uses it with its own clients, solver, sink,
 * logger, events and a wrapped repository.
 *
 * The environment's provider (SOLVER_PROVIDER) picks the lane: the plan's consumer (`primary`)
 * or the overflow consumer, the same code with the overflow provider's solver and key, its
 * metrics under service `consumer-overflow`, its own thread ledger item, and `provider` on
 * every record it writes.
 */
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { Logger } from '@aws-lambda-powertools/logger';
import { baseClientConfig, createAwsClients, type AwsClients } from '../adapters/aws-clients.js';
import { createEventBridgePublisher } from '../adapters/completion-events.js';
import { createMetrics, type EmfSink } from '../adapters/metrics.js';
import { DynamoResultsRepository } from '../adapters/results-repository.js';
import { solverFromEnvironment } from '../adapters/solver-from-environment.js';
import { SqsTaskQueue } from '../adapters/task-queue.js';
import { threadLedgerFor } from '../adapters/thread-ledger.js';
import type { FleetEnvironment } from '../core/environment.js';
import type { PollSchedule } from '../core/poll-schedule.js';
import type { CompletionEvents, ResultsRepository, SolverPort } from '../core/ports.js';
import { consumerServiceOf, threadLedgerIdOf } from '../core/provider.js';
import { createConsumerHandler, type ConsumerHandler, type ConsumerTiming } from './create-handler.js';

export interface ConsumerWiringOptions {
  environment: FleetEnvironment;
  /** Defaults to clients for `environment.endpoint` (or AWS). */
  clients?: AwsClients;
  logger?: Logger;
  /** Capture EMF documents instead of writing them to stdout (local runtime). */
  metricsSink?: EmfSink;
  /**
   * Defaults to the undici solver client for the environment's provider: `settings.solverBaseUrl`
   * with the solver key, or `settings.overflow.baseUrl` with the overflow key.
   */
  solver?: SolverPort;
  /** The default solver client's poll schedule (tests pass one scaled to a simulator). @default the adaptive schedule */
  pollSchedule?: PollSchedule;
  /** Defaults to EventBridge when `EVENT_BUS_NAME` is set, else none. */
  events?: CompletionEvents;
  timing?: Partial<ConsumerTiming>;
  /** Wrap the results repository (the local runtime's crash knob, local/chaos.ts). @default as is */
  wrapRepository?: (repository: ResultsRepository) => ResultsRepository;
}

/** Build the consumer handler. Reads the solver key (once) unless a solver is passed. */
export async function createConsumerFromEnvironment(options: ConsumerWiringOptions): Promise<ConsumerHandler> {
  const { environment } = options;
  const { settings } = environment;
  const provider = environment.provider ?? 'primary';
  const clients = options.clients ?? createAwsClients(environment.endpoint ? { endpoint: environment.endpoint } : {});
  const logger = options.logger ?? new Logger({ serviceName: consumerServiceOf(provider) });
  const metrics = createMetrics({
    namespace: settings.metricsNamespace,
    serviceName: consumerServiceOf(provider),
    logger,
    ...(options.metricsSink ? { sink: options.metricsSink } : {}),
  });
  const solver: SolverPort =
    options.solver ??
    // Its lines carry the task id and are redacted before they reach the logger.
    solverFromEnvironment(
      environment,
      clients.region,
      {
        debug: (message, attributes) => logger.debug(message, attributes ?? {}),
        warn: (message, attributes) => logger.warn(message, attributes ?? {}),
      },
      // With the thread ledger a refused invocation waits for a thread (process-task.ts)
      // instead of retrying in.php into the same refusal.
      environment.tables.governor !== undefined ? { maxOverCapRetries: 0 } : undefined,
      provider,
      options.pollSchedule,
    );
  let events = options.events;
  if (events === undefined && environment.eventBusName !== undefined) {
    events = createEventBridgePublisher({
      client: new EventBridgeClient(baseClientConfig(environment.endpoint, clients.region)),
      busName: environment.eventBusName,
      source: settings.eventSource,
      includeAnswer: settings.eventsIncludeAnswer,
    });
  }
  const wrapRepository = options.wrapRepository ?? ((repository: ResultsRepository) => repository);
  const sourceQueueUrls = [
    environment.queueUrls.normal,
    ...(environment.queueUrls.high ? [environment.queueUrls.high] : []),
  ];
  const threadLedger = threadLedgerFor(environment, clients.documents, undefined, threadLedgerIdOf(provider));
  return createConsumerHandler({
    solver,
    repository: wrapRepository(
      new DynamoResultsRepository({
        documents: clients.documents,
        tableName: environment.tables.results,
        ttlSeconds: settings.resultTtlSeconds,
      }),
    ),
    queue: new SqsTaskQueue({ sqs: clients.sqs, dlqUrl: environment.queueUrls.dlq, sourceQueueUrls }),
    metrics,
    logger,
    settings,
    provider,
    ...(events ? { events } : {}),
    ...(options.timing ? { timing: options.timing } : {}),
    // Over-cap answers and held threads for the governor's next tick, on its table.
    ...(threadLedger ? { threadLedger } : {}),
  });
}
