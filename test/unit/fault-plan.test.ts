import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  describeFaultPlan,
  drawFaultMix,
  FAULT_KINDS,
  type FaultWindow,
  faultPlanEndMs,
  FaultSpecError,
  parseFaultSpec,
} from '../../local/faults/plan.js';

/** The share of a window that one outage (5xx at rate 1) on its own service covers. */
function hiddenShare(window: FaultWindow, windows: readonly FaultWindow[]): number {
  if (window.kind === 'unavailable') return 0;
  let covered = 0;
  for (const o of windows)
    if (o !== window && o.kind === 'unavailable' && o.rate === 1 && o.service === window.service)
      covered = Math.max(
        covered,
        Math.min(o.startMs + o.durationMs, window.startMs + window.durationMs) - Math.max(o.startMs, window.startMs),
      );
  return covered / window.durationMs;
}

describe('drawn fault mixes', () => {
  it('are the same for a seed and differ between seeds', () => {
    const horizonMs = 90_000;
    expect(drawFaultMix(7, { horizonMs })).toEqual(drawFaultMix(7, { horizonMs }));
    expect(drawFaultMix(7, { horizonMs })).not.toEqual(drawFaultMix(8, { horizonMs }));
  });

  it('stay within the ranges the issue measured, within the horizon, and hold every kind when there is room', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 20, max: 300 }), (seed, horizonS) => {
        const plan = drawFaultMix(seed, { horizonMs: horizonS * 1000, windows: 5 });
        expect(new Set(plan.windows.map((w) => w.kind))).toEqual(new Set(FAULT_KINDS));
        for (const w of plan.windows) {
          expect(w.startMs).toBeGreaterThanOrEqual(0);
          if (w.kind === 'throttle') expect(w.rate).toBeGreaterThanOrEqual(0.1);
          if (w.kind === 'throttle') expect(w.rate).toBeLessThanOrEqual(0.9);
          if (w.kind === 'unavailable') {
            expect(w.rate).toBe(1);
            expect(w.durationMs).toBeGreaterThanOrEqual(10_000);
            expect(w.durationMs).toBeLessThanOrEqual(120_000);
          }
          if (w.kind === 'slow') expect(w.delayMs?.[1]).toBeGreaterThan(w.delayMs?.[0] ?? Infinity);
        }
        // A window longer than the horizon starts at 0; any other ends within it.
        for (const w of plan.windows)
          if (w.durationMs <= horizonS * 1000) expect(w.startMs + w.durationMs).toBeLessThanOrEqual(horizonS * 1000);
        expect(faultPlanEndMs(plan)).toBe(Math.max(...plan.windows.map((w) => w.startMs + w.durationMs)));
        for (const w of plan.windows)
          expect(hiddenShare(w, plan.windows), describeFaultPlan(plan)).toBeLessThanOrEqual(0.5);
      }),
    );
  });

  it('hide no window mostly under an outage, on one service too (it starts when the outage ends)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 5, max: 9 }), (seed, windows) => {
        const plan = drawFaultMix(seed, { horizonMs: 30_000, windows, services: ['dynamodb'] });
        expect(new Set(plan.windows.map((w) => w.service))).toEqual(new Set(['dynamodb']));
        for (const w of plan.windows)
          expect(hiddenShare(w, plan.windows), describeFaultPlan(plan)).toBeLessThanOrEqual(0.5);
      }),
    );
  });

  it('leave a mix that hid nothing as it was drawn', () => {
    // Seed 2's mix (90 s) puts its outage on SQS and every other window on DynamoDB.
    expect(describeFaultPlan(drawFaultMix(2, { horizonMs: 90_000, windows: 5 }))).toBe(
      'sqs:unavailable(503):1@2+87,dynamodb:throttle:0.2@16+39,dynamodb:slow:0.35@28+34,dynamodb:reset:0.16@44+30,dynamodb:lost_commit:0.21@51+15',
    );
  });
});

describe('written fault plans', () => {
  it('parse SERVICE:KIND[:RATE]@START+DURATION lists', () => {
    const plan = parseFaultSpec('dynamodb:unavailable@20+60, sqs:throttle:0.5@10+30,dynamodb:slow:0.3@0+5');
    expect(plan.windows).toEqual([
      { service: 'dynamodb', kind: 'unavailable', startMs: 20_000, durationMs: 60_000, rate: 1 },
      { service: 'sqs', kind: 'throttle', startMs: 10_000, durationMs: 30_000, rate: 0.5 },
      { service: 'dynamodb', kind: 'slow', startMs: 0, durationMs: 5_000, rate: 0.3, delayMs: [500, 2_000] },
    ]);
    expect(describeFaultPlan(plan)).toBe(
      'dynamodb:unavailable(503):1@20+60,sqs:throttle:0.5@10+30,dynamodb:slow:0.3@0+5',
    );
  });

  it.each(['dynamo:throttle@1+2', 'sqs:explode@1+2', 'sqs:throttle:1.5@1+2', 'sqs:throttle', ''])(
    'refuse %j with the form expected',
    (spec) => {
      expect(() => parseFaultSpec(spec)).toThrow(FaultSpecError);
    },
  );
});
