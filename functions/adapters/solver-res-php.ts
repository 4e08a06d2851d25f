/**
 * The in.php / res.php wire (2captcha's API v1, CaptchaAI): one submission is a form POST to
 * in.php, one result request a GET of `res.php?action=get&id=…`, the balance `getbalance`, the
 * reports `reportbad` / `reportgood`. The key travels as `key` (form field or query).
 *
 * res.php also answers several ids in one request (`action=get&ids=a,b,c`, on 2captcha and
 * CaptchaAI); the JSON task API has no such call. A bulk poll would be one more method here.
 */
import {
  REPORT_REFUSED_CODES,
  SOLVER_ID_PATTERN,
  SolverTaskError,
  SolverTransientError,
  classifySolverCode,
  solverErrorFor,
} from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';
import { cookiesText, resPhpAnswerOf } from '../core/task-types.js';
import { believableBalance, boundedExtras, unusableAnswer, usableAnswer, withCost } from './solver-answer.js';
import type { PollOnce, SolveState, SolverContext, SolverWire, SubmitOnce } from './solver-context.js';
import { httpCall, NOT_SENT_AGAIN, snippet, withoutKey } from './solver-http.js';

/** The form in.php gets: the task's own parameters, never a key of its own (the client's wins). */
function submissionForm(ctx: SolverContext, task: Task): Record<string, string> {
  const form: Record<string, string> = { method: task.method, json: '1' };
  for (const [name, value] of Object.entries(task.params)) {
    // The schema refuses a task's own key; the client's is added by httpCall and wins anyway.
    if (value !== undefined && name !== 'key') form[name] = String(value);
  }
  // The operator's developer id, set after the task's params: a task can never carry its own.
  if (ctx.softId !== undefined) form.soft_id = ctx.softId;
  return form;
}

/** What 2captcha's `json=1` answer carries beside `request`, by the JSON API's names. */
function extrasOf(members: Readonly<Record<string, unknown>> | undefined): Record<string, string> {
  if (members === undefined) return {};
  const text = (value: unknown) => (typeof value === 'string' ? value : undefined);
  const raw: Record<string, string | undefined> = {
    userAgent: text(members.useragent) ?? text(members.userAgent),
    respKey: text(members.respKey),
    cookies: cookiesText(members.cookies),
  };
  return Object.fromEntries(Object.entries(raw).filter((entry): entry is [string, string] => entry[1] !== undefined));
}

async function submitOnce(ctx: SolverContext, solve: SolveState, task: Task): Promise<SubmitOnce> {
  const { taskId, signal, deadlineAt } = solve;
  try {
    const answer = await httpCall(ctx, { path: 'in.php', form: submissionForm(ctx, task), signal, taskId, deadlineAt });
    if (answer.ok && SOLVER_ID_PATTERN.test(answer.value)) return { solverId: answer.value };
    if (answer.ok) {
      // Not an id we could poll (an echo of the request, a proxy's text): nothing to record, and
      // nothing sent again (NOT_SENT_AGAIN).
      return {
        error: new SolverTaskError('MALFORMED_SOLVER_ID', {
          taskId,
          message: `in.php accepted task ${taskId} with an id that is not ${SOLVER_ID_PATTERN.source}${snippet(answer.value, ctx.key)}; ${NOT_SENT_AGAIN}`,
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

async function pollOnce(ctx: SolverContext, solve: SolveState, task: Task, solverId: string): Promise<PollOnce> {
  const { taskId, signal, deadlineAt } = solve;
  try {
    const answer = await httpCall(ctx, {
      path: 'res.php',
      query: { action: 'get', id: solverId, json: '1' },
      signal,
      taskId,
      deadlineAt,
    });
    if (answer.ok) {
      const shaped = resPhpAnswerOf(task.method, answer.value, answer.object);
      if (shaped === undefined)
        return {
          error: new SolverTaskError('UNREADABLE_SOLUTION', {
            taskId,
            message: `res.php answered task ${taskId} with ${answer.object === undefined ? 'text' : 'an object'} that is not a ${task.method} answer`,
          }),
        };
      if (!usableAnswer(shaped)) return { error: unusableAnswer(taskId, 'res.php') };
      const extras = boundedExtras(ctx, extrasOf(answer.members), taskId);
      // A composite answer is built from the object's members, not from the text the reply was
      // redacted as (httpCall): redacted again here, or a member echoing the key was recorded.
      const clean = withoutKey(ctx, shaped, 'res.php', taskId);
      // res.php reports no price: the configured one, if any.
      return { solved: withCost(ctx, task.method, { answer: clean, extras }, undefined) };
    }
    const errorClass = classifySolverCode(answer.code, ctx.dialect);
    if (errorClass === 'not_ready') return { notReady: answer.code };
    const message = `res.php answered ${answer.code} for task ${taskId} (solver id ${solverId})`;
    // Over cap is a submission answer; on a result request it can only be a passing fault.
    return {
      error:
        errorClass === 'over_cap'
          ? new SolverTransientError(answer.code, { taskId, message })
          : solverErrorFor(answer.code, ctx.dialect, { taskId, message }),
    };
  } catch (thrown) {
    if (!(thrown instanceof SolverTransientError)) throw thrown;
    return { error: thrown };
  }
}

/** Read the account balance, USD; one request, typed errors. */
async function balance(ctx: SolverContext, signal: AbortSignal | undefined): Promise<number> {
  const answer = await httpCall(ctx, {
    path: 'res.php',
    query: { action: 'getbalance', json: '1' },
    signal,
    taskId: undefined,
  });
  if (!answer.ok) throw solverErrorFor(answer.code, ctx.dialect, { message: `getbalance answered ${answer.code}` });
  const value = believableBalance(answer.value);
  if (value === undefined) {
    throw new SolverTransientError('UNPARSEABLE_BODY', {
      message: `getbalance answered a balance that is not one${snippet(answer.value, ctx.key)}`,
    });
  }
  return value;
}

/** Report an answer as bad or good; one request. A repeated report stands as it is. */
async function report(ctx: SolverContext, verdict: 'bad' | 'good', solverId: string): Promise<void> {
  const action = verdict === 'bad' ? 'reportbad' : 'reportgood';
  const answer = await httpCall(ctx, {
    path: 'res.php',
    query: { action, id: solverId, json: '1' },
    signal: undefined,
    taskId: undefined,
  });
  // Reported before (by this or another delivery): the report stands, nothing to do.
  if (!answer.ok && answer.code === 'ERROR_DUPLICATE_REPORT') return;
  if (!answer.ok && REPORT_REFUSED_CODES.has(answer.code))
    throw new SolverTaskError(answer.code, {
      message: `${action} for solver id ${solverId} refused (${answer.code}): the provider no longer takes a report on it (unknown, expired or not solved)`,
    });
  if (!answer.ok)
    throw solverErrorFor(answer.code, ctx.dialect, {
      message: `${action} for solver id ${solverId} answered ${answer.code}`,
    });
}

/** The in.php / res.php wire. */
export const resPhpWire: SolverWire = {
  protocol: 'res-php',
  submitOnce: (ctx, solve, task) => submitOnce(ctx, solve, task),
  pollOnce: (ctx, solve, task, solverId) => pollOnce(ctx, solve, task, solverId),
  balance: (ctx, signal) => balance(ctx, signal),
  report: (ctx, verdict, solverId) => report(ctx, verdict, solverId),
};
