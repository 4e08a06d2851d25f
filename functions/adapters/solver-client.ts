/**
 * The solver API client (2captcha's in.php / res.php protocol, as CaptchaAI speaks it), over
 * undici. One submission per solve, then result requests on a poll schedule that learns when
 * answers arrive (functions/core/poll-schedule.ts). Every error it throws is a typed SolverError
 * whose message and cause chain have the key removed.
 */
import { setTimeout as sleepFor } from 'node:timers/promises';
import { Agent, request, type Dispatcher } from 'undici';
import type { Clock, SolveOptions, SolveOutcome, SolverAnswer, SolverPort } from '../core/ports.js';
import { createAdaptivePollSchedule, type PollSchedule } from '../core/poll-schedule.js';
import {
  SOLVER_ERROR_CODES,
  type SolverError,
  SolverTimeoutError,
  SolverTransientError,
  classifySolverCode,
  redactKey,
  solverErrorFor,
  type Dialect,
} from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';

/** How over-cap and transient answers are retried. */
export interface SolverRetryOptions {
  /** Over-cap answers to in.php retried before SolverOverCapError. @default 3 */
  maxOverCapRetries: number;
  /** Transient failures retried before SolverTransientError: per submission, and in a row while polling. @default 3 */
  maxTransientRetries: number;
  /** Backoff before the first retry, ms; doubles per retry. @default 1000 */
  baseBackoffMs: number;
  /** Largest backoff, ms. @default 15000 */
  maxBackoffMs: number;
}

/** Structured logger; Powertools' Logger fits. Lines are redacted before they get here. */
export interface SolverLogger {
  debug(message: string, attributes: Record<string, unknown>): void;
  warn(message: string, attributes: Record<string, unknown>): void;
}

export interface SolverClientOptions {
  /** Where in.php and res.php live, e.g. https://ocr.captchaai.com. */
  baseUrl: string;
  /** The account key. Sent to the solver only; never logged, never in an error. */
  key: string;
  /** Whose error codes to read (ERROR_ZERO_BALANCE means "no free threads" to CaptchaAI). */
  dialect: Dialect;
  /** undici dispatcher (a Pool, an Agent, a MockAgent in tests). @default a keep-alive Agent owned by the client */
  dispatcher?: Dispatcher;
  /** @default Date.now */
  clock?: Clock;
  /** Waits between requests; tests pass one that moves a fake clock. @default timers/promises setTimeout */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** When to poll. @default createAdaptivePollSchedule() */
  schedule?: PollSchedule;
  /** Limit of one HTTP request, ms; near the deadline it shrinks, to no less than 1 s. @default 15000 */
  requestTimeoutMs?: number;
  retry?: Partial<SolverRetryOptions>;
  /** Jitter source in [0, 1). @default Math.random */
  random?: () => number;
  logger?: SolverLogger;
}

/** A SolverPort with its schedule (for counters) and a way to release its connections. */
export interface SolverClient extends SolverPort {
  readonly schedule: PollSchedule;
  /** Close the dispatcher if the client created it; a dispatcher passed in is left open. */
  close(): Promise<void>;
}

export const DEFAULT_RETRY: Readonly<SolverRetryOptions> = {
  maxOverCapRetries: 3,
  maxTransientRetries: 3,
  baseBackoffMs: 1_000,
  maxBackoffMs: 15_000,
};

/** Shortest time an in-flight request gets even when the deadline is closer (answers then still count). */
const MIN_REQUEST_TIMEOUT_MS = 1_000;

type Answer = { ok: true; value: string } | { ok: false; code: string };

interface Call {
  path: 'in.php' | 'res.php';
  form?: Record<string, string>;
  query?: Record<string, string>;
  signal: AbortSignal | undefined;
  taskId: string | undefined;
  deadlineAt?: number;
}

