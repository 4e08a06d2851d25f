/**
 * The solver APIs' protocols — 2captcha's in.php / res.php (spoken by CaptchaAI) and the JSON
 * task API (createTask / getTaskResult / getBalance, spoken by 2captcha's API v2, Anti-Captcha
 * and CapSolver) — their methods, error codes and the codes' classes, in one table. Pure: no I/O.
 */
import { maskKeyParameters, redactSecrets } from './redaction.js';

/**
 * The two wire protocols. `res-php`: form or query requests to `in.php` / `res.php`, answers
 * `{"status":0|1,"request":…}`. `create-task`: JSON POSTs to `/createTask`, `/getTaskResult`,
 * `/getBalance` and the report methods, answers `{"errorId":0|n,…}`, the key in the body's
 * `clientKey`.
 */
export const SOLVER_PROTOCOLS = ['res-php', 'create-task'] as const;
export type SolverProtocol = (typeof SOLVER_PROTOCOLS)[number];

/** Ids per bulk res.php request (`action=get&ids=a,b,c`; 2captcha's documented maximum is 100). */
export const RES_PHP_IDS_PER_REQUEST = 100;

/**
 * Requests one poll of `count` submissions takes: one bulk res.php request per
 * RES_PHP_IDS_PER_REQUEST ids, or one getTaskResult per id (the JSON task API has no bulk call).
 */
export function pollRequestsFor(protocol: SolverProtocol, count: number): number {
  if (count <= 0) return 0;
  return protocol === 'res-php' ? Math.ceil(count / RES_PHP_IDS_PER_REQUEST) : count;
}

/**
 * Dialects: whose spellings (task type names, error codes) and meanings to speak. The same
 * code can mean different things (CaptchaAI's ERROR_ZERO_BALANCE is "no free thread").
 */
export const DIALECTS = ['captchaai', '2captcha', 'anti-captcha', 'capmonster', 'capsolver'] as const;
export type Dialect = (typeof DIALECTS)[number];

/**
 * The shortest time between two result requests for one submission where the protocol has no
 * bulk call (the JSON task API: one getTaskResult per id), ms, by dialect. The providers say so:
 * CapSolver answers a task still processing with "retry in 3 s" and keeps a result for 120
 * queries at most (a task asked more often than that loses its paid answer); CapMonster Cloud
 * refuses faster than every 2 s (ERROR_TOO_MUCH_REQUESTS) and also stops at 120; 2captcha asks
 * for 5 s between polls. At these gaps a submission is asked at most 100 times in five minutes.
 * res.php's bulk request asks about 100 ids at once, so its ids have no gap of their own: its
 * request rate is bounded instead (`watchPollMs`).
 */
export const SINGLE_POLL_GAP_MS: Readonly<Record<Dialect, number>> = {
  captchaai: 3_000,
  '2captcha': 5_000,
  'anti-captcha': 3_000,
  capmonster: 3_000,
  capsolver: 3_000,
};

/** The per-submission gap between result requests a protocol needs, ms (0: none, the bulk protocol). */
export function pollGapMs(protocol: SolverProtocol, dialect: Dialect): number {
  return protocol === 'res-php' ? 0 : SINGLE_POLL_GAP_MS[dialect];
}

/**
 * Which protocols the fleet speaks to each dialect's service: CaptchaAI only in.php / res.php;
 * 2captcha both (its API v1 and v2); Anti-Captcha, CapMonster Cloud and CapSolver the JSON task API.
 */
export const DIALECT_PROTOCOLS: Readonly<Record<Dialect, readonly SolverProtocol[]>> = {
  captchaai: ['res-php'],
  '2captcha': ['res-php', 'create-task'],
  'anti-captcha': ['create-task'],
  capmonster: ['create-task'],
  capsolver: ['create-task'],
};

/** Whether a dialect's service speaks a protocol. */
export function speaks(dialect: Dialect, protocol: SolverProtocol): boolean {
  return DIALECT_PROTOCOLS[dialect].includes(protocol);
}

/** The dialects whose services speak a protocol, in `DIALECTS`' order. */
export function dialectsSpeaking(protocol: SolverProtocol): Dialect[] {
  return DIALECTS.filter((d) => speaks(d, protocol));
}

/** What a consumer does with an answer (see DESIGN.md, "Error classes"). */
export type SolverErrorClass = 'not_ready' | 'over_cap' | 'transient' | 'task_terminal' | 'account';

type ClassByDialect = SolverErrorClass | Readonly<Record<Dialect, SolverErrorClass>>;

