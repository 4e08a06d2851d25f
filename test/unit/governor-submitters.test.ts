/**
 * The parked design's mapping maxima (functions/core/governor/submitters.ts), one row a
 * situation: the open slots plus twice the invocations that keep up with the slots freeing, with
 * or without a backlog; the ceilings stand while a signal is unknown.
 */
import { describe, expect, it } from 'vitest';
import { parkedSubmitters } from '../../functions/core/governor/submitters.js';

const both = { normal: true, high: false };

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
