/**
 * `npm run bench:watch-cpu` — what the governor's watch costs in CPU, not a test.
 *
 * In the parked design the governor's invocation polls every parked submission and records each
 * ready answer itself (functions/governor/parked-watch.ts): per recorded task the lease's
 * DeleteItem, one result request, the answered record's conditional write, the completion event
 * (PutEvents) and the message's DeleteMessage. Lambda gives a function CPU in proportion to its
 * memory (one vCPU at 1 769 MB), so the task rate a governor can record is bounded by its memory.
 * This measures the watch's own CPU with the real code and the real AWS SDK: the emulators, the
 * solver simulator and a stand-in EventBridge endpoint run in a child process, so only the
 * watch's side of every call (signing, serializing, parsing) is counted.
 *
 * Phases on N parked tasks (parked through the consumer's own handler): rounds that find nothing
 * ready (CPU per round and per parked submission asked about), then rounds until every task is
 * recorded (CPU per recorded task, the polling share taken out). The table turns them into the
 * tasks a second a governor at a given memory records before its CPU share runs out.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { Logger } from '@aws-lambda-powertools/logger';
import { Command } from 'commander';
import { integer } from '../local/cli-values.js';
import { createAwsClients, baseClientConfig } from '../functions/adapters/aws-clients.js';
import { createEventBridgePublisher } from '../functions/adapters/completion-events.js';
import { DynamoResultsRepository } from '../functions/adapters/results-repository.js';
import { createSolverClient } from '../functions/adapters/solver-client.js';
import { SqsTaskQueue } from '../functions/adapters/task-queue.js';
import { createDynamoThreadLeases, leaseLengthMs, PRIMARY_LEASE_LANE } from '../functions/adapters/thread-leases.js';
import { createDynamoThreadLedger, threadLeaseMs } from '../functions/adapters/thread-ledger.js';
import { createConsumerHandler } from '../functions/consumer/create-handler.js';
import { createMetrics } from '../functions/adapters/metrics.js';
import { createFixedPollSchedule } from '../functions/core/poll-schedule.js';
import { createRedactor } from '../functions/core/redaction.js';
import { resolveSettings } from '../functions/core/settings.js';
import { shardKeys } from '../functions/core/thread-leases.js';
import { pollRequestsFor } from '../functions/core/solver-protocol.js';
import { LAMBDA_MB_PER_VCPU, parkedGovernorSizing, WATCH_CPU, watchCpuNeed } from '../functions/core/watch-sizing.js';
import { createRecordingWatch } from '../functions/governor/recording-watch.js';
import { ensureFleetResources } from '../local/resources.js';
import { startEmulators } from '../local/emulators.js';
import { createSolverSimulator } from '../local/solver-sim/index.js';
import { createPoller } from '../local/poller.js';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const KEY = 'benchbenchbenchbenchbenchbench00';

/** The child: emulators, the solver simulator and a PutEvents stand-in; prints their endpoints. */
async function host(medianMs: number): Promise<void> {
  const emulators = await startEmulators();
  const sim = createSolverSimulator({
    seed: 5,
    validKeys: [KEY],
    planThreads: 100_000,
    medianMs,
    transientErrorRate: 0,
    unsolvableRate: 0,
  });
  const { url } = await sim.listen();
  const events = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.setHeader('content-type', 'application/x-amz-json-1.1');
      res.end(JSON.stringify({ FailedEntryCount: 0, Entries: [{ EventId: 'bench' }] }));
    });
  });
  events.listen(0, '127.0.0.1');
  await once(events, 'listening');
  const address = events.address();
  const eventsUrl = typeof address === 'object' && address ? `http://127.0.0.1:${address.port}` : '';
  process.stdout.write(
    `${JSON.stringify({ sqs: emulators.sqsEndpoint, dynamo: emulators.dynamoEndpoint, solver: url, events: eventsUrl })}\n`,
  );
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
}

interface Endpoints {
  sqs: string;
  dynamo: string;
  solver: string;
  events: string;
}

async function startHost(medianMs: number): Promise<{ endpoints: Endpoints; stop: () => void }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), '--host', String(medianMs)],
    {
      stdio: ['pipe', 'pipe', 'inherit'],
    },
  );
  const lines = createInterface({ input: child.stdout });
  const [line] = (await once(lines, 'line')) as [string];
  return { endpoints: JSON.parse(line) as Endpoints, stop: () => child.stdin.end() };
}

/** CPU of this process (user + system), ms. */
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

interface Figures {
  tasks: number;
  medianSolveMs: number;
  pollRounds: number;
  pollCpuMsPerRound: number;
  /** CPU per poll request to the solver (res.php: up to 100 ids each), ms. */
  pollCpuMsPerRequest: number;
  recorded: number;
  recordCpuMsPerTask: number;
  /** Full plans of 10-second solves: the vCPU the watch needs at the measured figures, the memory the stack gives the governor, the share of its CPU used. */
  plans: { planThreads: number; vcpuNeeded: number; memoryMb: number; shareUsed: number }[];
}

const PLANS = [50, 100, 200, 600, 1000];

