/**
 * The price per solve, learned from the balance: the drops between balance reads ÷ the solves
 * the thread ledger counted over the same reads, summed over the last `PRICE_WINDOW_READS`
 * intervals. The provider charges a solve when its worker answers and the consumer counts it when
 * it reads the answer, so one interval's drop and count need not cover the same solves; summed
 * over the window the lag moves the ratio by at most the lagged solves' share. Pure.
 */

/** Whether `price` is a price per solve the money side can count by (known and above 0). */
export function isPrice(price: number | undefined): price is number {
  return price !== undefined && price > 0;
}

/** Intervals between balance reads the learned price sums over. */
export const PRICE_WINDOW_READS = 10;

/** One interval between two balance reads: what the balance dropped by, and the solves counted in it. */
export interface PriceSample {
  usd: number;
  solves: number;
}

/**
 * The window with `sample` added (the oldest dropped past `PRICE_WINDOW_READS`), and the price it
 * gives: its drops ÷ its solves, or `learned` as it was while either sum is 0.
 */
export function withPriceSample(
  window: readonly PriceSample[] | undefined,
  sample: PriceSample,
  learned: number | undefined,
): { window: PriceSample[]; learned: number | undefined } {
  const next = [...(window ?? []), sample].slice(-PRICE_WINDOW_READS);
  let usd = 0;
  let solves = 0;
  for (const entry of next) {
    usd += entry.usd;
    solves += entry.solves;
  }
  return { window: next, learned: solves > 0 && usd > 0 ? usd / solves : learned };
}
