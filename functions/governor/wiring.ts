/**
 * Wire the governor from the parsed environment (the same variables in Lambda and for
 * `captcha-fleet governor --once`): SQS queue attributes, CloudWatch metrics, the balance
 * through the solver client, the consumer's mappings and reservation, state in DynamoDB.
 */
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { LambdaClient } from '@aws-sdk/client-lambda';
import { baseClientConfig, createAwsClients, type AwsClients } from '../adapters/aws-clients.js';
import { createCloudWatchSignals } from '../adapters/cloudwatch-signals.js';
import { createDynamoGovernorState, createMemoryGovernorState } from '../adapters/governor-state.js';
import { createLambdaActuator, createOverflowActuator } from '../adapters/lambda-actuator.js';
import { createQueueSignals } from '../adapters/queue-signals.js';
import {
  createConsumerStoreCalls,
  createStoreProber,
  createStoreSamplesReader,
} from '../adapters/store-health-signals.js';
import { threadLedgerFor } from '../adapters/thread-ledger.js';
import { createDynamoThreadLeases, PRIMARY_LEASE_LANE } from '../adapters/thread-leases.js';
import { DynamoResultsRepository } from '../adapters/results-repository.js';
import { createEventBridgePublisher } from '../adapters/completion-events.js';
import { createMetrics } from '../adapters/metrics.js';
import { createRedactor, type Redactor } from '../core/redaction.js';
import { SqsTaskQueue } from '../adapters/task-queue.js';
import {
  type LeaseKeeper,
  type LeaseTaker,
  leaseLengthMs,
  shardKeys,
  WATCH_POLL_MAX_MS,
  WATCH_VIEW_MS,
  watchPollMs,
} from '../core/thread-leases.js';
import { pollGapMs, pollRequestsFor } from '../core/solver-protocol.js';
import { solverFromEnvironment } from '../adapters/solver-from-environment.js';
import { fleetKeyLoaders } from '../adapters/solver-key.js';
import { queueNameOf } from '../adapters/task-queue.js';
import { ConfigError, type ConfigProblem, type FleetSettings } from '../core/settings.js';
import { ENV, type FleetEnvironment } from '../core/environment.js';
import { OVERFLOW_LEDGER_ID } from '../core/deployment.js';
import { SERVICES } from '../core/metric-names.js';
import { overflowConfigFrom } from '../core/governor/overflow.js';
import { cloudWatchTiming, governorConfigFrom } from '../core/governor/policy.js';
import type { GovernorConfig } from '../core/governor/types.js';
import type { GovernorStateStore, MetricsReader } from '../core/governor/ports.js';
import type { Clock, CompletionEvents, SolverPort } from '../core/ports.js';
import type { SolvedCounter, ThreadLedgerRecorder } from '../core/thread-ledger.js';
import { createOverflowBalance, createProbingBalance, tickBalanceTtlMs } from './balance-probe.js';
import { createThreadProbe, probeLeasesOf } from './thread-probe.js';
import { type ConsumerInvoker, createProbeCarrier } from './probe-carrier.js';
import { probeKeepSeconds } from '../core/probe-invocation.js';
import { lambdaConsumerInvoker } from '../adapters/consumer-invoker.js';
import { createTickWake, type TickWake } from './tick-wake.js';
import { createGovernorLoop, type GovernorLog, type GovernorLoop, type OverflowLoopOptions } from './loop.js';
import { type LeasedLane, leasedLedgerReader, leasedProbeLedger, withLeaseLimits } from './lease-step.js';
import type { ParkedWatch, ParkedWatchOptions } from './parked-watch.js';
import { createRecordingWatch } from './recording-watch.js';
import { solveWindowFor, solveWindowReader } from '../adapters/solve-window.js';
import type { SolveWindowWriter } from '../core/solve-window.js';
import { createDynamoWatchBaton } from '../adapters/watch-baton.js';
import type { WatchBatonStore } from '../core/watch-relay.js';

