/**
 * The Lambda entry itself (`functions/consumer/handler.ts`), configured only through the
 * environment the stack sets, against moto_server (SQS, DynamoDB, Secrets Manager on one
 * endpoint) and the solver simulator over HTTP. moto_server is optional: skipped when absent.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { baseClientConfig, createAwsClients } from '../../functions/adapters/aws-clients.js';
import { ENV } from '../../functions/core/environment.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { ensureFleetResources } from '../../local/resources.js';
import { createSolverSimulator, type SolverSimulator } from '../../local/solver-sim/index.js';
import { deliver, sendMessage, type TestFleet } from '../helpers/fleet-fixture.js';
import { imageTask, TEST_SOLVER_KEY } from '../helpers/factories.js';
import { HAS_MOTO, startMotoServer, type MotoServer } from '../helpers/moto.js';

describe.skipIf(!HAS_MOTO)('consumer Lambda entry (moto_server)', () => {
  let moto: MotoServer | undefined;
  let simulator: SolverSimulator;
  let fleet: TestFleet;
  const saved = { ...process.env };

  beforeAll(async () => {
    moto = await startMotoServer();
    const endpoint = moto.endpoint;
    simulator = createSolverSimulator({ seed: 3, medianMs: 0, validKeys: [TEST_SOLVER_KEY] });
    const { url } = await simulator.listen();
    const config = { prefix: 'moto-consumer', solverBaseUrl: url };
    const settings = resolveSettings(config);
    const clients = createAwsClients({ endpoint, region: 'us-east-1' });
    const resources = await ensureFleetResources(clients, settings);
    fleet = { settings, resources, clients };
    const secrets = new SecretsManagerClient(baseClientConfig(endpoint, 'us-east-1'));
    const secret = await secrets.send(
      new CreateSecretCommand({
        Name: 'moto-consumer/solver-key',
        SecretString: JSON.stringify({ key: TEST_SOLVER_KEY }),
      }),
    );
    Object.assign(process.env, {
      [ENV.config]: JSON.stringify(config),
      [ENV.normalQueueUrl]: resources.queueUrls.normal,
      [ENV.highQueueUrl]: resources.queueUrls.high,
      [ENV.dlqUrl]: resources.queueUrls.dlq,
      [ENV.resultsTable]: resources.tables.results,
      [ENV.solverKeySecretArn]: secret.ARN,
      [ENV.endpoint]: endpoint,
      AWS_REGION: 'us-east-1',
    });
  }, 60_000);

  afterAll(async () => {
    process.env = saved;
    await simulator?.close();
    await moto?.stop();
  });

  it('solves a task through the real solver client with the key from Secrets Manager, and never prints the key', async () => {
    const written: string[] = [];
    const capture = ((chunk: string | Uint8Array) => {
      written.push(String(chunk));
      return true;
    }) as typeof process.stdout.write;
    vi.resetModules();
    const { handler } = (await import('../../functions/consumer/handler.js')) as {
      handler: (e: SQSEvent, c: Context) => Promise<SQSBatchResponse>;
    };
    const task = imageTask();
    await sendMessage(fleet.clients, fleet.resources.queueUrls.normal, JSON.stringify(task));

    const out = vi.spyOn(process.stdout, 'write').mockImplementation(capture);
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(capture);
    let delivery: Awaited<ReturnType<typeof deliver>> | undefined;
    try {
      delivery = await deliver(fleet, handler);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }

    expect(delivery.response).toEqual({ batchItemFailures: [] });
    const record = await fleet.clients.documents.send(
      new GetCommand({ TableName: fleet.resources.tables.results, Key: { taskId: task.id } }),
    );
    expect(record.Item, JSON.stringify({ ...record.Item, answer: undefined })).toMatchObject({ status: 'solved' });
    expect(String(record.Item?.answer ?? '').length).toBeGreaterThan(0);
    expect(simulator.stats()).toMatchObject({ accepted: 1 });
    const text = written.join('');
    expect(text).toContain('"Solved"'); // EMF on stdout, as CloudWatch reads it in Lambda
    expect(text).not.toContain(TEST_SOLVER_KEY);
    expect(text).not.toContain(String(record.Item?.answer));
  }, 60_000);
});
