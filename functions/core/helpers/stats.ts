/**
 * Statistics shared by the governor's readers, the local runtime, the lab and the benchmarks,
 * so that a "p95" means the same figure wherever it is printed.
 */

/**
 * The `q` quantile (0–1) of `values` by nearest rank: the smallest value with at least
 * `q × n` values at or below it. Undefined when there are none. Does not modify `values`.
 */
export function percentile(values: readonly number[], q: number): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  return percentileOfSorted(sorted, q);
}

/** {@link percentile} of values already sorted ascending (no copy, no sort: for hot loops). */
export function percentileOfSorted(sorted: ArrayLike<number>, q: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** Arithmetic mean; undefined when there are no values. */
export function mean(values: readonly number[]): number | undefined {
  return values.length === 0 ? undefined : values.reduce((sum, v) => sum + v, 0) / values.length;
}