/** A fleet on the child's endpoints, with the consumer's handler and the governor's watch as the stack wires them. */
function parkedFleet(endpoints: Endpoints, tasks: number) {
  const clients = createAwsClients({
    sqsEndpoint: endpoints.sqs,
    dynamoEndpoint: endpoints.dynamo,
    region: 'us-east-1',
  });
  const settings = resolveSettings({
    prefix: `cpu${Date.now() % 100_000}`,
    planThreads: tasks,
    // A mapping runs at most 1 000 invocations: a plan past them needs a batch that reaches it.
    tasksPerInvocation: Math.ceil(tasks / 1_000),
    solveDeadlineSeconds: 300,
  });
  const solver = createSolverClient({
    baseUrl: endpoints.solver,
    key: KEY,
    dialect: 'captchaai',
    schedule: createFixedPollSchedule({
      pollDefaults: { token: { firstPollMs: 20, intervalMs: 20 }, image: { firstPollMs: 20, intervalMs: 20 } },
    }),
  });
  const metrics = createMetrics({ namespace: settings.metricsNamespace, serviceName: 'consumer', sink: () => {} });
  const build = async () => {
    const resources = await ensureFleetResources(clients, settings);
    const leases = createDynamoThreadLeases({ documents: clients.documents, tableName: resources.tables.leases });
    const shards = shardKeys(PRIMARY_LEASE_LANE, settings.effectiveCap);
    const repository = new DynamoResultsRepository({
      documents: clients.documents,
      tableName: resources.tables.results,
      ttlSeconds: 3600,
    });
    const queue = new SqsTaskQueue({
      sqs: clients.sqs,
      dlqUrl: resources.queueUrls.dlq,
      sourceQueueUrls: [resources.queueUrls.normal, resources.queueUrls.high],
    });
    const ledger = createDynamoThreadLedger({
      documents: clients.documents,
      tableName: resources.tables.governor,
      leaseMs: threadLeaseMs(settings),
    });
    const handler = createConsumerHandler({
      solver,
      repository,
      queue,
      metrics,
      logger: new Logger({ serviceName: 'consumer', logLevel: 'SILENT' }),
      settings,
      timing: { retryBaseSeconds: 0, retryMaxSeconds: 0 },
      leases: { leases, shards, planCap: settings.effectiveCap, leaseMs: leaseLengthMs(settings) },
      threadLedger: ledger,
    });
    // As the governor's wiring builds it (functions/governor/recording-watch.ts): the recorded
    // tasks' messages deleted ten to a request, their metrics published once a batch.
    const { watch } = createRecordingWatch({
      leases,
      shards,
      results: repository,
      solver,
      queue,
      events: createEventBridgePublisher({
        client: new EventBridgeClient(baseClientConfig(endpoints.events, 'us-east-1')),
        busName: 'bench',
        source: settings.eventSource,
        includeAnswer: false,
      }),
      metrics,
      redactor: createRedactor([KEY]),
      solved: ledger,
      cadence: { settleMs: 0, viewEveryMs: 1_000, leaseMs: leaseLengthMs(settings) },
    });
    return { resources, handler, watch };
  };
  const close = async () => {
    await solver.close();
    clients.sqs.destroy();
    clients.dynamo.destroy();
  };
  return { clients, build, close };
}

type Fleet = ReturnType<typeof parkedFleet>;
type Built = Awaited<ReturnType<Fleet['build']>>;

