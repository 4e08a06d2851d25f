/**
 * The two consumer lanes on the emulators (fauxqs, dynalite), each wired from its own environment
 * as the stack sets it, each solving through its own simulator over HTTP: the overflow consumer
 * (SOLVER_PROVIDER=overflow, the overflow key only) and the primary one. Each records its
 * provider, emits its metrics under its own service, logs as it, and counts its threads and
 * solves in its own ledger item; neither key shows anywhere.
 */
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import type { EmfDocument } from '../../functions/adapters/metrics.js';
import { createCarrySeal } from '../../functions/adapters/carry-seal.js';
import { createLocalEventStream, type LocalEventStream } from '../../functions/adapters/completion-events.js';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { createDynamoThreadLedger } from '../../functions/adapters/thread-ledger.js';
import { createConsumerFromEnvironment } from '../../functions/consumer/wiring.js';
import { OVERFLOW_LEDGER_ID, THREAD_LEDGER_ID } from '../../functions/core/deployment.js';
import { ENV, parseEnvironment } from '../../functions/core/environment.js';
import { METRICS } from '../../functions/core/metric-names.js';
import { createAdaptivePollSchedule } from '../../functions/core/poll-schedule.js';
import type { SolverProvider } from '../../functions/core/provider.js';
import type { TaskResult } from '../../functions/core/results.js';
import { carryText, REDELIVERY_ATTRIBUTE } from '../../functions/core/redelivery.js';
import { parseTask } from '../../functions/core/task.js';
import { createSolverSimulator, type SolverSimulator } from '../../local/solver-sim/index.js';
import { captureLogs, imageTask, TEST_SOLVER_KEY } from '../helpers/factories.js';
import {
  deliver,
  sendMessage,
  startEmulatorFixture,
  type EmulatorFixture,
  type TestFleet,
} from '../helpers/fleet-fixture.js';

const PRIMARY_KEY = TEST_SOLVER_KEY;
const OVERFLOW_KEY = 'fedcba9876543210fedcba9876543210';
/** The simulators answer at once; polls tens of ms apart keep each solve short. */
const FAST_POLLS = { image: { firstPollMs: 20, intervalMs: 20 }, token: { firstPollMs: 20, intervalMs: 20 } };
/** The overflow block's `minSolveSeconds`, ms: well above the simulators' instant answers and the fast polls. */
const OVERFLOW_MIN_SOLVE_MS = 300;

let fixture: EmulatorFixture;
let sims: SolverSimulator[] = [];
let logs: ReturnType<typeof captureLogs> | undefined;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});
afterEach(async () => {
  logs?.restore();
  logs = undefined;
  vi.unstubAllEnvs();
  await Promise.all(sims.map((sim) => sim.close()));
  sims = [];
});

async function simulator(key: string, dialect: 'captchaai' | '2captcha'): Promise<SolverSimulator & { url: string }> {
  const sim = createSolverSimulator({ seed: 9, medianMs: 0, dialect, validKeys: [key] });
  sims.push(sim);
  await sim.listen();
  return sim as SolverSimulator & { url: string };
}

