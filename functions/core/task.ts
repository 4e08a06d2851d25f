/**
 * Task message, schema v1: what producers send. Parameter names are the solver protocol's own,
 * so producers coming from the usual Redis scripts change only their transport.
 * The published JSON Schema (`schema/task-v1.schema.json`) is generated from this file and a
 * test keeps the two in step (`npm run schema` rewrites it).
 */
import { z } from 'zod';
import type { SolverMethod } from './solver-protocol.js';
import { describeRefusedParam, FLEET_OWNED_PARAMS, METHOD_PARAMS } from './task-params.js';
import { CONTROL_OR_FORMAT, printable } from './helpers/printable.js';
import { methodOfTaskType } from './task-types.js';

/**
 * SQS's limit on one message (body and attributes together, 1 MiB since 2025); Lambda's SQS
 * events carry the same. The dead-letter queue keeps it.
 */
export const SQS_MESSAGE_LIMIT_BYTES = 1_048_576;

/** Entries one SQS batch request (SendMessageBatch, DeleteMessageBatch) takes at most. */
export const SQS_BATCH_ENTRIES = 10;
/**
 * Room kept in a dead letter for its reason attributes (`reason`, `reasonDetail`, `taskId`,
 * `sourceQueue`, `sourceMessageId`: names, types and values), bytes. The task lanes accept this
 * much less than SQS's limit, so every message they hold can be dead-lettered with its reason.
 */
export const DEAD_LETTER_HEADROOM_BYTES = 4_096;
/** The task lanes' `MaximumMessageSize`: whatever they accept fits the DLQ with its reason. */
export const TASK_QUEUE_MESSAGE_LIMIT_BYTES = SQS_MESSAGE_LIMIT_BYTES - DEAD_LETTER_HEADROOM_BYTES;
/**
 * Room kept in a task message for the fleet's redelivery attribute: a fresh copy of the message
 * may carry a paid submission's id and an answer read but not yet recorded (at most 64 KiB, the
 * solver client's response cap) to the next delivery.
 */
export const REDELIVERY_HEADROOM_BYTES = 72 * 1024;
/**
 * Largest task message accepted, bytes of UTF-8 JSON: what the lanes accept less the room its
 * redelivery needs. A larger message that reaches a lane is dead-lettered as TOO_LARGE, with its
 * reason, on its first receive.
 */
export const MAX_TASK_BYTES = TASK_QUEUE_MESSAGE_LIMIT_BYTES - REDELIVERY_HEADROOM_BYTES;
/** Task ids: the SQS message id alphabet plus the 8-char ids of the usual Redis scripts. */
export const TASK_ID_PATTERN = /^[A-Za-z0-9_-]{1,80}$/;

const url = z.url({ protocol: /^https?$/ }).max(2048);
const siteKey = z
  .string()
  .min(8)
  .max(256)
  .regex(/^[A-Za-z0-9_\-.:]+$/, 'letters, digits, _ - . : only');
const flag = z.union([z.literal(0), z.literal(1)]);
/**
 * Free text a producer gives (a user agent, cookies, a question): bounded, and without control or
 * format characters ({@link CONTROL_OR_FORMAT}): a user agent holding CR LF would inject a header
 * wherever it is sent on, an escape or a bidi override would reach a screen.
 */
const NO_CONTROL = new RegExp(`^[^${CONTROL_OR_FORMAT.source.slice(1, -1)}]*$`);
const clean = (schema: z.ZodString) => schema.regex(NO_CONTROL, 'no control or invisible format characters');
const text = (max: number) => clean(z.string().max(max));
/** Proxy and browser parameters of the token methods (2captcha's names and proxy types). */
const browser = {
  proxy: text(512),
  proxytype: z.enum(['HTTP', 'HTTPS', 'SOCKS4', 'SOCKS5']),
  userAgent: text(1024),
} as const;

