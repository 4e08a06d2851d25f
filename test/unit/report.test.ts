/**
 * What a report on a record means (core/report.ts), one row per situation, and how a report
 * message is parsed and bounded.
 */
import { describe, expect, it } from 'vitest';
import {
  decideReport,
  MAX_REPORT_BYTES,
  parseReportMessage,
  type ReportDecision,
} from '../../functions/core/report.js';
import type { TaskResult } from '../../functions/core/results.js';

const NOW = 1_800_000_000_000;
const solved: TaskResult = {
  taskId: 't1',
  status: 'solved',
  method: 'turnstile',
  attempts: 1,
  provider: 'primary',
  solverId: '7001',
  solverProvider: 'primary',
  costUsd: 0.002,
  expiresAt: NOW / 1000 + 3600,
};

const rows: {
  name: string;
  record: TaskResult | undefined;
  verdict?: 'bad' | 'good';
  token?: string;
  want: Partial<ReportDecision> & { kind: ReportDecision['kind'] };
}[] = [
  { name: 'no record', record: undefined, want: { kind: 'refuse', reason: 'NOT_FOUND', write: false } },
  {
    name: 'a record past its TTL',
    record: { ...solved, expiresAt: NOW / 1000 - 1 },
    want: { kind: 'refuse', reason: 'NOT_FOUND' },
  },
  {
    name: 'still solving: nothing written on the consumer’s record',
    record: { ...solved, status: 'solving' },
    want: { kind: 'refuse', reason: 'NOT_SOLVED', write: false },
  },
  {
    name: 'failed: the refusal is written',
    record: { ...solved, status: 'failed' },
    want: { kind: 'refuse', reason: 'NOT_SOLVED', write: true },
  },
  {
    name: 'rejected',
    record: { ...solved, status: 'rejected' },
    want: { kind: 'refuse', reason: 'NOT_SOLVED', write: true },
  },
  {
    name: 'solved without a solver id',
    record: { ...solved, solverId: undefined },
    want: { kind: 'refuse', reason: 'NO_SOLVER_ID', write: true },
  },
  {
    name: 'solved: call the provider that accepted it',
    record: solved,
    want: { kind: 'call', provider: 'primary', solverId: '7001' },
  },
  {
    name: 'solved at the overflow provider (a resume by the primary consumer names it)',
    record: { ...solved, provider: 'primary', solverProvider: 'overflow' },
    want: { kind: 'call', provider: 'overflow' },
  },
  {
    name: 'an older record without solverProvider: its claimant',
    record: { ...solved, solverProvider: undefined, provider: 'overflow' },
    want: { kind: 'call', provider: 'overflow' },
  },
  {
    name: 'settled the same way before: answered from the record',
    record: { ...solved, report: { verdict: 'bad', state: 'accepted', requestedAt: NOW - 5, reportedAt: NOW - 4 } },
    want: { kind: 'settled' },
  },
  {
    name: 'refused before: the refusal stands',
    record: {
      ...solved,
      report: { verdict: 'bad', state: 'refused', reason: 'PROVIDER_REFUSED', requestedAt: NOW - 5 },
    },
    want: { kind: 'settled' },
  },
  {
    name: 'settled the other way',
    record: { ...solved, report: { verdict: 'good', state: 'accepted', requestedAt: NOW - 5 } },
    want: { kind: 'refuse', reason: 'ALREADY_REPORTED', write: false },
  },
  {
    name: 'pending under another delivery’s live lease',
    record: {
      ...solved,
      report: { verdict: 'bad', state: 'pending', requestedAt: NOW - 5, token: 'm-other', leaseUntil: NOW + 1000 },
    },
    want: { kind: 'in_progress', leaseUntil: NOW + 1000 },
  },
  {
    name: 'pending under this delivery (a redelivery of the same message)',
    record: {
      ...solved,
      report: { verdict: 'bad', state: 'pending', requestedAt: NOW - 5, token: 'm1', leaseUntil: NOW + 1000 },
    },
    want: { kind: 'call' },
  },
  {
    name: 'pending whose lease ran out (its delivery died)',
    record: {
      ...solved,
      report: { verdict: 'bad', state: 'pending', requestedAt: NOW - 5, token: 'm-dead', leaseUntil: NOW - 1 },
    },
    want: { kind: 'call' },
  },
];

describe('decideReport', () => {
  it.each(rows)('$name', ({ record, verdict, token, want }) => {
    expect(decideReport(record, verdict ?? 'bad', { now: NOW, token: token ?? 'm1' })).toMatchObject(want);
  });
});

describe('parseReportMessage', () => {
  it('takes the documented shape, with or without a version', () => {
    expect(parseReportMessage('{"taskId":"ab12CD34","verdict":"bad"}')).toEqual({
      ok: true,
      report: { taskId: 'ab12CD34', verdict: 'bad' },
    });
    expect(parseReportMessage('{"version":1,"taskId":"x","verdict":"good"}')).toMatchObject({ ok: true });
  });

  it.each([
    ['not JSON', '{taskId', 'MALFORMED_JSON'],
    ['an unknown verdict', '{"taskId":"x","verdict":"wrong"}', 'SCHEMA_VIOLATION'],
    ['an unknown name', '{"taskId":"x","verdict":"bad","refund":1}', 'SCHEMA_VIOLATION'],
    ['a bad task id', '{"taskId":"a b","verdict":"bad"}', 'SCHEMA_VIOLATION'],
    ['another version', '{"version":2,"taskId":"x","verdict":"bad"}', 'SCHEMA_VIOLATION'],
    ['too large', JSON.stringify({ taskId: 'x', verdict: 'bad', pad: 'p'.repeat(MAX_REPORT_BYTES) }), 'TOO_LARGE'],
  ])('refuses %s (%s)', (_name, body, code) => {
    expect(parseReportMessage(body)).toMatchObject({ ok: false, code });
  });

  it('names the task of a refused report when its id can be read', () => {
    expect(parseReportMessage('{"taskId":"x1","verdict":"meh"}')).toMatchObject({ ok: false, taskId: 'x1' });
  });
});
