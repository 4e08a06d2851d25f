/**
 * The JSON task API's face of the simulator (createTask / getTaskResult / getBalance / the report
 * methods), as 2captcha's API v2, Anti-Captcha, CapMonster Cloud and CapSolver speak it: the task types each
 * accepts and the fields each requires, the solution objects each returns, task ids (numbers;
 * CapSolver's are UUIDs), and the error bodies (`{"errorId": n, "errorCode", "errorDescription"}`;
 * CapSolver numbers every error 1 and answers it with HTTP 400, 401 for a refused key). Pure:
 * the model (model.ts) keeps the account and the tasks.
 */
import type { Dialect, SolverMethod } from '../../functions/core/solver-protocol.js';
import type { SimAnswer } from './answers.js';
import { SIM_USER_AGENT } from './answers.js';
import { deriveSeed, mulberry32, randomString } from './prng.js';
import { MAX_IMAGE_BYTES, MIN_IMAGE_BYTES, signatureOf } from './submission.js';
import type { TransientKind } from './options.js';

/** What the server writes back (the same type as model.ts's SimResponse). */
export interface JsonSimResponse {
  status: number;
  contentType: string;
  body: string;
  /** Hold the answer until this epoch ms, then write `complete()` instead (CapSolver's synchronous image tasks). */
  holdUntil?: number;
  complete?: () => JsonSimResponse;
}

/**
 * errorId of each code, as 2captcha's API v2 and Anti-Captcha number them (their lists agree
 * where both have the code); CapSolver answers errorId 1 for every error.
 */
const ERROR_IDS: Readonly<Record<string, number>> = {
  ERROR_KEY_DOES_NOT_EXIST: 1,
  ERROR_NO_SLOT_AVAILABLE: 2,
  ERROR_ZERO_CAPTCHA_FILESIZE: 3,
  ERROR_TOO_BIG_CAPTCHA_FILESIZE: 4,
  ERROR_ZERO_BALANCE: 10,
  ERROR_IP_NOT_ALLOWED: 11,
  ERROR_CAPTCHA_UNSOLVABLE: 12,
  ERROR_NO_SUCH_METHOD: 14,
  ERROR_IMAGE_TYPE_NOT_SUPPORTED: 15,
  ERROR_NO_SUCH_CAPCHA_ID: 16,
  ERROR_IP_BLOCKED: 21,
  ERROR_TASK_ABSENT: 22,
  ERROR_TASK_NOT_SUPPORTED: 23,
  ERROR_INCORRECT_SESSION_DATA: 24,
  ERROR_DUPLICATE_REPORT: 25,
  ERROR_BAD_PARAMETERS: 110,
};

const DESCRIPTIONS: Readonly<Record<string, string>> = {
  ERROR_KEY_DOES_NOT_EXIST: 'Account authorization key not found in the system',
  ERROR_KEY_DENIED_ACCESS: 'Wrong account key',
  ERROR_NO_SLOT_AVAILABLE: 'No idle workers are available at the moment: the plan has no free thread',
  ERROR_RATE_LIMIT: 'Request frequency/rate limit: the package has no free thread',
  ERROR_ZERO_CAPTCHA_FILESIZE: 'The size of the captcha you are uploading is less than 100 bytes.',
  ERROR_TOO_BIG_CAPTCHA_FILESIZE: 'The size of the captcha you are uploading is more than 100 kB.',
  ERROR_ZERO_BALANCE: 'Account has zero or negative balance',
  ERROR_CAPTCHA_UNSOLVABLE: 'Captcha could not be solved by workers',
  ERROR_NO_SUCH_METHOD: 'Request to API made with method which does not exist',
  ERROR_IMAGE_TYPE_NOT_SUPPORTED: 'Could not determine captcha file type',
  ERROR_INVALID_IMAGE: 'Image size does not meet the requirements',
  ERROR_NO_SUCH_CAPCHA_ID: 'Task you are requesting does not exist in your current task list or has been expired.',
  ERROR_TASKID_INVALID: 'Task ID does not exist or is invalid',
  ERROR_IP_BLOCKED: 'Your IP is blocked due to improper use of the API',
  ERROR_IP_BANNED: 'You have exceeded the limit of requests with the wrong api key; try again later',
  ERROR_TASK_ABSENT: 'Task property is empty or not set in createTask method',
  ERROR_TASK_NOT_SUPPORTED: 'Task type is not supported or inproperly printed',
  ERROR_INCORRECT_SESSION_DATA: 'Some of the required values are missing',
  ERROR_INVALID_TASK_DATA: 'invalid task data',
  ERROR_BAD_PARAMETERS: 'Required parameters are missing or malformed',
  ERROR_DUPLICATE_REPORT: 'The task has been reported already',
  ERROR_SERVICE_UNAVALIABLE: 'Service is temporarily unavailable',
};

