/**
 * The custom metrics the consumer emits in an ordinary hour, counted from its EMF against what the
 * bill charges for (functions/core/cost/fleet-bill.ts: `consumerMetrics`, PARKED_CONSUMER_METRICS).
 * CloudWatch bills each metric stream (namespace, name, dimension set) a month, prorated by the
 * hour; an ordinary hour here is a mix of methods solved without a refusal or an error, on the
 * emulators, through the consumer's handler (and, parked, the governor's watch recording the answers
 * with the consumer's metrics, as the stack wires it).
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalEventStream } from '../../functions/adapters/completion-events.js';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { SqsTaskQueue } from '../../functions/adapters/task-queue.js';
import { createDynamoThreadLeases, leaseLengthMs, PRIMARY_LEASE_LANE } from '../../functions/adapters/thread-leases.js';
import { createDynamoThreadLedger, threadLeaseMs } from '../../functions/adapters/thread-ledger.js';
import { createConsumerHandler } from '../../functions/consumer/create-handler.js';
import { DEFAULT_COST_ASSUMPTIONS, LOG_BYTES, PARKED_CONSUMER_METRICS } from '../../functions/core/cost/fleet-bill.js';
import { METRICS } from '../../functions/core/metric-names.js';
import { createRedactor } from '../../functions/core/redaction.js';
import { shardKeys } from '../../functions/core/thread-leases.js';
import { createRecordingWatch } from '../../functions/governor/recording-watch.js';
import { FAST_TIMING, simulatedSolvers } from '../helpers/simulated-solver.js';
import { captureMetrics, imageTask, recaptchaTask, TEST_SOLVER_KEY } from '../helpers/factories.js';
import { deliver, type EmulatorFixture, sendMessage, sleep, startEmulatorFixture } from '../helpers/fleet-fixture.js';

const FAST = FAST_TIMING;
const solverOn = simulatedSolvers();

let fixture: EmulatorFixture;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});

interface EmfDocument {
  _aws: { CloudWatchMetrics: Array<{ Namespace: string; Dimensions: string[][]; Metrics: Array<{ Name: string }> }> };
  [key: string]: unknown;
}

/** The metric streams (namespace, name, dimension names and values) the documents publish. */
function streamsOf(documents: readonly unknown[]): string[] {
  const streams = new Set<string>();
  for (const document of documents as EmfDocument[])
    for (const directive of document._aws.CloudWatchMetrics)
      for (const dimensions of directive.Dimensions)
        for (const metric of directive.Metrics)
          streams.add(
            `${directive.Namespace}/${metric.Name}{${dimensions.map((d) => `${d}=${String(document[d])}`).join(',')}}`,
          );
  return [...streams].sort();
}

/** An ordinary mix: a reCAPTCHA, an image and a Turnstile task. */
const MIX = () => [
  recaptchaTask(),
  imageTask(),
  recaptchaTask({ method: 'turnstile', params: { sitekey: '0x4AAAAAAAB-test', pageurl: 'https://example.com/' } }),
];

