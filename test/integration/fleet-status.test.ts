import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { startEmulators, type Emulators } from '../../local/emulators.js';
import { ensureFleetResources, type FleetResources } from '../../local/resources.js';
import { createAwsClients, type AwsClients } from '../../functions/adapters/aws-clients.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { readFleetStatus } from '../../clients/fleet-status.js';
import { GOVERNOR_STATE_ID, OVERFLOW_LEDGER_ID, THREAD_LEDGER_ID } from '../../functions/core/deployment.js';
import { renderStatus } from '../../bin/commands/status.js';
import { resolveTarget } from '../../bin/commands/target.js';

let emulators: Emulators;
let clients: AwsClients;
let resources: FleetResources;
const NOW = Date.now();

beforeAll(async () => {
  emulators = await startEmulators();
  clients = createAwsClients({ sqsEndpoint: emulators.sqsEndpoint, dynamoEndpoint: emulators.dynamoEndpoint });
  resources = await ensureFleetResources(clients, resolveSettings({ prefix: 'status-test' }));
});

afterAll(async () => {
  await emulators?.stop();
});

const sources = () => ({
  sqs: clients.sqs,
  documents: clients.documents,
  queueUrls: resources.queueUrls,
  tables: resources.tables,
  clock: () => NOW,
});

describe('fleet status', () => {
  it('says what it does not know instead of showing zeros on a fresh fleet', async () => {
    const status = await readFleetStatus(sources());
    expect(status.lanes.normal).toMatchObject({ backlog: 0, inFlight: 0, ceiling: undefined });
    expect(status.governor).toBeUndefined();
    expect(status.balance).toBeUndefined();
    expect(status.recent).toMatchObject({ solved: 0, p95SolveMs: undefined, source: 'results-table' });
    const text = renderStatus(status, 'test');
    expect(text).toContain('governor: no decision recorded yet');
    expect(text).toContain('balance:  — (not read yet)');
  });

  it('shows backlog per lane, the DLQ, the last decision, balance and recent solves', async () => {
    for (let i = 0; i < 3; i++)
      await clients.sqs.send(
        new SendMessageCommand({ QueueUrl: resources.queueUrls.normal, MessageBody: `{"n":${i}}` }),
      );
    await clients.sqs.send(new SendMessageCommand({ QueueUrl: resources.queueUrls.high, MessageBody: '{}' }));
    await clients.sqs.send(new SendMessageCommand({ QueueUrl: resources.queueUrls.dlq, MessageBody: '{}' }));
    await clients.documents.send(
      new PutCommand({
        TableName: resources.tables.governor,
        Item: {
          id: GOVERNOR_STATE_ID,
          version: 3,
          state: {
            ceilings: { normal: 6, high: 2 },
            lastDecision: {
              at: NOW - 4_000,
              code: 'FREE_THREADS',
              message: 'ceiling at the 8 free threads',
              ceilings: { normal: 6, high: 2 },
              enabled: { normal: true, high: false },
              paused: false,
              freeThreads: 8,
              neededThreads: 5,
              shortfall: 0,
              balance: 12.5,
            },
          },
        },
      }),
    );
    const put = (taskId: string, status: string, completedAt: number, solveMs?: number) =>
      clients.documents.send(
        new PutCommand({
          TableName: resources.tables.results,
          Item: { taskId, status, completedAt, solveMs, attempts: 1, expiresAt: 0 },
        }),
      );
    for (let i = 1; i <= 20; i++) await put(`s${i}`, 'solved', NOW - 1_000, i * 1_000);
    await put('f1', 'failed', NOW - 2_000);
    await put('old', 'solved', NOW - 60 * 60_000, 999_000);

    const status = await readFleetStatus(sources(), { windowMinutes: 5 });
    expect(status.lanes.normal).toMatchObject({ backlog: 3, ceiling: 6, enabled: true });
    expect(status.lanes.high).toMatchObject({ backlog: 1, ceiling: 2, enabled: false });
    expect(status.dlqDepth).toBe(1);
    expect(status.governor).toMatchObject({ code: 'FREE_THREADS', freeThreads: 8, paused: false });
    expect(status.balance).toBe(12.5);
    // 20 solves of 1..20 s inside the window; the hour-old one is outside it.
    expect(status.recent).toMatchObject({ solved: 20, failed: 1, p95SolveMs: 19_000 });

    const text = renderStatus(status, 'local stack');
    expect(text).toMatch(/normal\s+3\s+0\s+0\s+—\s+6\s+yes/);
    expect(text).toContain('npx captcha-fleet redrive --dry-run');
    expect(text).toContain('FREE_THREADS (4 s ago)');
    expect(text).toContain('$12.50');
  });

  it('shows the overflow lane against its caps and the split of solves between the plan and the overflow', async () => {
    // Prepare: a fleet without overflow shows none of it.
    const before = await readFleetStatus(sources());
    expect(before.overflow).toBeUndefined();
    expect(before.solvesByProvider).toEqual({ primary: undefined, overflow: undefined });
    expect(renderStatus(before, 'test')).not.toMatch(/overflow|solves:/);
    // The governor's last decision with its overflow lane, and both consumers' ledgers.
    const overflow = {
      enabled: true,
      ceiling: 6,
      code: 'OVERFLOW_CAP',
      message: 'Overflow open at 6 (excess 9, affordable 6 at $0.00300/solve).',
      excess: 9,
      inFlight: 5,
      balance: 41.2,
      hourUsd: 1.5,
      dayUsd: 4.25,
      capUsdPerHour: 2,
      capUsdPerDay: 10,
      priceUsd: 0.003,
      priceLearned: true,
    };
    await clients.documents.send(
      new PutCommand({
        TableName: resources.tables.governor,
        Item: {
          id: GOVERNOR_STATE_ID,
          version: 4,
          state: {
            ceilings: { normal: 6, high: 2 },
            lastDecision: {
              at: NOW - 2_000,
              code: 'FREE_THREADS',
              message: 'ceiling at the 8 free threads',
              ceilings: { normal: 8, high: 2 },
              enabled: { normal: true, high: false },
              paused: false,
              freeThreads: 8,
              shortfall: 0,
              balance: 12.5,
              overflow,
            },
          },
        },
      }),
    );
    await clients.documents.send(
      new PutCommand({ TableName: resources.tables.governor, Item: { id: THREAD_LEDGER_ID, solved: 900, h1: 0 } }),
    );
    await clients.documents.send(
      new PutCommand({ TableName: resources.tables.governor, Item: { id: OVERFLOW_LEDGER_ID, solved: 100, h1: 2 } }),
    );

    for (const taskId of ['o1', 'o2'])
      await clients.documents.send(
        new PutCommand({
          TableName: resources.tables.results,
          Item: {
            taskId,
            status: 'solved',
            completedAt: NOW - 1_000,
            solveMs: 9_000,
            provider: 'overflow',
            attempts: 1,
            expiresAt: 0,
          },
        }),
      );

    // Act
    const status = await readFleetStatus(sources());

    // Assess
    expect(status.overflow).toEqual({ ...overflow, at: NOW - 2_000 });
    // The last minutes from the results table: the 20 plan solves of the test above and 2 overflow solves.
    expect(status.recent).toMatchObject({ solved: 22, overflowSolved: 2 });
    expect(before.recent).not.toHaveProperty('overflowSolved');
    expect(status.solvesByProvider).toEqual({ primary: 900, overflow: 100 });
    const text = renderStatus(status, 'test');
    expect(text).toContain('overflow: OPEN at 6 — OVERFLOW_CAP · excess 9 · in flight 5');
    expect(text).toContain('spend $1.50 this hour of $2.00 · $4.25 today of $10.00');
    expect(text).toContain('price $0.00300/solve (learned) · balance $41.20');
    expect(text).toContain('solves:   plan 900 · overflow 100 (10.0 % overflow)');
    expect(text).toContain('solved 22 (overflow 2) · failed 1');
    const json = JSON.parse(JSON.stringify({ fleet: 'test', ...status }));
    expect(json.overflow).toMatchObject({ code: 'OVERFLOW_CAP', hourUsd: 1.5, capUsdPerHour: 2 });
    expect(json.solvesByProvider).toEqual({ primary: 900, overflow: 100 });
  });
});

