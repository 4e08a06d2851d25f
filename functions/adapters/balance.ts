/**
 * The solver balance, read through the solver client at most once per TTL (a minute in AWS).
 * A failed read is `undefined` (unknown, never zero) and is cached too, so a failing solver
 * is not asked again every tick.
 */
import type { Clock, SolverPort } from '../core/ports.js';

export const DEFAULT_BALANCE_TTL_MS = 60_000;

export interface CachedBalance {
  /** The balance in USD, or undefined when the last read failed. */
  read(): Promise<number | undefined>;
  /** Forget the cached value (the next read asks the solver). */
  invalidate(): void;
}

export interface CachedBalanceOptions {
  ttlMs?: number;
  clock?: Clock;
  /** Receives failures; the error of a solver client never carries the key. */
  onError?: (error: unknown) => void;
  /** Abort a read that takes longer than this, ms. @default 5000 */
  timeoutMs?: number;
}

/** Wrap `solver.getBalance` with a cache. */
export function createCachedBalance(
  solver: Pick<SolverPort, 'getBalance'>,
  options: CachedBalanceOptions = {},
): CachedBalance {
  const ttlMs = options.ttlMs ?? DEFAULT_BALANCE_TTL_MS;
  const clock = options.clock ?? Date.now;
  let cached: { value: number | undefined; at: number } | undefined;
  let pending: Promise<number | undefined> | undefined;
  return {
    invalidate() {
      cached = undefined;
    },
    async read() {
      if (cached !== undefined && clock() - cached.at < ttlMs) return cached.value;
      pending ??= (async () => {
        let value: number | undefined;
        try {
          const balance = await solver.getBalance({ signal: AbortSignal.timeout(options.timeoutMs ?? 5000) });
          value = Number.isFinite(balance) ? balance : undefined;
        } catch (error) {
          options.onError?.(error);
          value = undefined;
        }
        cached = { value, at: clock() };
        pending = undefined;
        return value;
      })();
      return pending;
    },
  };
}
