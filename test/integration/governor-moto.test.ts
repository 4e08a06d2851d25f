/**
 * The Lambda actuator and the CloudWatch reader against moto_server, when it is on PATH
 * (it is not on users' machines: then these tests are skipped). moto does not compute
 * percentiles, so the p95 query is covered by the request-shape test in test/unit.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CloudWatchClient, PutMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import {
  CreateEventSourceMappingCommand,
  CreateFunctionCommand,
  DeleteFunctionConcurrencyCommand,
  GetEventSourceMappingCommand,
  UpdateEventSourceMappingCommand,
  GetFunctionConcurrencyCommand,
  LambdaClient,
} from '@aws-sdk/client-lambda';
import {
  CreateQueueCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
} from '@aws-sdk/client-sqs';
import { baseClientConfig, createAwsClients } from '../../functions/adapters/aws-clients.js';
import { threadLeaseMs } from '../../functions/adapters/thread-ledger.js';
import { OVERFLOW_LEDGER_ID, THREAD_LEDGER_ID } from '../../functions/core/deployment.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { createCloudWatchSignals } from '../../functions/adapters/cloudwatch-signals.js';
import { createLambdaActuator } from '../../functions/adapters/lambda-actuator.js';
import { METRICS } from '../../functions/core/metric-names.js';
import { parseEnvironment } from '../../functions/core/environment.js';
import { createGovernorFromEnvironment } from '../../functions/governor/wiring.js';
import { formatTick } from '../../bin/commands/governor.js';
import { createSolverSimulator } from '../../local/solver-sim/index.js';
import { createMotoConsumer, HAS_MOTO, startMotoServer, type MotoServer } from '../helpers/moto.js';

/** moto enforces the unreserved floor of 100 only under a quota; 112 leaves room to reserve 12. */
const QUOTA = 112;

