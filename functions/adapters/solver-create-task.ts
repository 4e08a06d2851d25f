/**
 * The JSON task API wire (2captcha's API v2, Anti-Captcha, CapMonster Cloud, CapSolver): one
 * submission is `POST /createTask {clientKey, task, softId|appId}`, one result request
 * `POST /getTaskResult {clientKey, taskId}` (status `processing` / `idle` / `ready`), the balance
 * `POST /getBalance`, the reports each provider's own method. The key travels in the body's
 * `clientKey`, never in a URL.
 *
 * None of these providers has a bulk getTaskResult (one taskId per call); a bulk poll, where it
 * is wanted, is res.php's `action=get&ids=` (solver-res-php.ts).
 */
import {
  REPORT_REFUSED_CODES,
  SOLVER_ID_PATTERN,
  type SolverError,
  SolverTaskError,
  SolverTransientError,
  classifySolverCode,
  solverErrorFor,
} from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';
import { type CreateTaskMapping, createTaskOf, readSolution } from '../core/task-types.js';
import {
  believableBalance,
  boundedExtras,
  reportedCost,
  unusableAnswer,
  usableAnswer,
  withCost,
} from './solver-answer.js';
import type { PollOnce, SolveState, SolverContext, SolverWire, SubmitOnce } from './solver-context.js';
import { type JsonAnswer, jsonCall, NOT_SENT_AGAIN, numberAsWritten, snippet, withoutKey } from './solver-http.js';

/**
 * The JSON text of a task id: a number as the body wrote it (every digit kept), a UUID as a
 * string, and digits that no JSON number is written as (a leading zero: `"0123"`) as a string
 * too: written bare, `{"taskId":0123}` was not JSON, and every poll of a paid task was refused.
 */
function taskIdJson(solverId: string): string {
  return /^(0|[1-9]\d*)$/.test(solverId) ? solverId : JSON.stringify(solverId);
}

/** The operator's developer id as the dialect takes it: CapSolver's `appId` text, everyone else's numeric `softId`. */
function softIdMember(ctx: SolverContext): Record<string, string> {
  if (ctx.softId === undefined) return {};
  if (ctx.dialect === 'capsolver') return { appId: JSON.stringify(ctx.softId) };
  return /^\d+$/.test(ctx.softId) ? { softId: ctx.softId } : {};
}

/** The task id of a createTask answer, as the body wrote it; undefined when it is none we could poll. */
function taskIdOf(answer: Extract<JsonAnswer, { ok: true }>): string | undefined {
  const raw = answer.body.taskId;
  const text =
    typeof raw === 'number' && Number.isFinite(raw)
      ? numberAsWritten(answer.text, raw, 'taskId')
      : typeof raw === 'string'
        ? raw
        : undefined;
  return text !== undefined && SOLVER_ID_PATTERN.test(text) ? text : undefined;
}

/** An answer read from a ready body, or why it cannot be used. */
function solvedOf(ctx: SolverContext, task: Task, body: Readonly<Record<string, unknown>>, taskId: string): PollOnce {
  const reading = readSolution(task.method, body.solution);
  if (reading === undefined)
    return {
      error: new SolverTaskError('UNREADABLE_SOLUTION', {
        taskId,
        message: `the provider answered task ${taskId} with a solution that holds no ${task.method} answer`,
      }),
    };
  if (!usableAnswer(reading.answer)) return { error: unusableAnswer(taskId, 'the provider') };
  const answer = withoutKey(ctx, reading.answer, 'solution', taskId);
  const extras = boundedExtras(ctx, reading.extras, taskId);
  return { solved: withCost(ctx, task.method, { answer, extras }, reportedCost(body.cost)) };
}

