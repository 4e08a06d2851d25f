/**
 * A task in the JSON task API (createTask): its `task` object per method and dialect, and the
 * provider's `solution` read back as the fleet's answer. Pure: no I/O.
 *
 * Producers send one schema (in.php's method + params, task.ts); this module is the one place
 * that maps it to the JSON API's type names and fields, as the providers document them and their
 * clients send them: 2captcha's API v2 and Anti-Captcha share most names (RecaptchaV2Task…,
 * `websiteURL`, `websiteKey`, proxyType / proxyAddress / proxyPort / proxyLogin / proxyPassword);
 * CapMonster Cloud keeps Anti-Captcha's older names, one type with or without a proxy
 * (NoCaptchaTask, TurnstileTask, GeeTestTask, CustomTask of class DataDome); CapSolver spells its
 * own (ReCaptchaV2TaskProxyLess, AntiTurnstileTaskProxyLess, AntiAwsWafTaskProxyLess, one `proxy`
 * string). A method a provider has no task type for is
 * refused before anything is sent (nothing is paid): `ERROR_TASK_NOT_SUPPORTED`.
 *
 * The answer of a method has one shape whatever the protocol, the shape res.php gives it:
 * a token or text, GeeTest v3 as `{geetest_challenge, geetest_validate, geetest_seccode}` JSON,
 * GeeTest v4 as `{captcha_id, lot_number, pass_token, gen_time, captcha_output}` JSON.
 */
import type { Dialect, SolverMethod } from './solver-protocol.js';

/** A createTask `task` object: its `type` and the provider's fields. */
export interface CreateTaskObject {
  type: string;
  [field: string]: unknown;
}

/** The code of a task the provider has no type for, refused before anything is sent. */
export const TASK_NOT_SUPPORTED = 'ERROR_TASK_NOT_SUPPORTED';

/** The request of one submission: the task object and the request's own top-level fields (languagePool). */
export type CreateTaskMapping =
  | { ok: true; task: CreateTaskObject; topLevel: Record<string, unknown> }
  | { ok: false; code: typeof TASK_NOT_SUPPORTED | 'ERROR_BAD_PROXY' | 'ERROR_BAD_PARAMETERS'; reason: string };

/** The in.php view of a task this module reads: its method and its (validated) params. */
export interface TaskParamsView {
  method: SolverMethod;
  params: Readonly<Record<string, unknown>>;
}

/** A proxy as in.php takes it (`login:password@host:port`, type HTTP / HTTPS / SOCKS4 / SOCKS5), split. */
export interface ProxyParts {
  type: 'http' | 'socks4' | 'socks5';
  address: string;
  port: number;
  login?: string;
  password?: string;
}

const PROXY = /^(?:([^:@\s]+):([^@\s]*)@)?([^:@\s]+|\[[0-9A-Fa-f:.]+\]):(\d{1,5})$/;

/**
 * Split in.php's `proxy` / `proxytype`. HTTPS is an HTTP proxy to the JSON API (its proxyType
 * takes http, socks4 and socks5). Undefined when the text is not `[login:password@]host:port`.
 */
export function parseProxy(proxy: string, proxytype: unknown): ProxyParts | undefined {
  const match = PROXY.exec(proxy.trim());
  if (!match) return undefined;
  const port = Number(match[4]);
  if (!Number.isInteger(port) || port < 1 || port > 65_535) return undefined;
  const kind = String(proxytype ?? 'HTTP').toUpperCase();
  const type = kind === 'SOCKS4' ? 'socks4' : kind === 'SOCKS5' ? 'socks5' : 'http';
  return {
    type,
    address: match[3] as string,
    port,
    ...(match[1] !== undefined ? { login: match[1] } : {}),
    ...(match[2] !== undefined ? { password: match[2] } : {}),
  };
}

/** Who spells what: 2captcha and Anti-Captcha share the Anti-Captcha names; CapSolver its own. */
type Family = 'anti' | 'capsolver';
const familyOf = (dialect: Dialect): Family => (dialect === 'capsolver' ? 'capsolver' : 'anti');

const str = (value: unknown): string | undefined => (value === undefined || value === null ? undefined : String(value));

