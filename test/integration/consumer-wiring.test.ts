import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Logger } from '@aws-lambda-powertools/logger';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { EmfDocument } from '../../functions/adapters/metrics.js';
import { ENV, parseEnvironment } from '../../functions/core/environment.js';
import { METRICS } from '../../functions/core/metric-names.js';
import { createConsumerFromEnvironment } from '../../functions/consumer/wiring.js';
import { deliver, receive, sendMessage, startEmulatorFixture, type EmulatorFixture } from '../helpers/fleet-fixture.js';
import { imageTask, ScriptedSolver, TEST_SOLVER_KEY } from '../helpers/factories.js';

let fixture: EmulatorFixture;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});

describe('createConsumerFromEnvironment', () => {
  it('wires the handler from the environment the stack sets: table, queues, DLQ, metrics namespace', async () => {
    // Prepare
    const fleet = await fixture.createFleet();
    const environment = parseEnvironment({
      [ENV.config]: JSON.stringify({ prefix: fleet.settings.prefix }),
      [ENV.normalQueueUrl]: fleet.resources.queueUrls.normal,
      [ENV.highQueueUrl]: fleet.resources.queueUrls.high,
      [ENV.dlqUrl]: fleet.resources.queueUrls.dlq,
      [ENV.resultsTable]: fleet.resources.tables.results,
      [ENV.solverKey]: TEST_SOLVER_KEY,
    });
    const documents: EmfDocument[] = [];
    const solver = new ScriptedSolver();
    const handler = await createConsumerFromEnvironment({
      environment,
      clients: fleet.clients,
      solver,
      metricsSink: (document) => documents.push(document),
      logger: new Logger({ serviceName: 'consumer', logLevel: 'SILENT' }),
    });
    const task = imageTask();
    await sendMessage(fleet.clients, fleet.resources.queueUrls.high, JSON.stringify(task));
    await sendMessage(fleet.clients, fleet.resources.queueUrls.normal, '{"id": "wired-bad"');

    // Act
    const high = await deliver(fleet, handler, { queue: 'high' });
    const normal = await deliver(fleet, handler);

    // Assess
    expect(high.response).toEqual({ batchItemFailures: [] });
    expect(normal.response).toEqual({ batchItemFailures: [] });
    expect(solver.callsOf(task.id as string)).toHaveLength(1);
    const record = await fleet.clients.documents.send(
      new GetCommand({ TableName: fleet.resources.tables.results, Key: { taskId: task.id } }),
    );
    expect(record.Item).toMatchObject({ status: 'solved' });
    const dead = await receive(fleet.clients, fleet.resources.queueUrls.dlq);
    expect(dead.map((m) => m.MessageAttributes?.reason?.StringValue)).toEqual(['MALFORMED_JSON']);
    expect(documents.every((d) => d._aws.CloudWatchMetrics[0]?.Namespace === fleet.settings.metricsNamespace)).toBe(
      true,
    );
    expect(documents.some((d) => METRICS.solved in d)).toBe(true);
  });
});
