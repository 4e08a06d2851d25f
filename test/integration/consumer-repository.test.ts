import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { parseTask, type Task, type TaskMessage } from '../../functions/core/task.js';
import { taskFingerprint } from '../../functions/core/task-identity.js';
import { startEmulatorFixture, type EmulatorFixture, type TestFleet } from '../helpers/fleet-fixture.js';
import { recaptchaTask } from '../helpers/factories.js';

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

function task(overrides: Partial<TaskMessage> & { id?: string } = {}): Task {
  const parsed = parseTask(JSON.stringify(recaptchaTask(overrides)), 'fallback', 1_000);
  if (!parsed.ok) throw new Error('factory task is invalid');
  return parsed.task;
}

describe('DynamoResultsRepository claims', () => {
  it('claims a new task, holds it against another delivery, and lets an expired lease be taken over with the solver id', async () => {
    const t = task();
    const now = Date.now();

    const first = await repository.claim({ task: t, claimToken: 'a', now, leaseMs: 10_000 });
    expect(first).toMatchObject({
      outcome: 'claimed',
      takenOver: false,
      record: { status: 'solving', attempts: 1, claimToken: 'a', leaseUntil: now + 10_000 },
    });
    expect(first.outcome === 'claimed' && first.record.expiresAt).toBe(Math.floor(now / 1000) + 600);
    expect(await repository.recordSolverId(t.id, 'a', 'sid-1')).toBe(true);

    const second = await repository.claim({ task: t, claimToken: 'b', now: now + 1, leaseMs: 10_000 });
    expect(second).toEqual({ outcome: 'held', leaseUntil: now + 10_000 });

    const later = now + 10_001;
    const takeover = await repository.claim({ task: t, claimToken: 'c', now: later, leaseMs: 10_000 });
    expect(takeover).toMatchObject({
      outcome: 'claimed',
      takenOver: true,
      previousSolverId: 'sid-1',
      record: { attempts: 2, claimToken: 'c' },
    });

    // The first delivery's claim is gone: its writes are refused.
    expect(await repository.recordSolverId(t.id, 'a', 'sid-2')).toBe(false);
    expect(await repository.complete(t.id, 'a', { status: 'solved', answer: 'x', completedAt: later })).toBe(false);
    expect((await repository.get(t.id, { consistent: true }))?.solverId).toBe('sid-1');
  });

  it('completes only under the current claim, drops the claim fields, and then answers terminal', async () => {
    const t = task();
    const now = Date.now();
    await repository.claim({ task: t, claimToken: 'a', now, leaseMs: 10_000 });

    expect(
      await repository.complete(t.id, 'a', { status: 'solved', answer: 'tok', solverId: 'sid', completedAt: now + 5 }),
    ).toBe(true);
    const record = await repository.get(t.id, { consistent: true });
    expect(record).toMatchObject({
      taskId: t.id,
      status: 'solved',
      answer: 'tok',
      attempts: 1,
      method: 'userrecaptcha',
      priority: 'normal',
      submittedAt: 1_000,
    });
    expect(record?.claimToken).toBeUndefined();
    expect(record?.leaseUntil).toBeUndefined();

    // Long after the lease (10 s), still within the record's TTL (600 s).
    const again = await repository.claim({ task: t, claimToken: 'b', now: now + 60_000, leaseMs: 10_000 });
    expect(again).toMatchObject({ outcome: 'terminal', record: { status: 'solved' } });
    // Another claim's complete finds the record someone else's; the writer's own retry (its first
    // answer lost) finds it its own and leaves it as it is.
    expect(await repository.complete(t.id, 'b', { status: 'failed', completedAt: now })).toBe(false);
    expect(await repository.complete(t.id, 'a', { status: 'failed', completedAt: now })).toBe(true);
    expect(await repository.get(t.id, { consistent: true })).toMatchObject({ status: 'solved', completedBy: 'a' });
  });

  it('release lets the next delivery take over at once and keeps attempts and the solver id', async () => {
    const t = task();
    const now = Date.now();
    await repository.claim({ task: t, claimToken: 'a', now, leaseMs: 60_000 });
    await repository.recordSolverId(t.id, 'a', 'sid-9');
    await repository.release(t.id, 'b'); // not the holder: no effect
    expect(await repository.claim({ task: t, claimToken: 'b', now: now + 1, leaseMs: 60_000 })).toMatchObject({
      outcome: 'held',
    });

    await repository.release(t.id, 'a');
    const next = await repository.claim({ task: t, claimToken: 'b', now: now + 2, leaseMs: 60_000 });
    expect(next).toMatchObject({
      outcome: 'claimed',
      takenOver: true,
      previousSolverId: 'sid-9',
      record: { attempts: 2 },
    });
  });

  it('records the claiming consumer’s provider; the other lane does not take over a submission it cannot poll, and resumes one it can', async () => {
    // Prepare: the primary consumer claimed and submitted, then its lease ran out
    const t = task();
    const now = Date.now();
    const primary = await repository.claim({ task: t, claimToken: 'a', now, leaseMs: 1_000, provider: 'primary' });
    expect(primary).toMatchObject({ outcome: 'claimed', record: { provider: 'primary' } });
    await repository.recordSolverId(t.id, 'a', 'primary-sid', 'primary');
    // Act: the message comes back on the overflow lane, which holds no primary key
    const overflow = await repository.claim({
      task: t,
      claimToken: 'b',
      now: now + 1_001,
      leaseMs: 1_000,
      provider: 'overflow',
    });
    // Assess: taking over would pay the overflow provider for a task the plan may have solved
    expect(overflow).toMatchObject({ outcome: 'held_elsewhere', solverProvider: 'primary' });
    expect(await repository.get(t.id, { consistent: true })).toMatchObject({ claimToken: 'a', attempts: 1 });

    // The overflow lane's own submission, taken over by the primary, which may poll the overflow provider
    const u = task();
    await repository.claim({ task: u, claimToken: 'c', now, leaseMs: 1_000, provider: 'overflow' });
    await repository.recordSolverId(u.id, 'c', 'overflow-sid', 'overflow');
    const resumed = await repository.claim({
      task: u,
      claimToken: 'd',
      now: now + 1_001,
      leaseMs: 1_000,
      provider: 'primary',
      resumable: ['primary', 'overflow'],
    });
    expect(resumed).toMatchObject({
      outcome: 'claimed',
      takenOver: true,
      previousSolverId: 'overflow-sid',
      previousSolverProvider: 'overflow',
      record: { provider: 'primary', attempts: 2 },
    });
    expect(
      await repository.complete(u.id, 'd', { status: 'solved', answer: 'tok', provider: 'overflow', completedAt: now }),
    ).toBe(true);
    expect(await repository.get(u.id, { consistent: true })).toMatchObject({ status: 'solved', provider: 'overflow' });
  });

  it('resumes the submission on a takeover by the same provider’s consumer (a record without provider is the primary’s)', async () => {
    // Prepare: a claim written without a provider (before overflow existed)
    const t = task();
    const now = Date.now();
    await repository.claim({ task: t, claimToken: 'a', now, leaseMs: 1_000 });
    await repository.recordSolverId(t.id, 'a', 'old-sid');
    // Act
    const next = await repository.claim({
      task: t,
      claimToken: 'b',
      now: now + 1_001,
      leaseMs: 1_000,
      provider: 'primary',
    });
    // Assess
    expect(next).toMatchObject({ outcome: 'claimed', previousSolverId: 'old-sid', record: { provider: 'primary' } });
  });

  it('writes a rejected record only when no record exists', async () => {
    const t = task();
    await repository.reject(
      'rejected-1',
      {
        errorCode: 'SCHEMA_VIOLATION',
        errorMessage: 'params.pageurl: required',
        method: 'hcaptcha',
        completedAt: 5_000,
      },
      'w1',
    );
    expect(await repository.get('rejected-1')).toEqual({
      taskId: 'rejected-1',
      status: 'rejected',
      attempts: 0,
      errorCode: 'SCHEMA_VIOLATION',
      errorMessage: 'params.pageurl: required',
      method: 'hcaptcha',
      completedAt: 5_000,
      completedBy: 'w1',
      expiresAt: 5 + 600,
    });

    await repository.claim({ task: t, claimToken: 'a', now: Date.now(), leaseMs: 10_000 });
    await repository.reject(t.id, { errorCode: 'MALFORMED_JSON', errorMessage: 'x', completedAt: 1 }, 'w2');
    expect((await repository.get(t.id, { consistent: true }))?.status).toBe('solving');
  });
});

