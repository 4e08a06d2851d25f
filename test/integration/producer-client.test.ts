import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { GetQueueAttributesCommand, PurgeQueueCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { startEmulators, type Emulators } from '../../local/emulators.js';
import { ensureFleetResources, type FleetResources } from '../../local/resources.js';
import { createAwsClients, type AwsClients } from '../../functions/adapters/aws-clients.js';
import { resolveSettings } from '../../functions/core/settings.js';
import type { TaskMessage } from '../../functions/core/task.js';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { parseTask } from '../../functions/core/task.js';
import {
  createProducer,
  TaskIdConflictError,
  TaskValidationError,
  TaskWaitTimeoutError,
  type CompletionEventSource,
  type Producer,
} from '../../clients/producer-client.js';
import { createLocalEventStream } from '../../functions/adapters/completion-events.js';
import type { CompletionEvent } from '../../functions/core/events.js';
import type { TaskResult } from '../../functions/core/results.js';

let emulators: Emulators;
let clients: AwsClients;
let resources: FleetResources;
let producer: Producer;

const turnstile = (id?: string, priority?: 'normal' | 'high'): TaskMessage => ({
  ...(id ? { id } : {}),
  ...(priority ? { priority } : {}),
  method: 'turnstile',
  params: { sitekey: '0x4AAAAAAAexample', pageurl: 'https://shop.example.com/login' },
});

beforeAll(async () => {
  emulators = await startEmulators();
  clients = createAwsClients({ sqsEndpoint: emulators.sqsEndpoint, dynamoEndpoint: emulators.dynamoEndpoint });
  resources = await ensureFleetResources(clients, resolveSettings({ prefix: 'producer-test' }));
  producer = createProducer({
    queueUrls: { normal: resources.queueUrls.normal, high: resources.queueUrls.high },
    table: resources.tables.results,
    clients,
    clock: () => 1_700_000_000_000,
  });
});

afterAll(async () => {
  await emulators?.stop();
});

beforeEach(async () => {
  for (const url of [resources.queueUrls.normal, resources.queueUrls.high])
    await clients.sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
});

async function visible(queueUrl: string): Promise<number> {
  const answer = await clients.sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessages'] }),
  );
  return Number(answer.Attributes?.ApproximateNumberOfMessages);
}

async function drain(queueUrl: string): Promise<Record<string, unknown>[]> {
  const bodies: Record<string, unknown>[] = [];
  for (;;) {
    const answer = await clients.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 0,
        VisibilityTimeout: 60,
      }),
    );
    if (!answer.Messages?.length) return bodies;
    bodies.push(...answer.Messages.map((m) => JSON.parse(m.Body!) as Record<string, unknown>));
  }
}

async function putRecord(taskId: string, status: string, extra: Record<string, unknown> = {}): Promise<void> {
  await clients.documents.send(
    new PutCommand({
      TableName: resources.tables.results,
      Item: { taskId, status, attempts: 1, expiresAt: 2_000_000_000, ...extra },
    }),
  );
}

