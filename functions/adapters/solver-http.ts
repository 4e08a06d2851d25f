/**
 * One HTTP exchange with the solver and the reading of its answer, for both protocols: `httpCall`
 * (in.php / res.php: a form POST or a query GET) and `jsonCall` (the JSON task API: a JSON POST,
 * the key in the body's `clientKey`), over one transport (`exchange`). A protocol answer (success
 * or a code) comes back as a value; everything else (a transport failure, a non-2xx status, a
 * body over the size cap, a body that is not the protocol's) is thrown as a
 * SolverTransientError whose message and cause have the key removed.
 *
 * The solver is untrusted input (DESIGN.md invariant 10): a body is read as a stream and
 * dropped as soon as it passes `maxResponseBytes` (or at once when its Content-Length says it
 * will), only 2xx bodies are answers, and a numeric id is taken from the body's own digits,
 * never through a float.
 */
import { type Dispatcher, request } from 'undici';
import { containsSecret, redactSecrets } from '../core/redaction.js';
import { SOLVER_ERROR_CODES, SolverTransientError, redactKey } from '../core/solver-protocol.js';
import { aborted, describeError, type SolverContext } from './solver-context.js';

/** Shortest time an in-flight request gets even when the deadline is closer (answers then still count). */
const MIN_REQUEST_TIMEOUT_MS = 1_000;

/**
 * A protocol answer: a success value (and the members a `json=1` answer carries beside `request`:
 * 2captcha's `useragent`, `respKey`, `cookies`), or a code (not ready or an error).
 */
export type Answer =
  | { ok: true; value: string; members?: Record<string, unknown>; object?: object }
  | { ok: false; code: string };

/** One request to in.php (form, POST) or res.php (query, GET); the key is added here. */
export interface Call {
  path: 'in.php' | 'res.php';
  form?: Record<string, string>;
  query?: Record<string, string>;
  signal: AbortSignal | undefined;
  taskId: string | undefined;
  deadlineAt?: number;
}

/** One in.php / res.php exchange; protocol answers come back, everything else is thrown typed. */
export async function httpCall(ctx: SolverContext, call: Call): Promise<Answer> {
  const { base, key } = ctx;
  const { path, form, query } = call;
  const url = form ? `${base}/${path}` : `${base}/${path}?${new URLSearchParams({ key, ...query }).toString()}`;
  const { statusCode, text } = await exchange(ctx, {
    name: path,
    url,
    method: form ? 'POST' : 'GET',
    ...(form
      ? {
          body: new URLSearchParams({ key, ...form }).toString(),
          contentType: 'application/x-www-form-urlencoded',
        }
      : {}),
    signal: call.signal,
    taskId: call.taskId,
    deadlineAt: call.deadlineAt,
  });
  return answerOf(ctx, path, statusCode, text, call.taskId);
}

/** What one exchange sends: a named request, its URL, method and body. */
interface Exchange {
  /** For messages: `in.php`, `createTask`, … */
  name: string;
  url: string;
  method: 'GET' | 'POST';
  body?: string;
  contentType?: string;
  signal: AbortSignal | undefined;
  taskId: string | undefined;
  deadlineAt?: number | undefined;
  /** Wait until `deadlineAt` however long that is, not `requestTimeoutMs` (a submission answered in its own response). */
  toDeadline?: boolean | undefined;
}

/**
 * The transport: one request within its timeout (the deadline's remainder, never under 1 s, and
 * at most `requestTimeoutMs` unless the call waits to its deadline), the body read up to the cap.
 * Throws a typed, redacted transient error on anything but a response.
 */
