/**
 * The parked fleet's metric window on the embedded DynamoDB (functions/adapters/solve-window.ts):
 * minutes rotating through four slot items, concurrent first writers of a minute, a writer a
 * rotation behind, the thread ledger's per-minute submissions, a failed read; then the consumer
 * and the governor's watch writing it, and the governor reading it instead of CloudWatch.
 */
import type { CloudWatchClient, MetricDataQuery } from '@aws-sdk/client-cloudwatch';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ENV, parseEnvironment } from '../../functions/core/environment.js';
import { createGovernorFromEnvironment } from '../../functions/governor/wiring.js';
import { createDynamoSolveWindow, solveWindowReader } from '../../functions/adapters/solve-window.js';
import { createDynamoThreadLedger, THREAD_LEDGER_ID } from '../../functions/adapters/thread-ledger.js';
import { minuteOf, solveWindowSlotIds, WINDOW_SLOT_ITEM_BYTES } from '../../functions/core/solve-window.js';
import { percentile } from '../../functions/core/helpers/stats.js';
import { type EmulatorFixture, startEmulatorFixture, type TestFleet } from '../helpers/fleet-fixture.js';

let fixture: EmulatorFixture;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});

/**
 * An item's size as DynamoDB bills it: each attribute's name (UTF-8) and value; a number takes
 * about one byte per two significant digits plus one, a string its UTF-8 length.
 */
function dynamoItemBytes(item: Record<string, unknown>): number {
  let bytes = 0;
  for (const [name, value] of Object.entries(item)) {
    bytes += Buffer.byteLength(name);
    if (typeof value === 'number')
      bytes +=
        Math.ceil(
          String(Math.abs(value))
            .replace(/[.-]/g, '')
            .replace(/^0+|0+$/g, '').length / 2,
        ) + 1;
    else bytes += Buffer.byteLength(String(value));
  }
  return bytes;
}

/** 20 s into a minute. */
const START = 28_333_335 * 60_000 + 20_000;

async function windowOn(fleet: TestFleet, clock: () => number) {
  const window = createDynamoSolveWindow({
    documents: fleet.clients.documents,
    tableName: fleet.resources.tables.governor,
    ledgerId: THREAD_LEDGER_ID,
    clock,
  });
  const ledger = createDynamoThreadLedger({
    documents: fleet.clients.documents,
    tableName: fleet.resources.tables.governor,
    leaseMs: 300_000,
    clock,
  });
  const item = async (id: string) =>
    (
      await fleet.clients.documents.send(
        new GetCommand({ TableName: fleet.resources.tables.governor, Key: { id }, ConsistentRead: true }),
      )
    ).Item;
  return { window, ledger, item };
}

