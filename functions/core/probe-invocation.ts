/**
 * The consumer invocation the governor's probe makes with a waiting task (docs/governor.md,
 * "Neighbours"): the governor receives one message and invokes the consumer with it, flagged, so
 * that the task's own submission is the probe (functions/consumer/create-handler.ts,
 * functions/governor/probe-carrier.ts). The contract both sides keep.
 */
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';

/**
 * The consumer's event: Lambda's SQS event, and for the probe's invocation the flag. Only the
 * governor sets it (its role's `lambda:InvokeFunction`; the event source mapping never does); a
 * flagged event of more than one record is handled as a plain batch.
 */
export type ConsumerEvent = SQSEvent & { probe?: boolean };

/** What the solver answered the probe's submission: `none` when it made none (a malformed task, one already solved, no probe slot or money). */
export const PROBE_ANSWERS = ['accepted', 'refused', 'none'] as const;
export type ProbeAnswer = (typeof PROBE_ANSWERS)[number];

/** The consumer's answer: the partial batch response, and for the probe's invocation the solver's answer to it. */
export type ConsumerResponse = SQSBatchResponse & { probe?: ProbeAnswer };

/** The probe's answer in a consumer's response, or undefined when it holds none (or not one of PROBE_ANSWERS). */
export function probeAnswerOf(response: unknown): ProbeAnswer | undefined {
  if (typeof response !== 'object' || response === null) return undefined;
  const answer = (response as { probe?: unknown }).probe;
  return PROBE_ANSWERS.find((known) => known === answer);
}