describe('producer client', () => {
  it('submits one task with an assigned id and submittedAt, to the normal queue', async () => {
    const id = await producer.submit(turnstile());
    expect(id).toMatch(/^[A-Za-z0-9_-]{1,80}$/);
    const [body] = await drain(resources.queueUrls.normal);
    expect(body).toMatchObject({
      id,
      method: 'turnstile',
      submittedAt: 1_700_000_000_000,
      params: { sitekey: '0x4AAAAAAAexample' },
    });
  });

  it('sends a list in batches of ten and routes high priority to the high queue', async () => {
    const tasks = Array.from({ length: 23 }, (_, i) => turnstile(`t${i}`, i % 4 === 0 ? 'high' : undefined));
    const ids = await producer.submit(tasks);
    expect(ids).toEqual(tasks.map((t) => t.id));
    const high = await drain(resources.queueUrls.high);
    const normal = await drain(resources.queueUrls.normal);
    expect(high.map((b) => b.id).sort()).toEqual(['t0', 't12', 't16', 't20', 't4', 't8']);
    expect(normal).toHaveLength(17);
    expect(normal.every((b) => b.priority === undefined)).toBe(true);
  });

  it('refuses invalid tasks before sending anything, listing every problem', async () => {
    const bad = [
      turnstile('good-1'),
      { id: 'bad-1', method: 'turnstile', params: { sitekey: 'short', pageurl: 'not a url' } },
      {
        id: 'bad-2',
        method: 'userrecaptcha',
        params: { googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://x.example', key: 'secret' },
      },
    ] as unknown as TaskMessage[];
    const error = await producer.submit(bad).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskValidationError);
    const problems = (error as TaskValidationError).problems;
    expect(problems.map((p) => `${p.taskId}:${p.path}`).sort()).toEqual([
      'bad-1:params.pageurl',
      'bad-1:params.sitekey',
      'bad-2:params.key',
    ]);
    expect((error as Error).message).toContain('2 task(s) do not match schema v1');
    expect((error as TaskValidationError).taskId).toBe('bad-1');
    expect(await visible(resources.queueUrls.normal)).toBe(0);
  });

  it('refuses the same id twice in one submission', async () => {
    await expect(producer.submit([turnstile('dup'), turnstile('dup')])).rejects.toThrow(
      /task #1 \(dup\) id: the same id as task #0 in this submission/,
    );
  });

  it('gets undefined before a record exists and the record after', async () => {
    expect(await producer.get('nothing-yet')).toBeUndefined();
    await putRecord('got-1', 'solved', { answer: 'TOKEN' });
    expect(await producer.get('got-1', { consistent: true })).toMatchObject({
      taskId: 'got-1',
      status: 'solved',
      answer: 'TOKEN',
    });
  });

  it('waits through the solving state until the record is terminal', async () => {
    await putRecord('wait-1', 'solving');
    setTimeout(() => void putRecord('wait-1', 'failed', { errorCode: 'ERROR_CAPTCHA_UNSOLVABLE' }), 250);
    const result = await producer.wait('wait-1', { timeoutMs: 5_000, initialIntervalMs: 20 });
    expect(result).toMatchObject({ status: 'failed', errorCode: 'ERROR_CAPTCHA_UNSOLVABLE' });
  });

  it('times out with the last status it saw', async () => {
    await putRecord('slow-1', 'solving');
    const started = Date.now();
    const error = await producer.wait('slow-1', { timeoutMs: 300, initialIntervalMs: 20 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TaskWaitTimeoutError);
    expect(error).toMatchObject({ taskId: 'slow-1', lastStatus: 'solving', timeoutMs: 300 });
    expect(Date.now() - started).toBeLessThan(1_500);
    await expect(producer.wait('never-sent', { timeoutMs: 100 })).rejects.toThrow(/no record yet/);
  });

  it('get and wait say which provider solved the task, as the consumer recorded it', async () => {
    // Prepare: the overflow consumer's claim and solve, as it writes them
    const repository = new DynamoResultsRepository({
      documents: clients.documents,
      tableName: resources.tables.results,
      ttlSeconds: 86_400,
    });
    const parsed = parseTask(JSON.stringify(turnstile('by-overflow-1')), 'unused', 1);
    if (!parsed.ok) throw new Error('invalid test task');
    await repository.claim({
      task: parsed.task,
      claimToken: 'c',
      now: Date.now(),
      leaseMs: 10_000,
      provider: 'overflow',
    });
    await repository.complete('by-overflow-1', 'c', {
      status: 'solved',
      answer: 'TOKEN',
      provider: 'overflow',
      completedAt: Date.now(),
    });
    // Act
    const got = await producer.get('by-overflow-1', { consistent: true });
    const waited = await producer.wait('by-overflow-1', { timeoutMs: 1_000 });
    // Assess
    expect(got?.provider).toBe('overflow');
    expect(waited).toMatchObject({ status: 'solved', provider: 'overflow' });
  });

  it('solve = submit + wait', async () => {
    setTimeout(() => void putRecord('solve-1', 'solved', { answer: 'ANSWER' }), 150);
    const result = await producer.solve(turnstile('solve-1'), { timeoutMs: 5_000, initialIntervalMs: 20 });
    expect(result).toMatchObject({ taskId: 'solve-1', status: 'solved', answer: 'ANSWER' });
    expect((await drain(resources.queueUrls.normal)).map((b) => b.id)).toEqual(['solve-1']);
  });
});

/** Counts the producer's table reads (GetCommand) and passes them on. */
function countingClients() {
  let reads = 0;
  const documents = new Proxy(clients.documents, {
    get(target, property, receiver) {
      if (property === 'send') {
        return (command: { constructor: { name: string } }) => {
          if (command.constructor.name === 'GetCommand') reads++;
          return (target.send as (c: unknown) => Promise<unknown>)(command);
        };
      }
      return Reflect.get(target, property, receiver);
    },
  });
  return { clients: { sqs: clients.sqs, documents }, reads: () => reads };
}

describe('producer client: an id names one task', () => {
  const other = (id: string): TaskMessage => ({
    id,
    method: 'turnstile',
    params: { sitekey: '0x4AAAAAAAexample', pageurl: 'https://shop.example.com/checkout' },
  });

  /** Solve `task` the way the consumer records it: a claim (with its fingerprint), then the result. */
  async function solved(task: TaskMessage): Promise<void> {
    const repository = new DynamoResultsRepository({
      documents: clients.documents,
      tableName: resources.tables.results,
      ttlSeconds: 86_400,
    });
    const parsed = parseTask(JSON.stringify(task), 'unused', 1);
    if (!parsed.ok) throw new Error('invalid test task');
    await repository.claim({ task: parsed.task, claimToken: 'c', now: Date.now(), leaseMs: 10_000 });
    await repository.complete(parsed.task.id, 'c', { status: 'solved', answer: 'TOKEN-A', completedAt: Date.now() });
  }

  it('refuses an id in use by a task with other content, saying why, and sends nothing', async () => {
    await solved(turnstile('reused-1'));

    const error = await producer.submit([turnstile('fresh-1'), other('reused-1')]).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TaskIdConflictError);
    expect((error as TaskIdConflictError).conflicts).toEqual([
      { index: 1, taskId: 'reused-1', status: 'solved', expiresAt: expect.any(Number), method: 'turnstile' },
    ]);
    expect((error as Error).message).toContain('id "reused-1" is in use');
    // The holder's method, read with the id check (before: "by a task task").
    expect((error as Error).message).toContain('by a turnstile task with other content');
    expect((error as Error).message).toContain('other content');
    expect(await visible(resources.queueUrls.normal)).toBe(0);
  });

  it('sends a resend of the same task under its id (it gets the first result)', async () => {
    await solved(turnstile('resend-1'));

    await expect(producer.submit(turnstile('resend-1'))).resolves.toBe('resend-1');
    expect(await visible(resources.queueUrls.normal)).toBe(1);
  });

  it('sends other content under an id held only by a rejection, an expired record or a record without fingerprint', async () => {
    await putRecord('after-reject', 'rejected', { attempts: 0, errorCode: 'MALFORMED_JSON' });
    await putRecord('after-expiry', 'solved', { fingerprint: 'f'.repeat(64), expiresAt: 1_600_000_000 });
    await putRecord('legacy-1', 'solved', { answer: 'OLD' });

    const ids = await producer.submit([other('after-reject'), other('after-expiry'), other('legacy-1')]);

    expect(ids).toEqual(['after-reject', 'after-expiry', 'legacy-1']);
    expect(await visible(resources.queueUrls.normal)).toBe(3);
  });

  it('names a refused parameter and what it is read as', async () => {
    const task = {
      ...turnstile('spelled-1'),
      params: { ...turnstile().params, 'soft.id': 1 },
    } as unknown as TaskMessage;

    const error = await producer.submit(task).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(TaskValidationError);
    expect((error as TaskValidationError).problems).toEqual([
      expect.objectContaining({ path: 'params.soft.id', message: expect.stringContaining('read as "soft_id"') }),
    ]);
  });
});

