/**
 * The policy lab's receive counts and DLQ: an invocation that hands its task back (over cap,
 * transient answers in an outage) spends a receive, and a task received maxReceiveCount times
 * goes to the dead-letter queue; solves accepted before an outage pause and finish after it.
 */
import { describe, expect, it } from 'vitest';
import { createPolicy, type PolicyName } from '../../lab/policies.js';
import { simulate } from '../../lab/sim.js';
import { parseTrace, type TraceInput } from '../../lab/trace.js';

const reCaptcha = { method: 'userrecaptcha', share: 1, medianSeconds: 18, p95Seconds: 40 } as const;

function run(name: PolicyName, input: Partial<TraceInput>) {
  const trace = parseTrace(
    { name: 'test', durationSeconds: 3600, methods: [reCaptcha], arrivals: [{ at: 0, perSecond: 0.5 }], ...input },
    'test',
  );
  return simulate(trace, createPolicy(name, trace.settings), { seed: 3 });
}

describe('receive counts and the DLQ', () => {
  it('sends tasks to the DLQ when a fixed-maximum Lambda consumes through a long outage', () => {
    // Prepare: 40 minutes of transient answers, maxReceiveCount 5.
    const outage = { outages: [{ at: 600, durationSeconds: 2400 }], fleet: { maxReceiveCount: 5 } };

    // Act
    const result = run('lambda-fixed', outage);

    // Assess: receives burnt, tasks dead-lettered, none received more than 5 times, none lost.
    expect(result.deadLettered).toBeGreaterThan(0);
    expect(result.maxReceives).toBe(5);
    expect(result.transientErrors).toBeGreaterThan(0);
    expect(result.solved + result.deadLettered + result.unfinished).toBe(result.arrivals);
  });

  it('sends nothing to the DLQ when the consumers stop for the outage (the oracle)', () => {
    // Prepare / Act
    const result = run('oracle', { outages: [{ at: 600, durationSeconds: 2400 }], fleet: { maxReceiveCount: 5 } });

    // Assess: every task solved, the waits of the outage in the latency.
    expect(result.deadLettered).toBe(0);
    expect(result.solved).toBe(result.arrivals);
    expect(result.latency.p99 as number).toBeGreaterThan(1800);
  });

  it('spends a receive for each over-cap hand-back, and none without refusals', () => {
    // Prepare: a 10-thread plan that other users fill entirely for 10 minutes.
    const crowded = {
      fleet: { planThreads: 10 },
      foreignThreads: [
        { at: 0, threads: 0 },
        { at: 600, threads: 10 },
        { at: 1200, threads: 0 },
      ],
    };

    // Act
    const refused = run('lambda-fixed', crowded);
    const calm = run('lambda-fixed', { fleet: { planThreads: 10 } });

    // Assess
    expect(refused.handBacks).toBeGreaterThan(0);
    expect(refused.maxReceives).toBeGreaterThan(1);
    expect(calm.handBacks).toBe(0);
    expect(calm.maxReceives).toBe(1);
  });
});
