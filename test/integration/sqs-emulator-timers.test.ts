/**
 * The embedded SQS (local/emulators.ts) moves messages on its own clock, as SQS does: a delayed
 * message becomes visible when its delay ends and an in-flight one when its visibility timeout
 * ends, with nobody receiving from the queue (a disabled mapping). fauxqs alone did both only on
 * a receive, so a delayed copy in a lane nobody polled stayed out of the counts the governor reads.
 */
import { CreateQueueCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AwsClients } from '../../functions/adapters/aws-clients.js';
import { sleep } from '../../functions/core/helpers/time.js';
import { queueCount } from '../../local/demo/queues.js';
import { type EmulatorFixture, startEmulatorFixture } from '../helpers/fleet-fixture.js';

let fixture: EmulatorFixture;
let clients: AwsClients;
let n = 0;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  clients = fixture.clients;
});
afterAll(async () => {
  await fixture?.stop();
});

const counts = (queueUrl: string) => queueCount(clients.sqs, queueUrl);

/** The queue's counts once they show a visible message, or the last read after 10 s (a loaded machine has time). */
async function untilVisible(queueUrl: string): Promise<Awaited<ReturnType<typeof counts>>> {
  let seen = await counts(queueUrl);
  for (let i = 0; i < 100 && seen.visible === 0; i++) {
    await sleep(100);
    seen = await counts(queueUrl);
  }
  return seen;
}

async function queue(): Promise<string> {
  const { QueueUrl } = await clients.sqs.send(new CreateQueueCommand({ QueueName: `timers-${++n}` }));
  return QueueUrl as string;
}

describe('the embedded SQS’s clock', () => {
  it('makes a delayed message visible when its delay ends, with nobody receiving', async () => {
    const queueUrl = await queue();
    await clients.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'later', DelaySeconds: 1 }));
    expect(await counts(queueUrl)).toMatchObject({ visible: 0, delayed: 1 });

    expect(await untilVisible(queueUrl)).toEqual({ visible: 1, notVisible: 0, delayed: 0 });
  });

  it('makes an in-flight message visible again when its visibility timeout ends, with nobody receiving', async () => {
    const queueUrl = await queue();
    await clients.sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: 'dropped' }));
    await clients.sqs.send(new ReceiveMessageCommand({ QueueUrl: queueUrl, VisibilityTimeout: 1 }));
    expect(await counts(queueUrl)).toMatchObject({ visible: 0, notVisible: 1 });

    expect(await untilVisible(queueUrl)).toEqual({ visible: 1, notVisible: 0, delayed: 0 });
  });
});

describe('a delayed copy in the high lane on the local stack', () => {
  it('is solved: it becomes the high backlog the governor enables the lane for (it waited for good before)', async () => {
    const { startLocalStack } = await import('../../local/runtime.js');
    const { GetCommand } = await import('@aws-sdk/lib-dynamodb');
    const stack = await startLocalStack({ governor: { tickMs: 250 }, solver: { medianMs: 50 } });
    const send = (id: string, delaySeconds: number) =>
      stack.observer.sqs.send(
        new SendMessageCommand({
          QueueUrl: stack.resources.queueUrls.high,
          MessageBody: JSON.stringify({
            id,
            method: 'turnstile',
            priority: 'high',
            params: { sitekey: `0x4AAAAAAA${id.padStart(15, '0')}`, pageurl: `https://delayed.example.com/${id}` },
            submittedAt: Date.now(),
          }),
          DelaySeconds: delaySeconds,
        }),
      );
    /** Whether the task is solved within ~25 s (generous: a loaded machine is slow, a stuck lane never gets there). */
    const solved = async (id: string) => {
      for (let i = 0; i < 250; i++) {
        const { Item } = await stack.observer.documents.send(
          new GetCommand({ TableName: stack.resources.tables.results, Key: { taskId: id }, ConsistentRead: true }),
        );
        if (Item?.status === 'solved') return true;
        await sleep(100);
      }
      return false;
    };
    try {
      // Prepare: a high task opens the high lane; once it is solved and the lane is empty, the
      // governor closes it again.
      await send('opens1', 0);
      expect(await solved('opens1')).toBe(true);
      for (let i = 0; i < 100 && stack.pollers.high.enabled; i++) await sleep(100);
      expect(stack.pollers.high.enabled).toBe(false);

      // Act: a high task's message sent with a delay, as a fresh copy is, into the closed lane.
      await send('delayed1', 3);

      // Assess
      expect(await solved('delayed1')).toBe(true);
    } finally {
      await stack.stop({ graceMs: 500 });
    }
  }, 90_000);
});
