/**
 * The submission step of a solve: submit (in.php, or createTask: the context's wire) until the
 * solver accepts the task, backing off on over-cap and transient answers within their retry
 * budgets and the deadline.
 */
import { SolverOverCapError, SolverTimeoutError, SolverTransientError } from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';
import {
  ANSWER_WAIT_HEADROOM,
  backOff,
  deadlinePassed,
  notify,
  type SolvedAnswer,
  type SolveState,
  type SolverContext,
  solverErrorLike,
} from './solver-context.js';

/**
 * Submit the task; resolves with the solver's id (and its answer, when the service answered at
 * once). Throws the typed error of an answer that is not retried, or of the last retry once its
 * budget (or the deadline) is spent.
 */
export async function submit(
  ctx: SolverContext,
  task: Task,
  solve: SolveState,
): Promise<{ solverId: string; solved?: SolvedAnswer }> {
  const { retries } = solve;
  const answersInSubmission = ctx.wire.answersInSubmission?.(ctx, task) === true;
  for (;;) {
    if (ctx.clock() >= solve.deadlineAt) throw deadlinePassed(solve.taskId, undefined, 0);
    if (answersInSubmission) notTooLate(ctx, solve);
    const sentAt = ctx.clock();
    const outcome = await ctx.wire.submitOnce(ctx, solve, task);
    if (answersInSubmission && 'solverId' in outcome) {
      const answeredAt = ctx.clock();
      ctx.answerWaits.note(answeredAt - sentAt, answeredAt);
    }
    if ('solverId' in outcome) {
      notify(ctx, solve, { request: 'submit', outcome: 'accepted' });
      // Answered in this very response (CapSolver's image tasks): the solver holds no thread for it
      // any more, as after a result request that read the answer.
      if (outcome.solved !== undefined) notify(ctx, solve, { request: 'submit', outcome: 'answered' });
      return outcome;
    }
    const { error } = outcome;
    // Reported before any retry or throw, so a refused submission is counted even when the
    // solve goes on retrying for a while.
    notify(ctx, solve, { request: 'submit', outcome: error.errorClass, code: error.code });
    if (error instanceof SolverOverCapError) {
      if (retries.overCap >= ctx.retry.maxOverCapRetries)
        throw solverErrorLike(error, `${error.message} after ${retries.overCap} over-cap retries`);
      await backOff(ctx, solve, error, retries.overCap);
      retries.overCap += 1;
    } else if (error instanceof SolverTransientError) {
      // Cut while the provider recognised it (it waited to the caller's answerBy): taken, and
      // paid; sent again in this solve it would be paid again. The task goes back to its queue.
      if (answersInSubmission && error.code === 'REQUEST_TIMEOUT')
        throw solverErrorLike(error, `${error.message}; not sent again in this solve (the provider may have taken it)`);
      if (retries.transient >= ctx.retry.maxTransientRetries)
        throw solverErrorLike(error, `${error.message} after ${retries.transient} transient retries`);
      await backOff(ctx, solve, error, retries.transient);
      retries.transient += 1;
    } else {
      throw error;
    }
  }
}

/**
 * A submission the provider answers in its own response lasts the recognition: sent with less
 * time left than that takes before the caller's `answerBy`, its request is cut short after the
 * provider accepted (and charged) it, the id never comes back, and the task's next delivery pays
 * again. Such a submission is sent only before the caller's `submitBy` and with at least the
 * longest of the latest accepted such requests, and half again, left before `answerBy`
 * (AnswerWaits, ANSWER_WAIT_HEADROOM); else nothing is sent (nothing paid) and the solve
 * ends as one whose deadline passed, which hands the task back.
 */
function notTooLate(ctx: SolverContext, solve: SolveState): void {
  const now = ctx.clock();
  const longest = ctx.answerWaits.longest(now);
  const needMs = Math.ceil(longest * ANSWER_WAIT_HEADROOM);
  const left = solve.answerBy - now;
  if (now <= solve.submitBy && left >= needMs) return;
  throw new SolverTimeoutError('DEADLINE_EXCEEDED', {
    taskId: solve.taskId,
    message: `task ${solve.taskId} not sent: the provider answers it in the submission's own response, ${left} ms were left to wait for its answer${longest > 0 ? ` and such a request took up to ${longest} ms in the last minute (${needMs} ms with the headroom for a slower one)` : ''}; one cut short would be paid with its id never known`,
  });
}
