/**
 * The solver API's protocol (2captcha's in.php / res.php, spoken by CaptchaAI): methods, error
 * codes and their classes, in one table. Pure: no I/O.
 */
import { redactSecrets } from './redaction.js';

/** Dialects differ in what the same code means. */
export const DIALECTS = ['captchaai', '2captcha'] as const;
export type Dialect = (typeof DIALECTS)[number];

/** What a consumer does with an answer (see DESIGN.md, "Error classes"). */
export type SolverErrorClass = 'not_ready' | 'over_cap' | 'transient' | 'task_terminal' | 'account';

type ClassByDialect = SolverErrorClass | Readonly<Record<Dialect, SolverErrorClass>>;

/**
 * Code → class. One table for both dialects; an entry keyed by dialect where the same code
 * means different things. Codes not listed are `transient` (retried, then the DLQ).
 */
export const SOLVER_ERROR_CODES: Readonly<Record<string, ClassByDialect>> = {
  CAPCHA_NOT_READY: 'not_ready',
  ERROR_NO_SLOT_AVAILABLE: 'over_cap',
  // CaptchaAI: "You don't have free threads"; 2captcha: the account has no money.
  ERROR_ZERO_BALANCE: { captchaai: 'over_cap', '2captcha': 'account' },
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
  return dialect === 'captchaai' ? 'ERROR_ZERO_BALANCE' : 'ERROR_NO_SLOT_AVAILABLE';
}

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
 * Shape of a solver (captcha) id: digits only, as both services issue them (11–12 digits
 * today), bounded well below a key's 32 characters so an echoed key can never pass for one.
 */
export const SOLVER_ID_PATTERN = /^\d{1,24}$/;

/** Methods of schema v1, by the protocol's own names. */
export const METHODS = [
  'userrecaptcha',
  'turnstile',
  'hcaptcha',
  'geetest',
  'funcaptcha',
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
  funcaptcha: 'token',
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
  funcaptcha: 120_000,
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
  return redactSecrets(text.replace(/([?&]key=)[^&\s"']+/gi, '$1***'), [key]);
}