/** Codes CapSolver answers with HTTP 401 (a refused key); its other errors come with 400. */
const UNAUTHORIZED = new Set(['ERROR_KEY_DENIED_ACCESS', 'ERROR_KEY_DOES_NOT_EXIST']);

/** The dialect's code for a request with a missing or malformed required field. */
export function badFieldCode(dialect: Dialect): string {
  if (dialect === 'capsolver') return 'ERROR_INVALID_TASK_DATA';
  return dialect === 'anti-captcha' ? 'ERROR_INCORRECT_SESSION_DATA' : 'ERROR_BAD_PARAMETERS';
}

/** The dialect's code for a task id it does not know (unknown, expired, or past a report window). */
export function unknownTaskCode(dialect: Dialect): string {
  return dialect === 'capsolver' ? 'ERROR_TASKID_INVALID' : 'ERROR_NO_SUCH_CAPCHA_ID';
}

/** The dialect's code for a key that is missing, malformed or unknown. */
export function badKeyCode(dialect: Dialect): string {
  return dialect === 'capsolver' ? 'ERROR_KEY_DENIED_ACCESS' : 'ERROR_KEY_DOES_NOT_EXIST';
}

const HTML_PAGE =
  '<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>\n<body>\n<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx</center>\n</body></html>\n';

/** Writes JSON API answers in the dialect's form and counts error codes. */
export class JsonReply {
  constructor(
    private readonly dialect: Dialect,
    private readonly errorsByCode: Record<string, number>,
  ) {}

  ok(body: Record<string, unknown>): JsonSimResponse {
    return this.json(200, { errorId: 0, ...body });
  }

  error(code: string): JsonSimResponse {
    this.count(code);
    const capsolver = this.dialect === 'capsolver';
    const status = capsolver ? (UNAUTHORIZED.has(code) ? 401 : 400) : 200;
    return this.json(status, {
      errorId: capsolver ? 1 : (ERROR_IDS[code] ?? 1),
      errorCode: code,
      errorDescription: DESCRIPTIONS[code] ?? code,
    });
  }

  unavailable(): JsonSimResponse {
    this.count('HTTP_503');
    return { status: 503, contentType: 'text/plain; charset=utf-8', body: 'Service Unavailable' };
  }

  /**
   * An injected failure. Only CapSolver documents an error code for a passing fault
   * (ERROR_SERVICE_UNAVALIABLE, its spelling); for 2captcha and Anti-Captcha `error_code`
   * is an HTTP 500, what their JSON API gives then.
   */
  transient(kind: TransientKind): JsonSimResponse {
    if (kind === 'error_code' && this.dialect === 'capsolver') return this.error('ERROR_SERVICE_UNAVALIABLE');
    if (kind === 'html') {
      this.count('HTML_PAGE');
      return { status: 200, contentType: 'text/html; charset=utf-8', body: HTML_PAGE };
    }
    this.count('HTTP_500');
    return { status: 500, contentType: 'text/plain; charset=utf-8', body: 'Internal Server Error' };
  }

  private count(code: string): void {
    this.errorsByCode[code] = (this.errorsByCode[code] ?? 0) + 1;
  }

  private json(status: number, value: unknown): JsonSimResponse {
    return { status, contentType: 'application/json', body: JSON.stringify(value) };
  }
}

/** A createTask task the way the service read it. */
export type TaskObjectCheck =
  | {
      ok: true;
      method: SolverMethod;
      /** What the answer is built from, in in.php's names (the answer generator's input). */
      answerParams: Record<string, string>;
      signature: string;
      /** CapSolver answers recognition tasks (ImageToText) in the createTask response itself. */
      sync: boolean;
    }
  | { ok: false; code: string };

type Family = 'anti' | 'capmonster' | 'capsolver';

/** A task type a dialect accepts: its method and the fields it requires. */
interface TypeRule {
  method: SolverMethod | 'geetest-any';
  required: readonly string[];
  proxied: boolean;
  dialects?: readonly Dialect[];
}

