/**
 * The policy lab's simulator against closed-form results: M/M/c waiting time (Erlang C),
 * Little's law, Poisson arrival counts; Lambda's documented ramp; determinism with a seed; and
 * that the governor's runs go through the real decide().
 */
import { describe, expect, it } from 'vitest';
import { HELD_TEST_TICKS } from '../../functions/core/governor/neighbours.js';
import { REFUSAL_HOLD_OFF_MS } from '../../functions/core/thread-ledger.js';
import { EventHeap } from '../../lab/heap.js';
import { createPolicy, type PolicyName } from '../../lab/policies.js';
import { simulate, type RunOptions } from '../../lab/sim.js';
import type { Policy } from '../../lab/sim/types.js';
import { starvedTicks } from '../../lab/targets.js';
import { expectedArrivals, parseTrace, type TraceInput } from '../../lab/trace.js';

const reCaptcha = { method: 'userrecaptcha', share: 1, medianSeconds: 18, p95Seconds: 40 } as const;

function trace(input: Partial<TraceInput> & Pick<TraceInput, 'arrivals'>) {
  return parseTrace({ name: 'test', durationSeconds: 3600, methods: [reCaptcha], ...input }, 'test');
}

function run(
  name: PolicyName,
  input: Partial<TraceInput> & Pick<TraceInput, 'arrivals'>,
  options: Partial<RunOptions> = {},
) {
  const t = trace(input);
  return simulate(t, createPolicy(name, t.settings, options.model), { seed: 7, ...options });
}

/**
 * A trace of reCAPTCHA solves (median `medianSeconds`, p95 `p95Seconds`) at `perSecond` on a plan
 * of `plan` threads, a neighbour holding `threads` of them from `from` s to `to` s.
 */
function heldByNeighbour(o: {
  durationSeconds: number;
  plan: number;
  perSecond: number;
  medianSeconds: number;
  p95Seconds: number;
  threads: number;
  from: number;
  to: number;
}): Partial<TraceInput> & Pick<TraceInput, 'arrivals'> {
  return {
    durationSeconds: o.durationSeconds,
    fleet: { planThreads: o.plan },
    arrivals: [{ at: 0, perSecond: o.perSecond }],
    methods: [{ method: 'userrecaptcha', share: 1, medianSeconds: o.medianSeconds, p95Seconds: o.p95Seconds }],
    foreignThreads: [
      { at: 0, threads: 0 },
      { at: o.from, threads: o.threads },
      { at: o.to, threads: 0 },
    ],
  };
}

/** Erlang C: the mean wait in queue of M/M/c with arrival rate λ and service rate μ. */
function erlangCWait(c: number, lambda: number, mu: number): number {
  const a = lambda / mu;
  let term = 1;
  let sum = 1;
  for (let k = 1; k < c; k++) {
    term *= a / k;
    sum += term;
  }
  const last = ((term * a) / c) * (c / (c - a));
  const probabilityOfWaiting = last / (sum + last);
  return probabilityOfWaiting / (c * mu - lambda);
}

