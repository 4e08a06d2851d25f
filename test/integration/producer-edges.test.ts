/**
 * The producer client on the cases a user met (a review by one who did not write it): batches
 * past SQS's byte limit, a failure in the middle of a long submit, reads that hang or fail inside
 * `wait`, an event source that fails at once, signals aborted before the call, a clock with a
 * fraction, repeated ids, misspelt fields, characters SQS or the emulator refuse, a table that
 * does not exist, and bad arguments. On the emulators through the real AWS SDK; faults through
 * the fault proxy or a client that wraps the real one.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import { ReceiveMessageCommand, SendMessageBatchCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createProducer,
  IdCheckUnavailableError,
  TaskSubmitError,
  TaskValidationError,
  TaskWaitTimeoutError,
} from '../../clients/producer-client.js';
import { createAwsClients } from '../../functions/adapters/aws-clients.js';
import type { TaskMessage } from '../../functions/core/task.js';
import { startFaultProxy } from '../../local/faults/proxy.js';
import { recaptchaTask, taskId } from '../helpers/factories.js';
import { emulatorsWithProxies, queueDepth, type TestFleet } from '../helpers/fleet-fixture.js';

const emulators = emulatorsWithProxies();
const { proxies } = emulators;
const servers: Server[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.destroy();
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

const image = (chars: number): TaskMessage =>
  ({ id: taskId('img'), method: 'base64', params: { body: 'A'.repeat(chars) } }) as TaskMessage;

function producerOf(fleet: TestFleet, overrides: Partial<Parameters<typeof createProducer>[0]> = {}) {
  return createProducer({
    queueUrls: { normal: fleet.resources.queueUrls.normal, reports: fleet.resources.queueUrls.normal },
    table: fleet.resources.tables.results,
    clients: fleet.clients,
    ...overrides,
  });
}

/** A solved record for `id`, as the consumer writes it. */
async function solved(fleet: TestFleet, id: string) {
  const now = Date.now();
  await fleet.clients.documents.send(
    new PutCommand({
      TableName: fleet.resources.tables.results,
      Item: {
        taskId: id,
        status: 'solved',
        answer: 'tok',
        method: 'base64',
        createdAt: now,
        updatedAt: now,
        expiresAt: Math.floor(now / 1000) + 3600,
      },
    }),
  );
}