describe('the metric window on DynamoDB', () => {
  it('sums the last two whole minutes; a minute four back is gone from its slot', async () => {
    // Prepare
    const fleet = await fixture.createFleet({ planThreads: 10 });
    let now = START;
    const { window } = await windowOn(fleet, () => now);
    // Act: one write a minute for five minutes (0–4), each a solve and a transient error.
    for (let i = 0; i < 5; i++) {
      await window.add({ solved: 1, transientErrors: 1, solveMs: [10_000 * (i + 1)] }, now);
      now += 60_000;
    }
    // Assess: 20 s into minute 5, minutes 3 and 4; 20 s into minute 4, minutes 2 and 3 (minute 4,
    // in the slot minute 0 had, holds only its own).
    expect(await window.read()).toMatchObject({ solved: 2, transientErrors: 2, windowMs: 120_000 });
    expect((await window.read())?.meanSolveMs).toBe(45_000);
    now -= 60_000;
    expect((await window.read())?.meanSolveMs).toBe(35_000);
  });

  it('starts a minute’s slot afresh once, however many writers arrive at once, and loses none of their counts', async () => {
    // Prepare: the slot holds a minute four back.
    const fleet = await fixture.createFleet({ planThreads: 10 });
    const now = START;
    const { window, item } = await windowOn(fleet, () => now);
    await window.add({ solved: 50, solveMs: [1_000] }, now - 4 * 60_000);
    // Act: 25 writers of this minute at once.
    await Promise.all(Array.from({ length: 25 }, () => window.add({ solved: 1, solveMs: [2_000] }, now)));
    // Assess
    const slotId = solveWindowSlotIds(THREAD_LEDGER_ID)[minuteOf(now) % 4] as string;
    expect(await item(slotId)).toMatchObject({ minute: minuteOf(now), solved: 25, solveCount: 25 });
    const later = createDynamoSolveWindow({
      documents: fleet.clients.documents,
      tableName: fleet.resources.tables.governor,
      ledgerId: THREAD_LEDGER_ID,
      clock: () => now + 60_000,
    });
    expect(await later.read()).toMatchObject({ solved: 25, meanSolveMs: 2_000 });
  });

  it('drops the counts of a writer a whole rotation behind instead of adding them to a later minute', async () => {
    const fleet = await fixture.createFleet({ planThreads: 10 });
    let now = START;
    const { window } = await windowOn(fleet, () => now);
    await window.add({ failed: 2 }, now);
    await window.add({ failed: 7 }, now - 4 * 60_000);
    now += 60_000;
    expect(await window.read()).toMatchObject({ failed: 2 });
  });

  it('counts the ledger’s accepted and refused submissions per minute, and removes minute counters an idle spell left', async () => {
    // Prepare: submissions long ago (their counters stay: no update came since to remove them).
    const fleet = await fixture.createFleet({ planThreads: 10 });
    let now = START - 30 * 60_000;
    const { window, ledger, item } = await windowOn(fleet, () => now);
    for (let i = 0; i < 3; i++) await ledger.recordEvent('acceptance', now, i);
    now = START;
    // Act: the three ways a consumer answers the ledger, and an error answer the window counts.
    const lease = await ledger.accepted(now - 60_000);
    await ledger.released(lease, { solved: true });
    await ledger.recordEvent('acceptance', now, 1);
    await ledger.recordEvent('refusal', now, 2);
    await ledger.refused(now);
    await window.add({ submitErrors: 1, transientErrors: 1 }, now);
    const minute = minuteOf(now);
    now += 60_000;
    const read = await window.read();
    // Assess: 2 accepted, 2 refused, 1 error answer; the stale counter gone from the item.
    expect(read).toMatchObject({ submissions: 5, overCapAnswers: 2, transientErrors: 1 });
    const names = Object.keys((await item(THREAD_LEDGER_ID)) ?? {}).filter((n) => /^m[ar]\d+$/.test(n));
    expect(names.sort()).toEqual([`ma${minute - 1}`, `ma${minute}`, `mr${minute}`].sort());
  });

  it('reads p95 from the slots’ histograms within 4.5 % of the exact figure over many writers and minutes', async () => {
    const fleet = await fixture.createFleet({ planThreads: 10 });
    let now = START;
    const { window } = await windowOn(fleet, () => now);
    // Generated times: a seeded lognormal-ish spread, written in batches over three minutes.
    let seed = 7;
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      return seed / 2 ** 31;
    };
    const all: number[] = [];
    for (let minute = 0; minute < 2; minute++) {
      for (let batch = 0; batch < 9; batch++) {
        const times = Array.from({ length: 20 }, () => Math.round(4_000 * Math.exp(2 * next())));
        all.push(...times);
        await window.add({ solved: times.length, solveMs: times }, now);
      }
      now += 60_000;
    }
    const read = await window.read();
    const exact = percentile(all, 0.95) as number;
    expect(read?.solved).toBe(all.length);
    expect(Math.abs((read?.p95SolveMs as number) - exact) / exact).toBeLessThanOrEqual(0.045);
    expect(read?.meanSolveMs).toBeCloseTo(all.reduce((a, b) => a + b, 0) / all.length, 0);
  });

  it('keeps a slot within one write unit (the bill’s size) when a minute’s solves spread from 1 s to 10 min', async () => {
    const fleet = await fixture.createFleet({ planThreads: 10 });
    const now = START;
    const { window, item } = await windowOn(fleet, () => now);
    // Every bucket from 1 s to 10 min, large counts in every counter.
    const times: number[] = [];
    for (let ms = 1_000; ms <= 600_000; ms *= 2 ** (1 / 8)) for (let n = 0; n < 40; n++) times.push(ms);
    await window.add({
      submitErrors: 90_000,
      resultRequests: 90_000,
      transientErrors: 90_000,
      taskErrors: 90_000,
      accountErrors: 90_000,
      failed: 90_000,
      solved: times.length,
      solveMs: times,
    });
    const slotId = solveWindowSlotIds(THREAD_LEDGER_ID)[minuteOf(now) % 4] as string;
    const stored = (await item(slotId)) as Record<string, unknown>;
    expect(Object.keys(stored).filter((name) => /^b\d+$/.test(name)).length).toBeGreaterThanOrEqual(74);
    expect(dynamoItemBytes(stored)).toBeLessThanOrEqual(WINDOW_SLOT_ITEM_BYTES);
    expect(WINDOW_SLOT_ITEM_BYTES).toBeLessThanOrEqual(1024);
  });

  it('reads as unknown, and says so, when the table cannot be read', async () => {
    const fleet = await fixture.createFleet({ planThreads: 10 });
    const broken = createDynamoSolveWindow({
      documents: fleet.clients.documents,
      tableName: 'no-such-table',
      ledgerId: THREAD_LEDGER_ID,
    });
    const errors: unknown[] = [];
    expect(await solveWindowReader(broken, (error) => errors.push(error)).read()).toBeUndefined();
    expect(String(errors[0])).toMatch(/solve window read failed/);
    await expect(broken.add({ failed: 1 })).rejects.toThrow(/solve window write failed/);
  });

  it('leaves the ledger item small: counters of minutes out of reach are removed by the ledger’s own updates', async () => {
    const fleet = await fixture.createFleet({ planThreads: 10 });
    let now = START;
    const { ledger, item } = await windowOn(fleet, () => now);
    // An hour of submissions, one a minute.
    for (let i = 0; i < 60; i++) {
      await ledger.recordEvent(i % 5 === 0 ? 'refusal' : 'acceptance', now, 1);
      now += 60_000;
    }
    const names = Object.keys((await item(THREAD_LEDGER_ID)) ?? {}).filter((n) => /^m[ar]\d+$/.test(n));
    expect(names.length).toBeLessThanOrEqual(8);
    // The item stays well under one write unit (1 KB) with the window's counters on it.
    expect(JSON.stringify(await item(THREAD_LEDGER_ID)).length).toBeLessThan(700);
  });
});

