/**
 * The producer client through the fault proxy: it keeps working when the id check cannot be
 * read (sends with a warning, or refuses with a typed error when asked to), and rides out SQS
 * throttling on its sends.
 */
import { describe, expect, it } from 'vitest';
import { createAwsClients } from '../../functions/adapters/aws-clients.js';
import { createProducer, IdCheckUnavailableError, type ProducerWarning } from '../../clients/producer-client.js';
import type { FaultWindow } from '../../local/faults/plan.js';
import { startFaultProxy } from '../../local/faults/proxy.js';
import { recaptchaTask } from '../helpers/factories.js';
import { emulatorsWithProxies, queueDepth } from '../helpers/fleet-fixture.js';

const emulators = emulatorsWithProxies();
const { proxies } = emulators;

/** A producer whose calls go through a proxy with these windows (from now). */
async function producerThrough(windows: FaultWindow[], options: { idCheckUnavailable?: 'send' | 'refuse' } = {}) {
  const fleet = await emulators.fixture.createFleet();
  const proxy = await startFaultProxy({
    upstreams: { sqs: emulators.fixture.emulators.sqsEndpoint, dynamodb: emulators.fixture.emulators.dynamoEndpoint },
    plan: { windows },
  });
  proxies.push(proxy);
  proxy.arm();
  const warnings: ProducerWarning[] = [];
  const producer = createProducer({
    queueUrls: { normal: fleet.resources.queueUrls.normal },
    table: fleet.resources.tables.results,
    clients: createAwsClients({ sqsEndpoint: proxy.url, dynamoEndpoint: proxy.url, region: 'us-east-1' }),
    onWarning: (warning) => warnings.push(warning),
    ...options,
  });
  const depth = () => queueDepth(fleet.clients, fleet.resources.queueUrls.normal);
  return { producer, warnings, depth, proxy };
}

const dynamoDown: FaultWindow = { service: 'dynamodb', kind: 'unavailable', startMs: 0, durationMs: 60_000, rate: 1 };

describe('the producer on a store’s bad day', () => {
  it('sends when the id check cannot be read, and says so', async () => {
    const { producer, warnings, depth } = await producerThrough([dynamoDown]);
    const tasks = [recaptchaTask(), recaptchaTask()];

    const ids = await producer.submit(tasks);

    expect(ids).toEqual(tasks.map((t) => t.id));
    expect((await depth()).visible).toBe(2);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ code: 'ID_CHECK_SKIPPED', taskIds: ids });
    expect(producer.counters().idChecksSkipped).toBe(2);
  });

  it('gives the id check up at once on a refusal no retry changes (no permission)', async () => {
    const fleet = await emulators.fixture.createFleet();
    let reads = 0;
    const denied = {
      send: async () => {
        reads += 1;
        throw Object.assign(new Error('not authorized to perform: dynamodb:BatchGetItem'), {
          name: 'AccessDeniedException',
        });
      },
    };
    const warnings: ProducerWarning[] = [];
    const producer = createProducer({
      queueUrls: { normal: fleet.resources.queueUrls.normal },
      table: fleet.resources.tables.results,
      clients: { ...fleet.clients, documents: denied as unknown as typeof fleet.clients.documents },
      onWarning: (warning) => warnings.push(warning),
    });

    const started = Date.now();
    await producer.submit(recaptchaTask());

    // Before, five rounds over 1.5 s, each submit with an id.
    expect(reads).toBe(1);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(warnings[0]).toMatchObject({ code: 'ID_CHECK_SKIPPED' });
  });

  it('refuses with a typed error, sending nothing, when asked to', async () => {
    const { producer, depth } = await producerThrough([dynamoDown], { idCheckUnavailable: 'refuse' });
    const task = recaptchaTask();

    const error = await producer.submit(task).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(IdCheckUnavailableError);
    expect((error as IdCheckUnavailableError).taskIds).toEqual([task.id]);
    expect((await depth()).visible).toBe(0);
  });

  it('sends through SQS throttling that outlasts the SDK’s own retries', async () => {
    // The first three SendMessageBatch calls are throttled: all of the SDK's tries of the first call.
    const { producer, depth, proxy } = await producerThrough([
      {
        service: 'sqs',
        kind: 'throttle',
        startMs: 0,
        durationMs: 60_000,
        rate: 1,
        operations: ['SendMessageBatch'],
        count: 3,
      },
    ]);
    const tasks = Array.from({ length: 12 }, () => recaptchaTask());

    await producer.submit(tasks);

    expect((await depth()).visible).toBe(12);
    expect(proxy.stats().sqs.injected.throttle).toBe(3);
    expect(producer.counters().sendRetries).toBeGreaterThanOrEqual(1);
  });
});
