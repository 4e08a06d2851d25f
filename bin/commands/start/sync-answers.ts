/**
 * A check of `start`'s flags that no flag can make alone: a provider that answers image tasks in
 * createTask's own response (CapSolver) holds that request for the whole recognition, and the
 * local consumer can wait for it only until half its record margin before its function's end
 * (`lastIdWriteBefore`). A recognition that outlasts that is cut short after the provider accepted
 * and charged it, its id never known, and the task's next delivery pays again; the consumer sends
 * such a request only with the recent longest and half again left (ANSWER_WAIT_HEADROOM), so a
 * window narrower than that stops every image, and they go to the DLQ. Both are drawn runs
 * (`npm run bench:sweep`, seeds 8016 and 10015: a 5 s function timeout, 3 s recognitions).
 *
 * Here the simulator's recognition times are known: a log-normal of the flag's median and the
 * base64 method's spread. The window of an invocation from its start must hold the 99.9th
 * percentile of them with the consumer's headroom, or `start` names the flags and the fix.
 */
import { answersImagesInSubmission } from '../../../functions/adapters/solver-create-task.js';
import { ANSWER_WAIT_HEADROOM } from '../../../functions/adapters/solver-context.js';
import { lastIdWriteBefore } from '../../../functions/consumer/task-run.js';
import { localFunctionTimeoutSeconds, localRecordMarginMs } from '../../../local/runtime.js';
import { DEFAULT_SOLVE_TIMES } from '../../../local/solver-sim/options.js';

/** The standard normal's 99.9th percentile: the recognition the window must hold (one image in 1 000 slower). */
const Z_999 = 3.090232306167813;

/** The longest visibility timeout `--visibility-timeout` takes, s. */
const MAX_VISIBILITY_S = 900;

/** One lane's solver as the flags describe it. */
export interface SyncAnswerLane {
  /** The flags that name it, for the message: `--solver-dialect capsolver`. */
  dialectFlag: string;
  dialect: string;
  /** The flag of its median recognition time, and the value. */
  latencyFlag: string;
  medianMs: number;
}

/** How long an invocation can wait for an answer from its start, ms, at a visibility timeout of `visibilitySeconds`. */
export function answerWindowMs(visibilitySeconds: number): number {
  const functionTimeoutMs = localFunctionTimeoutSeconds(visibilitySeconds) * 1000;
  return lastIdWriteBefore(functionTimeoutMs, localRecordMarginMs(functionTimeoutMs));
}

/** How much of that window an image needs at a median recognition of `medianMs`: its 99.9th percentile, with the headroom. */
export function imageNeedsMs(medianMs: number): number {
  return ANSWER_WAIT_HEADROOM * medianMs * Math.exp(DEFAULT_SOLVE_TIMES.base64.spread * Z_999);
}

/** What is wrong with a lane's window at `visibilitySeconds`, and the fix; undefined when it holds. */
export function syncAnswerProblem(lane: SyncAnswerLane, visibilitySeconds: number): string | undefined {
  if (!answersImagesInSubmission(lane.dialect)) return undefined;
  const window = answerWindowMs(visibilitySeconds);
  const need = imageNeedsMs(lane.medianMs);
  if (window >= need) return undefined;
  let visibility = visibilitySeconds;
  while (visibility < MAX_VISIBILITY_S && answerWindowMs(visibility) < need) visibility++;
  const visibilityFix =
    answerWindowMs(visibility) >= need ? `Raise --visibility-timeout to at least ${visibility}` : '';
  const most = Math.floor(window / imageNeedsMs(1));
  const latencyFix = `${visibilityFix === '' ? 'Lower' : 'lower'} ${lane.latencyFlag} to at most ${most}`;
  const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  return (
    `${lane.dialectFlag} answers image tasks in createTask's own response, whose request lasts the recognition: ` +
    `at ${lane.latencyFlag} ${lane.medianMs}, ${s(need / ANSWER_WAIT_HEADROOM)} at its 99.9th percentile, ${s(need)} with the consumer's headroom for a slower one; ` +
    `--visibility-timeout ${visibilitySeconds} gives the local consumer a ${localFunctionTimeoutSeconds(visibilitySeconds)} s function timeout, ` +
    `of which it can wait ${s(window)} for such an answer, so images would be cut short after the provider charged them (and paid again) or never sent. ` +
    `${[visibilityFix, latencyFix].filter((fix) => fix !== '').join(', or ')}.`
  );
}
