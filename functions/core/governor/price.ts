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

/**
 * …and its upper bound (priceBound): longer, as a longer span's bound is tighter (its first read's
 * held solves over a larger count). Measured on the lab's `balance-halt`: idle thread-seconds a task
 * while tasks waited, 0.42 at 10 intervals, 0.41 at 30, 0.23 at the plain ratio (the last solve
 * before the pause level starts a tick or two later).
 */
export const PRICE_BOUND_READS = 30;

/**
 * One interval between two balance reads: what the balance dropped by, the solves counted in it,
 * and the solves the ledger held in flight at its first read (the most of them that could have
 * been charged before the interval and counted in it).
 */
export interface PriceSample {
  usd: number;
  solves: number;
  heldBefore?: number;
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
  bound?: number,
): { window: PriceSample[]; learned: number | undefined; bound: number | undefined } {
  const next = [...(window ?? []), sample].slice(-PRICE_BOUND_READS);
  const recent = next.slice(-PRICE_WINDOW_READS);
  let usd = 0;
  let solves = 0;
  for (const entry of recent) {
    usd += entry.usd;
    solves += entry.solves;
  }
  const nextBound = priceBound(next) ?? bound;
  if (solves > 0 && usd > 0) return { window: next, learned: usd / solves, bound: nextBound };
  // Only before any price: a priced account's quiet window (a balance shown in cents) keeps its price.
  const free = learned === undefined && usd === 0 && solves >= FREE_AFTER_SOLVES && recent.length >= FREE_AFTER_READS;
  return { window: next, learned: free ? 0 : learned, bound: nextBound };
}

/**
 * The most a solve can cost by the window, USD, or undefined when no span of it bounds the price.
 * The provider charges a solve when its worker answers and the ledger counts it when the fleet
 * records the answer, so a span's count holds the solves charged in it plus those charged before
 * it and counted in it, less those charged in it and counted after: it reads the price low once
 * the second outnumber the third (a fleet winding down at its pause level: the counts of a busier
 * past arrive among fewer charges). Those charged before a span and counted in it were all held at
 * its first read, so the solves charged in a span are at least its count less `heldBefore`: each
 * span ending at the newest read whose count exceeds its first read's held solves gives an upper
 * bound (drops ÷ that), and the bound is the least of them. Found by a property over whole runs
 * with each answer counted 0.5–10 s after its charge: at the plain ratio, 361 of 3 000 runs
 * started 1–4 solves past the pause level.
 */
export function priceBound(window: readonly PriceSample[]): number | undefined {
  let usd = 0;
  let solves = 0;
  let least: number | undefined;
  for (let j = window.length - 1; j >= 0; j--) {
    const entry = window[j] as PriceSample;
    usd += entry.usd;
    solves += entry.solves;
    if (entry.heldBefore === undefined) break;
    const charged = solves - entry.heldBefore;
    if (charged > 0 && usd > 0) least = Math.min(least ?? Number.POSITIVE_INFINITY, usd / charged);
  }
  return least;
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

/** The price counted when none was learned or told (countingPrice). */
const ASSUMED = { usd: UNKNOWN_PRICE_USD, source: 'assumed' as const };

/**
 * The price the money side counts a solve at, and where it comes from: the one learned from the
 * balance, or its upper bound (`priceBoundUsd`, priceBound) where that is higher; until the window gives
 * a bound, the more of the learned one and the unlearned one (below). Else the one the account
 * was told (`hint`: the dearest of `solverPricesUsd`, an overflow provider's list price); else
 * UNKNOWN_PRICE_USD. A 0 learned or told (an account not charged per solve) is a price too:
 * nothing to count.
 */
export function countingPrice(
  spend: { learnedPriceUsd?: number | undefined; priceBoundUsd?: number | undefined },
  hint: number | undefined,
): { usd: number; source: 'learned' | 'told' | 'assumed' } {
  const { learnedPriceUsd: learned, priceBoundUsd: bound } = spend;
  const unlearned = hint !== undefined && hint >= 0 ? { usd: hint, source: 'told' as const } : ASSUMED;
  if (learned === undefined || learned < 0) return unlearned;
  if (learned === 0) return { usd: 0, source: 'learned' };
  // Without a bound (no span counted more than it held at its start) the ratio may read any amount
  // low: a fresh `npm start` fleet's first read after its first second learned $0.0021 for a $0.003
  // solve (answers charged before the earlier read, counted after it) and ended 6 solves past the
  // pause level on it.
  return { usd: Math.max(learned, bound ?? unlearned.usd), source: 'learned' };
}
