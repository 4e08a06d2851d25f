/**
 * The stores as the governor's dependencies: one tick's evidence per store
 * (functions/core/store-health.ts), and the one outage state machine that acts on it, the
 * availability stage: a store down `outageTicks` ticks in a row pauses, every tick probes, the
 * first tick every dependency answers resumes on trial at the minimum ceiling, and the consumers'
 * own calls since that resume pass the trial (back at the ceiling held before the outage) or fail
 * it (paused again at once, the next trial later). The consumers' calls are not read while paused,
 * and only those since the resume after it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { minimumCeiling } from '../../functions/core/governor/capacity.js';
import { decide, governorConfigFrom, initialState } from '../../functions/core/governor/policy.js';
import type { Decision, GovernorConfig, GovernorState } from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';
import {
  consumerCallsView,
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
      consumers: 'failing',
    });
    expect(storeHealthOf(dynamo({ probe: ok, consumers: { requests: 40, errors: 2 } }), fresh)).toMatchObject({
      down: false,
      consumers: 'working',
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
const SPAN_TICKS = (cfg.metricsSpanMs as number) / TICK;

/** What each store does on one tick: the governor's probe, and the consumers' calls made during it. */
interface Tick {
  dynamodb?: { probe?: StoreSample['probe']; calls?: { requests: number; errors: number } };
  sqs?: { probe?: StoreSample['probe']; calls?: { requests: number; errors: number } };
}

/**
 * Ticks through decide() the way the loop runs them: the consumers' calls summed over the metric
 * window (SPAN_TICKS ticks), or since the last resume when the view says so, as the readers do;
 * the stores judged and reported in `signals.dependencies`; the lanes read back as the last
 * decision left them. Consumers make their calls only on ticks the fleet runs.
 */
