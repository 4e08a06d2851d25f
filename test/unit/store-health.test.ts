/**
 * The stores as the governor's dependencies: one tick's evidence per store
 * (functions/core/store-health.ts), and the one outage state machine that acts on it, the
 * availability stage: a store down `outageTicks` ticks in a row pauses, every tick probes, the
 * first tick every dependency answers resumes at the ceiling held before the outage, and the
 * consumers' window is not read while paused or in the grace after a resume.
 */
import { describe, expect, it } from 'vitest';
import { decide, governorConfigFrom, initialState } from '../../functions/core/governor/policy.js';
import type { Decision, GovernorConfig, GovernorState } from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';
import {
  consumersStale,
  type StoreSample,
  storeDependencies,
  storeHealthOf,
} from '../../functions/core/store-health.js';
import { enabledTotal, governorSignals, T0 } from '../helpers/governor.js';

const ok = { ok: true } as const;
const down = { ok: false, kind: 'unavailable', detail: 'ServiceUnavailable' } as const;
const throttled = { ok: false, kind: 'throttled', detail: 'ProvisionedThroughputExceededException' } as const;
const fresh = { consumersStale: false };

const dynamo = (sample: Omit<StoreSample, 'store'>): StoreSample => ({ store: 'dynamodb', ...sample });

describe('one tick of store evidence', () => {
  it.each<[string, Omit<StoreSample, 'store'>, boolean | undefined]>([
    ['a probe that answers, consumers mostly fine', { probe: ok, consumers: { requests: 50, errors: 1 } }, false],
    ['a failed probe', { probe: down }, true],
    ['throttling the SDK could not get through', { probe: throttled }, true],
    ['most consumer calls failing, the probe answering', { probe: ok, consumers: { requests: 40, errors: 30 } }, true],
    ['too few consumer calls to say, no probe', { consumers: { requests: 3, errors: 3 } }, undefined],
    ['nothing at all', {}, undefined],
    ['half the calls failing is not more than half', { consumers: { requests: 40, errors: 20 } }, false],
  ])('%s', (_, sample, expected) => {
    expect(storeHealthOf(dynamo(sample), fresh).down).toBe(expected);
  });

  it('names the store and the evidence, error classes only', () => {
    expect(storeHealthOf(dynamo({ probe: ok, consumers: { requests: 40, errors: 30 } }), fresh)).toEqual({
      name: 'dynamodb',
      down: true,
      detail: "75 % of the consumers' DynamoDB calls failed (30 of 40)",
    });
    expect(storeHealthOf({ store: 'sqs', probe: down }, fresh)).toEqual({
      name: 'sqs',
      down: true,
      detail: "the governor's SQS probe failed (unavailable: ServiceUnavailable)",
    });
  });

  it('reads only the probe when the consumers’ window is stale', () => {
    const window = { consumers: { requests: 40, errors: 40 } };
    expect(storeHealthOf(dynamo({ probe: ok, ...window }), { consumersStale: true }).down).toBe(false);
    expect(storeHealthOf(dynamo(window), { consumersStale: true }).down).toBeUndefined();
  });
});

function config(overrides: Partial<GovernorConfig> = {}): GovernorConfig {
  return governorConfigFrom(resolveSettings({ tickMs: 1000, planThreads: 40 }), {
    metricsSpanMs: 5_000,
    ...overrides,
  });
}

const cfg = config();
const TICK = 1000;

interface Tick {
  dynamodb?: Omit<StoreSample, 'store'>;
  sqs?: Omit<StoreSample, 'store'>;
}

/**
 * Ticks through decide() the way the loop runs them: the stores judged with the stale flag of
 * the state the tick starts from, reported in `signals.dependencies`; the lanes read back as
 * the last decision left them.
 */
function run(ticks: Tick[], start: GovernorState = initialState(cfg, T0)): Decision[] {
  const decisions: Decision[] = [];
  let state = start;
  let ceiling = 10;
  let enabled = true;
  ticks.forEach((t, i) => {
    const now = T0 + i * TICK;
    const samples: StoreSample[] = [
      { store: 'dynamodb', ...(t.dynamodb ?? { probe: ok }) },
      { store: 'sqs', ...(t.sqs ?? { probe: ok }) },
    ];
    const dependencies = storeDependencies(samples, { consumersStale: consumersStale(state, now, cfg) });
    const d = decide(
      governorSignals(now, { dependencies }, { backlog: 500, inFlight: ceiling, ceiling, enabled }),
      state,
      cfg,
    );
    decisions.push(d);
    state = d.state;
    ceiling = d.ceilings.normal;
    enabled = d.enabled.normal;
  });
  return decisions;
}

