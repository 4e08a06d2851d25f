/**
 * A report goes to the provider that solved the task: the report function holds a solver for the
 * plan and one for the overflow provider (two simulators here, each with its own key), and a task
 * the overflow provider solved — or one the primary consumer resumed there — is reported to it
 * alone. Through the report handler as Lambda runs it, on dynalite and fauxqs.
 */
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context, SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAwsClients, type AwsClients } from '../../functions/adapters/aws-clients.js';
import { createSolverClient, type SolverClient } from '../../functions/adapters/solver-client.js';
import type { EmfDocument } from '../../functions/adapters/metrics.js';
import type { TaskResult } from '../../functions/core/results.js';
import { SolverTaskError } from '../../functions/core/solver-protocol.js';
import { resolveSettings } from '../../functions/core/settings.js';
import type { Task } from '../../functions/core/task.js';
import { createReporterFromEnvironment } from '../../functions/reporter/wiring.js';
import { startEmulators, type Emulators } from '../../local/emulators.js';
import { captureLogs } from '../helpers/factories.js';
import { ensureFleetResources, type FleetResources } from '../../local/resources.js';
import { createSolverSimulator, type SolverSimulator } from '../../local/solver-sim/index.js';

const PRIMARY_KEY = 'a'.repeat(32);
const OVERFLOW_KEY = 'b'.repeat(32);

