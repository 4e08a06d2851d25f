/**
 * in.php's parameter rules: which method needs what, and the error code the real service
 * answers when it is missing. Pure: takes the parsed request, returns a task or a code.
 */
import { createHash } from 'node:crypto';
import { METHODS, type SolverMethod } from '../../functions/core/solver-protocol.js';

/** Smallest image the service accepts, bytes (smaller answers ERROR_ZERO_CAPTCHA_FILESIZE). */
export const MIN_IMAGE_BYTES = 100;
/** Largest image the service accepts, bytes (larger answers ERROR_TOO_BIG_CAPTCHA_FILESIZE). */
export const MAX_IMAGE_BYTES = 100 * 1024;
/** File extensions `method=post` accepts. */
const IMAGE_EXTENSIONS = new Set(['jpg', 'jpeg', 'png', 'gif', 'bmp']);

/** Parameters that steer the protocol itself and never change what is solved. */
const PROTOCOL_PARAMS = new Set(['key', 'json', 'method', 'soft_id', 'header_acao', 'pingback', 'file']);

/** A file part of a multipart upload. */
export interface UploadedFile {
  filename: string;
  bytes: Buffer;
}

/** A submission that passed in.php's checks. */
export interface AcceptedSubmission {
  /** The method solved; `post` uploads become `base64` (same work, same answer shape). */
  method: SolverMethod;
  /** The method's own parameters (protocol parameters removed), as submitted. */
  params: Record<string, string>;
  /**
   * Digest of method + parameters: two tasks with the same signature are the same work, so
   * solving both is a duplicate solve.
   */
  signature: string;
}

export type SubmissionCheck = { ok: true; submission: AcceptedSubmission } | { ok: false; code: string };

/**
 * Check an in.php submission the way the service does and name the first problem found.
 * `method=post` needs `file`; `base64` needs `body`; token methods need `pageurl` and their key.
 */
export function checkSubmission(
  fields: Readonly<Record<string, string>>,
  file: UploadedFile | undefined,
): SubmissionCheck {
  const rawMethod = (fields.method ?? '').trim();
  const params: Record<string, string> = {};
  for (const [name, value] of Object.entries(fields)) {
    if (!PROTOCOL_PARAMS.has(name)) params[name] = value;
  }
  const present = (name: string) => (params[name] ?? '').trim() !== '';
  const fail = (code: string): SubmissionCheck => ({ ok: false, code });

  if (rawMethod === 'post') {
    if (file === undefined || file.bytes.length === 0) return fail('ERROR_ZERO_CAPTCHA_FILESIZE');
    const extension = file.filename.includes('.') ? (file.filename.split('.').pop() ?? '').toLowerCase() : '';
    if (extension !== '' && !IMAGE_EXTENSIONS.has(extension)) return fail('ERROR_WRONG_FILE_EXTENSION');
    const sizeCode = imageSizeCode(file.bytes.length);
    if (sizeCode) return fail(sizeCode);
    // An upload is the same work as the same image sent as base64.
    params.body = file.bytes.toString('base64');
    return accept('base64', params);
  }
  if (!isMethod(rawMethod)) return fail('ERROR_BAD_PARAMETERS');
  const method = rawMethod;
  switch (method) {
    case 'userrecaptcha':
      if (!present('googlekey')) return fail('ERROR_GOOGLEKEY');
      if (!present('pageurl')) return fail('ERROR_PAGEURL');
      break;
    case 'hcaptcha':
    case 'turnstile':
      if (!present('sitekey')) return fail('ERROR_SITEKEY');
      if (!present('pageurl')) return fail('ERROR_PAGEURL');
      break;
    case 'geetest':
      if (!present('gt') || !present('challenge')) return fail('ERROR_BAD_PARAMETERS');
      if (!present('pageurl')) return fail('ERROR_PAGEURL');
      break;
    case 'funcaptcha':
      if (!present('publickey')) return fail('ERROR_BAD_PARAMETERS');
      if (!present('pageurl')) return fail('ERROR_PAGEURL');
      break;
    case 'geetest_v4':
      if (!present('captcha_id')) return fail('ERROR_BAD_PARAMETERS');
      if (!present('pageurl')) return fail('ERROR_PAGEURL');
      break;
    case 'amazon_waf':
      if (!present('sitekey')) return fail('ERROR_SITEKEY');
      if (!present('iv') || !present('context')) return fail('ERROR_BAD_PARAMETERS');
      if (!present('pageurl')) return fail('ERROR_PAGEURL');
      break;
    case 'datadome':
      // DataDome is solved through the customer's proxy and browser only.
      if (!present('captcha_url') || !present('userAgent') || !present('proxy')) return fail('ERROR_BAD_PARAMETERS');
      if (!present('pageurl')) return fail('ERROR_PAGEURL');
      break;
    case 'base64': {
      const body = (params.body ?? '').replace(/\s+/g, '');
      if (body === '') return fail('ERROR_ZERO_CAPTCHA_FILESIZE');
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(body) && !/^[A-Za-z0-9_-]+={0,2}$/.test(body))
        return fail('ERROR_IMAGE_TYPE_NOT_SUPPORTED');
      const sizeCode = imageSizeCode(Buffer.from(body, 'base64').length);
      if (sizeCode) return fail(sizeCode);
      params.body = body;
      break;
    }
    case 'textcaptcha':
      if (!present('textcaptcha')) return fail('ERROR_BAD_PARAMETERS');
      break;
  }
  return accept(method, params);
}

function accept(method: SolverMethod, params: Record<string, string>): SubmissionCheck {
  return { ok: true, submission: { method, params, signature: signatureOf(method, params) } };
}

function isMethod(value: string): value is SolverMethod {
  return (METHODS as readonly string[]).includes(value);
}

function imageSizeCode(bytes: number): string | undefined {
  if (bytes < MIN_IMAGE_BYTES) return 'ERROR_ZERO_CAPTCHA_FILESIZE';
  if (bytes > MAX_IMAGE_BYTES) return 'ERROR_TOO_BIG_CAPTCHA_FILESIZE';
  return undefined;
}

/** Order-independent digest, so `a=1&b=2` and `b=2&a=1` are the same work. */
export function signatureOf(method: string, params: Readonly<Record<string, string>>): string {
  const canonical = JSON.stringify([method, Object.entries(params).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))]);
  return createHash('sha256').update(canonical).digest('base64url');
}