describe('simulator models', () => {
  it('gives the M/M/c mean waiting time of Erlang C for a fixed pool', () => {
    // Prepare: 5 always-on workers, Poisson arrivals at 0.4/s, exponential solves of mean 10 s (ρ = 0.8).
    const c = 5;
    const lambda = 0.4;
    const mean = 10;
    const result = run('static-pool', {
      durationSeconds: 250_000,
      fleet: { planThreads: c },
      arrivals: [{ at: 0, perSecond: lambda }],
      methods: [{ method: 'userrecaptcha', share: 1, distribution: 'exponential', meanSeconds: mean }],
    });
    // Assess: mean wait = mean latency − mean service.
    const expected = erlangCWait(c, lambda, 1 / mean);
    expect(expected).toBeCloseTo(5.54, 1);
    const measured = (result.latency.mean as number) - mean;
    expect(Math.abs(measured - expected) / expected).toBeLessThan(0.1);
    expect(result.overCapRejections).toBe(0);
  });

  it("satisfies Little's law on a steady trace (time-average in system = arrival rate × mean latency)", () => {
    const result = run(
      'governor',
      { durationSeconds: 7200, arrivals: [{ at: 0, perSecond: 1 }] },
      { sampleSeconds: 1 },
    );
    const { t, backlog, inFlight } = result.samples;
    let inSystem = 0;
    let n = 0;
    for (let i = 0; i < t.length; i++) {
      if (t[i]! > 7200) break;
      inSystem += backlog[i]! + inFlight[i]!;
      n++;
    }
    const L = inSystem / n;
    const lambdaW = (result.arrivals / 7200) * (result.latency.mean as number);
    expect(Math.abs(L - lambdaW) / lambdaW).toBeLessThan(0.05);
  });

  it('draws Poisson arrival counts: mean and variance match the integrated rate', () => {
    const input = {
      durationSeconds: 600,
      arrivals: [
        { at: 0, perSecond: 0.5 },
        { at: 200, perSecond: 0 },
        { at: 300, perSecond: 1.5 },
      ],
    };
    const expected = expectedArrivals(trace(input));
    expect(expected).toBe(0.5 * 200 + 1.5 * 300);
    const counts = Array.from({ length: 40 }, (_, seed) => run('oracle', input, { seed }).arrivals);
    const mean = counts.reduce((a, b) => a + b, 0) / counts.length;
    const variance = counts.reduce((a, b) => a + (b - mean) ** 2, 0) / (counts.length - 1);
    // Mean within 4 standard errors; index of dispersion near 1 (Poisson), far from 0 (regular) or 2.
    expect(Math.abs(mean - expected)).toBeLessThan(4 * Math.sqrt(expected / counts.length));
    expect(variance / mean).toBeGreaterThan(0.5);
    expect(variance / mean).toBeLessThan(1.6);
  });

  it("ramps Lambda's SQS concurrency from 5 by at most 5 a second (300 a minute)", () => {
    const result = run(
      'lambda-fixed',
      { durationSeconds: 60, fleet: { planThreads: 200 }, arrivals: [{ at: 0, perSecond: 50 }] },
      { sampleSeconds: 1 },
    );
    const { t, inFlight } = result.samples;
    // 50 tasks/s of 18 s solves would use 900 invocations at once; the ramp allows 5 + 5 per elapsed second.
    for (let i = 0; i < t.length && t[i]! <= 60; i++)
      expect(inFlight[i]!).toBeLessThanOrEqual(5 + 5 * Math.floor(t[i]!));
    expect(inFlight[t.indexOf(30)]).toBeGreaterThanOrEqual(150);
  });

  it('rejects over the cap when foreign threads appear, and the clairvoyant oracle never does', () => {
    const input = {
      durationSeconds: 3600,
      fleet: { planThreads: 20 },
      arrivals: [{ at: 0, perSecond: 0.8 }],
      foreignThreads: [
        { at: 0, threads: 0 },
        { at: 1200, threads: 8 },
      ],
    };
    expect(run('lambda-fixed', input).overCapRejections).toBeGreaterThan(0);
    const oracle = run('oracle', input);
    expect(oracle.overCapRejections).toBe(0);
    expect(oracle.unfinished).toBe(0);
  });

  it('reads p95 over every task for the targets: the solved ones, and the unfinished at their wait when the run stopped', () => {
    const light = run('oracle', {
      durationSeconds: 600,
      fleet: { planThreads: 20 },
      arrivals: [{ at: 0, perSecond: 0.2 }],
    });
    expect(light.unfinished).toBe(0);
    expect(light.p95EveryTask).toBe(light.latency.p95);
    // Ten tasks a second for a minute, two threads of 18 s solves, stopped at 600 s: most never start.
    const input = {
      durationSeconds: 600,
      fleet: { planThreads: 2 },
      arrivals: [
        { at: 0, perSecond: 10 },
        { at: 60, perSecond: 0 },
      ],
    };
    const over = run('oracle', input, { drainLimitSeconds: 0 });
    expect(over.unfinished).toBeGreaterThan(over.arrivals * 0.8);
    // Every unfinished task arrived in the first minute and had waited 540 s or more when the run
    // stopped: over every task the p95 is at least that, above what the solved tasks alone show.
    expect(over.p95EveryTask!).toBeGreaterThanOrEqual(540);
    expect(over.p95EveryTask!).toBeLessThanOrEqual(over.simulatedSeconds);
    expect(over.p95EveryTask!).toBeGreaterThan(over.latency.p95!);
  });

  it('bills pools while idle and Lambda only while invoked', () => {
    const input = { durationSeconds: 3600, fleet: { planThreads: 50 }, arrivals: [{ at: 0, perSecond: 0.2 }] };
    const pool = run('static-pool', input);
    const lambda = run('lambda-fixed', input);
    expect(pool.computeSeconds).toBeGreaterThanOrEqual(50 * 3600);
    expect(lambda.computeSeconds).toBeLessThan(pool.computeSeconds / 5);
  });
});