/** A fleet with an overflow provider, both simulators, and a way to wire either lane's consumer. */
async function twoLanes() {
  const primarySim = await simulator(PRIMARY_KEY, 'captchaai');
  const overflowSim = await simulator(OVERFLOW_KEY, '2captcha');
  const config = {
    solverBaseUrl: primarySim.url,
    // The overflow consumer reads no answer sooner than this after submitting (its budget's bound).
    overflow: {
      baseUrl: overflowSim.url,
      capUsdPerHour: 1,
      capUsdPerDay: 10,
      priceHintUsd: 0.003,
      minSolveSeconds: OVERFLOW_MIN_SOLVE_MS / 1000,
    },
  };
  const fleet = await fixture.createFleet(config);
  // Logger lines at every level (the solver client's debug lines too), captured from stdout/stderr.
  vi.stubEnv('POWERTOOLS_LOG_LEVEL', 'DEBUG');
  logs = captureLogs();
  const metrics: Record<SolverProvider, EmfDocument[]> = { primary: [], overflow: [] };
  const events: Record<SolverProvider, LocalEventStream> = {
    primary: createLocalEventStream({ includeAnswer: false }),
    overflow: createLocalEventStream({ includeAnswer: false }),
  };
  const consumer = async (provider: SolverProvider) =>
    createConsumerFromEnvironment({
      // The variables each function gets: the overflow consumer holds only the overflow key.
      environment: parseEnvironment({
        [ENV.config]: JSON.stringify({ ...config, prefix: fleet.settings.prefix }),
        [ENV.normalQueueUrl]: fleet.resources.queueUrls.normal,
        [ENV.dlqUrl]: fleet.resources.queueUrls.dlq,
        [ENV.resultsTable]: fleet.resources.tables.results,
        [ENV.governorTable]: fleet.resources.tables.governor,
        ...(provider === 'overflow'
          ? { [ENV.solverProvider]: 'overflow', [ENV.overflowKey]: OVERFLOW_KEY }
          : // The primary holds the overflow key too: to resume what the overflow lane paid for.
            { [ENV.solverKey]: PRIMARY_KEY, [ENV.overflowKey]: OVERFLOW_KEY }),
      }),
      clients: fleet.clients,
      metricsSink: (document) => metrics[provider].push(document),
      events: events[provider],
      pollSchedule: createAdaptivePollSchedule({ pollDefaults: FAST_POLLS }),
    });
  return { fleet, primarySim, overflowSim, metrics, events, consumer };
}

function repositoryOf(fleet: TestFleet): DynamoResultsRepository {
  return new DynamoResultsRepository({
    documents: fleet.clients.documents,
    tableName: fleet.resources.tables.results,
    ttlSeconds: fleet.settings.resultTtlSeconds,
  });
}

/** The task claimed a minute ago by a holder of `provider`'s lane that died (claim token `dead`, its lease long out). */
async function claimedByTheDead(
  fleet: TestFleet,
  task: Parameters<DynamoResultsRepository['claim']>[0]['task'],
  provider: SolverProvider,
): Promise<DynamoResultsRepository> {
  const repository = repositoryOf(fleet);
  await repository.claim({ task, claimToken: 'dead', now: Date.now() - 60_000, leaseMs: 1_000, provider });
  return repository;
}

async function record(fleet: TestFleet, taskId: string): Promise<TaskResult | undefined> {
  const read = await fleet.clients.documents.send(
    new GetCommand({ TableName: fleet.resources.tables.results, Key: { taskId }, ConsistentRead: true }),
  );
  return read.Item as TaskResult | undefined;
}

async function ledgerItem(fleet: TestFleet, id: string): Promise<Record<string, unknown> | undefined> {
  const read = await fleet.clients.documents.send(
    new GetCommand({ TableName: fleet.resources.tables.governor, Key: { id }, ConsistentRead: true }),
  );
  return read.Item;
}

function ledger(fleet: TestFleet, id: string) {
  return createDynamoThreadLedger({
    documents: fleet.clients.documents,
    tableName: fleet.resources.tables.governor,
    leaseMs: fleet.settings.functionTimeoutSeconds * 1000,
    id,
  });
}

/** The `service` dimension of every EMF document. */
const servicesOf = (documents: EmfDocument[]) => new Set(documents.map((document) => document.service));

