/**
 * The governor's AWS wiring with an overflow provider: queues and tables on the emulators
 * (fauxqs, dynalite) through the real SDK, Lambda's control plane and CloudWatch mocked and
 * their requests asserted.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { createDynamoGovernorState } from '../../functions/adapters/governor-state.js';
import { threadLeaseMs } from '../../functions/adapters/thread-ledger.js';
import { OVERFLOW_LEDGER_ID, THREAD_LEDGER_ID } from '../../functions/core/deployment.js';
import { parseEnvironment } from '../../functions/core/environment.js';
import { ConfigError } from '../../functions/core/settings.js';
import { createGovernorFromEnvironment } from '../../functions/governor/wiring.js';
import { formatTick } from '../../bin/commands/governor.js';
import { sendMessage, startEmulatorFixture, type EmulatorFixture, type TestFleet } from '../helpers/fleet-fixture.js';
import { fakeClient } from '../helpers/fake-client.js';

const overflowBlock = {
  baseUrl: 'https://overflow.example',
  capUsdPerHour: 2,
  capUsdPerDay: 10,
  priceHintUsd: 0.003,
  maxConcurrency: 20,
};

let fixture: EmulatorFixture;
let fleet: TestFleet;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  fleet = await fixture.createFleet({ planThreads: 10, tickMs: 10_000, overflow: overflowBlock });
});

afterAll(async () => {
  await fixture?.stop();
});

/** The environment the stack gives the governor Lambda, overflow variables included. */
function environmentOf(overrides: Record<string, string | undefined> = {}) {
  const env: Record<string, string | undefined> = {
    CAPTCHA_FLEET_CONFIG: JSON.stringify({
      prefix: fleet.settings.prefix,
      planThreads: 10,
      tickMs: 10_000,
      overflow: overflowBlock,
    }),
    TASKS_QUEUE_URL: fleet.resources.queueUrls.normal,
    DLQ_URL: fleet.resources.queueUrls.dlq,
    RESULTS_TABLE: fleet.resources.tables.results,
    GOVERNOR_TABLE: fleet.resources.tables.governor,
    SOLVER_KEY: 'primary-key-0123456789abcdef',
    OVERFLOW_KEY: 'overflow-key-0123456789abcdef',
    EVENT_SOURCE_MAPPING_IDS: JSON.stringify({ normal: 'uuid-normal' }),
    CONSUMER_FUNCTION_NAME: 'fleet-consumer',
    OVERFLOW_MAPPING_ID: 'uuid-overflow',
    OVERFLOW_FUNCTION_NAME: 'fleet-consumer-overflow',
    ...overrides,
  };
  return parseEnvironment(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)));
}

/** Lambda's control plane: the primary mapping at the plan, the overflow mapping created disabled at 5. */
function fakeLambda() {
  const mappings: Record<string, { MaximumConcurrency: number; State: string }> = {
    'uuid-normal': { MaximumConcurrency: 10, State: 'Enabled' },
    'uuid-overflow': { MaximumConcurrency: 5, State: 'Disabled' },
  };
  const reserved: Record<string, number> = { 'fleet-consumer': 10 };
  return fakeClient<LambdaClient>((command, input) => {
    if (command === 'GetEventSourceMappingCommand') {
      const m = mappings[input.UUID];
      if (!m) throw Object.assign(new Error('not found'), { name: 'ResourceNotFoundException' });
      return { UUID: input.UUID, ScalingConfig: { MaximumConcurrency: m.MaximumConcurrency }, State: m.State };
    }
    if (command === 'UpdateEventSourceMappingCommand') {
      const m = mappings[input.UUID] as { MaximumConcurrency: number; State: string };
      if (input.ScalingConfig) m.MaximumConcurrency = input.ScalingConfig.MaximumConcurrency;
      if (input.Enabled !== undefined) m.State = input.Enabled ? 'Enabled' : 'Disabled';
      return {};
    }
    if (command === 'GetFunctionConcurrencyCommand') {
      const value = reserved[input.FunctionName];
      return value === undefined ? {} : { ReservedConcurrentExecutions: value };
    }
    if (command === 'PutFunctionConcurrencyCommand') {
      reserved[input.FunctionName] = input.ReservedConcurrentExecutions;
      return {};
    }
    throw new Error(`unexpected ${command}`);
  });
}