async function submitOnce(ctx: SolverContext, solve: SolveState, task: Task): Promise<SubmitOnce> {
  const { taskId, signal, deadlineAt } = solve;
  const mapping = createTaskOf(task, ctx.dialect);
  // Nothing was sent, nothing is paid: the provider has no task type for this task. Thrown, not
  // returned as the provider's answer: no request was made, so none is told (`onSolverAnswer`),
  // and the consumer's request counts and the governor's error rate leave it out (returned, it
  // counted as a submission answered by a task error: on CapSolver, `npm start`'s mix, a sixth of
  // it hCaptcha and text, held the governor at HIGH_ERROR_RATE 39 ticks of 44).
  if (!mapping.ok) throw new SolverTaskError(mapping.code, { taskId, message: `task ${taskId}: ${mapping.reason}` });
  const members: Record<string, string> = {
    task: JSON.stringify(mapping.task),
    ...Object.fromEntries(Object.entries(mapping.topLevel).map(([name, value]) => [name, JSON.stringify(value)])),
    ...softIdMember(ctx),
  };
  try {
    // A submission answered in this very response waits for the recognition, until the caller's
    // last moment to record it, however long past the client's request timeout that is: cut
    // after the provider accepted it, it is paid with its id never known (cut at the 15 s
    // request timeout and sent again, a 16 s recognition was paid four times).
    const inResponse = answeredInResponse(ctx, mapping);
    const answer = await jsonCall(ctx, {
      method: 'createTask',
      members,
      signal,
      taskId,
      deadlineAt: inResponse ? solve.answerBy : deadlineAt,
      toDeadline: inResponse,
    });
    if (!answer.ok)
      return {
        error: solverErrorFor(answer.code, ctx.dialect, {
          taskId,
          message: `createTask answered ${answer.code} for task ${taskId}`,
        }),
      };
    const solverId = taskIdOf(answer);
    if (solverId === undefined)
      return {
        error: new SolverTaskError('MALFORMED_SOLVER_ID', {
          taskId,
          message: `createTask accepted task ${taskId} with a taskId that is not ${SOLVER_ID_PATTERN.source}${snippet(answer.text, ctx.key)}; ${NOT_SENT_AGAIN}`,
        }),
      };
    // CapSolver answers recognition tasks (ImageToText) at once, in this very response.
    if (answer.body.status === 'ready') {
      const ready = solvedOf(ctx, task, answer.body, taskId);
      if ('solved' in ready) return { solverId, solved: ready.solved };
    }
    return { solverId };
  } catch (thrown) {
    if (!(thrown instanceof SolverTransientError)) throw thrown;
    return { error: thrown };
  }
}

async function pollOnce(ctx: SolverContext, solve: SolveState, task: Task, solverId: string): Promise<PollOnce> {
  const { taskId, signal, deadlineAt } = solve;
  try {
    const answer = await jsonCall(ctx, {
      method: 'getTaskResult',
      members: { taskId: taskIdJson(solverId) },
      signal,
      taskId,
      deadlineAt,
    });
    if (!answer.ok) {
      // CapMonster's older answer for "not yet": an error code, not a status.
      if (classifySolverCode(answer.code, ctx.dialect) === 'not_ready') return { notReady: answer.code };
      return { error: pollError(ctx, answer.code, taskId, solverId) };
    }
    const { status } = answer.body;
    if (status === 'processing' || status === 'idle') return { notReady: status };
    if (status === 'ready') return solvedOf(ctx, task, answer.body, taskId);
    // Some providers end a task they could not solve with `failed` and no error id: polling
    // again repeats it (it was retried as an unknown status until the transient budget ran out).
    if (status === 'failed')
      return {
        error: new SolverTaskError('TASK_FAILED', {
          taskId,
          message: `getTaskResult answered task ${taskId} (solver id ${solverId}) failed${snippet(answer.text, ctx.key)}`,
        }),
      };
    return {
      error: new SolverTransientError('UNRECOGNIZED_STATUS', {
        taskId,
        message: `getTaskResult answered task ${taskId} (solver id ${solverId}) with a status that is not processing or ready${snippet(answer.text, ctx.key)}`,
      }),
    };
  } catch (thrown) {
    if (!(thrown instanceof SolverTransientError)) throw thrown;
    return { error: thrown };
  }
}

/** A getTaskResult error; over cap here can only be a passing fault (it is a submission's answer). */
function pollError(ctx: SolverContext, code: string, taskId: string, solverId: string): SolverError {
  const message = `getTaskResult answered ${code} for task ${taskId} (solver id ${solverId})`;
  if (classifySolverCode(code, ctx.dialect) === 'over_cap') return new SolverTransientError(code, { taskId, message });
  return solverErrorFor(code, ctx.dialect, { taskId, message });
}

async function balance(ctx: SolverContext, signal: AbortSignal | undefined): Promise<number> {
  const answer = await jsonCall(ctx, { method: 'getBalance', members: {}, signal, taskId: undefined });
  if (!answer.ok) throw solverErrorFor(answer.code, ctx.dialect, { message: `getBalance answered ${answer.code}` });
  const value = believableBalance(answer.body.balance);
  if (value === undefined)
    throw new SolverTransientError('UNPARSEABLE_BODY', {
      message: `getBalance answered a balance that is not one${snippet(answer.text, ctx.key)}`,
    });
  return value;
}

/**
 * CapMonster Cloud's report methods for a bad answer, by the task's method (docs.capmonster.cloud,
 * "How to report bad tokens"): images on reportIncorrectImageCaptcha, the token kinds on
 * reportIncorrectTokenCaptcha. It takes no report of a good answer.
 */
