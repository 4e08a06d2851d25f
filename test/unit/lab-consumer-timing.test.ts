/**
 * The lab's consumer timing (lab/sim/consumer.ts): when the invocations waiting for a thread find
 * one that freed. Each waiting invocation reads on its own jittered cadence (LeaseHolding.take),
 * so a freed thread is found at the first of their next reads, not at one waiter's: against the
 * closed forms of uniform order statistics (the k-th smallest of n uniforms on [0, c) has mean
 * k·c / (n + 1)).
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_MODEL } from '../../lab/model.js';
import { Rng } from '../../lab/rng.js';
import { ConsumerTiming } from '../../lab/sim/consumer.js';

const CADENCE = 0.25;
const DRAWS = 4000;

function timing(seed = 11): ConsumerTiming {
  return new ConsumerTiming(DEFAULT_MODEL, new Rng(seed));
}

/** The mean of each rank of `firstReads` over many draws. */
function meanReads(waiters: number, count: number, cycle: () => number, consumer = timing()): number[] {
  const sums = new Array<number>(count).fill(0);
  for (let i = 0; i < DRAWS; i++) {
    const reads = consumer.firstReads(waiters, count, cycle);
    for (const [k, read] of reads.entries()) sums[k] = (sums[k] ?? 0) + read;
  }
  return sums.map((sum) => sum / DRAWS);
}

describe('the first reads of the invocations waiting for a freed thread', () => {
  it('gives one read a woken waiter, earliest first, each within one of its periods', () => {
    // GIVEN a consumer timing WHEN 9 waiters wake for 3 freed threads on the jittered lease cadence
    const consumer = timing();
    for (let i = 0; i < 200; i++) {
      const reads = consumer.firstReads(9, 3, () => consumer.leasePollDelay(CADENCE));
      // THEN three reads, ascending, none later than the longest jittered period
      expect(reads).toHaveLength(3);
      expect([...reads].sort((a, b) => a - b)).toEqual(reads);
      for (const read of reads) {
        expect(read).toBeGreaterThanOrEqual(0);
        expect(read).toBeLessThan(1.5 * CADENCE);
      }
    }
    // AND never more reads than waiters, and at least one (a thread freed with one waiter left)
    expect(consumer.firstReads(2, 5, () => CADENCE)).toHaveLength(2);
    expect(consumer.firstReads(1, 0, () => CADENCE)).toHaveLength(1);
  });

  it('finds the thread half a cadence after it freed with one waiter, as the one-waiter model did', () => {
    // GIVEN one waiter on the jittered cadence WHEN a thread frees THEN its read comes c / 2 later on average
    const consumer = timing();
    const [first] = meanReads(1, 1, () => consumer.leasePollDelay(CADENCE), consumer);
    expect(first).toBeGreaterThan(0.47 * CADENCE);
    expect(first).toBeLessThan(0.53 * CADENCE);
  });

  it('finds it at the first of several waiters’ reads: the k-th of n at k·c / (n + 1)', () => {
    // GIVEN 9 waiters each reading every c at its own phase WHEN 3 threads free at once
    const means = meanReads(9, 3, () => CADENCE);
    // THEN the first is found c / 10 later on average, the second 2c / 10, the third 3c / 10 (not c / 2 each)
    for (const [k, mean] of means.entries()) {
      const expected = ((k + 1) * CADENCE) / 10;
      expect(mean).toBeGreaterThan(0.93 * expected);
      expect(mean).toBeLessThan(1.07 * expected);
    }
  });

  it('draws a crowd of waiters as 32: no read earlier than 32 waiters would make', () => {
    // GIVEN a thousand waiters WHEN a thread frees THEN the first read is as 32 waiters' (c / 33), not c / 1001
    const [first] = meanReads(1000, 1, () => CADENCE);
    expect(first).toBeGreaterThan(0.9 * (CADENCE / 33));
    expect(first).toBeLessThan(1.1 * (CADENCE / 33));
  });
});
