import { describe, expect, it, vi } from 'vitest';
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { createCloudWatchSignals, metricWindow } from '../../functions/adapters/cloudwatch-signals.js';
import { createLambdaActuator } from '../../functions/adapters/lambda-actuator.js';
import { createCachedBalance } from '../../functions/adapters/balance.js';
import { createMemoryGovernorState, readGovernorStatus } from '../../functions/adapters/governor-state.js';
import { createMemoryThreadLedger } from '../../functions/adapters/thread-ledger.js';
import { createProbingBalance, tickBalanceTtlMs } from '../../functions/governor/balance-probe.js';
import { assembleSignals } from '../../functions/core/governor/signals.js';
import { GovernorStateConflictError } from '../../functions/core/governor/ports.js';
import { parseEnvironment } from '../../functions/core/environment.js';
import { ConfigError, resolveSettings } from '../../functions/core/settings.js';
import { governorConfigFrom, initialState } from '../../functions/core/governor/policy.js';
import { createGovernorLoop } from '../../functions/governor/loop.js';
import { GovernorTickError, runTicks } from '../../functions/governor/run.js';
import { createMetrics, type EmfDocument } from '../../functions/adapters/metrics.js';
import { fakeClient, type Sent } from '../helpers/fake-client.js';
import { DEFAULT_COST_ASSUMPTIONS, PARKED_GOVERNOR_METRICS } from '../../functions/core/cost/fleet-bill.js';

describe('cloudwatch-signals', () => {
  const now = Date.UTC(2025, 0, 1, 12, 0, 42);

  it('asks for p95, average and sample count of SolveDuration and sums of the counters, by service=consumer', async () => {
    // Prepare
    const { client, sent } = fakeClient<CloudWatchClient>(() => ({
      MetricDataResults: [
        { Id: 'solve_p95', Values: [12_000, 30_000] },
        { Id: 'solve_avg', Values: [8_000, 20_000] },
        { Id: 'solve_n', Values: [30, 10] },
        { Id: 'sum_submissions', Values: [50, 50] },
        { Id: 'sum_resultrequests', Values: [400, 350] },
        { Id: 'sum_overcapanswers', Values: [3] },
        { Id: 'sum_transienterrors', Values: [] },
        { Id: 'sum_taskerrors', Values: [1] },
        { Id: 'sum_accounterrors', Values: [] },
        { Id: 'sum_solved', Values: [40, 39] },
      ],
    }));
    const cw = createCloudWatchSignals({ cloudwatch: client, namespace: 'CaptchaFleet', clock: () => now });
    // Act
    const window = await cw.read();
    // Assess: the requests (the percentile apart, since some endpoints cannot compute it)
    expect(sent.map((s) => s.command)).toEqual(['GetMetricDataCommand', 'GetMetricDataCommand']);
    const input: Record<string, any> = {
      ...sent[0]!.input,
      MetricDataQueries: [...sent[0]!.input.MetricDataQueries, ...sent[1]!.input.MetricDataQueries],
    };
    expect(sent[1]!.input.MetricDataQueries.map((q: { Id: string }) => q.Id)).toEqual(['solve_p95']);
    const { start, end } = metricWindow(now, 120_000);
    expect(input.StartTime).toEqual(start);
    expect(input.EndTime).toEqual(end);
    expect((input.EndTime as Date).getTime() % 60_000).toBe(0);
    const byId = Object.fromEntries((input.MetricDataQueries as any[]).map((q) => [q.Id, q.MetricStat]));
    expect(byId.solve_p95).toEqual({
      Metric: {
        Namespace: 'CaptchaFleet',
        MetricName: 'SolveDuration',
        Dimensions: [{ Name: 'service', Value: 'consumer' }],
      },
      Period: 60,
      Stat: 'p95',
    });
    expect(byId.sum_overcapanswers.Stat).toBe('Sum');
    expect(byId.sum_overcapanswers.Metric.MetricName).toBe('OverCapAnswers');
    expect(byId.sum_resultrequests).toMatchObject({ Stat: 'Sum', Metric: { MetricName: 'ResultRequests' } });
    // Assess: the aggregation
    expect(window).toEqual({
      windowMs: 120_000,
      submissions: 100,
      resultRequests: 750,
      overCapAnswers: 3,
      transientErrors: 0, // the query succeeded and nothing happened
      taskErrors: 1,
      accountErrors: 0,
      solved: 79,
      meanSolveMs: (8_000 * 30 + 20_000 * 10) / 40,
      p95SolveMs: 30_000,
    });
  });

  it('keeps the counters when only the percentile query fails (moto cannot compute p95)', async () => {
    const { client } = fakeClient<CloudWatchClient>((_c, input) => {
      if (input.MetricDataQueries[0].MetricStat.Stat === 'p95') throw new SyntaxError('Unexpected token <');
      return {
        MetricDataResults: [
          { Id: 'sum_submissions', Values: [7] },
          { Id: 'solve_avg', Values: [100] },
        ],
      };
    });
    const errors: unknown[] = [];
    const window = await createCloudWatchSignals({
      cloudwatch: client,
      namespace: 'N',
      onError: (e) => errors.push(e),
    }).read();
    expect(window?.submissions).toBe(7);
    expect(window?.meanSolveMs).toBe(100);
    expect(window?.p95SolveMs).toBeUndefined();
    expect(errors).toHaveLength(1);
  });

  it('reads a failed query as unknown, never as zero', async () => {
    const { client } = fakeClient<CloudWatchClient>(() => {
      throw Object.assign(new Error('Rate exceeded'), { name: 'Throttling' });
    });
    const onError = vi.fn();
    const cw = createCloudWatchSignals({ cloudwatch: client, namespace: 'CaptchaFleet', onError });
    expect(await cw.read()).toBeUndefined();
    expect(onError).toHaveBeenCalledTimes(2); // the counters and the percentile request
  });

  it('reads the oldest-message age and sent rate of each queue from AWS/SQS', async () => {
    const { client, sent } = fakeClient<CloudWatchClient>(() => ({
      MetricDataResults: [
        { Id: 'age_normal', Values: [75, 40] },
        { Id: 'sent_normal', Values: [60, 120] },
        { Id: 'age_high', Values: [] },
        { Id: 'sent_high', Values: [] },
      ],
    }));
    const cw = createCloudWatchSignals({
      cloudwatch: client,
      namespace: 'CaptchaFleet',
      queueNames: { normal: 'f-tasks', high: 'f-tasks-high' },
      clock: () => now,
    });
    const q = await cw.readQueues();
    const queries = sent[0]!.input.MetricDataQueries as any[];
    expect(queries.find((x) => x.Id === 'age_normal').MetricStat).toMatchObject({
      Metric: {
        Namespace: 'AWS/SQS',
        MetricName: 'ApproximateAgeOfOldestMessage',
        Dimensions: [{ Name: 'QueueName', Value: 'f-tasks' }],
      },
      Stat: 'Maximum',
    });
    expect(sent[0]!.input.ScanBy).toBe('TimestampDescending');
    expect(q.normal).toEqual({ oldestAgeSeconds: 75, sentRate: 1.5 });
    expect(q.high).toEqual({ oldestAgeSeconds: undefined, sentRate: 0 });
  });
});

