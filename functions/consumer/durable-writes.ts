/**
 * Writes that must not be lost once the solver has been paid: the submission's id (so a later
 * delivery resumes it instead of paying again) and the terminal record (so an answer read is
 * never thrown away). Both are retried inside the invocation while the store is throttled or
 * unavailable; what still cannot be written is handed on in a fresh copy of the message (see
 * outcome.ts, `sendCopy`).
 */
import { sleep } from '../core/helpers/time.js';
import { type Clock, isStoreError } from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import type { ConsumerTiming } from './context.js';
import { describe, type RecordLog } from './delivery.js';

/** Store failures worth retrying: a throttle or an outage may pass; an item too large never will. */
function retryable(error: unknown): boolean {
  return isStoreError(error) && error.kind !== 'too_large';
}

/**
 * Run `write` until it succeeds, fails for good (not a store failure, or too large), or the next
 * wait would end past `until`; the waits double from `firstMs` to `maxMs`. The last error is thrown.
 */
export async function retryWrite<T>(
  write: () => Promise<T>,
  options: { until: number; clock: Clock; timing: ConsumerTiming['writeRetry']; wait?: (ms: number) => Promise<void> },
): Promise<T> {
  const wait = options.wait ?? sleep;
  let pause = options.timing.firstMs;
  for (;;) {
    try {
      return await write();
    } catch (error) {
      if (!retryable(error) || options.clock() + pause >= options.until) throw error;
      await wait(pause);
      pause = Math.min(options.timing.maxMs, pause * 2);
    }
  }
}

/** What the keeper needs of its delivery. */
export interface SolverIdKeeperOptions {
  /**
   * One write of the id under the delivery's claim: true when written, false when the claim is
   * lost. `park`: the write also gives the claim up (the task parks once it is written).
   */
  write: (solverId: string, provider: SolverProvider, acceptedAt: number, park: boolean) => Promise<boolean>;
  /** The claim is gone: stop the solve. */
  onClaimLost: () => void;
  /** The id is still unwritten after `carryAfterMs`: hand it on in the message (once). */
  onUnrecorded: (solverId: string, provider: SolverProvider, acceptedAt: number) => Promise<void>;
  clock: Clock;
  timing: Pick<ConsumerTiming, 'writeRetry' | 'solverIdCarryAfterMs'>;
  /** Writes stop by then (the invocation's end, less its margin). */
  until: number;
  log: RecordLog;
  wait?: (ms: number) => Promise<void>;
}

/**
 * Keeps a paid submission's id: writes it beside the solve (the solve never waits for it), retries
 * while the table is throttled or down, and hands it on in a fresh copy of the message when it
 * stays unwritten, so a crash from then on still resumes the submission.
 */
export class SolverIdKeeper {
  private running: Promise<void> | undefined;
  /** The id of the current submission, and the ids a write put on the record. */
  private current: string | undefined;
  private readonly recordedIds = new Set<string>();
  private stopped = false;
  /** The current submission's number: an older one's loop stops when a newer one starts. */
  private generation = 0;

  constructor(private readonly options: SolverIdKeeperOptions) {}

  /** Whether the current submission's id is on the record. */
  get recorded(): boolean {
    return this.current !== undefined && this.recordedIds.has(this.current);
  }

  /**
   * Keep this submission's id; a resubmission supersedes the previous one (its retries stop).
   * `park`: the write gives the claim up too (see `recordedWithin`).
   */
  keep(solverId: string, provider: SolverProvider, acceptedAt: number, options: { park?: boolean } = {}): void {
    this.current = solverId;
    const generation = ++this.generation;
    const previous = this.running ?? Promise.resolve();
    const loop = this.loop(solverId, provider, acceptedAt, generation, options.park === true);
    this.running = Promise.all([previous, loop]).then(() => undefined);
  }

  /**
   * Wait at most `ms` for the current id's write; then stop retrying it and wait for an attempt
   * in flight. True when the id is on the record (for a parking write: the claim is given up),
   * false when it is not (and no attempt can land later).
   */
  async recordedWithin(ms: number): Promise<boolean> {
    const wait = this.options.wait ?? sleep;
    if (!this.recorded) await Promise.race([this.running, wait(ms)]);
    if (this.recorded) return true;
    this.generation += 1;
    await this.running;
    return this.recorded;
  }

  /** Stop retrying (the terminal record is about to carry the id) and wait for a write in flight. */
  async settle(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  private async loop(
    solverId: string,
    provider: SolverProvider,
    acceptedAt: number,
    generation: number,
    park: boolean,
  ): Promise<void> {
    const { clock, timing, until, log } = this.options;
    const wait = this.options.wait ?? sleep;
    let pause = timing.writeRetry.firstMs;
    let carried = false;
    // Until the id is on the record, a crash costs a second payment: if the write fails, or has
    // not answered within `solverIdCarryAfterMs`, the id also goes into a fresh copy of the message.
    const carry = async () => {
      if (carried) return;
      carried = true;
      await this.options.onUnrecorded(solverId, provider, acceptedAt);
    };
    const current = () => !this.stopped && generation === this.generation;
    const slow = setTimeout(
      () => void (this.recordedIds.has(solverId) || !current() ? undefined : carry()),
      timing.solverIdCarryAfterMs,
    );
    try {
      for (let attempt = 1; current(); attempt++) {
        try {
          if (!(await this.options.write(solverId, provider, acceptedAt, park))) return this.options.onClaimLost();
          this.recordedIds.add(solverId);
          if (attempt > 1) log.info('solver id recorded after retries', { solverId, attempts: attempt });
          return;
        } catch (error) {
          if (attempt === 1)
            log.warn('solver id not recorded yet; polling on and retrying', { solverId, error: describe(error) });
          await carry();
          if (!retryable(error) || clock() + pause >= until) return;
        }
        await wait(pause);
        pause = Math.min(timing.writeRetry.maxMs, pause * 2);
      }
    } finally {
      clearTimeout(slow);
    }
  }
}
