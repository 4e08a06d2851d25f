/**
 * The solver API client (2captcha's in.php / res.php protocol, as CaptchaAI speaks it), over
 * undici. One submission per solve (solver-submit.ts), then result requests on a poll schedule
 * that learns when answers arrive (solver-poll.ts, functions/core/poll-schedule.ts), each
 * through one HTTP exchange (solver-http.ts). Every error it throws is a typed SolverError
 * whose message and cause chain have the key removed.
 */
import { Agent, type Dispatcher } from 'undici';
import { sleep as sleepFor } from '../core/helpers/time.js';
import { createAdaptivePollSchedule, type PollSchedule } from '../core/poll-schedule.js';
import type { Clock, SolverPort } from '../core/ports.js';
import { type Dialect, SolverTransientError, redactKey, solverErrorFor } from '../core/solver-protocol.js';
import {
  aborted,
  DEFAULT_RETRY,
  type SolveState,
  type SolverContext,
  type SolverLogger,
  type SolverRetryOptions,
} from './solver-context.js';
import { httpCall, snippet } from './solver-http.js';
import { pollForAnswer } from './solver-poll.js';
import { submit } from './solver-submit.js';

export { DEFAULT_RETRY, type SolverLogger, type SolverRetryOptions } from './solver-context.js';

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
  /**
   * Largest response body read, bytes. Image answers are a few characters and tokens a few KB;
   * a larger body (by its Content-Length or while streaming) is dropped unread as a transient
   * failure (`BODY_TOO_LARGE`). @default 65536
   */
  maxResponseBytes?: number;
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

/** Default cap of a response body, bytes (64 KiB): tokens are a few KB, image answers a few bytes. */
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

/** The shared context of one client, from its options (defaults filled in, logging redacted). */
function createSolverContext(options: SolverClientOptions, dispatcher: Dispatcher): SolverContext {
  const { key } = options;
  const redact = (text: string): string => redactKey(text, key);
  return {
    base: options.baseUrl.replace(/\/+$/, ''),
    key,
    dialect: options.dialect,
    dispatcher,
    clock: options.clock ?? Date.now,
    sleep: options.sleep ?? sleepFor,
    schedule: options.schedule ?? createAdaptivePollSchedule(),
    requestTimeoutMs: options.requestTimeoutMs ?? 15_000,
    maxResponseBytes: options.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
    retry: { ...DEFAULT_RETRY, ...options.retry },
    random: options.random ?? Math.random,
    redact,
    log: {
      debug: (message, attributes) => options.logger?.debug(redact(message), redactAttributes(attributes, key)),
      warn: (message, attributes) => options.logger?.warn(redact(message), redactAttributes(attributes, key)),
    },
  };
}

/** Read the account balance, USD; one request, typed errors. */
async function readBalance(ctx: SolverContext, signal: AbortSignal | undefined): Promise<number> {
  const answer = await httpCall(ctx, {
    path: 'res.php',
    query: { action: 'getbalance', json: '1' },
    signal,
    taskId: undefined,
  });
  if (!answer.ok) throw solverErrorFor(answer.code, ctx.dialect, { message: `getbalance answered ${answer.code}` });
  const balance = Number(answer.value);
  if (!Number.isFinite(balance)) {
    throw new SolverTransientError('UNPARSEABLE_BODY', {
      message: `getbalance answered a balance that is not a number${snippet(answer.value, ctx.key)}`,
    });
  }
  return balance;
}

/** Report an answer as bad or good; one request. A repeated report stands as it is. */
async function report(ctx: SolverContext, action: 'reportbad' | 'reportgood', solverId: string): Promise<void> {
  const answer = await httpCall(ctx, {
    path: 'res.php',
    query: { action, id: solverId, json: '1' },
    signal: undefined,
    taskId: undefined,
  });
  // Reported before (by this or another delivery): the report stands, nothing to do.
  if (!answer.ok && answer.code === 'ERROR_DUPLICATE_REPORT') return;
  if (!answer.ok)
    throw solverErrorFor(answer.code, ctx.dialect, {
      message: `${action} for solver id ${solverId} answered ${answer.code}`,
    });
}

/** Create the client. The key stays inside it. */
export function createSolverClient(options: SolverClientOptions): SolverClient {
  if (!options.key) throw new TypeError('solver key is empty');
  const ownsDispatcher = options.dispatcher === undefined;
  const dispatcher = options.dispatcher ?? new Agent({ keepAliveTimeout: 10_000 });
  const ctx = createSolverContext(options, dispatcher);

  return {
    schedule: ctx.schedule,

    async solve(task, { signal, deadlineAt, resumeSolverId, onSubmitted, onSolverAnswer }) {
      const solve: SolveState = {
        taskId: task.id,
        signal,
        deadlineAt,
        onSolverAnswer,
        retries: { overCap: 0, transient: 0 },
      };
      if (signal?.aborted) throw aborted(task.id);
      if (resumeSolverId !== undefined) return pollForAnswer(ctx, task, solve, resumeSolverId, true);
      const solverId = await submit(ctx, task, solve);
      ctx.log.debug('solver accepted the task', { taskId: task.id, solverId, method: task.method });
      // The caller's own errors (e.g. a lost claim) pass through as they are.
      await onSubmitted?.(solverId);
      return pollForAnswer(ctx, task, solve, solverId, false);
    },

    getBalance: ({ signal } = {}) => readBalance(ctx, signal),
    reportBad: (solverId) => report(ctx, 'reportbad', solverId),
    reportGood: (solverId) => report(ctx, 'reportgood', solverId),

    async close() {
      if (ownsDispatcher) await dispatcher.close();
    },
  };
}

function redactAttributes(attributes: Record<string, unknown>, key: string): Record<string, unknown> {
  return JSON.parse(redactKey(JSON.stringify(attributes), key)) as Record<string, unknown>;
}
