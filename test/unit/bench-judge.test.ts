/**
 * The drawn runs' judge (bench/lib/judge.ts, shared by bench:sweep and bench:faults): a task paid
 * twice beyond the ids the protocols lose breaks the run, and its line says when each paid
 * submission was accepted and, where a consumer learned it for another task id, which.
 */
import { describe, expect, it } from 'vitest';
import { judge } from '../../bench/lib/judge.js';
import { demoSummaryFixture } from '../helpers/demo-summary.js';

describe('bench judge: tasks paid twice', () => {
  it('breaks on a task paid twice beyond the lost ids, with each submission timed and its own task named', () => {
    const at = Date.parse('2026-12-06T03:00:07.250Z');
    const summary = {
      ...demoSummaryFixture(),
      paidTwice: 1,
      paidTwiceBeyondLostIds: 1,
      paidTwiceBeyond: [
        {
          taskId: 'demo-1',
          submissions: [
            { id: 'primary:11', fate: 'kept' as const, acceptedAt: at },
            { id: 'primary:21', fate: 'kept' as const, acceptedAt: at + 1_500, taskId: 'demo-2' },
          ],
        },
      ],
    };
    const { broken } = judge(summary, { queuedBreaks: false });
    expect(broken).toEqual([
      '1 paid twice, 1 beyond the 0 id(s) lost in crashes (demo-1: primary:11 kept at 03:00:07.250, primary:21 kept at 03:00:08.750 (task demo-2))',
    ]);
  });

  it('keeps a task paid twice where a crash lost an id within the bound, not broken', () => {
    const summary = { ...demoSummaryFixture(), paidTwice: 1, paidTwiceBeyondLostIds: 0 };
    const judged = judge(summary, { queuedBreaks: false });
    expect(judged.broken).toEqual([]);
    expect(judged.bounded).toEqual(['1 paid twice, each an id lost in a crash (0 lost)']);
  });
});
