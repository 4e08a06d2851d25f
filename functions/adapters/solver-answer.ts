/**
 * What the client keeps of a solved answer beside its text: the extra fields a provider returns
 * (user agent, cookies, hCaptcha's respKey), bounded and with the key removed like the answer
 * itself (DESIGN.md invariant 10), and what the solve cost.
 */
import { EXTRA_ANSWER_FIELDS } from '../core/task-types.js';
import type { SolverMethod } from '../core/solver-protocol.js';
import type { SolvedAnswer, SolverContext } from './solver-context.js';
import { withoutKey } from './solver-http.js';

/** Longest extra value kept, characters: a user agent is ~150, a cookie jar a few KB. */
export const MAX_EXTRA_CHARS = 8 * 1024;

/** The most a provider-reported cost may be and still be believed, USD (no CAPTCHA costs $10). */
const MAX_COST_USD = 10;

/**
 * Extras by their JSON API names: only the allow-listed names, only text, none longer than
 * MAX_EXTRA_CHARS (dropped whole, never cut: half a cookie is a wrong cookie), the key replaced.
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
    kept[name] = withoutKey(ctx, value, name, taskId);
  }
  return kept;
}

/** A provider's `cost` (a number or decimal text), when it is a believable price. */
export function reportedCost(value: unknown): number | undefined {
  const cost =
    typeof value === 'number' ? value : typeof value === 'string' && value.trim() !== '' ? Number(value) : NaN;
  return Number.isFinite(cost) && cost >= 0 && cost <= MAX_COST_USD ? cost : undefined;
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