/** A Lambda control plane that answers the governor's reads, and a CloudWatch that records the queries it is sent. */
function mocks() {
  const queries: MetricDataQuery[] = [];
  const lambda = {
    send: vi.fn(async (command: { constructor: { name: string } }) =>
      command.constructor.name === 'GetEventSourceMappingCommand'
        ? { State: 'Enabled', ScalingConfig: { MaximumConcurrency: 4 } }
        : command.constructor.name === 'GetFunctionConcurrencyCommand'
          ? { ReservedConcurrentExecutions: 6 }
          : {},
    ),
  } as unknown as LambdaClient;
  const cloudwatch = {
    send: vi.fn(async (command: { input: { MetricDataQueries?: MetricDataQuery[] } }) => {
      const sent = command.input.MetricDataQueries ?? [];
      queries.push(...sent);
      return { MetricDataResults: sent.map((q) => ({ Id: q.Id, Values: [] })) };
    }),
  } as unknown as CloudWatchClient;
  return { lambda, cloudwatch, queries };
}

async function governorOf(fleet: TestFleet, solveMode: 'park' | 'wait', clock: () => number) {
  const m = mocks();
  const environment = parseEnvironment({
    [ENV.config]: JSON.stringify({ prefix: fleet.settings.prefix, planThreads: 10, tickMs: 10_000, solveMode }),
    [ENV.normalQueueUrl]: fleet.resources.queueUrls.normal,
    [ENV.highQueueUrl]: fleet.resources.queueUrls.high,
    [ENV.dlqUrl]: fleet.resources.queueUrls.dlq,
    [ENV.resultsTable]: fleet.resources.tables.results,
    [ENV.governorTable]: fleet.resources.tables.governor,
    ...(solveMode === 'park' ? { [ENV.leasesTable]: fleet.resources.tables.leases } : {}),
    [ENV.solverKey]: 'k'.repeat(32),
    [ENV.consumerFunctionName]: `${fleet.settings.prefix}-consumer`,
    [ENV.mappingIds]: JSON.stringify({ normal: 'uuid-normal', high: 'uuid-high' }),
  });
  const wired = await createGovernorFromEnvironment({
    environment,
    clients: fleet.clients,
    cloudwatch: m.cloudwatch,
    lambda: m.lambda,
    solver: { getBalance: async () => 50 },
    clock,
  });
  return { ...m, wired };
}

