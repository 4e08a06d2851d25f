/**
 * The whole fleet in one Node process: SQS and DynamoDB (embedded emulators, or any
 * AWS-compatible endpoint), the queues and tables built from the same settings as the CDK stack,
 * the solver simulator, and the consumer's own handler driven by two pollers that play Lambda's
 * event source mappings (normal and high lanes). Only adapters differ from AWS.
 */
import { SQS_MAPPING_RAMP } from '../functions/core/mapping-ramp.js';
import { randomBytes, randomUUID } from 'node:crypto';
import { Logger } from '@aws-lambda-powertools/logger';
import { GetQueueAttributesCommand, SetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { DeleteCommand } from '@aws-sdk/lib-dynamodb';
import { createProducer, type Producer } from '../clients/producer-client.js';
import { createAwsClients, type AwsClients } from '../functions/adapters/aws-clients.js';
import { createLocalEventStream, type LocalEventStream } from '../functions/adapters/completion-events.js';
import { createDynamoGovernorState } from '../functions/adapters/governor-state.js';
import type { EmfDocument } from '../functions/adapters/metrics.js';
import { createSolverClient } from '../functions/adapters/solver-client.js';
import { createDynamoThreadLedger, THREAD_LEDGER_ID, threadLeaseMs } from '../functions/adapters/thread-ledger.js';
import type { ConsumerHandler, ConsumerTiming } from '../functions/consumer/create-handler.js';
import type { ResultsRepository, SolverPort, TaskQueue } from '../functions/core/ports.js';
import type { SolvedCounter } from '../functions/core/thread-ledger.js';
import { createConsumerFromEnvironment } from '../functions/consumer/wiring.js';
import { createReporterFromEnvironment } from '../functions/reporter/wiring.js';
import { GOVERNOR_STATE_ID, OVERFLOW_LEDGER_ID } from '../functions/core/deployment.js';
import type { FleetEnvironment } from '../functions/core/environment.js';
import type { GovernorConfig } from '../functions/core/governor/types.js';
import { pollGapMs } from '../functions/core/solver-protocol.js';
import { SERVICES } from '../functions/core/metric-names.js';
import type { PollSchedule } from '../functions/core/poll-schedule.js';
import {
  type FleetConfig,
  type FleetSettings,
  MAPPING_MIN_CONCURRENCY,
  resolveSettings,
} from '../functions/core/settings.js';
import type { TickRecord } from '../functions/governor/loop.js';
import { governorLogFrom } from '../functions/governor/run.js';
import { createThreadProbe, probeLeasesOf } from '../functions/governor/thread-probe.js';
import { createProbeCarrier, type ProbeCarrier } from '../functions/governor/probe-carrier.js';
import { probeKeepSeconds } from '../functions/core/probe-invocation.js';
import { consumerSizing } from '../functions/core/function-sizing.js';
import {
  crashAtRandomMoments,
  guardDeadInvocationRequests,
  guardDeadInvocations,
  guardResultsRepository,
  InvocationBoundAgent,
  SolverIdWatch,
  watchCarries,
} from './chaos.js';
import { type LeasedLane, leasedLedgerReader, leasedProbeLedger } from '../functions/governor/lease-step.js';
import type { ParkedWatch } from '../functions/governor/parked-watch.js';
import { createRecordingWatch } from '../functions/governor/recording-watch.js';
import { createMetrics } from '../functions/adapters/metrics.js';
import { createRedactor } from '../functions/core/redaction.js';
import { DynamoResultsRepository } from '../functions/adapters/results-repository.js';
import { SqsTaskQueue } from '../functions/adapters/task-queue.js';
import { createDynamoThreadLeases, PRIMARY_LEASE_LANE } from '../functions/adapters/thread-leases.js';
import { type LeaseKeeper, type LeaseTaker, leaseLengthMs, shardKeys } from '../functions/core/thread-leases.js';
import type { FaultPlan } from './faults/plan.js';
import { createLetterWatch, type LetterWatch, type RepeatableLetters, watchLetters } from './faults/letters.js';
import { type FaultProxy, startFaultProxy } from './faults/proxy.js';
import { startEmulators } from './emulators.js';
import { type LocalGovernor, startLocalGovernor } from './governor-local.js';
import { MetricsStore } from './metrics-store.js';
import { type LocalOverflow, startLocalOverflow } from './overflow-local.js';
import { createLocalPollSchedule, localPollGapMs } from './poll-schedule-local.js';
import {
  type ConcurrencyPool,
  createPoller,
  currentInvocation,
  lambdaContextOf,
  type Poller,
  type PollerStats,
} from './poller.js';
import { ensureFleetResources, type FleetResources } from './resources.js';
import { createSolverSimulator, type SolverSimOptions, type SolverSimulator } from './solver-sim/index.js';
import { createStoreWatch, type StoreWatch } from './store-watch.js';
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
  /**
   * Invocations that die (see local/chaos.ts): with `crashAt: 'complete'`, the share of terminal
   * writes that kill their invocation after solving and before recording; with `'anytime'`,
   * crashes per second of invocation time, at random moments. @default 0
   */
  crashRate?: number;
  /** Where crashes strike: at `complete()`, or at any moment. @default 'complete' */
  crashAt?: 'complete' | 'anytime';
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
  /**
   * The simulated overflow provider's options (price per solve, threads, latency, balance), used
   * when `config.overflow` is set: the runtime starts a second simulator and points the overflow
   * block's `baseUrl` at it. @default OVERFLOW_SIM_DEFAULTS, the primary's latency
   */
  overflowSolver?: SolverSimOptions;
  /**
   * Put the fault proxy (local/faults/proxy.ts) between the fleet (consumers, governor, producer)
   * and SQS and DynamoDB, following this plan; its windows count from the moment the stack is
   * ready. The setup of the queues and tables and `observer` go around it. @default no faults
   */
  faults?: FaultPlan;
}

