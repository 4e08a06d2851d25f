/**
 * The consumer's timing as the lab replays it, with the consumer's and the solver client's own
 * backoff functions (functions/core/backoff.ts): the solver client's retry wait inside an
 * invocation, the visibility of a handed-back message, and a pool worker's retry wait.
 */
import { handBackSeconds, retryBackoffMs } from '../../functions/core/backoff.js';
import type { ModelParams } from '../model.js';
import type { Rng } from '../rng.js';

/** Waiting invocations drawn for the first reads after a thread frees (ConsumerTiming.firstReads). */
const FIRST_READS_DRAWN = 32;

export class ConsumerTiming {
  private readonly random: () => number;
  private readonly retry;
  private readonly handBack;
  private readonly accountHandBack;

  constructor(
    private readonly model: ModelParams,
    rng: Rng,
  ) {
    this.random = () => rng.uniform();
    // The lab keeps its times in seconds; the formulas do not care about the unit.
    this.retry = {
      maxOverCapRetries: model.consumerMaxOverCapRetries,
      maxTransientRetries: model.consumerMaxTransientRetries,
      baseBackoffMs: model.consumerBackoffBaseSeconds,
      maxBackoffMs: model.consumerBackoffMaxSeconds,
    };
    this.handBack = { baseSeconds: model.handBackBaseSeconds, maxSeconds: model.handBackMaxSeconds };
    this.accountHandBack = {
      baseSeconds: model.accountHandBackBaseSeconds,
      maxSeconds: model.accountHandBackMaxSeconds,
    };
  }

  /** The solver client's wait before retry `attempt` (0-based), seconds. */
  retryDelay(attempt: number): number {
    return retryBackoffMs(attempt, this.retry, this.random);
  }

  /** Visibility of a message handed back after its `receives`-th receive, seconds. */
  handBackDelay(receives: number, account: boolean): number {
    return handBackSeconds(receives, account ? this.accountHandBack : this.handBack, this.random);
  }

  /** A pool worker's wait before resubmitting after `attempt` failed answers (1-based), seconds. */
  poolRetryDelay(attempt: number): number {
    const m = this.model;
    const wait = Math.min(m.backoffMaxSeconds, m.backoffBaseSeconds * 2 ** Math.min(30, attempt - 1));
    return wait * (0.5 + this.random());
  }

  /** The consumer's wait between ledger reads while the fleet holds the whole plan: 1 s × [0.5, 1.5). */
  ledgerPollDelay(): number {
    return 0.5 + this.random();
  }

  /**
   * The parked consumer's wait between shard reads while every open slot is held: its cadence
   * for the shards as they are (`cadenceSeconds`, ParkedWorld.waitPollSeconds) × [0.5, 1.5) (LeaseHolding.take).
   */
  leasePollDelay(cadenceSeconds: number): number {
    return cadenceSeconds * (0.5 + this.random());
  }

  /**
   * When `count` waiting invocations find a freed thread, seconds from now, earliest first: the
   * first `count` of the next reads of `waiters` invocations that each read on their own cadence
   * (`cycle()`, one jittered period), each at a uniform point of its period. At most
   * FIRST_READS_DRAWN waiters are drawn: a larger crowd reads no later than that many would.
   */
  firstReads(waiters: number, count: number, cycle: () => number): number[] {
    const n = Math.max(1, Math.min(waiters, FIRST_READS_DRAWN));
    if (count <= 1) {
      let first = Number.POSITIVE_INFINITY;
      for (let k = 0; k < n; k++) first = Math.min(first, cycle() * this.random());
      return [first];
    }
    const reads = Array.from({ length: n }, () => cycle() * this.random());
    reads.sort((a, b) => a - b);
    return reads.slice(0, Math.min(count, n));
  }

  /** A probe's solve time: exponential with the mix's mean, seconds. */
  probeSolveSeconds(meanSeconds: number): number {
    return -Math.log(this.random()) * meanSeconds;
  }

  /** A uniform draw in (0, 1) from the same stream (poll phases). */
  uniform(): number {
    return this.random();
  }
}