/**
 * Code → class. One table for every dialect and both protocols (the JSON API's codes are the
 * same names where they mean the same thing, e.g. ERROR_ZERO_BALANCE, and its own names where
 * not, e.g. ERROR_NO_SUCH_CAPCHA_ID for res.php's ERROR_WRONG_CAPTCHA_ID); an entry keyed by
 * dialect where the same code means different things. Codes not listed are `transient`
 * (retried, then the DLQ). Codes a JSON API answers about one task id (getTaskResult) are
 * `task_terminal`: polling that id again would only repeat them.
 */
export const SOLVER_ERROR_CODES: Readonly<Record<string, ClassByDialect>> = {
  CAPCHA_NOT_READY: 'not_ready',
  // CapMonster Cloud's getTaskResult spells it with the T.
  CAPTCHA_NOT_READY: 'not_ready',
  ERROR_NO_SLOT_AVAILABLE: 'over_cap',
  // CaptchaAI: "You don't have free threads"; everyone else: the account has no money.
  ERROR_ZERO_BALANCE: {
    captchaai: 'over_cap',
    '2captcha': 'account',
    'anti-captcha': 'account',
    capmonster: 'account',
    capsolver: 'account',
  },
  // CapSolver: the package's concurrency limit (its over-cap answer); a plain rate limit elsewhere.
  ERROR_RATE_LIMIT: {
    captchaai: 'transient',
    '2captcha': 'transient',
    'anti-captcha': 'transient',
    capmonster: 'transient',
    capsolver: 'over_cap',
  },
  ERROR_SERVER_ERROR: 'transient',
  ERROR_INTERNAL_SERVER_ERROR: 'transient',
  MAX_USER_TURN: 'transient',
  ERROR_TOO_MUCH_REQUESTS: 'transient',
  'ERROR: 1001': 'transient',
  'ERROR: 1002': 'transient',
  'ERROR: 1003': 'transient',
  'ERROR: 1004': 'transient',
  'ERROR: 1005': 'transient',
  ERROR_CAPTCHA_UNSOLVABLE: 'task_terminal',
  ERROR_BAD_PARAMETERS: 'task_terminal',
  ERROR_PAGEURL: 'task_terminal',
  ERROR_GOOGLEKEY: 'task_terminal',
  ERROR_SITEKEY: 'task_terminal',
  ERROR_BAD_TOKEN_OR_PAGEURL: 'task_terminal',
  ERROR_WRONG_CAPTCHA_ID: 'task_terminal',
  ERROR_WRONG_ID_FORMAT: 'task_terminal',
  ERROR_EMPTY_ACTION: 'task_terminal',
  ERROR_ZERO_CAPTCHA_FILESIZE: 'task_terminal',
  ERROR_TOO_BIG_CAPTCHA_FILESIZE: 'task_terminal',
  ERROR_WRONG_FILE_EXTENSION: 'task_terminal',
  ERROR_IMAGE_TYPE_NOT_SUPPORTED: 'task_terminal',
  ERROR_UPLOAD: 'task_terminal',
  ERROR_CAPTCHAIMAGE_BLOCKED: 'task_terminal',
  ERROR_BAD_DUPLICATES: 'task_terminal',
  ERROR_BAD_PROXY: 'task_terminal',
  ERROR_PROXY_CONNECTION_FAILED: 'task_terminal',
  ERROR_TOKEN_EXPIRED: 'task_terminal',
  ERROR_METHOD_CALL: 'task_terminal',
  // The JSON task API (2captcha v2, Anti-Captcha, CapSolver).
  ERROR_NO_SUCH_CAPCHA_ID: 'task_terminal',
  ERROR_NO_SUCH_METHOD: 'task_terminal',
  ERROR_TASK_ABSENT: 'task_terminal',
  ERROR_TASK_NOT_SUPPORTED: 'task_terminal',
  ERROR_EMPTY_COMMENT: 'task_terminal',
  ERROR_INCORRECT_SESSION_DATA: 'task_terminal',
  ERROR_RECAPTCHA_INVALID_SITEKEY: 'task_terminal',
  ERROR_RECAPTCHA_INVALID_DOMAIN: 'task_terminal',
  ERROR_RECAPTCHA_OLD_BROWSER: 'task_terminal',
  ERROR_RECAPTCHA_STOKEN_EXPIRED: 'task_terminal',
  ERROR_RECAPTCHA_TIMEOUT: 'task_terminal',
  ERROR_PROXY_CONNECT_REFUSED: 'task_terminal',
  ERROR_PROXY_CONNECT_TIMEOUT: 'task_terminal',
  ERROR_PROXY_READ_TIMEOUT: 'task_terminal',
  ERROR_PROXY_BANNED: 'task_terminal',
  ERROR_PROXY_TRANSPARENT: 'task_terminal',
  ERROR_PROXY_NOT_AUTHORISED: 'task_terminal',
  ERROR_PROXY_MISSING: 'task_terminal',
  ERROR_INVALID_TASK_DATA: 'task_terminal',
  ERROR_TASKID_INVALID: 'task_terminal',
  ERROR_TASK_TIMEOUT: 'task_terminal',
  ERROR_INVALID_IMAGE: 'task_terminal',
  ERROR_PARSE_IMAGE_FAIL: 'task_terminal',
  ERROR_UNKNOWN_QUESTION: 'task_terminal',
  ERROR_DOMAIN_NOT_ALLOWED: 'task_terminal',
  ERROR_WRONG_USERAGENT: 'task_terminal',
  // CapMonster Cloud's name for an id it does not know (beside ERROR_NO_SUCH_CAPCHA_ID).
  WRONG_CAPTCHA_ID: 'task_terminal',
  // CapSolver: the recognition failed.
  ERROR_CAPTCHA_SOLVEFAILED: 'task_terminal',
  // Anti-Captcha: what its workers or its account settings cannot do for this task.
  ERROR_PROXY_HAS_NO_IMAGE_SUPPORT: 'task_terminal',
  ERROR_FAILED_LOADING_WIDGET: 'task_terminal',
  ERROR_VISIBLE_RECAPTCHA: 'task_terminal',
  ERROR_ALL_WORKERS_FILTERED: 'task_terminal',
  ERROR_SERVICE_UNAVALIABLE: 'transient',
  ERROR_BAD_REQUEST: 'transient',
  ERROR_KEY_DENIED_ACCESS: 'account',
  ERROR_SETTLEMENT_FAILED: 'account',
  ERROR_IP_BLOCKED: 'account',
  ERROR_ACCOUNT_SUSPENDED: 'account',
  ERROR_WRONG_USER_KEY: 'account',
  ERROR_KEY_DOES_NOT_EXIST: 'account',
  IP_BANNED: 'account',
  ERROR_IP_NOT_ALLOWED: 'account',
  ERROR_IP_BANNED: 'account',
};