/** A running local stack. */
export interface LocalStack {
  settings: FleetSettings;
  /** The fleet's clients (through the fault proxy when there is one). */
  clients: AwsClients;
  /** Clients straight to SQS and DynamoDB, for watching the run from outside: never faulted. */
  observer: AwsClients;
  /** The fault proxy, when `faults` was given. */
  faults: FaultProxy | undefined;
  /**
   * The stores as the governor's dependencies (local/store-watch.ts): its probes of SQS and
   * DynamoDB each tick, and when a store outage paused consumption and a probe resumed it.
   * With the governor only.
   */
  storeHealth: StoreWatch | undefined;
  endpoints: { sqs: string; dynamo: string; solver: string; external: boolean };
  resources: FleetResources;
  pollers: { normal: Poller; high: Poller };
  /** The report function's event source: the reports queue, read by the same handler as in Lambda. */
  reports: Poller;
  /** Reserved concurrency shared by both lanes. */
  pool: ConcurrencyPool;
  simulator: SolverSimulator;
  metrics: MetricsStore;
  events: LocalEventStream;
  producer: Producer;
  /** The local governor, unless the ceiling is fixed. */
  governor: LocalGovernor | undefined;
  /** The overflow provider's simulator, consumer and lane, when `config.overflow` is set. */
  overflow: LocalOverflow | undefined;
  /** The function timeout the pollers enforce, ms. */
  functionTimeoutMs: number;
  /** Invocations killed by the crash knob so far. */
  crashes(): number;
  /** Paid submissions whose invocation died before their id was kept anywhere (see local/chaos.ts `SolverIdWatch`). */
  idsLostInCrashes(): number;
  /** Those ids, each as `provider:id` (`primary:17`). */
  lostSolverIds(): ReadonlySet<string>;
  /** Every accepted submission's id the consumers learned, with its task (local/chaos.ts `SolverIdWatch`). */
  knownSolverIds(): ReadonlyMap<string, string>;
  /**
   * The governor's probe submissions the solver accepted, each as `provider:id`: its synthetic
   * task (the same text or image every time), paid like any solve, no producer's task.
   */
  probeSolverIds(): ReadonlySet<string>;
  /** The consumer invocations the governor's probe made with a waiting task (the parked design), and their time. */
  probeInvocations(): ProbeInvocations;
  /** Dead letters SQS could not keep from repeating (a lost answer, a delete a crash cut off), by source message id (local/faults/letters.ts). */
  repeatableLetters(): RepeatableLetters;
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

/** Stop steps registered as each part starts; run in reverse order, each failure ignored. */
class Cleanups {
  private readonly steps: (() => Promise<void>)[] = [];
  add(step: () => Promise<void>): void {
    this.steps.push(step);
  }
  async run(): Promise<void> {
    for (const step of this.steps.splice(0).reverse()) await step().catch(() => undefined);
  }
}

/** The local consumer's function timeout for a queue visibility timeout, s: a second less (crashed tasks return after it). */
export function localFunctionTimeoutSeconds(visibilityTimeoutSeconds: number): number {
  return Math.max(1, visibilityTimeoutSeconds - 1);
}

/** The local consumer's record margin for its function timeout, ms: a fifth of it, 200 ms to 2 s. */
export function localRecordMarginMs(functionTimeoutMs: number): number {
  return Math.min(2_000, Math.max(200, functionTimeoutMs / 5));
}

/** The least of an invocation a local consumer needs left to submit and keep the id, ms. */
const LOCAL_MIN_SOLVE_WINDOW_MS = 1_500;

/**
 * The shortest visibility timeout a local consumer can solve under, s: its function (1 s less)
 * less the record margin must leave the solve window. Under it every delivery hands its task
 * back unsubmitted and valid tasks reach the DLQ (`--visibility-timeout 2`: 0 of 60 solved).
 */
export function minLocalVisibilityTimeoutSeconds(): number {
  let seconds = 2;
  for (;;) {
    const functionMs = localFunctionTimeoutSeconds(seconds) * 1000;
    if (functionMs - localRecordMarginMs(functionMs) >= LOCAL_MIN_SOLVE_WINDOW_MS) return seconds;
    seconds += 1;
  }
}

/** What every part of the stack is built from: the options resolved once. */
interface StackPlan {
  options: LocalStackOptions;
  settings: FleetSettings;
  functionTimeoutMs: number;
  visibilityTimeoutSeconds: number;
  /** The fixed ceiling, or the fleet's maximum when governed. */
  concurrency: number;
  governed: boolean;
  seed: number;
  endpoint: string | undefined;
  logLevel: 'SILENT';
}

function planStack(options: LocalStackOptions): StackPlan {
  const visibilityTimeoutSeconds = options.visibilityTimeoutSeconds ?? 12;
  const functionTimeoutSeconds = localFunctionTimeoutSeconds(visibilityTimeoutSeconds);
  // Short deadline: the simulator answers in milliseconds to seconds locally.
  const settings = resolveSettings(
    { solveDeadlineSeconds: 10, ...options.config },
    { visibilityTimeoutSeconds, functionTimeoutSeconds },
  );
  const governed = options.concurrency === undefined && options.governor !== false;
  if (settings.overflow !== undefined && !governed)
    throw new LocalStackError(
      'an overflow provider needs the governor to open its lane: drop the fixed ceiling (--concurrency) or the overflow block',
    );
  return {
    options,
    settings,
    functionTimeoutMs: functionTimeoutSeconds * 1000,
    visibilityTimeoutSeconds,
    concurrency: options.concurrency ?? settings.maxConcurrency,
    governed,
    seed: options.seed ?? options.solver?.seed ?? 1,
    endpoint: options.endpoint ?? process.env.AWS_ENDPOINT_URL,
    logLevel: (options.logLevel ?? 'silent').toUpperCase() as 'SILENT',
  };
}

/** Start the local stack. Call `stop()` when done. */
export async function startLocalStack(options: LocalStackOptions = {}): Promise<LocalStack> {
  const plan = planStack(options);
  const cleanups = new Cleanups();
  try {
    const backends = await startBackends(plan, cleanups);
    const solver = await startSolver(plan, cleanups);
    const consumer = await wireConsumer(plan, backends, solver);
    const overflow = await startOverflow(plan, backends, consumer, cleanups);
    const lanes = createLanes(plan, backends, consumer.handler);
    const { governor, storeHealth, probeSolverIds, probeInvocations } = await startGovernor(
      plan,
      backends,
      { solver, overflow, consumer },
      lanes,
      consumer.metrics,
      cleanups,
    );
    await startLanes(lanes, cleanups);
    const reports = await startReports(plan, backends, { solver, overflow }, consumer, cleanups);
    return assembleStack(
      plan,
      backends,
      solver,
      consumer,
      { ...lanes, reports },
      { governor, storeHealth, probeSolverIds, probeInvocations },
      overflow,
      cleanups,
    );
  } catch (error) {
    await cleanups.run();
    throw error;
  }
}

/** SQS and DynamoDB: the embedded emulators, or the endpoint given. */
interface Backends {
  clients: AwsClients;
  observer: AwsClients;
  faults: FaultProxy | undefined;
  /** Dead letters SQS could not keep from repeating (local/faults/letters.ts). */
  letters: LetterWatch;
  /** Handler calls still running, those the pollers gave up on (timed out) included. */
  calls: Set<Promise<unknown>>;
  endpoints: { sqs: string; dynamo: string };
  resources: FleetResources;
}

async function startBackends(plan: StackPlan, cleanups: Cleanups): Promise<Backends> {
  const { endpoint, settings } = plan;
  let endpoints: Backends['endpoints'] = { sqs: endpoint ?? '', dynamo: endpoint ?? '' };
  if (endpoint === undefined) {
    const emulators = await startEmulators();
    cleanups.add(() => emulators.stop());
    endpoints = { sqs: emulators.sqsEndpoint, dynamo: emulators.dynamoEndpoint };
  }
  const observer = createAwsClients({ sqsEndpoint: endpoints.sqs, dynamoEndpoint: endpoints.dynamo });
  cleanups.add(async () => {
    observer.sqs.destroy();
    observer.dynamo.destroy();
  });
  let faults: FaultProxy | undefined;
  const letters = createLetterWatch();
  let clients = observer;
  if (plan.options.faults !== undefined) {
    faults = await startFaultProxy({
      upstreams: { sqs: endpoints.sqs, dynamodb: endpoints.dynamo },
      plan: plan.options.faults,
      seed: plan.options.faults.seed ?? plan.seed,
      onInjected: letters.onInjected,
    });
    const proxy = faults;
    cleanups.add(() => proxy.close());
    clients = createAwsClients({ sqsEndpoint: proxy.url, dynamoEndpoint: proxy.url });
    const faulted = clients;
    cleanups.add(async () => {
      faulted.sqs.destroy();
      faulted.dynamo.destroy();
    });
  }
  // A dead invocation (crashed, timed out) sends nothing more, its SDK retries included.
  guardDeadInvocationRequests(clients.sqs);
  guardDeadInvocationRequests(clients.dynamo);
  // A call the poller gave up on (past the function timeout) still runs; its last writes must
  // land before the emulators close (dynalite throws on a write to a closed database). Runs
  // after the solver is closed, so such calls end fast.
  const calls = new Set<Promise<unknown>>();
  cleanups.add(async () => {
    let timer: NodeJS.Timeout | undefined;
    const bound = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, plan.functionTimeoutMs);
    });
    await Promise.race([Promise.allSettled([...calls]), bound]);
    clearTimeout(timer);
  });
  let resources: FleetResources;
  try {
    resources = await ensureFleetResources(observer, settings, {
      reportVisibilitySeconds: plan.visibilityTimeoutSeconds,
    });
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
    observer,
    [resources.queueUrls.normal, resources.queueUrls.high, resources.reportQueueUrls.reports],
    settings.visibilityTimeoutSeconds,
  );
  return { clients, observer, faults, letters, calls, endpoints, resources };
}