describe('reports reach the provider that solved the task', () => {
  let emulators: Emulators;
  let clients: AwsClients;
  let resources: FleetResources;
  const sims: SolverSimulator[] = [];
  const solvers: SolverClient[] = [];
  const settings = resolveSettings({ prefix: 'report-providers' });

  beforeAll(async () => {
    emulators = await startEmulators();
    clients = createAwsClients({ sqsEndpoint: emulators.sqsEndpoint, dynamoEndpoint: emulators.dynamoEndpoint });
    resources = await ensureFleetResources(clients, settings);
    for (const [seed, key] of [
      [1, PRIMARY_KEY],
      [2, OVERFLOW_KEY],
    ] as const) {
      const sim = createSolverSimulator({
        seed,
        medianMs: 10,
        transientErrorRate: 0,
        unsolvableRate: 0,
        validKeys: [key],
      });
      const { url } = await sim.listen(0, '127.0.0.1');
      sims.push(sim);
      solvers.push(createSolverClient({ baseUrl: url, key, dialect: '2captcha' }));
    }
  }, 30_000);

  afterAll(async () => {
    for (const solver of solvers) await solver.close();
    for (const sim of sims) await sim.close();
    clients?.sqs.destroy();
    clients?.dynamo.destroy();
    await emulators?.stop();
  });

  /** Solve at one simulator for real, and write the solved record the consumer would have. */
  async function solvedAt(index: 0 | 1, taskId: string, holder: Pick<TaskResult, 'provider' | 'solverProvider'>) {
    const task: Task = {
      id: taskId,
      method: 'turnstile',
      params: { sitekey: '0x4AAAAAAAproviders', pageurl: 'https://p.example.com/' },
      priority: 'normal',
      submittedAt: Date.now(),
    };
    const outcome = await (solvers[index] as SolverClient).solve(task, { deadlineAt: Date.now() + 10_000 });
    const record: TaskResult = {
      taskId,
      status: 'solved',
      method: 'turnstile',
      attempts: 1,
      ...holder,
      solverId: outcome.solverId,
      answer: outcome.answer,
      completedAt: Date.now(),
      expiresAt: Math.floor(Date.now() / 1000) + 3600,
    };
    await clients.documents.send(new PutCommand({ TableName: resources.tables.results, Item: record }));
  }

  function event(taskId: string, messageId: string): SQSEvent {
    return {
      Records: [
        {
          messageId,
          receiptHandle: `${messageId}-receipt`,
          body: JSON.stringify({ taskId, verdict: 'bad' }),
          attributes: {
            ApproximateReceiveCount: '1',
            SentTimestamp: String(Date.now()),
            SenderId: 'test',
            ApproximateFirstReceiveTimestamp: String(Date.now()),
          },
          messageAttributes: {},
          md5OfBody: '',
          eventSource: 'aws:sqs',
          eventSourceARN: resources.reportQueueArns.reports,
          awsRegion: clients.region,
        },
      ],
    };
  }

  const context = { getRemainingTimeInMillis: () => 30_000, awsRequestId: 'r1' } as unknown as Context;

  /** The report function's environment on the emulators, the plan's key given as an env var. */
  const environment = () => ({
    settings,
    queueUrls: resources.queueUrls,
    reportQueueUrls: resources.reportQueueUrls,
    tables: resources.tables,
    solverKeySource: { key: PRIMARY_KEY },
    consumerFunctionName: undefined,
    eventBusName: undefined,
    endpoint: undefined,
  });

  it('reports an overflow solve to the overflow provider, a resumed one too, and a plan solve to the plan', async () => {
    // Prepare
    const documents: EmfDocument[] = [];
    const handler = createReporterFromEnvironment({
      environment: environment(),
      clients,
      solvers: { primary: solvers[0] as SolverClient, overflow: solvers[1] as SolverClient },
      metricsSink: (document) => documents.push(document),
      logger: new Logger({ logLevel: 'SILENT' }),
    });
    await solvedAt(1, 'by-overflow', { provider: 'overflow', solverProvider: 'overflow' });
    await solvedAt(1, 'resumed-at-overflow', { provider: 'primary', solverProvider: 'overflow' });
    await solvedAt(0, 'by-plan', { provider: 'primary', solverProvider: 'primary' });

    // Act
    const answers = [
      await handler(event('by-overflow', 'm1'), context),
      await handler(event('resumed-at-overflow', 'm2'), context),
      await handler(event('by-plan', 'm3'), context),
    ];

    // Assess
    expect(answers).toEqual([{ batchItemFailures: [] }, { batchItemFailures: [] }, { batchItemFailures: [] }]);
    expect(sims[1]?.stats()).toMatchObject({ reportBad: 2, reportsRefused: 0 });
    expect(sims[0]?.stats()).toMatchObject({ reportBad: 1, reportsRefused: 0 });
    const refunds = documents.filter((d) => typeof d.Refunds === 'number').map((d) => d.service);
    expect(refunds).toEqual(['reporter', 'reporter', 'reporter']);
  });
  it("redacts the plan's key from a provider's refusal before it is recorded or logged", async () => {
    // Prepare: a provider whose refusal echoes the key it was sent.
    const echo = {
      reportBad: async () => {
        throw new SolverTaskError('ERROR_BAD_REPORT', { message: `report refused for key ${PRIMARY_KEY}` });
      },
      reportGood: async () => undefined,
    } as unknown as SolverClient;
    const logs = captureLogs();
    try {
      const handler = createReporterFromEnvironment({
        environment: environment(),
        clients,
        solvers: { primary: echo },
        logger: logs.logger,
      });
      await solvedAt(0, 'echoed-key', { provider: 'primary', solverProvider: 'primary' });

      // Act
      const answer = await handler(event('echoed-key', 'm9'), context);

      // Assess: before, the reporter's redactor knew no key; the refusal was recorded as it came.
      expect(answer).toEqual({ batchItemFailures: [] });
    } finally {
      logs.restore();
    }
    const record = await clients.documents.send(
      new GetCommand({ TableName: resources.tables.results, Key: { taskId: 'echoed-key' }, ConsistentRead: true }),
    );
    expect(JSON.stringify(record.Item)).toContain('ERROR_BAD_REPORT');
    expect(JSON.stringify(record.Item)).not.toContain(PRIMARY_KEY);
    expect(logs.raw.join('')).toContain('report refused by the provider');
    expect(logs.raw.join('')).not.toContain(PRIMARY_KEY);
  });
});
