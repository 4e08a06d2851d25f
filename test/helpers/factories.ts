/**
 * Factories for consumer tests: valid task messages, a scripted in-memory solver that records
 * what it was asked, and captures of logs and EMF metrics.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import { vi } from 'vitest';
import { createMetrics, type EmfDocument } from '../../functions/adapters/metrics.js';
import type { SolveOptions, SolveOutcome, SolverPort } from '../../functions/core/ports.js';
import { type SolverError, SolverTimeoutError } from '../../functions/core/solver-protocol.js';
import type { Task, TaskMessage } from '../../functions/core/task.js';
import { MetricsStore } from '../../local/metrics-store.js';

/** A solver key shaped like the real ones (32 hex); tests assert it never leaks. */
export const TEST_SOLVER_KEY = '0123456789abcdef0123456789abcdef';

let ids = 0;
/** A unique, valid task id. */
export const taskId = (label = 'task') => `${label}-${process.pid}-${++ids}`;

/** A valid reCAPTCHA v2 task message (token kind). */
export function recaptchaTask(overrides: Partial<TaskMessage> & { id?: string } = {}): TaskMessage {
  return {
    id: taskId('rc'),
    method: 'userrecaptcha',
    params: { googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://example.com/login' },
    ...overrides,
  } as TaskMessage;
}

/** A valid image task message (base64). */
export function imageTask(overrides: Partial<TaskMessage> & { id?: string } = {}): TaskMessage {
  return {
    id: taskId('img'),
    method: 'base64',
    params: { body: 'iVBORw0KGgo'.padEnd(200, 'A') } /* 150 bytes: solvers refuse images under 100 */,
    ...overrides,
  } as TaskMessage;
}

/** What the scripted solver does on one `solve()` call. */
export interface SolverStep {
  /** The answer to return (default `answer-<taskId>`). */
  answer?: string;
  /** Throw this instead of answering. */
  error?: SolverError;
  /**
   * Where the error happens: `submit` (in.php refused: no captcha id) or `poll` (after the
   * submission was accepted). Default `poll` for answers and task errors, `submit` otherwise.
   */
  stage?: 'submit' | 'poll';
  /** Time the call takes, ms. */
  delayMs?: number;
  /** Never answer: wait for the deadline or the abort, then time out. */
  hang?: boolean;
  retries?: { overCap: number; transient: number };
  resultRequests?: number;
}

export interface SolverCall {
  taskId: string;
  resumeSolverId: string | undefined;
  deadlineAt: number;
  /** The last moment the caller allows a submission answered in its own response (SolveOptions.submitBy). */
  submitBy: number | undefined;
  /** Until when such a submission may wait for its answer (SolveOptions.answerBy). */
  answerBy: number | undefined;
  startedAt: number;
  /** The captcha id this call submitted, if it submitted. */
  submittedId: string | undefined;
}

/** An in-memory SolverPort that follows a per-task script and records every call. */
export class ScriptedSolver implements SolverPort {
  readonly calls: SolverCall[] = [];
  /** Solver ids handed out per task (one per accepted submission). */
  readonly submissions = new Map<string, string[]>();
  inFlight = 0;
  maxInFlight = 0;
  private readonly scripts = new Map<string, SolverStep[]>();
  /** The answer of each submission, as a provider keeps it: a resume of the id reads the same one. */
  private readonly answers = new Map<string, string>();
  private nextId = 1000;

  /** Queue steps for a task; each `solve()` takes the next one (then answers by default). */
  script(taskId: string, ...steps: SolverStep[]): this {
    this.scripts.set(taskId, [...(this.scripts.get(taskId) ?? []), ...steps]);
    return this;
  }

  submissionsOf(taskId: string): number {
    return this.submissions.get(taskId)?.length ?? 0;
  }

  callsOf(taskId: string): SolverCall[] {
    return this.calls.filter((call) => call.taskId === taskId);
  }

  async solve(task: Task, options: SolveOptions): Promise<SolveOutcome> {
    const step = this.scripts.get(task.id)?.shift() ?? {};
    const call: SolverCall = {
      taskId: task.id,
      resumeSolverId: options.resumeSolverId,
      deadlineAt: options.deadlineAt,
      submitBy: options.submitBy,
      answerBy: options.answerBy,
      startedAt: Date.now(),
      submittedId: undefined,
    };
    this.calls.push(call);
    this.inFlight += 1;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      const stage =
        step.stage ?? (step.error === undefined || step.error.errorClass === 'task_terminal' ? 'poll' : 'submit');
      if (step.error && stage === 'submit') {
        await wait(step.delayMs ?? 0, options.signal);
        throw step.error;
      }
      let solverId = options.resumeSolverId;
      const acceptedAt = Date.now();
      if (solverId === undefined) {
        solverId = String(this.nextId++);
        call.submittedId = solverId;
        this.submissions.set(task.id, [...(this.submissions.get(task.id) ?? []), solverId]);
        await options.onSubmitted?.(solverId);
      }
      if (step.hang) {
        await wait(Math.max(0, options.deadlineAt - Date.now()), options.signal);
        throw new SolverTimeoutError('TIMEOUT', {
          taskId: task.id,
          message: `no answer before the deadline for captcha ${solverId}`,
        });
      }
      await wait(step.delayMs ?? 0, options.signal);
      if (step.error) throw step.error;
      const answer = step.answer ?? this.answers.get(solverId) ?? `answer-${task.id}`;
      this.answers.set(solverId, answer);
      return {
        answer,
        solverId,
        acceptedAt,
        answeredAt: Date.now(),
        resultRequests: step.resultRequests ?? 1,
        retries: step.retries ?? { overCap: 0, transient: 0 },
      };
    } finally {
      this.inFlight -= 1;
    }
  }

  async getBalance(): Promise<number> {
    return 10;
  }
  async reportBad(): Promise<void> {}
  async reportGood(): Promise<void> {}
}

