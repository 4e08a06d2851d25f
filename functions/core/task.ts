/**
 * Task message, schema v1: what producers send. Parameter names are the solver protocol's own,
 * so producers coming from the usual Redis scripts change only their transport.
 * The published JSON Schema (`schema/task-v1.schema.json`) is generated from this file and a
 * test keeps the two in step (`npm run schema` rewrites it).
 */
import { z } from 'zod';
import type { SolverMethod } from './solver-protocol.js';

/** Largest task message accepted, bytes of UTF-8 JSON. */
export const MAX_TASK_BYTES = 200 * 1024;
/** Task ids: the SQS message id alphabet plus the 8-char ids of the usual Redis scripts. */
export const TASK_ID_PATTERN = /^[A-Za-z0-9_-]{1,80}$/;

const url = z.url({ protocol: /^https?$/ }).max(2048);
const siteKey = z
  .string()
  .min(8)
  .max(256)
  .regex(/^[A-Za-z0-9_\-.:]+$/, 'letters, digits, _ - . : only');
const flag = z.union([z.literal(0), z.literal(1)]);
/** Extra protocol parameters (proxy, userAgent, cookies, …) pass through verbatim. */
const extra = z.union([z.string().max(4096), z.number(), z.boolean()]);
const RESERVED = ['key', 'json', 'method', 'soft_id', 'header_acao', 'pingback'] as const;

function params<T extends z.ZodRawShape>(shape: T) {
  // Reserved names are declared as never-present so the published JSON Schema forbids them too.
  const reserved = Object.fromEntries(
    RESERVED.map((name) => [name, z.never({ error: `"${name}" is set by the fleet, not by the task` }).optional()]),
  ) as Record<(typeof RESERVED)[number], z.ZodOptional<z.ZodNever>>;
  return z.object({ ...shape, ...reserved }).catchall(extra);
}

const common = {
  id: z.string().regex(TASK_ID_PATTERN, 'id: 1-80 of A-Z a-z 0-9 _ -').optional(),
  priority: z.enum(['normal', 'high']).optional(),
  submittedAt: z.number().int().min(0).max(8_640_000_000_000_000).optional(),
};

export const TaskSchema = z.discriminatedUnion('method', [
  z.object({
    ...common,
    method: z.literal('userrecaptcha'),
    params: params({
      googlekey: siteKey,
      pageurl: url,
      version: z.enum(['v2', 'v3']).optional(),
      action: z.string().max(256).optional(),
      min_score: z.number().min(0.1).max(0.9).optional(),
      invisible: flag.optional(),
      enterprise: flag.optional(),
      'data-s': z.string().max(4096).optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('turnstile'),
    params: params({
      sitekey: siteKey,
      pageurl: url,
      action: z.string().max(256).optional(),
      data: z.string().max(4096).optional(),
      pagedata: z.string().max(4096).optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('hcaptcha'),
    params: params({
      sitekey: siteKey,
      pageurl: url,
      invisible: flag.optional(),
      data: z.string().max(4096).optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('geetest'),
    params: params({
      gt: z.string().min(8).max(64),
      challenge: z.string().min(8).max(128),
      pageurl: url,
      api_server: z.string().max(256).optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('funcaptcha'),
    params: params({ publickey: z.string().min(8).max(128), pageurl: url, surl: url.optional() }),
  }),
  z.object({
    ...common,
    method: z.literal('base64'),
    params: params({
      body: z
        .string()
        .min(100)
        .max(180_000)
        .regex(/^[A-Za-z0-9+/=\r\n]+$/, 'base64 characters only'),
      textinstructions: z.string().max(140).optional(),
      numeric: z.number().int().min(0).max(4).optional(),
      min_len: z.number().int().min(0).max(20).optional(),
      max_len: z.number().int().min(0).max(20).optional(),
      phrase: flag.optional(),
      regsense: flag.optional(),
      calc: flag.optional(),
      language: z.number().int().min(0).max(2).optional(),
      lang: z.string().max(8).optional(),
    }),
  }),
  z.object({
    ...common,
    method: z.literal('textcaptcha'),
    params: params({ textcaptcha: z.string().min(1).max(140), lang: z.string().max(8).optional() }),
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
    const reason = parsed.error.issues
      .slice(0, 5)
      .map((issue) => `${issue.path.join('.') || '(message)'}: ${issue.message}`)
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

export function supportedMethods(): SolverMethod[] {
  return TaskSchema.options.map((option) => option.shape.method.value);
}

/** JSON Schema of the task message, as published in `schema/task-v1.schema.json`. */
export function taskJsonSchema(): Record<string, unknown> {
  return {
    ...(z.toJSONSchema(TaskSchema, { target: 'draft-2020-12', io: 'input' }) as Record<string, unknown>),
    $id: 'https://github.com/captcha-fleet/captcha-fleet/schema/task-v1.schema.json',
    title: 'captcha-fleet task message, schema v1',
  };
}

function reject(code: TaskRejection['code'], reason: string, id: string | undefined): ParseTaskResult {
  return { ok: false, rejection: { code, reason, id } };
}

function readId(value: unknown): string | undefined {
  if (typeof value === 'string') {
    const match = /"id"\s*:\s*"([A-Za-z0-9_-]{1,80})"/.exec(value.slice(0, 4096));
    return match?.[1];
  }
  if (value !== null && typeof value === 'object' && 'id' in value) {
    const id = (value as { id: unknown }).id;
    if (typeof id === 'string' && TASK_ID_PATTERN.test(id)) return id;
  }
  return undefined;
}
