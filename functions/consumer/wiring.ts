/**
 * Wire the consumer from the parsed environment: AWS clients, the results table, the queues,
 * metrics, the solver client with its key, and completion events when a bus is configured.
 * `handler.ts` uses it in Lambda; the local runtime uses it with its own clients, solver, sink,
 * logger, events and a wrapped repository.
 *
 * The environment's provider (SOLVER_PROVIDER) picks the lane: the plan's consumer (`primary`)
 * or the overflow consumer, the same code with the overflow provider's solver and key, its
 * metrics under service `consumer-overflow`, its own thread ledger item, and `provider` on
 * every record it writes. The primary consumer of a fleet with an overflow provider also holds
 * that provider's key, to resume (poll, never submit) a submission the overflow lane paid for:
 * a task is never paid at both. The overflow consumer holds only its own key.
 */
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { Logger } from '@aws-lambda-powertools/logger';
import { baseClientConfig, createAwsClients, type AwsClients } from '../adapters/aws-clients.js';
import { createCarrySeal } from '../adapters/carry-seal.js';
import { createEventBridgePublisher } from '../adapters/completion-events.js';
import { createMetrics, type EmfSink } from '../adapters/metrics.js';
import { DynamoResultsRepository } from '../adapters/results-repository.js';
import { solverFromEnvironment } from '../adapters/solver-from-environment.js';
import { fleetKeyLoaders } from '../adapters/solver-key.js';
import { SqsTaskQueue } from '../adapters/task-queue.js';
import { threadLedgerFor } from '../adapters/thread-ledger.js';
import { solveWindowFor } from '../adapters/solve-window.js';
import { leaseLaneFor } from '../adapters/thread-leases.js';
import type { FleetEnvironment } from '../core/environment.js';
import type { PollSchedule } from '../core/poll-schedule.js';
import type { CompletionEvents, ResultsRepository, SolverPort, TaskQueue } from '../core/ports.js';
import { consumerServiceOf, type SolverProvider, threadLedgerIdOf } from '../core/provider.js';
import { createRedactor } from '../core/redaction.js';
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
  /** Wrap the task queue (the local runtime: a dead invocation sends nothing). @default as is */
  wrapQueue?: (queue: TaskQueue) => TaskQueue;
  /**
   * The primary consumer's resume solver at the overflow provider. @default the undici client for
   * the overflow block with the overflow key, when the environment holds both
   */
  overflowResumeSolver?: SolverPort;
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
  const wrapQueue = options.wrapQueue ?? ((queue: TaskQueue) => queue);
  // Its provider's key, and the overflow provider's for the primary of a fleet with overflow.
  const keys = fleetKeyLoaders(environment, clients.region, provider === 'primary');
  const redactor = createRedactor();
  const seal = createCarrySeal(keys, redactor);
  // The keys are read now, so the redactor knows them before the first log line; a key that cannot
  // be read yet is read again on first use (the solver reports it as an account error).
  for (const load of Object.values(keys)) void load().then(redactor.add, () => undefined);
  const resumeSolvers = resumeSolversOf(environment, provider, clients.region, options, logger);
  const sourceQueueUrls = [
    environment.queueUrls.normal,
    ...(environment.queueUrls.high ? [environment.queueUrls.high] : []),
  ];
  const threadLedger = threadLedgerFor(environment, clients.documents, undefined, threadLedgerIdOf(provider));
  const leases = leaseLaneFor(environment, clients.documents);
  const solveWindow = solveWindowFor(environment, clients.documents);
  return createConsumerHandler({
    solver,
    repository: wrapRepository(
      new DynamoResultsRepository({
        documents: clients.documents,
        tableName: environment.tables.results,
        ttlSeconds: settings.resultTtlSeconds,
      }),
    ),
    queue: wrapQueue(new SqsTaskQueue({ sqs: clients.sqs, dlqUrl: environment.queueUrls.dlq, sourceQueueUrls })),
    metrics,
    logger,
    settings,
    provider,
    seal,
    redactor,
    ...(resumeSolvers ? { resumeSolvers } : {}),
    ...(events ? { events } : {}),
    ...(options.timing ? { timing: options.timing } : {}),
    // Over-cap answers and held threads for the governor's next tick, on its table.
    ...(threadLedger ? { threadLedger } : {}),
    // The parked design's thread leases (solveMode `park`): submit, park, and let the governor watch.
    ...(leases ? { leases } : {}),
    // …and its metric window for the governor, on its table (functions/core/solve-window.ts).
    ...(solveWindow ? { solveWindow } : {}),
  });
}

/** The primary consumer's poll-only solver at the overflow provider, when it may hold one. */
function resumeSolversOf(
  environment: FleetEnvironment,
  provider: SolverProvider,
  region: string,
  options: ConsumerWiringOptions,
  logger: Logger,
): Partial<Record<SolverProvider, SolverPort>> | undefined {
  if (provider !== 'primary' || environment.settings.overflow === undefined) return undefined;
  if (options.overflowResumeSolver !== undefined) return { overflow: options.overflowResumeSolver };
  if (environment.overflowKeySource === undefined) return undefined;
  const overflow = solverFromEnvironment(
    environment,
    region,
    {
      debug: (message, attributes) => logger.debug(message, attributes ?? {}),
      warn: (message, attributes) => logger.warn(message, attributes ?? {}),
    },
    undefined,
    'overflow',
  );
  return { overflow };
}