/**
 * A 20-thread plan loaded past its threads whose balance crosses the halt level ($1) at about
 * 500 s and reaches its pause level at about 1 400 solves.
 */
const HALTED_PLAN = {
  durationSeconds: 2400,
  fleet: { planThreads: 20 },
  arrivals: [{ at: 0, perSecond: 3 }],
  balance: { initialUsd: 1.5, pricePerSolveUsd: 0.001 },
};

describe('the governor in the lab', () => {
  it('runs the real decide(): its reason codes drive the ceiling, and a low balance pauses it', () => {
    const result = run('governor', {
      durationSeconds: 3600,
      arrivals: [{ at: 0, perSecond: 1 }],
      balance: { initialUsd: 2, pricePerSolveUsd: 0.001 },
    });
    expect(result.reasons.FREE_THREADS).toBeGreaterThan(0);
    expect(result.reasons.PAUSE_LOW_BALANCE).toBeGreaterThan(0);
    expect(result.haltCrossedAt).not.toBeNull();
    // Money ran out: tasks wait in the queue rather than being refused by the solver.
    expect(result.unfinished).toBeGreaterThan(0);
    expect(result.accountErrors).toBe(0);
  });

  // Before: each pause ended at the minimum under the halt and stayed there (p95 × 4.95 and × 4.5
  // of the floor's).
  it.each([
    {
      pause: 'a 66-second outage at 900 s',
      extra: { outages: [{ at: 900, durationSeconds: 66 }] },
      at: 900,
      reason: 'PAUSE_OUTAGE',
    },
    {
      pause: 'a neighbour holding all 20 threads from 800 s to 1 000 s',
      extra: {
        foreignThreads: [
          { at: 0, threads: 0 },
          { at: 800, threads: 20 },
          { at: 1000, threads: 0 },
        ],
      },
      at: 800,
      reason: 'WAIT_FOR_THREADS',
    },
  ])(
    'comes back where the halt froze it after $pause, not at the minimum for the rest of the money',
    ({ extra, at, reason }) => {
      // GIVEN the halted plan and the pause; WHEN the governor and the parked floor run it
      const input = { ...HALTED_PLAN, ...extra };
      const governor = run('governor', input);
      const floor = run('oracle-park', input);
      // THEN it crossed the halt before the pause and paused, and its money buys what the floor's
      // does as fast: within the lab's p95 target (1.2 × the floor + 5 s).
      expect(governor.haltCrossedAt!).toBeLessThan(at);
      expect(governor.reasons[reason]).toBeGreaterThan(0);
      expect(governor.solved).toBe(floor.solved);
      expect(governor.latency.p95!).toBeLessThanOrEqual(1.2 * floor.latency.p95! + 5);
      // The money still bounds it: nothing started past the pause level.
      expect(governor.startedPastPause).toBe(0);
    },
  );

  it('reads the metric window as the deployed governor does: once a minute, kept for the minute', () => {
    // GIVEN a governor whose ticks record what the metric window gave them (completions a second
    // and the mean solve time, both from the consumer's metrics)
    const t = trace({ durationSeconds: 900, arrivals: [{ at: 0, perSecond: 1 }] });
    const inner = createPolicy('governor', t.settings);
    const byMinute = new Map<number, string[]>();
    const tick = inner.tick;
    if (tick === undefined) throw new Error('the governor policy ticks');
    const policy: Policy = {
      ...inner,
      tick: (view) => {
        const signals = view.governorSignals();
        const minute = Math.floor(view.now / 60);
        const window = `${signals.completionRate} ${signals.meanSolveMs}`;
        byMinute.set(minute, [...(byMinute.get(minute) ?? []), window]);
        return tick(Object.create(view, { governorSignals: { value: () => signals } }));
      },
    };

    // WHEN it runs
    simulate(t, policy, { seed: 7 });

    // THEN every tick of a minute sees the window its first tick read, and the minutes differ
    // (the solves of the minute before moved into it)
    const filled = [...byMinute.values()].filter((windows) => !windows[0]?.startsWith('undefined'));
    expect(filled.length).toBeGreaterThan(8);
    // (the run's last minute may be cut short)
    for (const windows of filled.slice(0, -1)) expect(windows.length).toBe(6);
    for (const windows of filled) {
      expect(new Set(windows).size).toBe(1);
    }
    expect(new Set(filled.map((windows) => windows[0])).size).toBeGreaterThan(filled.length / 2);
  });
});

