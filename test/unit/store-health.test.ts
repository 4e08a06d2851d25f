import { describe, expect, it } from 'vitest';
import {
  assessStoreHealth,
  type StoreHealthState,
  type StoreHealthVerdict,
  type StoreSample,
  storeHealthConfig,
} from '../../functions/core/store-health.js';

const config = storeHealthConfig(10_000);
const TICK = 1_000;

const ok = { ok: true } as const;
const down = { ok: false, kind: 'unavailable', detail: 'ServiceUnavailable' } as const;
const throttled = { ok: false, kind: 'throttled', detail: 'ProvisionedThroughputExceededException' } as const;

/** A tick's samples: DynamoDB and SQS, each with an optional probe and consumer window. */
function tick(
  dynamodb: Partial<Omit<StoreSample, 'store'>> | undefined,
  sqs: Partial<Omit<StoreSample, 'store'>> | undefined = { probe: ok },
): StoreSample[] {
  return [
    ...(dynamodb ? [{ store: 'dynamodb' as const, ...dynamodb }] : []),
    ...(sqs ? [{ store: 'sqs' as const, ...sqs }] : []),
  ];
}

/** Run ticks one second apart from t = 0; the verdict of each. */
function run(ticks: StoreSample[][], start?: StoreHealthState): StoreHealthVerdict[] {
  let state = start;
  return ticks.map((samples, n) => {
    const next = assessStoreHealth(state, samples, n * TICK, config);
    state = next.state;
    return next.verdict;
  });
}

const statuses = (verdicts: StoreHealthVerdict[]) => verdicts.map((v) => v.status);

describe('store health', () => {
  // One row per situation: the ticks, and the verdicts they must give.
  it.each<[string, StoreSample[][], string[]]>([
    ['healthy probes and consumers', [tick({ probe: ok, consumers: { requests: 50, errors: 1 } })], ['healthy']],
    [
      'a failing probe pauses after three ticks in a row',
      Array(4).fill(tick({ probe: down })),
      ['healthy', 'healthy', 'outage', 'outage'],
    ],
    [
      'throttling that the SDK cannot get through counts like an outage',
      Array(3).fill(tick({ probe: throttled })),
      ['healthy', 'healthy', 'outage'],
    ],
    [
      'the consumers failing more than half their calls count, with the probe answering',
      Array(3).fill(tick({ probe: ok, consumers: { requests: 40, errors: 30 } })),
      ['healthy', 'healthy', 'outage'],
    ],
    [
      'a few consumer calls say nothing either way',
      Array(4).fill(tick({ consumers: { requests: 3, errors: 3 } })),
      ['healthy', 'healthy', 'healthy', 'healthy'],
    ],
    [
      'a good tick between bad ones starts the count again',
      [tick({ probe: down }), tick({ probe: down }), tick({ probe: ok }), tick({ probe: down }), tick({ probe: down })],
      ['healthy', 'healthy', 'healthy', 'healthy', 'healthy'],
    ],
    [
      'a tick with no signal keeps the count where it was',
      [tick({ probe: down }), tick({ probe: down }), tick(undefined), tick({ probe: down })],
      ['healthy', 'healthy', 'healthy', 'outage'],
    ],
    ['SQS down pauses too', Array(3).fill(tick({ probe: ok }, { probe: down })), ['healthy', 'healthy', 'outage']],
  ])('%s', (_, ticks, expected) => {
    expect(statuses(run(ticks))).toEqual(expected);
  });

  it('names the store and the evidence in its reason', () => {
    const [, , outage] = run(Array(3).fill(tick({ probe: ok, consumers: { requests: 40, errors: 30 } })));
    expect(outage).toMatchObject({
      status: 'outage',
      store: 'dynamodb',
      reason: "DynamoDB outage: 75 % of the consumers' DynamoDB calls failed (30 of 40)",
    });
  });

  it('probes after the cooldown, doubles the wait after a failed probe (capped), and resumes on a probe that answers', () => {
    // Paused at t = 2 s (third bad tick); probe due at 12 s.
    let state: StoreHealthState | undefined;
    const at = (now: number, samples: StoreSample[]) => {
      const next = assessStoreHealth(state, samples, now, config);
      state = next.state;
      return next.verdict;
    };
    for (const now of [0, 1_000, 2_000]) at(now, tick({ probe: down }));
    expect(at(11_000, tick({ probe: down }))).toMatchObject({ status: 'outage', probeAt: 12_000 });
    // The probe at 12 s fails: the next one waits 2 × the cooldown.
    expect(at(12_000, tick({ probe: down }))).toMatchObject({ status: 'outage', probeAt: 32_000, since: 2_000 });
    expect(at(20_000, tick({ probe: ok }))).toMatchObject({ status: 'outage' });
    // A second failure is capped at 2 × as well.
    expect(at(32_000, tick({ probe: down }))).toMatchObject({ probeAt: 52_000 });
    expect(at(52_000, tick({ probe: ok }))).toMatchObject({ status: 'probing', store: 'dynamodb', since: 52_000 });
  });

  it('ignores the consumers’ old failures during the grace after a resume, pauses again if the probe fails, and ends healthy', () => {
    let state: StoreHealthState | undefined;
    const at = (now: number, samples: StoreSample[]) => {
      const next = assessStoreHealth(state, samples, now, config);
      state = next.state;
      return next.verdict;
    };
    for (const now of [0, 1_000, 2_000]) at(now, tick({ probe: down }));
    expect(at(12_000, tick({ probe: ok }))).toMatchObject({ status: 'probing' });
    // The window still holds the outage's failed calls: not read within the grace.
    expect(at(13_000, tick({ probe: ok, consumers: { requests: 40, errors: 40 } }))).toMatchObject({
      status: 'probing',
    });
    // Past the grace, a healthy tick ends the probe.
    expect(at(23_000, tick({ probe: ok, consumers: { requests: 40, errors: 0 } }))).toMatchObject({
      status: 'healthy',
    });

    // A new outage, then a failed first tick after its probe: paused again at once, with a longer wait.
    for (const now of [30_000, 31_000, 32_000]) at(now, tick({ probe: down }));
    expect(at(42_000, tick({ probe: ok }))).toMatchObject({ status: 'probing' });
    expect(at(43_000, tick({ probe: down }))).toMatchObject({ status: 'outage', probeAt: 63_000 });
  });

  it('starts from nothing at a cold start in the middle of an outage, and never reads a missing store as healthy', () => {
    const cold = assessStoreHealth(undefined, tick(undefined, undefined), 0, config);
    expect(cold.verdict).toEqual({ status: 'healthy' });
    expect(cold.state.dynamodb).toMatchObject({ status: 'healthy', badTicks: 0 });
    expect(statuses(run(Array(3).fill(tick({ probe: down })), cold.state))).toEqual(['healthy', 'healthy', 'outage']);
  });

  it('reports the worse store: an outage of one before a probe of the other', () => {
    const state: StoreHealthState = {
      dynamodb: { status: 'probing', badTicks: 0, failedProbes: 0, resumedAt: 0 },
      sqs: { status: 'outage', badTicks: 3, failedProbes: 0, since: 0, probeAt: 50_000 },
    };
    expect(assessStoreHealth(state, tick({ probe: ok }, { probe: down }), 1_000, config).verdict).toMatchObject({
      status: 'outage',
      store: 'sqs',
    });
  });
});