describe('lambda-actuator', () => {
  const mappings: Record<string, { ScalingConfig: { MaximumConcurrency: number }; State: string }> = {};
  /** The consumer's reservation as Lambda holds it (an operator may change it by hand). */
  const reservation: { value: number | undefined } = { value: undefined };
  const setup = (reserved: number | undefined, failReservation?: Error) => {
    reservation.value = reserved;
    mappings['uuid-n'] = { ScalingConfig: { MaximumConcurrency: 8 }, State: 'Enabled' };
    mappings['uuid-h'] = { ScalingConfig: { MaximumConcurrency: 2 }, State: 'Disabled' };
    const fake = fakeClient<LambdaClient>((command, input) => {
      if (command === 'GetEventSourceMappingCommand') return { ...mappings[input.UUID] };
      if (command === 'UpdateEventSourceMappingCommand') {
        const m = mappings[input.UUID]!;
        if (input.ScalingConfig) m.ScalingConfig = input.ScalingConfig;
        if (input.Enabled !== undefined) m.State = input.Enabled ? 'Enabled' : 'Disabled';
        return {};
      }
      if (command === 'GetFunctionConcurrencyCommand')
        return reservation.value === undefined ? {} : { ReservedConcurrentExecutions: reservation.value };
      if (command === 'PutFunctionConcurrencyCommand') {
        if (failReservation) throw failReservation;
        reservation.value = input.ReservedConcurrentExecutions;
        return { ReservedConcurrentExecutions: input.ReservedConcurrentExecutions };
      }
      throw new Error(`unexpected ${command}`);
    });
    const warn = vi.fn();
    const actuator = createLambdaActuator({
      lambda: fake.client,
      mappingIds: { normal: 'uuid-n', high: 'uuid-h' },
      consumerFunctionName: 'consumer',
      warn,
    });
    return { ...fake, actuator, warn };
  };
  const writes = (sent: Sent[]) => sent.filter((s) => s.command.startsWith('Update') || s.command.startsWith('Put'));

  it('reads ceilings and enabled flags from the mappings', async () => {
    const { actuator } = setup(10);
    expect(await actuator.read()).toEqual({
      normal: { ceiling: 8, enabled: true },
      high: { ceiling: 2, enabled: false },
    });
  });

  it('calls only on change, raising the reservation before the mappings and lowering it after', async () => {
    const { actuator, sent } = setup(10);
    await actuator.read();
    // Same as now: no write at all.
    await actuator.apply({ ceilings: { normal: 8, high: 2 }, enabled: { normal: true, high: false } });
    expect(writes(sent)).toEqual([]);
    // Raise: reservation first.
    sent.length = 0;
    const up = await actuator.apply({ ceilings: { normal: 12, high: 4 }, enabled: { normal: true, high: true } });
    expect(writes(sent).map((s) => s.command)).toEqual([
      'PutFunctionConcurrencyCommand',
      'UpdateEventSourceMappingCommand',
      'UpdateEventSourceMappingCommand',
    ]);
    expect(writes(sent)[0]!.input).toEqual({ FunctionName: 'consumer', ReservedConcurrentExecutions: 16 });
    expect(writes(sent)[1]!.input).toEqual({ UUID: 'uuid-n', ScalingConfig: { MaximumConcurrency: 12 } });
    expect(writes(sent)[2]!.input).toEqual({ UUID: 'uuid-h', ScalingConfig: { MaximumConcurrency: 4 }, Enabled: true });
    expect(up.changes).toContain('reserved concurrency 10 → 16');
    // Again the same: nothing.
    sent.length = 0;
    await actuator.apply({ ceilings: { normal: 12, high: 4 }, enabled: { normal: true, high: true } });
    expect(writes(sent)).toEqual([]);
    // Lower: mappings first, then the reservation.
    await actuator.apply({ ceilings: { normal: 6, high: 4 }, enabled: { normal: true, high: true } });
    expect(writes(sent).map((s) => s.command)).toEqual([
      'UpdateEventSourceMappingCommand',
      'PutFunctionConcurrencyCommand',
    ]);
    expect(writes(sent)[1]!.input.ReservedConcurrentExecutions).toBe(10);
    // Pause: only Enabled changes, the reservation stays.
    sent.length = 0;
    await actuator.apply({ ceilings: { normal: 6, high: 4 }, enabled: { normal: false, high: false } });
    expect(writes(sent).map((s) => s.input)).toEqual([
      { UUID: 'uuid-n', Enabled: false },
      { UUID: 'uuid-h', Enabled: false },
    ]);
  });

  it('parks a disabled lane’s mapping at the floor while the other consumes: the reservation never counts a stale ceiling', async () => {
    // Before: the high lane took the turn on a plan of 600 (normal disabled at 570, high 600) and
    // the reservation asked for 1 170, which an account of 1 000 refuses: given up for good.
    const { actuator, sent } = setup(600);
    await actuator.apply({ ceilings: { normal: 570, high: 30 }, enabled: { normal: true, high: true } });
    sent.length = 0;
    const turn = await actuator.apply({ ceilings: { normal: 570, high: 600 }, enabled: { normal: false, high: true } });
    const reservations = writes(sent).filter((w) => w.command === 'PutFunctionConcurrencyCommand');
    expect(reservations.map((w) => w.input.ReservedConcurrentExecutions)).toEqual([602]);
    expect(mappings['uuid-n']).toMatchObject({ ScalingConfig: { MaximumConcurrency: 2 }, State: 'Disabled' });
    expect(mappings['uuid-h']).toMatchObject({ ScalingConfig: { MaximumConcurrency: 600 }, State: 'Enabled' });
    expect(turn.changes).toContain('reserved concurrency 600 → 602');
    // The turn back: the high mapping shrinks before the normal one comes back at its ceiling (the
    // two never stand at 570 + 600 over the reservation), then the reservation is lowered.
    sent.length = 0;
    await actuator.apply({ ceilings: { normal: 570, high: 30 }, enabled: { normal: true, high: true } });
    expect(writes(sent).map((w) => [w.command, w.input.UUID ?? w.input.ReservedConcurrentExecutions])).toEqual([
      ['UpdateEventSourceMappingCommand', 'uuid-h'],
      ['UpdateEventSourceMappingCommand', 'uuid-n'],
      ['PutFunctionConcurrencyCommand', 600],
    ]);
    expect(reservation.value).toBe(600);
  });

  it('names the lane, the mapping and the fix when a mapping or the function is not there', async () => {
    // Before: a wrong EVENT_SOURCE_MAPPING_IDS ended `governor --once` with a bare
    // "ResourceNotFoundException: The resource you requested does not exist."
    const missing = Object.assign(new Error('The resource you requested does not exist.'), {
      name: 'ResourceNotFoundException',
    });
    const fake = fakeClient<LambdaClient>(() => {
      throw missing;
    });
    const actuator = createLambdaActuator({
      lambda: fake.client,
      mappingIds: { normal: 'uuid-gone' },
      consumerFunctionName: 'consumer',
    });
    await expect(actuator.read()).rejects.toThrow(
      /^could not read the normal lane's event source mapping uuid-gone: ResourceNotFoundException: The resource you requested does not exist\. \(check EVENT_SOURCE_MAPPING_IDS and CONSUMER_FUNCTION_NAME/,
    );
  });

  it('re-reads a reservation lowered by hand before raising the mappings, and raises it first', async () => {
    // Prepare: the governor has seen the deployed reservation (10 = 8 + 2); an operator then lowers it to 4.
    const { actuator, sent } = setup(10);
    await actuator.apply({ ceilings: { normal: 8, high: 2 }, enabled: { normal: true, high: false } });
    reservation.value = 4;
    sent.length = 0;
    // Act: the mappings' sum stays 10, the split changes.
    await actuator.apply({ ceilings: { normal: 6, high: 4 }, enabled: { normal: true, high: true } });
    // Assess
    expect(sent.map((s) => s.command)).toEqual([
      'GetFunctionConcurrencyCommand',
      'PutFunctionConcurrencyCommand',
      'UpdateEventSourceMappingCommand',
      'UpdateEventSourceMappingCommand',
    ]);
    expect(sent[1]?.input).toEqual({ FunctionName: 'consumer', ReservedConcurrentExecutions: 10 });
  });

  it('calls nothing at all on a tick that changes nothing', async () => {
    // Prepare
    const { actuator, sent } = setup(10);
    await actuator.apply({ ceilings: { normal: 8, high: 2 }, enabled: { normal: true, high: false } });
    sent.length = 0;
    // Act
    await actuator.apply({ ceilings: { normal: 8, high: 2 }, enabled: { normal: true, high: false } });
    // Assess
    expect(sent).toEqual([]);
  });

  it('falls back to the mappings alone when the account cannot reserve, and says so once', async () => {
    const floor = Object.assign(
      new Error(
        "Specified ReservedConcurrentExecutions for function decreases account's UnreservedConcurrentExecution below its minimum value of [100].",
      ),
      {
        name: 'InvalidParameterValueException',
      },
    );
    const { actuator, sent, warn } = setup(undefined, floor);
    await actuator.apply({ ceilings: { normal: 20, high: 2 }, enabled: { normal: true, high: false } });
    await actuator.apply({ ceilings: { normal: 30, high: 2 }, enabled: { normal: true, high: false } });
    expect(warn).toHaveBeenCalledOnce();
    expect(warn.mock.calls[0]![0]).toMatch(/cannot reserve/);
    expect(sent.filter((s) => s.command === 'PutFunctionConcurrencyCommand')).toHaveLength(1);
    expect(mappings['uuid-n']!.ScalingConfig.MaximumConcurrency).toBe(30);
    expect(actuator.reservationSupported).toBe(false);
  });

  it('fails loudly on other reservation errors (the tick then keeps the last ceilings)', async () => {
    const { actuator } = setup(4, Object.assign(new Error('denied'), { name: 'AccessDeniedException' }));
    await expect(
      actuator.apply({ ceilings: { normal: 20, high: 2 }, enabled: { normal: true, high: false } }),
    ).rejects.toThrow(/reserved concurrency/);
    expect(mappings['uuid-n']!.ScalingConfig.MaximumConcurrency).toBe(8);
  });
});