describe.skipIf(!HAS_MOTO)('governor adapters on moto_server', () => {
  let moto: MotoServer | undefined;
  let endpoint: string;
  let lambda: LambdaClient;
  let sqs: SQSClient;
  let cloudwatch: CloudWatchClient;
  const ids: { normal: string; high: string } = { normal: '', high: '' };
  const queueUrls: { normal: string; high: string } = { normal: '', high: '' };

  beforeAll(async () => {
    moto = await startMotoServer({ env: { MOTO_LAMBDA_CONCURRENCY_QUOTA: String(QUOTA) } });
    endpoint = moto.endpoint;
    const config = baseClientConfig(endpoint, 'us-east-1');
    lambda = new LambdaClient(config);
    sqs = new SQSClient(config);
    cloudwatch = new CloudWatchClient(config);

    const consumer = await createMotoConsumer(endpoint);
    Object.assign(ids, consumer.mappingIds);
    Object.assign(queueUrls, consumer.queueUrls);
  }, 60_000);

  afterAll(async () => {
    lambda?.destroy();
    sqs?.destroy();
    cloudwatch?.destroy();
    await moto?.stop();
  });

  it('moves MaximumConcurrency and Enabled per lane and keeps the reservation at their sum', async () => {
    const warnings: string[] = [];
    const actuator = createLambdaActuator({
      lambda,
      mappingIds: ids,
      consumerFunctionName: 'consumer',
      warn: (m) => warnings.push(m),
    });
    expect(await actuator.read()).toEqual({
      normal: { ceiling: 2, enabled: true },
      high: { ceiling: 2, enabled: false },
    });

    const result = await actuator.apply({ ceilings: { normal: 8, high: 3 }, enabled: { normal: true, high: true } });
    const normal = await lambda.send(new GetEventSourceMappingCommand({ UUID: ids.normal }));
    const high = await lambda.send(new GetEventSourceMappingCommand({ UUID: ids.high }));
    expect(normal.ScalingConfig?.MaximumConcurrency).toBe(8);
    expect(high.ScalingConfig?.MaximumConcurrency).toBe(3);
    expect(high.State).toBe('Enabled');
    expect(
      (await lambda.send(new GetFunctionConcurrencyCommand({ FunctionName: 'consumer' }))).ReservedConcurrentExecutions,
    ).toBe(11);
    expect(result.changes).toEqual([
      'reserved concurrency none → 11',
      'normal ceiling 2 → 8',
      'high ceiling 2 → 3',
      'high enabled',
    ]);

    // Pause: both mappings disabled, the reservation stays.
    await actuator.apply({ ceilings: { normal: 8, high: 3 }, enabled: { normal: false, high: false } });
    expect((await lambda.send(new GetEventSourceMappingCommand({ UUID: ids.normal }))).State).toBe('Disabled');
    expect(
      (await lambda.send(new GetFunctionConcurrencyCommand({ FunctionName: 'consumer' }))).ReservedConcurrentExecutions,
    ).toBe(11);
    expect(warnings).toEqual([]);
  });

  it('falls back to the mappings alone when the unreserved floor forbids the reservation', async () => {
    const warnings: string[] = [];
    const actuator = createLambdaActuator({
      lambda,
      mappingIds: ids,
      consumerFunctionName: 'consumer',
      warn: (m) => warnings.push(m),
    });
    // 30 + 2 reserved would leave 112 − 32 = 80 unreserved, under moto's floor of 100.
    await actuator.apply({ ceilings: { normal: 30, high: 2 }, enabled: { normal: true, high: false } });
    await actuator.apply({ ceilings: { normal: 40, high: 2 }, enabled: { normal: true, high: false } });
    expect(warnings).toHaveLength(1);
    expect(actuator.reservationSupported).toBe(false);
    expect(
      (await lambda.send(new GetEventSourceMappingCommand({ UUID: ids.normal }))).ScalingConfig?.MaximumConcurrency,
    ).toBe(40);
  });

  it('reads the consumer metrics with GetMetricData (sums and averages)', async () => {
    const now = Date.now();
    const at = new Date(Math.floor(now / 60_000) * 60_000 - 90_000); // inside the last full minutes
    // moto does not filter GetMetricData by namespace: a service of its own keeps these out of the other tests.
    const dims = [{ Name: 'service', Value: 'consumer-metrics-test' }];
    await cloudwatch.send(
      new PutMetricDataCommand({
        Namespace: 'CaptchaFleetTest',
        MetricData: [
          { MetricName: METRICS.submissions, Dimensions: dims, Timestamp: at, Value: 20, Unit: 'Count' },
          { MetricName: METRICS.resultRequests, Dimensions: dims, Timestamp: at, Value: 140, Unit: 'Count' },
          { MetricName: METRICS.solved, Dimensions: dims, Timestamp: at, Value: 18, Unit: 'Count' },
          { MetricName: METRICS.overCapAnswers, Dimensions: dims, Timestamp: at, Value: 2, Unit: 'Count' },
          { MetricName: METRICS.solveDuration, Dimensions: dims, Timestamp: at, Value: 4000, Unit: 'Milliseconds' },
          { MetricName: METRICS.solveDuration, Dimensions: dims, Timestamp: at, Value: 6000, Unit: 'Milliseconds' },
          // Another service's metric of the same name is not ours.
          {
            MetricName: METRICS.solved,
            Dimensions: [{ Name: 'service', Value: 'governor' }],
            Timestamp: at,
            Value: 500,
            Unit: 'Count',
          },
        ],
      }),
    );
    const cw = createCloudWatchSignals({
      cloudwatch,
      namespace: 'CaptchaFleetTest',
      service: 'consumer-metrics-test',
      clock: () => now,
    });
    const window = await cw.read();
    expect(window).toBeDefined();
    expect(window).toMatchObject({
      submissions: 20,
      resultRequests: 140,
      solved: 18,
      overCapAnswers: 2,
      transientErrors: 0,
      accountErrors: 0,
    });
    expect(window?.meanSolveMs).toBe(5000);
  });

  it('runs one tick from the same environment the Lambda gets (the CLI path), dry run first', async () => {
    // Prepare: the solver simulator answers getbalance; queues, mappings and function on moto; no governor table (memory state).
    const solverKey = 'fedcba9876543210'.repeat(2);
    const simulator = createSolverSimulator({ validKeys: [solverKey], balance: 0.5, planThreads: 10 });
    const { url } = await simulator.listen(0, '127.0.0.1');
    try {
      const env = {
        AWS_ENDPOINT_URL: endpoint,
        CAPTCHA_FLEET_CONFIG: JSON.stringify({ planThreads: 10, solverBaseUrl: url, tickMs: 1000 }),
        TASKS_QUEUE_URL: queueUrls.normal,
        HIGH_QUEUE_URL: queueUrls.high,
        DLQ_URL: queueUrls.normal,
        RESULTS_TABLE: 'results',
        SOLVER_KEY: solverKey,
        CONSUMER_FUNCTION_NAME: 'consumer',
        EVENT_SOURCE_MAPPING_IDS: JSON.stringify(ids),
      };
      const before = (await lambda.send(new GetEventSourceMappingCommand({ UUID: ids.normal }))).ScalingConfig
        ?.MaximumConcurrency;
      // Act: dry run
      const dry = await createGovernorFromEnvironment({ environment: parseEnvironment(env), dryRun: true });
      const record = await dry.loop.tick();
      // Assess: balance $0.50 is under the halt level $1: no increase, and nothing was applied.
      expect(record.signals.balance).toBe(0.5);
      expect(record.decision.reason.code).toBe('HALT_LOW_BALANCE');
      expect(formatTick(record)).toMatch(/dry run: nothing applied[\s\S]*HALT_LOW_BALANCE[\s\S]*balance \$0\.50/);
      expect(
        (await lambda.send(new GetEventSourceMappingCommand({ UUID: ids.normal }))).ScalingConfig?.MaximumConcurrency,
      ).toBe(before);
      // Topped up: applied for real, the mapping goes to the free threads.
      simulator.update({ balance: 25 });
      const live = await createGovernorFromEnvironment({ environment: parseEnvironment(env) });
      const applied = await live.loop.tick();
      expect(applied.decision.reason.code).toBe('IDLE');
      expect(
        (await lambda.send(new GetEventSourceMappingCommand({ UUID: ids.normal }))).ScalingConfig?.MaximumConcurrency,
      ).toBe(10);
      expect(formatTick(applied)).toContain('normal ceiling');
    } finally {
      await simulator.close();
    }
  });

  it('pauses the Lambda mappings on a solver outage (PAUSE_OUTAGE) when the balance read gets no answer', async () => {
    // Prepare: the simulator answers HTTP 503 to everything; the Lambda's wiring on moto.
    const solverKey = '0123456789abcdef'.repeat(2);
    const simulator = createSolverSimulator({
      validKeys: [solverKey],
      balance: 25,
      planThreads: 10,
      outages: [{ startMs: 0, durationMs: 3_600_000 }],
    });
    const { url } = await simulator.listen(0, '127.0.0.1');
    let now = Date.now();
    try {
      const env = {
        AWS_ENDPOINT_URL: endpoint,
        CAPTCHA_FLEET_CONFIG: JSON.stringify({ planThreads: 10, solverBaseUrl: url, tickMs: 1000 }),
        TASKS_QUEUE_URL: queueUrls.normal,
        HIGH_QUEUE_URL: queueUrls.high,
        DLQ_URL: queueUrls.normal,
        RESULTS_TABLE: 'results',
        SOLVER_KEY: solverKey,
        CONSUMER_FUNCTION_NAME: 'consumer',
        EVENT_SOURCE_MAPPING_IDS: JSON.stringify(ids),
      };
      const governor = await createGovernorFromEnvironment({ environment: parseEnvironment(env), clock: () => now });
      await lambda.send(new UpdateEventSourceMappingCommand({ UUID: ids.normal, Enabled: true }));
      expect((await lambda.send(new GetEventSourceMappingCommand({ UUID: ids.normal }))).State).toBe('Enabled');
      // Act: outageTicks ticks, a tick apart (the balance cache lives one tick).
      const codes: string[] = [];
      for (let tick = 0; tick < governor.config.outageTicks; tick++) {
        const record = await governor.loop.tick();
        codes.push(record.decision.reason.code);
        now += 1_000;
      }
      // Assess: a fresh governor that never read its balance takes the first read with no answer
      // for an outage (a running one holds outageTicks − 1 ticks first: governor-outage.test.ts).
      expect(codes.every((code) => code === 'PAUSE_OUTAGE')).toBe(true);
      expect((await lambda.send(new GetEventSourceMappingCommand({ UUID: ids.normal }))).State).toBe('Disabled');
    } finally {
      await simulator.close();
    }
  }, 60_000);

  it('opens the overflow mapping and reserves the overflow function when the plan is saturated', async () => {
    // Prepare: a queue of its own with 30 tasks, 6 received (4 by the plan's lane, 2 held by the
    // overflow lane's ledger); the overflow consumer and its mapping created disabled at 5; the
    // governor table on moto; the plan's consumer solving in 20 s in CloudWatch.
    const clients = createAwsClients({ endpoint, region: 'us-east-1' });
    await lambda.send(new DeleteFunctionConcurrencyCommand({ FunctionName: 'consumer' }));
    const queueUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'tasks-overflow-test' }))).QueueUrl as string;
    const queueArn = (
      await sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }))
    ).Attributes?.QueueArn;
    for (let i = 0; i < 30; i++)
      await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: `{"i":${i}}` }));
    await sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 6, VisibilityTimeout: 600 }));
    const emptyZip = Buffer.from([0x50, 0x4b, 0x05, 0x06, ...new Array(18).fill(0)]);
    await lambda.send(
      new CreateFunctionCommand({
        FunctionName: 'consumer-overflow',
        Runtime: 'nodejs20.x',
        Role: 'arn:aws:iam::123456789012:role/consumer-role',
        Handler: 'index.handler',
        Code: { ZipFile: emptyZip },
      }),
    );
    const overflowMapping = (
      await lambda.send(
        new CreateEventSourceMappingCommand({
          FunctionName: 'consumer-overflow',
          EventSourceArn: queueArn,
          BatchSize: 1,
          ScalingConfig: { MaximumConcurrency: 5 },
          Enabled: false,
        }),
      )
    ).UUID as string;
    await clients.dynamo.send(
      new CreateTableCommand({
        TableName: 'governor-overflow-test',
        AttributeDefinitions: [{ AttributeName: 'id', AttributeType: 'S' }],
        KeySchema: [{ AttributeName: 'id', KeyType: 'HASH' }],
        BillingMode: 'PAY_PER_REQUEST',
      }),
    );
    let now = Date.now();
    const overflowBlock = {
      baseUrl: 'https://overflow.example',
      capUsdPerHour: 2,
      capUsdPerDay: 10,
      priceHintUsd: 0.003,
    };
    const config = {
      planThreads: 4,
      tickMs: 10_000,
      metricsNamespace: 'CaptchaFleetOverflowTest',
      overflow: overflowBlock,
    };
    const bucket = Math.floor(now / threadLeaseMs(resolveSettings(config)));
    await clients.documents.send(
      new PutCommand({
        TableName: 'governor-overflow-test',
        Item: { id: OVERFLOW_LEDGER_ID, [`h${bucket}`]: 2, acceptances: 2 },
      }),
    );
    // The plan's 4 threads held by the plan's lane (the thread ledger says what the plan holds).
    await clients.documents.send(
      new PutCommand({
        TableName: 'governor-overflow-test',
        Item: { id: THREAD_LEDGER_ID, [`h${bucket}`]: 4, acceptances: 4 },
      }),
    );
    const at = new Date(Math.floor(now / 60_000) * 60_000 - 90_000);
    const dims = [{ Name: 'service', Value: 'consumer' }];
    await cloudwatch.send(
      new PutMetricDataCommand({
        Namespace: 'CaptchaFleetOverflowTest',
        MetricData: [
          { MetricName: METRICS.submissions, Dimensions: dims, Timestamp: at, Value: 12, Unit: 'Count' },
          { MetricName: METRICS.solved, Dimensions: dims, Timestamp: at, Value: 12, Unit: 'Count' },
          { MetricName: METRICS.solveDuration, Dimensions: dims, Timestamp: at, Value: 20_000, Unit: 'Milliseconds' },
        ],
      }),
    );
    const env = {
      AWS_ENDPOINT_URL: endpoint,
      CAPTCHA_FLEET_CONFIG: JSON.stringify(config),
      TASKS_QUEUE_URL: queueUrl,
      DLQ_URL: queueUrl,
      RESULTS_TABLE: 'results',
      GOVERNOR_TABLE: 'governor-overflow-test',
      SOLVER_KEY: 'primary-key-0123456789abcdef',
      OVERFLOW_KEY: 'overflow-key-0123456789abcdef',
      CONSUMER_FUNCTION_NAME: 'consumer',
      EVENT_SOURCE_MAPPING_IDS: JSON.stringify({ normal: ids.normal }),
      OVERFLOW_MAPPING_ID: overflowMapping,
      OVERFLOW_FUNCTION_NAME: 'consumer-overflow',
    };
    const governor = await createGovernorFromEnvironment({
      environment: parseEnvironment(env),
      solver: { getBalance: async () => 50 },
      overflowSolver: { getBalance: async () => 20 },
      clock: () => now,
    });
    try {
      // Act: two ticks, so the arrivals are measured from successive queue reads whatever moto's
      // CloudWatch answers for the AWS/SQS sent count.
      const first = await governor.loop.tick();
      now += 10_000;
      const second = await governor.loop.tick();

      // Assess
      expect(second.signals.lanes.normal.inFlight).toBe(4);
      expect(second.signals.meanSolveMs).toBe(20_000);
      expect(second.overflow).toMatchObject({ enabled: true, ceiling: 2, reason: { code: 'OVERFLOW_PROBE' } });
      const mapping = await lambda.send(new GetEventSourceMappingCommand({ UUID: overflowMapping }));
      expect(mapping.State).toBe('Enabled');
      expect(mapping.ScalingConfig?.MaximumConcurrency).toBe(2);
      expect(
        (await lambda.send(new GetFunctionConcurrencyCommand({ FunctionName: 'consumer-overflow' })))
          .ReservedConcurrentExecutions,
      ).toBe(2);
      expect([...first.changes, ...second.changes]).toEqual(
        expect.arrayContaining([
          'overflow reserved concurrency none → 2',
          'overflow ceiling 5 → 2',
          'overflow enabled',
        ]),
      );
    } finally {
      clients.sqs.destroy();
      clients.dynamo.destroy();
    }
  }, 60_000);
});
