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
 *
 * `probeKeepSeconds`: refused, the task is not handed back but kept hidden that long, for the
 * governor's next probe to carry again (probe-carrier.ts) without receiving it anew. A starved
 * spell probes every tick: each new receive of the task at the head of the queue counted toward
 * the DLQ, and near it the task went back as a fresh copy at the end of the queue, so every few
 * probes the task that had waited longest went behind all the others (a neighbour holding a
 * 3-thread plan for two hours: 109 such tasks of 1 618, p95 × 1.23 of the parked floor's).
 */
export type ConsumerEvent = SQSEvent & { probe?: boolean; probeKeepSeconds?: number };

/** The longest a refused probe's task may be kept hidden for the next probe, seconds. */
export const PROBE_KEEP_MAX_SECONDS = 300;
/** Seconds a kept task stays hidden past the next tick it waits for (the tick's reads and the invocation). */
const PROBE_KEEP_MARGIN_SECONDS = 10;

/** How long the governor keeps a refused probe's task for its next probe, at ticks `tickMs` apart: two ticks and a margin, seconds. */
export function probeKeepSeconds(tickMs: number): number {
  return Math.min(PROBE_KEEP_MAX_SECONDS, Math.ceil((2 * tickMs) / 1000) + PROBE_KEEP_MARGIN_SECONDS);
}

/** The event's keep, when it is a whole number of seconds in [1, PROBE_KEEP_MAX_SECONDS]; else undefined (handed back at once). */
export function probeKeepOf(event: ConsumerEvent): number | undefined {
  const keep = event.probeKeepSeconds;
  return typeof keep === 'number' && Number.isInteger(keep) && keep >= 1 && keep <= PROBE_KEEP_MAX_SECONDS
    ? keep
    : undefined;
}

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
