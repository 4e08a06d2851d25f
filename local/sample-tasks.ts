/**
 * Valid, distinct sample tasks of every method, seeded: the demo workload and the pipeline
 * benchmark draw from here (each with its own mix), so a sample of a method is written once.
 * Distinct parameters per task keep the simulator's duplicate-solve count meaningful.
 */
import type { TaskMessage } from '../functions/core/task.js';
import { pick, randomString, type Random } from './solver-sim/prng.js';

export type Method = TaskMessage['method'];
export type MethodMix = readonly { method: Method; weight: number }[];

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-';
const HEX = '0123456789abcdef';

/** A method drawn by weight. */
export function pickMethod(mix: MethodMix, random: Random): Method {
  const total = mix.reduce((sum, entry) => sum + entry.weight, 0);
  let draw = random() * total;
  for (const entry of mix) {
    draw -= entry.weight;
    if (draw < 0) return entry.method;
  }
  // Reached only when rounding leaves `draw` at 0 after the last weight: the first, as always.
  const [first] = mix;
  if (first === undefined) throw new RangeError('pickMethod needs a non-empty mix');
  return first.method;
}

/** The method and parameters of task number `n`; `pageurl(site)` gives its page, from one of `sites`. */
export function sampleTask(
  method: Method,
  n: number,
  random: Random,
  page: { sites: readonly string[]; url: (site: string) => string },
): Omit<TaskMessage, 'id'> {
  const pageurl = page.url(pick(random, page.sites));
  const hex = (length: number) => randomString(random, HEX, length);
  switch (method) {
    case 'userrecaptcha':
      return { method, params: { googlekey: `6Le${randomString(random, KEY_ALPHABET, 37)}`, pageurl } };
    case 'turnstile':
      return {
        method,
        params: { sitekey: `0x4AAAAAAA${randomString(random, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', 12)}`, pageurl },
      };
    case 'hcaptcha':
      return { method, params: { sitekey: `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`, pageurl } };
    case 'geetest':
      return { method, params: { gt: hex(32), challenge: hex(32), pageurl } };
    case 'geetest_v4':
      return { method, params: { captcha_id: hex(32), pageurl } };
    case 'amazon_waf':
      return {
        method,
        params: {
          sitekey: Buffer.from(hex(48)).toString('base64'),
          iv: Buffer.from(hex(12)).toString('base64'),
          context: Buffer.from(hex(96)).toString('base64'),
          pageurl,
        },
      };
    case 'datadome':
      return {
        method,
        params: {
          captcha_url: `https://geo.captcha-delivery.com/captcha/?initialCid=${hex(24)}&cid=${hex(32)}`,
          pageurl,
          proxy: `user${n}:secret@203.0.113.${(n % 250) + 1}:3128`,
          proxytype: 'HTTP',
          userAgent:
            'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36',
        },
      };
    case 'funcaptcha':
      return {
        method,
        params: { publickey: `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`.toUpperCase(), pageurl },
      };
    case 'base64':
      // A stand-in image: random bytes, base64-encoded (the simulator does not decode images, only sizes them).
      return {
        method,
        params: {
          body: Buffer.from(Array.from({ length: 300 }, () => Math.floor(random() * 256))).toString('base64'),
          numeric: 1,
        },
      };
    case 'textcaptcha':
      return { method, params: { textcaptcha: `What is ${n + 2} plus ${(n % 7) + 1}?` } };
  }
}

/** What a workload's tasks look like: the mix of methods, the sites and pages, the ids. */
export interface TaskShape {
  mix: MethodMix;
  sites: readonly string[];
  /** The page URL of task number `n` (from 0) on `site`. */
  url: (site: string, n: number) => string;
  /** The id of task number `n` (from 0). */
  id: (n: number) => string;
}

/**
 * `count` valid task messages drawn in order from `random`, the same for the same stream: the
 * one generator of the demo workload and the benchmarks' (each with its own shape and stream).
 * `fields` draws a task's own extra fields (a priority, …) before its method.
 */
export function sampleTaskMessages<F extends Partial<TaskMessage> = Record<never, never>>(
  random: Random,
  count: number,
  shape: TaskShape,
  fields?: (random: Random, n: number) => F,
): (TaskMessage & { id: string })[] {
  const messages: (TaskMessage & { id: string })[] = [];
  for (let n = 0; n < count; n++) {
    const id = shape.id(n);
    const extra = fields?.(random, n) ?? {};
    const page = { sites: shape.sites, url: (site: string) => shape.url(site, n) };
    messages.push({ id, ...extra, ...sampleTask(pickMethod(shape.mix, random), n, random, page) } as TaskMessage & {
      id: string;
    });
  }
  return messages;
}