const paused = (ds: Decision[]) => ds.map((d) => d.paused);

describe('a store outage through the availability stage', () => {
  it('pauses after outageTicks down ticks, stays paused while the probe fails, resumes at the pre-outage ceiling', () => {
    const up = run(Array(3).fill({}));
    const before = up.at(-1) as Decision;
    expect(before.paused).toBe(false);
    const held = enabledTotal(before);
    const ticks: Tick[] = [
      ...Array(cfg.outageTicks + 4).fill({ dynamodb: { probe: down } }),
      { dynamodb: { probe: ok } },
    ];
    const ds = run(ticks, before.state);
    // Down ticks 1 … outageTicks − 1 still run; the outageTicks-th pauses.
    expect(paused(ds)).toEqual([...Array(cfg.outageTicks - 1).fill(false), ...Array(5).fill(true), false]);
    const pause = ds[cfg.outageTicks - 1] as Decision;
    expect(pause.reason.code).toBe('PAUSE_OUTAGE');
    expect(pause.reason.message).toContain('dynamodb');
    expect(pause.enabled).toEqual({ normal: false, high: false });
    const resume = ds.at(-1) as Decision;
    expect(resume.reason.code).toBe('OUTAGE_PROBE');
    expect(enabledTotal(resume)).toBe(held);
  });

  it('pauses for SQS as for DynamoDB, and on the consumers’ failures with the probe answering', () => {
    const sqsDown = run(Array(cfg.outageTicks).fill({ sqs: { probe: down } }));
    expect(sqsDown.at(-1)?.reason.code).toBe('PAUSE_OUTAGE');
    const failing = run(
      Array(cfg.outageTicks).fill({ dynamodb: { probe: ok, consumers: { requests: 60, errors: 50 } } }),
    );
    expect(failing.at(-1)?.reason.code).toBe('PAUSE_OUTAGE');
  });

  it('does not pause on a blip shorter than outageTicks', () => {
    const ticks: Tick[] = [
      ...Array(cfg.outageTicks - 1).fill({ dynamodb: { probe: down } }),
      {},
      ...Array(cfg.outageTicks - 1).fill({ dynamodb: { probe: down } }),
    ];
    expect(paused(run(ticks)).some(Boolean)).toBe(false);
  });

  it('resumes on the probe while the consumers’ window still holds the outage, and does not pause again on it in the grace', () => {
    const stale = { probe: ok, consumers: { requests: 80, errors: 80 } };
    const ticks: Tick[] = [
      ...Array(cfg.outageTicks).fill({ dynamodb: { probe: down, consumers: { requests: 80, errors: 80 } } }),
      // The store answers again; the window still reaches back into the outage for a while.
      ...Array(4).fill({ dynamodb: stale }),
    ];
    const ds = run(ticks);
    expect(ds[cfg.outageTicks - 1]?.paused).toBe(true);
    expect(paused(ds.slice(cfg.outageTicks))).toEqual([false, false, false, false]);
  });

  it('pauses again once the grace is over if the consumers still fail (and the probe, answering, resumes)', () => {
    const failing = { probe: ok, consumers: { requests: 80, errors: 80 } };
    const span = cfg.metricsSpanMs as number;
    const ticks: Tick[] = [
      ...Array(cfg.outageTicks).fill({ dynamodb: { probe: down } }),
      ...Array(span / TICK + cfg.outageTicks + 1).fill({ dynamodb: failing }),
    ];
    const ds = run(ticks);
    const resumedAt = cfg.outageTicks;
    expect(ds[resumedAt]?.reason.code).toBe('OUTAGE_PROBE');
    // The grace (span / TICK ticks) is not read, then outageTicks down ticks pause again.
    const again = ds.findIndex((d, i) => i > resumedAt && d.paused);
    expect(again).toBe(resumedAt + span / TICK + cfg.outageTicks - 1);
    expect(ds[again]?.reason.code).toBe('PAUSE_OUTAGE');
  });
});