/**
 * At least `ms` by `Date.now()`, the clock the consumer measures with. A timer counts from the
 * event loop's cached time, which can be a millisecond behind the wall clock when it is set, so
 * one timer alone can end a millisecond early by `Date.now()`: the rest is waited again.
 */
async function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  const until = Date.now() + ms;
  // One timer always (a zero wait still yields to the event loop, as before), then the rest.
  await timer(ms, signal);
  for (let left = until - Date.now(); left > 0; left = until - Date.now()) await timer(left, signal);
}

function timer(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

/** EMF documents captured from a Powertools Metrics instance, and a store over them. */
export function captureMetrics(namespace: string) {
  const documents: EmfDocument[] = [];
  const store = new MetricsStore();
  const metrics = createMetrics({
    namespace,
    serviceName: 'consumer',
    sink: (document) => {
      documents.push(document);
      store.ingest(document);
    },
  });
  return { metrics, documents, store };
}

/**
 * A Powertools Logger whose output is captured: stdout and stderr, where Lambda's runtime (and
 * so CloudWatch Logs) takes it from; Powertools writes warnings and errors to stderr.
 * Call `restore()` after. `entries()` are the JSON log lines; `raw` is everything written.
 */
export function captureLogs() {
  const raw: string[] = [];
  const capture = ((chunk: string | Uint8Array) => {
    raw.push(typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
    return true;
  }) as typeof process.stdout.write;
  const spies = [
    vi.spyOn(process.stdout, 'write').mockImplementation(capture),
    vi.spyOn(process.stderr, 'write').mockImplementation(capture),
  ];
  const logger = new Logger({ serviceName: 'consumer', logLevel: 'DEBUG' });
  return {
    logger,
    raw,
    entries(): Array<Record<string, unknown>> {
      return raw
        .join('')
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    },
    restore() {
      for (const spy of spies) spy.mockRestore();
    },
  };
}
