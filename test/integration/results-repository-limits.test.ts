/**
 * The results repository against what DynamoDB refuses: a record over the 400 KB item limit is
 * refused before it is sent (typed, with its size), and every DynamoDB failure carries its
 * cause (throttled, item too large, access denied) in the message a log line prints; and the
 * count of a task's unsolvable answers, kept on its record across deliveries.
 */
import type { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DYNAMODB_ITEM_LIMIT_BYTES,
  DynamoResultsRepository,
  RecordTooLargeError,
  ResultsRepositoryError,
} from '../../functions/adapters/results-repository.js';
import { parseTask, type Task } from '../../functions/core/task.js';
import { recaptchaTask } from '../helpers/factories.js';
import { type EmulatorFixture, startEmulatorFixture, type TestFleet } from '../helpers/fleet-fixture.js';

let fixture: EmulatorFixture;
let fleet: TestFleet;
let repository: DynamoResultsRepository;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  fleet = await fixture.createFleet({ resultTtlSeconds: 600 });
  repository = new DynamoResultsRepository({
    documents: fleet.clients.documents,
    tableName: fleet.resources.tables.results,
    ttlSeconds: 600,
  });
});

afterAll(async () => {
  await fixture?.stop();
});

function task(): Task {
  const parsed = parseTask(JSON.stringify(recaptchaTask()), 'fallback', 1_000);
  if (!parsed.ok) throw new Error('factory task is invalid');
  return parsed.task;
}

async function claimed(): Promise<Task> {
  const t = task();
  await repository.claim({ task: t, claimToken: 'token', now: Date.now(), leaseMs: 60_000 });
  return t;
}

const solved = (answer: string) => ({ status: 'solved' as const, answer, solverId: '75357844800', completedAt: 1 });

describe('record size', () => {
  it('refuses a solved record whose answer cannot fit one item, naming the sizes, and writes nothing', async () => {
    // Prepare
    const t = await claimed();
    const answer = 'x'.repeat(DYNAMODB_ITEM_LIMIT_BYTES);

    // Act
    const error = await repository.complete(t.id, 'token', solved(answer)).catch((e: unknown) => e);

    // Assess
    expect(error).toBeInstanceOf(RecordTooLargeError);
    expect(error).toMatchObject({ taskId: t.id, answerBytes: DYNAMODB_ITEM_LIMIT_BYTES });
    // Refused before sending: no DynamoDB error behind it.
    expect((error as Error).cause).toBeUndefined();
    expect((error as Error).message).toMatch(/over DynamoDB's item limit of 409600 bytes/);
    expect(await repository.get(t.id, { consistent: true })).toMatchObject({ status: 'solving' });
  });

  it('still records an answer that fits with the record around it (300 KB)', async () => {
    const t = await claimed();

    await expect(repository.complete(t.id, 'token', solved('y'.repeat(300 * 1024)))).resolves.toBe(true);

    expect((await repository.get(t.id, { consistent: true }))?.answer).toHaveLength(300 * 1024);
  });
});

describe('the cause of a DynamoDB failure', () => {
  it("names DynamoDB's own size refusal (dynalite's ValidationException on a put)", async () => {
    const error = await repository
      .reject(
        task().id,
        { errorCode: 'X', errorMessage: 'z'.repeat(DYNAMODB_ITEM_LIMIT_BYTES + 1), completedAt: 1 },
        'w',
      )
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(ResultsRepositoryError);
    expect((error as Error).message).toMatch(/could not be written: ValidationException \(item too large\)/);
  });

  // Throttling and access denial cannot be provoked on dynalite: a client that fails as DynamoDB does.
  it.each([
    ['ProvisionedThroughputExceededException', 'throttled'],
    ['ThrottlingException', 'throttled'],
    ['AccessDeniedException', 'access denied'],
    ['ResourceNotFoundException', 'table missing'],
  ])('names %s as %s in the message a log prints', async (name, meaning) => {
    const failing = {
      send: async () => {
        throw Object.assign(new Error('the service said no'), { name });
      },
    } as unknown as DynamoDBDocumentClient;
    const broken = new DynamoResultsRepository({ documents: failing, tableName: 'results', ttlSeconds: 600 });

    const errors = await Promise.all([
      broken.claim({ task: task(), claimToken: 't', now: 1, leaseMs: 1 }).catch((e: unknown) => e),
      broken.complete('task-1', 't', solved('ok')).catch((e: unknown) => e),
      broken.get('task-1').catch((e: unknown) => e),
    ]);

    for (const error of errors) {
      expect(error).toBeInstanceOf(ResultsRepositoryError);
      expect((error as Error).message).toContain(`: ${name} (${meaning}): the service said no`);
    }
  });
});

describe('the unsolvable answers a task has had, across deliveries', () => {
  it('counts each submission once, for the claim that holds the record, and says nothing for another', async () => {
    // GIVEN a claimed task whose submissions the solver could not solve
    const t = await claimed();
    // THEN the first answer counts 1; the same answer again (a retry, a delivery that died
    // before it resubmitted) counts nothing more; the next submission's counts 2
    expect(await repository.countUnsolvable(t.id, 'token', '111')).toBe(1);
    expect(await repository.countUnsolvable(t.id, 'token', '111')).toBe(1);
    expect(await repository.countUnsolvable(t.id, 'token', '222')).toBe(2);
    // AND a delivery whose claim is not the record's gets no count (it keeps its own)
    expect(await repository.countUnsolvable(t.id, 'other-token', '333')).toBeUndefined();
    expect((await repository.get(t.id, { consistent: true }))?.unsolvableAnswers).toBe(2);
  });
});