/** Create the client. The key stays inside it. */
export function createSolverClient(options: SolverClientOptions): SolverClient {
  const { key, dialect } = options;
  if (!key) throw new TypeError('solver key is empty');
  const base = options.baseUrl.replace(/\/+$/, '');
  const ownsDispatcher = options.dispatcher === undefined;
  const dispatcher = options.dispatcher ?? new Agent({ keepAliveTimeout: 10_000 });
  const clock = options.clock ?? Date.now;
  const sleep = options.sleep ?? ((ms: number, signal?: AbortSignal) => sleepFor(ms, undefined, { signal }));
  const schedule = options.schedule ?? createAdaptivePollSchedule();
  const requestTimeoutMs = options.requestTimeoutMs ?? 15_000;
  const retry: SolverRetryOptions = { ...DEFAULT_RETRY, ...options.retry };
  const random = options.random ?? Math.random;
  const redact = (text: string): string => redactKey(text, key);
  const log = {
    debug: (message: string, attributes: Record<string, unknown>) =>
      options.logger?.debug(redact(message), redactAttributes(attributes, key)),
    warn: (message: string, attributes: Record<string, unknown>) =>
      options.logger?.warn(redact(message), redactAttributes(attributes, key)),
  };

  /** One HTTP exchange; protocol answers come back, everything else is thrown typed. */
  async function call({ path, form, query, signal, taskId, deadlineAt }: Call): Promise<Answer> {
    const url = form ? `${base}/${path}` : `${base}/${path}?${new URLSearchParams({ key, ...query }).toString()}`;
    const remaining = deadlineAt === undefined ? requestTimeoutMs : deadlineAt - clock();
    const timeout = AbortSignal.timeout(Math.min(requestTimeoutMs, Math.max(MIN_REQUEST_TIMEOUT_MS, remaining)));
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let statusCode: number;
    let text: string;
    try {
      const response = await request(url, {
        dispatcher,
        method: form ? 'POST' : 'GET',
        signal: combined,
        ...(form
          ? {
              body: new URLSearchParams({ key, ...form }).toString(),
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
            }
          : {}),
      });
      statusCode = response.statusCode;
      text = await response.body.text();
    } catch (error) {
      if (signal?.aborted) throw aborted(taskId);
      const kind = timeout.aborted ? 'REQUEST_TIMEOUT' : 'CONNECTION_ERROR';
      throw new SolverTransientError(kind, 'transient', {
        taskId,
        message: redact(`${path} ${kind === 'REQUEST_TIMEOUT' ? 'timed out' : 'failed'}: ${describe(error)}`),
        cause: sanitizedCause(error, key),
      });
    }
    return parseAnswer(path, statusCode, text, taskId);
  }

  function parseAnswer(path: string, statusCode: number, text: string, taskId: string | undefined): Answer {
    if (statusCode >= 500) {
      throw new SolverTransientError(`HTTP_${statusCode}`, 'transient', {
        taskId,
        message: `${path} answered HTTP ${statusCode}${snippet(text, key)}`,
      });
    }
    const answer = readProtocolAnswer(text);
    if (answer) return answer;
    const code = statusCode >= 300 ? `HTTP_${statusCode}` : /^\s*</.test(text) ? 'HTML_BODY' : 'UNPARSEABLE_BODY';
    throw new SolverTransientError(code, 'transient', {
      taskId,
      message: `${path} answered HTTP ${statusCode} with a body that is not the protocol's${snippet(text, key)}`,
    });
  }

  function aborted(taskId: string | undefined): SolverTimeoutError {
    return new SolverTimeoutError('ABORTED', 'transient', {
      taskId,
      message: `solve of task ${taskId ?? '(none)'} aborted by the caller`,
    });
  }

  /**
   * Wait `ms` (the caller's signal ends it early). Throws SolverTimeoutError on abort.
   */
  async function pause(ms: number, signal: AbortSignal | undefined, taskId: string | undefined): Promise<void> {
    if (signal?.aborted) throw aborted(taskId);
    if (ms > 0) {
      try {
        await sleep(ms, signal);
      } catch (error) {
        if (signal?.aborted) throw aborted(taskId);
        throw new SolverTransientError('CLIENT_ERROR', 'transient', {
          taskId,
          message: redact(`sleep failed: ${describe(error)}`),
        });
      }
    }
    if (signal?.aborted) throw aborted(taskId);
  }

  /** Tell the caller about one response; a throwing hook must not change the solve. */
  function notify(hook: SolveOptions['onSolverAnswer'], answer: SolverAnswer, taskId: string): void {
    if (hook === undefined) return;
    try {
      hook(answer);
    } catch (error) {
      log.warn('onSolverAnswer hook threw; ignored', { taskId, error: describe(error) });
    }
  }

  /** Back off before retry number `attempt` (0-based), or throw `error` if that would pass the deadline. */
  async function backOff(
    error: SolverError,
    attempt: number,
    context: { signal: AbortSignal | undefined; deadlineAt: number; taskId: string },
  ): Promise<void> {
    const delay = Math.round(Math.min(retry.maxBackoffMs, retry.baseBackoffMs * 2 ** attempt) * (0.5 + 0.5 * random()));
    if (clock() + delay >= context.deadlineAt) {
      throw solverErrorLike(error, `${error.message}; no retry: the backoff of ${delay} ms would pass the deadline`);
    }
    log.warn('solver answer retried after a backoff', {
      taskId: context.taskId,
      code: error.code,
      errorClass: error.errorClass,
      attempt: attempt + 1,
      delayMs: delay,
    });
    await pause(delay, context.signal, context.taskId);
  }

  async function submit(
    task: Task,
    context: {
      signal: AbortSignal | undefined;
      deadlineAt: number;
      taskId: string;
      onSolverAnswer: SolveOptions['onSolverAnswer'];
    },
    retries: SolveOutcome['retries'],
  ): Promise<string> {
    const form: Record<string, string> = { method: task.method, json: '1' };
    for (const [name, value] of Object.entries(task.params)) {
      // The schema refuses a task's own key; the client's is added by call() and wins anyway.
      if (value !== undefined && name !== 'key') form[name] = String(value);
    }
    for (;;) {
      if (clock() >= context.deadlineAt) throw deadlinePassed(context.taskId, undefined, 0);
      let error: SolverError;
      try {
        const answer = await call({
          path: 'in.php',
          form,
          signal: context.signal,
          taskId: context.taskId,
          deadlineAt: context.deadlineAt,
        });
        if (answer.ok) {
          notify(context.onSolverAnswer, { request: 'submit', outcome: 'accepted' }, context.taskId);
          return answer.value;
        }
        error = solverErrorFor(answer.code, dialect, {
          taskId: context.taskId,
          message: `in.php answered ${answer.code} for task ${context.taskId}`,
        });
      } catch (thrown) {
        if (!(thrown instanceof SolverTransientError)) throw thrown;
        error = thrown;
      }
      // Reported before any retry or throw, so a refused submission is counted even when the
      // solve goes on retrying for a while.
      notify(
        context.onSolverAnswer,
        { request: 'submit', outcome: error.errorClass, code: error.code },
        context.taskId,
      );
      if (error.errorClass === 'over_cap') {
        if (retries.overCap >= retry.maxOverCapRetries)
          throw solverErrorLike(error, `${error.message} after ${retries.overCap} over-cap retries`);
        await backOff(error, retries.overCap, context);
        retries.overCap += 1;
      } else if (error.errorClass === 'transient') {
        if (retries.transient >= retry.maxTransientRetries)
          throw solverErrorLike(error, `${error.message} after ${retries.transient} transient retries`);
        await backOff(error, retries.transient, context);
        retries.transient += 1;
      } else {
        throw error;
      }
    }
  }

  function deadlinePassed(taskId: string, solverId: string | undefined, resultRequests: number): SolverTimeoutError {
    return new SolverTimeoutError('DEADLINE_EXCEEDED', 'transient', {
      taskId,
      message: `no answer for task ${taskId}${solverId ? ` (solver id ${solverId})` : ''} before the deadline; ${resultRequests} result requests made`,
    });
  }

  return {
    schedule,

    async solve(task, { signal, deadlineAt, resumeSolverId, onSubmitted, onSolverAnswer }) {
      const taskId = task.id;
      const context = { signal, deadlineAt, taskId, onSolverAnswer };
      const retries = { overCap: 0, transient: 0 };
      if (signal?.aborted) throw aborted(taskId);

      let solverId: string;
      const resumed = resumeSolverId !== undefined;
      if (resumed) {
        solverId = resumeSolverId;
      } else {
        solverId = await submit(task, context, retries);
        log.debug('solver accepted the task', { taskId, solverId, method: task.method });
        // The caller's own errors (e.g. a lost claim) pass through as they are.
        await onSubmitted?.(solverId);
      }
      const acceptedAt = clock();
      const plan = schedule.plan(task.method);
      let resultRequests = 0;
      let lastNotReadyMs: number | undefined;
      let transientInARow = 0;
      // A resumed submission may have been ready for a while: ask at once, then follow the plan.
      let nextAt = resumed ? 0 : plan.nextPollAt(0);

      for (;;) {
        if (signal?.aborted) throw aborted(taskId);
        if (clock() >= deadlineAt) throw deadlinePassed(taskId, solverId, resultRequests);
        // The last request goes out at the deadline rather than never.
        await pause(Math.min(acceptedAt + nextAt, deadlineAt) - clock(), signal, taskId);
        const sentMs = clock() - acceptedAt;
        resultRequests += 1;
        let error: SolverError;
        try {
          const answer = await call({
            path: 'res.php',
            query: { action: 'get', id: solverId, json: '1' },
            signal,
            taskId,
            deadlineAt,
          });
          if (answer.ok) {
            notify(onSolverAnswer, { request: 'result', outcome: 'answered' }, taskId);
            const answeredAt = clock();
            if (!resumed) {
              schedule.observe(task.method, { lastNotReadyMs, answeredMs: answeredAt - acceptedAt, resultRequests });
            }
            return { answer: answer.value, solverId, acceptedAt, answeredAt, resultRequests, retries };
          }
          const errorClass = classifySolverCode(answer.code, dialect);
          if (errorClass === 'not_ready') {
            notify(onSolverAnswer, { request: 'result', outcome: 'not_ready', code: answer.code }, taskId);
            transientInARow = 0;
            lastNotReadyMs = sentMs;
            // Step from the planned slot, not the send time: timers fire a little late, and
            // stepping from a late send would skip every other slot. Half an interval after the
            // send keeps a slow response from being followed by a burst of catch-up requests.
            nextAt = plan.nextPollAt(Math.max(nextAt + plan.minIntervalMs, sentMs + plan.minIntervalMs / 2));
            continue;
          }
          const message = `res.php answered ${answer.code} for task ${taskId} (solver id ${solverId})`;
          // Over cap is a submission answer; on a result request it can only be a passing fault.
          error =
            errorClass === 'over_cap'
              ? new SolverTransientError(answer.code, 'transient', { taskId, message })
              : solverErrorFor(answer.code, dialect, { taskId, message });
        } catch (thrown) {
          if (!(thrown instanceof SolverTransientError)) throw thrown;
          error = thrown;
        }
        notify(onSolverAnswer, { request: 'result', outcome: error.errorClass, code: error.code }, taskId);
        if (error.errorClass !== 'transient' && error.errorClass !== 'over_cap') throw error;
        if (transientInARow >= retry.maxTransientRetries) {
          throw solverErrorLike(error, `${error.message} after ${transientInARow} transient retries in a row`);
        }
        await backOff(error, transientInARow, context);
        transientInARow += 1;
        retries.transient += 1;
        nextAt = clock() - acceptedAt;
      }
    },

    async getBalance({ signal } = {}) {
      const answer = await call({
        path: 'res.php',
        query: { action: 'getbalance', json: '1' },
        signal,
        taskId: undefined,
      });
      if (!answer.ok) throw solverErrorFor(answer.code, dialect, { message: `getbalance answered ${answer.code}` });
      const balance = Number(answer.value);
      if (!Number.isFinite(balance)) {
        throw new SolverTransientError('UNPARSEABLE_BODY', 'transient', {
          message: `getbalance answered a balance that is not a number${snippet(answer.value, key)}`,
        });
      }
      return balance;
    },

    async reportBad(solverId) {
      await report('reportbad', solverId);
    },

    async reportGood(solverId) {
      await report('reportgood', solverId);
    },

    async close() {
      if (ownsDispatcher) await dispatcher.close();
    },
  };

  async function report(action: 'reportbad' | 'reportgood', solverId: string): Promise<void> {
    const answer = await call({
      path: 'res.php',
      query: { action, id: solverId, json: '1' },
      signal: undefined,
      taskId: undefined,
    });
    // Reported before (by this or another delivery): the report stands, nothing to do.
    if (!answer.ok && answer.code === 'ERROR_DUPLICATE_REPORT') return;
    if (!answer.ok)
      throw solverErrorFor(answer.code, dialect, {
        message: `${action} for solver id ${solverId} answered ${answer.code}`,
      });
  }
}