const CAPMONSTER_BAD_REPORTS: Readonly<Record<string, string>> = {
  base64: 'reportIncorrectImageCaptcha',
  textcaptcha: 'reportIncorrectImageCaptcha',
  userrecaptcha: 'reportIncorrectTokenCaptcha',
  hcaptcha: 'reportIncorrectTokenCaptcha',
  turnstile: 'reportIncorrectTokenCaptcha',
  geetest: 'reportIncorrectTokenCaptcha',
  geetest_v4: 'reportIncorrectTokenCaptcha',
};

/**
 * The report method and its extra members, per dialect: 2captcha's one pair for every task;
 * Anti-Captcha's per kind (image, reCAPTCHA, hCaptcha; "correct" for reCAPTCHA only); CapSolver's
 * feedbackTask; CapMonster's for bad answers (image, or token).
 */
function reportMethodOf(
  ctx: SolverContext,
  verdict: 'bad' | 'good',
  method: string | undefined,
): { method: string; members: Record<string, string> } | undefined {
  switch (ctx.dialect) {
    case '2captcha':
      return { method: verdict === 'bad' ? 'reportIncorrect' : 'reportCorrect', members: {} };
    case 'capsolver':
      return { method: 'feedbackTask', members: { result: JSON.stringify({ invalid: verdict === 'bad' }) } };
    case 'anti-captcha': {
      const byMethod: Record<string, string> =
        verdict === 'bad'
          ? {
              base64: 'reportIncorrectImageCaptcha',
              textcaptcha: 'reportIncorrectImageCaptcha',
              userrecaptcha: 'reportIncorrectRecaptcha',
              hcaptcha: 'reportIncorrectHcaptcha',
            }
          : { userrecaptcha: 'reportCorrectRecaptcha' };
      const name = method === undefined ? undefined : byMethod[method];
      return name === undefined ? undefined : { method: name, members: {} };
    }
    case 'capmonster': {
      // Bad answers only: images on their own method, every token kind on reportIncorrectTokenCaptcha.
      if (verdict === 'good' || method === undefined) return undefined;
      const name = CAPMONSTER_BAD_REPORTS[method];
      return name === undefined ? undefined : { method: name, members: {} };
    }
    default:
      return undefined;
  }
}

async function report(ctx: SolverContext, verdict: 'bad' | 'good', solverId: string, method: string | undefined) {
  const route = reportMethodOf(ctx, verdict, method);
  if (route === undefined)
    throw new SolverTaskError('REPORT_NOT_SUPPORTED', {
      message: `${ctx.dialect}'s JSON task API takes no ${verdict} report${method ? ` on a ${method} task` : ' without the task method'} (solver id ${solverId})`,
    });
  const answer = await jsonCall(ctx, {
    method: route.method,
    members: { taskId: taskIdJson(solverId), ...route.members },
    signal: undefined,
    taskId: undefined,
  });
  if (answer.ok) return;
  // Reported before (by this or another delivery): the report stands, nothing to do.
  if (answer.code === 'ERROR_DUPLICATE_REPORT') return;
  if (REPORT_REFUSED_CODES.has(answer.code))
    throw new SolverTaskError(answer.code, {
      message: `${route.method} for solver id ${solverId} refused (${answer.code}): the provider no longer takes a report on it (unknown, expired, past its report window, or reported already)`,
    });
  throw solverErrorFor(answer.code, ctx.dialect, {
    message: `${route.method} for solver id ${solverId} answered ${answer.code}`,
  });
}

/**
 * Whether a provider speaking `dialect` answers its recognition tasks (ImageToText: base64 images)
 * in createTask's own response, whose request then lasts the recognition: CapSolver's.
 */
export function answersImagesInSubmission(dialect: string): boolean {
  return dialect === 'capsolver';
}

/** CapSolver answers its recognition tasks (ImageToText) in createTask's own response. */
function answeredInResponse(ctx: SolverContext, mapping: CreateTaskMapping): boolean {
  return answersImagesInSubmission(ctx.dialect) && mapping.ok && mapping.task.type === 'ImageToTextTask';
}

/** The JSON task API wire. */
export const createTaskWire: SolverWire = {
  protocol: 'create-task',
  submitOnce: (ctx, solve, task) => submitOnce(ctx, solve, task),
  answersInSubmission: (ctx, task) => answeredInResponse(ctx, createTaskOf(task, ctx.dialect)),
  pollOnce: (ctx, solve, task, solverId) => pollOnce(ctx, solve, task, solverId),
  balance: (ctx, signal) => balance(ctx, signal),
  report: (ctx, verdict, solverId, method) => report(ctx, verdict, solverId, method),
};