describe('the governor reads the window instead of the consumer’s CloudWatch metrics', () => {
  it('parked: asks CloudWatch only for the queues and the store calls, and decides on the window', async () => {
    // Prepare: a parked fleet whose window holds errors and solves.
    const fleet = await fixture.createFleet({ planThreads: 10 });
    const now = START;
    const { window, ledger } = await windowOn(fleet, () => now);
    // …in the minute before this one (the last whole minute, 20 s in).
    for (let i = 0; i < 8; i++) await ledger.recordEvent('acceptance', now - 30_000, i);
    await window.add(
      { submitErrors: 2, transientErrors: 2, solved: 6, solveMs: [9_000, 10_000, 11_000, 12_000, 13_000, 40_000] },
      now - 30_000,
    );
    const g = await governorOf(fleet, 'park', () => now);
    // Act
    const record = await g.wired.loop.tick();
    // Assess: no query of the consumer's metrics; the signals are the window's.
    const ids = g.queries.map((q) => q.Id as string);
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.filter((id) => /^(sum_|solve_)/.test(id))).toEqual([]);
    expect(record.signals.errorRate).toBeCloseTo(2 / 10, 5);
    expect(record.signals.transientErrorRate).toBeCloseTo(2 / 10, 5);
    expect(record.signals.meanSolveMs).toBeCloseTo(95_000 / 6, 0);
    expect(Math.abs((record.signals.p95SolveMs as number) - 40_000) / 40_000).toBeLessThanOrEqual(0.045);
  });

  it('asks for the queues’ CloudWatch metrics only while a lane has no earlier read (their sent rate stands in for an arrival rate)', async () => {
    // Prepare
    const fleet = await fixture.createFleet({ planThreads: 10 });
    let now = START;
    const g = await governorOf(fleet, 'park', () => now);
    const queueIds = () => g.queries.map((q) => q.Id as string).filter((id) => /^(age|sent)_/.test(id));
    // Act: the cold start's tick, then a tick a minute later (its metrics due again).
    await g.wired.loop.tick();
    const first = queueIds();
    now += 60_000;
    await g.wired.loop.tick();
    // Assess: age and sent of both lanes once, at the cold start; the store calls' failures every
    // minute (their count only when some failed: none here).
    expect(first.sort()).toEqual(['age_high', 'age_normal', 'sent_high', 'sent_normal']);
    expect(queueIds()).toHaveLength(4);
    expect(g.queries.filter((q) => /^dynamodb_errors/.test(q.Id as string)).length).toBe(2);
    expect(g.queries.filter((q) => /^dynamodb_requests/.test(q.Id as string)).length).toBe(0);
  });

  it('waiting: still reads the consumer’s metrics from CloudWatch (the window is the parked design’s)', async () => {
    const fleet = await fixture.createFleet({ planThreads: 10 });
    const g = await governorOf(fleet, 'wait', () => START);
    await g.wired.loop.tick();
    const ids = g.queries.map((q) => q.Id as string);
    expect(ids).toEqual(expect.arrayContaining(['solve_p95', 'solve_avg', 'sum_submissions', 'sum_solved']));
  });
});