type Method = keyof typeof METHOD_PARAMS;
type MethodParam<M extends Method> = (typeof METHOD_PARAMS)[M][number];

/**
 * A method's params: exactly the names of METHOD_PARAMS (the type demands each one and no
 * other), strict, so an unknown or fleet-owned name is refused and the published JSON Schema
 * says `additionalProperties: false`.
 */
function params<M extends Method, T extends { [K in MethodParam<M>]: z.ZodType }>(
  method: M,
  shape: T & Record<Exclude<keyof T, MethodParam<M>>, never>,
) {
  return z
    .strictObject(shape)
    .describe(
      `in.php parameters of ${method}, by the protocol's names. Only these are accepted: any other name, ` +
        `and the fleet's own (${FLEET_OWNED_PARAMS.join(', ')}) in any spelling, is a SCHEMA_VIOLATION.`,
    );
}

const common = {
  id: z
    .string()
    .regex(TASK_ID_PATTERN, 'id: 1-80 of A-Z a-z 0-9 _ -')
    .optional()
    .describe(
      "The producer's idempotency key. The same id with the same method and params is the same task: " +
        'a duplicate gets the first result and is never solved twice. The same id with other content, ' +
        'while the first result lives (resultTtlSeconds, a day by default), is refused to the DLQ as ' +
        'ID_CONFLICT. A rejected message does not hold its id. Omitted: the SQS message id.',
    ),
  priority: z.enum(['normal', 'high']).optional(),
  submittedAt: z.number().int().min(0).max(8_640_000_000_000_000).optional(),
};

