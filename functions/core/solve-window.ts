/**
 * The parked fleet's metric window without CloudWatch: what the governor needs of the consumer's
 * metrics (solve times, solved, failed, the solver's error answers, submissions) counted where it
 * happens and summed by the minute on the governor table, read by the governor in a few strongly
 * consistent reads instead of ten GetMetricData metrics a minute.
 *
 * - The watch records nearly every parked solve inside the governor's own invocation: it adds its
 *   solves (count, sum and a log histogram of their times) in one write per batch.
 * - A consumer writes only when a delivery saw something the ledger does not count (an error
 *   answer, a solve or failure it read itself): an ordinary parked delivery writes nothing here.
 * - Accepted and refused submissions come from the thread ledger's own per-minute counters,
 *   carried in the update every submission already makes (functions/adapters/thread-ledger.ts).
 *
 * Each minute's counts live in one of four slot items (minute mod 4); the first writer of a minute
 * resets its slot. The window is the last two whole minutes whose counts are complete (the watch
 * writes its batches at most `WATCH_BATCH_MS` late): 120 s, as CloudWatch's was, with every count
 * of those minutes in it and none of a minute still being written.
 *
 * Pure: the minute arithmetic, the histogram and the window's assembly. The DynamoDB adapter is
 * functions/adapters/solve-window.ts.
 */
import type { MetricsWindow } from './governor/signals.js';
import { WATCH_BATCH_MS } from './thread-leases.js';

/** A minute's number: epoch ms ÷ 60 000, floored. */
export function minuteOf(now: number): number {
  return Math.floor(now / 60_000);
}

/** Slot items the minutes rotate through: the window reads three, the fourth is the next minute's. */
export const WINDOW_SLOTS = 4;

/** The slot item ids of a ledger's window (what the consumer's and the governor's IAM name). */
export function solveWindowSlotIds(ledgerId: string): string[] {
  return Array.from({ length: WINDOW_SLOTS }, (_, i) => `${ledgerId}#window#${i}`);
}

/**
 * A slot item's size at most, bytes, as DynamoDB counts it: its key, minute, seven counters, solve
 * count and sum, and a histogram whose solves spread over every bucket from 1 s to 10 min (75):
 * 525 B measured, one write unit. test/integration/solve-window.test.ts measures a full one against it.
 */
export const WINDOW_SLOT_ITEM_BYTES = 600;

/** Whole minutes the window covers. */
export const WINDOW_MINUTES = 2;

/** How long after a minute ends its counts are complete: the watch's batch and its write. */
export const WINDOW_SETTLE_MS = WATCH_BATCH_MS + 2_000;

/** The window's minutes at `now`: the last `WINDOW_MINUTES` whole minutes whose counts are complete. */
export function windowMinutes(now: number): { first: number; last: number } {
  const last = minuteOf(now - WINDOW_SETTLE_MS) - 1;
  return { first: last - WINDOW_MINUTES + 1, last };
}

/** What one writer adds to a minute. Every field optional; absent is 0. */
export interface WindowCounts {
  /** in.php submissions answered with an error (accepted and refused ones are the ledger's). */
  submitErrors?: number;
  /** res.php result requests made by a consumer. */
  resultRequests?: number;
  transientErrors?: number;
  taskErrors?: number;
  accountErrors?: number;
  solved?: number;
  failed?: number;
  /** Solve times of the solves counted, ms. */
  solveMs?: readonly number[];
}

/** What a consumer or the watch does with a minute's counts (functions/adapters/solve-window.ts). */
export interface SolveWindowWriter {
  /** Add `counts` to the minute of `at` (default now); nothing is written when all are 0. */
  add(counts: WindowCounts, at?: number): Promise<void>;
}

/** The counters a slot holds, by attribute name (the histogram's buckets are `b<k>`). */
export const WINDOW_COUNTERS = [
  'submitErrors',
  'resultRequests',
  'transientErrors',
  'taskErrors',
  'accountErrors',
  'solved',
  'failed',
] as const;

export type WindowCounter = (typeof WINDOW_COUNTERS)[number];

/** One minute as a slot holds it. */
export interface MinuteCounts {
  minute: number;
  counters: Record<WindowCounter, number>;
  solveCount: number;
  solveMsSum: number;
  /** Solves per histogram bucket. */
  buckets: Map<number, number>;
}