/** The simulator and the solver client that talks to it. */
/** The simulator's one median solve time as it answers (its latency scale applied), ms; undefined: per-method times. */
function simulatorMedianMs(solver: LocalStackOptions['solver']): number | undefined {
  const median = solver?.medianMs;
  return median === undefined ? undefined : median * (solver?.latencyScale ?? 1);
}

interface SolverSide {
  simulator: SolverSimulator;
  url: string;
  /** Known only to this process and the simulator: never printed. */
  key: string;
  client: ReturnType<typeof createSolverClient>;
}

async function startSolver(plan: StackPlan, cleanups: Cleanups): Promise<SolverSide> {
  const { options, settings } = plan;
  // A fresh key per run.
  const key = randomBytes(16).toString('hex');
  const simulator = createSolverSimulator({
    seed: plan.seed,
    dialect: settings.dialect,
    planThreads: settings.planThreads,
    ...options.solver,
    validKeys: [key],
  });
  const { url } = await simulator.listen(0, '127.0.0.1');
  cleanups.add(() => simulator.close());
  const simMedianMs = simulatorMedianMs(options.solver);
  const agent = new InvocationBoundAgent({ keepAliveTimeout: 10_000 });
  cleanups.add(() => agent.close());
  const client = createSolverClient({
    baseUrl: url,
    key,
    dialect: settings.dialect,
    protocol: settings.solverProtocol,
    ...(settings.solverSoftId !== undefined ? { softId: settings.solverSoftId } : {}),
    ...(settings.solverPricesUsd !== undefined ? { prices: settings.solverPricesUsd } : {}),
    // A dead invocation (timed out, crashed) sends the solver nothing more, as in Lambda.
    dispatcher: agent,
    // Scaled to the simulator when it has one median; else the per-method defaults are real-world times and so is the protocol's schedule.
    ...(options.pollSchedule
      ? { schedule: options.pollSchedule }
      : simMedianMs !== undefined
        ? { schedule: createLocalPollSchedule({ medianMs: simMedianMs }) }
        : {}),
    // The provider's gap between two result requests of one submission, on the simulator's clock.
    pollGapMs: localPollGapMs(pollGapMs(settings.solverProtocol, settings.dialect), simMedianMs),
    // Compressed like the rest of local time: over-cap and transient retries in 0.1-1 s.
    // With the thread ledger a refused invocation waits for a thread (the consumer) instead of
    // retrying in.php into the same refusal (the client).
    retry: { baseBackoffMs: 100, maxBackoffMs: 1_000, ...(plan.governed ? { maxOverCapRetries: 0 } : {}) },
  });
  cleanups.add(() => client.close());
  return { simulator, url, key, client };
}