describe('balance cache', () => {
  it('asks the solver at most once per TTL and reads failures as unknown', async () => {
    let now = 0;
    let fail = false;
    const getBalance = vi.fn(async () => {
      if (fail) throw new Error('ERROR_WRONG_USER_KEY');
      return 12.5;
    });
    const balance = createCachedBalance({ getBalance }, { ttlMs: 60_000, clock: () => now });
    expect(await balance.read()).toBe(12.5);
    now = 59_999;
    expect(await balance.read()).toBe(12.5);
    expect(getBalance).toHaveBeenCalledTimes(1);
    fail = true;
    now = 60_000;
    expect(await balance.read()).toBeUndefined();
    expect(getBalance).toHaveBeenCalledTimes(2);
  });
});

describe('signal assembly', () => {
  it('derives rates from the metric window and arrivals from successive queue reads', () => {
    const s = assembleSignals({
      now: 20_000,
      previous: { normal: { at: 10_000, visible: 100, notVisible: 8, delayed: 0 } },
      queues: { normal: { at: 20_000, visible: 110, notVisible: 8, delayed: 0 } },
      metrics: {
        windowMs: 60_000,
        submissions: 60,
        overCapAnswers: 6,
        transientErrors: 3,
        taskErrors: 0,
        accountErrors: 0,
        solved: 60,
        meanSolveMs: 8000,
        p95SolveMs: 15_000,
      },
      balance: 3,
      settings: { normal: { ceiling: 8, enabled: true } },
    });
    expect(s.completionRate).toBe(1);
    // +10 queued in 10 s, and 1/s left the queue completed: 2/s arrived.
    expect(s.lanes.normal.arrivalRate).toBe(2);
    expect(s.errorRate).toBe(0.05);
    expect(s.overCapRate).toBe(0.1);
    expect(s.lanes.high).toBeUndefined();
  });

  it('takes the error rate per solver request: submissions and result requests', () => {
    // A quiet solver at 0.5 % transient answers per request, with 8 polls per task: 100 tasks
    // make 100 submissions and 800 result requests, and about 4–5 transient answers.
    const read = (resultRequests: number | undefined) =>
      assembleSignals({
        now: 1,
        queues: { normal: { at: 1, visible: 0, notVisible: 4, delayed: 0 } },
        metrics: {
          windowMs: 60_000,
          submissions: 100,
          ...(resultRequests === undefined ? {} : { resultRequests }),
          overCapAnswers: 2,
          transientErrors: 4,
          taskErrors: 1,
          accountErrors: 0,
          solved: 99,
          meanSolveMs: 8000,
          p95SolveMs: 15_000,
        },
        balance: 3,
        settings: { normal: { ceiling: 8, enabled: true } },
      });
    const perRequest = read(800);
    expect(perRequest.errorRate).toBeCloseTo(5 / 900, 12); // 0.56 %, under the 5 % threshold
    expect(perRequest.transientErrorRate).toBeCloseTo(4 / 900, 12); // the outage detector's share
    expect(perRequest.overCapRate).toBe(0.02); // over-cap answers come from in.php only
    // A source without the count (the policy lab) falls back to per submission.
    expect(read(undefined).errorRate).toBe(0.05);
  });

  it('keeps unknown things unknown', () => {
    const s = assembleSignals({
      now: 1,
      queues: { normal: { at: 1, visible: undefined, notVisible: undefined, delayed: undefined } },
      metrics: undefined,
      balance: undefined,
      settings: { normal: { ceiling: 2, enabled: true } },
    });
    expect([
      s.lanes.normal.backlog,
      s.lanes.normal.arrivalRate,
      s.errorRate,
      s.overCapAnswers,
      s.accountErrors,
      s.balance,
    ]).toEqual([undefined, undefined, undefined, undefined, undefined, undefined]);
  });
});

