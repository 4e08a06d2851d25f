/**
 * Two fleets on one pair of emulators (issue 10, item 4), wired from the environment exactly as
 * the Lambdas are: the consumer's EMF and the governor's GetMetricData requests carry the fleet's
 * namespace, so neither fleet reads the other's signals. CloudWatch and the Lambda control plane
 * have no emulator here: they are mocked and the requests asserted.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Logger } from '@aws-lambda-powertools/logger';
import type { CloudWatchClient, MetricDataQuery } from '@aws-sdk/client-cloudwatch';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import type { EmfDocument } from '../../functions/adapters/metrics.js';
import { ENV, parseEnvironment } from '../../functions/core/environment.js';
import { createConsumerFromEnvironment } from '../../functions/consumer/wiring.js';
import { createGovernorFromEnvironment } from '../../functions/governor/wiring.js';
import {
  deliver,
  sendMessage,
  startEmulatorFixture,
  type EmulatorFixture,
  type TestFleet,
} from '../helpers/fleet-fixture.js';
import { imageTask, ScriptedSolver, TEST_SOLVER_KEY } from '../helpers/factories.js';

let fixture: EmulatorFixture;
let prod: TestFleet;
let staging: TestFleet;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  prod = await fixture.createFleet({ prefix: 'iso-prod' });
  staging = await fixture.createFleet({ prefix: 'iso-staging' });
});
afterAll(async () => {
  await fixture?.stop();
});

/** The variables the stack gives a fleet's functions. */
function environmentOf(fleet: TestFleet) {
  return parseEnvironment({
    [ENV.config]: JSON.stringify({ prefix: fleet.settings.prefix, planThreads: 10 }),
    [ENV.normalQueueUrl]: fleet.resources.queueUrls.normal,
    [ENV.highQueueUrl]: fleet.resources.queueUrls.high,
    [ENV.dlqUrl]: fleet.resources.queueUrls.dlq,
    [ENV.resultsTable]: fleet.resources.tables.results,
    [ENV.solverKey]: TEST_SOLVER_KEY,
    [ENV.consumerFunctionName]: `${fleet.settings.prefix}-consumer`,
    [ENV.mappingIds]: JSON.stringify({ normal: 'uuid-normal', high: 'uuid-high' }),
  });
}

/** One consumer delivery of one task; the EMF documents it wrote. */
async function consumerEmf(fleet: TestFleet): Promise<EmfDocument[]> {
  const documents: EmfDocument[] = [];
  const handler = await createConsumerFromEnvironment({
    environment: environmentOf(fleet),
    clients: fleet.clients,
    solver: new ScriptedSolver(),
    metricsSink: (document) => documents.push(document),
    logger: new Logger({ serviceName: 'consumer', logLevel: 'SILENT' }),
  });
  await sendMessage(fleet.clients, fleet.resources.queueUrls.normal, JSON.stringify(imageTask()));
  await deliver(fleet, handler);
  return documents;
}

/** One governor tick with mocked CloudWatch and Lambda clients; the GetMetricData queries it sent. */
async function governorQueries(fleet: TestFleet): Promise<MetricDataQuery[]> {
  const queries: MetricDataQuery[] = [];
  const cloudwatch = {
    send: vi.fn(async (command: { input: { MetricDataQueries?: MetricDataQuery[] } }) => {
      queries.push(...(command.input.MetricDataQueries ?? []));
      return { MetricDataResults: [] };
    }),
  } as unknown as CloudWatchClient;
  const lambda = {
    send: vi.fn(async () => ({ State: 'Enabled', ScalingConfig: { MaximumConcurrency: 2 } })),
  } as unknown as LambdaClient;
  const governor = await createGovernorFromEnvironment({
    environment: environmentOf(fleet),
    clients: fleet.clients,
    cloudwatch,
    lambda,
    solver: { getBalance: async () => 10 },
    dryRun: true,
  });
  await governor.loop.tick();
  return queries;
}

const namespacesOf = (documents: EmfDocument[]) =>
  new Set(documents.flatMap((d) => d._aws.CloudWatchMetrics.map((m) => m.Namespace)));

describe('two fleets in one account and region', () => {
  it('the consumer’s EMF carries its own fleet’s namespace', async () => {
    // Act
    const [prodDocuments, stagingDocuments] = [await consumerEmf(prod), await consumerEmf(staging)];
    // Assess
    expect(prodDocuments.length).toBeGreaterThan(0);
    expect(namespacesOf(prodDocuments)).toEqual(new Set(['CaptchaFleet/iso-prod']));
    expect(namespacesOf(stagingDocuments)).toEqual(new Set(['CaptchaFleet/iso-staging']));
  });

  it('the governor’s GetMetricData queries read its own fleet’s metrics only', async () => {
    // Act
    const queries = await governorQueries(staging);
    // Assess
    const metrics = queries.map((q) => q.MetricStat?.Metric);
    const consumerMetrics = metrics.filter((m) => m?.Namespace !== 'AWS/SQS');
    expect(consumerMetrics.length).toBeGreaterThan(5);
    for (const metric of consumerMetrics) expect(metric?.Namespace).toBe('CaptchaFleet/iso-staging');
    // AWS/SQS metrics are named by queue: the staging lanes only.
    const queues = metrics
      .filter((m) => m?.Namespace === 'AWS/SQS')
      .map((m) => m?.Dimensions?.find((d) => d.Name === 'QueueName')?.Value);
    expect(new Set(queues)).toEqual(new Set(['iso-staging-tasks', 'iso-staging-tasks-high']));
  });
});
