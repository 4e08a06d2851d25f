/**
 * The governor's balance read, with why it failed. The balance is also the governor's own probe
 * of the solver: a read that gets no answer (timeout, connection refused, HTTP 5xx) is outage
 * evidence even when the fleet is idle and the consumer's metrics show no requests; a read the
 * solver refuses (key, IP) is not, and its code names the cause of an account pause.
 */
import { createCachedBalance, type CachedBalanceOptions } from '../adapters/balance.js';
import type { BalanceReader } from '../core/governor/ports.js';
import type { BalanceError } from '../core/governor/types.js';
import type { SolverPort } from '../core/ports.js';
import { SolverAccountError, SolverError, SolverTimeoutError, SolverTransientError } from '../core/solver-protocol.js';
import { tickBalanceTtlMs } from '../core/governor/signals.js';

/** How long a balance read serves the governor loop: half a tick (core/governor/signals.ts, where the policy counts refused reads by it too). */
export { tickBalanceTtlMs };

/** Classify a failed balance read by the solver's error class; an abort or timeout outside the client is `unreachable`. */
export function classifyBalanceError(error: unknown): BalanceError {
  if (error instanceof SolverAccountError) return { kind: 'account', code: error.code };
  if (error instanceof SolverTransientError || error instanceof SolverTimeoutError)
    return { kind: 'unreachable', code: error.code };
  if (error instanceof SolverError) return { kind: 'other', code: error.code };
  const name = error instanceof Error ? error.name : 'UNKNOWN';
  return { kind: name === 'TimeoutError' || name === 'AbortError' ? 'unreachable' : 'other', code: name };
}

/** The governor's balance reader, with why its last read failed and a read past its cache. */
export interface ProbingBalance extends BalanceReader {
  lastError(): BalanceError | undefined;
  /**
   * Ask the solver now, past the cache (the read between ticks while paused for the solver's
   * outage, outage-recheck.ts). When it answers, the cached failure is dropped, so the tick it
   * wakes asks the solver again instead of reading the failure the cache keeps for its TTL (half a
   * tick: a woken tick within it stayed paused).
   */
  readFresh(signal: AbortSignal): Promise<number>;
}

/**
 * The cached balance (functions/adapters/balance.ts) that also remembers why the last read
 * failed. The cache keeps a failure for its TTL, and so does `lastError`: they change together.
 */
export function createProbingBalance(
  solver: Pick<SolverPort, 'getBalance'>,
  options: CachedBalanceOptions = {},
): ProbingBalance {
  let lastError: BalanceError | undefined;
  const classifying: Pick<SolverPort, 'getBalance'> = {
    async getBalance(readOptions) {
      try {
        const balance = await solver.getBalance(readOptions);
        lastError = undefined;
        return balance;
      } catch (error) {
        lastError = classifyBalanceError(error);
        throw error;
      }
    },
  };
  const cached = createCachedBalance(classifying, options);
  return {
    read: () => cached.read(),
    lastError: () => lastError,
    async readFresh(signal) {
      const balance = await classifying.getBalance({ signal });
      cached.invalidate();
      return balance;
    },
  };
}

/**
 * The overflow provider's balance for the governor loop: probed like the primary's, read afresh
 * every tick (`tickBalanceTtlMs`). An unreadable balance closes the lane (its spend cannot be budgeted).
 */
export function createOverflowBalance(
  solver: Pick<SolverPort, 'getBalance'>,
  options: { tickMs: number; clock?: () => number; warn?: (message: string, fields?: Record<string, unknown>) => void },
): BalanceReader & { lastError(): BalanceError | undefined } {
  return createProbingBalance(solver, {
    ttlMs: tickBalanceTtlMs(options.tickMs),
    ...(options.clock ? { clock: options.clock } : {}),
    onError: (error) =>
      options.warn?.('overflow balance read failed; the overflow lane stays closed while it is unknown', {
        error: (error as Error).message,
      }),
  });
}