export interface GovernorWiringOptions {
  environment: FleetEnvironment;
  clients?: AwsClients;
  lambda?: LambdaClient;
  cloudwatch?: CloudWatchClient;
  /** Defaults to the undici solver client with the configured key (only getBalance is used). */
  solver?: Pick<SolverPort, 'getBalance'>;
  /** The overflow provider's; defaults to the undici client with the overflow key (only getBalance is used). */
  overflowSolver?: Pick<SolverPort, 'getBalance'>;
  /**
   * Asks the solver about parked submissions and reads a ready one's answer (solveMode `park`);
   * defaults to the undici client with the key.
   */
  parkedSolver?: Pick<SolverPort, 'pollMany' | 'solve'>;
  /** Where the watch announces the parked tasks it records; defaults to EventBridge when `EVENT_BUS_NAME` is set. */
  parkedEvents?: CompletionEvents;
  /** The governor's probe submissions (while others hold the plan); defaults to the undici client with over-cap retries off. */
  probeSolver?: Pick<SolverPort, 'solve'>;
  /**
   * The parked design's probe carries a waiting task through a consumer invocation
   * (probe-carrier.ts); defaults to invoking the consumer function (`CONSUMER_FUNCTION_NAME`).
   */
  consumerInvoker?: ConsumerInvoker;
  log?: GovernorLog;
  /**
   * Learns the solver keys this governor holds as they are read (the primary's, and the overflow
   * provider's with an overflow block); the watch's records are redacted with it, and so should
   * `log` be (the handler's is). @default a redactor of its own
   */
  redactor?: Redactor;
  dryRun?: boolean;
  clock?: Clock;
}

export interface WiredGovernor {
  loop: GovernorLoop;
  config: GovernorConfig;
  settings: FleetSettings;
  /** The watch over parked tasks (solveMode `park` with a leases table); run beside the ticks. */
  watch?: ParkedWatch;
  /** The watch relay's baton (with the watch): each invocation's watch hands over to the next's. */
  baton?: WatchBatonStore;
  /** Woken by the probe's acceptance: the ticks' loop (runTicks) ticks at once on it. */
  wake: TickWake;
  /** A balance read past the cache: while paused for the solver's outage, runTicks reads it between ticks (outage-recheck.ts). */
  solverRead: (signal: AbortSignal) => Promise<number>;
}

/**
 * What the overflow lane needs from the environment when the configuration has an overflow
 * block: its mapping, its key (for the balance) and the governor table (its ledger).
 */
export function overflowEnvironmentProblems(environment: FleetEnvironment): ConfigProblem[] {
  if (environment.settings.overflow === undefined) return [];
  const problems: ConfigProblem[] = [];
  if (environment.overflowMappingId === undefined)
    problems.push({
      field: ENV.overflowMappingId,
      problem:
        "not set: the configuration has an overflow block but the governor cannot find the overflow consumer's mapping",
      fix: `set ${ENV.overflowMappingId} to the overflow mapping's UUID (the stack does this for the Lambda), or remove the overflow block`,
    });
  if (environment.overflowKeySource === undefined)
    problems.push({
      field: ENV.overflowKeySecretArn,
      problem: "not set: the governor cannot read the overflow provider's balance, so it cannot budget its spend",
      fix: `set ${ENV.overflowKeySecretArn} (AWS) or ${ENV.overflowKey} (local)`,
    });
  if (environment.tables.governor === undefined)
    problems.push({
      field: ENV.governorTable,
      problem: "not set: the overflow lane's in flight and solves are read from its ledger on the governor table",
      fix: `set ${ENV.governorTable} to the governor table (the stack does this for the Lambda)`,
    });
  return problems;
}