describe('producer client: wait with completion events', () => {
  it('reads once more when the event arrives, instead of polling', async () => {
    const stream = createLocalEventStream({ includeAnswer: false });
    const counted = countingClients();
    const p = createProducer({
      queueUrls: { normal: resources.queueUrls.normal },
      table: resources.tables.results,
      clients: counted.clients,
      events: stream,
    });
    await putRecord('ev-1', 'solving');
    setTimeout(() => {
      void (async () => {
        await putRecord('ev-1', 'solved', { answer: 'TOKEN', method: 'turnstile', completedAt: Date.now() });
        await stream.publish({
          taskId: 'ev-1',
          status: 'solved',
          attempts: 1,
          expiresAt: 2_000_000_000,
          method: 'turnstile',
        } as TaskResult);
      })();
    }, 600);
    const started = Date.now();
    // Polling at 20 ms would read ~30 times; the event makes it two reads.
    const result = await p.wait('ev-1', {
      timeoutMs: 5_000,
      initialIntervalMs: 20,
      maxIntervalMs: 20,
      eventFallbackMs: 4_000,
    });
    expect(result).toMatchObject({ taskId: 'ev-1', status: 'solved', answer: 'TOKEN', stale: false });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(counted.reads()).toBe(2);
    expect(p.counters()).toMatchObject({ waitsByEvent: 1, waitsByRead: 0 });
  });

  it('falls back to reads when the event never arrives (a failed publish): the result is still found', async () => {
    const silent: CompletionEventSource = {
      waitFor: (_id, ms) =>
        new Promise<CompletionEvent | undefined>((resolve) => setTimeout(() => resolve(undefined), ms)),
    };
    const counted = countingClients();
    const p = createProducer({
      queueUrls: { normal: resources.queueUrls.normal },
      table: resources.tables.results,
      clients: counted.clients,
      events: silent,
    });
    await putRecord('ev-lost', 'solving');
    setTimeout(() => void putRecord('ev-lost', 'solved', { answer: 'TOKEN' }), 200);
    const started = Date.now();
    const result = await p.wait('ev-lost', { timeoutMs: 5_000, eventFallbackMs: 300 });
    expect(result).toMatchObject({ status: 'solved', answer: 'TOKEN' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(250);
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(counted.reads()).toBe(2);
    expect(p.counters()).toMatchObject({ waitsByEvent: 0, waitsByRead: 1 });
  });

  it('falls back to reads when the event source itself fails', async () => {
    const broken: CompletionEventSource = { waitFor: () => Promise.reject(new Error('bridge down')) };
    const p = createProducer({
      queueUrls: { normal: resources.queueUrls.normal },
      table: resources.tables.results,
      clients,
      events: broken,
    });
    await putRecord('ev-broken', 'solving');
    setTimeout(() => void putRecord('ev-broken', 'failed', { errorCode: 'ERROR_CAPTCHA_UNSOLVABLE' }), 150);
    const result = await p.wait('ev-broken', { timeoutMs: 3_000, eventFallbackMs: 100 });
    expect(result).toMatchObject({ status: 'failed', stale: false });
  });

  it('returns at once when the record is terminal before the wait starts (the event passed already)', async () => {
    const stream = createLocalEventStream({ includeAnswer: false });
    const p = createProducer({
      queueUrls: { normal: resources.queueUrls.normal },
      table: resources.tables.results,
      clients,
      events: stream,
    });
    await putRecord('ev-early', 'solved', { answer: 'A' });
    const started = Date.now();
    await expect(p.wait('ev-early', { timeoutMs: 5_000, eventFallbackMs: 4_000 })).resolves.toMatchObject({
      status: 'solved',
    });
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('times out with an event source too', async () => {
    const stream = createLocalEventStream({ includeAnswer: false });
    const p = createProducer({
      queueUrls: { normal: resources.queueUrls.normal },
      table: resources.tables.results,
      clients,
      events: stream,
    });
    await putRecord('ev-slow', 'solving');
    await expect(p.wait('ev-slow', { timeoutMs: 300, eventFallbackMs: 100 })).rejects.toMatchObject({
      name: 'TaskWaitTimeoutError',
      lastStatus: 'solving',
    });
  });
});

describe('producer client: token freshness', () => {
  const now = 1_700_000_000_000;
  const at = (clock: number) =>
    createProducer({
      queueUrls: { normal: resources.queueUrls.normal },
      table: resources.tables.results,
      clients,
      clock: () => clock,
    });

  it('get and wait say how long a token has left, and when it is stale; stale deliveries are counted', async () => {
    await putRecord('fresh-tok', 'solved', { answer: 'T1', method: 'turnstile', tokenExpiresAt: now + 90_000 });
    await putRecord('stale-tok', 'solved', { answer: 'T2', method: 'userrecaptcha', tokenExpiresAt: now - 5_000 });
    await putRecord('image-ans', 'solved', { answer: 'x7k2', method: 'base64' });
    const p = at(now);

    expect(await p.get('fresh-tok', { consistent: true })).toMatchObject({ stale: false, tokenExpiresInMs: 90_000 });
    expect(await p.wait('stale-tok', { timeoutMs: 1_000 })).toMatchObject({ stale: true, tokenExpiresInMs: -5_000 });
    const image = await p.get('image-ans', { consistent: true });
    expect(image?.stale).toBe(false);
    expect(image).not.toHaveProperty('tokenExpiresInMs');
    expect(p.counters().staleDeliveries).toBe(1);

    // The same token, read after its expiry, is stale then.
    const later = at(now + 90_000);
    expect(await later.get('fresh-tok', { consistent: true })).toMatchObject({ stale: true, tokenExpiresInMs: 0 });
    expect(later.counters().staleDeliveries).toBe(1);
  });

  it('failed records are never stale', async () => {
    await putRecord('failed-tok', 'failed', { errorCode: 'ERROR_CAPTCHA_UNSOLVABLE', tokenExpiresAt: now - 1 });
    expect(await at(now).get('failed-tok', { consistent: true })).toMatchObject({ stale: false });
  });
});
