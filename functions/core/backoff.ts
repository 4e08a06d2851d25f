/**
 * The consumer's two backoffs, in one place so the consumer, the solver client and the policy
 * lab run the same formulas: the solver client's wait before it retries an over-cap or transient
 * answer inside an invocation, and the visibility a handed-back message gets before SQS delivers
 * it again. Pure: the random source is an argument.
 */

/** How the solver client retries over-cap and transient answers within one invocation. */
export interface SolverRetryPolicy {
  /** Over-cap answers to in.php retried before the client gives up on them. */
  maxOverCapRetries: number;
  /** Transient failures retried: per submission, and in a row while polling. */
  maxTransientRetries: number;
  /** Backoff before the first retry, ms; doubles per retry. */
  baseBackoffMs: number;
  /** Largest backoff, ms. */
  maxBackoffMs: number;
}

/** The solver client's defaults: 3 retries of each kind, 1 s doubling to 15 s. */
export const SOLVER_RETRY_DEFAULTS: Readonly<SolverRetryPolicy> = {
  maxOverCapRetries: 3,
  maxTransientRetries: 3,
  baseBackoffMs: 1_000,
  maxBackoffMs: 15_000,
};

/** A message's visibility backoff: `baseSeconds` doubling per receive, capped at `maxSeconds`. */
export interface HandBackBackoff {
  baseSeconds: number;
  maxSeconds: number;
}

/** After a failed try (over cap, transient, deadline, unexpected error): 5 s doubling to 5 min. */
export const HAND_BACK_BACKOFF: Readonly<HandBackBackoff> = { baseSeconds: 5, maxSeconds: 300 };

/** After an account error (no money, key refused): 60 s doubling to 15 min. */
export const ACCOUNT_HAND_BACK_BACKOFF: Readonly<HandBackBackoff> = { baseSeconds: 60, maxSeconds: 900 };

/**
 * When a task handed back goes as a fresh copy of its message instead (its receive count starts
 * again): the consumer's defaults (functions/consumer/context.ts `RequeuePolicy`), which the lab
 * models too.
 */
export const REQUEUE_DEFAULTS = {
  beforeReceives: 3,
  refreshBeforeReceives: 1,
  maxGenerations: 3,
  maxWaitCopies: 50,
} as const;

/** SQS's longest visibility timeout, seconds (12 h). */
export const SQS_MAX_VISIBILITY_SECONDS = 43_200;

/**
 * The solver client's wait before retry number `attempt` (0-based), ms, unrounded:
 * min(max, base × 2^attempt) × [0.5, 1) ("equal jitter").
 */
export function retryBackoffMs(attempt: number, retry: SolverRetryPolicy, random: () => number): number {
  return Math.min(retry.maxBackoffMs, retry.baseBackoffMs * 2 ** attempt) * (0.5 + 0.5 * random());
}

/**
 * Visibility before the next try of a handed-back message, seconds: doubles with each receive,
 * capped, with equal jitter so tasks refused together do not come back together:
 * ceil(c/2 + random × c/2), c = min(max, base × 2^(receives − 1)), at most SQS's 12 h.
 */
export function handBackSeconds(receiveCount: number, backoff: HandBackBackoff, random: () => number): number {
  const ceiling = Math.min(backoff.maxSeconds, backoff.baseSeconds * 2 ** Math.max(0, receiveCount - 1));
  return Math.min(SQS_MAX_VISIBILITY_SECONDS, Math.ceil(ceiling / 2 + (random() * ceiling) / 2));
}
