/**
 * The stores as the AWS governor's dependencies, wired from the environment as the Lambda is:
 * its own probe of DynamoDB (a GetItem of the store-probe key) and SQS through the real SDK,
 * via the fault proxy in front of the emulators, and the consumers' store calls read from
 * CloudWatch (mocked: no emulator serves it; the GetMetricData queries are asserted). A store
 * that stops answering pauses both mappings after `outageTicks` ticks, even with the governor's
 * own state on the same DynamoDB; while paused every tick probes; the first tick it answers
 * resumes them. The consumers' failures reported through their EMF pause too.
 */
import type { CloudWatchClient, MetricDataQuery } from '@aws-sdk/client-cloudwatch';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createAwsClients } from '../../functions/adapters/aws-clients.js';
import { ENV, parseEnvironment } from '../../functions/core/environment.js';
import { METRICS } from '../../functions/core/metric-names.js';
import { createGovernorFromEnvironment } from '../../functions/governor/wiring.js';
import { type FaultProxy, startFaultProxy } from '../../local/faults/proxy.js';
import { startEmulatorFixture, type EmulatorFixture, type TestFleet } from '../helpers/fleet-fixture.js';

let fixture: EmulatorFixture;
let fleet: TestFleet;
let proxy: FaultProxy;
/** The proxy's clock: DynamoDB answers 503 while it reads 1 000–1 999, SQS while 3 000–3 999. */
let faultClock = 0;
const DYNAMO_DOWN = 1_500;
const SQS_DOWN = 3_500;
const HEALTHY = 0;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  fleet = await fixture.createFleet({ planThreads: 10 });
  proxy = await startFaultProxy({
    upstreams: { dynamodb: fixture.emulators.dynamoEndpoint, sqs: fixture.emulators.sqsEndpoint },
    plan: {
      windows: [
        { service: 'dynamodb', kind: 'unavailable', startMs: 1_000, durationMs: 1_000, rate: 1, status: 503 },
        { service: 'sqs', kind: 'unavailable', startMs: 3_000, durationMs: 1_000, rate: 1, status: 503 },
      ],
    },
    clock: () => faultClock,
  });
  proxy.arm();
});
afterAll(async () => {
  await proxy?.close();
  await fixture?.stop();
});

interface Mocks {
  lambda: LambdaClient;
  cloudwatch: CloudWatchClient;
  /** The mappings' Enabled as the mock holds them. */
  enabled: Record<string, boolean>;
  queries: MetricDataQuery[];
  /** What the consumers' EMF says in CloudWatch: DynamoDB calls and failures per read. */
  dynamoCalls: { requests: number; errors: number };
}

/** A Lambda control plane that keeps the mappings' state, and a CloudWatch that answers the consumers' store calls. */
function mocks(): Mocks {
  const m: Mocks = {
    enabled: { 'uuid-normal': true, 'uuid-high': true },
    queries: [],
    dynamoCalls: { requests: 0, errors: 0 },
    lambda: undefined as unknown as LambdaClient,
    cloudwatch: undefined as unknown as CloudWatchClient,
  };
  const ceilings: Record<string, number> = { 'uuid-normal': 4, 'uuid-high': 2 };
  m.lambda = {
    send: vi.fn(async (command: { constructor: { name: string }; input: Record<string, unknown> }) => {
      const uuid = command.input.UUID as string;
      switch (command.constructor.name) {
        case 'GetEventSourceMappingCommand':
          return {
            State: m.enabled[uuid] ? 'Enabled' : 'Disabled',
            ScalingConfig: { MaximumConcurrency: ceilings[uuid] },
          };
        case 'UpdateEventSourceMappingCommand': {
          if (command.input.Enabled !== undefined) m.enabled[uuid] = command.input.Enabled as boolean;
          const scaling = command.input.ScalingConfig as { MaximumConcurrency?: number } | undefined;
          if (scaling?.MaximumConcurrency !== undefined) ceilings[uuid] = scaling.MaximumConcurrency;
          return {};
        }
        case 'GetFunctionConcurrencyCommand':
          return { ReservedConcurrentExecutions: 6 };
        default:
          return {};
      }
    }),
  } as unknown as LambdaClient;
  m.cloudwatch = {
    send: vi.fn(async (command: { input: { MetricDataQueries?: MetricDataQuery[] } }) => {
      const queries = command.input.MetricDataQueries ?? [];
      m.queries.push(...queries);
      return {
        MetricDataResults: queries.map((q) => ({
          Id: q.Id,
          Values:
            q.Id === 'dynamodb_requests_0'
              ? [m.dynamoCalls.requests]
              : q.Id === 'dynamodb_errors_0'
                ? [m.dynamoCalls.errors]
                : [],
        })),
      };
    }),
  } as unknown as CloudWatchClient;
  return m;
}