describe('the overflow consumer', () => {
  it('solves through the overflow provider: its record, metrics, logs and ledger say overflow', async () => {
    // Prepare
    const lanes = await twoLanes();
    const handler = await lanes.consumer('overflow');
    const task = imageTask();
    await sendMessage(lanes.fleet.clients, lanes.fleet.resources.queueUrls.normal, JSON.stringify(task));

    // Act
    const delivery = await deliver(lanes.fleet, handler);

    // Assess: solved on the overflow provider, never on the plan
    expect(delivery.response).toEqual({ batchItemFailures: [] });
    expect(await record(lanes.fleet, task.id as string)).toMatchObject({
      status: 'solved',
      provider: 'overflow',
      attempts: 1,
    });
    expect(lanes.overflowSim.stats()).toMatchObject({ accepted: 1, solved: 1, keyRejections: 0 });
    expect(lanes.primarySim.stats()).toMatchObject({ submissions: 0 });
    // Metrics under its own service, which the governor reads apart from the plan's
    expect(lanes.metrics.overflow.some((document) => METRICS.solved in document)).toBe(true);
    expect(servicesOf(lanes.metrics.overflow)).toEqual(new Set(['consumer-overflow']));
    // Its log lines say which consumer wrote them
    const lines = logs?.entries() ?? [];
    expect(lines.some((line) => line.message === 'task solved')).toBe(true);
    expect(new Set(lines.map((line) => line.service))).toEqual(new Set(['consumer-overflow']));
    // Its ledger item: the thread back, the solve counted; the plan's ledger untouched
    expect(await ledger(lanes.fleet, OVERFLOW_LEDGER_ID).read()).toMatchObject({ held: 0, acceptances: 1, solved: 1 });
    expect(await ledgerItem(lanes.fleet, THREAD_LEDGER_ID)).toBeUndefined();
    // The completion event says who solved it
    expect(lanes.events.overflow.published).toBe(1);
  });

  it("reads no answer sooner than the overflow block's minSolveSeconds, so a slot starts no solve faster than its budget assumes", async () => {
    // Prepare: both simulators answer at once; both consumers poll every 20 ms.
    const lanes = await twoLanes();
    const [overflow, primary] = await Promise.all([lanes.consumer('overflow'), lanes.consumer('primary')]);
    const [first, second] = [imageTask(), imageTask()];
    const queue = lanes.fleet.resources.queueUrls.normal;

    // Act
    await sendMessage(lanes.fleet.clients, queue, JSON.stringify(first));
    await deliver(lanes.fleet, overflow);
    await sendMessage(lanes.fleet.clients, queue, JSON.stringify(second));
    await deliver(lanes.fleet, primary);

    // Assess: accepted → answer read takes the bound on overflow, well under it on the plan.
    const [spilled, planned] = [
      await record(lanes.fleet, first.id as string),
      await record(lanes.fleet, second.id as string),
    ];
    expect(spilled).toMatchObject({ status: 'solved', provider: 'overflow' });
    expect(spilled?.solveMs).toBeGreaterThanOrEqual(OVERFLOW_MIN_SOLVE_MS);
    expect(planned).toMatchObject({ status: 'solved', provider: 'primary' });
    expect(planned?.solveMs).toBeLessThan(OVERFLOW_MIN_SOLVE_MS);
  });

  it('and the primary consumer beside it record their own provider, service and ledger', async () => {
    // Prepare
    const lanes = await twoLanes();
    const [overflow, primary] = await Promise.all([lanes.consumer('overflow'), lanes.consumer('primary')]);
    const [first, second] = [imageTask(), imageTask()];
    const heard: Array<{ id: string; provider: unknown }> = [];
    for (const provider of ['overflow', 'primary'] as const)
      lanes.events[provider].subscribe((event) => heard.push({ id: event.id, provider: event.provider }));
    const queue = lanes.fleet.resources.queueUrls.normal;

    // Act: one task through each lane
    await sendMessage(lanes.fleet.clients, queue, JSON.stringify(first));
    await deliver(lanes.fleet, overflow);
    await sendMessage(lanes.fleet.clients, queue, JSON.stringify(second));
    await deliver(lanes.fleet, primary);

    // Assess
    expect((await record(lanes.fleet, first.id as string))?.provider).toBe('overflow');
    expect((await record(lanes.fleet, second.id as string))?.provider).toBe('primary');
    expect(heard).toEqual([
      { id: first.id, provider: 'overflow' },
      { id: second.id, provider: 'primary' },
    ]);
    expect(servicesOf(lanes.metrics.primary)).toEqual(new Set(['consumer']));
    expect(servicesOf(lanes.metrics.overflow)).toEqual(new Set(['consumer-overflow']));
    expect(await ledger(lanes.fleet, THREAD_LEDGER_ID).read()).toMatchObject({ held: 0, acceptances: 1, solved: 1 });
    expect(await ledger(lanes.fleet, OVERFLOW_LEDGER_ID).read()).toMatchObject({ held: 0, acceptances: 1, solved: 1 });
    expect([lanes.primarySim.stats().solved, lanes.overflowSim.stats().solved]).toEqual([1, 1]);
  });

  it('never pays the overflow provider for a task the plan holds a submission for: it hands it back', async () => {
    // Prepare: the primary consumer claimed and submitted, then died (its lease ran out)
    const lanes = await twoLanes();
    const handler = await lanes.consumer('overflow');
    const message = imageTask();
    const parsed = parseTask(JSON.stringify(message), 'unused', Date.now());
    if (!parsed.ok) throw new Error('invalid test task');
    const repository = repositoryOf(lanes.fleet);
    const leftAt = Date.now() - 60_000;
    await repository.claim({ task: parsed.task, claimToken: 'dead', now: leftAt, leaseMs: 1_000, provider: 'primary' });
    await repository.recordSolverId(parsed.task.id, 'dead', '424242', 'primary');
    await sendMessage(lanes.fleet.clients, lanes.fleet.resources.queueUrls.normal, JSON.stringify(message));

    // Act: the message comes back on the overflow lane
    const delivery = await deliver(lanes.fleet, handler);

    // Assess: handed back for the plan's lane, nothing submitted at the overflow provider
    expect(delivery.response.batchItemFailures).toHaveLength(1);
    expect(lanes.overflowSim.stats()).toMatchObject({ submissions: 0 });
    expect(await record(lanes.fleet, parsed.task.id)).toMatchObject({ status: 'solving', solverId: '424242' });
    expect(logs?.raw.join('')).toContain('held_elsewhere');
  });

  it('hands back a copy carrying the plan’s submission with the orphan wait, so the original, back without the id, pays nothing', async () => {
    // Prepare: the primary consumer submitted, the table would not take the id, so it put the id
    // in a fresh copy (sealed with the primary key) and died; the original's delete was lost too.
    // Found by a drawn run (`npm start -- --seed 20020 … --crash-rate 0.1 --faults random:7577@60
    // --overflow-sim`): the overflow lane took the copy, handed it back with a plain release, took
    // the original 170 ms later and paid the overflow provider for a task the plan had paid for.
    const lanes = await twoLanes();
    const handler = await lanes.consumer('overflow');
    const message = imageTask();
    const body = JSON.stringify(message);
    const parsed = parseTask(body, 'unused', Date.now());
    if (!parsed.ok) throw new Error('invalid test task');
    await claimedByTheDead(lanes.fleet, parsed.task, 'primary');
    const fields = { provider: 'primary' as const, solverId: '424242', acceptedAt: Date.now() - 59_000 };
    const seal = createCarrySeal({ primary: async () => PRIMARY_KEY });
    const mac = await seal.seal('primary', carryText(body, parsed.task.id, fields));
    const copy = {
      v: 1,
      taskId: parsed.task.id,
      sentAt: Date.now() - 60_000,
      firstReceivedAt: Date.now() - 60_000,
      generation: 0,
      waits: 0,
      carry: { ...fields, mac },
    };
    await lanes.fleet.clients.sqs.send(
      new SendMessageCommand({
        QueueUrl: lanes.fleet.resources.queueUrls.normal,
        MessageBody: body,
        MessageAttributes: { [REDELIVERY_ATTRIBUTE]: { DataType: 'String', StringValue: JSON.stringify(copy) } },
      }),
    );

    // Act: the copy comes to the overflow lane first, then the original
    const first = await deliver(lanes.fleet, handler);
    expect(first.messages).toHaveLength(1);
    expect(logs?.raw.join('')).toContain('held_elsewhere');
    expect(await record(lanes.fleet, parsed.task.id)).toMatchObject({ orphanWaitAt: expect.any(Number) });
    // The copy it put back is delayed a second: this delivery is the original's alone.
    await sendMessage(lanes.fleet.clients, lanes.fleet.resources.queueUrls.normal, body);
    const second = await deliver(lanes.fleet, handler);
    expect(second.messages.map((m) => m.MessageAttributes?.[REDELIVERY_ATTRIBUTE])).toEqual([undefined]);

    // Assess: the original waits for the copy; nothing paid at the overflow provider
    expect(lanes.overflowSim.stats()).toMatchObject({ submissions: 0 });
    expect(logs?.raw.join('')).toContain('orphan_wait');
    expect((await record(lanes.fleet, parsed.task.id))?.solverId).toBeUndefined();
  });

  it('lets the primary consumer finish, at the overflow provider, a task the overflow lane paid for and left', async () => {
    // Prepare: the overflow lane submitted (a real submission at its simulator), then died
    const lanes = await twoLanes();
    const handler = await lanes.consumer('primary');
    const message = imageTask();
    const parsed = parseTask(JSON.stringify(message), 'unused', Date.now());
    if (!parsed.ok) throw new Error('invalid test task');
    const submitted = await request(`${lanes.overflowSim.url}/in.php`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        key: OVERFLOW_KEY,
        method: 'base64',
        body: (parsed.task.params as { body: string }).body,
        json: '1',
      }).toString(),
    });
    const solverId = String(((await submitted.body.json()) as { request: unknown }).request);
    const repository = await claimedByTheDead(lanes.fleet, parsed.task, 'overflow');
    await repository.recordSolverId(parsed.task.id, 'dead', solverId, 'overflow');
    await sendMessage(lanes.fleet.clients, lanes.fleet.resources.queueUrls.normal, JSON.stringify(message));

    // Act: the message comes back on the primary lane
    const delivery = await deliver(lanes.fleet, handler);

    // Assess: resumed there, one submission in all, solved by the overflow provider
    expect(delivery.response).toEqual({ batchItemFailures: [] });
    expect(await record(lanes.fleet, parsed.task.id)).toMatchObject({
      status: 'solved',
      provider: 'overflow',
      solverId,
      attempts: 2,
    });
    expect(lanes.overflowSim.stats()).toMatchObject({ submissions: 1, solved: 1 });
    expect(lanes.primarySim.stats()).toMatchObject({ submissions: 0 });
  });

  it('never shows either key: not in records, events, log lines or metrics', async () => {
    // Prepare
    const lanes = await twoLanes();
    const [overflow, primary] = await Promise.all([lanes.consumer('overflow'), lanes.consumer('primary')]);
    const published: unknown[] = [];
    for (const provider of ['overflow', 'primary'] as const) lanes.events[provider].subscribe((e) => published.push(e));
    const tasks = [imageTask(), imageTask()];
    const queue = lanes.fleet.resources.queueUrls.normal;

    // Act
    await sendMessage(lanes.fleet.clients, queue, JSON.stringify(tasks[0]));
    await deliver(lanes.fleet, overflow);
    await sendMessage(lanes.fleet.clients, queue, JSON.stringify(tasks[1]));
    await deliver(lanes.fleet, primary);

    // Assess: something of each was captured, and no key is in it
    const records = await Promise.all(tasks.map((task) => record(lanes.fleet, task.id as string)));
    expect(records.map((r) => r?.provider)).toEqual(['overflow', 'primary']);
    const captured = {
      records: JSON.stringify(records),
      events: JSON.stringify(published),
      logs: (logs?.raw ?? []).join(''),
      metrics: JSON.stringify([...lanes.metrics.overflow, ...lanes.metrics.primary]),
      ledgers: JSON.stringify([
        await ledgerItem(lanes.fleet, OVERFLOW_LEDGER_ID),
        await ledgerItem(lanes.fleet, THREAD_LEDGER_ID),
      ]),
    };
    expect(captured.logs).toContain('"level":"DEBUG"');
    expect(published).toHaveLength(2);
    for (const [where, text] of Object.entries(captured)) {
      expect(text.length, where).toBeGreaterThan(0);
      expect(text, where).not.toContain(PRIMARY_KEY);
      expect(text, where).not.toContain(OVERFLOW_KEY);
    }
  });
});