/** Class of a code in a dialect; unknown codes are transient. */
export function classifySolverCode(code: string, dialect: Dialect): SolverErrorClass {
  const entry = SOLVER_ERROR_CODES[code];
  if (entry === undefined) return 'transient';
  return typeof entry === 'string' ? entry : entry[dialect];
}

/** Code the simulator (and a real service) answers when a submission exceeds the plan's threads. */
export function overCapCode(dialect: Dialect): string {
  if (dialect === 'captchaai') return 'ERROR_ZERO_BALANCE';
  return dialect === 'capsolver' ? 'ERROR_RATE_LIMIT' : 'ERROR_NO_SLOT_AVAILABLE';
}

/**
 * Codes that say a report is no longer taken for an id (unknown, expired or past the report
 * window): the report is refused, never retried.
 */
export const REPORT_REFUSED_CODES: ReadonlySet<string> = new Set([
  'ERROR_WRONG_CAPTCHA_ID',
  'ERROR_NO_SUCH_CAPCHA_ID',
  // Anti-Captcha's report pages spell it with the T, its error list without.
  'ERROR_NO_SUCH_CAPTCHA_ID',
  'ERROR_TASKID_INVALID',
  'REPORT_NOT_RECORDED',
  // 2captcha's JSON API (v2): reported too late, or the account's complaints over 40 %.
  'ERROR_REPORT_NOT_RECORDED',
]);

/**
 * Code answered when the balance cannot pay for a task. CaptchaAI uses it for "no free
 * threads" too; there the balance tells the two apart.
 */
export const NO_FUNDS_CODE = 'ERROR_ZERO_BALANCE';

/**
 * Length of an account key on both services (32 hex characters); they answer
 * ERROR_WRONG_USER_KEY to a key of any other length before looking it up.
 */
export const SOLVER_KEY_LENGTH = 32;

/**
 * Shape of a solver (captcha / task) id: digits, as 2captcha, CaptchaAI and Anti-Captcha issue
 * them (11–12 digits today, bounded well below a key's 32 characters), or a dashed UUID, as
 * CapSolver issues them (36 characters with four dashes, which no 32-character key has), so an
 * echoed key can never pass for one.
 */
export const SOLVER_ID_PATTERN =
  /^(?:\d{1,24}|[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12})$/;

/**
 * Methods of schema v1, by in.php's own names (2captcha's API v1): `geetest` is GeeTest v3,
 * `geetest_v4` v4; reCAPTCHA Enterprise is `userrecaptcha` with `enterprise=1` (v2, or v3 with
 * `version=v3`, `action`, `min_score`); Turnstile challenge pages are `turnstile` with
 * `action`, `data` (cData) and `pagedata` (chlPageData).
 */