async function exchange(ctx: SolverContext, call: Exchange): Promise<{ statusCode: number; text: string }> {
  const { key, clock, requestTimeoutMs } = ctx;
  const { name, signal, taskId, deadlineAt } = call;
  const remaining = deadlineAt === undefined ? requestTimeoutMs : deadlineAt - clock();
  const bound =
    call.toDeadline === true && deadlineAt !== undefined ? remaining : Math.min(requestTimeoutMs, remaining);
  const timeout = AbortSignal.timeout(Math.max(MIN_REQUEST_TIMEOUT_MS, bound));
  const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
  let statusCode: number;
  let text: string | undefined;
  try {
    const response = await request(call.url, {
      dispatcher: ctx.dispatcher,
      method: call.method,
      signal: combined,
      ...(call.body !== undefined
        ? { body: call.body, headers: { 'content-type': call.contentType ?? 'application/json' } }
        : {}),
    });
    statusCode = response.statusCode;
    text = await readCapped(response, ctx.maxResponseBytes);
  } catch (error) {
    if (signal?.aborted) throw aborted(taskId);
    const kind = timeout.aborted ? 'REQUEST_TIMEOUT' : 'CONNECTION_ERROR';
    throw new SolverTransientError(kind, {
      taskId,
      message: ctx.redact(`${name} ${kind === 'REQUEST_TIMEOUT' ? 'timed out' : 'failed'}: ${describeError(error)}`),
      cause: sanitizedCause(error, key),
    });
  }
  if (text === undefined) {
    throw new SolverTransientError('BODY_TOO_LARGE', {
      taskId,
      message: `${name} answered HTTP ${statusCode} with a body over ${ctx.maxResponseBytes} bytes; not read`,
    });
  }
  return { statusCode, text };
}

/** A JSON task API answer: the body of a success (errorId 0), or the error code of a refusal. */
export type JsonAnswer = { ok: true; body: Record<string, unknown>; text: string } | { ok: false; code: string };

/** One JSON task API request (`POST <base>/<method>`); the key is added here, as `clientKey`. */
export interface JsonCall {
  method: string;
  /** The request's members beside `clientKey`, already JSON text (so ids keep every digit). */
  members: Record<string, string>;
  signal: AbortSignal | undefined;
  taskId: string | undefined;
  deadlineAt?: number;
  /** Wait until `deadlineAt` however long that is (a submission the provider answers in its own response). */
  toDeadline?: boolean;
}

/**
 * One JSON task API exchange. An errorId > 0 body is an answer (its code) on a 2xx, and on a 4xx
 * from CapSolver only (it answers its errors with 400 and 401; the others answer 200, so a 4xx
 * there is a proxy's or a wrong URL's, whatever its body); a success body only on a 2xx (DESIGN.md
 * invariant 10). Everything else is a typed transient failure.
 */
export async function jsonCall(ctx: SolverContext, call: JsonCall): Promise<JsonAnswer> {
  const members = { clientKey: JSON.stringify(ctx.key), ...call.members };
  const body = `{${Object.entries(members)
    .map(([name, value]) => `${JSON.stringify(name)}:${value}`)
    .join(',')}}`;
  const { statusCode, text } = await exchange(ctx, {
    name: call.method,
    url: `${ctx.base}/${call.method}`,
    method: 'POST',
    body,
    contentType: 'application/json',
    signal: call.signal,
    taskId: call.taskId,
    deadlineAt: call.deadlineAt,
    toDeadline: call.toDeadline,
  });
  return jsonAnswerOf(ctx, call.method, statusCode, text, call.taskId);
}

function jsonAnswerOf(
  ctx: SolverContext,
  name: string,
  statusCode: number,
  text: string,
  taskId: string | undefined,
): JsonAnswer {
  const parsed = parsedJson(text);
  const object =
    parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : undefined;
  // An errorId written as text reads as its number either way (`"0"` was a success and `"1"` no
  // answer at all, its code lost).
  const rawId = object?.errorId;
  const errorId = typeof rawId === 'string' && /^\d{1,9}$/.test(rawId) ? Number(rawId) : rawId;
  const errorBody = typeof errorId === 'number' && errorId > 0;
  const errorStatus = statusCode < 300 || (ctx.dialect === 'capsolver' && statusCode >= 400 && statusCode < 500);
  if (object !== undefined && errorBody && statusCode >= 200 && errorStatus) {
    const code = object.errorCode;
    // Keyed out like res.php's codes: an errorCode that echoes the key (upper-cased, reversed)
    // still reads as a protocol code, and codes travel into logs, decisions and records.
    return {
      ok: false,
      code: typeof code === 'string' ? keyFreeCode(ctx, protocolCode(code), name, taskId) : UNRECOGNIZED_CODE,
    };
  }
  if (statusCode < 200 || statusCode >= 300) {
    throw new SolverTransientError(`HTTP_${statusCode}`, {
      taskId,
      message: `${name} answered HTTP ${statusCode}${snippet(text, ctx.key)}`,
    });
  }
  if (object !== undefined && errorId === 0) {
    if (containsSecret(text, [ctx.key]))
      ctx.log.warn('solver answer contained the key; redacted', { taskId, path: name });
    return { ok: true, body: object, text };
  }
  const code = /^\s*</.test(text) ? 'HTML_BODY' : 'UNPARSEABLE_BODY';
  throw new SolverTransientError(code, {
    taskId,
    message: `${name} answered HTTP ${statusCode} with a body that is not the JSON task API's${snippet(text, ctx.key)}`,
  });
}

