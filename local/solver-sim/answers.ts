/**
 * Answers that look like the real ones: the same prefixes, alphabets and lengths clients see,
 * so code that checks a token's shape (or stores it in a size-limited column) meets the same
 * strings it will meet in production. Deterministic from the seed and the captcha id, so an
 * answer need not be stored: it is rebuilt whenever it is read.
 */
import type { SolverMethod } from '../../functions/core/solver-protocol.js';
import { deriveSeed, mulberry32, pick, randomString, type Random } from './prng.js';

const URL_SAFE = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-';
const HEX = '0123456789abcdef';
const LOWER_DIGITS = 'abcdefghjkmnpqrstuvwxyz23456789';
const DIGITS = '0123456789';

/** What res.php returns for a solved task: text, or an object for GeeTest (as the real API). */
export type SimAnswer = string | Readonly<Record<string, string>>;

/** Method names as the simulator stores them (`post` uploads are stored as `base64`). */
export type AnswerMethod = SolverMethod;

/** The browser the simulated workers solve in: returned as the user agent where providers return one. */
export const SIM_USER_AGENT =
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

/** Build the answer of captcha `id` for a method and its submitted parameters. */
export function answerFor(
  seed: number,
  id: number,
  method: AnswerMethod,
  params: Readonly<Record<string, string>>,
): SimAnswer {
  const random = mulberry32(deriveSeed(seed, `answer:${id}`));
  switch (method) {
    case 'userrecaptcha':
      // reCAPTCHA response tokens start with "03A" and run to several hundred characters.
      return `03AGdBq2${randomString(random, URL_SAFE, 492 + Math.floor(random() * 64))}`;
    case 'turnstile':
      return `0.${randomString(random, URL_SAFE, 32)}.${randomString(random, HEX, 64)}.${randomString(random, URL_SAFE, 180 + Math.floor(random() * 40))}`;
    case 'hcaptcha':
      return `P1_eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.${randomString(random, URL_SAFE, 700 + Math.floor(random() * 200))}.${randomString(random, URL_SAFE, 43)}`;
    case 'geetest': {
      const validate = randomString(random, HEX, 32);
      return {
        geetest_challenge: `${params.challenge ?? randomString(random, HEX, 32)}${randomString(random, 'abcdefghijklmnopqrstuvwxyz', 2)}`,
        geetest_validate: validate,
        geetest_seccode: `${validate}|jordan`,
      };
    }
    case 'geetest_v4':
      // 2captcha's res.php answers GeeTest v4 with the five values the page's form posts.
      return {
        captcha_id: params.captcha_id ?? randomString(random, HEX, 32),
        lot_number: randomString(random, HEX, 32),
        pass_token: randomString(random, HEX, 64),
        gen_time: String(1_700_000_000 + Math.floor(random() * 100_000_000)),
        captcha_output: randomString(random, URL_SAFE, 160),
      };
    case 'amazon_waf':
      return {
        captcha_voucher: `eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.${randomString(random, URL_SAFE, 300)}.${randomString(random, URL_SAFE, 43)}`,
        existing_token: `${randomString(random, HEX, 8)}-${randomString(random, HEX, 4)}-${randomString(random, HEX, 4)}-${randomString(random, HEX, 4)}-${randomString(random, HEX, 12)}:${randomString(random, URL_SAFE, 60)}`,
      };
    case 'datadome':
      return `datadome=${randomString(random, URL_SAFE, 120)}; Max-Age=31536000; Domain=.${hostOf(params.pageurl)}; Path=/; Secure; SameSite=Lax`;
    case 'funcaptcha':
      return funcaptchaToken(random, params.publickey ?? '');
    case 'base64':
      return imageText(random, params);
    case 'textcaptcha':
      return pick(random, ['4', '7', 'blue', 'paris', 'monday', 'twelve', 'cat', 'yes']);
  }
}

function hostOf(pageurl: string | undefined): string {
  return pageurl !== undefined && URL.canParse(pageurl) ? new URL(pageurl).hostname : 'example.com';
}

function funcaptchaToken(random: Random, publicKey: string): string {
  const session = `${randomString(random, HEX, 17)}.${randomString(random, DIGITS, 10)}`;
  return [
    session,
    'r=us-east-1',
    'meta=3',
    'metabgclr=transparent',
    'guitextcolor=%23000000',
    `pk=${publicKey}`,
    `at=40`,
    `sup=1`,
    `rid=${Math.floor(random() * 90) + 10}`,
    'ag=101',
    'cdn_url=https%3A%2F%2Fclient-api.arkoselabs.com%2Fcdn%2Ffc',
    'lurl=https%3A%2F%2Faudio-us-east-1.arkoselabs.com',
    'surl=https%3A%2F%2Fclient-api.arkoselabs.com',
    'smurl=https%3A%2F%2Fclient-api.arkoselabs.com%2Fcdn%2Ffc%2Fassets%2Fstyle-manager',
  ].join('|');
}

/** Image answers honour the protocol's shape hints (numeric, min_len, max_len). */
function imageText(random: Random, params: Readonly<Record<string, string>>): string {
  const numeric = Number(params.numeric ?? 0);
  const alphabet = numeric === 1 ? DIGITS : numeric === 2 ? 'abcdefghijklmnopqrstuvwxyz' : LOWER_DIGITS;
  const minLen = clampLength(params.min_len, 4);
  const maxLen = Math.max(minLen, clampLength(params.max_len, 6));
  const length = minLen + Math.floor(random() * (maxLen - minLen + 1));
  return randomString(random, alphabet, length);
}

function clampLength(value: string | undefined, fallback: number): number {
  const n = Number(value);
  return Number.isInteger(n) && n >= 1 && n <= 20 ? n : fallback;
}