/** A TCP server that takes connections and never answers: a table that hangs. */
async function silentEndpoint(): Promise<string> {
  // Connections held open, never answered; destroyed when the test ends (close waits for them).
  const server = createServer((socket) => sockets.push(socket));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('submit', () => {
  it('splits a batch by bytes as well as by count: six valid 180 000-character images all go', async () => {
    // Before: one SendMessageBatch of 1 080 000 bytes, refused whole ("Batch requests cannot be
    // longer than 1048576 bytes"): all six in failedIds.
    const fleet = await emulators.fixture.createFleet();
    const tasks = Array.from({ length: 6 }, () => image(180_000));
    const ids = await producerOf(fleet).submit(tasks);
    expect(ids).toEqual(tasks.map((t) => t.id));
    expect((await queueDepth(fleet.clients, fleet.resources.queueUrls.normal)).visible).toBe(6);
  });

  it('names every task not sent when the sending stops, and sends none twice on a resend of failedIds', async () => {
    // SQS down after the first batch: the second batch fails after its tries, the third is never
    // tried. Before, the third was in neither failedIds nor sentIds, so a resend of failedIds lost it.
    const fleet = await emulators.fixture.createFleet();
    let calls = 0;
    const real = fleet.clients.sqs;
    const failing = {
      send: async (command: never) => {
        calls += 1;
        if (calls > 1) throw Object.assign(new Error('connect ECONNREFUSED'), { name: 'Error' });
        return real.send(command);
      },
    } as unknown as SQSClient;
    const tasks = Array.from({ length: 25 }, () => recaptchaTask());
    const error = await producerOf(fleet, { clients: { ...fleet.clients, sqs: failing } })
      .submit(tasks)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskSubmitError);
    const { failedIds, sentIds } = error as TaskSubmitError;
    expect(sentIds).toEqual(tasks.slice(0, 10).map((t) => t.id));
    expect(failedIds).toEqual(tasks.slice(10).map((t) => t.id));
    expect((error as Error).message).toMatch(/^15 of 25 task\(s\) not sent \(10 sent\).*not tried/);
    // The resend of failedIds puts every task in the queue once.
    await producerOf(fleet).submit(tasks.filter((t) => failedIds.includes(t.id as string)));
    expect((await queueDepth(fleet.clients, fleet.resources.queueUrls.normal)).visible).toBe(25);
  });

  it('names the ids it assigned, in the order given, so tasks sent without ids are resent under the same ids', async () => {
    // The high lane's batch fails (a permanent refusal) after the normal lane's went: the tasks
    // carry no ids and are sent by lane, not in the order given.
    const fleet = await emulators.fixture.createFleet();
    const real = fleet.clients.sqs;
    const high = fleet.resources.queueUrls.high;
    const failing = {
      send: async (command: { input: { QueueUrl?: string } }) => {
        if (command.input.QueueUrl === high)
          throw Object.assign(new Error('Access to the resource is denied'), { name: 'KmsAccessDenied' });
        return real.send(command as never);
      },
    } as unknown as SQSClient;
    const given = Array.from({ length: 12 }, (_, n) => {
      const { id: _id, ...task } = recaptchaTask();
      return { ...task, priority: n === 2 || n === 6 ? ('high' as const) : ('normal' as const) };
    });
    const producer = producerOf(fleet, {
      queueUrls: { normal: fleet.resources.queueUrls.normal, high },
      clients: { ...fleet.clients, sqs: failing },
    });
    const error = (await producer.submit(given).catch((e: unknown) => e)) as TaskSubmitError;
    expect(error).toBeInstanceOf(TaskSubmitError);
    expect(error.taskIds).toHaveLength(12);
    expect(error.failedIndexes).toEqual([2, 6]);
    expect(error.failedIds).toEqual([error.taskIds[2], error.taskIds[6]]);
    expect(new Set(error.sentIds)).toEqual(new Set(error.taskIds.filter((_, i) => i !== 2 && i !== 6)));
    // The resend of the failed tasks under their ids, to a lane that works: every task once.
    await producerOf(fleet).submit(
      error.failedIndexes.map((i) => ({
        ...(given[i] as TaskMessage),
        priority: 'normal' as const,
        id: error.taskIds[i],
      })),
    );
    expect((await queueDepth(fleet.clients, fleet.resources.queueUrls.normal)).visible).toBe(12);
  });

  it('keeps the error’s constructor as callers wrote it: (message, failed, sent, { cause })', () => {
    const cause = new Error('down');
    const error = new TaskSubmitError('2 not sent', ['b', 'c'], ['a'], { cause });
    expect(error.cause).toBe(cause);
    expect(error.taskIds).toEqual(['a', 'b', 'c']);
    expect(error.failedIndexes).toEqual([1, 2]);
  });

  it('tries again the entries SQS failed on its side when another entry of the batch was refused', async () => {
    // The first answer: entry 0 refused as the sender's fault, entries 1 and 2 failed on SQS's side.
    const fleet = await emulators.fixture.createFleet();
    const real = fleet.clients.sqs;
    let calls = 0;
    const partial = {
      send: async (command: { input: { Entries: { Id: string }[] } }) => {
        calls += 1;
        if (calls > 1) return real.send(command as never);
        const entries = command.input.Entries;
        const rest = new SendMessageBatchCommand({ ...command.input, Entries: entries.slice(3) } as never);
        const answer = await real.send(rest);
        return {
          Successful: answer.Successful,
          Failed: [
            { Id: '0', SenderFault: true, Code: 'InvalidMessageContents', Message: 'refused' },
            { Id: '1', SenderFault: false, Code: 'InternalError', Message: 'try again' },
            { Id: '2', SenderFault: false, Code: 'InternalError', Message: 'try again' },
          ],
        };
      },
    } as unknown as SQSClient;
    const tasks = Array.from({ length: 5 }, () => recaptchaTask());
    const error = (await producerOf(fleet, { clients: { ...fleet.clients, sqs: partial } })
      .submit(tasks)
      .catch((e: unknown) => e)) as TaskSubmitError;
    expect(error).toBeInstanceOf(TaskSubmitError);
    expect(error.failedIds).toEqual([tasks[0]?.id]);
    expect(error.message).toMatch(/InvalidMessageContents/);
    expect(new Set(error.sentIds)).toEqual(new Set(tasks.slice(1).map((t) => t.id)));
    expect(calls).toBe(2);
    expect((await queueDepth(fleet.clients, fleet.resources.queueUrls.normal)).visible).toBe(4);
  });

  it('stamps whole milliseconds from a clock with a fraction (the consumer’s schema takes integers)', async () => {
    const fleet = await emulators.fixture.createFleet();
    const producer = producerOf(fleet, { clock: () => 1_765_000_000_000.375 });
    await producer.submit({
      method: 'turnstile',
      params: { sitekey: '0x4AAAAAAAexample', pageurl: 'https://example.com' },
    });
    const received = await fleet.clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: fleet.resources.queueUrls.normal, WaitTimeSeconds: 1 }),
    );
    expect(JSON.parse(received.Messages?.[0]?.Body ?? '{}').submittedAt).toBe(1_765_000_000_000);
    await expect(producerOf(fleet, { clock: () => Number.NaN }).submit(recaptchaTask())).rejects.toThrow(
      /clock returned NaN/,
    );
  });

  it('names each repeated id at its own place, and refuses a field that is not a task’s', async () => {
    const fleet = await emulators.fixture.createFleet();
    const producer = producerOf(fleet);
    const a = recaptchaTask({ id: 'dupA1' });
    const repeated = await producer.submit([a, recaptchaTask({ id: 'dupB1' }), a, a]).catch((e: unknown) => e);
    expect(repeated).toBeInstanceOf(TaskValidationError);
    expect((repeated as TaskValidationError).problems.map((p) => [p.index, p.message])).toEqual([
      [2, 'the same id as task #0 in this submission'],
      [3, 'the same id as task #0 in this submission'],
    ]);
    expect((repeated as Error).message).toMatch(/^2 task\(s\) do not match/);
    // Before: dropped by the schema, the task went to the normal lane.
    const misspelt = await producer
      .submit({ ...recaptchaTask(), prority: 'high' } as unknown as TaskMessage)
      .catch((e: unknown) => e);
    expect((misspelt as TaskValidationError).problems).toEqual([
      expect.objectContaining({ path: 'prority', message: expect.stringContaining('did you mean priority?') }),
    ]);
    expect((await queueDepth(fleet.clients, fleet.resources.queueUrls.normal)).visible).toBe(0);
  });

  it('sends emoji and U+FFFE as JSON escapes: the same value to the consumer, a body SQS and the emulator take', async () => {
    // Before: the emulator refused the emoji (InvalidMessageContents), SQS the U+FFFE.
    const fleet = await emulators.fixture.createFleet();
    const task = {
      id: taskId('uni'),
      method: 'userrecaptcha',
      params: {
        googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-',
        pageurl: 'https://example.com',
        version: 'v3',
        action: 'buy 🙂\uFFFE ok',
      },
    } as unknown as TaskMessage;
    await producerOf(fleet).submit(task);
    const received = await fleet.clients.sqs.send(
      new ReceiveMessageCommand({ QueueUrl: fleet.resources.queueUrls.normal, WaitTimeSeconds: 1 }),
    );
    const body = received.Messages?.[0]?.Body ?? '';
    expect(body).toContain('\\ud83d\\ude42');
    expect(JSON.parse(body).params.action).toBe('buy 🙂\uFFFE ok');
  });

  it('refuses to send when the results table does not exist, naming it, whatever idCheckUnavailable says', async () => {
    const fleet = await emulators.fixture.createFleet();
    const error = await producerOf(fleet, { table: 'no-such-table' })
      .submit(recaptchaTask())
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdCheckUnavailableError);
    expect((error as Error).message).toMatch(/"no-such-table" does not exist/);
    expect((await queueDepth(fleet.clients, fleet.resources.queueUrls.normal)).visible).toBe(0);
  });
});

