/**
 * The governor's probe carries a waiting task (functions/governor/probe-carrier.ts) on the
 * emulators, through the real consumer handler (invoked in process, as the local runtime does),
 * the real solver client against the protocol simulator, the real leases table and ledger: the
 * task's own submission is the probe, under a probe slot whatever the governor's limits; refused,
 * the task is back at once and no probe walks it to the DLQ; malformed, it goes to the DLQ with
 * its reason and no probe is made of it.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import {
  ChangeMessageVisibilityCommand,
  ReceiveMessageCommand,
  type ReceiveMessageCommandInput,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { Context } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { SqsTaskQueue } from '../../functions/adapters/task-queue.js';
import { createDynamoThreadLeases, leaseLengthMs, PRIMARY_LEASE_LANE } from '../../functions/adapters/thread-leases.js';
import { createDynamoThreadLedger, threadLeaseMs } from '../../functions/adapters/thread-ledger.js';
import { createConsumerHandler } from '../../functions/consumer/create-handler.js';
import { HAND_BACK_BACKOFF } from '../../functions/core/backoff.js';
import { REDELIVERY_ATTRIBUTE } from '../../functions/core/redelivery.js';
import type { ConsumerEvent } from '../../functions/core/probe-invocation.js';
import { PROBE_SLOT_BASE, shardKeys } from '../../functions/core/thread-leases.js';
import { createParkedWatch } from '../../functions/governor/parked-watch.js';
import { type ConsumerInvoker, createProbeCarrier } from '../../functions/governor/probe-carrier.js';
import { captureMetrics, recaptchaTask } from '../helpers/factories.js';
import {
  type EmulatorFixture,
  queueDepth,
  receive,
  sendMessage,
  sleep,
  startEmulatorFixture,
} from '../helpers/fleet-fixture.js';
import { FAST_TIMING, simulatedSolvers } from '../helpers/simulated-solver.js';

const solverOn = simulatedSolvers();
let fixture: EmulatorFixture;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});

const context = { getRemainingTimeInMillis: () => 30_000, awsRequestId: 'probe-test' } as Context;

/** A parked fleet whose governor's limits open no slot (a starved fleet), a consumer and the probe's carrier. */
async function starvedFleet(options: { foreignThreads: number; maxReceiveCount?: number }) {
  const fleet = await fixture.createFleet({
    planThreads: 10,
    solveDeadlineSeconds: 30,
    ...(options.maxReceiveCount !== undefined ? { maxReceiveCount: options.maxReceiveCount } : {}),
  });
  const { sim, solver } = await solverOn({
    seed: 7,
    medianMs: 150,
    planThreads: 10,
    foreignThreads: options.foreignThreads,
    // As the consumer's wiring builds it with the thread ledger: a refusal is not retried in.php.
    retry: { maxOverCapRetries: 0 },
  });
  const { settings, resources, clients } = fleet;
  const leases = createDynamoThreadLeases({ documents: clients.documents, tableName: resources.tables.leases });
  const shards = shardKeys(PRIMARY_LEASE_LANE, settings.effectiveCap);
  // Starved: the governor opened no slot in any shard.
  for (const shard of shards) await leases.setLimit(shard, 0);
  const repository = new DynamoResultsRepository({
    documents: clients.documents,
    tableName: resources.tables.results,
    ttlSeconds: 3600,
  });
  const sourceQueueUrls = [resources.queueUrls.normal, resources.queueUrls.high];
  const queue = new SqsTaskQueue({ sqs: clients.sqs, dlqUrl: resources.queueUrls.dlq, sourceQueueUrls });
  const ledger = createDynamoThreadLedger({
    documents: clients.documents,
    tableName: resources.tables.governor,
    leaseMs: threadLeaseMs(settings),
  });
  const handler = createConsumerHandler({
    solver,
    repository,
    queue,
    metrics: captureMetrics(settings.metricsNamespace).metrics,
    logger: new Logger({ serviceName: 'consumer', logLevel: 'SILENT' }),
    settings,
    // The consumer's own hand-back delays (5 s doubling), so a task back "at once" is the probe's doing.
    timing: {
      ...FAST_TIMING,
      retryBaseSeconds: HAND_BACK_BACKOFF.baseSeconds,
      retryMaxSeconds: HAND_BACK_BACKOFF.maxSeconds,
    },
    leases: { leases, shards, planCap: settings.effectiveCap, leaseMs: leaseLengthMs(settings) },
    threadLedger: ledger,
  });
  const events: ConsumerEvent[] = [];
  const invoke: ConsumerInvoker = (event) => {
    events.push(event);
    return handler(event, context);
  };
  // Every receive the carrier asks SQS for, as asked (the real client answers).
  const receives: ReceiveMessageCommandInput[] = [];
  const sqs = {
    send: (command: { input: unknown }) => {
      if (command instanceof ReceiveMessageCommand) receives.push(command.input);
      return clients.sqs.send(command as never);
    },
  } as unknown as SQSClient;
  const carrierWith = (invoker: ConsumerInvoker = invoke, keep: { keepSeconds?: number; clock?: () => number } = {}) =>
    createProbeCarrier({
      sqs,
      queueUrls: resources.queueUrls,
      region: clients.region,
      invoke: invoker,
      ...keep,
    });
  const watch = createParkedWatch({ leases, shards, results: repository, solver, queue, settleMs: 0 });
  const send = (body: string, lane: 'normal' | 'high' = 'normal') =>
    sendMessage(clients, resources.queueUrls[lane] as string, body);
  return {
    fleet,
    sim,
    leases,
    shards,
    repository,
    ledger,
    handler,
    events,
    receives,
    carrier: carrierWith(),
    carrierWith,
    watch,
    send,
  };
}