describe('fleet status when parts cannot be read', () => {
  it('names each read that failed and why, keeps the high row, and does not pass for a quiet fleet', async () => {
    // Before: every error became "unknown": an unreachable fleet printed "—" rows, "no decision
    // recorded yet", no high row, and exited 0, as an idle one does.
    const dead = createAwsClients({ sqsEndpoint: 'http://127.0.0.1:9', dynamoEndpoint: emulators.dynamoEndpoint });
    const status = await readFleetStatus({
      sqs: dead.sqs,
      documents: clients.documents,
      queueUrls: resources.queueUrls,
      tables: { ...resources.tables, governor: 'no-such-governor-table' },
      clock: () => NOW,
    });
    expect(status.unread.map((part) => part.what).sort()).toEqual(
      ['DLQ', 'governor state', 'high queue', 'normal queue', 'overflow ledger', 'thread ledger'].sort(),
    );
    expect(status.unread.find((part) => part.what === 'normal queue')?.error).toMatch(/ECONNREFUSED/);
    expect(status.unread.find((part) => part.what === 'governor state')?.error).toMatch(/ResourceNotFoundException/);
    expect(status.lanes.high).toMatchObject({ backlog: undefined });
    const text = renderStatus(status, 'test');
    expect(text).toMatch(/COULD NOT READ normal queue, high queue, DLQ: ECONNREFUSED/);
    expect(text).toMatch(/COULD NOT READ governor state, thread ledger, overflow ledger: ResourceNotFoundException/);
    expect(text).toMatch(/^high +—/m);
    // A fleet read whole says nothing of the kind.
    expect((await readFleetStatus(sources())).unread).toEqual([]);
  });

  it('tells a queue that is not there from an endpoint that cannot be reached', async () => {
    await expect(resolveTarget({ endpoint: emulators.sqsEndpoint, prefix: 'no-such-fleet' })).rejects.toThrow(
      /^queue no-such-fleet-tasks not found at http/,
    );
    // Before: "queue captcha-fleet-tasks not found at http://127.0.0.1:9 (Error)".
    await expect(resolveTarget({ endpoint: 'http://127.0.0.1:9' })).rejects.toThrow(
      /^could not reach SQS at http:\/\/127\.0\.0\.1:9 to find queue captcha-fleet-tasks: ECONNREFUSED/,
    );
  });
});