describe('wait', () => {
  it('keeps its time against a table that never answers, and its signal', async () => {
    // Before: 30 s (the SDK's 10 s timeout, three tries) for a 2 s wait, with the SDK's error.
    const fleet = await emulators.fixture.createFleet();
    const hanging = createAwsClients({
      sqsEndpoint: emulators.fixture.emulators.sqsEndpoint,
      dynamoEndpoint: await silentEndpoint(),
      region: 'us-east-1',
    });
    const producer = producerOf(fleet, { clients: hanging });
    let started = Date.now();
    const timedOut = await producer.wait('hangs-1', { timeoutMs: 1_500 }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(TaskWaitTimeoutError);
    expect(Date.now() - started).toBeLessThan(4_000);
    started = Date.now();
    const aborted = await producer.wait('hangs-2', { signal: AbortSignal.timeout(800) }).catch((e: unknown) => e);
    expect((aborted as Error).name).toBe('TimeoutError');
    expect(Date.now() - started).toBeLessThan(4_000);
  }, 20_000);

  it('rides out reads that fail, and ends on the record once the table answers', async () => {
    // Before: the first failed read ended the wait with the SDK's error.
    const fleet = await emulators.fixture.createFleet();
    const proxy = await startFaultProxy({
      upstreams: { sqs: emulators.fixture.emulators.sqsEndpoint, dynamodb: emulators.fixture.emulators.dynamoEndpoint },
      plan: { windows: [{ service: 'dynamodb', kind: 'unavailable', startMs: 0, durationMs: 1_500, rate: 1 }] },
    });
    proxies.push(proxy);
    proxy.arm();
    const producer = producerOf(fleet, {
      clients: createAwsClients({ sqsEndpoint: proxy.url, dynamoEndpoint: proxy.url, region: 'us-east-1' }),
    });
    const id = taskId('flaky');
    await solved(fleet, id);
    const result = await producer.wait(id, { timeoutMs: 20_000 });
    expect(result.status).toBe('solved');
    // …and a wait that times out while the reads fail says why.
    const down = await startFaultProxy({
      upstreams: { sqs: emulators.fixture.emulators.sqsEndpoint, dynamodb: emulators.fixture.emulators.dynamoEndpoint },
      plan: { windows: [{ service: 'dynamodb', kind: 'unavailable', startMs: 0, durationMs: 60_000, rate: 1 }] },
    });
    proxies.push(down);
    down.arm();
    const error = await producerOf(fleet, {
      clients: createAwsClients({ sqsEndpoint: down.url, dynamoEndpoint: down.url, region: 'us-east-1' }),
    })
      .wait(id, { timeoutMs: 1_000 })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskWaitTimeoutError);
    expect((error as Error).cause).toBeDefined();
  }, 30_000);

  it('backs its reads off when the event source fails at once', async () => {
    // Before: 673 consistent reads in 2 s.
    const fleet = await emulators.fixture.createFleet();
    let reads = 0;
    const real = fleet.clients.documents;
    const counting = {
      send: (command: never, options?: never) => {
        reads += 1;
        return real.send(command, options);
      },
    } as unknown as typeof real;
    const producer = producerOf(fleet, {
      clients: { ...fleet.clients, documents: counting },
      events: {
        waitFor: async () => {
          throw new Error('event stream down');
        },
      },
    });
    await expect(producer.wait('never-1', { timeoutMs: 2_000 })).rejects.toBeInstanceOf(TaskWaitTimeoutError);
    // 100 ms growing by half, at most 2 s: about 7 reads in 2 s.
    expect(reads).toBeLessThanOrEqual(10);
  });

  it('refuses a time that is not one', async () => {
    const fleet = await emulators.fixture.createFleet();
    await expect(producerOf(fleet).wait('x-1', { timeoutMs: Number.NaN })).rejects.toThrow(
      /timeoutMs must be a finite number of ms/,
    );
  });
});

describe('an aborted signal, and bad arguments', () => {
  it('solve sends nothing, report sends nothing, when the signal is already aborted', async () => {
    const fleet = await emulators.fixture.createFleet();
    const producer = producerOf(fleet);
    const controller = new AbortController();
    controller.abort();
    await expect(producer.solve(recaptchaTask(), { signal: controller.signal })).rejects.toThrow(/aborted/);
    const id = taskId('rep');
    await solved(fleet, id);
    await expect(producer.report(id, 'bad', { signal: controller.signal })).rejects.toThrow(/aborted/);
    expect((await queueDepth(fleet.clients, fleet.resources.queueUrls.normal)).visible).toBe(0);
  });

  it('report names a bad id or verdict in words, not a ZodError', async () => {
    const fleet = await emulators.fixture.createFleet();
    const error = await producerOf(fleet)
      .report('bad id', 'wrong' as never)
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TypeError);
    expect((error as Error).message).toMatch(/^report\("bad id", "wrong"\): .*taskId.*verdict.*'bad' or 'good'/);
  });
});
