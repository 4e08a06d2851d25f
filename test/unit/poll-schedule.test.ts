import { describe, expect, it } from 'vitest';
import {
  createAdaptivePollSchedule,
  createFixedPollSchedule,
  defaultPlan,
  quantile,
  replayPlan,
  type PollSchedule,
  withEarliestPoll,
} from '../../functions/core/poll-schedule.js';

/** Seeded PRNG (mulberry32) so every run sees the same solve times. */
function seeded(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** reCAPTCHA-like solve times: a floor of 8 s plus a log-normal part with a 12 s median (≈ 11–40 s). */
function recaptchaLike(seed: number, scale = 1): () => number {
  const random = seeded(seed);
  return () => {
    const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
    return scale * (8_000 + 12_000 * Math.exp(0.45 * normal));
  };
}

/** Run `tasks` solves through a schedule; report what the last `measured` of them cost. */
function run(schedule: PollSchedule, draw: () => number, tasks: number, measured: number) {
  let wait = 0;
  let requests = 0;
  const ready: number[] = [];
  for (let i = 0; i < tasks; i += 1) {
    const readyMs = draw();
    const outcome = replayPlan(schedule.plan('userrecaptcha'), readyMs);
    schedule.observe('userrecaptcha', {
      lastNotReadyMs: outcome.lastNotReadyMs,
      answeredMs: outcome.answeredMs,
      resultRequests: outcome.resultRequests,
    });
    if (i >= tasks - measured) {
      wait += outcome.waitMs;
      requests += outcome.resultRequests;
      ready.push(readyMs);
    }
  }
  return { meanWaitMs: wait / measured, meanRequests: requests / measured, ready: ready.sort((a, b) => a - b) };
}

describe('poll schedule', () => {
  it('uses the protocol defaults while a method has no history', () => {
    const schedule = createAdaptivePollSchedule();

    const token = schedule.plan('userrecaptcha');
    const image = schedule.plan('base64');

    expect(token.source).toBe('protocol-default');
    expect([token.nextPollAt(0), token.nextPollAt(15_001), token.nextPollAt(20_001)]).toEqual([15_000, 20_000, 25_000]);
    expect([image.nextPollAt(0), image.nextPollAt(5_001)]).toEqual([5_000, 10_000]);
  });

  it('takes other defaults (a simulator answering in ms) for both schedules', () => {
    const pollDefaults = { token: { firstPollMs: 20, intervalMs: 10 } };
    const fixed = createFixedPollSchedule({ pollDefaults }).plan('turnstile');
    const adaptive = createAdaptivePollSchedule({ pollDefaults }).plan('turnstile');

    expect([fixed.nextPollAt(0), fixed.nextPollAt(21), fixed.nextPollAt(31)]).toEqual([20, 30, 40]);
    expect(adaptive.offsetsMs).toEqual(fixed.offsetsMs);
    expect(createFixedPollSchedule({ pollDefaults }).plan('base64').firstPollMs).toBe(5_000);
  });

  it('keeps the defaults for other methods once one method has learnt', () => {
    const schedule = createAdaptivePollSchedule({ minSamples: 3 });
    for (let i = 0; i < 3; i += 1)
      schedule.observe('userrecaptcha', { lastNotReadyMs: 15_000, answeredMs: 20_000, resultRequests: 2 });

    expect(schedule.plan('userrecaptcha').source).toBe('adaptive');
    expect(schedule.plan('turnstile')).toMatchObject({ source: 'protocol-default', firstPollMs: 15_000 });
  });

  it('the fixed schedule never leaves the defaults, whatever it observes', () => {
    const schedule = createFixedPollSchedule();
    run(schedule, recaptchaLike(1), 100, 100);

    expect(schedule.plan('userrecaptcha').offsetsMs).toEqual(defaultPlan('userrecaptcha').offsetsMs);
    expect(schedule.stats().total.tasks).toBe(100);
  });

  it('converges on a synthetic distribution: first poll at its fast end, a fraction of the fixed wait', () => {
    const fixed = run(createFixedPollSchedule(), recaptchaLike(7), 600, 300);
    const adaptiveSchedule = createAdaptivePollSchedule();
    const adaptive = run(adaptiveSchedule, recaptchaLike(7), 600, 300);

    const plan = adaptiveSchedule.plan('userrecaptcha');
    expect(plan.source).toBe('adaptive');
    // First poll between the 1st and 15th percentile of the true solve times.
    expect(plan.firstPollMs).toBeGreaterThan(quantile(adaptive.ready, 0.01));
    expect(plan.firstPollMs).toBeLessThan(quantile(adaptive.ready, 0.15));
    // Min interval is 1 s for 20 s solves: answers wait about half of that, not half of 5 s.
    expect(adaptive.meanWaitMs).toBeLessThan(0.4 * fixed.meanWaitMs);
    expect(adaptive.meanWaitMs).toBeLessThan(1_000);
    expect(adaptive.meanRequests).toBeLessThanOrEqual(20);
  });

  it('learns fast simulated solves (tens of ms) with a minimum interval well under a second', () => {
    const schedule = createAdaptivePollSchedule();
    const fast = run(schedule, recaptchaLike(3, 0.0025), 300, 100);

    const plan = schedule.plan('userrecaptcha');
    expect(plan.minIntervalMs).toBeLessThan(250);
    expect(plan.firstPollMs).toBeLessThan(100);
    expect(fast.meanWaitMs).toBeLessThan(15);
  });

  it.each([3, 5, 10, 20])(
    'spends about the request budget of %i per task in expectation, never much more',
    (budget) => {
      // A long tail (10 % uniform over 3–63 s) and no practical minimum interval: only the budget binds.
      const random = seeded(budget);
      const body = recaptchaLike(budget);
      const draw = () => (random() < 0.1 ? 3_000 + 60_000 * random() : body());
      const schedule = createAdaptivePollSchedule({
        requestBudget: budget,
        minIntervalFraction: 0.001,
        minIntervalFloorMs: 1,
      });

      const result = run(schedule, draw, 300, 200);

      expect(result.meanRequests).toBeLessThanOrEqual(budget * 1.05);
      // The budget is used, not left idle: more budget, shorter waits (checked across runs below).
      expect(result.meanRequests).toBeGreaterThan(budget * 0.75);
    },
  );

  it('a larger budget buys a shorter wait', () => {
    const waits = [3, 8, 20].map(
      (budget) => run(createAdaptivePollSchedule({ requestBudget: budget }), recaptchaLike(11), 300, 150).meanWaitMs,
    );
    expect(waits[1]).toBeLessThan(waits[0] as number);
    expect(waits[2]).toBeLessThan(waits[1] as number);
  });

  it('bounds a solve slower than any seen: the tail backs off to the protocol interval', () => {
    const schedule = createAdaptivePollSchedule();
    run(schedule, recaptchaLike(5), 200, 1);
    const plan = schedule.plan('userrecaptcha');

    const stalled = replayPlan(plan, 180_000);
    const lastPlanned = plan.offsetsMs[plan.offsetsMs.length - 1] as number;
    const tailRequests = stalled.resultRequests - plan.offsetsMs.length;

    // After the plan, gaps double up to 5 s: at most (180 s − last) / 5 s + a few doubling steps.
    expect(tailRequests).toBeLessThanOrEqual(Math.ceil((180_000 - lastPlanned) / 5_000) + 4);
    expect(plan.nextPollAt(200_000) - plan.nextPollAt(195_000 + 1)).toBe(5_000);
  });

  it('is deterministic: the same observations give the same plan', () => {
    const a = createAdaptivePollSchedule();
    const b = createAdaptivePollSchedule();
    run(a, recaptchaLike(9), 150, 1);
    run(b, recaptchaLike(9), 150, 1);

    const { nextPollAt: _a, ...planA } = a.plan('userrecaptcha');
    const { nextPollAt: _b, ...planB } = b.plan('userrecaptcha');
    expect(planB).toEqual(planA);
    expect(planA.source).toBe('adaptive');
    expect(b.stats()).toEqual(a.stats());
  });

  it('keeps only a bounded window: a shift in solve times is followed', () => {
    const schedule = createAdaptivePollSchedule({ windowSize: 32 });
    run(schedule, recaptchaLike(2), 100, 1);
    const before = schedule.plan('userrecaptcha').firstPollMs;
    const slower = recaptchaLike(4);
    run(schedule, () => slower() + 20_000, 100, 1);

    expect(schedule.plan('userrecaptcha').firstPollMs).toBeGreaterThan(before + 15_000);
  });

  it('counts requests per task and estimates the wait inside each bracket', () => {
    const schedule = createFixedPollSchedule();
    schedule.observe('base64', { lastNotReadyMs: 5_000, answeredMs: 10_000, resultRequests: 2 });
    schedule.observe('base64', { answeredMs: 5_000, resultRequests: 1 });

    const stats = schedule.stats().byMethod.base64;
    expect(stats).toMatchObject({ tasks: 2, resultRequests: 3, meanResultRequests: 1.5 });
    // No earlier history: half of each bracket.
    expect(stats?.estimatedWaitMs).toBe(2_500 + 2_500);
    expect(stats?.waitShare).toBeCloseTo(5_000 / 15_000);
    // With history, the estimate uses the recent ready times that fall in the bracket.
    expect(schedule.estimateWaitMs('base64', { lastNotReadyMs: 6_000, answeredMs: 9_000, resultRequests: 2 })).toBe(
      9_000 - 7_500,
    );
  });
});

describe('withEarliestPoll', () => {
  it('asks for no answer before the earliest time, and keeps the inner plan after it', () => {
    // Prepare: the protocol's image plan asks first at 5 s, then every 5 s.
    const inner = createFixedPollSchedule();
    const plan = withEarliestPoll(inner, 7_000).plan('base64');

    // Act
    const first = plan.nextPollAt(0);
    const later = plan.nextPollAt(first + plan.minIntervalMs);

    // Assess
    expect(first).toBeGreaterThanOrEqual(7_000);
    expect(first).toBe(inner.plan('base64').nextPollAt(7_000));
    expect(later).toBe(inner.plan('base64').nextPollAt(first + plan.minIntervalMs));
    expect(plan.firstPollMs).toBe(7_000);
    expect(Math.min(...plan.offsetsMs)).toBeGreaterThanOrEqual(7_000);
  });

  it('feeds and counts through the inner schedule', () => {
    const inner = createAdaptivePollSchedule();
    const outer = withEarliestPoll(inner, 3_000);

    outer.observe('base64', { answeredMs: 4_000, resultRequests: 1 });

    expect(inner.stats().total.tasks).toBe(1);
    expect(outer.stats()).toEqual(inner.stats());
  });

  it('is the inner schedule itself without a positive bound', () => {
    const inner = createAdaptivePollSchedule();
    expect(withEarliestPoll(inner, 0)).toBe(inner);
  });
});