/**
 * Read a protocol answer: `{"status":1,"request":…}` (the id may be a JSON number, a GeeTest
 * answer an object), `{"status":0,"request":"CODE"}`, or the plain-text forms a service falls
 * back to (`OK|…`, a bare known code). Anything else is undefined.
 */
export function readProtocolAnswer(text: string): Answer | undefined {
  const trimmed = text.trim();
  let json: unknown;
  try {
    json = JSON.parse(trimmed);
  } catch {
    json = undefined;
  }
  if (json !== null && typeof json === 'object' && 'status' in json && 'request' in json) {
    const { status, request: value } = json as { status: unknown; request: unknown };
    if (status === 1 || status === '1') {
      if (typeof value === 'string' && value !== '') return { ok: true, value };
      if (typeof value === 'number' && Number.isFinite(value)) return { ok: true, value: String(value) };
      if (value !== null && typeof value === 'object') return { ok: true, value: JSON.stringify(value) };
      return undefined;
    }
    if ((status === 0 || status === '0') && typeof value === 'string' && value !== '')
      return { ok: false, code: protocolCode(value) };
    return undefined;
  }
  if (trimmed.startsWith('OK|') && trimmed.length > 3) return { ok: true, value: trimmed.slice(3) };
  if (trimmed in SOLVER_ERROR_CODES) return { ok: false, code: trimmed };
  return undefined;
}