describe('a fleet slow to earn its refusal budget (a few threads, long solves)', () => {
  // 6 threads of 2-minute solves, twice the tasks they solve; a neighbour holds 2 of them from
  // 1 000 s to 1 130 s, and two of the fleet's submissions are refused in a row.
  const input = heldByNeighbour({
    durationSeconds: 4000,
    plan: 6,
    perSecond: 0.1,
    medianSeconds: 120,
    p95Seconds: 200,
    threads: 2,
    from: 1000,
    to: 1130,
  });

  it('comes back to the refused count at once and to the whole plan within half an hour, within the refusal target', () => {
    // WHEN the governor runs it
    const governor = run('governor', input, { sampleSeconds: 10 });
    const { t, ceiling } = governor.samples;
    const ceilingsIn = (from: number, to = input.durationSeconds!) =>
      ceiling.filter((_, i) => t[i]! > from && t[i]! <= to);
    // THEN the run of refusals halved its thread ceiling under the 4 threads it held, and the
    // acceptance after it lifted the ceiling back there, however long after the refusals' hold-off
    // it came (before: at 2 until the budget paid for a climb, 53 minutes later);
    expect(Math.min(...ceilingsIn(1000, 1130))).toBeLessThanOrEqual(2);
    expect(Math.min(...ceilingsIn(1130))).toBeGreaterThanOrEqual(4);
    // its own acceptances would fund a climb in an hour, so it borrows for a patient climb and is
    // back at the plan within half an hour of the neighbour's leaving (before: 41 minutes, the
    // patient climb only for a fleet others held to half the plan);
    expect(Math.max(...ceilingsIn(1130, 1130 + 1800))).toBe(6);
    // and its refusals stay within the target for a key others share (2 %)
    expect(governor.overCapShare).toBeLessThanOrEqual(0.02);
  });
});

describe('a big fleet held by a neighbour (its own answers free threads in the lease-freeing lag)', () => {
  // 200 threads of 10-s solves, work for all of them; a neighbour holds 140 from 600 s to 1 200 s:
  // the fleet's 60 answer 6 a second, some of them freed at the solver before their leases are.
  const input = heldByNeighbour({
    durationSeconds: 1800,
    plan: 200,
    perSecond: 24,
    medianSeconds: 10,
    p95Seconds: 16,
    threads: 140,
    from: 600,
    to: 1200,
  });

  it('tests the hold every HELD_TEST_TICKS ticks and is back at the plan within HELD_TEST_TICKS + 2 ticks of the departure, within the refusal target', () => {
    // WHEN the governor runs it
    const governor = run('governor', input, { sampleSeconds: 10 });
    const { t, ceiling } = governor.samples;
    // THEN it stood at the 60 threads the neighbour left while it held (never above a test's one more),
    const held = ceiling.filter((_, i) => t[i]! > 700 && t[i]! <= 1200);
    expect(Math.max(...held)).toBeLessThanOrEqual(61);
    // found the departure with a test within four ticks of it (before: the hold's lapse, a
    // minute after each refused test, 60 s after the departure on this seed),
    const back = t.find((at, i) => at > 1200 && ceiling[i]! >= 190);
    expect(back).toBeDefined();
    expect(back! - 1200).toBeLessThanOrEqual(((HELD_TEST_TICKS + 2) * trace(input).settings.tickMs) / 1000);
    // and its refusals stay within the target for a key others share (2 %)
    expect(governor.overCapShare).toBeLessThanOrEqual(0.02);
  });
});