const ANTI_TYPES: Readonly<Record<string, TypeRule>> = {
  RecaptchaV2Task: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: true },
  RecaptchaV2TaskProxyless: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  // Anti-Captcha's names before 2021, still sent by older clients.
  NoCaptchaTask: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: true },
  NoCaptchaTaskProxyless: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  RecaptchaV2EnterpriseTask: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: true },
  RecaptchaV2EnterpriseTaskProxyless: {
    method: 'userrecaptcha',
    required: ['websiteURL', 'websiteKey'],
    proxied: false,
  },
  RecaptchaV3TaskProxyless: {
    method: 'userrecaptcha',
    required: ['websiteURL', 'websiteKey', 'minScore'],
    proxied: false,
  },
  HCaptchaTask: { method: 'hcaptcha', required: ['websiteURL', 'websiteKey'], proxied: true },
  HCaptchaTaskProxyless: { method: 'hcaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  TurnstileTask: { method: 'turnstile', required: ['websiteURL', 'websiteKey'], proxied: true },
  TurnstileTaskProxyless: { method: 'turnstile', required: ['websiteURL', 'websiteKey'], proxied: false },
  GeeTestTask: { method: 'geetest-any', required: ['websiteURL'], proxied: true },
  GeeTestTaskProxyless: { method: 'geetest-any', required: ['websiteURL'], proxied: false },
  FunCaptchaTask: { method: 'funcaptcha', required: ['websiteURL', 'websitePublicKey'], proxied: true },
  FunCaptchaTaskProxyless: { method: 'funcaptcha', required: ['websiteURL', 'websitePublicKey'], proxied: false },
  AmazonTask: { method: 'amazon_waf', required: ['websiteURL', 'websiteKey', 'iv', 'context'], proxied: true },
  AmazonTaskProxyless: {
    method: 'amazon_waf',
    required: ['websiteURL', 'websiteKey', 'iv', 'context'],
    proxied: false,
  },
  DataDomeSliderTask: {
    method: 'datadome',
    required: ['websiteURL', 'captchaUrl', 'userAgent'],
    proxied: true,
    dialects: ['2captcha'],
  },
  ImageToTextTask: { method: 'base64', required: ['body'], proxied: false },
  TextCaptchaTask: { method: 'textcaptcha', required: ['comment'], proxied: false, dialects: ['2captcha'] },
};