/** The consumer handler, through the Lambda's own wiring, and what the runtime observes of it. */
interface ConsumerSide {
  handler: ConsumerHandler;
  metrics: MetricsStore;
  events: LocalEventStream;
  crashes(): number;
  idsLostInCrashes(): number;
  lostSolverIds(): ReadonlySet<string>;
  knownSolverIds(): ReadonlyMap<string, string>;
  /** The timing both consumers run with (compressed local time). */
  timing: Partial<ConsumerTiming>;
  /** The crash knob around a results repository (both consumers share it and its count). */
  wrapRepository: (repository: ResultsRepository) => ResultsRepository;
  /** Track a handler's calls until they settle (the stop waits for them). */
  track: (handler: ConsumerHandler) => ConsumerHandler;
  /** A dead invocation's queue calls and events never go out (local/chaos.ts). */
  wrapQueue: (queue: TaskQueue) => TaskQueue;
  guardedEvents: LocalEventStream;
  /** The overflow provider's key, made before either consumer, and the slot its client fills. */
  overflowKey: string | undefined;
  overflowResume: { client: SolverPort | undefined };
}

async function wireConsumer(plan: StackPlan, backends: Backends, solver: SolverSide): Promise<ConsumerSide> {
  const { options, settings, functionTimeoutMs, visibilityTimeoutSeconds } = plan;
  const { resources } = backends;
  const metrics = new MetricsStore();
  const events = createLocalEventStream({ includeAnswer: settings.eventsIncludeAnswer });
  let crashes = 0;
  // Each paid submission's id, followed to the record or a copy that keeps it (local/chaos.ts).
  const ids = new SolverIdWatch();
  // The overflow provider's key is made now: the primary consumer holds it too, to resume (never
  // submit) what the overflow lane paid for; its client exists once the overflow side starts.
  const overflowKey = settings.overflow !== undefined ? randomBytes(16).toString('hex') : undefined;
  const overflowResume: { client: SolverPort | undefined } = { client: undefined };
  const environment: FleetEnvironment = {
    settings,
    queueUrls: resources.queueUrls,
    // The governor table carries the thread ledger (over-cap answers, held threads) to the
    // governor; a run with a fixed ceiling has no governor to read it.
    // The leases of the parked design likewise: with no governor to watch parked tasks, the
    // consumers wait through their solves.
    tables: plan.governed ? resources.tables : { ...resources.tables, governor: undefined, leases: undefined },
    solverKeySource: { key: solver.key },
    ...(overflowKey !== undefined ? { overflowKeySource: { key: overflowKey } } : {}),
    consumerFunctionName: `${settings.prefix}-consumer`,
    eventBusName: undefined,
    endpoint: plan.endpoint,
  };
  const random = stream(plan.seed, 'runtime-crash');
  const anytime = options.crashAt === 'anytime';
  const crashAnytime = crashAtRandomMoments({
    perSecond: anytime ? (options.crashRate ?? 0) : 0,
    random,
    onCrash: () => crashes++,
  });
  const wrapRepository = (repository: ResultsRepository) =>
    guardResultsRepository(repository, {
      crashRate: anytime ? 0 : (options.crashRate ?? 0),
      random,
      onCrash: () => crashes++,
      ids,
    });
  const timing: Partial<ConsumerTiming> = {
    // One clock in one process: a lease as long as the function timeout outlives any
    // invocation that holds it (the claim comes after the invocation starts).
    leaseMs: functionTimeoutMs,
    recordMarginMs: localRecordMarginMs(functionTimeoutMs),
    // Compressed retries: a demo should not wait minutes for an over-cap backoff.
    retryBaseSeconds: 1,
    retryMaxSeconds: Math.max(2, Math.min(8, visibilityTimeoutSeconds)),
    accountRetryBaseSeconds: 2,
    accountRetryMaxSeconds: 15,
    // A store's bad minute is waited out in local seconds too: hand-backs grow to 10 s, and a
    // task near the DLQ goes back as a fresh copy.
    storeRetryBaseSeconds: 1,
    storeRetryMaxSeconds: 10,
    writeRetry: { firstMs: 50, maxMs: 500 },
    solverIdCarryAfterMs: 300,
    requeueReserveMs: 500,
    minSolveWindowMs: LOCAL_MIN_SOLVE_WINDOW_MS,
    overCapWaiting: { pollMs: 100, maxWaitMs: 2_000, maxWaits: 3 },
    leaseWaitPollMs: 50,
    // The simulator answers in about half a second: a solve that quick is recorded by the
    // invocation that submitted it; the slower ones park (seconds, as a real solver's do).
    parkAfterMs: 0,
    // A publish here is in-process and a note one local write: seconds are plenty.
    announceWindowMs: 5_000,
    ...options.timing,
  };
  // A dead invocation's queue calls never go out; copies that carry an id keep it, letters are watched.
  const wrapQueue = (queue: TaskQueue) =>
    guardDeadInvocations(watchCarries(watchLetters(queue, backends.letters, currentInvocation), ids));
  const guardedEvents = guardDeadInvocations(events);
  const handler = await createConsumerFromEnvironment({
    environment,
    clients: backends.clients,
    solver: solver.client,
    events: guardedEvents,
    metricsSink: (document: EmfDocument) => metrics.ingest(document),
    logger: new Logger({ serviceName: SERVICES.consumer, logLevel: plan.logLevel }),
    wrapRepository,
    wrapQueue,
    timing,
    ...(overflowKey !== undefined ? { overflowResumeSolver: lateSolver(overflowResume) } : {}),
  });
  // Every call is tracked until it settles, whatever the poller decided about it.
  const track =
    (inner: ConsumerHandler): ConsumerHandler =>
    (event, context) => {
      const call = inner(event, context);
      crashAnytime(call);
      backends.calls.add(call);
      void call.then(
        () => backends.calls.delete(call),
        () => backends.calls.delete(call),
      );
      return call;
    };
  return {
    handler: track(handler),
    metrics,
    events,
    crashes: () => crashes,
    idsLostInCrashes: () => ids.lost().size,
    lostSolverIds: () => ids.lost(),
    knownSolverIds: () => ids.known(),
    timing,
    wrapRepository,
    track,
    wrapQueue,
    guardedEvents,
    overflowKey,
    overflowResume,
  };
}