/** The loop's overflow option from the environment; undefined without an overflow block. */
function overflowOptionFrom(
  options: GovernorWiringOptions,
  wired: {
    clients: AwsClients;
    lambda: LambdaClient;
    cloudwatch: CloudWatchClient;
    overrides: Partial<GovernorConfig>;
  },
): OverflowLoopOptions | undefined {
  const { environment, log } = options;
  const config = overflowConfigFrom(environment.settings, wired.overrides);
  if (config === undefined) return undefined;
  const clock = options.clock ? { clock: options.clock } : {};
  const solver =
    options.overflowSolver ??
    solverFromEnvironment(environment, wired.clients.region, undefined, undefined, 'overflow');
  const ledger = threadLedgerFor(environment, wired.clients.documents, options.clock, OVERFLOW_LEDGER_ID);
  return {
    config,
    balance: createOverflowBalance(solver, {
      tickMs: environment.settings.tickMs,
      ...clock,
      ...(log ? { warn: (message, fields) => log.warn(message, fields) } : {}),
    }),
    ...(ledger ? { ledger } : {}),
    metrics: createCloudWatchSignals({
      cloudwatch: wired.cloudwatch,
      namespace: environment.settings.metricsNamespace,
      service: SERVICES.overflowConsumer,
      ...clock,
      onError: (error) =>
        log?.warn('CloudWatch read of the overflow consumer failed; its metric signals unknown', {
          error: (error as Error).message,
        }),
    }),
    actuator: createOverflowActuator({
      lambda: wired.lambda,
      mappingId: environment.overflowMappingId as string,
      highMappingId: environment.overflowHighMappingId,
      functionName: environment.overflowFunctionName,
      warn: (message, details) => log?.warn(message, details),
    }),
    highMapping: environment.overflowHighMappingId !== undefined,
  };
}