function run(
  ticks: Tick[],
  start: GovernorState = initialState(cfg, T0),
  reading: 'calls' | 'as-built' | 'failures-only' = 'calls',
): Decision[] {
  const decisions: Decision[] = [];
  const made: { at: number; store: 'dynamodb' | 'sqs'; requests: number; errors: number }[] = [];
  let state = start;
  let ceiling = 10;
  let enabled = true;
  ticks.forEach((t, i) => {
    const now = T0 + i * TICK;
    if (enabled)
      for (const store of ['dynamodb', 'sqs'] as const) {
        const calls = t[store]?.calls;
        if (calls !== undefined) made.push({ at: now, store, ...calls });
      }
    const view = consumerCallsView(state, now, cfg);
    const from = view.read && view.since !== undefined ? view.since : now - SPAN_TICKS * TICK + 1;
    // As built (the AWS reader): the failures alone unless some failed or the view needs the count.
    const countsRead =
      reading === 'calls' ||
      (reading === 'as-built' && view.read && view.counts) ||
      made.some((c) => c.at >= from && c.at <= now && c.errors > 0);
    const sum = (store: 'dynamodb' | 'sqs') => {
      const window = made.filter((c) => c.store === store && c.at >= from && c.at <= now);
      if (window.length === 0) return {};
      const errors = window.reduce((a, c) => a + c.errors, 0);
      return {
        consumers: countsRead ? { requests: window.reduce((a, c) => a + c.requests, 0), errors } : { errors },
      };
    };
    const samples: StoreSample[] = (['dynamodb', 'sqs'] as const).map((store) => ({
      store,
      probe: t[store]?.probe ?? ok,
      ...sum(store),
    }));
    const dependencies = storeDependencies(samples, { consumersStale: !view.read });
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
const working = { requests: 20, errors: 0 };
const failing = { requests: 20, errors: 20 };

describe('a store outage through the availability stage', () => {
  it('pauses after outageTicks down ticks, stays paused while the probe fails, resumes on trial, and is back at the pre-outage ceiling once the consumers’ calls work', () => {
    const up = run(Array(3).fill({ dynamodb: { calls: working } }));
    const before = up.at(-1) as Decision;
    expect(before.paused).toBe(false);
    const held = enabledTotal(before);
    const ticks: Tick[] = [
      ...Array(cfg.outageTicks + 4).fill({ dynamodb: { probe: down } }),
      { dynamodb: { probe: ok } },
      { dynamodb: { calls: working } },
    ];
    const ds = run(ticks, before.state);
    // Down ticks 1 … outageTicks − 1 still run; the outageTicks-th pauses.
    expect(paused(ds)).toEqual([...Array(cfg.outageTicks - 1).fill(false), ...Array(5).fill(true), false, false]);
    const pause = ds[cfg.outageTicks - 1] as Decision;
    expect(pause.reason.code).toBe('PAUSE_OUTAGE');
    expect(pause.reason.message).toContain('dynamodb');
    expect(pause.enabled).toEqual({ normal: false, high: false });
    const trial = ds.at(-2) as Decision;
    expect(trial.reason.code).toBe('OUTAGE_PROBE');
    expect(trial.reason.message).toContain('on trial');
    expect(enabledTotal(trial)).toBe(minimumCeiling(cfg));
    const back = ds.at(-1) as Decision;
    expect(back.reason.message).toContain('Trial passed');
    expect(enabledTotal(back)).toBe(held);
    expect(back.state.storeTrial).toBeUndefined();
  });

  it('pauses for SQS as for DynamoDB, and on the consumers’ failures with the probe answering', () => {
    const sqsDown = run(Array(cfg.outageTicks).fill({ sqs: { probe: down } }));
    expect(sqsDown.at(-1)?.reason.code).toBe('PAUSE_OUTAGE');
    const calls = run(Array(cfg.outageTicks).fill({ dynamodb: { calls: failing } }));
    expect(calls.at(-1)?.reason.code).toBe('PAUSE_OUTAGE');
  });

  it('does not pause on a blip shorter than outageTicks', () => {
    const ticks: Tick[] = [
      ...Array(cfg.outageTicks - 1).fill({ dynamodb: { probe: down } }),
      {},
      ...Array(cfg.outageTicks - 1).fill({ dynamodb: { probe: down } }),
    ];
    expect(paused(run(ticks)).some(Boolean)).toBe(false);
  });

  it('reads only the calls since the resume: the window’s failures from before the pause neither fail the trial nor pause again', () => {
    const ticks: Tick[] = [
      ...Array(cfg.outageTicks).fill({ dynamodb: { probe: down, calls: failing } }),
      // The store answers again; the window still reaches back into the outage for a while.
      ...Array(SPAN_TICKS + 2).fill({ dynamodb: { calls: working } }),
    ];
    const ds = run(ticks);
    expect(ds[cfg.outageTicks - 1]?.paused).toBe(true);
    expect(paused(ds.slice(cfg.outageTicks))).toEqual(Array(SPAN_TICKS + 2).fill(false));
    expect(ds.slice(cfg.outageTicks).some((d) => d.reason.message.includes('Trial passed'))).toBe(true);
  });

  it('a store whose probe answers while the consumers’ calls keep failing: every trial fails on its first word, at the minimum ceiling, and the next waits longer (no flapping at the whole ceiling)', () => {
    const writesFail: Tick = { dynamodb: { probe: ok, calls: failing } };
    const ds = run([
      ...Array(cfg.outageTicks).fill(writesFail),
      ...Array(80).fill(writesFail),
      ...Array(40).fill({ dynamodb: { calls: working } }),
    ]);
    const firstPause = cfg.outageTicks - 1;
    expect(ds[firstPause]?.reason.code).toBe('PAUSE_OUTAGE');
    const during = ds.slice(firstPause + 1, cfg.outageTicks + 80);
    // Never above the trial's ceiling while the calls fail, and each trial ends on the tick after it starts.
    expect(Math.max(...during.map(enabledTotal))).toBe(minimumCeiling(cfg));
    const trials = during.flatMap((d, i) => (d.paused ? [] : [i]));
    expect(trials.length).toBeGreaterThanOrEqual(3);
    for (const i of trials) expect(during[i + 1]?.paused).toBe(true);
    // The waits between trials grow (outageTicks ticks, then twice, four times …).
    const gaps = trials.slice(1).map((t, k) => t - (trials[k] as number));
    for (let k = 1; k < gaps.length; k++) expect(gaps[k]).toBeGreaterThanOrEqual(gaps[k - 1] as number);
    expect(gaps.at(-1)).toBeGreaterThan(gaps[0] as number);
    // Once the calls work, a trial passes and the fleet is back at its pre-outage ceiling.
    const after = ds.slice(cfg.outageTicks + 80);
    const passed = after.find((d) => d.reason.message.includes('Trial passed'));
    expect(passed).toBeDefined();
    expect(enabledTotal(after.at(-1) as Decision)).toBe(enabledTotal(ds[0] as Decision));
  });

  it('a trial the consumers say nothing about passes after the grace (missing evidence is not a failure)', () => {
    const ds = run([...Array(cfg.outageTicks).fill({ dynamodb: { probe: down } }), ...Array(SPAN_TICKS + 2).fill({})]);
    const trial = ds.findIndex((d, i) => i >= cfg.outageTicks && !d.paused);
    expect(enabledTotal(ds[trial] as Decision)).toBe(minimumCeiling(cfg));
    const passed = ds.findIndex((d) => d.reason.message.includes('Trial passed'));
    expect(passed - trial).toBe(SPAN_TICKS);
    expect(enabledTotal(ds[passed] as Decision)).toBe(enabledTotal(ds[0] as Decision));
  });

  it('a solver outage resumes straight at the pre-outage ceiling (no store, no trial)', () => {
    const ds = run([...Array(cfg.outageTicks).fill({}), {}], initialState(cfg, T0));
    expect(ds.every((d) => d.state.storeTrial === undefined)).toBe(true);
  });
});

describe('which consumer calls a tick reads', () => {
  const base = initialState(cfg, T0);
  it.each<[string, GovernorState, number, ReturnType<typeof consumerCallsView>]>([
    ['no state yet: the window', base, T0, { read: true, counts: false }],
    ['paused for an outage: none', { ...base, pause: { reason: 'outage', since: T0 } }, T0 + 1_000, { read: false }],
    [
      'just resumed: those since the resume',
      { ...base, resumedAt: T0 },
      T0 + 2_000,
      { read: true, since: T0, counts: false },
    ],
    ['the window past the resume: all of it', { ...base, resumedAt: T0 }, T0 + 5_000, { read: true, counts: false }],
    [
      'paused for money: the window',
      { ...base, pause: { reason: 'balance', since: T0 } },
      T0 + 1_000,
      { read: true, counts: false },
    ],
    [
      'on a store trial: those since the resume, with their count',
      { ...base, resumedAt: T0, storeTrial: { stores: ['dynamodb'], since: T0, failures: 0 } },
      T0 + 2_000,
      { read: true, since: T0, counts: true },
    ],
    [
      'on a store trial past the window: all of it, with its count',
      { ...base, resumedAt: T0, storeTrial: { stores: ['dynamodb'], since: T0, failures: 0 } },
      T0 + 5_000,
      { read: true, counts: true },
    ],
  ])('%s', (_, state, now, expected) => {
    expect(consumerCallsView(state, now, cfg)).toEqual(expected);
  });
});

describe('the consumers’ failures read alone in an ordinary minute', () => {
  const probe = fc.constantFrom<StoreSample['probe']>(ok, ok, down, throttled);
  const calls = fc.option(
    fc
      .integer({ min: 0, max: 30 })
      .chain((requests) =>
        fc.record({ requests: fc.constant(requests), errors: fc.integer({ min: 0, max: requests }) }),
      ),
    { nil: undefined, freq: 3 },
  );
  const store = fc.record({ probe, calls });
  // Spells of a few ticks alike (outages long enough to pause, trials after them), each store's own.
  const spell = fc
    .tuple(fc.record({ dynamodb: store, sqs: store }), fc.integer({ min: 1, max: 2 * cfg.outageTicks }))
    .map(([tick, length]) => Array.from({ length }, (): Tick => tick));
  const ticks = fc.array(spell, { minLength: 1, maxLength: 12 }).map((spells) => spells.flat());

  it('decides every tick as a read of the calls with their count would (the count only matters to a trial)', () => {
    fc.assert(
      fc.property(ticks, (ticks) => {
        const full = run(ticks);
        const asBuilt = run(ticks, undefined, 'as-built');
        expect(asBuilt.map((d) => [d.reason.code, d.paused, d.ceilings.normal, d.enabled.normal])).toEqual(
          full.map((d) => [d.reason.code, d.paused, d.ceilings.normal, d.enabled.normal]),
        );
      }),
      { numRuns: 300 },
    );
  });

  it('passes a store trial on the count the view asks for, sooner than a reader of the failures alone', () => {
    // A DynamoDB outage, then every call working.
    const outage: Tick[] = [
      ...Array.from({ length: cfg.outageTicks }, () => ({ dynamodb: { probe: down } })),
      ...Array.from({ length: 20 }, () => ({ dynamodb: { probe: ok, calls: working } })),
    ];
    const passedAt = (ds: Decision[]) =>
      ds.findIndex((d, i) => i > cfg.outageTicks && d.state.storeTrial === undefined && !d.paused);
    const asBuilt = run(outage, undefined, 'as-built');
    const blind = run(outage, undefined, 'failures-only');
    // As built, the trial passes on the consumers' calls as soon as a read with their count would…
    expect(passedAt(asBuilt)).toBe(passedAt(run(outage)));
    expect(passedAt(asBuilt)).toBeGreaterThan(0);
    // …where without the count it waits out its grace (no word either way).
    expect(passedAt(blind)).toBeGreaterThan(passedAt(asBuilt));
  });
});
