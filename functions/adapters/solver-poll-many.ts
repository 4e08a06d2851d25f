/**
 * The governor's poll of parked submissions: which of many solver ids are ready. res.php answers
 * up to {@link RES_PHP_IDS_PER_REQUEST} ids in one request (`action=get&ids=a,b,c`, one answer per
 * id joined with `|`); the JSON task API has no bulk call, so its ids are asked one getTaskResult
 * each, a few at a time. Answers are never read out or logged here: the consumer that resumes
 * a ready submission reads its answer itself (one more result request, free on AWS).
 */
import type { PollState, PollTarget } from '../core/ports.js';
import { classifySolverCode, RES_PHP_IDS_PER_REQUEST } from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';
import type { SolveState, SolverContext } from './solver-context.js';
import { httpCall, protocolCode, UNRECOGNIZED_CODE } from './solver-http.js';

/** getTaskResult requests in flight at once where the protocol has no bulk call. */
export const SINGLE_POLLS_AT_ONCE = 8;

/** Which of `targets` are ready, ended or still solving. */
export async function pollMany(
  ctx: SolverContext,
  targets: readonly PollTarget[],
  signal: AbortSignal | undefined,
): Promise<Map<string, PollState>> {
  const states = new Map<string, PollState>();
  if (targets.length === 0) return states;
  if (ctx.wire.protocol === 'res-php') {
    for (let i = 0; i < targets.length; i += RES_PHP_IDS_PER_REQUEST) {
      const chunk = targets.slice(i, i + RES_PHP_IDS_PER_REQUEST);
      for (const [id, state] of await bulkChunk(ctx, chunk, signal)) states.set(id, state);
    }
    return states;
  }
  await eachAtMost(SINGLE_POLLS_AT_ONCE, targets, async (target) => {
    states.set(target.solverId, await pollOne(ctx, target, signal));
  });
  return states;
}

/** One `action=get&ids=` request; a reply that does not line up with the ids asks each alone. */
async function bulkChunk(
  ctx: SolverContext,
  chunk: readonly PollTarget[],
  signal: AbortSignal | undefined,
): Promise<Map<string, PollState>> {
  const out = new Map<string, PollState>();
  try {
    const answer = await httpCall(ctx, {
      path: 'res.php',
      query: { action: 'get', ids: chunk.map((t) => t.solverId).join(','), json: '1' },
      signal,
      taskId: undefined,
    });
    if (!answer.ok) {
      const errorClass = classifySolverCode(answer.code, ctx.dialect);
      // Some services answer a bulk request whose ids are all solving with one CAPCHA_NOT_READY.
      if (errorClass === 'not_ready') {
        for (const target of chunk) out.set(target.solverId, { state: 'not_ready' });
        return out;
      }
      // A refusal of the whole request (the key, the balance, a passing fault) is every id's:
      // asking each alone would repeat it once per id (101 requests a round for 100 ids).
      if (errorClass !== 'task_terminal') {
        for (const target of chunk) out.set(target.solverId, { state: 'unknown', code: answer.code });
        return out;
      }
    }
    const parts = answer.ok ? answer.value.split('|') : [];
    // An answer holding `|` itself (a text captcha) or a task's code for the whole request: each alone.
    if (parts.length !== chunk.length) return singles(ctx, chunk, signal);
    for (const [i, target] of chunk.entries()) out.set(target.solverId, stateOfPart(ctx, parts[i] ?? ''));
    return out;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    for (const target of chunk)
      out.set(target.solverId, { state: 'unknown', code: typeof code === 'string' ? code : 'CLIENT_ERROR' });
    return out;
  }
}

/**
 * One id's part of a bulk answer: a code, or an answer (ready; the consumer that resumes it reads
 * and checks the answer itself). An empty part is no answer, and a part that reads as an error
 * (`ERROR…`, `ERROR: 1001`, a code with the key in it, now `ERROR_***`) is a code, kept to the
 * protocol's shape: before, all of these read as ready, and a code of any length was carried.
 */
function stateOfPart(ctx: SolverContext, part: string): PollState {
  const text = part.trim();
  if (text === '') return { state: 'unknown', code: UNRECOGNIZED_CODE };
  if (!/^(CAPCHA_NOT_READY|CAPTCHA_NOT_READY|ERROR)/.test(text)) return { state: 'ready' };
  const code = protocolCode(text);
  const errorClass = classifySolverCode(code, ctx.dialect);
  if (errorClass === 'not_ready') return { state: 'not_ready' };
  if (errorClass === 'task_terminal') return { state: 'ended', code };
  return { state: 'unknown', code };
}

async function singles(
  ctx: SolverContext,
  chunk: readonly PollTarget[],
  signal: AbortSignal | undefined,
): Promise<Map<string, PollState>> {
  const out = new Map<string, PollState>();
  await eachAtMost(SINGLE_POLLS_AT_ONCE, chunk, async (target) => {
    out.set(target.solverId, await pollOne(ctx, target, signal));
  });
  return out;
}

/** One result request through the wire, read only for its state. */
async function pollOne(ctx: SolverContext, target: PollTarget, signal: AbortSignal | undefined): Promise<PollState> {
  const task = { id: `poll-${target.solverId}`, method: target.method, params: {} } as unknown as Task;
  const deadlineAt = ctx.clock() + ctx.requestTimeoutMs;
  const solve: SolveState = {
    taskId: task.id,
    signal,
    deadlineAt,
    submitBy: deadlineAt,
    answerBy: deadlineAt,
    onSolverAnswer: undefined,
    retries: { overCap: 0, transient: 0 },
  };
  try {
    const outcome = await ctx.wire.pollOnce(ctx, solve, task, target.solverId);
    if ('solved' in outcome) return { state: 'ready' };
    if ('notReady' in outcome) return { state: 'not_ready' };
    const { error } = outcome;
    return error.errorClass === 'task_terminal'
      ? { state: 'ended', code: error.code }
      : { state: 'unknown', code: error.code };
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    return { state: 'unknown', code: typeof code === 'string' ? code : 'CLIENT_ERROR' };
  }
}

/** Run `work` on every item, at most `limit` at once. */
async function eachAtMost<T>(limit: number, items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const runners = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  });
  await Promise.all(runners);
}
