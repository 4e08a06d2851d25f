/**
 * `npm start`'s check of a window too short for images answered in createTask's own response
 * (bin/commands/start/sync-answers.ts): whatever the latency, the fix it names is one that holds,
 * and one less does not.
 */
import { describe, expect, it } from 'vitest';
import {
  answerWindowMs,
  imageNeedsMs,
  syncAnswerProblem,
  type SyncAnswerLane,
} from '../../bin/commands/start/sync-answers.js';

const capsolver = (medianMs: number): SyncAnswerLane => ({
  dialectFlag: '--solver-dialect capsolver',
  dialect: 'capsolver',
  latencyFlag: '--solver-latency-ms',
  medianMs,
});

describe('start: the window for images answered in their submission', () => {
  it("holds at start's defaults (--visibility-timeout 12, --solver-latency-ms 400)", () => {
    expect(syncAnswerProblem(capsolver(400), 12)).toBeUndefined();
  });

  it('is refused at a 5 s function timeout and 3 s recognitions, with the visibility and the latency that hold', () => {
    const problem = syncAnswerProblem(capsolver(3000), 6);
    expect(problem).toContain('--visibility-timeout 6 gives the local consumer a 5 s function timeout');
    expect(problem).toContain('of which it can wait 4.5 s for such an answer');
    expect(problem).toContain(
      'Raise --visibility-timeout to at least 16, or lower --solver-latency-ms to at most 1017.',
    );
    expect(syncAnswerProblem(capsolver(3000), 16)).toBeUndefined();
    expect(syncAnswerProblem(capsolver(3000), 15)).toBeDefined();
    expect(syncAnswerProblem(capsolver(1017), 6)).toBeUndefined();
    expect(syncAnswerProblem(capsolver(1018), 6)).toBeDefined();
  });

  it('names a fix that holds, and one less that does not, over latencies and visibility timeouts', () => {
    for (const medianMs of [50, 400, 999, 2_000, 3_000, 7_500, 20_000, 90_000]) {
      for (const visibility of [2, 3, 6, 12, 30, 120]) {
        const problem = syncAnswerProblem(capsolver(medianMs), visibility);
        expect(problem === undefined, `${medianMs} ms at ${visibility} s`).toBe(
          answerWindowMs(visibility) >= imageNeedsMs(medianMs),
        );
        if (problem === undefined) continue;
        const raise = /at least (\d+)/.exec(problem);
        if (raise !== null) {
          const fixed = Number(raise[1]);
          expect(syncAnswerProblem(capsolver(medianMs), fixed)).toBeUndefined();
          expect(syncAnswerProblem(capsolver(medianMs), fixed - 1)).toBeDefined();
        }
        const most = Number(/at most (\d+)/.exec(problem)?.[1]);
        expect(syncAnswerProblem(capsolver(most), visibility)).toBeUndefined();
        expect(syncAnswerProblem(capsolver(most + 1), visibility)).toBeDefined();
      }
    }
  });

  it('asks nothing of a provider that answers images through getTaskResult, and names the overflow lane by its flags', () => {
    for (const dialect of ['captchaai', '2captcha', 'anti-captcha', 'capmonster'])
      expect(syncAnswerProblem({ ...capsolver(90_000), dialect }, 2)).toBeUndefined();
    const overflow = syncAnswerProblem(
      {
        dialectFlag: '--overflow-dialect capsolver',
        dialect: 'capsolver',
        latencyFlag: '--overflow-latency-ms',
        medianMs: 3_000,
      },
      6,
    );
    expect(overflow).toMatch(/^--overflow-dialect capsolver answers image tasks/);
    expect(overflow).toContain('lower --overflow-latency-ms to at most');
  });
});