/** A governor on a fresh fleet (its own state item: no grace left by an earlier test). */
async function governor(m: Mocks, clock: () => number) {
  fleet = await fixture.createFleet({ planThreads: 10 });
  const environment = parseEnvironment({
    [ENV.config]: JSON.stringify({ prefix: fleet.settings.prefix, planThreads: 10, tickMs: 10_000 }),
    [ENV.normalQueueUrl]: fleet.resources.queueUrls.normal,
    [ENV.highQueueUrl]: fleet.resources.queueUrls.high,
    [ENV.dlqUrl]: fleet.resources.queueUrls.dlq,
    [ENV.resultsTable]: fleet.resources.tables.results,
    [ENV.governorTable]: fleet.resources.tables.governor,
    [ENV.solverKey]: 'k'.repeat(32),
    [ENV.consumerFunctionName]: `${fleet.settings.prefix}-consumer`,
    [ENV.mappingIds]: JSON.stringify({ normal: 'uuid-normal', high: 'uuid-high' }),
  });
  return createGovernorFromEnvironment({
    environment,
    // The governor's SQS and DynamoDB go through the fault proxy.
    clients: createAwsClients({ endpoint: proxy.url }),
    cloudwatch: m.cloudwatch,
    lambda: m.lambda,
    solver: { getBalance: async () => 50 },
    clock,
  });
}

/** The mocks and a governor on a fresh fleet whose clock `advance` moves ten seconds (a tick). */
async function governorOnTicks() {
  const m = mocks();
  let now = 1_700_000_000_000;
  const wired = await governor(m, () => now);
  const advance = () => {
    now += 10_000;
  };
  return { m, wired, advance };
}

/** Tick `count` times, ten seconds apart, with the proxy's clock at `fault`; the decisions' codes. */
async function ticks(
  loop: { tick(): Promise<{ decision: { reason: { code: string } } }> },
  count: number,
  fault: number,
  advance: () => void,
) {
  faultClock = fault;
  const codes: string[] = [];
  for (let i = 0; i < count; i++) {
    advance();
    const record = await loop.tick().catch(() => undefined);
    codes.push(record?.decision.reason.code ?? 'FAILED');
  }
  return codes;
}

