/**
 * A parked fleet for the CPU benchmarks (bench/watch-cpu.ts, bench/consumer-cpu.ts): the
 * emulators, the solver simulator and a PutEvents stand-in run in a child process (this file with
 * `--host <median ms>`), so only the measured side of every call (signing, serializing, parsing)
 * is counted in the parent; the consumer's handler, its leases and the governor's watch are wired
 * as the stack wires them.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { Logger } from '@aws-lambda-powertools/logger';
import { createAwsClients, baseClientConfig } from '../../functions/adapters/aws-clients.js';
import { createEventBridgePublisher } from '../../functions/adapters/completion-events.js';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { createSolverClient } from '../../functions/adapters/solver-client.js';
import { SqsTaskQueue } from '../../functions/adapters/task-queue.js';
import { createDynamoThreadLeases, leaseLengthMs, PRIMARY_LEASE_LANE } from '../../functions/adapters/thread-leases.js';
import { createDynamoThreadLedger, threadLeaseMs } from '../../functions/adapters/thread-ledger.js';
import { createConsumerHandler } from '../../functions/consumer/create-handler.js';
import { createMetrics } from '../../functions/adapters/metrics.js';
import { createFixedPollSchedule } from '../../functions/core/poll-schedule.js';
import { createRedactor } from '../../functions/core/redaction.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { shardKeys } from '../../functions/core/thread-leases.js';
import { createRecordingWatch } from '../../functions/governor/recording-watch.js';
import { ensureFleetResources } from '../../local/resources.js';
import { startEmulators } from '../../local/emulators.js';
import { createSolverSimulator } from '../../local/solver-sim/index.js';
import { createPoller } from '../../local/poller.js';
import { SendMessageBatchCommand } from '@aws-sdk/client-sqs';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

export const KEY = 'benchbenchbenchbenchbenchbench00';

/** The child: emulators, the solver simulator and a PutEvents stand-in; prints their endpoints. */
export async function host(medianMs: number): Promise<void> {
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

export interface Endpoints {
  sqs: string;
  dynamo: string;
  solver: string;
  events: string;
}

export async function startHost(medianMs: number): Promise<{ endpoints: Endpoints; stop: () => void }> {
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
export const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A fleet on the child's endpoints, with the consumer's handler and the governor's watch as the stack wires them. */
export function parkedFleet(endpoints: Endpoints, tasks: number) {
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
    return { resources, handler, watch, leases, shards };
  };
  const close = async () => {
    await solver.close();
    clients.sqs.destroy();
    clients.dynamo.destroy();
  };
  return { clients, build, close };
}

export type Fleet = ReturnType<typeof parkedFleet>;
export type Built = Awaited<ReturnType<Fleet['build']>>;

/**
 * Send `tasks` reCAPTCHA tasks and park each through the consumer's handler, as the mapping would
 * deliver them (`delivery`: the batch, the concurrency, the handler, the first task's number).
 */
export async function parkAll(
  fleet: Fleet,
  built: Built,
  tasks: number,
  delivery: { batchSize?: number; maxConcurrency?: number; handler?: Built['handler']; from?: number } = {},
): Promise<void> {
  const { sqs } = fleet.clients;
  const from = delivery.from ?? 0;
  const queueUrl = built.resources.queueUrls.normal;
  for (let sent = 0; sent < tasks; sent += 10) {
    const entries = Array.from({ length: Math.min(10, tasks - sent) }, (_, i) => ({
      Id: String(i),
      MessageBody: JSON.stringify({
        id: `cpu-${from + sent + i}`,
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
    handler: delivery.handler ?? built.handler,
    batchSize: delivery.batchSize ?? 10,
    maxConcurrency: delivery.maxConcurrency ?? 4,
    functionTimeoutMs: 60_000,
    waitTimeSeconds: 1,
    enabled: true,
  });
  await poller.start();
  const started = Date.now();
  while (poller.stats().received < tasks && Date.now() - started < 120_000) await sleep(100);
  await poller.stop();
}

if (process.argv[2] === '--host' && process.argv[1] === fileURLToPath(import.meta.url))
  await host(Number(process.argv[3]));