/** CapMonster Cloud's names: one type whether or not a proxy is given (its client's TaskType list). */
const CAPMONSTER_TYPES: Readonly<Record<string, TypeRule>> = {
  NoCaptchaTask: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  NoCaptchaTaskProxyless: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  RecaptchaV2Task: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  RecaptchaV2EnterpriseTask: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  RecaptchaV3TaskProxyless: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  RecaptchaV3EnterpriseTask: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  HCaptchaTask: { method: 'hcaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  HCaptchaTaskProxyless: { method: 'hcaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  TurnstileTask: { method: 'turnstile', required: ['websiteURL', 'websiteKey'], proxied: false },
  GeeTestTask: { method: 'geetest-any', required: ['websiteURL'], proxied: false },
  FunCaptchaTask: { method: 'funcaptcha', required: ['websiteURL', 'websitePublicKey'], proxied: false },
  AmazonTask: { method: 'amazon_waf', required: ['websiteURL', 'websiteKey'], proxied: false },
  CustomTask: { method: 'datadome', required: ['websiteURL', 'userAgent', 'metadata'], proxied: false },
  ImageToTextTask: { method: 'base64', required: ['body'], proxied: false },
};

/** CapSolver's names (it reads them without regard to case: its own client sends `…Proxyless`). */
const CAPSOLVER_TYPES: Readonly<Record<string, TypeRule>> = {
  recaptchav2task: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey', 'proxy'], proxied: true },
  recaptchav2taskproxyless: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  recaptchav2enterprisetask: {
    method: 'userrecaptcha',
    required: ['websiteURL', 'websiteKey', 'proxy'],
    proxied: true,
  },
  recaptchav2enterprisetaskproxyless: {
    method: 'userrecaptcha',
    required: ['websiteURL', 'websiteKey'],
    proxied: false,
  },
  recaptchav3task: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey', 'proxy'], proxied: true },
  recaptchav3taskproxyless: { method: 'userrecaptcha', required: ['websiteURL', 'websiteKey'], proxied: false },
  recaptchav3enterprisetask: {
    method: 'userrecaptcha',
    required: ['websiteURL', 'websiteKey', 'proxy'],
    proxied: true,
  },
  recaptchav3enterprisetaskproxyless: {
    method: 'userrecaptcha',
    required: ['websiteURL', 'websiteKey'],
    proxied: false,
  },
  antiturnstiletaskproxyless: { method: 'turnstile', required: ['websiteURL', 'websiteKey'], proxied: false },
  geetesttask: { method: 'geetest-any', required: ['websiteURL', 'proxy'], proxied: true },
  geetesttaskproxyless: { method: 'geetest-any', required: ['websiteURL'], proxied: false },
  funcaptchatask: { method: 'funcaptcha', required: ['websiteURL', 'websitePublicKey', 'proxy'], proxied: true },
  funcaptchataskproxyless: { method: 'funcaptcha', required: ['websiteURL', 'websitePublicKey'], proxied: false },
  antiawswaftask: { method: 'amazon_waf', required: ['websiteURL', 'proxy'], proxied: true },
  antiawswaftaskproxyless: { method: 'amazon_waf', required: ['websiteURL'], proxied: false },
  datadomeslidertask: {
    method: 'datadome',
    required: ['websiteURL', 'captchaUrl', 'userAgent', 'proxy'],
    proxied: true,
  },
  imagetotexttask: { method: 'base64', required: ['body'], proxied: false },
};

const ANTI_PROXY_FIELDS = ['proxyType', 'proxyAddress', 'proxyPort'] as const;

const present = (task: Readonly<Record<string, unknown>>, field: string) =>
  task[field] !== undefined && task[field] !== null && String(task[field]).trim() !== '';

/** Read a createTask `task` object the way the dialect's service does; name the first problem. */
export function readTaskObject(dialect: Dialect, raw: unknown): TaskObjectCheck {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) return { ok: false, code: 'ERROR_TASK_ABSENT' };
  const task = raw as Readonly<Record<string, unknown>>;
  if (typeof task.type !== 'string' || task.type === '') return { ok: false, code: 'ERROR_TASK_ABSENT' };
  const family: Family = dialect === 'capsolver' || dialect === 'capmonster' ? dialect : 'anti';
  const [types, name] =
    family === 'capsolver'
      ? [CAPSOLVER_TYPES, task.type.toLowerCase()]
      : family === 'capmonster'
        ? [CAPMONSTER_TYPES, task.type]
        : [ANTI_TYPES, task.type];
  // Own names only: "constructor" or "toString" found Object's and answered HTTP 500.
  const rule = Object.hasOwn(types, name) ? types[name] : undefined;
  if (rule === undefined || (rule.dialects !== undefined && !rule.dialects.includes(dialect)))
    return { ok: false, code: 'ERROR_TASK_NOT_SUPPORTED' };
  // CapMonster's CustomTask carries other vendors too; this simulator serves its DataDome class.
  if (family === 'capmonster' && task.type === 'CustomTask' && task.class !== 'DataDome')
    return { ok: false, code: 'ERROR_TASK_NOT_SUPPORTED' };
  const bad = badFieldCode(dialect);
  const required = [...rule.required, ...(family === 'anti' && rule.proxied ? ANTI_PROXY_FIELDS : [])];
  if (required.some((field) => !present(task, field))) return { ok: false, code: bad };
  // CapMonster's DataDome needs the page's datadome cookie in its metadata beside the captcha's URL.
  if (family === 'capmonster' && task.type === 'CustomTask') {
    const metadata = task.metadata as Record<string, unknown> | undefined;
    if (typeof metadata?.datadomeCookie !== 'string' || metadata.datadomeCookie === '') return { ok: false, code: bad };
  }
  const method = rule.method === 'geetest-any' ? geetestVersion(task, family) : rule.method;
  if (method === undefined) return { ok: false, code: bad };
  if (method === 'base64') {
    const imageCode = imageProblem(String(task.body), dialect);
    if (imageCode !== undefined) return { ok: false, code: imageCode };
  }
  const { type: _type, body: _body, ...rest } = task;
  const signatureParams = Object.fromEntries(Object.entries(task).map(([k, v]) => [k, JSON.stringify(v)]));
  return {
    ok: true,
    method,
    answerParams: answerParamsOf(method, rest, task),
    signature: signatureOf(method, signatureParams),
    sync: family === 'capsolver' && method === 'base64',
  };
}