/** A solver whose client is set later (the overflow client, made after the primary consumer). */
function lateSolver(slot: { client: SolverPort | undefined }): SolverPort {
  const client = (): SolverPort => {
    if (slot.client === undefined) throw new LocalStackError('the overflow solver is not started yet');
    return slot.client;
  };
  return {
    solve: (task, options) => client().solve(task, options),
    getBalance: (options) => client().getBalance(options),
    reportBad: (solverId, context) => client().reportBad(solverId, context),
    reportGood: (solverId, context) => client().reportGood(solverId, context),
  };
}

/** The overflow provider's simulator, consumer and lane, when the configuration has an overflow block. */
async function startOverflow(
  plan: StackPlan,
  backends: Backends,
  consumer: ConsumerSide,
  cleanups: Cleanups,
): Promise<LocalOverflow | undefined> {
  if (plan.settings.overflow === undefined) return undefined;
  const overflow = await startLocalOverflow({
    settings: plan.settings,
    // Its own draws: the same seed must not make both providers answer alike.
    solver: { medianMs: plan.options.solver?.medianMs, ...plan.options.overflowSolver },
    seed: plan.seed + 1,
    clients: backends.clients,
    resources: backends.resources,
    metrics: consumer.metrics,
    events: consumer.guardedEvents,
    functionTimeoutMs: plan.functionTimeoutMs,
    receiveWaitSeconds: plan.options.receiveWaitSeconds ?? 1,
    logLevel: plan.logLevel,
    timing: consumer.timing,
    wrapRepository: consumer.wrapRepository,
    track: consumer.track,
    wrapQueue: consumer.wrapQueue,
    ...(consumer.overflowKey !== undefined ? { key: consumer.overflowKey } : {}),
    onStop: (step) => cleanups.add(step),
  });
  consumer.overflowResume.client = overflow.client;
  // The settings everyone reads name the simulator the overflow consumer really talks to.
  plan.settings = { ...plan.settings, overflow: overflow.settings };
  return overflow;
}

/** The two pollers that play the event source mappings, sharing the function's concurrency. */
interface Lanes {
  pollers: { normal: Poller; high: Poller };
  pool: ConcurrencyPool;
}