/** Drop undefined members, so the body carries only what the task has. */
function compact(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

/** The proxy fields of a task in the dialect's form, or why it cannot be sent. */
function proxyFields(
  params: Readonly<Record<string, unknown>>,
  family: Family,
): { ok: true; fields: Record<string, unknown>; proxied: boolean } | { ok: false; reason: string } {
  const raw = str(params.proxy);
  if (raw === undefined) return { ok: true, fields: {}, proxied: false };
  const proxy = parseProxy(raw, params.proxytype);
  if (proxy === undefined)
    return { ok: false, reason: 'proxy is not [login:password@]host:port, which the JSON task API needs split' };
  if (family === 'capsolver') {
    // CapSolver's one-string form: type:host:port[:login:password].
    const auth = proxy.login !== undefined ? `:${proxy.login}:${proxy.password ?? ''}` : '';
    return { ok: true, fields: { proxy: `${proxy.type}:${proxy.address}:${proxy.port}${auth}` }, proxied: true };
  }
  return {
    ok: true,
    fields: compact({
      proxyType: proxy.type,
      proxyAddress: proxy.address,
      proxyPort: proxy.port,
      proxyLogin: proxy.login,
      proxyPassword: proxy.password,
    }),
    proxied: true,
  };
}

/** in.php's cookies (`KEY1:Value1;KEY2:Value2`) as the JSON API's `key1=val1; key2=val2`. */
function cookieString(cookies: string): string {
  return cookies
    .split(';')
    .map((pair) => pair.trim())
    .filter(Boolean)
    .map((pair) => (pair.includes('=') ? pair : pair.replace(':', '=')))
    .join('; ');
}

/** The same as CapSolver's `[{name, value}]`. */
function cookieList(cookies: string): { name: string; value: string }[] {
  return cookieString(cookies)
    .split('; ')
    .filter(Boolean)
    .map((pair) => {
      const at = pair.indexOf('=');
      return { name: at < 0 ? pair : pair.slice(0, at), value: at < 0 ? '' : pair.slice(at + 1) };
    });
}

/**
 * Anti-Captcha and 2captcha take a v3 minimum score of 0.3, 0.7 or 0.9 only: the smallest of
 * them at or above the one asked for (a task asking for 0.5 gets 0.7, never less), 0.3 when
 * none is asked (2captcha's default).
 */
export function jsonApiMinScore(minScore: unknown): number {
  const wanted = typeof minScore === 'number' ? minScore : 0.3;
  return [0.3, 0.7, 0.9].find((allowed) => allowed >= wanted - 1e-9) ?? 0.9;
}

function unsupported(method: string, dialect: Dialect, why: string): CreateTaskMapping {
  return { ok: false, code: TASK_NOT_SUPPORTED, reason: `${method} ${why} at ${dialect}'s JSON task API` };
}

type Builder = (params: Readonly<Record<string, unknown>>, dialect: Dialect) => CreateTaskMapping;

/** `Proxyless` / `ProxyLess` by family: CapSolver writes the L upper-case. */
const typeName = (base: string, proxied: boolean, family: Family) =>
  proxied ? base : `${base}${family === 'capsolver' ? 'ProxyLess' : 'Proxyless'}`;

const recaptcha: Builder = (p, dialect) => {
  const family = familyOf(dialect);
  const proxy = proxyFields(p, family);
  if (!proxy.ok) return { ok: false, code: 'ERROR_BAD_PROXY', reason: proxy.reason };
  const v3 = p.version === 'v3';
  const enterprise = p.enterprise === 1;
  const dataS = str(p['data-s']);
  const common = {
    websiteURL: p.pageurl,
    websiteKey: p.googlekey,
    apiDomain: str(p.domain),
    userAgent: str(p.userAgent),
  };
  if (dialect === 'capmonster') return capmonsterRecaptcha(p, common, proxy.fields, proxy.proxied);
  if (family === 'capsolver') {
    const base = `ReCaptcha${v3 ? 'V3' : 'V2'}${enterprise ? 'Enterprise' : ''}Task`;
    const task = compact({
      type: typeName(base, proxy.proxied, family),
      ...common,
      ...proxy.fields,
      pageAction: str(p.action) ?? (v3 ? 'verify' : undefined),
      minScore: v3 && typeof p.min_score === 'number' ? p.min_score : undefined,
      isInvisible: p.invisible === 1 ? true : undefined,
      enterprisePayload: dataS !== undefined ? { s: dataS } : undefined,
      cookies: str(p.cookies) !== undefined ? cookieList(String(p.cookies)) : undefined,
    }) as CreateTaskObject;
    return { ok: true, task, topLevel: {} };
  }
  if (v3) {
    if (proxy.proxied) return unsupported('userrecaptcha v3', dialect, 'through a proxy has no task type');
    const task = compact({
      type: 'RecaptchaV3TaskProxyless',
      ...common,
      minScore: jsonApiMinScore(p.min_score),
      pageAction: str(p.action) ?? 'verify',
      isEnterprise: enterprise ? true : undefined,
    }) as CreateTaskObject;
    return { ok: true, task, topLevel: {} };
  }
  const task = compact({
    type: typeName(enterprise ? 'RecaptchaV2EnterpriseTask' : 'RecaptchaV2Task', proxy.proxied, family),
    ...common,
    ...proxy.fields,
    isInvisible: p.invisible === 1 ? true : undefined,
    recaptchaDataSValue: !enterprise ? dataS : undefined,
    enterprisePayload: enterprise && dataS !== undefined ? { s: dataS } : undefined,
    pageAction: enterprise ? str(p.action) : undefined,
    cookies: str(p.cookies) !== undefined ? cookieString(String(p.cookies)) : undefined,
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: {} };
};

/** CapMonster's reCAPTCHA types: NoCaptchaTask for v2, enterprise types with or without a proxy. */
function capmonsterRecaptcha(
  p: Readonly<Record<string, unknown>>,
  common: Record<string, unknown>,
  proxyFields: Record<string, unknown>,
  proxied: boolean,
): CreateTaskMapping {
  const enterprise = p.enterprise === 1;
  const dataS = str(p['data-s']);
  if (p.version === 'v3') {
    if (proxied && !enterprise)
      return unsupported('userrecaptcha v3', 'capmonster', 'through a proxy has no task type');
    const task = compact({
      type: enterprise ? 'RecaptchaV3EnterpriseTask' : 'RecaptchaV3TaskProxyless',
      ...common,
      minScore: typeof p.min_score === 'number' ? p.min_score : undefined,
      pageAction: str(p.action) ?? 'verify',
      ...proxyFields,
    }) as CreateTaskObject;
    return { ok: true, task, topLevel: {} };
  }
  const task = compact({
    type: enterprise ? 'RecaptchaV2EnterpriseTask' : proxied ? 'NoCaptchaTask' : 'NoCaptchaTaskProxyless',
    ...common,
    recaptchaDataSValue: !enterprise ? dataS : undefined,
    enterprisePayload: enterprise && dataS !== undefined ? { s: dataS } : undefined,
    cookies: str(p.cookies) !== undefined ? cookieString(String(p.cookies)) : undefined,
    ...proxyFields,
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: {} };
}

/** CapMonster names one type for both: with a proxy or without. */
const oneType = (dialect: Dialect, base: string, proxied: boolean) =>
  dialect === 'capmonster' ? base : typeName(base, proxied, familyOf(dialect));

const hcaptcha: Builder = (p, dialect) => {
  const family = familyOf(dialect);
  if (family === 'capsolver') return unsupported('hcaptcha', dialect, 'is no longer solved');
  if (p.domain === 'js.hcaptcha.com') return unsupported('hcaptcha on js.hcaptcha.com', dialect, 'has no field');
  const proxy = proxyFields(p, family);
  if (!proxy.ok) return { ok: false, code: 'ERROR_BAD_PROXY', reason: proxy.reason };
  const rqdata = str(p.data);
  // CapMonster reads rqdata as `data`, and only beside the user agent the token is made for.
  if (dialect === 'capmonster' && rqdata !== undefined && str(p.userAgent) === undefined)
    return {
      ok: false,
      code: 'ERROR_BAD_PARAMETERS',
      reason: "hcaptcha's data (rqdata) needs userAgent at capmonster's JSON task API",
    };
  const task = compact({
    type: typeName('HCaptchaTask', proxy.proxied, family),
    websiteURL: p.pageurl,
    websiteKey: p.sitekey,
    isInvisible: p.invisible === 1 ? true : undefined,
    ...(rqdata === undefined ? {} : dialect === 'capmonster' ? { data: rqdata } : { enterprisePayload: { rqdata } }),
    userAgent: str(p.userAgent),
    ...proxy.fields,
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: {} };
};

const turnstile: Builder = (p, dialect) => {
  const family = familyOf(dialect);
  const proxy = proxyFields(p, family);
  if (!proxy.ok) return { ok: false, code: 'ERROR_BAD_PROXY', reason: proxy.reason };
  if (family === 'capsolver') {
    // CapSolver solves challenge pages as AntiCloudflareTask (a cf_clearance cookie), not a token.
    if (p.pagedata !== undefined)
      return unsupported('turnstile on a challenge page (pagedata)', dialect, 'has no token task');
    if (proxy.proxied) return unsupported('turnstile through a proxy', dialect, 'has no task type');
    const metadata = compact({ action: str(p.action), cdata: str(p.data) });
    const task = compact({
      type: 'AntiTurnstileTaskProxyLess',
      websiteURL: p.pageurl,
      websiteKey: p.sitekey,
      metadata: Object.keys(metadata).length > 0 ? metadata : undefined,
    }) as CreateTaskObject;
    return { ok: true, task, topLevel: {} };
  }
  if (dialect === 'capmonster') {
    // CapMonster solves a challenge page's token with cloudflareTaskType "token" and the page's values.
    const challenge = p.pagedata !== undefined;
    const task = compact({
      type: 'TurnstileTask',
      websiteURL: p.pageurl,
      websiteKey: p.sitekey,
      cloudflareTaskType: challenge ? 'token' : undefined,
      pageAction: str(p.action),
      data: str(p.data),
      pageData: str(p.pagedata),
      userAgent: str(p.userAgent),
      ...proxy.fields,
    }) as CreateTaskObject;
    return { ok: true, task, topLevel: {} };
  }
  const antiCaptcha = dialect === 'anti-captcha';
  const task = compact({
    type: typeName('TurnstileTask', proxy.proxied, family),
    websiteURL: p.pageurl,
    websiteKey: p.sitekey,
    action: str(p.action),
    // Anti-Captcha names them after turnstile.render's own options; 2captcha after in.php's.
    [antiCaptcha ? 'cData' : 'data']: str(p.data),
    [antiCaptcha ? 'chlPageData' : 'pagedata']: str(p.pagedata),
    userAgent: antiCaptcha ? undefined : str(p.userAgent),
    ...proxy.fields,
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: {} };
};

/** The subdomain the JSON API takes where in.php takes a URL or a host (`api_server`, `surl`). */
function hostOf(value: unknown): string | undefined {
  const text = str(value);
  if (text === undefined) return undefined;
  return URL.canParse(text) ? new URL(text).host : text;
}

const geetest: Builder = (p, dialect) => {
  const family = familyOf(dialect);
  const proxy = proxyFields(p, family);
  if (!proxy.ok) return { ok: false, code: 'ERROR_BAD_PROXY', reason: proxy.reason };
  const task = compact({
    type: oneType(dialect, 'GeeTestTask', proxy.proxied),
    websiteURL: p.pageurl,
    gt: p.gt,
    challenge: p.challenge,
    geetestApiServerSubdomain: hostOf(p.api_server),
    userAgent: str(p.userAgent),
    ...proxy.fields,
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: {} };
};

const geetestV4: Builder = (p, dialect) => {
  const family = familyOf(dialect);
  const proxy = proxyFields(p, family);
  if (!proxy.ok) return { ok: false, code: 'ERROR_BAD_PROXY', reason: proxy.reason };
  // 2captcha reads its own names; Anti-Captcha and CapMonster take the id in `gt` and `riskType` here.
  const initParameters =
    dialect === '2captcha'
      ? compact({ captcha_id: p.captcha_id, risk_type: str(p.risk_type) })
      : compact({ riskType: str(p.risk_type) });
  const task = compact({
    type: oneType(dialect, 'GeeTestTask', proxy.proxied),
    websiteURL: p.pageurl,
    // 2captcha reads the id from initParameters; Anti-Captcha and CapMonster from `gt` too; CapSolver from `captchaId`.
    ...(family === 'capsolver'
      ? { captchaId: p.captcha_id }
      : { version: 4, initParameters, ...(dialect !== '2captcha' ? { gt: p.captcha_id } : {}) }),
    geetestApiServerSubdomain: hostOf(p.api_server),
    userAgent: str(p.userAgent),
    ...proxy.fields,
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: {} };
};

const funcaptcha: Builder = (p, dialect) => {
  const family = familyOf(dialect);
  const proxy = proxyFields(p, family);
  if (!proxy.ok) return { ok: false, code: 'ERROR_BAD_PROXY', reason: proxy.reason };
  const blob = str(p['data[blob]']);
  const task = compact({
    type: oneType(dialect, 'FunCaptchaTask', proxy.proxied),
    websiteURL: p.pageurl,
    websitePublicKey: p.publickey,
    funcaptchaApiJSSubdomain: hostOf(p.surl),
    data: blob !== undefined ? JSON.stringify({ blob }) : undefined,
    userAgent: str(p.userAgent),
    ...proxy.fields,
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: {} };
};

const amazonWaf: Builder = (p, dialect) => {
  const family = familyOf(dialect);
  const proxy = proxyFields(p, family);
  if (!proxy.ok) return { ok: false, code: 'ERROR_BAD_PROXY', reason: proxy.reason };
  if (family === 'capsolver') {
    const task = compact({
      type: typeName('AntiAwsWafTask', proxy.proxied, family),
      websiteURL: p.pageurl,
      awsKey: p.sitekey,
      awsIv: p.iv,
      awsContext: p.context,
      awsChallengeJS: str(p.challenge_script),
      ...proxy.fields,
    }) as CreateTaskObject;
    return { ok: true, task, topLevel: {} };
  }
  const task = compact({
    type: oneType(dialect, 'AmazonTask', proxy.proxied),
    websiteURL: p.pageurl,
    websiteKey: p.sitekey,
    iv: p.iv,
    context: p.context,
    challengeScript: str(p.challenge_script),
    captchaScript: str(p.captcha_script),
    userAgent: str(p.userAgent),
    ...proxy.fields,
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: {} };
};

const datadome: Builder = (p, dialect) => {
  const family = familyOf(dialect);
  if (dialect === 'anti-captcha') return unsupported('datadome', dialect, 'has no task type');
  const proxy = proxyFields(p, family);
  if (!proxy.ok) return { ok: false, code: 'ERROR_BAD_PROXY', reason: proxy.reason };
  // CapMonster requires the page's datadome cookie beside the captcha's URL, which in.php's
  // parameters do not carry: refused before anything is paid, not sent malformed.
  if (dialect === 'capmonster')
    return unsupported('datadome', dialect, 'needs a datadome cookie the task does not carry');
  const task = compact({
    type: family === 'capsolver' ? 'DatadomeSliderTask' : 'DataDomeSliderTask',
    websiteURL: p.pageurl,
    captchaUrl: p.captcha_url,
    userAgent: str(p.userAgent),
    ...proxy.fields,
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: {} };
};

const image: Builder = (p, dialect) => {
  const family = familyOf(dialect);
  if (family === 'capsolver') {
    const task = compact({ type: 'ImageToTextTask', body: p.body, case: p.regsense === 1 ? true : undefined });
    return { ok: true, task: task as CreateTaskObject, topLevel: {} };
  }
  const task = compact({
    type: 'ImageToTextTask',
    body: p.body,
    phrase: p.phrase === 1 ? true : undefined,
    case: p.regsense === 1 ? true : undefined,
    numeric: typeof p.numeric === 'number' && p.numeric > 0 ? p.numeric : undefined,
    math: p.calc === 1 ? true : undefined,
    minLength: typeof p.min_len === 'number' && p.min_len > 0 ? p.min_len : undefined,
    maxLength: typeof p.max_len === 'number' && p.max_len > 0 ? p.max_len : undefined,
    comment: str(p.textinstructions),
  }) as CreateTaskObject;
  return { ok: true, task, topLevel: languagePoolOf(p) };
};

/** in.php's `language` (1 = Cyrillic) or `lang` (ru…) as the JSON API's languagePool. */
function languagePoolOf(p: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const cyrillic = p.language === 1 || ['ru', 'uk', 'be', 'bg', 'kk'].includes(String(p.lang ?? '').toLowerCase());
  return cyrillic ? { languagePool: 'rn' } : {};
}

const text: Builder = (p, dialect) => {
  if (dialect !== '2captcha') return unsupported('textcaptcha', dialect, 'has no task type');
  return { ok: true, task: { type: 'TextCaptchaTask', comment: String(p.textcaptcha) }, topLevel: languagePoolOf(p) };
};

const BUILDERS: Readonly<Record<SolverMethod, Builder>> = {
  userrecaptcha: recaptcha,
  hcaptcha,
  turnstile,
  geetest,
  geetest_v4: geetestV4,
  funcaptcha,
  amazon_waf: amazonWaf,
  datadome,
  base64: image,
  textcaptcha: text,
};

/** The createTask request of a task for a dialect's service, or why that service cannot take it. */
export function createTaskOf(task: TaskParamsView, dialect: Dialect): CreateTaskMapping {
  return BUILDERS[task.method](task.params, dialect);
}

/**
 * The method a JSON task API type name stands for (any dialect's spelling, any case), for
 * telling a producer who sent a createTask-shaped message what to send instead.
 */
export function methodOfTaskType(type: string): SolverMethod | undefined {
  const name = type
    .toLowerCase()
    .replace(/proxyless$/, '')
    .replace(/task$/, '')
    .replace(/^anti/, '');
  if (/^(recaptchav[23](enterprise)?|nocaptcha)$/.test(name)) return 'userrecaptcha';
  const direct: Record<string, SolverMethod> = {
    hcaptcha: 'hcaptcha',
    turnstile: 'turnstile',
    geetest: 'geetest',
    funcaptcha: 'funcaptcha',
    amazon: 'amazon_waf',
    awswaf: 'amazon_waf',
    datadomeslider: 'datadome',
    custom: 'datadome',
    imagetotext: 'base64',
    textcaptcha: 'textcaptcha',
  };
  // Own names only: `constructor` and `__proto__` read Object's (and threw further on).
  return Object.hasOwn(direct, name) ? direct[name] : undefined;
}

/** What a provider's solution came to: the answer, and what else it said (user agent, cookies…). */
export interface SolutionReading {
  answer: string;
  extras: Record<string, string>;
}

/** Extra solution fields the fleet keeps (bounded, redacted by the client), by their JSON API names. */
export const EXTRA_ANSWER_FIELDS = ['userAgent', 'cookies', 'respKey'] as const;

const text64 = (value: unknown): string | undefined =>
  typeof value === 'string' && value !== '' ? value : typeof value === 'number' ? String(value) : undefined;

/** The member that carries the answer, per method (first present wins). */
function answerOfSolution(method: SolverMethod, s: Readonly<Record<string, unknown>>): string | undefined {
  switch (method) {
    case 'userrecaptcha':
    case 'hcaptcha':
      return text64(s.gRecaptchaResponse) ?? text64(s.token);
    case 'turnstile':
    case 'funcaptcha':
      return text64(s.token);
    case 'geetest': {
      const validate = text64(s.validate);
      if (text64(s.challenge) === undefined || validate === undefined) return undefined;
      // CapSolver returns no seccode: GeeTest v3's is the validate value + "|jordan".
      return JSON.stringify({
        geetest_challenge: text64(s.challenge),
        geetest_validate: validate,
        geetest_seccode: text64(s.seccode) ?? `${validate}|jordan`,
      });
    }
    case 'geetest_v4': {
      const fields = ['captcha_id', 'lot_number', 'pass_token', 'gen_time', 'captcha_output'] as const;
      if (fields.some((field) => text64(s[field]) === undefined)) return undefined;
      return JSON.stringify(Object.fromEntries(fields.map((field) => [field, text64(s[field])])));
    }
    case 'amazon_waf': {
      // 2captcha answers the voucher and the existing token; Anti-Captcha a token; CapSolver a
      // cookie; CapMonster the cookie in a cookies object.
      if (text64(s.captcha_voucher) !== undefined)
        return JSON.stringify({
          captcha_voucher: text64(s.captcha_voucher),
          existing_token: text64(s.existing_token) ?? '',
        });
      const cookies = s.cookies as Record<string, unknown> | undefined;
      return text64(s.token) ?? text64(s.cookie) ?? text64(cookies?.['aws-waf-token']);
    }
    case 'datadome':
      return text64(s.cookie) ?? capmonsterDomainCookie(s.domains);
    case 'base64':
    case 'textcaptcha':
      return text64(s.text);
  }
}

/** CapMonster's DataDome solution: `{domains: {host: {cookies: {datadome: …}}}}`, as `datadome=…`. */
function capmonsterDomainCookie(domains: unknown): string | undefined {
  if (domains === null || typeof domains !== 'object') return undefined;
  for (const entry of Object.values(domains)) {
    const value = (entry as { cookies?: { datadome?: unknown } } | null)?.cookies?.datadome;
    if (typeof value === 'string' && value !== '') return `datadome=${value}`;
  }
  return undefined;
}

/**
 * A cookie object (`{name: value}`) or list (`[{name, value}]`) as `name=value; …` text. Only
 * text and numbers are a cookie's name or value: a pair holding anything else (an object, a list)
 * is left out, not written as `[object Object]`.
 */
export function cookiesText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  const scalar = (v: unknown) => (typeof v === 'string' ? v : typeof v === 'number' ? String(v) : undefined);
  const pair = (name: unknown, v: unknown) => {
    const n = scalar(name);
    const text = scalar(v);
    return n === undefined || n === '' || text === undefined ? undefined : `${n}=${text}`;
  };
  let pairs: Array<string | undefined> | undefined;
  if (Array.isArray(value))
    pairs = value.map((entry) =>
      entry && typeof entry === 'object'
        ? pair((entry as { name?: unknown }).name, (entry as { value?: unknown }).value)
        : undefined,
    );
  else if (value && typeof value === 'object') pairs = Object.entries(value).map(([name, v]) => pair(name, v));
  return pairs?.filter((p): p is string => p !== undefined).join('; ');
}

/**
 * The members of the answers res.php gives as an object (`json=1`'s `request`), by method: the
 * answer keeps these, each text, in this order, and nothing else. Every other method's answer is
 * text: an object there is not its answer.
 */
const RES_PHP_ANSWER_MEMBERS: Partial<Record<SolverMethod, readonly string[]>> = {
  geetest: ['geetest_challenge', 'geetest_validate', 'geetest_seccode'],
  geetest_v4: ['captcha_id', 'lot_number', 'pass_token', 'gen_time', 'captcha_output'],
  amazon_waf: ['captcha_voucher', 'existing_token'],
};

/**
 * A res.php answer in its method's shape: the text of a text method, or the object of a method
 * answered as one (its members, text, all present; `existing_token` may be empty) as JSON.
 * Undefined when it is not (an object for a token, text for GeeTest, a member missing or not
 * text): a provider's or a proxy's malformed answer, never recorded as solved. Amazon's answer
 * may also be a token (text).
 */
export function resPhpAnswerOf(method: SolverMethod, value: string, object: unknown): string | undefined {
  const members = RES_PHP_ANSWER_MEMBERS[method];
  if (object === undefined) return members === undefined || method === 'amazon_waf' ? value : undefined;
  if (members === undefined || object === null || typeof object !== 'object' || Array.isArray(object)) return undefined;
  const o = object as Readonly<Record<string, unknown>>;
  const read = members.map((name) => [name, text64(Object.hasOwn(o, name) ? o[name] : undefined)] as const);
  const missing = read.filter(([name, text]) => text === undefined && name !== 'existing_token');
  if (missing.length > 0) return undefined;
  return JSON.stringify(Object.fromEntries(read.map(([name, text]) => [name, text ?? ''])));
}

/**
 * Read a `solution` object: the answer in the method's one shape, and the extra fields the fleet
 * keeps (unbounded here: the client bounds and redacts). Undefined when the solution holds no
 * answer for the method (a provider's malformed answer).
 */
export function readSolution(method: SolverMethod, solution: unknown): SolutionReading | undefined {
  if (solution === null || typeof solution !== 'object' || Array.isArray(solution)) return undefined;
  const s = solution as Readonly<Record<string, unknown>>;
  const answer = answerOfSolution(method, s);
  if (answer === undefined) return undefined;
  const extras: Record<string, string> = {};
  const userAgent = text64(s.userAgent) ?? text64(s.useragent);
  if (userAgent !== undefined) extras.userAgent = userAgent;
  const cookies = cookiesText(s.cookies);
  if (cookies !== undefined && cookies !== '') extras.cookies = cookies;
  const respKey = text64(s.respKey);
  if (respKey !== undefined) extras.respKey = respKey;
  return { answer, extras };
}