describe('a small fleet held by a neighbour for a quarter of an hour (the held tests spread over the budget)', () => {
  // 12 threads of 14-s solves, 0.4 tasks a second (about 5.6 threads of work); an hour into the
  // day a neighbour holds 8 for 15 minutes: the fleet's 4 threads cannot keep up and tasks wait.
  // The budget an hour earned pays about twenty refused tests; a test every two ticks spent it in
  // the hold's first minutes, and the departure waited for the budget to earn the next one.
  const start = 3600;
  const departure = start + 900;
  const input = heldByNeighbour({
    durationSeconds: departure + 900,
    plan: 12,
    perSecond: 0.4,
    medianSeconds: 14,
    p95Seconds: 25,
    threads: 8,
    from: start,
    to: departure,
  });

  it.each([1, 2, 3, 4, 5, 6])(
    'seed %i: stands at the room while the neighbour holds, is back at the plan within a refusal hold-off and two ticks of its departure, within the refusal target',
    (seed) => {
      // WHEN the governor runs it
      const governor = run('governor', input, { seed, sampleSeconds: 10 });
      const { t, ceiling } = governor.samples;
      const tickSeconds = trace(input).settings.tickMs / 1000;
      // THEN it stood at the 4 threads the neighbour left while it held (a test's one more at most),
      const held = ceiling.filter((_, i) => t[i]! > start + 60 && t[i]! <= departure);
      expect(Math.max(...held)).toBeLessThanOrEqual(5);
      // found the departure within a hold-off and two ticks (before: 70–230 s on these seeds, 80 s
      // or more on five of the six),
      const back = t.find((at, i) => at > departure && ceiling[i]! >= 11);
      expect(back).toBeDefined();
      expect(back! - departure).toBeLessThanOrEqual(REFUSAL_HOLD_OFF_MS / 1000 + 2 * tickSeconds);
      // and its refusals stay within the target for a key others share (2 %)
      expect(governor.overCapShare).toBeLessThanOrEqual(0.02);
    },
  );
});

describe('money running out on a wide, fast plan (the spend grant and the fair floor)', () => {
  // $3.00 at $0.002 a solve over the $0.10 pause level: 1450 solves, the 1451st starting at the
  // level; 400 threads of 3 s solves start ~130 a second, so a tick's decision alone overshoots.
  const broke: Partial<TraceInput> & Pick<TraceInput, 'arrivals'> = {
    durationSeconds: 1200,
    arrivals: [{ at: 0, perSecond: 200 }],
    methods: [{ method: 'base64', share: 1, medianSeconds: 3, p95Seconds: 5 }],
    fleet: { planThreads: 400 },
    balance: { initialUsd: 3, pricePerSolveUsd: 0.002, topUps: [] },
  };
  const paidFor = Math.floor((3 - 0.1) / 0.002 + 1e-9) + 1;

  it('the governor starts exactly the solves the money above the pause level pays for (the grant)', () => {
    const result = run('governor', broke);
    expect(result.solved).toBe(paidFor);
    expect(result.startedPastPause).toBe(0);
  });

  it('the fair floor keeps its own money rule at every submission, its wide fleet’s solves in flight included', () => {
    const result = run('oracle-ramp', broke);
    expect(result.solved).toBe(paidFor);
  });
});

describe('a tiny plan whose neighbours leave it one thread (fewer than the mapping’s floor)', () => {
  // Plan 3, others hold 2 for the hour: one thread, about 60 % busy with real tasks.
  const oneThread: Partial<TraceInput> & Pick<TraceInput, 'arrivals'> = {
    durationSeconds: 3600,
    arrivals: [{ at: 0, perSecond: 0.03 }],
    methods: [{ method: 'base64', share: 1, medianSeconds: 18, p95Seconds: 30 }],
    fleet: { planThreads: 3 },
    foreignThreads: [{ at: 0, threads: 2 }],
  };

  it('solves real tasks on it, as the fair floor does, with at most one refusal a starved tick', () => {
    const governor = run('governor', oneThread);
    const floor = run('oracle-ramp', oneThread);
    expect(governor.unfinished).toBe(0);
    expect(governor.latency.p95).toBeLessThanOrEqual(1.2 * (floor.latency.p95 ?? 0) + 5);
    expect(governor.overCapWhileStarved).toBeLessThanOrEqual(Math.ceil(governor.starvedSeconds / 10));
    expect(governor.reasons.FEW_THREADS).toBeGreaterThan(0);
  });
});