describe('environment: mapping ids', () => {
  const base = { TASKS_QUEUE_URL: 'q', DLQ_URL: 'd', RESULTS_TABLE: 'r', SOLVER_KEY: 'k' };
  it('parses EVENT_SOURCE_MAPPING_IDS', () => {
    expect(parseEnvironment({ ...base, EVENT_SOURCE_MAPPING_IDS: '{"normal":"a","high":"b"}' }).mappingIds).toEqual({
      normal: 'a',
      high: 'b',
    });
    expect(parseEnvironment(base).mappingIds).toBeUndefined();
  });
  it('lists a malformed value as a configuration problem', () => {
    expect(() => parseEnvironment({ ...base, EVENT_SOURCE_MAPPING_IDS: '{"high":"b"}' })).toThrow(ConfigError);
    expect(() => parseEnvironment({ ...base, EVENT_SOURCE_MAPPING_IDS: 'nope' })).toThrow(/EVENT_SOURCE_MAPPING_IDS/);
  });
});

describe('governor loop and ticks', () => {
  const settings = resolveSettings({ planThreads: 8, tickMs: 100 });
  const config = governorConfigFrom(settings);
  const healthyMetrics = {
    windowMs: 60_000,
    submissions: 10,
    overCapAnswers: 0,
    transientErrors: 0,
    taskErrors: 0,
    accountErrors: 0,
    solved: 10,
    meanSolveMs: 1000,
    p95SolveMs: 2000,
  };
  const lanes = () => {
    let setting = { ceiling: 2, enabled: true };
    const apply = vi.fn(async (d: { ceilings: { normal: number }; enabled: { normal: boolean } }) => {
      setting = { ceiling: d.ceilings.normal, enabled: d.enabled.normal };
      return { changes: ['x'] };
    });
    return { read: async () => ({ normal: setting }), apply };
  };

  /** The ticks of one invocation `lastsMs` long on the virtual `clock`, and the EMF documents they published. */
  const ticksOn = async (
    loop: Parameters<typeof runTicks>[0]['loop'],
    clock: { now: number },
    lastsMs: number,
    watch?: Parameters<typeof runTicks>[0]['watch'],
  ): Promise<EmfDocument[]> => {
    const documents: EmfDocument[] = [];
    const metrics = createMetrics({
      namespace: 'CaptchaFleet',
      serviceName: 'governor',
      sink: (d) => documents.push(d),
    });
    await runTicks({
      loop,
      tickMs: 10_000,
      remainingMs: () => lastsMs - clock.now,
      sleep: async (ms) => {
        clock.now += ms;
      },
      clock: () => clock.now,
      metrics,
      ...(watch ? { watch } : {}),
    });
    return documents;
  };

  /** One tick of a fresh loop over an idle lane at `now`. */
  const idleTick = (now: number) =>
    createGovernorLoop({
      config,
      queues: { read: async () => ({ normal: { at: now, visible: 0, notVisible: 0, delayed: 0 } }) },
      metrics: { read: async () => healthyMetrics },
      balance: { read: async () => 10 },
      actuator: lanes(),
      state: createMemoryGovernorState(),
      clock: () => now,
    }).tick();

  it('sets the free threads on the first tick and persists the state', async () => {
    const actuator = lanes();
    const state = createMemoryGovernorState();
    const loop = createGovernorLoop({
      config,
      queues: { read: async () => ({ normal: { at: 0, visible: 50, notVisible: 2, delayed: 0 } }) },
      metrics: { read: async () => healthyMetrics },
      balance: { read: async () => 10 },
      actuator,
      state,
      clock: () => 1000,
    });
    const record = await loop.tick();
    expect(record.decision.ceilings.normal).toBe(8);
    expect(actuator.apply).toHaveBeenCalledOnce();
    expect((await state.load())?.version).toBe(1);
  });

  /**
   * The loop with the spend grant on a memory ledger: one solve counted before the first tick (the
   * price needs a count to start from), the balance as `balance.usd` says (undefined: the read failed).
   */
  async function grantLoop(balance: { usd: number | undefined }) {
    const clock = { now: 1000 };
    const ledger = createMemoryThreadLedger({ leaseMs: 60_000, clock: () => clock.now });
    await ledger.released(await ledger.accepted(clock.now), { solved: true });
    const loop = createGovernorLoop({
      config,
      queues: { read: async () => ({ normal: { at: clock.now, visible: 50, notVisible: 2, delayed: 0 } }) },
      metrics: { read: async () => healthyMetrics },
      // The balance port answers undefined for a read that failed (its error through lastError).
      balance: { read: async () => balance.usd, lastError: () => ({ kind: 'unreachable', code: 'ERROR_TIMEOUT' }) },
      threadLedger: ledger,
      spendGrant: ledger,
      actuator: lanes(),
      state: createMemoryGovernorState(),
      clock: () => clock.now,
    });
    /** 50 solves that cost $0.10 between two ticks: $0.30 → $0.20, $0.002 a solve. */
    const fiftySolves = async () => {
      for (let i = 0; i < 50; i++) await ledger.released(await ledger.accepted(clock.now), { solved: true });
      balance.usd = 0.2;
      clock.now += 100;
    };
    return { clock, ledger, loop, fiftySolves };
  }

  it("lifts the refusals' hold on the ledger for a parked fleet's held test, after the actuator opened the invocation it tests; a failed lift is logged and the tick goes on", async () => {
    // Prepare: a 20-thread parked plan; 240 solves, then the fleet at 3 threads refused (others
    // took the rest), one of its own freed and taken again below the refused count.
    const parkedConfig = governorConfigFrom(resolveSettings({ planThreads: 20, tickMs: 10_000, solveMode: 'park' }));
    const clock = { now: 1_000_000 };
    const ledger = createMemoryThreadLedger({ leaseMs: 600_000, clock: () => clock.now });
    for (let i = 0; i < 240; i++) await ledger.released(await ledger.accepted(clock.now), { solved: true });
    const held = [await ledger.accepted(clock.now), await ledger.accepted(clock.now), await ledger.accepted(clock.now)];
    await ledger.refused(clock.now);
    await ledger.released(held[0] as { bucket: number });
    await ledger.accepted(clock.now + 1);
    const refusedAt = clock.now;
    const order: string[] = [];
    const actuator = lanes();
    actuator.apply.mockImplementation(async () => {
      order.push('apply');
      return { changes: ['x'] };
    });
    const warn = vi.fn();
    let failing = false;
    const loopOf = () =>
      createGovernorLoop({
        config: parkedConfig,
        queues: { read: async () => ({ normal: { at: clock.now, visible: 50, notVisible: 3, delayed: 0 } }) },
        metrics: { read: async () => ({ ...healthyMetrics, meanSolveMs: 20_000 }) },
        balance: { read: async () => 10 },
        threadLedger: ledger,
        refusalHold: {
          liftHold: async (at) => {
            order.push('lift');
            if (failing) throw new Error('ProvisionedThroughputExceededException');
            await ledger.liftHold(at);
          },
        },
        actuator,
        state: createMemoryGovernorState(),
        clock: () => clock.now,
        log: { warn, info: vi.fn(), error: vi.fn() } as never,
      });
    const loop = loopOf();
    // Act: the refusal's tick sets the room; 10 s later the held test.
    clock.now += 10_000;
    const first = await loop.tick();
    clock.now += 10_000;
    const second = await loop.tick();
    const lifted = await ledger.read();
    // Assess
    expect(first.decision.liftHold).toBeUndefined();
    expect(second.decision.liftHold).toBe(refusedAt);
    expect(second.decision.ceilings.normal).toBe(4);
    expect(lifted?.liftedAt).toBe(refusedAt);
    expect(order.slice(-2)).toEqual(['apply', 'lift']);
    // Act: a lift that fails on a fresh loop's test (20 s on).
    failing = true;
    await ledger.refused(clock.now);
    await ledger.released(held[1] as { bucket: number });
    await ledger.accepted(clock.now + 1);
    const again = loopOf();
    clock.now += 10_000;
    await again.tick();
    clock.now += 10_000;
    const failed = await again.tick();
    // Assess: logged, the tick's decision stands.
    expect(failed.decision.liftHold).toBeDefined();
    expect(warn).toHaveBeenCalledWith('refusal hold not lifted; it lapses by itself', expect.anything());
  });

  it('writes the spend grant to the thread ledger near the pause level: replaces a stale one at the assumed price, then counts at the learned one', async () => {
    // Prepare: a grant a previous run left; the ledger's solved counter and the balance move together.
    const g = await grantLoop({ usd: 0.3 });
    await g.ledger.setGrant({ limit: 1, until: g.clock.now + 1_000_000 });
    // Act: the first tick knows no price yet; by the second, 50 solves cost $0.10.
    await g.loop.tick();
    const first = await g.ledger.read();
    await g.fiftySolves();
    const second = await g.loop.tick();
    const granted = await g.ledger.read();
    // Assess: first ($0.30 − $0.10) / UNKNOWN_PRICE_USD ($0.01) = 20 solves, the 21st at the
    // level; then ($0.20 − $0.10) / $0.002 = 50 solves, the last at the pause level, counted in
    // the grant's reservations (none taken yet: the 51 acceptances came before any grant).
    expect(first?.grant?.limit).toBe(0 + 21);
    expect(second.decision.spendGrant?.limit).toBe(0 + 51);
    expect(granted?.grant).toEqual(second.decision.spendGrant);
  });

  it('keeps the spend grant on the ledger through a tick whose balance read fails: its count as it stands, renewed', async () => {
    // Prepare: the two ticks above, the second writing a grant near the pause level
    const balance: { usd: number | undefined } = { usd: 0.3 };
    const g = await grantLoop(balance);
    await g.loop.tick();
    await g.fiftySolves();
    await g.loop.tick();
    const granted = (await g.ledger.read())?.grant;
    expect(granted?.limit).toBe(51);
    // Act: the next tick cannot read the balance
    balance.usd = undefined;
    g.clock.now += 100;
    const third = await g.loop.tick();
    // Assess: the grant stays in force, its count as written, renewed from this tick (not cleared)
    expect(third.decision.reason.code).toBe('HOLD_MISSING_SIGNAL');
    const carried = (await g.ledger.read())?.grant;
    expect(carried?.limit).toBe(granted?.limit);
    expect(carried?.until).toBeGreaterThan(granted?.until ?? Number.POSITIVE_INFINITY);
  });

  it('disables the mappings when its own state store stays unreadable, acting on nothing else (fail static)', async () => {
    // Prepare: the state item cannot be read; everything else is healthy.
    const actuator = lanes();
    let now = 1000;
    const broken = {
      load: async () => {
        throw Object.assign(new Error('throttled'), { name: 'ProvisionedThroughputExceededException' });
      },
      save: vi.fn(async () => 1),
    };
    const loop = createGovernorLoop({
      config,
      queues: { read: async () => ({ normal: { at: now, visible: 50, notVisible: 2, delayed: 0 } }) },
      metrics: { read: async () => healthyMetrics },
      balance: { read: async () => 10 },
      actuator,
      state: broken,
      clock: () => now,
    });
    // Act: outageTicks ticks on an unreadable store.
    const outcomes: string[] = [];
    for (let i = 0; i < config.outageTicks; i++) {
      outcomes.push(
        await loop.tick().then(
          (r) => r.decision.reason.code,
          (e: Error) => `threw: ${e.message}`,
        ),
      );
      now += 1000;
    }
    // Assess: no ceiling set on an unread state until the store has looked down outageTicks ticks; then paused, unsaved.
    expect(outcomes.slice(0, -1).every((o) => o.startsWith('threw: governor state unreadable'))).toBe(true);
    expect(outcomes.at(-1)).toBe('PAUSE_OUTAGE');
    expect(actuator.apply).toHaveBeenCalledOnce();
    expect(actuator.apply.mock.calls[0]?.[0]).toMatchObject({ enabled: { normal: false } });
    expect(broken.save).not.toHaveBeenCalled();
  });

  it('saves a summary of each decision with the state, for the status command', async () => {
    const state = createMemoryGovernorState();
    expect(await readGovernorStatus(state)).toBeUndefined();
    let now = 1000;
    let balance: number | undefined = 10;
    const loop = createGovernorLoop({
      config,
      queues: { read: async () => ({ normal: { at: now, visible: 50, notVisible: 2, delayed: 0 } }) },
      metrics: { read: async () => ({ ...healthyMetrics, p95SolveMs: 2500 }) },
      balance: { read: async () => balance },
      actuator: lanes(),
      state,
      clock: () => now,
    });
    await loop.tick();
    const status = await readGovernorStatus(state);
    expect(status).toMatchObject({
      at: 1000,
      code: 'FREE_THREADS',
      ceilings: { normal: 8 },
      enabled: { normal: true },
      paused: false,
      freeThreads: 8,
      balance: 10,
      backlog: { normal: 50 },
      inFlight: { normal: 2 },
      p95SolveMs: 2500,
      errorRate: 0,
    });
    expect(status?.message).toMatch(/free threads/);
    // The next tick replaces it; an unknown balance is left out, not saved as 0.
    now = 2000;
    balance = undefined;
    await loop.tick();
    const next = await readGovernorStatus(state);
    expect(next?.at).toBe(2000);
    expect(next?.code).toBe('HOLD_MISSING_SIGNAL');
    expect(next).not.toHaveProperty('balance');
  });

  it('on a dry run decides but neither saves nor acts', async () => {
    const actuator = lanes();
    const state = createMemoryGovernorState();
    const loop = createGovernorLoop({
      config,
      queues: { read: async () => ({ normal: { at: 0, visible: 50, notVisible: 2, delayed: 0 } }) },
      metrics: { read: async () => healthyMetrics },
      balance: { read: async () => 10 },
      actuator,
      state,
      dryRun: true,
    });
    const record = await loop.tick();
    expect(record.applied).toBe(false);
    expect(actuator.apply).not.toHaveBeenCalled();
    expect(await state.load()).toBeUndefined();
  });

  it('does not act when another governor wrote the state first', async () => {
    const actuator = lanes();
    const state = createMemoryGovernorState();
    const loop = createGovernorLoop({
      config,
      queues: { read: async () => ({ normal: { at: 0, visible: 50, notVisible: 2, delayed: 0 } }) },
      metrics: { read: async () => healthyMetrics },
      balance: { read: async () => 10 },
      actuator,
      state,
    });
    await loop.tick();
    await state.save(initialState(config, 0), 1); // someone else: version 2
    await expect(loop.tick()).rejects.toBeInstanceOf(GovernorStateConflictError);
    expect(actuator.apply).toHaveBeenCalledOnce();
    await loop.tick(); // reloads and goes on
    expect(actuator.apply).toHaveBeenCalledTimes(2);
  });

  it('ticks until the time runs out, emits a TickFailed metric for a failing tick and ends in an error', async () => {
    let now = 0;
    let calls = 0;
    const loop = {
      lastDecision: undefined,
      beginInvocation: () => undefined,
      tick: vi.fn(async () => {
        calls += 1;
        if (calls === 2) throw new Error('UpdateEventSourceMapping throttled');
        return idleTick(now);
      }),
    };
    const documents: EmfDocument[] = [];
    const metrics = createMetrics({
      namespace: 'CaptchaFleet',
      serviceName: 'governor',
      sink: (d) => documents.push(d),
    });
    const errors: string[] = [];
    const run = runTicks({
      loop,
      tickMs: 10_000,
      remainingMs: () => 55_000 - now,
      sleep: async (ms) => {
        now += ms;
      },
      clock: () => now,
      metrics,
      log: { info: () => {}, warn: () => {}, error: (m) => errors.push(m) },
    });
    const failure = await run.catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(GovernorTickError);
    expect((failure as GovernorTickError).ticks).toBe(6); // at 0, 10, 20, 30, 40, 50 s of a 55 s invocation
    expect((failure as GovernorTickError).failures).toBe(1);
    expect(errors).toHaveLength(1);
    const names = documents.flatMap((d) => d._aws.CloudWatchMetrics.flatMap((c) => c.Metrics.map((m) => m.Name)));
    expect(names.filter((n) => n === 'TickFailed')).toHaveLength(1);
    expect(names.filter((n) => n === 'Decision')).toHaveLength(5);
    const decisionDoc = documents.find((d) => d._aws.CloudWatchMetrics[0]!.Metrics.some((m) => m.Name === 'Decision'))!;
    expect(decisionDoc.Reason).toBe('IDLE');
    expect(decisionDoc.service).toBe('governor');
  });

  it('sends with each tick what the parked watch did since the last one', async () => {
    const clock = { now: 0 };
    const stats = { recorded: 0, failedRounds: 0 };
    const loop = {
      lastDecision: undefined,
      beginInvocation: () => undefined,
      tick: vi.fn(async () => {
        // The watch ran between ticks: three more recorded each time, one failed round before
        // the first two ticks and none before the third.
        stats.recorded += 3;
        if (loop.tick.mock.calls.length < 3) stats.failedRounds += 1;
        return idleTick(clock.now);
      }),
    };
    const documents = await ticksOn(loop, clock, 25_000, { stats: stats as never, countSolvedNow: async () => {} });
    const values = (name: string) =>
      documents.filter((d) => name in d).map((d) => (d as Record<string, unknown>)[name]);
    expect(values('ParkedRecorded')).toEqual([3, 3, 3]);
    // Failed rounds only on the ticks that had some (no stream billed for an hour of none).
    expect(values('WatchFailedRounds')).toEqual([1, 1]);
  });

  it('reads the balance afresh at every tick, whatever the read’s round trip (a tick’s cache served the last tick’s)', async () => {
    // GIVEN ticks every 10 s on their cadence and a balance read that takes 80 ms to come back
    const readsOver = async (ttlMs: number) => {
      const clock = { now: 0 };
      let reads = 0;
      const balance = createProbingBalance(
        {
          getBalance: async () => {
            reads += 1;
            clock.now += 80;
            return 10 - reads * 0.01;
          },
        },
        { ttlMs, clock: () => clock.now },
      );
      const loop = createGovernorLoop({
        config,
        queues: { read: async () => ({ normal: { at: clock.now, visible: 40, notVisible: 3, delayed: 0 } }) },
        metrics: { read: async () => healthyMetrics },
        balance,
        actuator: lanes(),
        state: createMemoryGovernorState(),
        clock: () => clock.now,
      });
      const { ticks } = await runTicks({
        loop,
        tickMs: 10_000,
        remainingMs: () => 55_000 - clock.now,
        sleep: async (ms) => {
          clock.now += ms;
        },
        clock: () => clock.now,
      });
      return { ticks, reads };
    };
    // WHEN the governor's balance is cached for half a tick THEN each tick reads it
    const fresh = await readsOver(tickBalanceTtlMs(10_000));
    expect(fresh.reads).toBe(fresh.ticks);
    // AND cached for a whole tick, every other tick got the last one's balance (the cadence is a round trip short)
    const stale = await readsOver(10_000);
    expect(stale.reads).toBeLessThan(stale.ticks);
  });

  it('counts the solves the watch recorded before each tick reads the ledger: the price per solve learned is the provider’s where solves slow', async () => {
    // GIVEN solves that slow down, each charged $0.001 when it ends and recorded by the watch at
    // once, whose own batch adds them to the ledger's `solved` one interval (10 s) later
    const PRICE = 0.001;
    const perInterval = [40, 40, 36, 30, 24, 18, 12, 8, 5, 3, 2];
    const learnedWith = async (countBeforeTick: boolean) => {
      const clock = { now: 0 };
      let balance = 10;
      let interval = 0;
      let recorded = 0;
      const ledger = createMemoryThreadLedger({ leaseMs: 60_000, clock: () => clock.now });
      const state = createMemoryGovernorState();
      const loop = createGovernorLoop({
        config,
        queues: { read: async () => ({ normal: { at: clock.now, visible: 40, notVisible: 3, delayed: 0 } }) },
        metrics: { read: async () => healthyMetrics },
        balance: { read: async () => balance },
        threadLedger: ledger,
        actuator: lanes(),
        state,
        clock: () => clock.now,
      });
      const countSolvedNow = vi.fn(async () => {
        await ledger.countSolved(recorded);
        recorded = 0;
      });
      await runTicks({
        loop,
        tickMs: 10_000,
        remainingMs: () => (perInterval.length + 0.5) * 10_000 - clock.now,
        sleep: async (ms) => {
          // The watch's batch of the interval before reaches the ledger (its 10 s are up)…
          await ledger.countSolved(recorded);
          recorded = 0;
          // …and this interval's solves end: charged, and recorded by the watch.
          const solves = perInterval[interval++] ?? 0;
          balance -= solves * PRICE;
          recorded += solves;
          clock.now += ms;
        },
        clock: () => clock.now,
        watch: {
          stats: { recorded: 0, failedRounds: 0 } as never,
          countSolvedNow: countBeforeTick ? countSolvedNow : async () => {},
        },
      });
      return (await state.load())?.state.spend.learnedPriceUsd;
    };
    // WHEN the ticks count the watch's solves before they read THEN the price is the provider's
    expect(await learnedWith(true)).toBeCloseTo(PRICE, 9);
    // AND a count that waits for its batch sets solves against the drop an interval late: the price reads low
    expect(await learnedWith(false)).toBeLessThan(0.9 * PRICE);
  });

  it('publishes in an ordinary minute the custom metrics the bill counts, and no copy of what SQS or the consumer publish', async () => {
    // Every signal known (the thread ledger read), one decision reason, with and without the watch.
    const minute = async (watch: boolean) => {
      const clock = { now: 0 };
      const loop = createGovernorLoop({
        config,
        queues: { read: async () => ({ normal: { at: clock.now, visible: 40, notVisible: 3, delayed: 0 } }) },
        metrics: { read: async () => healthyMetrics },
        balance: { read: async () => 10 },
        threadLedger: createMemoryThreadLedger({ leaseMs: 60_000, clock: () => clock.now }),
        actuator: lanes(),
        state: createMemoryGovernorState(),
        clock: () => clock.now,
      });
      const documents = await ticksOn(
        loop,
        clock,
        55_000,
        watch ? { stats: { recorded: 0, failedRounds: 0 } as never, countSolvedNow: async () => {} } : undefined,
      );
      // A custom metric is a name and its dimensions (CloudWatch bills each pair).
      const seen = new Set<string>();
      for (const d of documents)
        for (const set of d._aws.CloudWatchMetrics)
          for (const m of set.Metrics) {
            const fields = d as unknown as Record<string, unknown>;
            seen.add([m.Name, ...set.Dimensions.flat().map((k) => `${k}=${String(fields[k])}`)].join(' '));
          }
      return [...seen];
    };
    const waiting = await minute(false);
    const parked = await minute(true);
    expect(waiting).toHaveLength(DEFAULT_COST_ASSUMPTIONS.governorMetrics);
    expect(parked).toHaveLength(DEFAULT_COST_ASSUMPTIONS.governorMetrics + PARKED_GOVERNOR_METRICS);
    const names = parked.map((m) => m.split(' ')[0]);
    expect(names).toEqual(expect.arrayContaining(['Ceiling', 'FreeThreads', 'ThreadsHeld', 'Balance', 'Decision']));
    for (const copy of ['Backlog', 'InFlight', 'P95SolveMs', 'ErrorRate']) expect(names).not.toContain(copy);
  });
});

describe('a tick whose read fails', () => {
  it("fails with that read's error once every other read has settled, their warnings said before the failure", async () => {
    // Before: the actuator's read refused at once and the tick failed while the queue read was
    // still under way; its warning came after `governor --once --json` had printed the failure.
    const config = governorConfigFrom(resolveSettings({ planThreads: 8, tickMs: 1000 }));
    const events: string[] = [];
    const loop = createGovernorLoop({
      config,
      queues: {
        read: async () => {
          await new Promise((resolve) => setTimeout(resolve, 30));
          events.push('queue read settled');
          return { normal: { at: 1_000, visible: 0, notVisible: 0, delayed: 0 } };
        },
      },
      metrics: { read: async () => undefined },
      balance: { read: async () => 10 },
      actuator: {
        read: async () => {
          throw new Error('mapping read refused');
        },
        apply: async () => ({ changes: [] }),
      },
      state: createMemoryGovernorState(),
      clock: () => 1_000,
    });
    await expect(loop.tick()).rejects.toThrow('mapping read refused');
    events.push('tick failed');
    expect(events).toEqual(['queue read settled', 'tick failed']);
  });
});