/** CloudWatch: the primary consumer solves in 20 s, the overflow consumer has done nothing yet; 2 tasks/s sent. */
function fakeCloudWatch() {
  return fakeClient<CloudWatchClient>((_command, input) => {
    const results = (input.MetricDataQueries as any[]).map((q) => {
      const service = q.MetricStat.Metric.Dimensions?.find((d: { Name: string }) => d.Name === 'service')?.Value;
      const primary = service === 'consumer';
      const values: Record<string, number[]> = primary
        ? { solve_avg: [20_000], solve_n: [10], solve_p95: [30_000], sum_submissions: [10], sum_solved: [10] }
        : { sent_normal: [120, 120] };
      return { Id: q.Id, Values: values[q.Id] ?? [] };
    });
    return { MetricDataResults: results };
  });
}

describe('governor wiring with an overflow provider', () => {
  it('opens the overflow mapping and reserves its function when the plan is saturated', async () => {
    // Prepare: 40 queued, 13 received (10 by the primary's lane, 3 by the overflow lane's ledger).
    for (let i = 0; i < 40; i++) await sendMessage(fixture.clients, fleet.resources.queueUrls.normal, `{"i":${i}}`);
    for (let received = 0; received < 13; ) {
      const out = await fixture.clients.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: fleet.resources.queueUrls.normal,
          MaxNumberOfMessages: Math.min(10, 13 - received),
          VisibilityTimeout: 120,
        }),
      );
      received += out.Messages?.length ?? 0;
    }
    const now = Date.now();
    const bucket = Math.floor(now / threadLeaseMs(fleet.settings));
    await fixture.clients.documents.send(
      new PutCommand({
        TableName: fleet.resources.tables.governor,
        Item: { id: OVERFLOW_LEDGER_ID, [`h${bucket}`]: 3, acceptances: 3 },
      }),
    );
    // The plan's 10 threads held by the primary's 10 (the thread ledger says what the plan holds).
    await fixture.clients.documents.send(
      new PutCommand({
        TableName: fleet.resources.tables.governor,
        Item: { id: THREAD_LEDGER_ID, [`h${bucket}`]: 10, acceptances: 10 },
      }),
    );
    const lambda = fakeLambda();
    const cloudwatch = fakeCloudWatch();
    const overflowBalance = vi.fn(async () => 20);
    const governor = await createGovernorFromEnvironment({
      environment: environmentOf(),
      clients: fixture.clients,
      lambda: lambda.client,
      cloudwatch: cloudwatch.client,
      solver: { getBalance: async () => 50 },
      overflowSolver: { getBalance: overflowBalance },
      clock: () => now,
    });

    // Act
    const record = await governor.loop.tick();

    // Assess: the primary's in flight excludes the overflow lane's 3.
    expect(record.signals.lanes.normal.inFlight).toBe(10);
    expect(record.overflowSignals?.provider.lanes.normal).toMatchObject({ backlog: 27, inFlight: 3 });
    expect(record.overflowSignals?.provider.balance).toBe(20);
    expect(overflowBalance).toHaveBeenCalledOnce();
    expect(record.overflow).toMatchObject({ enabled: true, ceiling: 2, reason: { code: 'OVERFLOW_PROBE' } });
    // The requests: the overflow function reserved first, then its mapping opened at 2.
    const writes = lambda.sent.filter((s) => /^(Update|Put)/.test(s.command));
    const overflowWrites = writes.filter(
      (s) => s.input.UUID === 'uuid-overflow' || s.input.FunctionName === 'fleet-consumer-overflow',
    );
    expect(overflowWrites).toEqual([
      {
        command: 'PutFunctionConcurrencyCommand',
        input: { FunctionName: 'fleet-consumer-overflow', ReservedConcurrentExecutions: 2 },
      },
      {
        command: 'UpdateEventSourceMappingCommand',
        input: { UUID: 'uuid-overflow', ScalingConfig: { MaximumConcurrency: 2 }, Enabled: true },
      },
    ]);
    expect(record.changes).toEqual(
      expect.arrayContaining(['overflow reserved concurrency none → 2', 'overflow ceiling 5 → 2', 'overflow enabled']),
    );
    // The overflow consumer's metrics are read under its own service dimension.
    const services = new Set(
      cloudwatch.sent.flatMap((s) =>
        (s.input.MetricDataQueries as any[]).flatMap(
          (q) => q.MetricStat.Metric.Dimensions?.map((d: { Value: string }) => d.Value) ?? [],
        ),
      ),
    );
    expect(services).toContain('consumer-overflow');
    expect(services).toContain('consumer');
    // The overflow state is saved in the governor's item on dynalite (nested objects round-trip).
    const stored = await createDynamoGovernorState({
      documents: fixture.clients.documents,
      tableName: fleet.resources.tables.governor,
    }).load();
    expect(stored?.state.overflow).toEqual(record.overflow?.state);
    expect(stored?.state.lastDecision?.overflow).toMatchObject({ enabled: true, ceiling: 2, inFlight: 3 });
    expect(formatTick(record)).toMatch(/overflow {3}OVERFLOW_PROBE[\s\S]*open at 2/);

    // Next tick, nothing changed: no control-plane write at all.
    lambda.sent.length = 0;
    await governor.loop.tick();
    expect(lambda.sent.filter((s) => /^(Update|Put)/.test(s.command))).toEqual([]);
  });

  it('names every missing variable of the overflow lane in one ConfigError', async () => {
    const error = await createGovernorFromEnvironment({
      environment: environmentOf({
        OVERFLOW_MAPPING_ID: undefined,
        OVERFLOW_KEY: undefined,
        GOVERNOR_TABLE: undefined,
      }),
      clients: fixture.clients,
      lambda: fakeLambda().client,
      cloudwatch: fakeCloudWatch().client,
    }).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems;
    expect(problems.map((p) => p.field)).toEqual(['OVERFLOW_MAPPING_ID', 'OVERFLOW_KEY_SECRET_ARN', 'GOVERNOR_TABLE']);
    expect(problems[0]?.fix).toMatch(/OVERFLOW_MAPPING_ID/);
    expect(problems[1]?.fix).toMatch(/OVERFLOW_KEY/);
  });

  it('builds no overflow lane without an overflow block', async () => {
    const lambda = fakeLambda();
    const cloudwatch = fakeCloudWatch();
    const governor = await createGovernorFromEnvironment({
      environment: environmentOf({
        CAPTCHA_FLEET_CONFIG: JSON.stringify({ prefix: fleet.settings.prefix, planThreads: 10, tickMs: 10_000 }),
        OVERFLOW_MAPPING_ID: undefined,
      }),
      clients: fixture.clients,
      lambda: lambda.client,
      cloudwatch: cloudwatch.client,
      solver: { getBalance: async () => 50 },
      dryRun: true,
    });

    const record = await governor.loop.tick();

    expect(record.overflow).toBeUndefined();
    expect(lambda.sent.some((s) => s.input.UUID === 'uuid-overflow')).toBe(false);
    // Metrics are read (and billed) only for the consumer that runs: its store calls, not the
    // overflow consumer's (in an ordinary minute their failures alone: none failed).
    const read = cloudwatch.sent.flatMap((s) =>
      (s.input.MetricDataQueries as any[]).map((q) => ({
        name: q.MetricStat.Metric.MetricName as string,
        service: q.MetricStat.Metric.Dimensions?.find((d: { Name: string }) => d.Name === 'service')?.Value,
      })),
    );
    expect(read.filter((m) => /^(Dynamo|Sqs)/.test(m.name))).toEqual(
      ['DynamoErrors', 'SqsErrors'].map((name) => ({ name, service: 'consumer' })),
    );
    expect(read.some((m) => m.service === 'consumer-overflow')).toBe(false);
  });
});