/** Build the governor loop. @throws ConfigError when the mapping ids (or, with overflow, its variables) are missing. */
export async function createGovernorFromEnvironment(options: GovernorWiringOptions): Promise<WiredGovernor> {
  const { environment } = options;
  const { settings } = environment;
  const mappingIds = environment.mappingIds;
  const problems = overflowEnvironmentProblems(environment);
  if (mappingIds === undefined)
    problems.unshift({
      field: ENV.mappingIds,
      problem: "not set: the governor cannot find the consumer's event source mappings",
      fix: 'set it to {"normal": "<uuid>", "high": "<uuid>"} (the stack does this for the Lambda)',
    });
  if (mappingIds === undefined || problems.length > 0) throw new ConfigError(problems);
  const endpoint = environment.endpoint;
  const clients = options.clients ?? createAwsClients(endpoint ? { endpoint } : {});
  const lambda = options.lambda ?? new LambdaClient(baseClientConfig(endpoint, clients.region));
  const cloudwatch = options.cloudwatch ?? new CloudWatchClient(baseClientConfig(endpoint, clients.region));
  const log = options.log;
  // The keys are read now, so the redactor knows them before the first log line or record; one
  // that cannot be read yet is read again by the solver that needs it (an account error).
  const redactor = options.redactor ?? createRedactor();
  const keys = fleetKeyLoaders(environment, clients.region, environment.solverKeySource !== undefined);
  for (const load of Object.values(keys)) void load().then(redactor.add, () => undefined);
  const highLane = mappingIds.high !== undefined && environment.queueUrls.high !== undefined;
  // A probe must be judged on metrics taken after it (cloudWatchTiming). Only over-cap and
  // outage probes wait for it: the first tick sets the free threads, and a money pause resumes
  // on the first balance read that shows funds.
  const overrides = cloudWatchTiming(settings.tickMs);
  const threadLedger = threadLedgerFor(environment, clients.documents, options.clock);
  const leased = leasedLaneOf(environment, clients);
  // The parked design: held threads from the leases, and the probe records its answers with them.
  // …and the answers the watch (built after the loop) freed and has not counted yet among the solved.
  let watch: ParkedWatch | undefined;
  const uncounted = () => watch?.answersUncounted() ?? 0;
  const leasedReader =
    leased && leasedLedgerReader(threadLedger, leased, { clock: options.clock, log: options.log, uncounted });
  const probeLedger =
    threadLedger && leasedReader ? leasedProbeLedger(threadLedger, () => leasedReader.lastHeld()) : threadLedger;
  // One probe submission a tick while others hold the plan: over-cap retries off, so one refusal at most.
  // Accepted, it wakes the ticks for one at once (the threads it found are used from its answer on).
  const wake = createTickWake();
  const probe = probeLedger && probeOf(options, { clients, lambda }, probeLedger, leased, wake);
  const config = governorConfigFrom(settings, { highLane, probeSubmissions: probe !== undefined, ...overrides });
  const overflow = overflowOptionFrom(options, { clients, lambda, cloudwatch, overrides });
  const solver = options.solver ?? solverFromEnvironment(environment, clients.region);
  const balance = createProbingBalance(solver, {
    ttlMs: tickBalanceTtlMs(settings.tickMs),
    ...(options.clock ? { clock: options.clock } : {}),
    onError: (error) =>
      log?.warn('balance read failed; treating the balance as unknown', { error: (error as Error).message }),
  });
  const cw = createCloudWatchSignals({
    cloudwatch,
    namespace: settings.metricsNamespace,
    ...(options.clock ? { clock: options.clock } : {}),
    queueNames: {
      normal: queueNameOf(environment.queueUrls.normal),
      ...(highLane ? { high: queueNameOf(environment.queueUrls.high as string) } : {}),
    },
    onError: (error) =>
      log?.warn('CloudWatch read failed; metric signals unknown', { error: (error as Error).message }),
  });
  // The stores as dependencies: the governor's own read of each, and the consumers' store calls
  // (their EMF, through CloudWatch Logs, so it arrives whichever store is down).
  const stores = createStoreSamplesReader(
    createStoreProber({
      documents: clients.documents,
      sqs: clients.sqs,
      resultsTable: environment.tables.results,
      queueUrl: environment.queueUrls.normal,
      ...(options.clock ? { clock: options.clock } : {}),
    }),
    createConsumerStoreCalls({
      cloudwatch,
      namespace: settings.metricsNamespace,
      // The overflow consumer's calls only where it runs: each metric read is billed.
      services: settings.overflow !== undefined ? [SERVICES.consumer, SERVICES.overflowConsumer] : [SERVICES.consumer],
      ...(options.clock ? { clock: options.clock } : {}),
    }),
  );
  const solveWindow = leased ? solveWindowFor(environment, clients.documents, options.clock) : undefined;
  const state: GovernorStateStore =
    environment.tables.governor !== undefined
      ? createDynamoGovernorState({ documents: clients.documents, tableName: environment.tables.governor })
      : createMemoryGovernorState();
  const loop = createGovernorLoop({
    config,
    queues: createQueueSignals({
      sqs: clients.sqs,
      queueUrls: { normal: environment.queueUrls.normal, ...(highLane ? { high: environment.queueUrls.high } : {}) },
      ...(options.clock ? { clock: options.clock } : {}),
      onError: (lane, error) =>
        log?.warn('queue attributes read failed; backlog unknown', { lane, error: (error as Error).message }),
    }),
    metrics: consumerMetricsOf(solveWindow, cw, log),
    queueMetrics: cw,
    balance,
    // The consumer's over-cap answers and held threads on the same table, read every tick (the
    // held threads from the leases when the fleet parks); the grant and the held test's lift too.
    ...(leasedReader ? { threadLedger: leasedReader } : threadLedger ? { threadLedger } : {}),
    ...(threadLedger ? { spendGrant: threadLedger } : {}),
    ...(threadLedger && leasedReader ? { refusalHold: threadLedger } : {}),
    ...(probe ? { probe } : {}),
    stores,
    actuator: withLeases(
      createLambdaActuator({
        lambda,
        mappingIds: highLane ? mappingIds : { normal: mappingIds.normal },
        consumerFunctionName: environment.consumerFunctionName,
        warn: (message, details) => log?.warn(message, details),
      }),
      leased,
      log,
      options.clock,
    ),
    state,
    ...(overflow ? { overflow } : {}),
    ...(options.dryRun ? { dryRun: true } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(log ? { log } : {}),
  });
  watch = leased
    ? parkedWatchOf(environment, clients, leased, options, threadLedger, solveWindow, redactor)
    : undefined;
  const baton =
    watch && environment.tables.leases !== undefined
      ? createDynamoWatchBaton({
          documents: clients.documents,
          tableName: environment.tables.leases,
        })
      : undefined;
  return { loop, config, settings, wake, solverRead: (signal) => balance.readFresh(signal), watch, baton };
}

/**
 * The primary lane's leases when the fleet parks and its environment names the leases table; the
 * store takes leases too (the governor's probe holds one).
 */
function leasedLaneOf(
  environment: FleetEnvironment,
  clients: AwsClients,
): (LeasedLane & { leases: LeaseKeeper & LeaseTaker }) | undefined {
  const { settings } = environment;
  if (settings.solveMode !== 'park' || environment.tables.leases === undefined) return undefined;
  return {
    leases: createDynamoThreadLeases({ documents: clients.documents, tableName: environment.tables.leases }),
    shards: shardKeys(PRIMARY_LEASE_LANE, settings.effectiveCap),
    planCap: settings.effectiveCap,
    tasksPerInvocation: settings.tasksPerInvocation,
  };
}

function withLeases(
  actuator: ReturnType<typeof createLambdaActuator>,
  leased: LeasedLane | undefined,
  log: GovernorLog | undefined,
  clock: (() => number) | undefined,
) {
  return leased ? withLeaseLimits(actuator, leased, log, clock) : actuator;
}

/**
 * The consumer's metrics: in the parked design from the window on the governor table (no
 * GetMetricData for them); a waiting fleet's from CloudWatch. The queues' stay CloudWatch's.
 */
function consumerMetricsOf(
  solveWindow: MetricsReader | undefined,
  cloudwatch: MetricsReader,
  log: GovernorWiringOptions['log'],
): MetricsReader {
  if (solveWindow === undefined) return cloudwatch;
  return solveWindowReader(solveWindow, (error) =>
    log?.warn('metric window read failed; metric signals unknown', { error: (error as Error).message }),
  );
}

/** The governor's probe: one submission a tick on the ledger (and, parked, under a thread lease). */
function probeOf(
  options: GovernorWiringOptions,
  { clients, lambda }: { clients: AwsClients; lambda: LambdaClient },
  ledger: ThreadLedgerRecorder,
  leased: (LeasedLane & { leases: LeaseTaker }) | undefined,
  wake: { wake(): void },
) {
  const carrier = leased && probeCarrierOf(options, clients, lambda);
  return createThreadProbe({
    solver:
      options.probeSolver ??
      solverFromEnvironment(options.environment, clients.region, undefined, { maxOverCapRetries: 0 }),
    ledger,
    // The parked design: the probe holds a thread lease, as a consumer's submission does.
    ...(leased ? { leases: probeLeasesOf(leased) } : {}),
    ...(carrier ? { carrier } : {}),
    onAccepted: () => wake.wake(),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.log
      ? { warn: (message: string, fields?: Record<string, unknown>) => options.log?.warn(message, fields) }
      : {}),
  });
}