async function fleetOn(solveMode: 'park' | 'wait') {
  const fleet = await fixture.createFleet({ planThreads: 10, solveDeadlineSeconds: 30, solveMode });
  const { sim, solver } = await solverOn({ seed: 17, medianMs: 100 });
  const { settings, resources, clients } = fleet;
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
  const captured = captureMetrics(settings.metricsNamespace);
  // The watch's recorder has metrics of its own (service `consumer`), as the governor's wiring builds them.
  const recorded = captureMetrics(settings.metricsNamespace);
  const threadLedger = createDynamoThreadLedger({
    documents: clients.documents,
    tableName: resources.tables.governor,
    leaseMs: threadLeaseMs(settings),
  });
  const leases = createDynamoThreadLeases({ documents: clients.documents, tableName: resources.tables.leases });
  const shards = shardKeys(PRIMARY_LEASE_LANE, settings.effectiveCap);
  const handler = createConsumerHandler({
    solver,
    repository,
    queue,
    metrics: captured.metrics,
    logger: new Logger({ serviceName: 'consumer', logLevel: 'SILENT' }),
    settings,
    timing: FAST,
    threadLedger,
    ...(solveMode === 'park'
      ? { leases: { leases, shards, planCap: settings.effectiveCap, leaseMs: leaseLengthMs(settings) } }
      : {}),
  });
  // The governor's watch records with the consumer's metrics (service `consumer`), published once
  // a batch, as the stack wires it (no batch falls due during a test: published at the end).
  const { watch } = createRecordingWatch({
    leases,
    shards,
    results: repository,
    solver,
    queue,
    events: createLocalEventStream({ includeAnswer: false }),
    metrics: recorded.metrics,
    redactor: createRedactor([TEST_SOLVER_KEY]),
    batchMs: 600_000,
    cadence: { settleMs: 0 },
  });
  const run = async () => {
    const tasks = MIX();
    for (const task of tasks) await sendMessage(clients, resources.queueUrls.normal, JSON.stringify(task));
    for (const _ of tasks) await deliver(fleet, handler, { max: 1 });
    for (let round = 0; round < 80 && solveMode === 'park' && watch.stats.recorded < tasks.length; round++) {
      await watch.round();
      await sleep(25);
    }
    if (solveMode === 'park') await watch.flushSolved();
    const solved = await Promise.all(tasks.map((t) => repository.get(t.id as string, { consistent: true })));
    const bytes = (documents: readonly unknown[]) => documents.map((d) => JSON.stringify(d).length);
    return {
      solved: solved.filter((r) => r?.status === 'solved').length,
      streams: streamsOf([...captured.documents, ...recorded.documents]),
      invocationEmfBytes: bytes(captured.documents),
      watchEmfBytes: bytes(recorded.documents),
    };
  };
  return { run, sim };
}

describe('the consumer’s custom metrics in an ordinary hour', () => {
  it('waiting: as many as the bill charges for', async () => {
    // Prepare
    const fleet = await fleetOn('wait');
    // Act
    const { solved, streams } = await fleet.run();
    // Assess
    expect(solved).toBe(3);
    expect(fleet.sim.stats().submissions).toBe(3);
    expect(streams).toHaveLength(DEFAULT_COST_ASSUMPTIONS.consumerMetrics);
    expect(streams.join(' ')).toContain(`/${METRICS.resultRequests}{service=consumer}`);
  });

  it('publishes EMF documents no larger than the bill’s log bytes assume (an invocation’s, a recorded solve’s)', async () => {
    for (const mode of ['wait', 'park'] as const) {
      // Prepare
      const fleet = await fleetOn(mode);
      // Act
      const { invocationEmfBytes, watchEmfBytes } = await fleet.run();
      // Assess: one document an invocation; parked, one for the watch's batch of three solves,
      // its frame and each solve's values within what the bill counts.
      expect(invocationEmfBytes).toHaveLength(3);
      expect(Math.max(...invocationEmfBytes)).toBeLessThanOrEqual(LOG_BYTES.consumerEmf);
      expect(watchEmfBytes).toHaveLength(mode === 'park' ? 1 : 0);
      if (mode === 'park')
        expect(watchEmfBytes[0]).toBeLessThanOrEqual(LOG_BYTES.watchEmf + 2 * LOG_BYTES.watchEmfPerSolve);
    }
  });

  it('parked: the bill’s count and PARKED_CONSUMER_METRICS more (Parked and its own SQS calls; no result requests; no error stream without an error)', async () => {
    // Prepare
    const fleet = await fleetOn('park');
    // Act
    const { solved, streams } = await fleet.run();
    // Assess
    expect(solved).toBe(3);
    expect(fleet.sim.stats().submissions).toBe(3);
    expect(streams).toHaveLength(DEFAULT_COST_ASSUMPTIONS.consumerMetrics + PARKED_CONSUMER_METRICS);
    const names = streams.join(' ');
    for (const name of [
      METRICS.parked,
      METRICS.sqsRequests,
      METRICS.dynamoRequests,
      METRICS.solved,
      METRICS.solveDuration,
    ])
      expect(names).toContain(`/${name}{service=consumer}`);
    // No call failed: no failure stream (the governor reads none as none failed).
    for (const name of [METRICS.resultRequests, METRICS.sqsErrors, METRICS.dynamoErrors])
      expect(names).not.toContain(`/${name}{`);
  });
});
