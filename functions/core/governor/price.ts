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
 * Solves counted over the window, with no drop beside them, that show an account not charged per
 * solve (a thread plan whose balance stands still): the price learned is then 0. More than one
 * interval must show them (`FREE_AFTER_READS`), so a balance read that lags the answers by an
 * interval is not taken for a free account.
 */
export const FREE_AFTER_SOLVES = 3;
export const FREE_AFTER_READS = 2;

/**
 * The window with `sample` added (the oldest dropped past `PRICE_WINDOW_READS`), and the price it
 * gives: its drops ÷ its solves; 0 when no price was learned before and `FREE_AFTER_SOLVES` solves
 * over `FREE_AFTER_READS` intervals or more dropped nothing; else `learned` as it was.
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
  if (solves > 0 && usd > 0) return { window: next, learned: usd / solves };
  // Only before any price: a priced account's quiet window (a balance shown in cents) keeps its price.
  const free = learned === undefined && usd === 0 && solves >= FREE_AFTER_SOLVES && next.length >= FREE_AFTER_READS;
  return { window: next, learned: free ? 0 : learned };
}

/**
 * The price per solve an account is counted at before its balance shows one, USD: $10 per 1 000,
 * above the list prices of the methods the protocol table carries at 2captcha, Anti-Captcha and
 * CapSolver ($0.5–3 per 1 000 for images, reCAPTCHA, Turnstile, GeeTest, DataDome, Amazon WAF;
 * FunCaptcha from $1.45, its dearest tiers excepted), so the spend grant it gives stops at or
 * before the pause level until the real price is learned (a balance read or two after the first
 * solves); then the grant counts by that. Too high costs a fleet near its pause level a pause of
 * a tick or two at its start; `solverPricesUsd` replaces it.
 */
export const UNKNOWN_PRICE_USD = 0.01;

/**
 * The price the money side counts a solve at, and where it comes from: the one learned from the
 * balance; else the one the account was told (`hint`: the dearest of `solverPricesUsd`, an
 * overflow provider's list price); else UNKNOWN_PRICE_USD. A 0 learned or told (an account not
 * charged per solve) is a price too: nothing to count.
 */
export function countingPrice(
  learned: number | undefined,
  hint: number | undefined,
): { usd: number; source: 'learned' | 'told' | 'assumed' } {
  if (learned !== undefined && learned >= 0) return { usd: learned, source: 'learned' };
  if (hint !== undefined && hint >= 0) return { usd: hint, source: 'told' };
  return { usd: UNKNOWN_PRICE_USD, source: 'assumed' };
}
