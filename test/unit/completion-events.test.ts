import { describe, expect, it } from 'vitest';
import type { PutEventsCommand, PutEventsCommandOutput } from '@aws-sdk/client-eventbridge';
import {
  createEventBridgePublisher,
  createLocalEventStream,
  EventPublishError,
} from '../../functions/adapters/completion-events.js';
import { isStale, toCompletionEvent } from '../../functions/core/events.js';
import type { TaskResult } from '../../functions/core/results.js';

const solved: TaskResult = {
  taskId: 'task-1',
  status: 'solved',
  method: 'userrecaptcha',
  priority: 'high',
  answer: '03AGdBq2-secret-token',
  attempts: 1,
  submittedAt: 1_000,
  startedAt: 1_500,
  completedAt: 21_000,
  queueWaitMs: 500,
  solveMs: 19_000,
  tokenExpiresAt: 140_000,
  expiresAt: 99,
};

function fakeClient(answers: Array<Partial<PutEventsCommandOutput> | Error>) {
  const sent: PutEventsCommand[] = [];
  return {
    sent,
    client: {
      send: async (command: PutEventsCommand) => {
        sent.push(command);
        const answer = answers.shift() ?? { FailedEntryCount: 0, Entries: [{ EventId: 'e' }] };
        if (answer instanceof Error) throw answer;
        return answer as PutEventsCommandOutput;
      },
    } as never,
  };
}

describe('completion events', () => {
  it('publishes one event per terminal result to the bus, without the answer by default', async () => {
    const { client, sent } = fakeClient([]);
    await createEventBridgePublisher({
      client,
      busName: 'fleet-bus',
      source: 'captcha-fleet.captcha-fleet',
      includeAnswer: false,
    }).publish(solved);
    expect(sent).toHaveLength(1);
    const entry = sent[0]!.input.Entries![0]!;
    expect(entry).toMatchObject({
      EventBusName: 'fleet-bus',
      Source: 'captcha-fleet.captcha-fleet',
      DetailType: 'CAPTCHA Task Completed',
    });
    const detail = JSON.parse(entry.Detail!);
    expect(detail).toMatchObject({
      version: 1,
      id: 'task-1',
      status: 'solved',
      method: 'userrecaptcha',
      endToEndMs: 20_000,
      tokenExpiresAt: 140_000,
    });
    expect(detail).not.toHaveProperty('answer');
    expect(entry.Detail).not.toContain('secret-token');
  });

  it('carries the answer only when configured', () => {
    expect(toCompletionEvent(solved, { includeAnswer: true }).answer).toBe('03AGdBq2-secret-token');
  });

  it('retries a failed entry and a thrown error, then succeeds', async () => {
    const { client, sent } = fakeClient([
      { FailedEntryCount: 1, Entries: [{ ErrorCode: 'InternalFailure', ErrorMessage: 'try again' }] },
      new Error('socket hang up'),
    ]);
    await createEventBridgePublisher({
      client,
      busName: 'b',
      source: 'captcha-fleet.captcha-fleet',
      includeAnswer: false,
      sleep: async () => {},
    }).publish(solved);
    expect(sent).toHaveLength(3);
  });

  it('gives up after its attempts with a typed error that names the task, not the answer', async () => {
    const failing = { FailedEntryCount: 1, Entries: [{ ErrorCode: 'ThrottlingException' }] };
    const { client } = fakeClient([failing, failing, failing]);
    const publishing = createEventBridgePublisher({
      client,
      busName: 'b',
      source: 'captcha-fleet.captcha-fleet',
      includeAnswer: true,
      sleep: async () => {},
    }).publish(solved);
    await expect(publishing).rejects.toBeInstanceOf(EventPublishError);
    await expect(publishing).rejects.toThrow(/task-1.*ThrottlingException/);
    await publishing.catch((error: Error) => expect(error.message).not.toContain('secret-token'));
  });

  it('says which provider solved the task in the detail, and leaves it out where no consumer wrote one', async () => {
    // Prepare
    const { client, sent } = fakeClient([]);
    const publisher = createEventBridgePublisher({
      client,
      busName: 'b',
      source: 'captcha-fleet.captcha-fleet',
      includeAnswer: false,
    });
    // Act
    await publisher.publish({ ...solved, provider: 'overflow' });
    await publisher.publish({
      taskId: 'bad-1',
      status: 'rejected',
      attempts: 0,
      errorCode: 'SCHEMA_VIOLATION',
      expiresAt: 9,
    });
    // Assess
    const [overflow, rejected] = sent.map((command) => JSON.parse(command.input.Entries?.[0]?.Detail ?? '{}'));
    expect(overflow).toMatchObject({ id: 'task-1', status: 'solved', provider: 'overflow' });
    expect(rejected).toMatchObject({ id: 'bad-1', status: 'rejected' });
    expect(rejected).not.toHaveProperty('provider');
  });

  it('refuses to announce a task still solving', () => {
    expect(() => toCompletionEvent({ ...solved, status: 'solving' }, { includeAnswer: false })).toThrow(/not terminal/);
  });

  it('delivers events in-process locally and lets a waiter pick its task', async () => {
    const stream = createLocalEventStream({ includeAnswer: false });
    const seen: string[] = [];
    const unsubscribe = stream.subscribe((event) => seen.push(event.id));
    const waiting = stream.waitFor('task-2', 1_000);
    await stream.publish(solved);
    await stream.publish({
      ...solved,
      taskId: 'task-2',
      status: 'failed',
      errorCode: 'ERROR_CAPTCHA_UNSOLVABLE',
      answer: undefined,
    });
    await expect(waiting).resolves.toMatchObject({
      id: 'task-2',
      status: 'failed',
      errorCode: 'ERROR_CAPTCHA_UNSOLVABLE',
    });
    unsubscribe();
    await stream.publish({ ...solved, taskId: 'task-3' });
    expect(seen).toEqual(['task-1', 'task-2']);
    expect(stream.published).toBe(3);
    await expect(stream.waitFor('never', 10)).resolves.toBeUndefined();
  });

  it('calls a token stale from its expiry on, and never an image answer', () => {
    expect(isStale(solved, 139_999)).toBe(false);
    expect(isStale(solved, 140_000)).toBe(true);
    expect(isStale({ status: 'solved', tokenExpiresAt: undefined }, Number.MAX_SAFE_INTEGER)).toBe(false);
  });
});