describe('the governor’s probe carries a waiting task', () => {
  it('submits the task as the probe under a probe slot, parks it, and the watch hands it on: one paid solve, the task’s', async () => {
    // GIVEN a starved parked fleet (no slot open) whose solver has threads free, and a task waiting
    const f = await starvedFleet({ foreignThreads: 0 });
    const task = recaptchaTask();
    await f.send(JSON.stringify(task));

    // WHEN the probe carries it
    const result = await f.carrier.carry();

    // THEN the solver accepted the task's own submission (no synthetic one), under the first probe
    // slot of the first shard, the message kept in flight (parked), the acceptance in the ledger
    expect(result).toEqual({ answer: 'accepted' });
    expect(f.events).toHaveLength(1);
    expect(f.events[0]?.probe).toBe(true);
    expect(f.sim.stats().submissions).toBe(1);
    const slots = (await f.leases.views(f.shards)).flatMap((view) => view.slots);
    expect(slots.map((slot) => [slot.shard, slot.slot, slot.taskId])).toEqual([
      [f.shards[0], PROBE_SLOT_BASE, task.id],
    ]);
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 0, inFlight: 1 });
    expect(await f.repository.get(task.id as string, { consistent: true })).toMatchObject({
      status: 'solving',
      solverId: expect.any(String),
    });
    expect((await f.ledger.read())?.lastAcceptance).toBeDefined();

    // AND WHEN the watch's rounds find its answer ready, it frees the probe slot and shows the task again
    for (let round = 0; round < 40 && f.watch.stats.released === 0; round++) {
      await f.watch.round();
      await sleep(25);
    }
    expect(f.watch.stats.released).toBe(1);
    expect((await f.leases.views(f.shards)).flatMap((view) => view.slots)).toEqual([]);
  });

  it('hands a refused task back at once, its slot freed, the refusal in the ledger', async () => {
    // GIVEN others hold the whole plan, and a task waiting
    const f = await starvedFleet({ foreignThreads: 10 });
    const task = recaptchaTask();
    await f.send(JSON.stringify(task));

    // WHEN the probe carries it
    const result = await f.carrier.carry();

    // THEN refused: the message visible again at once (no backoff), no slot held, no claim left,
    // the ledger's newest refusal this one
    expect(result).toEqual({ answer: 'refused' });
    expect(f.sim.stats()).toMatchObject({ submissions: 1, overCapRejections: 1 });
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 1, inFlight: 0 });
    expect((await f.leases.views(f.shards)).flatMap((view) => view.slots)).toEqual([]);
    expect((await f.repository.get(task.id as string, { consistent: true }))?.solverId).toBeUndefined();
    expect((await f.ledger.read())?.lastRefusal).toBeDefined();
  });

  it('never walks a task to the DLQ: refused near it, the task goes back as a fresh copy whose count starts again, no wait counted', async () => {
    // GIVEN others hold the whole plan, a maxReceiveCount of 5, and one task waiting
    const f = await starvedFleet({ foreignThreads: 10, maxReceiveCount: 5 });
    const task = recaptchaTask();
    await f.send(JSON.stringify(task));

    // WHEN the probe carries it twelve times (each refused)
    const answers: string[] = [];
    for (let probe = 0; probe < 12; probe++) answers.push((await f.carrier.carry()).answer);

    // THEN every probe found the task and was refused; it never reached the DLQ, and the copy
    // waiting now counts no wait of its own (a probe's copy is none)
    expect(answers).toEqual(Array(12).fill('refused'));
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.dlq)).toEqual({ visible: 0, inFlight: 0 });
    const [message] = await receive(f.fleet.clients, f.fleet.resources.queueUrls.normal, 1);
    expect(Number(message?.Attributes?.ApproximateReceiveCount)).toBeLessThan(5);
    const redelivery = JSON.parse(message?.MessageAttributes?.[REDELIVERY_ATTRIBUTE]?.StringValue ?? '{}');
    expect(redelivery).toMatchObject({ taskId: task.id, waits: 0 });
  });

  it('keeps a refused task for the next probe: the same message carried again with no new receive, hidden meanwhile, back at once on release', async () => {
    // GIVEN others hold the whole plan, a maxReceiveCount of 5, two tasks waiting, and a carrier that keeps refused tasks 30 s
    const f = await starvedFleet({ foreignThreads: 10, maxReceiveCount: 5 });
    const first = recaptchaTask();
    const second = recaptchaTask();
    await f.send(JSON.stringify(first));
    await f.send(JSON.stringify(second));
    const carrier = f.carrierWith(undefined, { keepSeconds: 30 });

    // WHEN the probe carries a task twelve times (each refused)
    const answers: string[] = [];
    for (let probe = 0; probe < 12; probe++) answers.push((await carrier.carry()).answer);

    // THEN every probe carried the same message, received once: its receive count never grew
    // (twelve receives would have moved it to the end as a fresh copy every two), each event
    // asking the consumer to keep it 30 s; it stayed hidden, the other task visible
    expect(answers).toEqual(Array(12).fill('refused'));
    const carried = f.events.map((event) => event.Records[0]);
    expect(new Set(carried.map((record) => record?.messageId)).size).toBe(1);
    expect(carried.map((record) => record?.attributes.ApproximateReceiveCount)).toEqual(Array(12).fill('1'));
    expect(f.events.map((event) => event.probeKeepSeconds)).toEqual(Array(12).fill(30));
    expect(f.receives.filter((input) => input.QueueUrl === f.fleet.resources.queueUrls.normal)).toHaveLength(1);
    expect(f.sim.stats()).toMatchObject({ submissions: 12, overCapRejections: 12 });
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 1, inFlight: 1 });

    // AND WHEN the fleet is no longer starved (the governor releases it)
    await carrier.release();

    // THEN the kept task is visible again at once, its one receive counted, nothing in the DLQ
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 2, inFlight: 0 });
    const messages = await receive(f.fleet.clients, f.fleet.resources.queueUrls.normal, 2);
    const keptAgain = messages.find((message) => message.MessageId === carried[0]?.messageId);
    expect(Number(keptAgain?.Attributes?.ApproximateReceiveCount)).toBe(2);
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.dlq)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('hands a refused task back at once when the governor released while its probe was out (no longer starved)', async () => {
    // GIVEN others hold the whole plan, a task waiting, and a consumer whose invocation the test holds until told
    const f = await starvedFleet({ foreignThreads: 10 });
    await f.send(JSON.stringify(recaptchaTask()));
    let proceed: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      proceed = resolve;
    });
    const carrier = f.carrierWith(
      async (event) => {
        await gate;
        return f.handler(event, context);
      },
      { keepSeconds: 30 },
    );

    // WHEN the probe is out and the governor releases (a tick that is not starved), then the solver refuses it
    const probing = carrier.carry();
    await sleep(50);
    await carrier.release();
    proceed();
    const result = await probing;

    // THEN refused, and the task is visible again at once, not kept hidden for 30 s
    expect(result).toEqual({ answer: 'refused' });
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 1, inFlight: 0 });
  });

  it('receives anew once the keep is nearly over, and a kept task near the DLQ still goes back as a fresh copy, visible at once', async () => {
    // GIVEN others hold the whole plan, a maxReceiveCount of 5 (a copy from the 2nd receive on), one
    // task waiting, and a carrier keeping refused tasks 30 s on a clock the test moves
    const f = await starvedFleet({ foreignThreads: 10, maxReceiveCount: 5 });
    const task = recaptchaTask();
    await f.send(JSON.stringify(task));
    let now = Date.now();
    const carrier = f.carrierWith(undefined, { keepSeconds: 30, clock: () => now });
    expect((await carrier.carry()).answer).toBe('refused');

    // WHEN its keep is within 5 s of its end (the consumer hid it for 30 s), and the probe after
    // it finds the message visible (made so here, as its keep's end would)
    now += 26_000;
    await f.fleet.clients.sqs.send(
      new ChangeMessageVisibilityCommand({
        QueueUrl: f.fleet.resources.queueUrls.normal,
        ReceiptHandle: f.events.at(-1)?.Records[0]?.receiptHandle,
        VisibilityTimeout: 0,
      }),
    );
    const second = await carrier.carry();

    // THEN it received the task anew (its 2nd receive: near the DLQ), refused: the consumer sent a
    // fresh copy visible at once (not hidden for the keep), no wait counted, and keeps nothing
    expect(second.answer).toBe('refused');
    expect(f.receives.filter((input) => input.QueueUrl === f.fleet.resources.queueUrls.normal)).toHaveLength(2);
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 1, inFlight: 0 });
    const [copy] = await receive(f.fleet.clients, f.fleet.resources.queueUrls.normal, 1);
    expect(Number(copy?.Attributes?.ApproximateReceiveCount)).toBe(1);
    expect(JSON.parse(copy?.MessageAttributes?.[REDELIVERY_ATTRIBUTE]?.StringValue ?? '{}')).toMatchObject({
      taskId: task.id,
      waits: 0,
    });
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.dlq)).toEqual({ visible: 0, inFlight: 0 });
  });

  it('makes no probe of a malformed task: it goes to the DLQ with its reason, and the answer is none', async () => {
    // GIVEN a malformed message, the only one waiting
    const f = await starvedFleet({ foreignThreads: 0 });
    await f.send('{"not":"a task"}');

    // WHEN the probe takes it
    const result = await f.carrier.carry();

    // THEN nothing was submitted (the governor then makes its synthetic probe), the message is in the DLQ
    expect(result).toEqual({ answer: 'none' });
    expect(f.sim.stats().submissions).toBe(0);
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 0, inFlight: 0 });
    expect((await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.dlq)).visible).toBe(1);
  });

  it('takes the high lane’s task first, and answers none with no invocation when no task waits', async () => {
    // GIVEN nothing waiting
    const f = await starvedFleet({ foreignThreads: 0 });
    // WHEN the probe looks
    expect(await f.carrier.carry()).toEqual({ answer: 'none' });
    // THEN no consumer was invoked; it asked each lane for one message with every attribute, the
    // high lane at once and the last lane with a long poll (a short one may miss a few waiting)
    expect(f.events).toHaveLength(0);
    const { queueUrls } = f.fleet.resources;
    expect(f.receives).toEqual([
      expect.objectContaining({ QueueUrl: queueUrls.high, MaxNumberOfMessages: 1, WaitTimeSeconds: 0 }),
      expect.objectContaining({ QueueUrl: queueUrls.normal, MaxNumberOfMessages: 1, WaitTimeSeconds: 1 }),
    ]);
    for (const input of f.receives) {
      expect(input.MessageSystemAttributeNames).toEqual(['All']);
      expect(input.MessageAttributeNames).toEqual(['All']);
    }

    // GIVEN a task in each lane
    const normal = recaptchaTask();
    const high = recaptchaTask({ priority: 'high' });
    await f.send(JSON.stringify(normal));
    await f.send(JSON.stringify(high), 'high');
    // WHEN the probe carries one
    expect(await f.carrier.carry()).toEqual({ answer: 'accepted' });
    // THEN it was the high lane's
    expect(JSON.parse(f.events[0]?.Records[0]?.body ?? '{}').id).toBe(high.id);
  });

  it('leaves the message to its visibility timeout when the invocation fails, and answers failed', async () => {
    // GIVEN a task waiting, and a consumer whose invocation fails
    const f = await starvedFleet({ foreignThreads: 0 });
    await f.send(JSON.stringify(recaptchaTask()));
    const carrier = f.carrierWith(async () => {
      throw new Error('Rate Exceeded.');
    });

    // WHEN the probe carries it
    const result = await carrier.carry();

    // THEN failed, the message not deleted (in flight until its visibility timeout, as after a crash)
    expect(result).toEqual({ answer: 'failed', error: expect.stringContaining('Rate Exceeded.') });
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.normal)).toEqual({ visible: 0, inFlight: 1 });
  });

  it('deletes a message the consumer finished in the invocation (a parked task resumed with its answer ready), as the mapping does', async () => {
    // GIVEN a task the probe carried, parked, whose answer the watch found ready, and a second message of it in the high lane
    const f = await starvedFleet({ foreignThreads: 0 });
    const task = recaptchaTask();
    await f.send(JSON.stringify(task));
    expect((await f.carrier.carry()).answer).toBe('accepted');
    for (let round = 0; round < 40 && f.watch.stats.released === 0; round++) {
      await f.watch.round();
      await sleep(25);
    }
    await f.fleet.clients.sqs.send(
      new SendMessageCommand({ QueueUrl: f.fleet.resources.queueUrls.high, MessageBody: JSON.stringify(task) }),
    );

    // WHEN the probe takes that message
    const result = await f.carrier.carry();

    // THEN the consumer resumed the submission and recorded its answer: no submission made (answer
    // none: the governor makes its synthetic probe), the task solved once, its message deleted
    expect(result).toEqual({ answer: 'none' });
    expect(f.sim.stats().submissions).toBe(1);
    expect((await f.repository.get(task.id as string, { consistent: true }))?.status).toBe('solved');
    expect(await queueDepth(f.fleet.clients, f.fleet.resources.queueUrls.high)).toEqual({ visible: 0, inFlight: 0 });
  });
});