function createLanes(plan: StackPlan, backends: Backends, handler: ConsumerHandler): Lanes {
  const { settings, concurrency } = plan;
  const { clients, resources } = backends;
  const pool: ConcurrencyPool = { limit: concurrency, inUse: 0 };
  // Governed lanes start where the stack starts its mappings (lib/config.ts initialCeilings):
  // high a quarter, normal the rest, their sum the fleet's maximum. A fixed ceiling applies
  // to each lane and to both together.
  const highStart = Math.max(MAPPING_MIN_CONCURRENCY, Math.floor(concurrency / 4));
  const startCeilings = plan.governed
    ? { normal: Math.max(MAPPING_MIN_CONCURRENCY, concurrency - highStart), high: highStart }
    : { normal: concurrency, high: concurrency };
  const lane = (name: 'normal' | 'high') =>
    createPoller({
      sqs: clients.sqs,
      queueUrl: resources.queueUrls[name],
      queueArn: resources.queueArns[name],
      region: clients.region,
      handler,
      batchSize: settings.tasksPerInvocation,
      maxConcurrency: startCeilings[name],
      functionTimeoutMs: plan.functionTimeoutMs,
      functionName: `${settings.prefix}-consumer`,
      waitTimeSeconds: plan.options.receiveWaitSeconds ?? 1,
      pool,
      // Lambda's pollers ramp up (five at first, up to 300 more a minute): a lane opened wide
      // bursts here as it would in AWS and in the lab, not all its ceiling at once.
      ramp: SQS_MAPPING_RAMP,
    });
  return { pollers: { high: lane('high'), normal: lane('normal') }, pool };
}

async function startLanes({ pollers }: Lanes, cleanups: Cleanups): Promise<void> {
  await pollers.high.start();
  await pollers.normal.start();
  cleanups.add(async () => {
    await Promise.all([pollers.high.stop({ graceMs: 0 }), pollers.normal.stop({ graceMs: 0 })]);
  });
}

/**
 * The report function (functions/reporter), wired as in Lambda, on a poller of the reports queue:
 * a report goes to the simulator of the provider that solved the task.
 */
async function startReports(
  plan: StackPlan,
  backends: Backends,
  { solver, overflow }: { solver: SolverSide; overflow: LocalOverflow | undefined },
  consumer: ConsumerSide,
  cleanups: Cleanups,
): Promise<Poller> {
  const { settings } = plan;
  const { resources, clients } = backends;
  const handler = createReporterFromEnvironment({
    environment: {
      settings,
      queueUrls: resources.queueUrls,
      reportQueueUrls: resources.reportQueueUrls,
      tables: resources.tables,
      solverKeySource: { key: solver.key },
      consumerFunctionName: undefined,
      eventBusName: undefined,
      endpoint: plan.endpoint,
    },
    clients,
    solvers: { primary: solver.client, ...(overflow ? { overflow: overflow.client } : {}) },
    metricsSink: (document: EmfDocument) => consumer.metrics.ingest(document),
    logger: new Logger({ serviceName: SERVICES.reporter, logLevel: plan.logLevel }),
    // A claimed report outlives no local invocation.
    leaseMs: plan.functionTimeoutMs,
  });
  const poller = createPoller({
    sqs: clients.sqs,
    queueUrl: resources.reportQueueUrls.reports,
    queueArn: resources.reportQueueArns.reports,
    region: clients.region,
    handler,
    batchSize: 10,
    maxConcurrency: 2,
    functionTimeoutMs: plan.functionTimeoutMs,
    functionName: `${settings.prefix}-reporter`,
    waitTimeSeconds: plan.options.receiveWaitSeconds ?? 1,
    pool: { limit: 2, inUse: 0 },
  });
  await poller.start();
  cleanups.add(() => poller.stop({ graceMs: 0 }));
  return poller;
}

