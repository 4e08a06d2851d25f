/**
 * The solver's return, between ticks. While the governor is paused for an outage of the solver
 * itself (its balance read got no answer), it reads the balance again every
 * {@link OUTAGE_RECHECK_MS} between ticks and wakes the ticks' loop (tick-wake.ts) at the first
 * read that answers: the fleet resumes at the ceiling it held before the outage about a second
 * after the solver is back, not at the next tick of the cadence, up to a tick later. A balance
 * read is one small request the solver does not bill; nothing else runs while paused. The woken
 * tick is out of the cadence and makes no probe, as the accepted probe's.
 *
 * Only the solver's outage: a pause for a store (DynamoDB, SQS) reads the balance fine, and its
 * trial is the next tick's.
 */
import { OUTAGE_RECHECK_MS } from '../core/governor/config.js';
import type { TickRecord } from './loop.js';

export { OUTAGE_RECHECK_MS };

/** A tick that left the fleet paused for an outage whose balance read got no answer (the solver is down or unreachable). */
export function pausedForSolverOutage(record: Pick<TickRecord, 'decision' | 'signals'>): boolean {
  return (
    record.decision.paused &&
    record.decision.reason.code === 'PAUSE_OUTAGE' &&
    record.signals.balanceError?.kind === 'unreachable'
  );
}

/**
 * Read the solver every `everyMs` (`read`: a balance read, not the tick's cached one) until a
 * read answers: true; false once `signal` aborts (the wait between ticks ended first).
 */
export async function solverAnswersAgain(
  read: (signal: AbortSignal) => Promise<unknown>,
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>,
  signal: AbortSignal,
  everyMs: number = OUTAGE_RECHECK_MS,
): Promise<boolean> {
  for (;;) {
    try {
      await sleep(everyMs, signal);
    } catch {
      return false;
    }
    if (signal.aborted) return false;
    try {
      await read(signal);
      return !signal.aborted;
    } catch {
      // Still down: the next read.
    }
  }
}

/**
 * After a tick: while it left the fleet paused for the solver's outage, read the solver between
 * ticks and call `wake` at the first answer (unless `stop` comes first). Returns the stop.
 */
export function recheckSolverAfter(
  record: Pick<TickRecord, 'decision' | 'signals'> | undefined,
  options: {
    read: ((signal: AbortSignal) => Promise<unknown>) | undefined;
    sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
    wake: () => void;
    everyMs?: number;
  },
): () => void {
  const { read } = options;
  if (record === undefined || read === undefined || !pausedForSolverOutage(record)) return () => undefined;
  const controller = new AbortController();
  void solverAnswersAgain(read, options.sleep, controller.signal, options.everyMs).then((back) => {
    if (back && !controller.signal.aborted) options.wake();
  });
  return () => controller.abort();
}
