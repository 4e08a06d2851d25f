/**
 * The consumers' room (roomLimit, functions/core/thread-ledger.ts), one row per situation: a
 * refusal holds the fleet to the threads it held then until an acceptance at or above that count
 * (or the hold-off, or the governor's lift for its held test); an acceptance below it does not
 * lift it; in a run of refusals (no acceptance between) the room is halved at each refusal after
 * the first.
 */
import { describe, expect, it } from 'vitest';
import { REFUSAL_HOLD_OFF_MS, roomLimit, type ThreadLedgerReading } from '../../functions/core/thread-ledger.js';

const PLAN = 40;
const NOW = 1_000_000;

type Reading = Pick<ThreadLedgerReading, 'lastRefusal' | 'lastAcceptance' | 'refusalRun' | 'liftedAt'>;

const rows: { situation: string; reading: Reading; room: number }[] = [
  { situation: 'nothing refused yet', reading: {}, room: PLAN },
  {
    situation: 'refused while the fleet held 12, no acceptance since',
    reading: { lastRefusal: { at: NOW - 1000, held: 12 }, refusalRun: 1 },
    room: 12,
  },
  {
    situation: 'refused at 12, then accepted while the fleet held 11 (a thread of its own taken back)',
    reading: { lastRefusal: { at: NOW - 2000, held: 12 }, lastAcceptance: { at: NOW - 1000, held: 11 }, refusalRun: 0 },
    room: 12,
  },
  {
    situation: 'refused at 12, then accepted while the fleet held 12 (others left a thread)',
    reading: { lastRefusal: { at: NOW - 2000, held: 12 }, lastAcceptance: { at: NOW - 1000, held: 12 }, refusalRun: 0 },
    room: PLAN,
  },
  {
    situation: 'a second refusal with no acceptance between, at 11 (others take what the fleet frees)',
    reading: { lastRefusal: { at: NOW - 1000, held: 11 }, lastAcceptance: { at: NOW - 9000, held: 11 }, refusalRun: 2 },
    room: 5,
  },
  {
    situation:
      'a third refusal of a run, at 12 (the halved room was not enough: others still take what the fleet frees)',
    reading: { lastRefusal: { at: NOW - 1000, held: 12 }, refusalRun: 3 },
    room: 3,
  },
  {
    situation: 'a fifth refusal of a run, at 33',
    reading: { lastRefusal: { at: NOW - 1000, held: 33 }, refusalRun: 5 },
    room: 2,
  },
  {
    situation: 'a fifth refusal of a run, at 3: no room until an acceptance, the governor’s lift or the hold-off',
    reading: { lastRefusal: { at: NOW - 1000, held: 3 }, refusalRun: 5 },
    room: 0,
  },
  {
    situation: 'the newest refusal is older than the hold-off',
    reading: { lastRefusal: { at: NOW - REFUSAL_HOLD_OFF_MS - 1, held: 3 }, refusalRun: 3 },
    room: PLAN,
  },
  {
    situation: 'a ledger without the run: the clocks say the acceptance came after, below the count',
    reading: { lastRefusal: { at: NOW - 2000, held: 12 }, lastAcceptance: { at: NOW - 1000, held: 4 } },
    room: 12,
  },
  {
    situation: 'a ledger without the run: a refusal newer than every acceptance',
    reading: { lastRefusal: { at: NOW - 1000, held: 12 }, lastAcceptance: { at: NOW - 2000, held: 12 } },
    room: 12,
  },
  {
    situation: 'refused at 12, the governor lifted the hold of refusals up to it (its held test)',
    reading: { lastRefusal: { at: NOW - 2000, held: 12 }, refusalRun: 0, liftedAt: NOW - 2000 },
    room: PLAN,
  },
  {
    situation: 'a refusal at 13 newer than the lift (the test was refused): it holds as any',
    reading: { lastRefusal: { at: NOW - 1000, held: 13 }, refusalRun: 1, liftedAt: NOW - 2000 },
    room: 13,
  },
  {
    situation: 'never above the plan',
    reading: { lastRefusal: { at: NOW - 1000, held: 55 }, refusalRun: 1 },
    room: PLAN,
  },
];

describe('roomLimit: the threads the fleet may hold before a submission waits', () => {
  it.each(rows)('$situation → $room', ({ reading, room }) => {
    expect(roomLimit(reading, PLAN, NOW)).toBe(room);
  });
});