/**
 * The histogram: bucket k holds times in (FLOOR·2^((k−1)/8), FLOOR·2^(k/8)] ms, eight to a
 * doubling (each about 9 % wide), so a percentile read from it is within about 4.5 % of the
 * times' own; bucket 0 holds everything at or under FLOOR, the last everything above its floor.
 */
const FLOOR_MS = 250;
const PER_DOUBLING = 8;
/** 250 ms · 2^(120/8) ≈ 95 days: no solve is longer. */
export const LAST_BUCKET = 120;

export function bucketOf(ms: number): number {
  if (!(ms > FLOOR_MS)) return 0;
  return Math.min(LAST_BUCKET, Math.ceil(Math.log2(ms / FLOOR_MS) * PER_DOUBLING));
}

/** The time a bucket stands for: the geometric middle of its range (the floor for bucket 0). */
export function bucketMs(k: number): number {
  return k <= 0 ? FLOOR_MS : FLOOR_MS * 2 ** ((k - 0.5) / PER_DOUBLING);
}

/** The solve times of `counts` as histogram bucket counts. */
export function histogramOf(solveMs: readonly number[]): Map<number, number> {
  const buckets = new Map<number, number>();
  for (const ms of solveMs) {
    if (!Number.isFinite(ms) || ms < 0) continue;
    const k = bucketOf(ms);
    buckets.set(k, (buckets.get(k) ?? 0) + 1);
  }
  return buckets;
}

/** The `q` quantile (0–1) by nearest rank over histogram buckets; undefined when empty. */
export function histogramQuantile(buckets: ReadonlyMap<number, number>, q: number): number | undefined {
  const total = [...buckets.values()].reduce((a, b) => a + b, 0);
  if (!(total > 0)) return undefined;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (const k of [...buckets.keys()].sort((a, b) => a - b)) {
    seen += buckets.get(k) ?? 0;
    if (seen >= rank) return bucketMs(k);
  }
  return undefined;
}

/** Whether `counts` has anything to write (an ordinary parked delivery has not). */
export function hasCounts(counts: WindowCounts): boolean {
  return WINDOW_COUNTERS.some((name) => (counts[name] ?? 0) > 0) || (counts.solveMs?.length ?? 0) > 0;
}

/** What the ledger counted per minute: accepted and refused submissions. */
export interface LedgerMinutes {
  acceptances: ReadonlyMap<number, number>;
  refusals: ReadonlyMap<number, number>;
}

/**
 * The window at `now` from the slots read (those of other minutes are ignored) and the ledger's
 * minutes: the whole minutes `windowMinutes(now)` names.
 */
export function windowOf(now: number, slots: readonly MinuteCounts[], ledger: LedgerMinutes): MetricsWindow {
  const { first, last } = windowMinutes(now);
  const inWindow = (minute: number) => minute >= first && minute <= last;
  const counters = Object.fromEntries(WINDOW_COUNTERS.map((name) => [name, 0])) as Record<WindowCounter, number>;
  const buckets = new Map<number, number>();
  let solveCount = 0;
  let solveMsSum = 0;
  for (const slot of slots) {
    if (!inWindow(slot.minute)) continue;
    for (const name of WINDOW_COUNTERS) counters[name] += slot.counters[name];
    solveCount += slot.solveCount;
    solveMsSum += slot.solveMsSum;
    for (const [k, n] of slot.buckets) buckets.set(k, (buckets.get(k) ?? 0) + n);
  }
  const sumOf = (byMinute: ReadonlyMap<number, number>) =>
    [...byMinute].reduce((sum, [minute, n]) => sum + (inWindow(minute) ? n : 0), 0);
  const refusals = sumOf(ledger.refusals);
  return {
    windowMs: WINDOW_MINUTES * 60_000,
    submissions: sumOf(ledger.acceptances) + refusals + counters.submitErrors,
    resultRequests: counters.resultRequests,
    overCapAnswers: refusals,
    transientErrors: counters.transientErrors,
    taskErrors: counters.taskErrors,
    accountErrors: counters.accountErrors,
    solved: counters.solved,
    failed: counters.failed,
    meanSolveMs: solveCount > 0 ? solveMsSum / solveCount : undefined,
    p95SolveMs: histogramQuantile(buckets, 0.95),
  };
}
