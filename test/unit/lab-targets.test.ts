/**
 * The fair floor a generated trace is judged against (lab/targets.ts): the clairvoyant Lambda
 * (oracle-ramp), or the fixed-maximum Lambda where it does better and keeps the rules the
 * governor keeps. One row per rule.
 */
import { describe, expect, it } from 'vitest';
import type { RunResult } from '../../lab/sim/types.js';
import { fairFloor } from '../../lab/targets.js';

function runOf(policy: string, overrides: Partial<RunResult> = {}): RunResult {
  return {
    trace: 't',
    policy,
    seed: 1,
    arrivals: 1000,
    solved: 1000,
    unfinished: 0,
    deadLettered: 0,
    handBacks: 0,
    maxReceives: 1,
    latency: { p50: 10, p95: 40, p99: 50, mean: 12 },
    peakBacklog: 10,
    drainSeconds: 5,
    utilizationWhileBacklog: null,
    backlogSeconds: 10,
    idleThreadSecondsPerTask: 0,
    submissions: 1000,
    overCapRejections: 0,
    overCapShare: 0,
    accountErrors: 0,
    transientErrors: 0,
    starvedSeconds: 0,
    overCapWhileStarved: 0,
    probes: 0,
    probesAccepted: 0,
    startedPastHalt: 0,
    startedPastPause: 0,
    haltCrossedAt: null,
    scalingChanges: 0,
    computeSeconds: 0,
    computeUsd: 0,
    usdPer1000Solves: null,
    invocations: 1000,
    solverUsd: 0,
    reasons: {},
    samples: { t: [], backlog: [], ceiling: [], inFlight: [] },
    simulatedSeconds: 3600,
    events: 0,
    wallMs: 0,
    ...overrides,
  };
}

const faster = { latency: { p50: 10, p95: 30, p99: 40, mean: 11 } };

describe('the fair floor', () => {
  const rows: { rule: string; fixed: Partial<RunResult>; floor: string }[] = [
    {
      rule: 'the fixed-maximum Lambda where it does better and keeps every rule',
      fixed: faster,
      floor: 'lambda-fixed',
    },
    {
      rule: 'not where it refuses over 2 % of its submissions',
      fixed: { ...faster, overCapRejections: 30, overCapShare: 0.03 },
      floor: 'oracle-ramp',
    },
    { rule: 'not where it dead-letters a task', fixed: { ...faster, deadLettered: 1 }, floor: 'oracle-ramp' },
    { rule: 'not where it leaves more unfinished', fixed: { ...faster, unfinished: 1 }, floor: 'oracle-ramp' },
    {
      rule: 'not where it starts a solve under the pause level (the money invariant the governor keeps)',
      fixed: { ...faster, startedPastPause: 3 },
      floor: 'oracle-ramp',
    },
    { rule: 'not where its p95 is no better', fixed: {}, floor: 'oracle-ramp' },
  ];

  it.each(rows)('$rule', ({ fixed, floor }) => {
    const runs = [runOf('governor'), runOf('oracle-ramp'), runOf('lambda-fixed', fixed)];
    expect(fairFloor(runs)?.policy).toBe(floor);
  });
});
