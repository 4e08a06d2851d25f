/**
 * The parked design's mapping maxima ("submitters"). A parked task's thread is held by a thread
 * lease, not by an invocation: an invocation only claims, takes a lease, submits and parks (about
 * half a second), and the governor's watch records the answer. So the mappings need as many
 * invocations as fill the slots open now and keep up with the slots that free, not one per thread:
 * more would wait for a slot (billed Lambda time) or hand their task back (a receive toward the
 * DLQ) while the plan is full. The thread ceilings (the slots) stay the decision's `ceilings`.
 * Pure.
 */
import { MAPPING_MIN_CONCURRENCY } from '../settings.js';
import { clamp } from './capacity.js';
import type { Lane } from './types.js';

/** Seconds an invocation of the parked design takes to claim, lease, submit and park a task. */
export const PARKED_SUBMIT_SECONDS = 0.5;
/** Mean solve time assumed before the metrics have one, seconds (the protocol's token types). */
export const PARKED_DEFAULT_SOLVE_SECONDS = 15;

/** What the sizing reads. */
export interface SubmittersInput {
  /** The decision's lanes: thread ceilings (invocations × tasks per invocation) and which consume. */
  ceilings: Record<Lane, number>;
  enabled: Record<Lane, boolean>;
  tasksPerInvocation: number;
  /** Threads the fleet holds now (its live leases); undefined when unread. */
  held: number | undefined;
  /** Tasks waiting in the queues; undefined when unread (the ceilings then stand). */
  backlog: number | undefined;
  meanSolveMs: number | undefined;
  /**
   * Answers read per second since the previous tick (the thread ledger's `solved` counter: every
   * answer frees its slot); undefined when unknown. The slots free at least this fast whatever
   * the mean says: a mean over a window that holds an outage's end counts the outage in each
   * solve parked through it (minutes), while the answers ready meanwhile free their slots at once.
   */
  answeredPerSecond?: number;
}

/** The thread ledger's count of answers read, as a tick saw it (the next tick's rate is the rise since). */
export interface AnswersSeen {
  solved: number;
  /** Epoch ms of the tick. */
  at: number;
}

/**
 * Answers read per second between the tick that saw `before` and this one (`solved` at `now`);
 * undefined without both readings, or when the counter went back (a ledger item recreated).
 */
export function answeredPerSecond(before: AnswersSeen | undefined, solved: number | undefined, now: number) {
  if (before === undefined || solved === undefined || now <= before.at || solved < before.solved) return undefined;
  return ((solved - before.solved) * 1000) / (now - before.at);
}

/**
 * Each lane's mapping maximum in the parked design: the open slots now plus twice the invocations
 * that keep up with the slots freeing (held ÷ mean solve per second, or the answers read per
 * second since the last tick where that is more, each half a second to fill),
 * within [floor, ceiling] per lane, split over the enabled lanes in proportion to their ceilings.
 * So an arrival finds an invocation for every open slot at once, and on a full plan a few
 * invocations take the slots as they free, with or without a backlog: before, a full plan with
 * nothing waiting in the queue kept its ceilings, and each arrival started an invocation that
 * waited in Lambda (billed) for a slot instead of in the queue (free). With a signal unknown the
 * ceilings stand.
 */
export function parkedSubmitters(input: SubmittersInput): Record<Lane, number> {
  const { ceilings, enabled, tasksPerInvocation, held, backlog } = input;
  const lanes = (['normal', 'high'] as const).filter((lane) => enabled[lane]);
  const total = lanes.reduce((sum, lane) => sum + ceilings[lane], 0);
  if (held === undefined || backlog === undefined || total === 0) return { ...ceilings };
  const threads = total * tasksPerInvocation;
  const open = Math.max(0, threads - held);
  const solveSeconds = (input.meanSolveMs ?? PARKED_DEFAULT_SOLVE_SECONDS * 1000) / 1000;
  const freeing = Math.max(held / Math.max(1, solveSeconds), input.answeredPerSecond ?? 0);
  const need = Math.ceil((open + 2 * freeing * PARKED_SUBMIT_SECONDS) / tasksPerInvocation - 1e-9);
  const out: Record<Lane, number> = { ...ceilings };
  for (const lane of lanes) {
    const share = Math.ceil((need * ceilings[lane]) / total - 1e-9);
    out[lane] = clamp(share, Math.min(MAPPING_MIN_CONCURRENCY, ceilings[lane]), ceilings[lane]);
  }
  return out;
}