/** The governor (the Lambda's loop on a timer), unless the ceiling is fixed. */
async function startGovernor(
  plan: StackPlan,
  { clients, resources }: Backends,
  { solver, overflow, consumer }: { solver: SolverSide; overflow: LocalOverflow | undefined; consumer: ConsumerSide },
  { pollers, pool }: Lanes,
  metrics: MetricsStore,
  cleanups: Cleanups,
): Promise<GovernorSide> {
  const probeSolverIds = new Set<string>();
  const probeInvocations: ProbeInvocations = { invocations: 0, invocationMs: 0 };
  if (!plan.governed) return { governor: undefined, storeHealth: undefined, probeSolverIds, probeInvocations };
  const governorOptions = plan.options.governor === false ? undefined : plan.options.governor;
  const tickMs = governorOptions?.tickMs ?? 1_000;
  // The stores are dependencies the governor probes every tick, as in AWS.
  const storeHealth = createStoreWatch({
    clients,
    metrics,
    resultsTable: resources.tables.results,
    queueUrl: resources.queueUrls.normal,
    windowMs: 5 * tickMs,
  });
  const onDecision = governorOptions?.onDecision;
  // Each run starts its own control loop: a state left by an earlier run against the same
  // endpoint (a pause, a shrunken cap for another plan) must not steer this one.
  for (const id of [GOVERNOR_STATE_ID, THREAD_LEDGER_ID, OVERFLOW_LEDGER_ID]) {
    await clients.documents.send(new DeleteCommand({ TableName: resources.tables.governor, Key: { id } }));
  }
  const ledger = createDynamoThreadLedger({
    documents: clients.documents,
    tableName: resources.tables.governor,
    leaseMs: threadLeaseMs(plan.settings),
  });
  const parked = await parkedSide(plan, { clients, resources }, solver, consumer, ledger);
  // The parked design: held threads from the leases; the probe records its answers with them.
  const reader = parked
    ? leasedLedgerReader(ledger, parked.lane, { uncounted: () => parked.watch.answersUncounted() })
    : undefined;
  const probeLedger = reader ? leasedProbeLedger(ledger, () => reader.lastHeld()) : ledger;
  // The probe's acceptance wakes the governor for a tick at once, as in AWS (functions/governor/tick-wake.ts).
  let toWake: Pick<LocalGovernor, 'tickNow'> | undefined;
  const governor = startLocalGovernor({
    settings: plan.settings,
    ...(parked ? { parked } : {}),
    pollers,
    pool,
    sqs: clients.sqs,
    queueUrls: { normal: resources.queueUrls.normal, high: resources.queueUrls.high },
    metricsStore: metrics,
    solver: solver.client,
    // The same store as in AWS, on the local governor table: `captcha-fleet status --local`
    // reads the last decision, ceilings and balance from it.
    state: createDynamoGovernorState({ documents: clients.documents, tableName: resources.tables.governor }),
    threadLedger: reader ?? ledger,
    spendGrant: ledger,
    ...(reader !== undefined ? { refusalHold: ledger } : {}),
    // One probe submission a tick while others hold the plan, as in AWS (functions/governor/wiring.ts):
    // the governed client's over-cap retries are off, so a probe is refused once at most.
    probe: createThreadProbe({
      solver: probeIdsOf(solver.client, probeSolverIds),
      ledger: probeLedger,
      // The parked design: the probe holds a thread lease, as a consumer's submission does, and
      // carries a waiting task through the consumer (in process here, invoked in AWS).
      ...(parked
        ? {
            leases: probeLeasesOf(parked.lane),
            carrier: localProbeCarrier(plan, { clients, resources }, consumer, probeInvocations),
          }
        : {}),
      onAccepted: () => void toWake?.tickNow({ probe: false }),
    }),
    // The overflow lane: its poller, its concurrency, its provider's balance and its consumer's ledger.
    ...(overflow
      ? {
          overflow: {
            lane: overflow.poller,
            highLane: overflow.highPoller,
            pool: overflow.pool,
            solver: overflow.client,
            ledger: overflow.ledger,
          },
        }
      : {}),
    stores: storeHealth.samples,
    tickMs,
    ...(governorOptions?.config ? { config: governorOptions.config } : {}),
    onDecision: (record) => {
      storeHealth.observe(record);
      onDecision?.(record);
    },
    logger: governorLogFrom(
      new Logger({ serviceName: SERVICES.governor, logLevel: plan.logLevel }),
      createRedactor([solver.key, ...(overflow ? [overflow.key] : [])]),
    ),
  });
  toWake = governor;
  cleanups.add(() => governor.stop());
  // The first decision sets the ceilings before anything is received.
  await governor.ready;
  return { governor, storeHealth, probeSolverIds, probeInvocations };
}

/**
 * The parked design's probe carrier (functions/governor/probe-carrier.ts): a waiting task received
 * from the lanes' queues (the high lane's first) and handed to the consumer handler in process,
 * with a Lambda context of the function's timeout, as the Lambda invokes the function.
 */
function localProbeCarrier(
  plan: StackPlan,
  { clients, resources }: Pick<Backends, 'clients' | 'resources'>,
  consumer: ConsumerSide,
  counted: ProbeInvocations,
): ProbeCarrier {
  return createProbeCarrier({
    sqs: clients.sqs,
    queueUrls: resources.queueUrls,
    region: clients.region,
    keepSeconds: probeKeepSeconds(plan.settings.tickMs),
    invoke: async (event) => {
      const startedAt = Date.now();
      counted.invocations++;
      try {
        return await consumer.handler(
          event,
          lambdaContextOf({
            functionName: `${plan.settings.prefix}-consumer`,
            region: clients.region,
            memoryLimitInMB: consumerSizing(plan.settings).memoryMb,
            requestId: randomUUID(),
            deadline: startedAt + plan.functionTimeoutMs,
            now: Date.now,
          }),
        );
      } finally {
        counted.invocationMs += Date.now() - startedAt;
      }
    },
  });
}

/** The consumer invocations the probe's carrier made (the mappings' pollers count theirs). */
export interface ProbeInvocations {
  invocations: number;
  invocationMs: number;
}

/** The local governor, its stores' health watch, and the ids its probes were accepted under. */
interface GovernorSide {
  governor: LocalGovernor | undefined;
  storeHealth: StoreWatch | undefined;
  probeSolverIds: ReadonlySet<string>;
  probeInvocations: ProbeInvocations;
}

/**
 * The probe's solver, noting the id of each probe submission the solver accepts (as
 * `primary:id`, the key the run's accounting uses): the probe's task is the same every time, so
 * at the solver two accepted probes look like one task paid twice.
 */
function probeIdsOf(client: SolverPort, ids: Set<string>): Pick<SolverPort, 'solve'> {
  return {
    solve: (task, options) =>
      client.solve(task, {
        ...options,
        onSubmitted: (solverId) => {
          ids.add(SolverIdWatch.key('primary', solverId));
          return options.onSubmitted?.(solverId);
        },
      }),
  };
}

/**
 * The parked design's side of the local governor (solveMode `park`): the primary lane's leases,
 * cleared of an earlier run's, and the watch that hands parked tasks back, a bulk poll every tenth
 * of a tick and the leases read every fifth (the simulator answers in a second or two; in AWS a
 * 10 s tick, a poll every 500 ms, a read every second).
 */