describe('a tiny plan a neighbour holds half of while work waits (a refusal hold-off that lapses)', () => {
  // Plan 2, 24-s reCAPTCHA solves at 0.06 tasks a second (about 1.4 threads of work); from ten
  // minutes in a neighbour holds one thread for 40 minutes: the fleet's one thread cannot keep up,
  // and each refusal holds the consumers to it for a minute. The mapping's floor keeps a second
  // invocation waiting for room; the product's reads the ledger or the shards on its own cadence
  // and takes the room at the hold-off's lapse. The lab's waiters looked again only when a slot
  // freed or an acceptance lifted the hold, so they waited out their 15-s bound past each lapse
  // and handed their task back (32–38 times a run on these seeds, the task hidden for its
  // backoff): p95 × 1.36–1.48 of the fair floor here, from the lab's model, not the governor.
  const input = heldByNeighbour({
    durationSeconds: 3600,
    plan: 2,
    perSecond: 0.06,
    medianSeconds: 24,
    p95Seconds: 50,
    threads: 1,
    from: 600,
    to: 3000,
  });

  it.each([1, 2, 3, 4, 5, 6])(
    'seed %i: the invocation waiting for room takes it when the hold-off lapses, not after its own bound (few hand-backs, p95 within the target of the fair floor)',
    (seed) => {
      // WHEN the governor and the parked fair floor run it
      const governor = run('governor', input, { seed });
      const floor = run('oracle-park', input, { seed });
      // THEN the waiting invocations hand few tasks back (before: one a hold-off),
      expect(governor.handBacks).toBeLessThanOrEqual(5);
      // and its p95 (every task) meets the lab's target against the floor
      expect(floor.p95EveryTask).not.toBeNull();
      expect(governor.p95EveryTask).toBeLessThanOrEqual(1.2 * (floor.p95EveryTask ?? 0) + 5);
    },
  );
});

describe('a big plan a neighbour takes whole for three minutes (a run of refusals while the fleet’s own solves end)', () => {
  // Plan 850, 15-s reCAPTCHA solves at 1.5 × what the plan solves; from five minutes in a
  // neighbour wants every thread for three minutes and takes each one the fleet frees. Every
  // submission then is refused, and the ticks in which others leave the fleet fewer threads than
  // the mapping's floor allow one refused submission each (a probe). With the run's room at half
  // the newest refusal's count, the fleet's own solves ended about as fast as the room halved, so
  // the room stayed above what it held and about every ten seconds a freed thread was submitted
  // into the neighbour's: 19–28 refusals in 18 starved ticks over seeds 1–6 of the 30-minute
  // trace, 20–26 on this one, and p95 × 1.16–1.32 of the parked floor's (tasks refused hidden for
  // their backoff). gen-s13-252-combined (853 threads), gen-s13-755-combined and
  // gen-s14-971-combined found it.
  const input = heldByNeighbour({
    durationSeconds: 900,
    plan: 850,
    perSecond: (1.5 * 850) / (15 * 1.15),
    medianSeconds: 15,
    p95Seconds: 30,
    threads: 850,
    from: 300,
    to: 480,
  });

  it.each([1, 2, 3, 4])(
    'seed %i: at most one refusal a starved tick, and p95 within the target of the fair floor',
    (seed) => {
      // WHEN the governor and the parked fair floor run it
      const governor = run('governor', input, { seed });
      const floor = run('oracle-park', input, { seed });
      // THEN the fleet stops submitting into the neighbour's threads within a few refusals,
      expect(governor.starvedSeconds).toBeGreaterThan(0);
      expect(governor.overCapWhileStarved).toBeLessThanOrEqual(starvedTicks(trace(input), governor));
      // and its p95 (every task) meets the lab's target against the floor
      expect(floor.p95EveryTask).not.toBeNull();
      expect(governor.p95EveryTask).toBeLessThanOrEqual(1.2 * (floor.p95EveryTask ?? 0) + 5);
      expect(governor.unfinished).toBeLessThanOrEqual(floor.unfinished);
    },
  );
});

