/**
 * The parked design end to end on the emulators, through the real handler, the real solver client
 * against the protocol simulator, the real leases table and the governor's real watch: a task
 * parks (its message hidden, its id on the record, its thread leased), the watch hands it back
 * once the answer is ready, a second short delivery records it; the leases hold the thread cap
 * however many invocations run at once.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { ChangeMessageVisibilityCommand } from '@aws-sdk/client-sqs';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLocalEventStream } from '../../functions/adapters/completion-events.js';
import { createParkedRecorder } from '../../functions/adapters/parked-recorder.js';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { SqsTaskQueue } from '../../functions/adapters/task-queue.js';
import { createDynamoThreadLeases, leaseLengthMs, PRIMARY_LEASE_LANE } from '../../functions/adapters/thread-leases.js';
import { createDynamoThreadLedger, THREAD_LEDGER_ID, threadLeaseMs } from '../../functions/adapters/thread-ledger.js';
import { createDynamoSolveWindow } from '../../functions/adapters/solve-window.js';
import { createCarrySeal } from '../../functions/adapters/carry-seal.js';
import { solveWindowSlotIds, WINDOW_SETTLE_MS } from '../../functions/core/solve-window.js';
import { createRecordingWatch } from '../../functions/governor/recording-watch.js';
import { SolverTransientError } from '../../functions/core/solver-protocol.js';
import type { SolverPort } from '../../functions/core/ports.js';
import { createConsumerHandler } from '../../functions/consumer/create-handler.js';
import { createRedactor } from '../../functions/core/redaction.js';
import { shardKeys } from '../../functions/core/thread-leases.js';
import { createParkedWatch } from '../../functions/governor/parked-watch.js';
import { FAST_TIMING, simulatedSolvers } from '../helpers/simulated-solver.js';
import { captureLogs, captureMetrics, recaptchaTask, TEST_SOLVER_KEY } from '../helpers/factories.js';
import {
  deliver,
  type EmulatorFixture,
  queueDepth,
  receive,
  sendMessage,
  sleep,
  startEmulatorFixture,
  type TestFleet,
} from '../helpers/fleet-fixture.js';

const FAST = FAST_TIMING;
const solverOn = simulatedSolvers();

let fixture: EmulatorFixture;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});

async function parkedFleet(options: { planThreads: number; medianMs: number; limit?: number }) {
  const fleet: TestFleet = await fixture.createFleet({ planThreads: options.planThreads, solveDeadlineSeconds: 30 });
  const { sim, solver } = await solverOn({ seed: 11, medianMs: options.medianMs });
  const { settings, resources, clients } = fleet;
  const leases = createDynamoThreadLeases({ documents: clients.documents, tableName: resources.tables.leases });
  const shards = shardKeys(PRIMARY_LEASE_LANE, settings.effectiveCap);
  if (options.limit !== undefined) await leases.setLimit(shards[0] as string, options.limit);
  const repository = new DynamoResultsRepository({
    documents: clients.documents,
    tableName: resources.tables.results,
    ttlSeconds: 3600,
  });
  const sourceQueueUrls = [resources.queueUrls.normal, resources.queueUrls.high];
  const queue = new SqsTaskQueue({ sqs: clients.sqs, dlqUrl: resources.queueUrls.dlq, sourceQueueUrls });
  const captured = captureMetrics(settings.metricsNamespace);
  // The thread ledger on the governor table, as the consumer's wiring builds it (the grant is read from it).
  const ledger = createDynamoThreadLedger({
    documents: clients.documents,
    tableName: resources.tables.governor,
    leaseMs: threadLeaseMs(settings),
  });
  // …and the metric window the governor reads in the parked design, on the same table.
  const window = createDynamoSolveWindow({
    documents: clients.documents,
    tableName: resources.tables.governor,
    ledgerId: THREAD_LEDGER_ID,
  });
  // The governor's read of it once this minute is whole and settled (the window is the last two
  // whole minutes): what the test has written so far, whichever minute it is.
  const windowRead = () =>
    createDynamoSolveWindow({
      documents: clients.documents,
      tableName: resources.tables.governor,
      ledgerId: THREAD_LEDGER_ID,
      clock: () => Date.now() + 60_000 + WINDOW_SETTLE_MS,
    }).read();
  const handlerOn = (port: SolverPort) =>
    createConsumerHandler({
      solver: port,
      repository,
      queue,
      metrics: captured.metrics,
      logger: new Logger({ serviceName: 'consumer', logLevel: 'SILENT' }),
      settings,
      timing: FAST,
      leases: { leases, shards, planCap: settings.effectiveCap, leaseMs: leaseLengthMs(settings) },
      threadLedger: ledger,
      solveWindow: window,
    });
  const handler = handlerOn(solver);
  const watch = createParkedWatch({ leases, shards, results: repository, solver, queue, settleMs: 0 });
  const events = createLocalEventStream({ includeAnswer: false });
  const recorder = createParkedRecorder({
    repository,
    solver,
    queue,
    events,
    metrics: captured.metrics,
    redactor: createRedactor([TEST_SOLVER_KEY]),
  });
  const recordingWatch = createParkedWatch({
    leases,
    shards,
    results: repository,
    solver,
    queue,
    recorder,
    settleMs: 0,
  });
  const send = (task = recaptchaTask()) =>
    sendMessage(clients, resources.queueUrls.normal, JSON.stringify(task)).then(() => task.id as string);
  // As the governor's wiring builds it: the recorded tasks' messages deleted ten to a request (the
  // rest only when flushed here: no partial batch falls due during a test).
  const batched = createRecordingWatch({
    leases,
    shards,
    results: repository,
    solver,
    queue,
    events,
    metrics: captured.metrics,
    redactor: createRedactor([TEST_SOLVER_KEY]),
    window,
    batchMs: 600_000,
    cadence: { settleMs: 0 },
  });
  const { deletes, windowBatch } = batched;
  const batchedWatch = batched.watch;
  return {
    fleet,
    sim,
    leases,
    shards,
    repository,
    ledger,
    handler,
    handlerOn,
    window,
    windowRead,
    windowBatch,
    solver,
    watch,
    recordingWatch,
    batchedWatch,
    deletes,
    events,
    send,
    captured,
  };
}

describe('parked design on the emulators', () => {
  it('parks a task, hands it back once ready, and records it in a second short delivery', async () => {
    // Prepare
    const f = await parkedFleet({ planThreads: 10, medianMs: 150 });
    const id = await f.send();
    // Act: the first delivery submits and parks.
    const first = await deliver(f.fleet, f.handler);
    // Assess: left in flight (not deleted), hidden, its thread leased, its id on the record, no claim.
    expect(first.failed).toEqual(first.messages.map((m) => m.MessageId));
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 0, inFlight: 1 });
    const [view] = await f.leases.views(f.shards);
    expect(view?.slots.map((s) => s.taskId)).toEqual([id]);
    const parked = await f.repository.get(id, { consistent: true });
    expect(parked).toMatchObject({ status: 'solving', solverId: expect.any(String), leaseUntil: 0 });
    expect(parked?.claimToken).toBeUndefined();
    expect(parked?.solverAcceptedAt).toEqual(expect.any(Number));
    // Act: the watch's rounds until the answer is ready.
    for (let round = 0; round < 40 && f.watch.stats.released === 0; round++) {
      await f.watch.round();
      await sleep(25);
    }
    // Assess: the lease is free and the message visible again.
    expect(f.watch.stats.released).toBe(1);
    expect((await f.leases.views(f.shards))[0]?.slots).toEqual([]);
    expect((await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).visible).toBe(1);
    // Act: the second delivery resumes the submission and records its answer.
    const second = await deliver(f.fleet, f.handler);
    // Assess: solved once, paid once; the solve measured from the acceptance, not the resume.
    expect(second.acknowledged).toHaveLength(1);
    const done = await f.repository.get(id, { consistent: true });
    expect(done).toMatchObject({ status: 'solved', solverId: parked?.solverId, answer: expect.any(String) });
    expect(done?.solveMs ?? 0).toBeGreaterThan(0);
    expect(f.sim.stats().submissions).toBe(1);
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 0, inFlight: 0 });
  });

  it.each([
    ['used up: the task goes back without a submission', 0, false],
    ['not used up: the task parks', 1, true],
  ] as const)('reads the spend grant before a fresh submission; %s', async (_, limit, parks) => {
    // Prepare: the governor's grant in the ledger, in force for a minute (no acceptance counted yet)
    const f = await parkedFleet({ planThreads: 10, medianMs: 5_000 });
    await f.ledger.setGrant({ limit, until: Date.now() + 60_000 });
    const id = await f.send();
    // Act
    const startedAt = Date.now();
    const result = await deliver(f.fleet, f.handler);
    // Assess: both leave the message in flight; only the paid-for one reached the solver and holds a lease.
    expect(result.failed).toHaveLength(1);
    expect(f.sim.stats().submissions).toBe(parks ? 1 : 0);
    const slots = (await f.leases.views(f.shards)).flatMap((view) => view.slots);
    expect(slots.map((s) => s.taskId)).toEqual(parks ? [id] : []);
    const record = await f.repository.get(id, { consistent: true });
    if (parks) expect(record).toMatchObject({ status: 'solving', solverId: expect.any(String), leaseUntil: 0 });
    else {
      expect(record?.solverId).toBeUndefined();
      // It waited for a new grant (FAST's maxWaitMs) before handing the task back.
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(FAST.overCapWaiting?.maxWaitMs ?? 0);
    }
  });

  it('takes the grant’s reservation once it holds its thread lease: a delivery waiting for a slot holds none', async () => {
    // Prepare: the shard's one slot held by a parked task, then a grant of two more solves
    const f = await parkedFleet({ planThreads: 10, medianMs: 150, limit: 1 });
    await f.send();
    await deliver(f.fleet, f.handler);
    await f.ledger.setGrant({ limit: 2, until: Date.now() + 60_000 });
    const id = await f.send();
    // Act: a second delivery passes the grant's check and waits for the slot
    const second = deliver(f.fleet, f.handler);
    await sleep(400);
    // Assess: no reservation while it waits (the governor's grant counts the leases as the solves
    // in flight; a reservation taken before the slot would be counted in neither)
    expect((await f.ledger.read())?.grantTaken).toBe(0);
    expect(f.sim.stats().submissions).toBe(1);
    // Act: the watch frees the slot once the first answer is ready
    for (let round = 0; round < 40 && f.watch.stats.released === 0; round++) {
      await f.watch.round();
      await sleep(25);
    }
    await second;
    // Assess: it took the slot, then one reservation, and parked
    expect((await f.ledger.read())?.grantTaken).toBe(1);
    expect(f.sim.stats().submissions).toBe(2);
    const slots = (await f.leases.views(f.shards)).flatMap((view) => view.slots);
    expect(slots.map((slot) => slot.taskId)).toEqual([id]);
  });

  it('records a ready parked task in the watch itself: no second delivery, the message deleted, the event out once', async () => {
    // Prepare
    const f = await parkedFleet({ planThreads: 10, medianMs: 150 });
    const heard: string[] = [];
    f.events.subscribe((event) => heard.push(event.id));
    const id = await f.send();
    await deliver(f.fleet, f.handler);
    const parked = await f.repository.get(id, { consistent: true });
    // Act
    for (let round = 0; round < 40 && f.recordingWatch.stats.recorded === 0; round++) {
      await f.recordingWatch.round();
      await sleep(25);
    }
    // Assess
    expect(f.recordingWatch.stats.recorded).toBe(1);
    const done = await f.repository.get(id, { consistent: true });
    expect(done).toMatchObject({ status: 'solved', solverId: parked?.solverId, attempts: 1 });
    expect(done?.completedBy).toMatch(/^watch:/);
    expect(done?.solveMs ?? 0).toBeGreaterThan(0);
    // Every record has its queue wait (docs/consumer.md): the park kept it, the watch carried it on.
    expect(parked?.queueWaitMs).toEqual(expect.any(Number));
    expect(done?.queueWaitMs).toBe(parked?.queueWaitMs);
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 0, inFlight: 0 });
    expect((await f.leases.views(f.shards))[0]?.slots).toEqual([]);
    expect(heard).toEqual([id]);
    expect(f.sim.stats().submissions).toBe(1);
  });

  it('deletes the recorded tasks’ messages ten to a request: gone once the watch flushes, each event out once', async () => {
    // Prepare: twelve parked tasks.
    const f = await parkedFleet({ planThreads: 20, medianMs: 150 });
    const heard: string[] = [];
    f.events.subscribe((event) => heard.push(event.id));
    const ids: string[] = [];
    for (let n = 0; n < 12; n++) ids.push(await f.send());
    for (let n = 0; n < 12; n++) await deliver(f.fleet, f.handler, { max: 1 });
    // Act: rounds until all are recorded, then the flush the end of a run does.
    for (let round = 0; round < 80 && f.batchedWatch.stats.recorded < 12; round++) {
      await f.batchedWatch.round();
      await sleep(25);
    }
    await f.batchedWatch.flushSolved();
    // Assess: every message deleted, in two requests (ten and two), every task solved and announced once.
    expect(f.batchedWatch.stats.recorded).toBe(12);
    expect(f.deletes.stats).toEqual({ requests: 2, deleted: 12, failed: 0 });
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 0, inFlight: 0 });
    const records = await Promise.all(ids.map((id) => f.repository.get(id, { consistent: true })));
    expect(records.every((r) => r?.status === 'solved')).toBe(true);
    expect([...heard].sort()).toEqual([...ids].sort());
    expect(f.sim.stats().submissions).toBe(12);
  });

  it('feeds the governor’s metric window: the watch’s solves in one write, the submissions from the ledger, no write by an ordinary delivery', async () => {
    // Prepare: twelve parked tasks.
    const f = await parkedFleet({ planThreads: 20, medianMs: 150 });
    for (let n = 0; n < 12; n++) await f.send();
    for (let n = 0; n < 12; n++) await deliver(f.fleet, f.handler, { max: 1 });
    const slots = async () => {
      const { clients, resources } = f.fleet;
      const items = await Promise.all(
        solveWindowSlotIds(THREAD_LEDGER_ID).map((id) =>
          clients.documents.send(
            new GetCommand({ TableName: resources.tables.governor, Key: { id }, ConsistentRead: true }),
          ),
        ),
      );
      return items.filter((out) => out.Item !== undefined).length;
    };
    // Twelve parked deliveries wrote nothing to the window (their submissions are the ledger's).
    expect(await slots()).toBe(0);
    expect(await f.windowRead()).toMatchObject({ submissions: 12, solved: 0, transientErrors: 0 });
    // Act: the watch records them all and flushes.
    for (let round = 0; round < 80 && f.batchedWatch.stats.recorded < 12; round++) {
      await f.batchedWatch.round();
      await sleep(25);
    }
    await f.batchedWatch.flushSolved();
    // Assess: one write (one batch), the twelve solves and their times in the window.
    expect(f.windowBatch?.stats).toEqual({ writes: 1, counted: 12, failed: 0 });
    const read = await f.windowRead();
    expect(read).toMatchObject({ submissions: 12, solved: 12, failed: 0 });
    expect(read?.meanSolveMs ?? 0).toBeGreaterThan(0);
    expect(read?.p95SolveMs ?? 0).toBeGreaterThanOrEqual(read?.meanSolveMs ?? 0);
  });

  it('counts a submission the solver answered with a transient error in the window, from the delivery that saw it', async () => {
    // Prepare: a solver whose first in.php answer is a transient error.
    const f = await parkedFleet({ planThreads: 10, medianMs: 150 });
    let failedOnce = false;
    const real = f.solver as SolverPort & Required<Pick<SolverPort, 'submit'>>;
    const flaky = new Proxy(real, {
      get(target, name, receiver) {
        if (name !== 'submit') return Reflect.get(target, name, receiver);
        return async (task: Parameters<typeof real.submit>[0], options: Parameters<typeof real.submit>[1]) => {
          if (failedOnce) return real.submit(task, options);
          failedOnce = true;
          options.onSolverAnswer?.({ request: 'submit', outcome: 'transient', code: 'ERROR_503' });
          throw new SolverTransientError('ERROR_503', { taskId: task.id, message: 'solver busy' });
        };
      },
    });
    await f.send();
    await f.send();
    // Act: the first delivery meets the error and hands its task back; the second parks its own.
    await deliver(f.fleet, f.handlerOn(flaky), { max: 1 });
    await deliver(f.fleet, f.handlerOn(flaky), { max: 1 });
    // Assess: two submissions (the error answer and the accepted one), one transient error.
    const read = await f.windowRead();
    expect(read).toMatchObject({ submissions: 2, transientErrors: 1, overCapAnswers: 0 });
  });

  it('parks a task whose id the table took too slowly: the id goes in a fresh copy, and the gone original is not hidden', async () => {
    // Prepare: a table that takes the id's write (the park) only after the carry deadline.
    const f = await parkedFleet({ planThreads: 10, medianMs: 60_000 });
    const { settings } = f.fleet;
    const slowRepository = new Proxy(f.repository, {
      get(target, name, receiver) {
        if (name !== 'park') return Reflect.get(target, name, receiver);
        return async (...args: Parameters<typeof target.park>) => {
          await sleep(1_300);
          return target.park(...args);
        };
      },
    });
    const logs = captureLogs();
    const handler = createConsumerHandler({
      solver: f.solver,
      repository: slowRepository,
      queue: new SqsTaskQueue({
        sqs: f.fleet.clients.sqs,
        dlqUrl: f.fleet.resources.queueUrls.dlq,
        sourceQueueUrls: [f.fleet.resources.queueUrls.normal, f.fleet.resources.queueUrls.high],
      }),
      metrics: f.captured.metrics,
      logger: logs.logger,
      settings,
      timing: { ...FAST, solverIdCarryAfterMs: 1_000 },
      leases: { leases: f.leases, shards: f.shards, planCap: settings.effectiveCap, leaseMs: leaseLengthMs(settings) },
      threadLedger: f.ledger,
      seal: createCarrySeal({ primary: async () => TEST_SOLVER_KEY }),
    });
    const id = await f.send();
    // Act
    try {
      await deliver(f.fleet, handler, { max: 1 });
    } finally {
      logs.restore();
    }
    // Assess: parked with its id on the record, the id also carried in a fresh copy, paid once, and
    // no attempt to hide the message the copy replaced.
    const messages = logs.entries().map((e) => e.message);
    expect(messages).toContain('message put back as a fresh copy');
    expect(messages).toContain('task parked until its answer is ready');
    expect(messages).not.toContain('visibility could not be changed');
    expect(await f.repository.get(id, { consistent: true })).toMatchObject({ status: 'solving' });
    expect(f.sim.stats().submissions).toBe(1);
  });

  it('deletes many messages across both lanes ten to a request', async () => {
    // Prepare: twelve messages on the normal lane, three on the high one, all received (in flight).
    const fleet = await fixture.createFleet({ planThreads: 10 });
    const { clients, resources } = fleet;
    const queue = new SqsTaskQueue({
      sqs: clients.sqs,
      dlqUrl: resources.queueUrls.dlq,
      sourceQueueUrls: [resources.queueUrls.normal, resources.queueUrls.high],
    });
    for (let n = 0; n < 12; n++) await sendMessage(clients, resources.queueUrls.normal, `{"n":${n}}`);
    for (let n = 0; n < 3; n++) await sendMessage(clients, resources.queueUrls.high, `{"n":${n}}`);
    const delivered = (lane: 'normal' | 'high', messages: Awaited<ReturnType<typeof receive>>) =>
      messages.map((m) => ({ eventSourceArn: resources.queueArns[lane], receiptHandle: m.ReceiptHandle ?? '' }));
    const normal = delivered('normal', [
      ...(await receive(clients, resources.queueUrls.normal, 10)),
      ...(await receive(clients, resources.queueUrls.normal, 2)),
    ]);
    const high = delivered('high', await receive(clients, resources.queueUrls.high, 3));
    // Act (the emulator takes any receipt handle, so an entry SQS refuses is counted in test/unit/delete-batch.test.ts)
    const result = await queue.acknowledgeMany([...normal, ...high]);
    // Assess: two requests for the normal lane (ten and two), one for the high one; both lanes empty.
    expect(normal).toHaveLength(12);
    expect(high).toHaveLength(3);
    expect(result).toEqual({ failed: 0, requests: 3 });
    for (const lane of ['normal', 'high'] as const)
      expect(await queueDepth(clients, resources.queueUrls[lane])).toEqual({ visible: 0, inFlight: 0 });
  });

  it('leaves a parked task to the delivery that resumed it (it holds a claim): recorded once', async () => {
    // Prepare: parked, then its message comes back (lease end) and a delivery resumes it.
    const f = await parkedFleet({ planThreads: 10, medianMs: 600 });
    const id = await f.send();
    const first = await deliver(f.fleet, f.handler);
    await f.fleet.clients.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: f.fleet.resources.queueUrls.normal,
        ReceiptHandle: first.messages[0]?.ReceiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    // Act: the resuming delivery and the watch at once.
    const resumed = deliver(f.fleet, f.handler, { remainingMs: 20_000 });
    for (let round = 0; round < 60; round++) {
      await f.recordingWatch.round();
      const record = await f.repository.get(id, { consistent: true });
      if (record?.status === 'solved') break;
      await sleep(25);
    }
    await resumed;
    // Assess: one solved record, one submission, whoever wrote it.
    const done = await f.repository.get(id, { consistent: true });
    expect(done?.status).toBe('solved');
    expect(f.sim.stats().submissions).toBe(1);
    expect(f.sim.stats().solved).toBe(1);
  });

  it('never has more submissions at the solver than slots open, however many invocations run', async () => {
    // Prepare: 3 slots open, 12 tasks, 6 invocations at once.
    const f = await parkedFleet({ planThreads: 20, medianMs: 400, limit: 3 });
    for (let i = 0; i < 12; i++) await f.send();
    const watchUntilDone = async () => {
      for (let round = 0; round < 200; round++) {
        await f.watch.round();
        const depth = await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal);
        if (depth.visible + depth.inFlight === 0) return;
        await sleep(20);
      }
    };
    // Act
    const invocations = async () => {
      for (let i = 0; i < 40; i++) {
        await Promise.all(Array.from({ length: 6 }, () => deliver(f.fleet, f.handler, { max: 1 })));
        const depth = await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal);
        if (depth.visible + depth.inFlight === 0) return;
      }
    };
    await Promise.all([invocations(), watchUntilDone()]);
    // Assess
    expect(f.sim.stats().submissions).toBe(12);
    expect(f.sim.stats().solved).toBe(12);
    expect(f.sim.stats().peakThreads).toBeLessThanOrEqual(3);
    expect(f.sim.stats().peakThreads).toBe(3);
  });

  it('takes no slot while the ledger refusal room is full, though its shard has no refusal of its own', async () => {
    // Prepare: open slots, no hold-off on the shard, but a refusal in the thread ledger a moment
    // ago while the fleet held none (others hold the whole plan: the fleet-wide room is 0)
    const f = await parkedFleet({ planThreads: 10, medianMs: 100 });
    await f.ledger.recordEvent('refusal', Date.now(), 0);
    const id = await f.send();
    // Act
    const delivery = await deliver(f.fleet, f.handler);
    // Assess: no submission into a second refusal; the task goes back with no slot taken
    expect(delivery.failed).toHaveLength(1);
    expect(f.sim.stats().submissions).toBe(0);
    expect((await f.repository.get(id, { consistent: true }))?.solverId).toBeUndefined();
    expect((await f.leases.views(f.shards))[0]?.slots).toEqual([]);
  });

  it('hands a task back without a submission when no slot opens in time', async () => {
    // Prepare: no slot open at all.
    const f = await parkedFleet({ planThreads: 10, medianMs: 100, limit: 0 });
    const id = await f.send();
    // Act
    const delivery = await deliver(f.fleet, f.handler);
    // Assess: nothing paid, the claim given back, the message hidden for a retry.
    expect(delivery.failed).toHaveLength(1);
    expect(f.sim.stats().submissions).toBe(0);
    const record = await f.repository.get(id, { consistent: true });
    expect(record?.solverId).toBeUndefined();
    expect((await f.leases.views(f.shards))[0]?.slots).toEqual([]);
  });
});