/** GeeTest v3 (gt + challenge) or v4 (2captcha / Anti-Captcha: version 4; CapSolver: captchaId). */
function geetestVersion(task: Readonly<Record<string, unknown>>, family: Family): SolverMethod | undefined {
  if (family === 'capsolver') {
    if (present(task, 'captchaId')) return 'geetest_v4';
    return present(task, 'gt') && present(task, 'challenge') ? 'geetest' : undefined;
  }
  if (Number(task.version) === 4) {
    const init = task.initParameters as { captcha_id?: unknown } | undefined;
    return present(task, 'gt') ||
      (init !== undefined && init !== null && present(init as Record<string, unknown>, 'captcha_id'))
      ? 'geetest_v4'
      : undefined;
  }
  return present(task, 'gt') && present(task, 'challenge') ? 'geetest' : undefined;
}

function imageProblem(body: string, dialect: Dialect): string | undefined {
  const clean = body.replace(/\s+/g, '');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(clean))
    return dialect === 'capsolver' ? 'ERROR_INVALID_IMAGE' : 'ERROR_IMAGE_TYPE_NOT_SUPPORTED';
  const bytes = Buffer.from(clean, 'base64').length;
  if (bytes < MIN_IMAGE_BYTES) return dialect === 'capsolver' ? 'ERROR_INVALID_IMAGE' : 'ERROR_ZERO_CAPTCHA_FILESIZE';
  if (bytes > MAX_IMAGE_BYTES)
    return dialect === 'capsolver' ? 'ERROR_INVALID_IMAGE' : 'ERROR_TOO_BIG_CAPTCHA_FILESIZE';
  return undefined;
}

/** The in.php-named inputs the answer generator reads (answers.ts). */
function answerParamsOf(
  method: SolverMethod,
  rest: Readonly<Record<string, unknown>>,
  task: Readonly<Record<string, unknown>>,
): Record<string, string> {
  const s = (value: unknown) => (value === undefined || value === null ? undefined : String(value));
  const init = (task.initParameters ?? {}) as Record<string, unknown>;
  const entries: Record<string, string | undefined> = {
    challenge: method === 'geetest' ? s(rest.challenge) : undefined,
    captcha_id: method === 'geetest_v4' ? (s(init.captcha_id) ?? s(rest.gt) ?? s(rest.captchaId)) : undefined,
    publickey: method === 'funcaptcha' ? s(rest.websitePublicKey) : undefined,
    pageurl: s(rest.websiteURL),
    numeric: method === 'base64' ? s(rest.numeric) : undefined,
    min_len: method === 'base64' ? s(rest.minLength) : undefined,
    max_len: method === 'base64' ? s(rest.maxLength) : undefined,
  };
  return Object.fromEntries(Object.entries(entries).filter((e): e is [string, string] => e[1] !== undefined));
}

/** The `solution` object the dialect returns for an answer (the res.php answer, re-dressed). */
export function solutionOf(dialect: Dialect, method: SolverMethod, answer: SimAnswer): Record<string, unknown> {
  const text = typeof answer === 'string' ? answer : '';
  const object = typeof answer === 'string' ? {} : answer;
  switch (method) {
    case 'userrecaptcha':
      // 2captcha sends the token twice (gRecaptchaResponse, token); CapSolver adds its worker's user agent.
      if (dialect === 'capmonster') return { gRecaptchaResponse: text, userAgent: SIM_USER_AGENT };
      if (dialect === 'capsolver') return { gRecaptchaResponse: text, userAgent: SIM_USER_AGENT };
      return dialect === '2captcha' ? { gRecaptchaResponse: text, token: text } : { gRecaptchaResponse: text };
    case 'hcaptcha':
      return {
        gRecaptchaResponse: text,
        ...(dialect === '2captcha' ? { token: text } : {}),
        respKey: `E0_${text.slice(-24)}`,
        userAgent: SIM_USER_AGENT,
      };
    case 'turnstile':
      return { token: text, userAgent: SIM_USER_AGENT };
    case 'geetest':
      return dialect === 'capsolver'
        ? { challenge: object.geetest_challenge, validate: object.geetest_validate }
        : { challenge: object.geetest_challenge, validate: object.geetest_validate, seccode: object.geetest_seccode };
    case 'geetest_v4':
      return { ...object };
    case 'funcaptcha':
      return { token: text };
    case 'amazon_waf':
      // 2captcha: the voucher and the existing token; Anti-Captcha: the aws-waf-token; CapSolver: it as a cookie.
      if (dialect === '2captcha') return { ...object };
      if (dialect === 'capsolver') return { cookie: `aws-waf-token=${object.existing_token ?? ''}` };
      if (dialect === 'capmonster') return { cookies: { 'aws-waf-token': object.existing_token } };
      return { token: object.existing_token, userAgent: SIM_USER_AGENT };
    case 'datadome':
      if (dialect === 'capmonster') {
        // CapMonster answers the cookies per domain: `{domains: {host: {cookies: {datadome: …}}}}`.
        const value = /^datadome=([^;]*)/.exec(text)?.[1] ?? text;
        const host = /Domain=\.?([^;]+)/.exec(text)?.[1] ?? 'example.com';
        return { domains: { [host]: { cookies: { datadome: value } } } };
      }
      return { cookie: text };
    case 'base64':
    case 'textcaptcha':
      return { text };
  }
}