/**
 * A success value (an id, an answer, an extra, a balance) with the key taken out, in any case and
 * reversed: a service or proxy that echoes the request would otherwise carry it into the record,
 * the logs and the events. Only the key itself is replaced, so a real answer is never altered.
 */
export function withoutKey(ctx: SolverContext, value: string, path: string, taskId: string | undefined): string {
  if (!containsSecret(value, [ctx.key])) return value;
  ctx.log.warn('solver answer contained the key; redacted', { taskId, path });
  return redactSecrets(value, [ctx.key]);
}

/**
 * An error code with the key in it (an echo, upper-cased or reversed, that still looks like a
 * protocol code) is no code: it would travel into logs, metrics, records and the governor's
 * saved decisions.
 */
function keyFreeCode(ctx: SolverContext, code: string, path: string, taskId: string | undefined): string {
  if (!containsSecret(code, [ctx.key])) return code;
  ctx.log.warn('solver error code contained the key; replaced', { taskId, path });
  return UNRECOGNIZED_CODE;
}

/**
 * The body as text, or undefined when it is larger than `cap` bytes. A declared length over the
 * cap is refused before a byte is read; otherwise the stream is read chunk by chunk and
 * destroyed (the connection with it) as soon as the total passes the cap, so a hostile body
 * costs at most the cap plus one chunk of memory.
 */
