/**
 * Which in.php parameters a task may carry, per method, and how a refused name is explained.
 * Pure: no I/O.
 *
 * The names are the protocol's own, as 2captcha documents them per method in its API reference
 * and its official clients (2captcha-python `TwoCaptcha.recaptcha/hcaptcha/turnstile/geetest_v4/
 * amazon_waf/datadome/…`, `@2captcha/captcha-solver`'s `params*` types); CaptchaAI speaks the
 * same names. The JSON task API's names (websiteURL, websiteKey, …) are mapped from these in
 * one place (task-types.ts); producers use these. Only these
 * reach the solver: the consumer forwards a task's params after the fleet's own, so a name the
 * fleet sets (`key`, `soft_id`, `pingback`, …) in any spelling a PHP backend would read as that
 * name must never pass.
 */

/**
 * Names the fleet itself sends (in.php: `key`, `json`, `method`, `soft_id`, `pingback`,
 * `header_acao`; res.php: `action`, `id`; the JSON task API: `clientKey`, `softId` (read as
 * `soft_id`), CapSolver's `appId`, `callbackUrl`, `taskId`). `action` is also a documented in.php
 * parameter of reCAPTCHA and Turnstile (the page's action); there it is allowed by its exact
 * name only, and it never reaches res.php, which the task does not feed.
 */
export const FLEET_OWNED_PARAMS = [
  'key',
  'json',
  'method',
  'soft_id',
  'pingback',
  'header_acao',
  'id',
  'clientKey',
  'appId',
  'callbackUrl',
  'taskId',
] as const;

/** Proxy and browser parameters 2captcha documents for the token methods. */
const BROWSER = ['proxy', 'proxytype', 'userAgent'] as const;

/**
 * Parameters per method beyond those the task schema types one by one: every name here must
 * have a schema entry (task.ts checks it at load), and nothing else is accepted.
 */
export const METHOD_PARAMS = {
  userrecaptcha: [
    'googlekey',
    'pageurl',
    'version',
    'action',
    'min_score',
    'invisible',
    'enterprise',
    'data-s',
    'domain',
    'cookies',
    ...BROWSER,
  ],
  turnstile: ['sitekey', 'pageurl', 'action', 'data', 'pagedata', ...BROWSER],
  hcaptcha: ['sitekey', 'pageurl', 'invisible', 'data', 'domain', ...BROWSER],
  geetest: ['gt', 'challenge', 'pageurl', 'api_server', 'offline', 'new_captcha', ...BROWSER],
  geetest_v4: ['captcha_id', 'pageurl', 'risk_type', 'api_server', ...BROWSER],
  funcaptcha: ['publickey', 'pageurl', 'surl', 'data[blob]', ...BROWSER],
  amazon_waf: ['sitekey', 'iv', 'context', 'pageurl', 'challenge_script', 'captcha_script', ...BROWSER],
  datadome: ['captcha_url', 'pageurl', ...BROWSER],
  base64: [
    'body',
    'phrase',
    'regsense',
    'numeric',
    'calc',
    'min_len',
    'max_len',
    'language',
    'lang',
    'textinstructions',
  ],
  textcaptcha: ['textcaptcha', 'language', 'lang'],
} as const satisfies Record<string, readonly string[]>;

/** Names producers coming from other APIs reach for, mapped to the protocol's name. */
const ALIASES: Readonly<Record<string, readonly string[]>> = {
  sitekey: ['googlekey'],
  googlekey: ['sitekey'],
  websitekey: ['googlekey', 'sitekey', 'publickey'],
  websitepublickey: ['publickey'],
  captchaurl: ['captcha_url'],
  gt: ['captcha_id'],
  url: ['pageurl'],
  websiteurl: ['pageurl'],
  score: ['min_score'],
  casesensitive: ['regsense'],
  hinttext: ['textinstructions'],
  comment: ['textinstructions'],
  text: ['textcaptcha'],
};

/**
 * A request name as a PHP backend (and lenient others) would read it: leading whitespace
 * dropped, `a[]` / `a[x]` read as `a`, case folded, and dots, spaces, dashes and underscores
 * (PHP turns dots and spaces in request names into underscores) removed altogether, so
 * `soft.id`, ` SOFT_ID`, `soft id`, `soft-id` and `softid` all come out as `softid`.
 */
export function normaliseParamName(name: string): string {
  const trimmed = name.replace(/^\s+/, '');
  const bracket = trimmed.indexOf('[');
  const base = bracket > 0 && trimmed.indexOf(']', bracket) > bracket ? trimmed.slice(0, bracket) : trimmed;
  return base.toLowerCase().replace(/[\s._\-[\]]+/g, '');
}

const FLEET_OWNED = new Map(FLEET_OWNED_PARAMS.map((name) => [normaliseParamName(name), name]));

/** The fleet-owned name `name` would be read as, or undefined. */
export function fleetOwnedName(name: string): string | undefined {
  return FLEET_OWNED.get(normaliseParamName(name));
}

/**
 * The known name closest to `name`: the same after normalising, an alias, or within a small
 * edit distance (1 for short names, 2 from 6 characters on). Hand-written: a 20-line
 * Levenshtein over a dozen names does not justify a dependency in the Lambda bundle.
 */
export function closestParamName(name: string, known: readonly string[]): string | undefined {
  const wanted = normaliseParamName(name);
  if (wanted === '') return undefined;
  const same = known.find((candidate) => normaliseParamName(candidate) === wanted);
  if (same !== undefined) return same;
  // Own names only: `constructor` read Object's and threw (the whole batch with it).
  const alias = (Object.hasOwn(ALIASES, wanted) ? ALIASES[wanted] : undefined)?.find((candidate) =>
    known.includes(candidate),
  );
  if (alias !== undefined) return alias;
  const limit = wanted.length >= 6 ? 2 : 1;
  let best: { name: string; distance: number } | undefined;
  for (const candidate of known) {
    const distance = editDistance(wanted, normaliseParamName(candidate), limit);
    if (distance <= limit && (best === undefined || distance < best.distance)) best = { name: candidate, distance };
  }
  return best?.name;
}

/** Why `name` is not accepted for `method`, naming it (bounded) and what was probably meant. */
export function describeRefusedParam(name: string, method: string, known: readonly string[]): string {
  const shown = JSON.stringify(name.length > 64 ? `${name.slice(0, 64)}…` : name);
  const owned = fleetOwnedName(name);
  if (owned === name) return `${shown} is set by the fleet, never by a task`;
  if (owned !== undefined) return `${shown} is read as "${owned}", which the fleet sets, never a task`;
  const closest = closestParamName(name, known);
  const hint = closest === undefined ? '' : ` (did you mean "${closest}"?)`;
  return `${shown} is not a parameter of ${method}${hint}; allowed: ${known.join(', ')}`;
}

/** Levenshtein distance, giving up (returning limit + 1) once every path exceeds `limit`. */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      const substitution = (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1);
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, substitution);
    }
    if (Math.min(...current) > limit) return limit + 1;
    previous = current;
  }
  return previous[b.length] ?? limit + 1;
}
