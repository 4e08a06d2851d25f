/**
 * The parked design's mapping maxima (functions/core/governor/submitters.ts), one row a
 * situation: the open slots plus twice the invocations that keep up with the slots freeing, with
 * or without a backlog; the ceilings stand while a signal is unknown; the answers read since the
 * last tick size them where the mean solve counts an outage.
 */
import { describe, expect, it } from 'vitest';
import { decide, governorConfigFrom, initialState } from '../../functions/core/governor/policy.js';
import { answeredPerSecond, parkedSubmitters } from '../../functions/core/governor/submitters.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { governorSignals, T0 } from '../helpers/governor.js';

const both = { normal: true, high: false };
const NOW = 9_000_000;

describe('parked submitters', () => {
  it.each([
    // label, ceilings, held, backlog, mean solve ms → normal
    ['no backlog, 38 slots open: an invocation for each, plus the freeing', 50, 12, 0, 15_000, 39],
    ['no backlog, the plan full: a few, not one per arrival waiting in Lambda for a slot', 50, 50, 0, 15_000, 4],
    ['no backlog, an idle plan: the ceiling', 50, 0, 0, 15_000, 50],
    ['held unknown: the ceiling stands', 50, undefined, 300, 15_000, 50],
    ['backlog unknown: the ceiling stands', 50, 12, undefined, 15_000, 50],
    ['a surge with 38 slots open: those, plus the freeing', 50, 12, 500, 15_000, 39],
    ['the plan full: a few invocations keep up with the slots freeing', 50, 50, 500, 15_000, 4],
    ['the plan full, fast solves: more of them', 50, 50, 500, 2_000, 25],
    ['a big plan full: 1000 threads of 15 s', 1000, 1000, 5_000, 15_000, 67],
    ['never under the mapping floor', 50, 50, 10, 600_000, 2],
    ['mean unknown: 15 s assumed', 50, 50, 10, undefined, 4],
  ] as const)('%s', (_, ceiling, held, backlog, meanSolveMs, normal) => {
    const out = parkedSubmitters({
      ceilings: { normal: ceiling, high: 2 },
      enabled: both,
      tasksPerInvocation: 1,
      held,
      backlog,
      meanSolveMs,
    });
    expect(out.normal).toBe(normal);
  });

  it('splits over the enabled lanes by their ceilings, each within [floor, its ceiling]', () => {
    const out = parkedSubmitters({
      ceilings: { normal: 30, high: 20 },
      enabled: { normal: true, high: true },
      tasksPerInvocation: 1,
      held: 50,
      backlog: 100,
      meanSolveMs: 15_000,
    });
    expect(out).toEqual({ normal: 3, high: 2 });
  });

  it('counts invocations, not threads, with several tasks per invocation', () => {
    const out = parkedSubmitters({
      ceilings: { normal: 10, high: 2 },
      enabled: both,
      tasksPerInvocation: 5,
      held: 20,
      backlog: 100,
      meanSolveMs: 10_000,
    });
    // 50 threads, 30 open, 2 freeing a second: (30 + 2) ÷ 5 = 6.4 → 7.
    expect(out.normal).toBe(7);
  });
});

describe('parked submitters: the slots freeing, from the answers read', () => {
  it('sizes on the answers read since the last tick where the mean solve counts an outage', () => {
    // After an outage, each solve parked through it counts the outage in the mean (six minutes
    // here: gen-s2-941-outages, 462 threads): the mean says two invocations, while the answers
    // ready meanwhile free 31 slots a second.
    const input = {
      ceilings: { normal: 462, high: 2 },
      enabled: both,
      tasksPerInvocation: 1,
      held: 462,
      backlog: 4_500,
      meanSolveMs: 357_600,
    };
    expect(parkedSubmitters(input).normal).toBe(2);
    expect(parkedSubmitters({ ...input, answeredPerSecond: 30.8 }).normal).toBe(31);
    // Fewer answers than the mean's freeing never size it down.
    expect(parkedSubmitters({ ...input, meanSolveMs: 15_000, answeredPerSecond: 3 }).normal).toBe(31);
  });

  it.each([
    ['no earlier tick', undefined, 120, undefined],
    ['the counter unread', { solved: 100, at: NOW - 10_000 }, undefined, undefined],
    ['the counter went back (the ledger item recreated)', { solved: 100, at: NOW - 10_000 }, 40, undefined],
    ['no time between the ticks', { solved: 100, at: NOW }, 120, undefined],
    ['20 answers in 10 s', { solved: 100, at: NOW - 10_000 }, 120, 2],
  ] as const)('answers read per second: %s', (_, before, solved, rate) => {
    expect(answeredPerSecond(before, solved, NOW)).toBe(rate);
  });

  it('decide keeps the count each tick, paused or not, and the next tick sizes on its rise', () => {
    const cfg = governorConfigFrom(resolveSettings({ tickMs: 10_000, planThreads: 100, solveMode: 'park' }));
    const ledger = (solved: number) => ({ held: 100, refusals: 0, acceptances: 1_000, solved });
    const tick = (now: number, solved: number, overrides = {}) =>
      governorSignals(now, { meanSolveMs: 600_000, threadLedger: ledger(solved), ...overrides }, { backlog: 2_000 });
    const first = decide(tick(T0 + 10_000, 1_000), initialState(cfg, T0), cfg);
    expect(first.state.answers).toEqual({ solved: 1_000, at: T0 + 10_000 });
    // Without the rise, the ten-minute mean sizes it at the floor.
    expect(first.submitters?.normal).toBe(2);
    const second = decide(tick(T0 + 20_000, 1_070), first.state, cfg);
    // 7 answers a second: (0 open + 2 × 7 × 0.5 s) = 7.
    expect(second.submitters?.normal).toBe(7);
    expect(second.state.answers).toEqual({ solved: 1_070, at: T0 + 20_000 });
    // A paused tick keeps it too.
    const paused = decide(tick(T0 + 30_000, 1_100, { balance: 0 }), second.state, cfg);
    expect(paused.paused).toBe(true);
    expect(paused.state.answers).toEqual({ solved: 1_100, at: T0 + 30_000 });
  });
});
