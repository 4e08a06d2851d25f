/**
 * The watch's metrics batch (functions/governor/metrics-batch.ts): the recorded solves' metrics
 * published once a batch, when the oldest is due or at the end of the run, never thrown.
 */
import { describe, expect, it } from 'vitest';
import { createMetricsBatch } from '../../functions/governor/metrics-batch.js';

describe('the watch’s metrics batch', () => {
  it('publishes once when the oldest solve is due, not once a solve', async () => {
    // Prepare
    let now = 0;
    let published = 0;
    const batch = createMetricsBatch({
      metrics: { publishStoredMetrics: () => published++ },
      flushMs: 5_000,
      clock: () => now,
    });
    // Act: three solves over 4 s, then the fifth second.
    for (const at of [0, 2_000, 4_000]) {
      now = at;
      batch.add();
      await batch.flushIfDue();
    }
    expect(published).toBe(0);
    now = 5_000;
    await batch.flushIfDue();
    // Assess
    expect(published).toBe(1);
    expect(batch.stats).toEqual({ documents: 1, solves: 3 });
    // Nothing waits: neither a due check nor the end publishes an empty document.
    now = 20_000;
    await batch.flushIfDue();
    await batch.flush();
    expect(published).toBe(1);
  });

  it('publishes what waits at the end of the run, and a failed publish never reaches the watch', async () => {
    let calls = 0;
    const batch = createMetricsBatch({
      metrics: {
        publishStoredMetrics: () => {
          calls++;
          throw new Error('stdout closed');
        },
      },
      flushMs: 5_000,
      clock: () => 0,
    });
    batch.add();
    await expect(batch.flush()).resolves.toBeUndefined();
    expect(calls).toBe(1);
  });
});