async function readCapped(response: Dispatcher.ResponseData, cap: number): Promise<string | undefined> {
  const declared = Number(response.headers['content-length']);
  if (Number.isFinite(declared) && declared > cap) {
    response.body.destroy();
    return undefined;
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response.body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > cap) {
      response.body.destroy();
      return undefined;
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** The protocol answer in a response, or a typed transient failure. */
function answerOf(
  ctx: SolverContext,
  path: string,
  statusCode: number,
  text: string,
  taskId: string | undefined,
): Answer {
  // Only a 2xx body is the service's answer: a redirect, a 404 or a proxy's page that happens
  // to read `OK|…` is not. Transient, not a task error: the task itself was never judged.
  if (statusCode < 200 || statusCode >= 300) {
    throw new SolverTransientError(`HTTP_${statusCode}`, {
      taskId,
      message: `${path} answered HTTP ${statusCode}${snippet(text, ctx.key)}`,
    });
  }
  const answer = readProtocolAnswer(text);
  if (answer?.ok) return { ...answer, value: withoutKey(ctx, answer.value, path, taskId) };
  if (answer) return { ...answer, code: keyFreeCode(ctx, answer.code, path, taskId) };
  const code = /^\s*</.test(text) ? 'HTML_BODY' : 'UNPARSEABLE_BODY';
  throw new SolverTransientError(code, {
    taskId,
    message: `${path} answered HTTP ${statusCode} with a body that is not the protocol's${snippet(text, ctx.key)}`,
  });
}

/**
 * Read a protocol answer: `{"status":1,"request":…}` (the id may be a JSON number, a GeeTest
 * answer an object), `{"status":0,"request":"CODE"}`, or the plain-text forms a service falls
 * back to (`OK|…`, a bare known code). Anything else is undefined.
 */
export function readProtocolAnswer(text: string): Answer | undefined {
  const trimmed = text.trim();
  const json = parsedJson(trimmed);
  if (json !== null && typeof json === 'object' && 'status' in json && 'request' in json) {
    const { status, request: value, error_text: _text, ...members } = json as Record<string, unknown>;
    const extra = Object.keys(members).length > 0 ? { members } : {};
    if (status === 1 || status === '1') {
      if (typeof value === 'string' && value !== '') return { ok: true, value, ...extra };
      if (typeof value === 'number' && Number.isFinite(value)) {
        const exact = numberAsWritten(trimmed, value);
        return exact === undefined ? undefined : { ok: true, value: exact };
      }
      // An object (GeeTest's members): its JSON, and the object for the method's shape (resPhpAnswerOf).
      if (value !== null && typeof value === 'object')
        return { ok: true, value: JSON.stringify(value), object: value, ...extra };
      return undefined;
    }
    if ((status === 0 || status === '0') && typeof value === 'string' && value !== '')
      return { ok: false, code: protocolCode(value) };
    return undefined;
  }
  if (trimmed.startsWith('OK|') && trimmed.length > 3) return { ok: true, value: trimmed.slice(3) };
  if (trimmed in SOLVER_ERROR_CODES) return { ok: false, code: trimmed };
  return undefined;
}

/** Deepest nesting of objects and arrays read in a solver's JSON body: no answer nests past 5. */
const MAX_JSON_DEPTH = 32;

/**
 * A JSON body parsed, or undefined when it is not JSON or nests deeper than MAX_JSON_DEPTH. A
 * body nested some thousands deep (24 KB, under the size cap) parses, but reading it back
 * (JSON.stringify of a GeeTest object, a cookie jar's String()) overflowed the stack: an untyped
 * RangeError past the transient retries, and a ready answer never read.
 */
export function parsedJson(text: string): unknown {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  return nestsWithin(parsed, MAX_JSON_DEPTH) ? parsed : undefined;
}

/** Whether `value` nests objects and arrays at most `max` deep (walked without recursion). */
function nestsWithin(value: unknown, max: number): boolean {
  const pending: [unknown, number][] = [[value, 0]];
  while (pending.length > 0) {
    const [next, depth] = pending.pop() as [unknown, number];
    if (next === null || typeof next !== 'object') continue;
    if (depth >= max) return false;
    for (const member of Object.values(next)) pending.push([member, depth + 1]);
  }
  return true;
}

/**
 * The digits of a numeric `request` as the body wrote them: ids past 2^53 lose digits through a
 * float (12345678901234567890 reads back as 12345678901234567000). Taken from the raw text when
 * exactly one `"request": <number>` member is there and it reads as the parsed value; a safe
 * integer with no such member (the body is odd, the value is not) is still exact as parsed.
 * Anything else is no answer we can trust.
 */
export function numberAsWritten(body: string, parsed: number, member = 'request'): string | undefined {
  const pattern = new RegExp(`"${member}"\\s*:\\s*(-?\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)\\s*[,}]`, 'g');
  const members = [...body.matchAll(pattern)];
  const written = members.length === 1 ? members[0]?.[1] : undefined;
  if (written !== undefined && Number(written) === parsed) return written;
  return Number.isSafeInteger(parsed) ? String(parsed) : undefined;
}

/**
 * Error codes travel into logs, metrics and records: keep only what looks like a protocol code,
 * so a service or proxy that echoes request text (a key) in `request` cannot leak it.
 */
const PROTOCOL_CODE = /^(?:[A-Z][A-Z0-9_]{1,63}|ERROR: \d{1,5})$/;
export const UNRECOGNIZED_CODE = 'UNRECOGNIZED_CODE';
export function protocolCode(value: string): string {
  return PROTOCOL_CODE.test(value) ? value : UNRECOGNIZED_CODE;
}

/**
 * A copy of an error chain with the key removed from every message, keeping names and codes.
 * The originals are not attached: undici and MockAgent errors can quote the URL with `key=`.
 */
export function sanitizedCause(error: unknown, key: string, depth = 0): Error | undefined {
  if (error === undefined || error === null) return undefined;
  if (!(error instanceof Error)) return new Error(redactKey(String(error), key));
  const inner = depth < 4 ? sanitizedCause(error.cause, key, depth + 1) : undefined;
  const copy = new Error(redactKey(error.message, key), inner === undefined ? undefined : { cause: inner });
  copy.name = error.name;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' || typeof code === 'number') (copy as Error & { code?: unknown }).code = code;
  return copy;
}

/**
 * Why a submission the provider accepted with an id it cannot be polled by ends the task
 * (`MALFORMED_SOLVER_ID`, a task error): sent again, as a passing fault, it was paid again,
 * four times within one solve and again at every delivery.
 */
export const NOT_SENT_AGAIN =
  'not sent again: the provider took it (a second submission is paid again) and its answer cannot be asked for by that id';

/** A short, redacted excerpt of a body for an error message (redacted before it is cut). */
export function snippet(text: string, key: string): string {
  const clean = redactKey(text, key).replace(/\s+/g, ' ').trim();
  if (clean === '') return ' (empty body)';
  return `: ${JSON.stringify(clean.length > 80 ? `${clean.slice(0, 80)}…` : clean)}`;
}