/**
 * The parked design's probe carrier: the lanes' queues (the high lane's first) and the consumer,
 * invoked as the function (`CONSUMER_FUNCTION_NAME`) or in process (the local runtime's invoker);
 * none without either (the synthetic probe alone).
 */
function probeCarrierOf(options: GovernorWiringOptions, clients: AwsClients, lambda: LambdaClient) {
  const { environment } = options;
  const functionName = environment.consumerFunctionName;
  const invoke = options.consumerInvoker ?? (functionName && lambdaConsumerInvoker(lambda, functionName));
  if (!invoke) return undefined;
  return createProbeCarrier({
    sqs: clients.sqs,
    queueUrls: environment.queueUrls,
    region: clients.region,
    invoke,
    keepSeconds: probeKeepSeconds(environment.settings.tickMs),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.log
      ? { warn: (message: string, fields?: Record<string, unknown>) => options.log?.warn(message, fields) }
      : {}),
  });
}

/**
 * The watch over parked tasks: the leases, the results table, the solver's bulk poll, the task
 * queues, and the thread ledger whose `solved` counter it adds its recorded answers to.
 */
function parkedWatchOf(
  environment: FleetEnvironment,
  clients: AwsClients,
  leased: LeasedLane,
  options: GovernorWiringOptions,
  ledger: SolvedCounter | undefined,
  solveWindow: SolveWindowWriter | undefined,
  redactor: Redactor,
): ParkedWatch | undefined {
  const solver = options.parkedSolver ?? solverFromEnvironment(environment, clients.region);
  const pollMany = solver.pollMany?.bind(solver);
  if (pollMany === undefined) return undefined;
  const { settings } = environment;
  const sourceQueueUrls = [
    environment.queueUrls.normal,
    ...(environment.queueUrls.high ? [environment.queueUrls.high] : []),
  ];
  // A ready parked task is recorded here, as the consumer would (its metrics under the consumer's
  // service); its message deleted ten to a request, its solve counted into the metric window.
  return createRecordingWatch({
    leases: leased.leases,
    shards: leased.shards,
    results: new DynamoResultsRepository({
      documents: clients.documents,
      tableName: environment.tables.results,
      ttlSeconds: settings.resultTtlSeconds,
    }),
    solver: { pollMany, solve: solver.solve.bind(solver) },
    queue: new SqsTaskQueue({ sqs: clients.sqs, dlqUrl: environment.queueUrls.dlq, sourceQueueUrls }),
    events: options.parkedEvents ?? eventsOf(environment, clients),
    metrics: createMetrics({ namespace: settings.metricsNamespace, serviceName: SERVICES.consumer }),
    redactor,
    ...(ledger ? { solved: ledger } : {}),
    ...(solveWindow ? { window: solveWindow } : {}),
    // A parked lease the solver has not answered for yet is renewed, as long as the consumers take.
    cadence: { ...watchCadence(settings), leaseMs: leaseLengthMs(settings) },
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.log ? { log: options.log } : {}),
  }).watch;
}