/**
 * A task id as the dialect issues it: the number, or for CapSolver a UUID whose last twelve hex
 * digits are the number and whose rest is drawn from the seed, so a made-up UUID is unknown.
 */
export function formatTaskId(dialect: Dialect, seed: number, id: number): number | string {
  if (dialect !== 'capsolver') return id;
  const random = mulberry32(deriveSeed(seed, `uuid:${id}`));
  const hex = (n: number) => randomString(random, '0123456789abcdef', n);
  return `${hex(8)}-${hex(4)}-4${hex(3)}-a${hex(3)}-${id.toString(16).padStart(12, '0')}`;
}

/** The task number behind a task id the client sent, or undefined when it names no task this service issued. */
export function parseTaskId(dialect: Dialect, seed: number, raw: unknown): number | undefined {
  if (dialect !== 'capsolver') {
    const text = typeof raw === 'number' ? String(raw) : typeof raw === 'string' ? raw.trim() : '';
    return /^\d{1,15}$/.test(text) ? Number(text) : undefined;
  }
  if (typeof raw !== 'string' || !/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(raw))
    return undefined;
  const id = Number.parseInt(raw.slice(-12), 16);
  return formatTaskId(dialect, seed, id) === raw.toLowerCase() ? id : undefined;
}

/** A report method of the JSON API: its verdict, and the methods it takes (all when absent). */
export interface ReportRoute {
  verdict: 'bad' | 'good';
  methods?: readonly SolverMethod[];
}

/** What a JSON API path means as a report in a dialect; undefined when the dialect has no such method. */
export function reportRoute(
  dialect: Dialect,
  name: string,
  body: Readonly<Record<string, unknown>>,
): ReportRoute | undefined {
  if (dialect === '2captcha') {
    if (name === 'reportIncorrect') return { verdict: 'bad' };
    if (name === 'reportCorrect') return { verdict: 'good' };
    return undefined;
  }
  if (dialect === 'anti-captcha') {
    const routes: Record<string, ReportRoute> = {
      reportIncorrectImageCaptcha: { verdict: 'bad', methods: ['base64', 'textcaptcha'] },
      reportIncorrectRecaptcha: { verdict: 'bad', methods: ['userrecaptcha'] },
      reportCorrectRecaptcha: { verdict: 'good', methods: ['userrecaptcha'] },
      reportIncorrectHcaptcha: { verdict: 'bad', methods: ['hcaptcha'] },
    };
    return routes[name];
  }
  if (dialect === 'capmonster') {
    const token: readonly SolverMethod[] = ['userrecaptcha', 'hcaptcha', 'turnstile', 'geetest', 'geetest_v4'];
    const routes: Record<string, ReportRoute> = {
      reportIncorrectImageCaptcha: { verdict: 'bad', methods: ['base64', 'textcaptcha'] },
      reportIncorrectTokenCaptcha: { verdict: 'bad', methods: token },
      // Also served, as reportIncorrectTokenCaptcha.
      reportIncorrectRecaptcha: { verdict: 'bad', methods: token },
    };
    return routes[name];
  }
  if (dialect === 'capsolver' && name === 'feedbackTask') {
    const result = body.result as { invalid?: unknown } | undefined;
    return { verdict: result?.invalid === false ? 'good' : 'bad' };
  }
  return undefined;
}

/** The JSON API methods the simulator serves (any other path under it is ERROR_NO_SUCH_METHOD). */
export const JSON_API_METHODS = new Set([
  'createTask',
  'getTaskResult',
  'getBalance',
  'reportIncorrect',
  'reportCorrect',
  'reportIncorrectImageCaptcha',
  'reportIncorrectRecaptcha',
  'reportCorrectRecaptcha',
  'reportIncorrectHcaptcha',
  'reportIncorrectTokenCaptcha',
  'feedbackTask',
]);