export const TaskSchema = z.discriminatedUnion('method', [
  z.object({
    ...common,
    method: z.literal('userrecaptcha'),
    params: params('userrecaptcha', {
      googlekey: siteKey,
      pageurl: url,
      version: z.enum(['v2', 'v3']).optional(),
      action: text(256).optional(),
      min_score: z.number().min(0.1).max(0.9).optional(),
      invisible: flag.optional(),
      enterprise: flag.optional(),
      'data-s': text(4096).optional(),
      domain: z.enum(['google.com', 'recaptcha.net']).optional(),
      cookies: text(4096).optional(),
      proxy: browser.proxy.optional(),
      proxytype: browser.proxytype.optional(),
      userAgent: browser.userAgent.optional(),
    }).superRefine((p, ctx) => {
      // A minimum score exists only for v3 (2captcha: "min_score — only for v3").
      if (p.min_score !== undefined && p.version !== 'v3')
        ctx.addIssue({
          code: 'custom',
          path: ['min_score'],
          message: 'min_score is a reCAPTCHA v3 parameter: add version "v3" or drop it',
        });
    }),
  }),
  z.object({
    ...common,
    method: z.literal('turnstile'),
    params: params('turnstile', {
      sitekey: siteKey,
      pageurl: url,
      action: text(256).optional(),
      data: text(4096).optional(),
      pagedata: text(4096).optional(),
      proxy: browser.proxy.optional(),
      proxytype: browser.proxytype.optional(),
      userAgent: browser.userAgent.optional(),
    }).superRefine((p, ctx) => {
      // A challenge page's turnstile.render call carries all three: chlPageData alone is a page
      // scraped half-way, which the provider solves into a token the page refuses.
      if (p.pagedata !== undefined && (p.action === undefined || p.data === undefined))
        ctx.addIssue({
          code: 'custom',
          path: ['pagedata'],
          message: 'a challenge page (pagedata) also needs its action and data (cData)',
        });
    }),
  }),
  z.object({
    ...common,
    method: z.literal('hcaptcha'),
    params: params('hcaptcha', {
      sitekey: siteKey,
      pageurl: url,
      invisible: flag.optional(),
      data: text(4096).optional(),
      domain: z.enum(['hcaptcha.com', 'js.hcaptcha.com']).optional(),
      proxy: browser.proxy.optional(),
      proxytype: browser.proxytype.optional(),
      userAgent: browser.userAgent.optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('geetest'),
    params: params('geetest', {
      gt: clean(z.string().min(8).max(64)),
      challenge: clean(z.string().min(8).max(128)),
      pageurl: url,
      api_server: text(256).optional(),
      offline: flag.optional(),
      new_captcha: flag.optional(),
      proxy: browser.proxy.optional(),
      proxytype: browser.proxytype.optional(),
      userAgent: browser.userAgent.optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('geetest_v4'),
    params: params('geetest_v4', {
      captcha_id: z
        .string()
        .min(8)
        .max(64)
        .regex(/^[A-Za-z0-9_-]+$/, 'letters, digits, _ - only'),
      pageurl: url,
      risk_type: text(64).optional(),
      api_server: text(256).optional(),
      proxy: browser.proxy.optional(),
      proxytype: browser.proxytype.optional(),
      userAgent: browser.userAgent.optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('amazon_waf'),
    params: params('amazon_waf', {
      sitekey: z
        .string()
        .min(8)
        .max(2048)
        .regex(/^[A-Za-z0-9+/=_-]+$/, 'base64 characters only'),
      iv: z
        .string()
        .min(8)
        .max(256)
        .regex(/^[A-Za-z0-9+/=_-]+$/, 'base64 characters only'),
      context: z
        .string()
        .min(8)
        .max(8192)
        .regex(/^[A-Za-z0-9+/=_-]+$/, 'base64 characters only'),
      pageurl: url,
      challenge_script: url.optional(),
      captcha_script: url.optional(),
      proxy: browser.proxy.optional(),
      proxytype: browser.proxytype.optional(),
      userAgent: browser.userAgent.optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('datadome'),
    // DataDome ties its cookie to the IP and the browser: the provider must solve through the
    // producer's proxy and user agent (2captcha: both required).
    params: params('datadome', {
      captcha_url: url,
      pageurl: url,
      proxy: browser.proxy,
      proxytype: browser.proxytype,
      userAgent: browser.userAgent.min(1),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('funcaptcha'),
    params: params('funcaptcha', {
      publickey: clean(z.string().min(8).max(128)),
      pageurl: url,
      surl: url.optional(),
      'data[blob]': text(4096).optional(),
      proxy: browser.proxy.optional(),
      proxytype: browser.proxytype.optional(),
      userAgent: browser.userAgent.optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('base64'),
    params: params('base64', {
      body: z
        .string()
        .min(100)
        .max(180_000)
        .regex(/^[A-Za-z0-9+/=\r\n]+$/, 'base64 characters only'),
      textinstructions: text(140).optional(),
      numeric: z.number().int().min(0).max(4).optional(),
      min_len: z.number().int().min(0).max(20).optional(),
      max_len: z.number().int().min(0).max(20).optional(),
      phrase: flag.optional(),
      regsense: flag.optional(),
      calc: flag.optional(),
      language: z.number().int().min(0).max(2).optional(),
      lang: text(8).optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('textcaptcha'),
    params: params('textcaptcha', {
      textcaptcha: clean(z.string().min(1).max(140)),
      language: z.number().int().min(0).max(2).optional(),
      lang: text(8).optional(),
    }),
  }),
]);

export type TaskMessage = z.infer<typeof TaskSchema>;
/** A validated task with its id and submission time settled. */
export type Task = TaskMessage & { id: string; priority: 'normal' | 'high'; submittedAt: number };

/** Why a message was refused; becomes the DLQ reason attribute and the `rejected` record. */
export interface TaskRejection {
  code: 'MALFORMED_JSON' | 'SCHEMA_VIOLATION' | 'UNKNOWN_METHOD' | 'TOO_LARGE';
  reason: string;
  /** The id when one could be read from the message. */
  id: string | undefined;
}

export type ParseTaskResult = { ok: true; task: Task } | { ok: false; rejection: TaskRejection };

/**
 * Validate a raw message body.
 * @param fallbackId used when the message carries no id (the SQS message id).
 * @param fallbackSubmittedAt used when the message carries no submittedAt (SQS SentTimestamp).
 */
export function parseTask(body: string, fallbackId: string, fallbackSubmittedAt: number): ParseTaskResult {
  // A message no check foresaw must still be refused, not thrown: the consumer reads every body of
  // a batch before any starts, so a throw here failed the whole batch, its valid tasks with it
  // (params.constructor did, until the lookups below kept to their own names).
  try {
    return parseTaskUnguarded(body, fallbackId, fallbackSubmittedAt);
  } catch (error) {
    return reject('SCHEMA_VIOLATION', `the message could not be validated (${(error as Error).name})`, undefined);
  }
}

function parseTaskUnguarded(body: string, fallbackId: string, fallbackSubmittedAt: number): ParseTaskResult {
  const bytes = Buffer.byteLength(body, 'utf8');
  if (bytes > MAX_TASK_BYTES) {
    return reject('TOO_LARGE', `message is ${bytes} bytes; the limit is ${MAX_TASK_BYTES}`, readId(body));
  }
  let json: unknown;
  try {
    json = JSON.parse(body);
  } catch (error) {
    return reject('MALFORMED_JSON', `body is not JSON: ${(error as Error).message}`, readId(body));
  }
  const id = readId(json);
  const createTaskShape = createTaskShapeReason(json);
  if (createTaskShape !== undefined) return reject('SCHEMA_VIOLATION', createTaskShape, id);
  if (json !== null && typeof json === 'object' && 'method' in json) {
    const method = (json as { method: unknown }).method;
    if (typeof method === 'string' && !TaskSchema.options.some((option) => option.shape.method.value === method)) {
      return reject(
        'UNKNOWN_METHOD',
        `method "${method.slice(0, 64)}" is not one of ${supportedMethods().join(', ')}`,
        id,
      );
    }
  }
  const parsed = TaskSchema.safeParse(json);
  if (!parsed.success) {
    const reason = taskIssues(parsed.error, json)
      .slice(0, MAX_DESCRIBED_ISSUES)
      .map((issue) => `${issue.path || '(message)'}: ${issue.message}`)
      .join('; ');
    return reject('SCHEMA_VIOLATION', reason, id);
  }
  const message = parsed.data;
  return {
    ok: true,
    task: {
      ...message,
      id: message.id ?? fallbackId,
      priority: message.priority ?? 'normal',
      submittedAt: message.submittedAt ?? fallbackSubmittedAt,
    } as Task,
  };
}

/** Problems of a refused message named in its reason. */
const MAX_DESCRIBED_ISSUES = 5;

/** One problem of a task message: where (`params.pageurl`) and what. */
export interface TaskIssue {
  path: string;
  message: string;
}

/**
 * The problems zod found, one per offending name: a refused parameter name is reported at
 * `params.<name>`, with the name it would be read as (fleet-owned) or the closest allowed one.
 * The producer client and the consumer both word their errors with it.
 */
export function taskIssues(error: z.ZodError, message: unknown): TaskIssue[] {
  const method = (message as { method?: unknown } | null)?.method;
  const known =
    typeof method === 'string' && Object.hasOwn(METHOD_PARAMS, method) ? METHOD_PARAMS[method as Method] : [];
  return error.issues.flatMap((issue) => {
    const path = issue.path.join('.');
    if (issue.code !== 'unrecognized_keys' || path !== 'params') return [{ path, message: issue.message }];
    // The first few are described (each an edit-distance search): a message of 100 000 unknown
    // names took a second of CPU before any task of its batch started.
    return issue.keys.slice(0, MAX_DESCRIBED_ISSUES).map((name) => ({
      path: `params.${name.slice(0, 64)}`,
      message: describeRefusedParam(name, String(method), known),
    }));
  });
}

export function supportedMethods(): SolverMethod[] {
  return TaskSchema.options.map((option) => option.shape.method.value);
}

/** JSON Schema of the task message, as published in `schema/task-v1.schema.json`. */
export function taskJsonSchema(): Record<string, unknown> {
  return {
    ...(z.toJSONSchema(TaskSchema, { target: 'draft-2020-12', io: 'input' }) as Record<string, unknown>),
    $id: 'https://github.com/captcha-fleet/captcha-fleet/schema/task-v1.schema.json',
    title: 'captcha-fleet task message, schema v1',
    description:
      "One CAPTCHA task for the fleet. `id` is the producer's idempotency key: within the result TTL " +
      '(resultTtlSeconds, 86400 s by default) an id names one task (method + params); a resend with the same ' +
      'content gets the first result, other content is refused as ID_CONFLICT. `params` carries only the ' +
      'in.php names listed for the method.',
  };
}

/**
 * Why a message in the JSON task API's shape (`{"task": {"type": "RecaptchaV2TaskProxyless", …}}`)
 * is refused, naming the method to send instead; undefined for any other message. One schema on
 * purpose: one allow-list, one idempotency fingerprint, and the fleet (not the producer) picks the
 * provider and its protocol, so a task written for one provider's type names never pins another.
 */
function createTaskShapeReason(json: unknown): string | undefined {
  if (json === null || typeof json !== 'object' || 'method' in json) return undefined;
  const inner = (json as { task?: unknown }).task;
  const type =
    inner !== null && typeof inner === 'object'
      ? (inner as { type?: unknown }).type
      : (json as { type?: unknown }).type;
  if (typeof type !== 'string') return undefined;
  const method = methodOfTaskType(type);
  const shown = JSON.stringify(type.slice(0, 64));
  return (
    `the createTask shape (task.type ${shown}) is not accepted: send {"method", "params"} with in.php's names` +
    (method !== undefined
      ? ` (${shown} is method "${method}"; allowed params: ${METHOD_PARAMS[method].join(', ')})`
      : '')
  );
}

/** A refusal, its reason printable (it quotes the message: a method, a name, the parser's words about it). */
function reject(code: TaskRejection['code'], reason: string, id: string | undefined): ParseTaskResult {
  return { ok: false, rejection: { code, reason: printable(reason, MAX_REASON_CHARS), id } };
}

/** Longest reason kept, characters (five issues, each naming at most 64 characters of a name). */
const MAX_REASON_CHARS = 2_048;

function readId(value: unknown): string | undefined {
  if (typeof value === 'string') return topLevelId(value.slice(0, 4096));
  if (value !== null && typeof value === 'object' && 'id' in value) {
    const id = (value as { id: unknown }).id;
    if (typeof id === 'string' && TASK_ID_PATTERN.test(id)) return id;
  }
  return undefined;
}

/**
 * The top-level `"id": "<id>"` of a body that does not parse (broken, or too large to), read from
 * its head. Only the message's own: an `"id"` nested in its params is some other task's, and
 * before, a broken message quoting one wrote a `rejected` record and event under that task's id.
 */
function topLevelId(head: string): string | undefined {
  let depth = 0;
  let inString = false;
  let escaped = false;
  let start = 0;
  for (let i = 0; i < head.length; i += 1) {
    const c = head[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') {
        inString = false;
        const match = depth === 1 && head.slice(start, i + 1) === '"id"' ? ID_VALUE.exec(head.slice(i + 1)) : null;
        if (match) return match[1];
      }
    } else if (c === '"') {
      inString = true;
      start = i;
    } else if (c === '{' || c === '[') depth += 1;
    else if (c === '}' || c === ']') depth -= 1;
  }
  return undefined;
}

const ID_VALUE = /^\s*:\s*"([A-Za-z0-9_-]{1,80})"/;