/** How often the governor's watch asks the solver and reads the leases, from the fleet's protocol. */
export function watchCadence(settings: Pick<FleetSettings, 'solverProtocol' | 'dialect'>): Required<
  Pick<ParkedWatchOptions, 'pollGapMs' | 'backoffPollMs' | 'viewEveryMs'>
> & {
  pollMs: (polled: number) => number;
} {
  return {
    // A round every 100 ms while its requests keep to ten a second, or to one per submission asked
    // about per 5 s (the providers' polling) when that is more: res.php's at any size; never slower
    // than 500 ms. The shards read every second.
    pollMs: (polled: number) => watchPollMs(pollRequestsFor(settings.solverProtocol, polled), polled),
    // One getTaskResult per id (the JSON task API): each id asked at most every 3–5 s, as its
    // providers require; res.php's bulk ids have no gap of their own.
    pollGapMs: pollGapMs(settings.solverProtocol, settings.dialect),
    // A round the solver answered for nothing (refused, rate-limited, down) slows the next to 500 ms.
    backoffPollMs: WATCH_POLL_MAX_MS,
    viewEveryMs: WATCH_VIEW_MS,
  };
}

/** EventBridge on the fleet's bus, when the environment names one. */
function eventsOf(environment: FleetEnvironment, clients: AwsClients): CompletionEvents | undefined {
  if (environment.eventBusName === undefined) return undefined;
  return createEventBridgePublisher({
    client: new EventBridgeClient(baseClientConfig(environment.endpoint, clients.region)),
    busName: environment.eventBusName,
    source: environment.settings.eventSource,
    includeAnswer: environment.settings.eventsIncludeAnswer,
  });
}
