/**
 * What one delivery of a task hands to the next inside the message itself, when the results
 * table cannot take it: the fleet's redelivery attribute on a fresh copy of the message. It
 * keeps the task's identity across copies (the id a body without one was claimed under, the
 * first send and receive times) and may carry a paid submission's id and an answer read but not
 * yet recorded, sealed with the key of the provider that holds them (ports' CarrySeal), so a
 * producer cannot forge one. Pure: parsing, bounds and the sealed text; no I/O.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { PROVIDERS, type SolverProvider } from './provider.js';
import { SOLVER_ID_PATTERN } from './solver-protocol.js';
import { TASK_ID_PATTERN } from './task.js';

/** Name of the message attribute (one attribute: SQS allows ten per message). */
export const REDELIVERY_ATTRIBUTE = 'captcha-fleet';

/** Longest answer a copy carries, bytes (the solver client reads at most 64 KiB). */
export const MAX_CARRIED_ANSWER_BYTES = 64 * 1024;

/** A submission (and maybe its answer) handed to the next delivery. */
export interface Carry {
  /** Who accepted the submission: only a consumer that can poll that provider resumes it. */
  provider: SolverProvider;
  solverId: string;
  /** Epoch ms the solver accepted it. */
  acceptedAt: number;
  /** The answer, when it was read and could not be recorded. */
  answer?: string;
  /** Epoch ms the answer was read. */
  answeredAt?: number;
  /** The seal: MAC of `carryText(…)` with the provider's key. */
  mac: string;
}

/** The redelivery attribute's content. */
export interface Redelivery {
  v: 1;
  /** The id the task was claimed under (the first message's id when the body has none). */
  taskId: string;
  /** The first message's SentTimestamp, epoch ms. */
  sentAt: number;
  /** The earliest receive of any copy, epoch ms (token expiry counts from it). */
  firstReceivedAt: number;
  /** Copies made because deliveries kept failing (crashes, timeouts): bounded. */
  generation: number;
  /** Copies made while a store or the holding lane was away (waiting, not failing): not bounded. */
  waits: number;
  carry?: Carry;
}

const epochMs = z.number().int().min(0).max(8_640_000_000_000_000);

const RedeliverySchema = z.strictObject({
  v: z.literal(1),
  taskId: z.string().regex(TASK_ID_PATTERN),
  sentAt: epochMs,
  firstReceivedAt: epochMs,
  generation: z.number().int().min(0).max(1000),
  waits: z.number().int().min(0).max(1_000_000),
  carry: z
    .strictObject({
      provider: z.enum(PROVIDERS),
      solverId: z.string().regex(SOLVER_ID_PATTERN),
      acceptedAt: epochMs,
      answer: z.string().max(MAX_CARRIED_ANSWER_BYTES).optional(),
      answeredAt: epochMs.optional(),
      mac: z.string().regex(/^[0-9a-f]{64}$/),
    })
    .optional(),
});

/**
 * Read the attribute; undefined when absent or not the fleet's (a producer's attribute of the
 * same name is untrusted input: anything that does not parse is ignored, and a carry is used
 * only once its seal is verified).
 */
export function parseRedelivery(value: string | undefined): Redelivery | undefined {
  if (value === undefined || value.length > MAX_CARRIED_ANSWER_BYTES * 2) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    return undefined;
  }
  const parsed = RedeliverySchema.safeParse(json);
  return parsed.success ? (parsed.data as Redelivery) : undefined;
}

/**
 * The text a carry's seal covers: the message body's digest (a seal moved onto another task's
 * message does not verify), the task id and every carried field.
 */
export function carryText(body: string, taskId: string, carry: Omit<Carry, 'mac'>): string {
  const digest = createHash('sha256').update(body).digest('hex');
  return JSON.stringify([
    'captcha-fleet carry v1',
    digest,
    taskId,
    carry.provider,
    carry.solverId,
    carry.acceptedAt,
    carry.answer ?? null,
    carry.answeredAt ?? null,
  ]);
}

/** Whether an answer travels in a copy (else only its submission's id: the next delivery reads it again). */
export function answerFitsCarry(answer: string): boolean {
  return Buffer.byteLength(answer) <= MAX_CARRIED_ANSWER_BYTES;
}
