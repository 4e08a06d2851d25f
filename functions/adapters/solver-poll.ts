/**
 * The polling step of a solve: a result request (res.php, or getTaskResult: the context's wire)
 * on the schedule's plan until the answer, a terminal code, too many transient failures in a
 * row, the deadline or an abort.
 */
import type { SolveOutcome } from '../core/ports.js';
import { SolverTransientError } from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';
import {
  aborted,
  backOff,
  deadlinePassed,
  notify,
  pause,
  type SolvedAnswer,
  type SolveState,
  type SolverContext,
  solverErrorLike,
} from './solver-context.js';

/** The outcome of a solve whose answer was read. */
export function outcomeOf(
  solved: SolvedAnswer,
  solverId: string,
  times: { acceptedAt: number; answeredAt: number; resultRequests: number },
  retries: SolveOutcome['retries'],
): SolveOutcome {
  return {
    answer: solved.answer,
    solverId,
    ...times,
    retries,
    ...(Object.keys(solved.extras).length > 0 ? { extras: solved.extras } : {}),
    ...(solved.costUsd !== undefined ? { costUsd: solved.costUsd, costSource: solved.costSource ?? 'configured' } : {}),
  };
}

/**
 * Poll `solverId` until its answer. A resumed submission may have been ready for a while: it is
 * asked for at once, then on the plan, and does not feed the schedule (its acceptance time is
 * unknown).
 */
export async function pollForAnswer(
  ctx: SolverContext,
  task: Task,
  solve: SolveState,
  solverId: string,
  resumed: boolean,
): Promise<SolveOutcome> {
  const { clock } = ctx;
  const { taskId, signal, deadlineAt, retries } = solve;
  const acceptedAt = clock();
  const plan = ctx.schedule.plan(task.method);
  let resultRequests = 0;
  let lastNotReadyMs: number | undefined;
  let transientInARow = 0;
  let nextAt = resumed ? 0 : plan.nextPollAt(0);

  for (;;) {
    if (signal?.aborted) throw aborted(taskId);
    if (clock() >= deadlineAt) throw deadlinePassed(taskId, solverId, resultRequests);
    // The last request goes out at the deadline rather than never.
    await pause(ctx, Math.min(acceptedAt + nextAt, deadlineAt) - clock(), signal, taskId);
    const sentMs = clock() - acceptedAt;
    resultRequests += 1;
    const outcome = await ctx.wire.pollOnce(ctx, solve, task, solverId);
    if ('solved' in outcome) {
      notify(ctx, solve, { request: 'result', outcome: 'answered' });
      const answeredAt = clock();
      if (!resumed) {
        ctx.schedule.observe(task.method, { lastNotReadyMs, answeredMs: answeredAt - acceptedAt, resultRequests });
      }
      return outcomeOf(outcome.solved, solverId, { acceptedAt, answeredAt, resultRequests }, retries);
    }
    if ('notReady' in outcome) {
      notify(ctx, solve, { request: 'result', outcome: 'not_ready', code: outcome.notReady });
      transientInARow = 0;
      lastNotReadyMs = sentMs;
      // Step from the planned slot, not the send time: timers fire a little late, and stepping
      // from a late send would skip every other slot. Half an interval after the send keeps a
      // slow response from being followed by a burst of catch-up requests. Never sooner than the
      // provider's gap between two requests of one submission (ctx.pollGapMs).
      nextAt = plan.nextPollAt(
        Math.max(nextAt + plan.minIntervalMs, sentMs + plan.minIntervalMs / 2, sentMs + ctx.pollGapMs),
      );
      continue;
    }
    const { error } = outcome;
    notify(ctx, solve, { request: 'result', outcome: error.errorClass, code: error.code });
    if (!(error instanceof SolverTransientError)) throw error;
    if (transientInARow >= ctx.retry.maxTransientRetries) {
      throw solverErrorLike(error, `${error.message} after ${transientInARow} transient retries in a row`);
    }
    await backOff(ctx, solve, error, transientInARow);
    transientInARow += 1;
    retries.transient += 1;
    nextAt = clock() - acceptedAt;
  }
}
