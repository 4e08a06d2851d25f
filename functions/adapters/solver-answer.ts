/**
 * What the client keeps of a solved answer beside its text: the extra fields a provider returns
 * (user agent, cookies, hCaptcha's respKey), bounded and with the key removed like the answer
 * itself (DESIGN.md invariant 10), and what the solve cost.
 */
import { isControlOrFormat } from '../core/helpers/printable.js';
import { EXTRA_ANSWER_FIELDS } from '../core/task-types.js';
import { type SolverMethod, SolverTaskError } from '../core/solver-protocol.js';
import type { SolvedAnswer, SolverContext } from './solver-context.js';
import { withoutKey } from './solver-http.js';

/** Longest extra value kept, characters: a user agent is ~150, a cookie jar a few KB. */
export const MAX_EXTRA_CHARS = 8 * 1024;

/** The most a provider-reported cost may be and still be believed, USD (no CAPTCHA costs $10). */
const MAX_COST_USD = 10;

/**
 * Extras by their JSON API names: only the allow-listed names, only text, none longer than
 * MAX_EXTRA_CHARS or holding what no extra holds (`usableText`; dropped whole, never cut or
 * cleaned: half a cookie is a wrong cookie), the key replaced.
 */
export function boundedExtras(
  ctx: SolverContext,
  raw: Readonly<Record<string, string>>,
  taskId: string | undefined,
): Record<string, string> {
  const kept: Record<string, string> = {};
  for (const name of EXTRA_ANSWER_FIELDS) {
    const value = raw[name];
    if (value === undefined || value === '') continue;
    if (value.length > MAX_EXTRA_CHARS) {
      ctx.log.warn('solver answer field over its bound; dropped', { taskId, field: name, length: value.length });
      continue;
    }
    if (!usableText(value)) {
      ctx.log.warn('solver answer field holds control characters; dropped', { taskId, field: name });
      continue;
    }
    kept[name] = withoutKey(ctx, value, name, taskId);
  }
  return kept;
}

/**
 * Whether `text` can be an answer or an extra: no control characters (C0, DEL, C1), no line or
 * paragraph separators, no replacement character (bytes that were not UTF-8) and no lone
 * surrogates. No token, text answer, cookie or user agent holds one; a CR LF in a cookie or a
 * user agent would inject headers in a producer that sends it on, and a terminal escape would
 * rewrite the screen of whoever prints it.
 */
export function usableText(text: string): boolean {
  for (let i = 0; i < text.length; i += 1) {
    const c = text.charCodeAt(i);
    if (isControlOrFormat(c) || c === 0xfffd) return false;
    if (c >= 0xdc00 && c <= 0xdfff) return false;
    if (c >= 0xd800 && c <= 0xdbff) {
      const low = text.charCodeAt(i + 1);
      if (!(low >= 0xdc00 && low <= 0xdfff)) return false;
      i += 1;
    }
  }
  return true;
}

/**
 * Whether an answer holds only what an answer can (`usableText`), a composite one (GeeTest's, an
 * Amazon voucher's: a JSON object of texts, built by the client) member by member: escaped in its
 * JSON, a member's CR LF or terminal escape passed the whole text's check and came back whole
 * when a producer parsed the answer.
 */
export function usableAnswer(answer: string): boolean {
  if (!usableText(answer)) return false;
  if (!answer.startsWith('{')) return true;
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer);
  } catch {
    return true;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return true;
  return Object.values(parsed).every((member) => typeof member === 'string' && usableText(member));
}

/** The task error of a ready answer whose text cannot be one (`usableText`): polling again repeats it. */
export function unusableAnswer(taskId: string, where: string): SolverTaskError {
  return new SolverTaskError('UNREADABLE_SOLUTION', {
    taskId,
    message: `${where} answered task ${taskId} with text no answer holds (control characters or bytes that are not UTF-8)`,
  });
}

/** A provider's `cost` (a number or decimal text), when it is a believable price. */
export function reportedCost(value: unknown): number | undefined {
  // Decimal text only, as balances: `Number()` read "0x1" as $1 and "0xA" as $10.
  const cost =
    typeof value === 'number' ? value : typeof value === 'string' && DECIMAL.test(value) ? Number(value) : NaN;
  return Number.isFinite(cost) && cost >= 0 && cost <= MAX_COST_USD ? cost : undefined;
}

/** Decimal text as providers write prices and balances: no hex, exponent, padding or sign but minus. */
const DECIMAL = /^-?\d{1,12}(\.\d{1,12})?$/;

/** The most a balance may be and still be believed, USD (the governor derives spend and price from successive reads). */
const MAX_BALANCE_USD = 10_000_000;

/**
 * A provider's balance (a JSON number, or decimal text as res.php writes it), when it is one a
 * plan can have: from −MAX to MAX_BALANCE_USD. Hex (`0x1F`), exponents in text, padding and
 * 1e308 are no balance: one such read skewed the governor's spend and price estimates.
 */
export function believableBalance(value: unknown): number | undefined {
  const balance =
    typeof value === 'number' ? value : typeof value === 'string' && DECIMAL.test(value) ? Number(value) : NaN;
  return Number.isFinite(balance) && Math.abs(balance) <= MAX_BALANCE_USD ? balance : undefined;
}

/** The answer with its cost: the provider's when it reported one, else the configured price of the method, else none. */
export function withCost(
  ctx: SolverContext,
  method: SolverMethod,
  answer: Omit<SolvedAnswer, 'costUsd' | 'costSource'>,
  providerCost: number | undefined,
): SolvedAnswer {
  if (providerCost !== undefined) return { ...answer, costUsd: providerCost, costSource: 'provider' };
  const configured = ctx.prices[method];
  return configured === undefined ? answer : { ...answer, costUsd: configured, costSource: 'configured' };
}
