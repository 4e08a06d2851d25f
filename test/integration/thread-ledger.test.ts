import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import {
  createDynamoThreadLedger,
  createMemoryThreadLedger,
  THREAD_LEDGER_ID,
  ThreadLedgerError,
} from '../../functions/adapters/thread-ledger.js';
import { GOVERNOR_STATE_ID, OVERFLOW_LEDGER_ID } from '../../functions/core/deployment.js';
import { startEmulatorFixture, type EmulatorFixture } from '../helpers/fleet-fixture.js';

let fixture: EmulatorFixture;
let tableName: string;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  tableName = (await fixture.createFleet()).resources.tables.governor;
});

afterAll(async () => {
  await fixture?.stop();
});

const LEASE_MS = 10_000;

function ledgerAt(now: { t: number }, id: string) {
  return createDynamoThreadLedger({
    documents: fixture.clients.documents,
    tableName,
    leaseMs: LEASE_MS,
    id,
    clock: () => now.t,
  });
}

describe('thread ledger on dynalite, through the real SDK', () => {
  it('counts the threads held: one per acceptance, back on release', async () => {
    // Prepare
    const now = { t: 1_000_000 };
    const ledger = ledgerAt(now, 'held-count');
    // Act: three accepted, one released
    const leases = [await ledger.accepted(now.t), await ledger.accepted(now.t + 1), await ledger.accepted(now.t + 2)];
    await ledger.released(leases[0] as (typeof leases)[number]);
    const reading = await ledger.read();
    // Assess
    expect(reading?.held).toBe(2);
    expect(reading?.acceptances).toBe(3);
  });

  it('keeps a leftover counted until its resumer frees it, once, through the real SDK', async () => {
    // Prepare
    const now = { t: 1_000_000 };
    const ledger = ledgerAt(now, 'leftovers');
    const lease = await ledger.accepted(now.t);
    await ledger.accepted(now.t + 1);
    // Act: the first delivery ends unanswered; later two resumers of 4711 read its answer.
    await ledger.leftOver(lease, '4711');
    const left = await ledger.read();
    await Promise.all([ledger.leftoverAnswered('4711'), ledger.leftoverAnswered('4711')]);
    const after = await ledger.read();
    // Assess
    expect(left).toMatchObject({ held: 2, leftover: 1 });
    expect(after?.held).toBe(1);
    expect(after).not.toHaveProperty('leftover');
  });

  it('records each acceptance with the threads held before it', async () => {
    // Prepare: two already held
    const now = { t: 2_000_000 };
    const ledger = ledgerAt(now, 'acceptance-held');
    await ledger.accepted(now.t);
    await ledger.accepted(now.t);
    // Act
    await ledger.accepted(now.t + 5);
    // Assess: held 2 when the third was accepted
    expect((await ledger.read())?.lastAcceptance).toEqual({ at: now.t + 5, held: 2 });
  });

  it('records each over-cap answer with the threads held at that moment', async () => {
    // Prepare: three held, one freed
    const now = { t: 3_000_000 };
    const ledger = ledgerAt(now, 'refusal-held');
    const first = await ledger.accepted(now.t);
    await ledger.accepted(now.t);
    await ledger.accepted(now.t);
    await ledger.released(first);
    // Act
    await ledger.refused(now.t + 7);
    const reading = await ledger.read();
    // Assess
    expect(reading?.lastRefusal).toEqual({ at: now.t + 7, held: 2 });
    expect(reading?.refusals).toBe(1);
  });

  it('counts the refusals since the newest acceptance (the refusal run), back to 0 on an acceptance', async () => {
    // Prepare: two held
    const now = { t: 3_500_000 };
    const ledger = ledgerAt(now, 'refusal-run');
    const first = await ledger.accepted(now.t);
    await ledger.accepted(now.t);
    // Act: refused twice in a row (a thread of ours freed between), then accepted
    await ledger.refused(now.t + 1);
    await ledger.released(first);
    await ledger.refused(now.t + 2);
    const inRun = await ledger.read();
    await ledger.accepted(now.t + 3);
    const after = await ledger.read();
    // Assess
    expect(inRun?.refusalRun).toBe(2);
    expect(inRun?.lastRefusal).toEqual({ at: now.t + 2, held: 1 });
    expect(after?.refusalRun).toBe(0);
  });

  it('moves the refusal run on answers recorded with the leases’ count (the parked design) as on its own', async () => {
    // Prepare: the parked design records events with the threads its leases count
    const now = { t: 3_600_000 };
    const ledger = ledgerAt(now, 'refusal-run-events');
    await ledger.recordEvent('acceptance', now.t, 19);
    // Act: a neighbour takes the plan; two refusals in a row, then an acceptance
    await ledger.recordEvent('refusal', now.t + 1, 3);
    await ledger.recordEvent('refusal', now.t + 2, 0);
    const inRun = await ledger.read();
    await ledger.recordEvent('acceptance', now.t + 3, 0);
    const after = await ledger.read();
    // Assess: the run is what the governor's room reads (without it the refusals looked answered)
    expect(inRun?.refusalRun).toBe(2);
    expect(inRun?.lastRefusal).toEqual({ at: now.t + 2, held: 0 });
    expect(inRun?.held).toBe(0);
    expect(after?.refusalRun).toBe(0);
  });

  it('moves the refusal run on recorded events in memory (the local runtime) too', async () => {
    const ledger = createMemoryThreadLedger({ leaseMs: 60_000, clock: () => 1_000 });
    await ledger.recordEvent('acceptance', 1_000, 5);
    await ledger.recordEvent('refusal', 1_001, 1);
    await ledger.recordEvent('refusal', 1_002, 0);
    expect((await ledger.read())?.refusalRun).toBe(2);
    await ledger.recordEvent('acceptance', 1_003, 0);
    expect((await ledger.read())?.refusalRun).toBe(0);
  });

  it('keeps the governor’s spend grant beside the counts, and removes it', async () => {
    // Prepare
    const now = { t: 3_700_000 };
    const ledger = ledgerAt(now, 'spend-grant');
    await ledger.accepted(now.t);
    // Act
    await ledger.setGrant({ limit: 5, until: now.t + 40_000 });
    const granted = await ledger.read();
    await ledger.setGrant(undefined);
    const cleared = await ledger.read();
    // Assess
    expect(granted?.grant).toEqual({ limit: 5, until: now.t + 40_000 });
    expect(granted?.acceptances).toBe(1);
    expect(cleared?.grant).toBeUndefined();
    expect(cleared?.acceptances).toBe(1);
  });

  it("keeps the governor's lift of the refusals' hold, never moving it back, in DynamoDB as in memory", async () => {
    // Prepare
    const now = { t: 3_800_000 };
    const ledgers = [ledgerAt(now, 'hold-lift'), createMemoryThreadLedger({ leaseMs: LEASE_MS, clock: () => now.t })];
    for (const ledger of ledgers) {
      await ledger.accepted(now.t - 3000);
      await ledger.refused(now.t - 2000);
      const before = await ledger.read();
      // Act: lift the refusal's hold, then a stale lift of an older one (a slower governor's).
      await ledger.liftHold(now.t - 2000);
      await ledger.liftHold(now.t - 5000);
      const after = await ledger.read();
      // Assess
      expect(before?.liftedAt).toBeUndefined();
      expect(after?.liftedAt).toBe(now.t - 2000);
      expect(after?.lastRefusal?.at).toBe(now.t - 2000);
      expect(after?.refusals).toBe(1);
    }
  });

  it('counts a leftover from the moment its delivery gave up on it, not from its acceptance (the solver may pause it through an outage)', async () => {
    // Prepare: accepted in one lease bucket, handed back unanswered two buckets later.
    const now = { t: 3_800_000 };
    const ledger = ledgerAt(now, 'leftover-bucket');
    const lease = await ledger.accepted(now.t);
    now.t += 2 * LEASE_MS;
    // Act
    await ledger.leftOver(lease, '777');
    const left = await ledger.read();
    now.t += LEASE_MS;
    const later = await ledger.read();
    await ledger.leftoverAnswered('777');
    const answered = await ledger.read();
    // Assess: still held a lease after the hand-back (its acceptance's bucket had aged out), freed once answered.
    expect(left?.held).toBe(1);
    expect(left?.leftover).toBe(1);
    expect(later?.held).toBe(1);
    expect(answered?.held).toBe(0);
    expect(answered?.leftover).toBeUndefined();
  });

  it('counts a thread across the lease boundary, and drops one never released after two leases', async () => {
    // Prepare: one thread taken just before a bucket boundary and never released (a crash)
    const now = { t: 4 * LEASE_MS - 1 };
    const ledger = ledgerAt(now, 'lease-expiry');
    await ledger.accepted(now.t);
    // Act / Assess: still held in the next bucket, gone two buckets later
    now.t = 4 * LEASE_MS + 1;
    expect((await ledger.read())?.held).toBe(1);
    now.t = 5 * LEASE_MS + 1;
    expect((await ledger.read())?.held).toBe(0);
  });

  it('counts the threads a consumer whose clock runs seconds ahead took across a boundary the others have not reached', async () => {
    // A review: a consumer 3 s fast, 2 s before a boundary, counted its acceptances in the next
    // bucket, which the others did not read until they reached it: 4 of 7 held seen (wait mode:
    // room for 3 submissions more, refused over the cap; the spend grant short by 3 solves).
    const real = { t: 21 * LEASE_MS + LEASE_MS - 2_000 };
    const ahead = { t: real.t + 3_000 };
    const onTime = ledgerAt(real, 'clock-skew');
    const fast = ledgerAt(ahead, 'clock-skew');
    for (let i = 0; i < 4; i++) await onTime.accepted(real.t);
    for (let i = 0; i < 3; i++) await fast.accepted(ahead.t);
    expect((await onTime.read())?.held).toBe(7);
    // …and once past the boundary, as before.
    real.t += 2_001;
    expect((await onTime.read())?.held).toBe(7);
  });

  it('leaves the bucket the others still count as their previous when a writer ahead of them accepts (a review of the fix above)', async () => {
    // Four threads taken a second before a boundary; a writer 3 s fast accepts 2 s before the
    // next one: its REMOVE of its bucket − 2 took the others' previous bucket, and 1 of 5 was seen.
    const real = { t: 31 * LEASE_MS - 1_000 };
    const onTime = ledgerAt(real, 'skew-remove');
    for (let i = 0; i < 4; i++) await onTime.accepted(real.t);
    real.t = 32 * LEASE_MS - 2_000;
    const fast = ledgerAt({ t: real.t + 3_000 }, 'skew-remove');
    await fast.accepted(real.t + 3_000);
    expect((await onTime.read())?.held).toBe(5);
  });

  it('keeps the item small: old buckets are removed on the next acceptance', async () => {
    // Prepare: a leaked count in an old bucket
    const now = { t: 10 * LEASE_MS };
    const ledger = ledgerAt(now, 'old-buckets');
    await ledger.accepted(now.t);
    // Act: an acceptance three leases later
    now.t = 13 * LEASE_MS;
    await ledger.accepted(now.t);
    // Assess
    const item = await fixture.clients.documents.send(
      new GetCommand({ TableName: tableName, Key: { id: 'old-buckets' } }),
    );
    expect(Object.keys(item.Item ?? {}).filter((k) => /^h\d+$/.test(k))).toEqual(['h13']);
  });

  it('reads an empty ledger as nothing recorded, and leaves the governor state item alone', async () => {
    // Prepare: a governor state item beside it
    await fixture.clients.documents.send(
      new PutCommand({ TableName: tableName, Item: { id: GOVERNOR_STATE_ID, version: 1, state: { x: 1 } } }),
    );
    const ledger = createDynamoThreadLedger({ documents: fixture.clients.documents, tableName, leaseMs: LEASE_MS });
    // Act
    const reading = await ledger.read();
    await ledger.refused(Date.now());
    // Assess
    expect(reading).toEqual({ held: 0, refusals: 0, acceptances: 0, grantTaken: 0 });
    const state = await fixture.clients.documents.send(
      new GetCommand({ TableName: tableName, Key: { id: GOVERNOR_STATE_ID } }),
    );
    expect(state.Item).toEqual({ id: GOVERNOR_STATE_ID, version: 1, state: { x: 1 } });
    const ledgerItem = await fixture.clients.documents.send(
      new GetCommand({ TableName: tableName, Key: { id: THREAD_LEDGER_ID } }),
    );
    expect(ledgerItem.Item?.refusals).toBe(1);
  });

  it('fails with a typed error naming the cause when the table is missing', async () => {
    const ledger = createDynamoThreadLedger({
      documents: fixture.clients.documents,
      tableName: 'no-such-table',
      leaseMs: LEASE_MS,
    });
    await expect(ledger.refused(1)).rejects.toThrow(ThreadLedgerError);
    await expect(ledger.read()).rejects.toThrow(/ResourceNotFoundException/);
  });

  it('counts a solve in the release of its thread, and only one whose answer was read as solved', async () => {
    // Prepare: three threads taken
    const now = { t: 8_000_000 };
    const ledger = ledgerAt(now, 'solved-count');
    const leases = [await ledger.accepted(now.t), await ledger.accepted(now.t), await ledger.accepted(now.t)];
    // Act: two answers read as solved, one thread freed by a failed captcha
    await ledger.released(leases[0] as (typeof leases)[number], { solved: true });
    await ledger.released(leases[1] as (typeof leases)[number], { solved: false });
    await ledger.released(leases[2] as (typeof leases)[number], { solved: true });
    // Assess
    expect(await ledger.read()).toMatchObject({ held: 0, acceptances: 3, solved: 2 });
  });

  it("adds the watch's batch of recorded answers to the consumers' solves, without touching the threads held", async () => {
    // Prepare: one consumer-read solve, one thread still held
    const now = { t: 8_000_000 };
    const ledger = ledgerAt(now, 'watch-solved');
    await ledger.released(await ledger.accepted(now.t), { solved: true });
    await ledger.accepted(now.t + 1);
    // Act: the watch adds two batches (a batch of 0 writes nothing)
    await ledger.countSolved(3);
    await ledger.countSolved(0);
    await ledger.countSolved(2);
    // Assess
    expect(await ledger.read()).toMatchObject({ held: 1, acceptances: 2, solved: 6 });
  });

  it('reads solved as absent, never 0, on a ledger never told of a solve', async () => {
    // Prepare: threads taken and freed, none solved
    const now = { t: 9_000_000 };
    const ledger = ledgerAt(now, 'never-solved');
    await ledger.released(await ledger.accepted(now.t));
    await ledger.refused(now.t);
    // Act
    const reading = await ledger.read();
    // Assess
    expect(reading).toMatchObject({ held: 0, acceptances: 1, refusals: 1 });
    expect(reading).not.toHaveProperty('solved');
  });

  it('keeps the overflow ledger apart from the primary one', async () => {
    // Prepare: the two consumers' ledgers on one table
    const now = { t: 11_000_000 };
    const overflow = ledgerAt(now, OVERFLOW_LEDGER_ID);
    const primary = ledgerAt(now, THREAD_LEDGER_ID);
    const before = await primary.read();
    // Act
    await overflow.released(await overflow.accepted(now.t), { solved: true });
    // Assess
    expect(await overflow.read()).toMatchObject({ held: 0, acceptances: 1, solved: 1 });
    expect(await primary.read()).toEqual(before);
  });

  it('behaves like the memory ledger for the same sequence', async () => {
    // Prepare
    const now = { t: 7_000_000 };
    const dynamo = ledgerAt(now, 'same-as-memory');
    const memory = createMemoryThreadLedger({ leaseMs: LEASE_MS, clock: () => now.t });
    // Act
    const takes: boolean[][] = [];
    for (const ledger of [dynamo, memory]) {
      const a = await ledger.accepted(now.t);
      await ledger.accepted(now.t + 1);
      await ledger.refused(now.t + 2);
      await ledger.released(a);
      const b = await ledger.accepted(now.t + 3);
      await ledger.released(b, { solved: true });
      const c = await ledger.accepted(now.t + 4);
      now.t += LEASE_MS;
      await ledger.leftOver(c, '42');
      await ledger.setGrant({ limit: 2, until: now.t + 1000 });
      takes.push([await ledger.takeGrant?.(), await ledger.takeGrant?.(), await ledger.takeGrant?.()] as boolean[]);
      await ledger.returnGrant?.();
      now.t -= LEASE_MS;
    }
    now.t += LEASE_MS;
    // Assess: the same counts, the same reservations (two of three taken under a grant of two, one given back)
    expect(takes).toEqual([
      [true, true, false],
      [true, true, false],
    ]);
    const read = await dynamo.read();
    expect(read?.grantTaken).toBe(1);
    expect(read).toEqual(await memory.read());
  });

  it('grants each reservation once, to invocations that read the same count at once, and takes one given back again', async () => {
    // GIVEN a grant of 3 on a ledger that has seen 40 acceptances (the grant counts in reservations)
    const now = { t: 8_000_000 };
    const ledger = ledgerAt(now, 'grant-reservations');
    for (let i = 0; i < 40; i++) await ledger.accepted(now.t);
    const before = await ledger.read();
    expect(before?.grantTaken).toBe(0);
    await ledger.setGrant({ limit: (before?.grantTaken ?? 0) + 3, until: now.t + 40_000 });
    // WHEN twelve invocations reserve at the same moment
    const taken = await Promise.all(Array.from({ length: 12 }, () => ledger.takeGrant()));
    // THEN exactly three get one
    expect(taken.filter(Boolean)).toHaveLength(3);
    expect((await ledger.read())?.grantTaken).toBe(3);
    // AND one given back (its submission ended unaccepted) is taken by the next, and no more
    await ledger.returnGrant();
    expect(await ledger.takeGrant()).toBe(true);
    expect(await ledger.takeGrant()).toBe(false);
    // AND the next tick's grant counts from the reservations as they stand: two more
    await ledger.setGrant({ limit: 3 + 2, until: now.t + 50_000 });
    const again = await Promise.all(Array.from({ length: 5 }, () => ledger.takeGrant()));
    expect(again.filter(Boolean)).toHaveLength(2);
    // AND with the grant removed (money back over the level) none is taken, and the count stays for the next grant
    await ledger.setGrant(undefined);
    expect(await ledger.takeGrant()).toBe(false);
    expect((await ledger.read())?.grantTaken).toBe(5);
  });
});