describe('a small plan a neighbour takes whole for an hour and a half (the probe keeps its task)', () => {
  // Plan 3, 12-s reCAPTCHA solves at 0.6 × the plan; a neighbour takes all three threads from
  // 300 s to 5 700 s of a two-hour trace. Starved, the governor probes once a tick with the task at
  // the head of the queue. Each probe received it anew (a receive counted), and near the DLQ it went
  // back as a fresh copy at the end of the queue: every seven probes the task that had waited
  // longest went behind every other, p95 × 1.15–1.19 of the parked floor's on seeds 1–6 with the
  // lab's `probeKeepSpanSeconds` at 0. Kept for the next probes of the governor's invocation
  // (functions/governor/probe-carrier.ts), × 0.98–0.99. gen-s15-246-neighbour-takes-all (3
  // threads, a two-hour hold: × 1.23) and gen-s15-520-neighbour-takes-all (2 threads: × 1.27) found it.
  const input = heldByNeighbour({
    durationSeconds: 7200,
    plan: 3,
    perSecond: 0.15,
    medianSeconds: 12,
    p95Seconds: 30,
    threads: 3,
    from: 300,
    to: 5700,
  });

  it.each([1, 2, 3, 4])(
    'seed %i: the oldest tasks are solved first when the threads come back (p95 at the floor’s)',
    (seed) => {
      // WHEN the governor and the parked fair floor run it
      const governor = run('governor', input, { seed });
      const floor = run('oracle-park', input, { seed });
      // THEN the governor probed through the spell (one refusal a starved tick at most), lost and
      // dead-lettered nothing, and its p95 (every task) is the floor's within 2 %
      expect(governor.overCapWhileStarved).toBeGreaterThan(400);
      expect(governor.overCapWhileStarved).toBeLessThanOrEqual(starvedTicks(trace(input), governor));
      expect(governor.unfinished).toBe(0);
      expect(governor.deadLettered).toBe(0);
      expect(floor.p95EveryTask).not.toBeNull();
      expect(governor.p95EveryTask).toBeLessThanOrEqual(1.02 * (floor.p95EveryTask ?? 0));
    },
  );
});

describe('the solver’s return between ticks, in the lab: a tick of its own only before the cadence’s', () => {
  // The product's balance reads between ticks end with the wait (functions/governor/outage-recheck.ts):
  // a solver back just before a tick of the cadence is found by that tick, and no other tick follows.
  // The lab's recheck tick (2 s after the return, at the mean) came anyway, an extra decision, when
  // the cadence's tick had resumed first.
  const decisions = (outageEnd: number, recheck: boolean) => {
    const input: Partial<TraceInput> & Pick<TraceInput, 'arrivals'> = {
      durationSeconds: 1200,
      fleet: { planThreads: 50 },
      arrivals: [{ at: 0, perSecond: 2 }],
      methods: [{ method: 'base64', share: 1, medianSeconds: 4, p95Seconds: 8 }],
      outages: [{ at: 300, durationSeconds: outageEnd - 300 }],
    };
    const model = recheck ? {} : { outageRecheckSeconds: 0 };
    const result = run('governor', input, { seed: 1, model });
    return Object.values(result.reasons).reduce((sum, n) => sum + n, 0);
  };

  it('wakes one tick when the solver is back mid-wait, none when the cadence’s tick comes first', () => {
    // Ticks every 10 s from 0: back at 605.5 s, the recheck's tick at 607.5 s comes before the
    // cadence's at 610 s; back at 609.5 s, the cadence's tick at 610 s resumes first.
    expect(decisions(605.5, true)).toBe(decisions(605.5, false) + 1);
    expect(decisions(609.5, true)).toBe(decisions(609.5, false));
  });
});

