/**
 * The overflow provider inside `npm start --overflow-sim`: a second solver simulator (its own
 * key, per-solve price, latency and threads) as the pay-per-solve provider, the consumer's own
 * handler wired as the overflow consumer (`SOLVER_PROVIDER=overflow`), and a third poller on the
 * normal queue that plays the overflow function's event source mapping: created disabled at the
 * mapping floor, opened and sized by the governor. Only adapters differ from AWS.
 */
import { SQS_MAPPING_RAMP } from '../functions/core/mapping-ramp.js';
import { randomBytes } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import type { LocalEventStream } from '../functions/adapters/completion-events.js';
import type { EmfDocument } from '../functions/adapters/metrics.js';
import { createSolverClient } from '../functions/adapters/solver-client.js';
import { threadLedgerFor } from '../functions/adapters/thread-ledger.js';
import type { ConsumerHandler, ConsumerTiming } from '../functions/consumer/create-handler.js';
import { createConsumerFromEnvironment } from '../functions/consumer/wiring.js';
import { OVERFLOW_LEDGER_ID } from '../functions/core/deployment.js';
import type { FleetEnvironment } from '../functions/core/environment.js';
import type { ResultsRepository, TaskQueue } from '../functions/core/ports.js';
import type { ThreadLedgerReader } from '../functions/core/thread-ledger.js';
import { SERVICES } from '../functions/core/metric-names.js';
import { type FleetSettings, MAPPING_MIN_CONCURRENCY, type OverflowSettings } from '../functions/core/settings.js';
import type { AwsClients } from '../functions/adapters/aws-clients.js';
import type { MetricsStore } from './metrics-store.js';
import { createAdaptivePollSchedule, withEarliestPoll } from '../functions/core/poll-schedule.js';
import { createLocalPollSchedule, localPollGapMs } from './poll-schedule-local.js';
import { pollGapMs } from '../functions/core/solver-protocol.js';
import { InvocationBoundAgent } from './chaos.js';
import { type ConcurrencyPool, createPoller, type Poller } from './poller.js';
import type { FleetResources } from './resources.js';
import { createSolverSimulator, type SolverSimOptions, type SolverSimulator } from './solver-sim/index.js';

/** The simulated overflow provider's defaults: $2.99 per 1000 solves, 100 threads, $5 of credit. */
export const OVERFLOW_SIM_DEFAULTS = { pricePerSolve: 0.00299, planThreads: 100, balance: 5 } as const;

/**
 * The fastest solve the simulator draws, as a share of its median: its solve times are
 * log-normal with spread 0.35, so fewer than 4 in 100 000 fall under a quarter of the median.
 * The local overflow block's `minSolveSeconds` (the budget's bound on solves per slot) is this.
 */
export const SIM_FASTEST_SHARE_OF_MEDIAN = 0.25;

/** The overflow side of a running local stack. */
export interface LocalOverflow {
  settings: OverflowSettings;
  simulator: SolverSimulator;
  /** The overflow function's mapping on the normal queue: the governor opens, sizes and closes it. */
  poller: Poller;
  /** Its mapping on the high queue, opened only while the primary is paused. */
  highPoller: Poller;
  /** The overflow function's concurrency (its own, not the primary's). */
  pool: ConcurrencyPool;
  /** The overflow solver client (the governor reads its balance through it). */
  client: ReturnType<typeof createSolverClient>;
  /** The overflow provider's key (the governor's log is redacted with it). */
  key: string;
  /** The overflow consumer's ledger (its threads held, its solves). */
  ledger: ThreadLedgerReader;
}

/** What the overflow side is built from: the primary's plan and parts. */
export interface OverflowBuild {
  settings: FleetSettings;
  /** The simulator's options beyond its key and dialect. */
  solver: SolverSimOptions;
  seed: number;
  clients: AwsClients;
  resources: FleetResources;
  metrics: MetricsStore;
  events: LocalEventStream;
  functionTimeoutMs: number;
  receiveWaitSeconds: number;
  logLevel: 'SILENT';
  timing: Partial<ConsumerTiming>;
  /** The crash knob (local/chaos.ts), as on the primary consumer. */
  wrapRepository: (repository: ResultsRepository) => ResultsRepository;
  /** Track a handler call until it settles (the runtime waits for them at stop). */
  track: (handler: ConsumerHandler) => ConsumerHandler;
  /** Register a stop step. */
  onStop: (step: () => Promise<void>) => void;
  /** The overflow provider's key (the primary consumer holds it too, to resume what this lane paid for). @default a fresh one */
  key?: string;
  /** Wrap the overflow consumer's task queue and events (a dead invocation sends nothing). @default as is */
  wrapQueue?: (queue: TaskQueue) => TaskQueue;
}

