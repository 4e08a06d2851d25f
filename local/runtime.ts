/**
 * The whole fleet in one Node process: SQS and DynamoDB (embedded emulators, or any
 * AWS-compatible endpoint), the queues and tables built from the same settings as the CDK stack,
 * the solver simulator, and the consumer's own handler driven by two pollers that play Lambda's
 * event source mappings (normal and high lanes). Only adapters differ from AWS.
 */
import { randomBytes } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { GetQueueAttributesCommand, SetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { createAwsClients, type AwsClients } from '../functions/adapters/aws-clients.js';
import { createLocalEventStream, type LocalEventStream } from '../functions/adapters/completion-events.js';
import { createMetrics, type EmfDocument } from '../functions/adapters/metrics.js';
import { createDynamoGovernorState } from '../functions/adapters/governor-state.js';
import { createProducer, type Producer } from '../clients/producer-client.js';
import { GOVERNOR_STATE_ID } from '../functions/core/deployment.js';
import { DynamoResultsRepository } from '../functions/adapters/results-repository.js';
import { createSolverClient } from '../functions/adapters/solver-client.js';
import type { PollSchedule } from '../functions/core/poll-schedule.js';
import { SqsTaskQueue } from '../functions/adapters/task-queue.js';
import { createDynamoThreadLedger, THREAD_LEDGER_ID, threadLeaseMs } from '../functions/adapters/thread-ledger.js';
import { createConsumerHandler, type ConsumerTiming } from '../functions/consumer/create-handler.js';
import {
  MAPPING_MIN_CONCURRENCY,
  resolveSettings,
  type FleetConfig,
  type FleetSettings,
} from '../functions/core/settings.js';
import { SERVICES } from '../functions/core/metric-names.js';
import type { GovernorConfig } from '../functions/core/governor/types.js';
import type { GovernorLog, TickRecord } from '../functions/governor/loop.js';
import { guardResultsRepository } from './chaos.js';
import { startLocalGovernor, type LocalGovernor } from './governor-local.js';
import { createLocalPollSchedule } from './poll-schedule-local.js';
import { startEmulators, type Emulators } from './emulators.js';
import { MetricsStore } from './metrics-store.js';
import { createPoller, type ConcurrencyPool, type Poller, type PollerStats } from './poller.js';
import { ensureFleetResources, type FleetResources } from './resources.js';
import { createSolverSimulator, type SolverSimOptions, type SolverSimulator } from './solver-sim/index.js';
import { stream } from './solver-sim/prng.js';

/** Log levels of the consumer's Powertools logger. */
export const LOG_LEVELS = ['silent', 'error', 'warn', 'info', 'debug'] as const;
export type LocalLogLevel = (typeof LOG_LEVELS)[number];

export interface LocalStackOptions {
  /**
   * The solver client's poll schedule. @default adaptive, its protocol defaults scaled to the
   * simulator's median (local/poll-schedule-local.ts); benchmarks pass a fixed one to compare.
   */
  pollSchedule?: PollSchedule;
  /**
   * One AWS-compatible endpoint for SQS and DynamoDB (moto_server, LocalStack, …) instead of
   * the embedded emulators. @default AWS_ENDPOINT_URL when set, else the embedded emulators
   */
  endpoint?: string;
  /** Fleet configuration, as the stack takes it (planThreads, tasksPerInvocation, …). */
  config?: FleetConfig;
  /**
   * Queue visibility timeout, seconds. Locally it also sets the function timeout (one second
   * less, at least 1): a crashed invocation's tasks come back after it. @default 12
   */
  visibilityTimeoutSeconds?: number;
  /**
   * A fixed ceiling: maximum concurrency of each lane's poller and of both together (the
   * function's reserved concurrency); turns the governor off. @default the governor decides
   */
  concurrency?: number;
  /** Options of the solver simulator (its plan threads default to `config.planThreads`). */
  solver?: SolverSimOptions;
  /** Share of invocations that die after solving and before recording (see local/chaos.ts). @default 0 */
  crashRate?: number;
  /** Seed of the runtime's own draws (crashes). @default solver.seed ?? 1 */
  seed?: number;
  /** The consumer's log level. @default 'silent' */
  logLevel?: LocalLogLevel;
  /** Long-poll wait of the pollers, seconds. @default 1 */
  receiveWaitSeconds?: number;
  /** Consumer timing overrides (retry backoff and the like); lease and margin follow the function timeout. */
  timing?: Partial<ConsumerTiming>;
  /**
   * The governor (the Lambda's loop on a timer) moves the lanes' ceilings and pauses on low
   * balance or a rejected key. Off when `concurrency` fixes the ceiling. @default on, ticking every 1 s
   */
  governor?: false | { tickMs?: number; config?: Partial<GovernorConfig>; onDecision?: (record: TickRecord) => void };
}

/** A running local stack. */
export interface LocalStack {
  settings: FleetSettings;
  clients: AwsClients;
  endpoints: { sqs: string; dynamo: string; solver: string; external: boolean };
  resources: FleetResources;
  pollers: { normal: Poller; high: Poller };
  /** Reserved concurrency shared by both lanes. */
  pool: ConcurrencyPool;
  simulator: SolverSimulator;
  metrics: MetricsStore;
  events: LocalEventStream;
  producer: Producer;
  /** The local governor, unless the ceiling is fixed. */
  governor: LocalGovernor | undefined;
  /** The function timeout the pollers enforce, ms. */
  functionTimeoutMs: number;
  /** Invocations killed by the crash knob so far. */
  crashes(): number;
  /** Both pollers' counters added up; the ceiling and peak are the shared pool's. */
  pollerStats(): PollerStats;
  /** Stop receiving, let in-flight invocations end (at most `graceMs`), stop everything. */
  stop(options?: { graceMs?: number }): Promise<void>;
}

/** Thrown when the local stack cannot start; says what to check. */
export class LocalStackError extends Error {
  override readonly name = 'LocalStackError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** Start the local stack. Call `stop()` when done. */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const visibilityTimeoutSeconds = options.visibilityTimeoutSeconds ?? 12;
  const functionTimeoutSeconds = Math.max(1, visibilityTimeoutSeconds - 1);
  // Short deadline: the simulator answers in milliseconds to seconds locally.
  const settings = resolveSettings(
    { solveDeadlineSeconds: 10, ...options.config },
    { visibilityTimeoutSeconds, functionTimeoutSeconds },
  );
  const functionTimeoutMs = functionTimeoutSeconds * 1000;
  const concurrency = options.concurrency ?? settings.maxConcurrency;
  const seed = options.seed ?? options.solver?.seed ?? 1;
  const endpoint = options.endpoint ?? process.env.AWS_ENDPOINT_URL;

  const cleanups: (() => Promise<void>)[] = [];
  const cleanup = async () => {
    for (const step of cleanups.reverse()) await step().catch(() => undefined);
  };
  try {
    let emulators: Emulators | undefined;
    let sqsEndpoint: string;
    let dynamoEndpoint: string;
    if (endpoint !== undefined) {
      sqsEndpoint = endpoint;
      dynamoEndpoint = endpoint;
    } else {
      emulators = await startEmulators();
      cleanups.push(() => emulators!.stop());
      sqsEndpoint = emulators.sqsEndpoint;
      dynamoEndpoint = emulators.dynamoEndpoint;
    }
    const clients = createAwsClients({ sqsEndpoint, dynamoEndpoint });
    cleanups.push(async () => {
      clients.sqs.destroy();
      clients.dynamo.destroy();
    });
    let resources: FleetResources;
    try {
      resources = await ensureFleetResources(clients, settings);
    } catch (error) {
      throw new LocalStackError(
        `could not create the queues and tables at ${endpoint ?? 'the embedded emulators'}: ${(error as Error).message}` +
          (endpoint ? '. Is the emulator running and does it serve both SQS and DynamoDB on that URL?' : ''),
        { cause: error },
      );
    }

    // Queues that already existed (an external emulator used before) keep their old timeout;
    // this run's crash recovery and function timeout assume its own.
    await alignVisibility(
      clients,
      [resources.queueUrls.normal, resources.queueUrls.high],
      settings.visibilityTimeoutSeconds,
    );

    // A fresh key per run, known only to this process and the simulator: never printed.
    const solverKey = randomBytes(16).toString('hex');
    const simulator = createSolverSimulator({
      seed,
      dialect: settings.dialect,
      planThreads: settings.planThreads,
      ...options.solver,
      validKeys: [solverKey],
    });
    const { url: solverUrl } = await simulator.listen(0, '127.0.0.1');
    cleanups.push(() => simulator.close());

    const metrics = new MetricsStore();
    const events = createLocalEventStream({ includeAnswer: settings.eventsIncludeAnswer });
    let crashes = 0;
    const repository = guardResultsRepository(
      new DynamoResultsRepository({
        documents: clients.documents,
        tableName: resources.tables.results,
        ttlSeconds: settings.resultTtlSeconds,
      }),
      { crashRate: options.crashRate ?? 0, random: stream(seed, 'runtime-crash'), onCrash: () => crashes++ },
    );
    const simMedianMs = options.solver?.medianMs;
    const governed = options.concurrency === undefined && options.governor !== false;
    const solver = createSolverClient({
      baseUrl: solverUrl,
      key: solverKey,
      dialect: settings.dialect,
      // Scaled to the simulator when it has one median; else the per-method defaults are real-world times and so is the protocol's schedule.
      ...(options.pollSchedule
        ? { schedule: options.pollSchedule }
        : simMedianMs !== undefined
          ? { schedule: createLocalPollSchedule({ medianMs: simMedianMs * (options.solver?.latencyScale ?? 1) }) }
          : {}),
      // Compressed like the rest of local time: over-cap and transient retries in 0.1-1 s.
      // With the thread ledger a refused invocation waits for a thread (the consumer) instead of
      // retrying in.php into the same refusal (the client).
      retry: { baseBackoffMs: 100, maxBackoffMs: 1_000, ...(governed ? { maxOverCapRetries: 0 } : {}) },
    });
    cleanups.push(() => solver.close());
    // Over-cap answers and held threads, from the consumer to the governor, on the governor table.
    const threadLedger = governed
      ? createDynamoThreadLedger({
          documents: clients.documents,
          tableName: resources.tables.governor,
          leaseMs: threadLeaseMs(settings),
        })
      : undefined;
    const handler = createConsumerHandler({
      solver,
      repository,
      queue: new SqsTaskQueue({
        sqs: clients.sqs,
        dlqUrl: resources.queueUrls.dlq,
        sourceQueueUrls: [resources.queueUrls.normal, resources.queueUrls.high],
      }),
      metrics: createMetrics({
        namespace: settings.metricsNamespace,
        serviceName: SERVICES.consumer,
        sink: (document: EmfDocument) => metrics.ingest(document),
      }),
      logger: new Logger({
        serviceName: SERVICES.consumer,
        logLevel: (options.logLevel ?? 'silent').toUpperCase() as 'SILENT',
      }),
      settings,
      events,
      ...(threadLedger ? { threadLedger } : {}),
      timing: {
        // One clock in one process: a lease as long as the function timeout outlives any
        // invocation that holds it (the claim comes after the invocation starts).
        leaseMs: functionTimeoutMs,
        recordMarginMs: Math.min(2_000, Math.max(200, functionTimeoutMs / 5)),
        // Compressed retries: a demo should not wait minutes for an over-cap backoff.
        retryBaseSeconds: 1,
        retryMaxSeconds: Math.max(2, Math.min(8, visibilityTimeoutSeconds)),
        accountRetryBaseSeconds: 2,
        accountRetryMaxSeconds: 15,
        overCapWaiting: { pollMs: 100, maxWaitMs: 2_000, maxWaits: 3 },
        ...options.timing,
      },
    });

    const pool: ConcurrencyPool = { limit: concurrency, inUse: 0 };
    // Governed lanes start where the stack starts its mappings (lib/config.ts initialCeilings):
    // high a quarter, normal the rest, their sum the fleet's maximum. A fixed ceiling applies
    // to each lane and to both together.
    const highStart = Math.max(MAPPING_MIN_CONCURRENCY, Math.floor(concurrency / 4));
    const startCeilings = governed
      ? { normal: Math.max(MAPPING_MIN_CONCURRENCY, concurrency - highStart), high: highStart }
      : { normal: concurrency, high: concurrency };
    const lane = (queueUrl: string, queueArn: string, ceiling: number) =>
      createPoller({
        sqs: clients.sqs,
        queueUrl,
        queueArn,
        region: clients.region,
        handler,
        batchSize: settings.tasksPerInvocation,
        maxConcurrency: ceiling,
        functionTimeoutMs,
        functionName: `${settings.prefix}-consumer`,
        waitTimeSeconds: options.receiveWaitSeconds ?? 1,
        pool,
      });
    const pollers = {
      high: lane(resources.queueUrls.high, resources.queueArns.high, startCeilings.high),
      normal: lane(resources.queueUrls.normal, resources.queueArns.normal, startCeilings.normal),
    };
    const logLevel = (options.logLevel ?? 'silent').toUpperCase() as 'SILENT';
    let governor: LocalGovernor | undefined;
    const governorOptions = options.governor === false ? undefined : options.governor;
    if (governed) {
      // Each run starts its own control loop: a state left by an earlier run against the same
      // endpoint (a pause, a shrunken cap for another plan) must not steer this one.
      for (const id of [GOVERNOR_STATE_ID, THREAD_LEDGER_ID]) {
        await clients.documents.send(new DeleteCommand({ TableName: resources.tables.governor, Key: { id } }));
      }
      governor = startLocalGovernor({
        settings,
        pollers,
        pool,
        sqs: clients.sqs,
        queueUrls: { normal: resources.queueUrls.normal, high: resources.queueUrls.high },
        metricsStore: metrics,
        solver,
        // The same store as in AWS, on the local governor table: `captcha-fleet status --local`
        // reads the last decision, ceilings and balance from it.
        state: createDynamoGovernorState({ documents: clients.documents, tableName: resources.tables.governor }),
        ...(threadLedger ? { threadLedger } : {}),
        tickMs: governorOptions?.tickMs ?? 1_000,
        ...(governorOptions?.config ? { config: governorOptions.config } : {}),
        ...(governorOptions?.onDecision ? { onDecision: governorOptions.onDecision } : {}),
        logger: governorLog(new Logger({ serviceName: SERVICES.governor, logLevel })),
      });
      cleanups.push(() => governor!.stop());
      // The first decision sets the ceilings before anything is received.
      await governor.ready;
    }
    await pollers.high.start();
    await pollers.normal.start();
    let stopped = false;
    cleanups.push(async () => {
      await Promise.all([pollers.high.stop({ graceMs: 0 }), pollers.normal.stop({ graceMs: 0 })]);
    });

    // `wait` hears completions from the consumer's event stream and reads only then (or after
    // a fallback interval, should an event be lost).
    const producer = createProducer({
      queueUrls: { normal: resources.queueUrls.normal, high: resources.queueUrls.high },
      table: resources.tables.results,
      clients,
      events,
    });

    return {
      settings,
      clients,
      endpoints: { sqs: sqsEndpoint, dynamo: dynamoEndpoint, solver: solverUrl, external: endpoint !== undefined },
      resources,
      pollers,
      pool,
      simulator,
      metrics,
      events,
      producer,
      governor,
      functionTimeoutMs,
      crashes: () => crashes,
      pollerStats: () => ({
        ...addStats(pollers.normal.stats(), pollers.high.stats()),
        maxConcurrency: pool.limit,
        peakConcurrency: pool.peak ?? 0,
      }),
      async stop(stopOptions = {}) {
        if (stopped) return;
        stopped = true;
        const graceMs = stopOptions.graceMs ?? functionTimeoutMs;
        // The governor first, so it does not re-enable what is being stopped.
        await governor?.stop();
        await Promise.all([pollers.high.stop({ graceMs }), pollers.normal.stop({ graceMs })]);
        await cleanup();
      },
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

function addStats(a: PollerStats, b: PollerStats): PollerStats {
  const sum = { ...a };
  for (const key of Object.keys(a) as (keyof PollerStats)[]) {
    if (typeof a[key] === 'number' && typeof b[key] === 'number')
      (sum as Record<string, unknown>)[key] = (a[key] as number) + (b[key] as number);
  }
  sum.enabled = a.enabled || b.enabled;
  return sum;
}

async function alignVisibility(clients: AwsClients, queueUrls: string[], seconds: number): Promise<void> {
  for (const QueueUrl of queueUrls) {
    const current = await clients.sqs.send(
      new GetQueueAttributesCommand({ QueueUrl, AttributeNames: ['VisibilityTimeout'] }),
    );
    if (Number(current.Attributes?.VisibilityTimeout) !== seconds) {
      await clients.sqs.send(
        new SetQueueAttributesCommand({ QueueUrl, Attributes: { VisibilityTimeout: String(seconds) } }),
      );
    }
  }
}

/** The governor's log shape on a Powertools logger. */
function governorLog(logger: Logger): GovernorLog {
  return {
    info: (message, fields) => logger.info(message, fields ?? {}),
    warn: (message, fields) => logger.warn(message, fields ?? {}),
    error: (message, fields) => logger.error(message, fields ?? {}),
  };
}