describe('DynamoResultsRepository task identity', () => {
  /** The same id as `t`, other content (another page). */
  const other = (t: Task) =>
    task({
      id: t.id,
      params: { googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://other.example/' },
    });

  it('records the fingerprint of the method and params, never the params', async () => {
    const t = task();
    const claim = await repository.claim({ task: t, claimToken: 'a', now: Date.now(), leaseMs: 10_000 });
    const record = await repository.get(t.id, { consistent: true });
    expect(claim.outcome === 'claimed' && claim.record.fingerprint).toBe(taskFingerprint(t));
    expect(record?.fingerprint).toBe(taskFingerprint(t));
    expect(JSON.stringify(record)).not.toContain('googlekey');
    expect(JSON.stringify(record)).not.toContain((t.params as { pageurl: string }).pageurl);
  });

  it('answers a conflict, leaving the record alone, when the same id comes with other content', async () => {
    const t = task();
    const now = Date.now();
    await repository.claim({ task: t, claimToken: 'a', now, leaseMs: 10_000 });
    await repository.complete(t.id, 'a', { status: 'solved', answer: 'tok-a', completedAt: now + 1 });
    const before = await repository.get(t.id, { consistent: true });

    const claim = await repository.claim({ task: other(t), claimToken: 'b', now: now + 2, leaseMs: 10_000 });

    expect(claim).toMatchObject({ outcome: 'conflict', record: { status: 'solved', answer: 'tok-a' } });
    expect(await repository.get(t.id, { consistent: true })).toEqual(before);
  });

  it('answers a conflict, not a takeover, when the other content finds an expired lease', async () => {
    const t = task();
    const now = Date.now();
    await repository.claim({ task: t, claimToken: 'a', now, leaseMs: 1 });
    await repository.recordSolverId(t.id, 'a', 'sid-a');

    const claim = await repository.claim({ task: other(t), claimToken: 'b', now: now + 10, leaseMs: 10_000 });

    expect(claim).toMatchObject({ outcome: 'conflict', record: { status: 'solving', claimToken: 'a', attempts: 1 } });
  });

  it('replaces a rejected record with a fresh claim', async () => {
    const t = task();
    await repository.reject(
      t.id,
      { errorCode: 'MALFORMED_JSON', errorMessage: 'body is not JSON', completedAt: 1 },
      'w',
    );

    const claim = await repository.claim({ task: t, claimToken: 'a', now: Date.now(), leaseMs: 10_000 });

    expect(claim).toMatchObject({ outcome: 'claimed', takenOver: false, record: { status: 'solving', attempts: 1 } });
    const record = await repository.get(t.id, { consistent: true });
    expect(record).toMatchObject({ status: 'solving', claimToken: 'a', fingerprint: taskFingerprint(t) });
    expect(record?.errorCode).toBeUndefined();
  });

  it('takes a record written before fingerprints as the same content: a duplicate, and takeable', async () => {
    const finished = task();
    const abandoned = task();
    const now = Date.now();
    const expiresAt = Math.floor(now / 1000) + 600;
    for (const item of [
      { taskId: finished.id, status: 'solved', answer: 'old-tok', attempts: 1, expiresAt },
      { taskId: abandoned.id, status: 'solving', leaseUntil: now - 1, solverId: 'sid-old', attempts: 1, expiresAt },
    ]) {
      await fleet.clients.documents.send(new PutCommand({ TableName: fleet.resources.tables.results, Item: item }));
    }

    const duplicate = await repository.claim({ task: other(finished), claimToken: 'b', now, leaseMs: 10_000 });
    const takeover = await repository.claim({ task: abandoned, claimToken: 'c', now, leaseMs: 10_000 });

    expect(duplicate).toMatchObject({ outcome: 'terminal', record: { answer: 'old-tok' } });
    expect(takeover).toMatchObject({ outcome: 'claimed', takenOver: true, previousSolverId: 'sid-old' });
    expect((await repository.get(abandoned.id, { consistent: true }))?.fingerprint).toBe(taskFingerprint(abandoned));
  });

  it('lets a record past its TTL, not yet deleted by DynamoDB, hold nothing', async () => {
    const t = task();
    const now = Date.now();
    await repository.claim({ task: t, claimToken: 'a', now, leaseMs: 10_000 });
    await repository.complete(t.id, 'a', { status: 'solved', answer: 'tok-a', completedAt: now });
    const afterTtl = now + 601_000;

    const claim = await repository.claim({ task: other(t), claimToken: 'b', now: afterTtl, leaseMs: 10_000 });

    expect(claim).toMatchObject({ outcome: 'claimed', takenOver: false, record: { attempts: 1 } });
    const record = await repository.get(t.id, { consistent: true });
    expect(record).toMatchObject({ status: 'solving', fingerprint: taskFingerprint(other(t)) });
    expect(record?.answer).toBeUndefined();
  });
});