/** Start the overflow simulator, wire the overflow consumer, create its (disabled) lane. */
export async function startLocalOverflow(build: OverflowBuild): Promise<LocalOverflow> {
  const configured = build.settings.overflow;
  if (configured === undefined) throw new Error('startLocalOverflow needs settings.overflow');
  // A fresh key per run, known only to this process and the overflow simulator.
  const key = build.key ?? randomBytes(16).toString('hex');
  const simulator = createSolverSimulator({
    seed: build.seed,
    dialect: configured.dialect,
    ...OVERFLOW_SIM_DEFAULTS,
    ...build.solver,
    validKeys: [key],
  });
  const { url } = await simulator.listen(0, '127.0.0.1');
  build.onStop(() => simulator.close());
  const settings: OverflowSettings = { ...configured, baseUrl: url };
  const medianMs = build.solver.medianMs;
  const scaledMedianMs = medianMs === undefined ? undefined : medianMs * (build.solver.latencyScale ?? 1);
  const inner =
    scaledMedianMs !== undefined ? createLocalPollSchedule({ medianMs: scaledMedianMs }) : createAdaptivePollSchedule();
  const agent = new InvocationBoundAgent({ keepAliveTimeout: 10_000 });
  build.onStop(() => agent.close());
  const client = createSolverClient({
    baseUrl: url,
    key,
    dialect: settings.dialect,
    protocol: settings.solverProtocol,
    ...(settings.softId !== undefined ? { softId: settings.softId } : {}),
    ...(settings.pricesUsd !== undefined ? { prices: settings.pricesUsd } : {}),
    // A dead invocation (timed out, crashed) sends the provider nothing more, as in Lambda.
    dispatcher: agent,
    // As in AWS (solverFromEnvironment): no answer read before the budget's fastest solve.
    schedule: withEarliestPoll(inner, settings.minSolveSeconds * 1000),
    // The provider's gap between two result requests of one submission, on the simulator's clock.
    pollGapMs: localPollGapMs(pollGapMs(settings.solverProtocol, settings.dialect), scaledMedianMs),
    retry: { baseBackoffMs: 100, maxBackoffMs: 1_000, maxOverCapRetries: 0 },
  });
  build.onStop(async () => client.close());
  const handler = await wireOverflowConsumer(build, settings, client, key);
  const pool: ConcurrencyPool = { limit: MAPPING_MIN_CONCURRENCY, inUse: 0 };
  const lane = (queue: 'normal' | 'high') =>
    createPoller({
      sqs: build.clients.sqs,
      queueUrl: build.resources.queueUrls[queue],
      queueArn: build.resources.queueArns[queue],
      region: build.clients.region,
      handler: build.track(handler),
      batchSize: build.settings.tasksPerInvocation,
      // Created as the stack creates the mappings: disabled, at the floor, sharing the function's concurrency.
      maxConcurrency: MAPPING_MIN_CONCURRENCY,
      enabled: false,
      functionTimeoutMs: build.functionTimeoutMs,
      functionName: configured.functionName,
      waitTimeSeconds: build.receiveWaitSeconds,
      pool,
      ramp: SQS_MAPPING_RAMP,
    });
  const [poller, highPoller] = [lane('normal'), lane('high')];
  await poller.start();
  await highPoller.start();
  build.onStop(async () => {
    await Promise.all([poller.stop({ graceMs: 0 }), highPoller.stop({ graceMs: 0 })]);
  });
  const ledger = threadLedgerFor(
    { settings: build.settings, tables: build.resources.tables },
    build.clients.documents,
    undefined,
    OVERFLOW_LEDGER_ID,
  );
  if (ledger === undefined) throw new Error('the overflow lane needs the governor table for its ledger');
  return { settings, simulator, poller, highPoller, pool, client, key, ledger };
}

/** The overflow consumer: the Lambda's own wiring with `provider: 'overflow'`. */
async function wireOverflowConsumer(
  build: OverflowBuild,
  overflow: OverflowSettings,
  client: ReturnType<typeof createSolverClient>,
  key: string,
): Promise<ConsumerHandler> {
  const { resources } = build;
  const environment: FleetEnvironment = {
    settings: { ...build.settings, overflow },
    queueUrls: resources.queueUrls,
    // The governor table carries this consumer's ledger (OVERFLOW_LEDGER_ID) to the governor.
    tables: resources.tables,
    // The overflow consumer holds only the overflow key, as in AWS.
    provider: 'overflow',
    overflowKeySource: { key },
    consumerFunctionName: overflow.functionName,
    eventBusName: undefined,
    endpoint: undefined,
  };
  return createConsumerFromEnvironment({
    environment,
    clients: build.clients,
    solver: client,
    events: build.events,
    metricsSink: (document: EmfDocument) => build.metrics.ingest(document),
    logger: new Logger({ serviceName: SERVICES.overflowConsumer, logLevel: build.logLevel }),
    timing: build.timing,
    wrapRepository: build.wrapRepository,
    ...(build.wrapQueue ? { wrapQueue: build.wrapQueue } : {}),
  });
}
