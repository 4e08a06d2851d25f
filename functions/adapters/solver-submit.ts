/**
 * The submission step of a solve: POST in.php until the solver accepts the task, backing off on
 * over-cap and transient answers within their retry budgets and the deadline.
 */
import {
  SOLVER_ID_PATTERN,
  type SolverError,
  SolverOverCapError,
  SolverTransientError,
  solverErrorFor,
} from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';
import {
  backOff,
  deadlinePassed,
  notify,
  type SolveState,
  type SolverContext,
  solverErrorLike,
} from './solver-context.js';
import { httpCall, snippet } from './solver-http.js';

/** The form in.php gets: the task's own parameters, never a key of its own (the client's wins). */
function submissionForm(task: Task): Record<string, string> {
  const form: Record<string, string> = { method: task.method, json: '1' };
  for (const [name, value] of Object.entries(task.params)) {
    // The schema refuses a task's own key; the client's is added by httpCall and wins anyway.
    if (value !== undefined && name !== 'key') form[name] = String(value);
  }
  return form;
}

/** One in.php exchange as a typed outcome: the solver id, or the error it amounts to. */
async function submitOnce(
  ctx: SolverContext,
  solve: SolveState,
  form: Record<string, string>,
): Promise<{ solverId: string } | { error: SolverError }> {
  const { taskId, signal, deadlineAt } = solve;
  try {
    const answer = await httpCall(ctx, { path: 'in.php', form, signal, taskId, deadlineAt });
    if (answer.ok && SOLVER_ID_PATTERN.test(answer.value)) return { solverId: answer.value };
    if (answer.ok) {
      // Not an id we could poll (an echo of the request, a proxy's text): nothing to record.
      return {
        error: new SolverTransientError('MALFORMED_SOLVER_ID', {
          taskId,
          message: `in.php accepted task ${taskId} with an id that is not ${SOLVER_ID_PATTERN.source}${snippet(answer.value, ctx.key)}`,
        }),
      };
    }
    return {
      error: solverErrorFor(answer.code, ctx.dialect, {
        taskId,
        message: `in.php answered ${answer.code} for task ${taskId}`,
      }),
    };
  } catch (thrown) {
    if (!(thrown instanceof SolverTransientError)) throw thrown;
    return { error: thrown };
  }
}

/**
 * Submit the task; resolves with the solver's id. Throws the typed error of an answer that is
 * not retried, or of the last retry once its budget (or the deadline) is spent.
 */
export async function submit(ctx: SolverContext, task: Task, solve: SolveState): Promise<string> {
  const form = submissionForm(task);
  const { retries } = solve;
  for (;;) {
    if (ctx.clock() >= solve.deadlineAt) throw deadlinePassed(solve.taskId, undefined, 0);
    const outcome = await submitOnce(ctx, solve, form);
    if ('solverId' in outcome) {
      notify(ctx, solve, { request: 'submit', outcome: 'accepted' });
      return outcome.solverId;
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
      if (retries.transient >= ctx.retry.maxTransientRetries)
        throw solverErrorLike(error, `${error.message} after ${retries.transient} transient retries`);
      await backOff(ctx, solve, error, retries.transient);
      retries.transient += 1;
    } else {
      throw error;
    }
  }
}
