/**
 * The overflow lane's ceiling over its two mappings (functions/governor/overflow-step.ts):
 * normal only while the primary serves, the high queue too while the primary is paused, and
 * never more than the decision's ceiling in all.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAPPING_MIN_CONCURRENCY } from '../../functions/core/settings.js';
import { splitOverflowCeiling } from '../../functions/governor/overflow-step.js';

const open = (ceiling: number) => ({ ceiling, enabled: true });

describe('splitOverflowCeiling', () => {
  it('gives the whole ceiling to the normal queue while the primary serves, whatever waits on the high one', () => {
    const split = splitOverflowCeiling(open(10), false, { normal: 50, high: 50 }, true);

    expect(split).toEqual({ ceilings: { normal: 10, high: 2 }, enabled: { normal: true, high: false } });
  });

  it('shares the ceiling by backlog while the primary is paused, rounding the high share up', () => {
    const split = splitOverflowCeiling(open(10), true, { normal: 70, high: 30 }, true);

    expect(split).toEqual({ ceilings: { normal: 7, high: 3 }, enabled: { normal: true, high: true } });
  });

  it('gives a ceiling too narrow for two mappings to the high queue while the primary is paused', () => {
    const split = splitOverflowCeiling(open(3), true, { normal: 70, high: 1 }, true);

    expect(split).toEqual({ ceilings: { normal: 2, high: 3 }, enabled: { normal: false, high: true } });
  });

  it('keeps the normal mapping open at the floor while the high queue holds all the backlog', () => {
    const split = splitOverflowCeiling(open(8), true, { normal: 0, high: 40 }, true);

    expect(split).toEqual({ ceilings: { normal: 2, high: 6 }, enabled: { normal: true, high: true } });
  });

  it('leaves the high mapping closed without one, without a high backlog, or with the lane closed', () => {
    expect(splitOverflowCeiling(open(8), true, { normal: 5, high: 40 }, false).enabled.high).toBe(false);
    expect(splitOverflowCeiling(open(8), true, { normal: 5, high: 0 }, true).enabled.high).toBe(false);
    expect(splitOverflowCeiling(open(8), true, { normal: 5, high: undefined }, true).enabled.high).toBe(false);
    expect(splitOverflowCeiling({ ceiling: 2, enabled: false }, true, { normal: 5, high: 9 }, true).enabled).toEqual({
      normal: false,
      high: false,
    });
  });

  it('never opens more than the decision allows in all, each open mapping at least the floor', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: MAPPING_MIN_CONCURRENCY, max: 1000 }),
        fc.boolean(),
        fc.boolean(),
        fc.option(fc.nat(100_000), { nil: undefined }),
        fc.option(fc.nat(100_000), { nil: undefined }),
        fc.boolean(),
        (ceiling, enabled, paused, normal, high, hasHigh) => {
          const split = splitOverflowCeiling({ ceiling, enabled }, paused, { normal, high }, hasHigh);
          const lanes = ['normal', 'high'] as const;
          const openSum = lanes.reduce((sum, lane) => sum + (split.enabled[lane] ? split.ceilings[lane] : 0), 0);
          expect(openSum).toBeLessThanOrEqual(enabled ? ceiling : 0);
          for (const lane of lanes) expect(split.ceilings[lane]).toBeGreaterThanOrEqual(MAPPING_MIN_CONCURRENCY);
          // The high queue only while the primary is paused, there is a high mapping and a high backlog.
          if (split.enabled.high) expect(paused && hasHigh && (high ?? 0) > 0).toBe(true);
          // An open lane always takes something.
          if (enabled) expect(openSum).toBeGreaterThan(0);
        },
      ),
    );
  });
});