async function parkedSide(
  plan: StackPlan,
  { clients, resources }: Pick<Backends, 'clients' | 'resources'>,
  solver: SolverSide,
  consumer: Pick<ConsumerSide, 'events' | 'metrics'>,
  ledger: SolvedCounter,
): Promise<{ lane: LeasedLane & { leases: LeaseKeeper & LeaseTaker }; watch: ParkedWatch } | undefined> {
  const { settings } = plan;
  if (settings.solveMode !== 'park') return undefined;
  const leases = createDynamoThreadLeases({ documents: clients.documents, tableName: resources.tables.leases });
  const lane = {
    leases,
    shards: shardKeys(PRIMARY_LEASE_LANE, settings.effectiveCap),
    planCap: settings.effectiveCap,
    tasksPerInvocation: settings.tasksPerInvocation,
  };
  for (const view of await leases.views(lane.shards)) for (const slot of view.slots) await leases.release(slot);
  const tickMs = (plan.options.governor === false ? undefined : plan.options.governor?.tickMs) ?? 1_000;
  // Ready parked tasks are recorded by the watch, as in AWS: into the consumer's events and metrics,
  // their messages deleted ten to a request; each batch at least every tick.
  // The solver's answers and the watch's log lines are redacted with the key (untrusted answers).
  const redactor = createRedactor([solver.key]);
  const { watch } = createRecordingWatch({
    leases,
    shards: lane.shards,
    results: new DynamoResultsRepository({
      documents: clients.documents,
      tableName: resources.tables.results,
      ttlSeconds: settings.resultTtlSeconds,
    }),
    solver: solver.client,
    queue: new SqsTaskQueue({
      sqs: clients.sqs,
      dlqUrl: resources.queueUrls.dlq,
      sourceQueueUrls: [resources.queueUrls.normal, resources.queueUrls.high],
    }),
    events: consumer.events,
    metrics: createMetrics({
      namespace: settings.metricsNamespace,
      serviceName: SERVICES.consumer,
      sink: (document: EmfDocument) => consumer.metrics.ingest(document),
    }),
    redactor,
    // Its recorded answers join the ledger's `solved` count, as in AWS (the grant's price per solve).
    solved: ledger,
    batchMs: tickMs,
    cadence: {
      settleMs: 50,
      viewEveryMs: Math.max(100, Math.round(tickMs / 5)),
      // Each id of the JSON task API asked at most every 3–5 s as in AWS, on the simulator's clock.
      pollGapMs: localPollGapMs(
        pollGapMs(settings.solverProtocol, settings.dialect),
        simulatorMedianMs(plan.options.solver),
      ),
      // A parked lease the solver has not answered for yet is renewed, as on AWS.
      leaseMs: leaseLengthMs(settings),
      // A round every tenth of a tick (its run, beside the local governor's ticks).
      pollMs: Math.max(50, Math.round(tickMs / 10)),
    },
    log: governorLogFrom(new Logger({ serviceName: SERVICES.governor, logLevel: plan.logLevel }), redactor),
  });
  return { lane, watch };
}

function assembleStack(
  plan: StackPlan,
  { clients, observer, faults, letters, endpoints, resources }: Backends,
  solver: SolverSide,
  consumer: ConsumerSide,
  { pollers, pool, reports }: Lanes & { reports: Poller },
  { governor, storeHealth, probeSolverIds, probeInvocations }: GovernorSide,
  overflow: LocalOverflow | undefined,
  cleanups: Cleanups,
): LocalStack {
  // `wait` hears completions from the consumer's event stream and reads only then (or after
  // a fallback interval, should an event be lost).
  const producer = createProducer({
    queueUrls: {
      normal: resources.queueUrls.normal,
      high: resources.queueUrls.high,
      reports: resources.reportQueueUrls.reports,
    },
    table: resources.tables.results,
    clients,
    events: consumer.events,
  });
  let stopped = false;
  // The plan's windows count from here: the stack is up, the workload about to start.
  faults?.arm();
  storeHealth?.arm();
  return {
    settings: plan.settings,
    clients,
    observer,
    faults,
    storeHealth,
    endpoints: { ...endpoints, solver: solver.url, external: plan.endpoint !== undefined },
    resources,
    pollers,
    reports,
    pool,
    simulator: solver.simulator,
    metrics: consumer.metrics,
    events: consumer.events,
    producer,
    governor,
    overflow,
    functionTimeoutMs: plan.functionTimeoutMs,
    crashes: consumer.crashes,
    idsLostInCrashes: consumer.idsLostInCrashes,
    lostSolverIds: consumer.lostSolverIds,
    knownSolverIds: consumer.knownSolverIds,
    probeSolverIds: () => probeSolverIds,
    probeInvocations: () => ({ ...probeInvocations }),
    repeatableLetters: () => letters.repeatable(resources.queueUrls.dlq),
    pollerStats: () => ({
      ...addStats(pollers.normal.stats(), pollers.high.stats()),
      maxConcurrency: pool.limit,
      peakConcurrency: pool.peak ?? 0,
    }),
    async stop(stopOptions = {}) {
      if (stopped) return;
      stopped = true;
      const graceMs = stopOptions.graceMs ?? plan.functionTimeoutMs;
      // The governor first, so it does not re-enable what is being stopped.
      await governor?.stop();
      await Promise.all([
        pollers.high.stop({ graceMs }),
        pollers.normal.stop({ graceMs }),
        overflow?.poller.stop({ graceMs }),
        overflow?.highPoller.stop({ graceMs }),
        reports.stop({ graceMs }),
      ]);
      await cleanups.run();
    },
  };
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