/**
 * Error codes travel into logs, metrics and records: keep only what looks like a protocol code,
 * so a service or proxy that echoes request text (a key) in `request` cannot leak it.
 */
const PROTOCOL_CODE = /^(?:[A-Z][A-Z0-9_]{1,63}|ERROR: \d{1,5})$/;
export const UNRECOGNIZED_CODE = 'UNRECOGNIZED_CODE';
function protocolCode(value: string): string {
  return PROTOCOL_CODE.test(value) ? value : UNRECOGNIZED_CODE;
}

/** The same typed error with another message (kept class, code, task id). */
function solverErrorLike(error: SolverError, message: string): SolverError {
  const Constructor = error.constructor as new (
    code: string,
    errorClass: SolverError['errorClass'],
    options: { taskId?: string; message?: string; cause?: unknown },
  ) => SolverError;
  return new Constructor(error.code, error.errorClass, { taskId: error.taskId, message, cause: error.cause });
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return `${error.name}${typeof code === 'string' ? ` ${code}` : ''}: ${error.message}`;
  }
  return String(error);
}

/**
 * A copy of an error chain with the key removed from every message, keeping names and codes.
 * The originals are not attached: undici and MockAgent errors can quote the URL with `key=`.
 */
export function sanitizedCause(error: unknown, key: string, depth = 0): Error | undefined {
  if (error === undefined || error === null) return undefined;
  if (!(error instanceof Error)) return new Error(redactKey(String(error), key));
  const inner = depth < 4 ? sanitizedCause(error.cause, key, depth + 1) : undefined;
  const copy = new Error(redactKey(error.message, key), inner === undefined ? undefined : { cause: inner });
  copy.name = error.name;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' || typeof code === 'number') (copy as Error & { code?: unknown }).code = code;
  return copy;
}

/** A short, redacted excerpt of a body for an error message (redacted before it is cut). */
function snippet(text: string, key: string): string {
  const clean = redactKey(text, key).replace(/\s+/g, ' ').trim();
  if (clean === '') return ' (empty body)';
  return `: ${JSON.stringify(clean.length > 80 ? `${clean.slice(0, 80)}…` : clean)}`;
}

function redactAttributes(attributes: Record<string, unknown>, key: string): Record<string, unknown> {
  return JSON.parse(redactKey(JSON.stringify(attributes), key)) as Record<string, unknown>;
}