describe('a three-minute solver outage on a big plan of fast solves (the solver’s return found between ticks)', () => {
  // Plan 300, 4-s image solves at 40 % of the plan; the solver is down from 603 s to 784 s, and
  // the governor pauses for it. Paused, it reads the balance every 2 s between ticks and the first
  // read that answers wakes a tick (functions/governor/outage-recheck.ts); before, the fleet
  // resumed at the next tick of the cadence, up to 10 s after the solver was back, while the
  // backlog of the outage grew by 27 tasks a second: p95 × 1.02–1.03 of the parked floor's on
  // seeds 1–6 with the lab's `outageRecheckSeconds` at 0, × 0.98–0.99 with it.
  // gen-s14-435-outages (324 threads, a 181-s outage) found it.
  const input: Partial<TraceInput> & Pick<TraceInput, 'arrivals'> = {
    durationSeconds: 1200,
    fleet: { planThreads: 300 },
    arrivals: [{ at: 0, perSecond: (0.4 * 300) / (4 * 1.1) }],
    methods: [{ method: 'base64', share: 1, medianSeconds: 4, p95Seconds: 8 }],
    outages: [{ at: 603, durationSeconds: 181 }],
  };

  it.each([1, 2, 3, 4])('seed %i: the fleet resumes with the fair floor (its p95 at most the floor’s)', (seed) => {
    // WHEN the governor and the parked fair floor run it
    const governor = run('governor', input, { seed });
    const floor = run('oracle-park', input, { seed });
    // THEN the governor paused for the outage, lost nothing, and its p95 is the floor's or better
    expect(governor.reasons.PAUSE_OUTAGE).toBeGreaterThan(0);
    expect(governor.deadLettered).toBe(0);
    expect(floor.p95EveryTask).not.toBeNull();
    expect(governor.p95EveryTask).toBeLessThanOrEqual(floor.p95EveryTask ?? 0);
  });
});

describe('a heavy-tailed mix far over the plan, no neighbour (solves handed back at their deadline)', () => {
  // Plan 19, p95 4.7 × the median: many solves outlast the 180 s deadline and are left over.
  // gen-s1-25-heavy-tails, which found it.
  const heavy: Partial<TraceInput> & Pick<TraceInput, 'arrivals'> = {
    durationSeconds: 7922,
    arrivals: [
      { at: 0, perSecond: 7.075665 },
      { at: 890, perSecond: 4.954282 },
      { at: 1368, perSecond: 0.743856 },
      { at: 2575, perSecond: 0.396516 },
      { at: 2890, perSecond: 0.348088 },
      { at: 5281, perSecond: 1.758199 },
      { at: 7623, perSecond: 0 },
    ],
    methods: [{ method: 'amazon_waf', share: 0.289, medianSeconds: 23.39, p95Seconds: 110.97 }],
    fleet: { planThreads: 19 },
  };

  it('is never refused: no invocation submits past the bound of its room wait (a woken waiter keeps its bound)', () => {
    const result = run('governor', heavy, { seed: 26 });
    expect(result.overCapRejections).toBe(0);
    expect(result.deadLettered).toBe(0);
  });
});

describe('determinism', () => {
  it('replays bit for bit with the same seed and differs with another', () => {
    const input = {
      durationSeconds: 1800,
      arrivals: [
        { at: 0, perSecond: 1 },
        { at: 600, perSecond: 3 },
      ],
    };
    const strip = (r: ReturnType<typeof run>) => ({ ...r, wallMs: 0 });
    expect(strip(run('governor', input, { seed: 3 }))).toEqual(strip(run('governor', input, { seed: 3 })));
    expect(run('governor', input, { seed: 4 }).latency).not.toEqual(run('governor', input, { seed: 3 }).latency);
  });
});

describe('event heap', () => {
  it('pops in time order, ties in insertion order', () => {
    const heap = new EventHeap<number>();
    const times = Array.from({ length: 5000 }, (_, i) => Math.floor(((i * 7919) % 1000) / 10));
    times.forEach((time, i) => {
      heap.push(time, i);
    });
    const popped: number[] = [];
    while (heap.size > 0) popped.push(heap.pop() as number);
    const expected = times
      .map((time, i) => ({ time, i }))
      .sort((a, b) => a.time - b.time || a.i - b.i)
      .map((e) => e.i);
    expect(popped).toEqual(expected);
  });
});
