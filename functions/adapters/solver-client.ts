/**
 * The solver API client, over undici, for both wire protocols: 2captcha's in.php / res.php (as
 * CaptchaAI speaks it; solver-res-php.ts) and the JSON task API (createTask / getTaskResult, as
 * 2captcha's API v2, Anti-Captcha, CapMonster and CapSolver speak it; solver-create-task.ts). One
 * submission per solve (solver-submit.ts), then result requests on a poll schedule that learns
 * when answers arrive (solver-poll.ts, functions/core/poll-schedule.ts), each through one HTTP
 * exchange (solver-http.ts). Every error it throws is a typed SolverError whose message and
 * cause chain have the key removed.
 */
import { Agent, type Dispatcher } from 'undici';
import { sleep as sleepFor } from '../core/helpers/time.js';
import { createAdaptivePollSchedule, type PollSchedule } from '../core/poll-schedule.js';
import type { Clock, SolveOptions, SolverPort } from '../core/ports.js';
import { type Dialect, pollGapMs, type SolverMethod, type SolverProtocol, redactKey } from '../core/solver-protocol.js';
import { redactJson } from '../core/redaction.js';
import {
  AnswerWaits,
  aborted,
  DEFAULT_RETRY,
  type SolveState,
  type SolverContext,
  type SolverLogger,
  type SolverRetryOptions,
} from './solver-context.js';
import { createTaskWire } from './solver-create-task.js';
import { outcomeOf, pollForAnswer } from './solver-poll.js';
import { pollMany } from './solver-poll-many.js';
import { resPhpWire } from './solver-res-php.js';
import { submit } from './solver-submit.js';

export { DEFAULT_RETRY, type SolverLogger, type SolverRetryOptions } from './solver-context.js';

export interface SolverClientOptions {
  /** Where in.php and res.php (or the JSON API's methods) live, e.g. https://ocr.captchaai.com, https://api.2captcha.com. */
  baseUrl: string;
  /** The account key. Sent to the solver only; never logged, never in an error. */
  key: string;
  /** Whose spellings and error codes to use (ERROR_ZERO_BALANCE means "no free threads" to CaptchaAI). */
  dialect: Dialect;
  /** The wire protocol. @default 'res-php' */
  protocol?: SolverProtocol;
  /** The operator's developer id (in.php `soft_id`, JSON `softId`, CapSolver's `appId`). @default none */
  softId?: string;
  /** Configured prices per method, USD: a solve's `costUsd` where the provider reports none. @default none */
  prices?: Partial<Record<SolverMethod, number>>;
  /** undici dispatcher (a Pool, an Agent, a MockAgent in tests). @default a keep-alive Agent owned by the client */
  dispatcher?: Dispatcher;
  /** @default Date.now */
  clock?: Clock;
  /** Waits between requests; tests pass one that moves a fake clock. @default timers/promises setTimeout */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** When to poll. @default createAdaptivePollSchedule() */
  schedule?: PollSchedule;
  /**
   * The least time between two result requests of one submission, ms, whatever the schedule
   * plans: the JSON task APIs refuse or ration faster polls (`SINGLE_POLL_GAP_MS`: CapMonster
   * answers ERROR_TOO_MUCH_REQUESTS under 2 s, CapSolver asks for 3 s, 2captcha 5 s); res.php
   * has none. A learned schedule planned polls 0.8 s apart. @default pollGapMs(protocol, dialect)
   */
  pollGapMs?: number;
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
  submit: NonNullable<SolverPort['submit']>;
  pollMany: NonNullable<SolverPort['pollMany']>;
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
    wire: (options.protocol ?? 'res-php') === 'create-task' ? createTaskWire : resPhpWire,
    answerWaits: new AnswerWaits(),
    softId: options.softId,
    prices: options.prices ?? {},
    dispatcher,
    clock: options.clock ?? Date.now,
    sleep: options.sleep ?? sleepFor,
    schedule: options.schedule ?? createAdaptivePollSchedule(),
    requestTimeoutMs: options.requestTimeoutMs ?? 15_000,
    pollGapMs: options.pollGapMs ?? pollGapMs(options.protocol ?? 'res-php', options.dialect),
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

/** Create the client. The key stays inside it. */
export function createSolverClient(options: SolverClientOptions): SolverClient {
  if (!options.key) throw new TypeError('solver key is empty');
  const ownsDispatcher = options.dispatcher === undefined;
  const dispatcher = options.dispatcher ?? new Agent({ keepAliveTimeout: 10_000 });
  const ctx = createSolverContext(options, dispatcher);

  return {
    schedule: ctx.schedule,

    async solve(task, options) {
      const { signal, resumeSolverId, continueSolverId, onSubmitted, onSolverAnswer } = options;
      const solve = solveState(task.id, signal, options, onSolverAnswer);
      if (resumeSolverId !== undefined) return pollForAnswer(ctx, task, solve, resumeSolverId, true);
      if (continueSolverId !== undefined) return pollForAnswer(ctx, task, solve, continueSolverId, false);
      const acceptedAt = ctx.clock();
      const { solverId, solved } = await submit(ctx, task, solve);
      ctx.log.debug('solver accepted the task', { taskId: task.id, solverId, method: task.method });
      // The caller's own errors (e.g. a lost claim) pass through as they are.
      await onSubmitted?.(solverId);
      // Answered in the submission's response (CapSolver's image tasks): nothing to poll.
      if (solved !== undefined)
        return outcomeOf(solved, solverId, { acceptedAt, answeredAt: ctx.clock(), resultRequests: 0 }, solve.retries);
      return pollForAnswer(ctx, task, solve, solverId, false);
    },

    async submit(task, options) {
      const { signal, onSolverAnswer } = options;
      const solve = solveState(task.id, signal, options, onSolverAnswer);
      const acceptedAt = ctx.clock();
      const { solverId, solved } = await submit(ctx, task, solve);
      ctx.log.debug('solver accepted the task', { taskId: task.id, solverId, method: task.method });
      if (solved === undefined) return { solverId, acceptedAt };
      const times = { acceptedAt, answeredAt: ctx.clock(), resultRequests: 0 };
      return { solverId, acceptedAt, outcome: outcomeOf(solved, solverId, times, solve.retries) };
    },

    pollMany: (targets, { signal } = {}) => pollMany(ctx, targets, signal),

    getBalance: ({ signal } = {}) => ctx.wire.balance(ctx, signal),
    reportBad: (solverId, context) => ctx.wire.report(ctx, 'bad', solverId, context?.method),
    reportGood: (solverId, context) => ctx.wire.report(ctx, 'good', solverId, context?.method),

    async close() {
      if (ownsDispatcher) await dispatcher.close();
    },
  };
}

/** One solve's state (its retries counted from zero); throws at once when `signal` is already aborted. */
function solveState(
  taskId: string,
  signal: SolveState['signal'],
  { deadlineAt, submitBy, answerBy }: Pick<SolveOptions, 'deadlineAt' | 'submitBy' | 'answerBy'>,
  onSolverAnswer: SolveState['onSolverAnswer'],
): SolveState {
  if (signal?.aborted) throw aborted(taskId);
  return {
    taskId,
    signal,
    deadlineAt,
    submitBy: Math.min(deadlineAt, submitBy ?? deadlineAt),
    answerBy: Math.max(deadlineAt, answerBy ?? deadlineAt),
    onSolverAnswer,
    retries: { overCap: 0, transient: 0 },
  };
}

function redactAttributes(attributes: Record<string, unknown>, key: string): Record<string, unknown> {
  return redactJson(attributes, (text) => redactKey(text, key));
}