/** Send `tasks` reCAPTCHA tasks and park each through the consumer's handler, as the mapping would deliver them. */
async function parkAll(fleet: Fleet, built: Built, tasks: number): Promise<void> {
  const { sqs } = fleet.clients;
  const queueUrl = built.resources.queueUrls.normal;
  for (let sent = 0; sent < tasks; sent += 10) {
    const entries = Array.from({ length: Math.min(10, tasks - sent) }, (_, i) => ({
      Id: String(i),
      MessageBody: JSON.stringify({
        id: `cpu-${sent + i}`,
        method: 'userrecaptcha',
        params: { googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://example.com/login' },
      }),
    }));
    await sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
  }
  // Delivered as the mapping would: the local runtime's poller (receive, invoke, delete what succeeded).
  const poller = createPoller({
    sqs,
    queueUrl,
    queueArn: built.resources.queueArns.normal,
    region: 'us-east-1',
    handler: built.handler,
    batchSize: 10,
    maxConcurrency: 4,
    functionTimeoutMs: 60_000,
    waitTimeSeconds: 1,
    enabled: true,
  });
  await poller.start();
  const started = Date.now();
  while (poller.stats().received < tasks && Date.now() - started < 120_000) await sleep(100);
  await poller.stop();
}

/** CPU of rounds, each followed by 100 ms of rest, while `more()` holds: total ms, rounds, submissions asked about. */
async function timedRounds(
  watch: Built['watch'],
  more: () => boolean,
): Promise<{ cpu: number; rounds: number; asked: number }> {
  let cpu = 0;
  let rounds = 0;
  let asked = 0;
  while (more()) {
    const before = cpuMs();
    const polled = watch.stats.polled;
    await watch.round();
    cpu += cpuMs() - before;
    asked += watch.stats.polled - polled;
    rounds++;
    await sleep(100);
  }
  return { cpu, rounds, asked };
}

async function measure(tasks: number, medianMs: number): Promise<Figures> {
  const { endpoints, stop } = await startHost(medianMs);
  const fleet = parkedFleet(endpoints, tasks);
  try {
    const built = await fleet.build();
    const parkStarted = Date.now();
    await parkAll(fleet, built, tasks);
    const { watch } = built;
    // Phase 1: rounds that find nothing ready (the solves take `medianMs`; parking took less).
    await watch.round();
    const readyFrom = parkStarted + medianMs * 0.4;
    let count = 0;
    const polling = await timedRounds(
      watch,
      () => Date.now() < readyFrom - 500 && count++ < 100 && watch.stats.recorded === 0,
    );
    // Phase 2: rounds until every task is recorded.
    const deadline = Date.now() + medianMs * 4 + 60_000;
    const recording = await timedRounds(watch, () => watch.stats.recorded < tasks && Date.now() < deadline);
    const before = cpuMs();
    await watch.flushSolved();
    const recordCpu = recording.cpu + cpuMs() - before;
    return figuresOf({
      tasks,
      medianMs,
      recorded: watch.stats.recorded,
      polling,
      recording: { ...recording, cpu: recordCpu },
    });
  } finally {
    await fleet.close();
    stop();
  }
}

/** The measured figures, and what they need of the governor on full plans. */
function figuresOf(run: {
  tasks: number;
  medianMs: number;
  recorded: number;
  polling: { cpu: number; rounds: number; asked: number };
  recording: { cpu: number; rounds: number; asked: number };
}): Figures {
  const { polling, recording } = run;
  const perRound = polling.rounds > 0 ? polling.cpu / polling.rounds : 0;
  const perAsked = polling.asked > 0 ? polling.cpu / polling.asked : 0;
  const requests = polling.rounds > 0 ? pollRequestsFor('res-php', polling.asked / polling.rounds) : 0;
  // The polling share of phase 2, at phase 1's price per submission asked about.
  const recordOnly = Math.max(0, recording.cpu - recording.asked * perAsked);
  const perTask = run.recorded > 0 ? recordOnly / run.recorded : 0;
  const perRequest = requests > 0 ? perRound / requests : 0;
  const plans = PLANS.map((planThreads) => {
    const fleet = { planThreads, solverProtocol: 'res-php', dialect: 'captchaai' } as const;
    const vcpuNeeded = watchCpuNeed(fleet, {
      recordMs: perTask,
      requestMs: perRequest,
      solveSeconds: WATCH_CPU.solveSeconds,
    });
    const { memoryMb } = parkedGovernorSizing(fleet);
    return { planThreads, vcpuNeeded, memoryMb, shareUsed: vcpuNeeded / (memoryMb / LAMBDA_MB_PER_VCPU) };
  });
  return {
    tasks: run.tasks,
    medianSolveMs: run.medianMs,
    pollRounds: polling.rounds,
    pollCpuMsPerRound: perRound,
    pollCpuMsPerRequest: perRequest,
    recorded: run.recorded,
    recordCpuMsPerTask: perTask,
    plans,
  };
}

async function main(): Promise<void> {
  if (process.argv[2] === '--host') {
    await host(Number(process.argv[3]));
    return;
  }
  const program = new Command('bench:watch-cpu')
    .description(
      "The governor's watch: CPU per poll round and per recorded task, and the task rate a governor's memory carries",
    )
    .option('--tasks <n>', 'parked tasks', integer(1, 10_000), 400)
    .option(
      '--median-ms <ms>',
      "the simulator's median solve, ms (parking must finish well before it)",
      integer(1, 600_000),
      40_000,
    )
    .option('--json', 'print one JSON object');
  program.parse();
  const flags = program.opts<{ tasks: number; medianMs: number; json?: boolean }>();
  const figures = await measure(flags.tasks, flags.medianMs);
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
    return;
  }
  const lines = [
    `${figures.recorded} of ${figures.tasks} parked tasks recorded by the watch`,
    `poll round, nothing ready: ${figures.pollCpuMsPerRound.toFixed(2)} ms CPU a round, ${figures.pollCpuMsPerRequest.toFixed(2)} ms per solver request (${figures.pollRounds} rounds; the sizing assumes ${WATCH_CPU.requestMs})`,
    `recording: ${figures.recordCpuMsPerTask.toFixed(2)} ms CPU per task: the lease, a result request, the record, the event, the delete (the sizing assumes ${WATCH_CPU.recordMs})`,
    '',
    `Full plans of ${WATCH_CPU.solveSeconds}-second solves, at the figures measured:`,
    '',
    '| plan threads | vCPU the watch needs | governor memory (stack) | share of its CPU used |',
    '|---|---|---|---|',
    ...figures.plans.map(
      (p) =>
        `| ${p.planThreads} | ${p.vcpuNeeded.toFixed(3)} | ${p.memoryMb} MB | ${(p.shareUsed * 100).toFixed(0)} % |`,
    ),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