export const METHODS = [
  'userrecaptcha',
  'turnstile',
  'hcaptcha',
  'geetest',
  'geetest_v4',
  'funcaptcha',
  'amazon_waf',
  'datadome',
  'base64',
  'textcaptcha',
] as const;
export type SolverMethod = (typeof METHODS)[number];

/** Image types are answered in seconds; token types take tens of seconds and expire. */
export type MethodKind = 'image' | 'token';

export const METHOD_KIND: Readonly<Record<SolverMethod, MethodKind>> = {
  userrecaptcha: 'token',
  turnstile: 'token',
  hcaptcha: 'token',
  geetest: 'token',
  geetest_v4: 'token',
  funcaptcha: 'token',
  amazon_waf: 'token',
  datadome: 'token',
  base64: 'image',
  textcaptcha: 'image',
};

/** Protocol defaults for the first result request and the interval after it, ms. */
export const DEFAULT_POLL: Readonly<Record<MethodKind, { firstPollMs: number; intervalMs: number }>> = {
  image: { firstPollMs: 5_000, intervalMs: 5_000 },
  token: { firstPollMs: 15_000, intervalMs: 5_000 },
};

/** How long an issued token stays usable, ms (about 120 s unless the method says otherwise). */
export const TOKEN_TTL_MS: Readonly<Partial<Record<SolverMethod, number>>> = {
  userrecaptcha: 120_000,
  hcaptcha: 120_000,
  turnstile: 300_000,
  geetest: 120_000,
  geetest_v4: 120_000,
  funcaptcha: 120_000,
  // AWS WAF's default CAPTCHA immunity time. A DataDome cookie lives for hours: no token TTL.
  amazon_waf: 300_000,
};

/** What a SolverError carries besides its code. */
export interface SolverErrorOptions {
  taskId?: string;
  message?: string;
  cause?: unknown;
}

/**
 * Base of the solver's typed errors: the code and the task id; never the key. The subclass IS
 * the classification (the consumer and the client both branch on `instanceof`); `errorClass`
 * is the same fact as a label for logs and metrics, fixed by each subclass, so the two can
 * never disagree.
 */
export abstract class SolverError extends Error {
  override name = 'SolverError';
  abstract readonly errorClass: SolverErrorClass;
  readonly code: string;
  readonly taskId: string | undefined;
  constructor(code: string, options: SolverErrorOptions = {}) {
    super(
      options.message ?? `solver answered ${code}`,
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.code = code;
    this.taskId = options.taskId;
  }
}

/** No free thread on the plan: back off and submit again. */
export class SolverOverCapError extends SolverError {
  override name = 'SolverOverCapError';
  readonly errorClass = 'over_cap';
}
/** A passing fault (5xx, a body that is no answer, a timeout of one request): retry. */
export class SolverTransientError extends SolverError {
  override name = 'SolverTransientError';
  readonly errorClass = 'transient';
}
/** This task cannot be solved as sent: record it `failed` with the code. */
export class SolverTaskError extends SolverError {
  override name = 'SolverTaskError';
  readonly errorClass = 'task_terminal';
}
/** The key or the account is refused: leave the task queued, pause the fleet. */
export class SolverAccountError extends SolverError {
  override name = 'SolverAccountError';
  readonly errorClass = 'account';
}
/** The overall deadline passed (or the caller aborted) before an answer came. */
export class SolverTimeoutError extends SolverError {
  override name = 'SolverTimeoutError';
  readonly errorClass = 'transient';
}

/** The error class that stands for each code class; `not_ready` is no error. */
const ERROR_BY_CLASS: Readonly<
  Record<Exclude<SolverErrorClass, 'not_ready'>, new (code: string, options?: SolverErrorOptions) => SolverError>
> = {
  over_cap: SolverOverCapError,
  transient: SolverTransientError,
  task_terminal: SolverTaskError,
  account: SolverAccountError,
};

/** Build the typed error for a code in a dialect (a not-ready code, asked for anyway, is transient). */
export function solverErrorFor(code: string, dialect: Dialect, options: SolverErrorOptions = {}): SolverError {
  const errorClass = classifySolverCode(code, dialect);
  const ErrorForClass = errorClass === 'not_ready' ? SolverTransientError : ERROR_BY_CLASS[errorClass];
  return new ErrorForClass(code, options);
}

/**
 * Remove a solver key from any text before it leaves the process (URLs in undici errors,
 * echoed request bodies). Keys are 32 hex chars in both services; the query form is also masked,
 * and the key is found in any letter case and reversed (core/redaction.ts): an echo may come
 * back upper-cased inside an error code.
 */
export function redactKey(text: string, key?: string): string {
  return redactSecrets(maskKeyParameters(text), [key]);
}
