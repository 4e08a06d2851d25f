import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { backoffSeconds } from '../../functions/consumer/create-handler.js';

describe('backoffSeconds', () => {
  it('doubles the ceiling with each receive up to the cap, with equal jitter', () => {
    expect([1, 2, 3, 4, 5, 6].map((receive) => backoffSeconds(receive, 5, 60, () => 1))).toEqual([
      5, 10, 20, 40, 60, 60,
    ]);
    expect([1, 2, 3, 4, 5, 6].map((receive) => backoffSeconds(receive, 5, 60, () => 0))).toEqual([
      3, 5, 10, 20, 30, 30,
    ]);
  });

  it('stays within [ceiling / 2, ceiling] and never exceeds 12 hours', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 1000 }),
        fc.integer({ min: 0, max: 600 }),
        fc.integer({ min: 0, max: 100_000 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (receive, base, max, r) => {
          const ceiling = Math.min(max, base * 2 ** (receive - 1));
          const delay = backoffSeconds(receive, base, max, () => r);
          expect(delay).toBeGreaterThanOrEqual(Math.min(43_200, Math.ceil(ceiling / 2)));
          expect(delay).toBeLessThanOrEqual(Math.min(43_200, Math.ceil(ceiling)));
        },
      ),
    );
  });

  it('is 0 when the base is 0 (tests and immediate retries)', () => {
    expect(backoffSeconds(7, 0, 300)).toBe(0);
  });
});