describe('the stores as the governor’s dependencies (AWS wiring)', () => {
  it.each([
    ['DynamoDB', DYNAMO_DOWN, 'dynamodb'],
    ['SQS', SQS_DOWN, 'sqs'],
  ])(
    'a %s that stops answering pauses both mappings after outageTicks ticks and resumes on the first tick it answers',
    async (_, fault, store) => {
      // Prepare
      const { m, wired, advance } = await governorOnTicks();
      const outageTicks = wired.config.outageTicks;
      await ticks(wired.loop, 2, HEALTHY, advance);
      expect(m.enabled['uuid-normal']).toBe(true);

      // Act: the store stops answering.
      const down = await ticks(wired.loop, outageTicks + 2, fault, advance);
      const pausedWhileDown = { ...m.enabled };
      const pauseMessage = wired.loop.lastDecision?.reason.message;
      const back = await ticks(wired.loop, 1, HEALTHY, advance);

      // Assess
      expect(down.slice(0, outageTicks - 1)).not.toContain('PAUSE_OUTAGE');
      expect(down.slice(outageTicks - 1)).toContain('PAUSE_OUTAGE');
      expect(pausedWhileDown).toEqual({ 'uuid-normal': false, 'uuid-high': false });
      expect(back).toEqual(['OUTAGE_PROBE']);
      expect(m.enabled['uuid-normal']).toBe(true);
      expect(wired.loop.lastDecision?.reason.message).toContain('every dependency answered');
      // The pause named the store.
      expect(pauseMessage).toContain(`${store}: the governor's`);
    },
  );

  it('pauses on the consumers’ failed DynamoDB calls (their EMF in CloudWatch) with the probe answering', async () => {
    // Prepare
    const { m, wired, advance } = await governorOnTicks();
    m.dynamoCalls = { requests: 200, errors: 150 };
    // Act
    const codes = await ticks(wired.loop, wired.config.outageTicks, HEALTHY, advance);
    // Assess
    expect(codes.at(-1)).toBe('PAUSE_OUTAGE');
    expect(wired.loop.lastDecision?.reason.message).toContain("75 % of the consumers' DynamoDB calls failed");
    expect(m.enabled).toEqual({ 'uuid-normal': false, 'uuid-high': false });
    const names = new Set(m.queries.map((q) => q.MetricStat?.Metric?.MetricName));
    for (const name of [METRICS.dynamoRequests, METRICS.dynamoErrors, METRICS.sqsRequests, METRICS.sqsErrors])
      expect(names.has(name), name).toBe(true);
    for (const q of m.queries.filter((q) => q.Id?.startsWith('dynamodb_')))
      expect(q.MetricStat?.Metric?.Namespace).toBe(fleet.settings.metricsNamespace);
  });

  it('reads the consumers’ failures alone in an ordinary minute, none while paused for an outage, and their calls too while a resume is on trial', async () => {
    // Prepare
    const { m, wired, advance } = await governorOnTicks();
    // The store calls' queries asked since the last look (the consumer's window has its own).
    const asked = () =>
      m.queries
        .splice(0)
        .map((q) => q.Id ?? '')
        .filter((id) => /^(dynamodb|sqs)_/.test(id));
    m.dynamoCalls = { requests: 40, errors: 0 };
    // Act: an ordinary minute; an outage and its resume on trial; the trial's minute.
    await ticks(wired.loop, 6, HEALTHY, advance);
    const ordinary = asked();
    const down = await ticks(wired.loop, wired.config.outageTicks, DYNAMO_DOWN, advance);
    asked();
    // Paused for the outage past a minute: the consumers' calls are not read (no consumer runs).
    const stillDown = await ticks(wired.loop, 7, DYNAMO_DOWN, advance);
    const whilePaused = asked();
    const resumed = await ticks(wired.loop, 1, HEALTHY, advance);
    const trial = await ticks(wired.loop, 7, HEALTHY, advance);
    const onTrial = asked();
    // Assess: the failures alone (the bill's 2 metrics a minute), no count while none failed.
    expect(ordinary.length).toBeGreaterThan(0);
    expect(new Set(ordinary)).toEqual(new Set(['dynamodb_errors_0', 'sqs_errors_0']));
    expect(down.at(-1)).toBe('PAUSE_OUTAGE');
    expect(stillDown.every((code) => code === 'PAUSE_OUTAGE')).toBe(true);
    expect(whilePaused).toEqual([]);
    // On trial the count is asked for: the trial passes on the consumers' calls that worked.
    expect(resumed).toEqual(['OUTAGE_PROBE']);
    expect(onTrial).toContain('dynamodb_requests_0');
    expect(trial.at(-1)).not.toBe('PAUSE_OUTAGE');
    expect(wired.loop.lastDecision?.reason.message).not.toContain('On trial');
  });
});
