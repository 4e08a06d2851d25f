/**
 * The governor's accepted probe wakes its ticks (functions/governor/tick-wake.ts): while others
 * hold the plan the fleet probes once a tick, and an accepted probe is used at once, not up to a
 * tick later. The wait is cut short; the woken tick is out of the cadence and makes no probe of
 * its own; the probe calls its hook only on an acceptance, once the ledger has it.
 */
import { describe, expect, it } from 'vitest';
import { createMemoryGovernorState } from '../../functions/adapters/governor-state.js';
import { governorConfigFrom } from '../../functions/core/governor/policy.js';
import type { SolveOptions, SolverPort } from '../../functions/core/ports.js';
import { resolveSettings } from '../../functions/core/settings.js';
import type { ThreadLedgerReading, ThreadLedgerRecorder } from '../../functions/core/thread-ledger.js';
import {
  createGovernorLoop,
  type GovernorLoop,
  type ThreadProbe,
  type TickOptions,
} from '../../functions/governor/loop.js';
import { runTicks } from '../../functions/governor/run.js';
import { createThreadProbe } from '../../functions/governor/thread-probe.js';
import { createTickWake } from '../../functions/governor/tick-wake.js';

/** A sleep on a virtual clock that ends at `ms` unless its signal aborts first (then it rejects, as node's does). */
function virtualSleep(clock: { now: number }) {
  const sleeps: { ms: number; aborted: boolean }[] = [];
  const sleep = (ms: number, signal?: AbortSignal) => {
    const entry = { ms, aborted: false };
    sleeps.push(entry);
    return new Promise<void>((resolve, reject) => {
      if (ms === 0) {
        resolve();
        return;
      }
      signal?.addEventListener('abort', () => {
        entry.aborted = true;
        reject(new Error('aborted'));
      });
      // The virtual time passes at once unless something wakes the wait within this turn.
      setImmediate(() => {
        if (entry.aborted) return;
        clock.now += ms;
        resolve();
      });
    });
  };
  return { sleep, sleeps };
}

describe('tick wake', () => {
  it('waits the whole time when nothing wakes it', async () => {
    const clock = { now: 0 };
    const { sleep } = virtualSleep(clock);
    const wake = createTickWake();
    expect(await wake.wait(10_000, sleep)).toBe(false);
    expect(clock.now).toBe(10_000);
  });

  it('a wake before the wait ends it at once, and is used up', async () => {
    const clock = { now: 0 };
    const { sleep, sleeps } = virtualSleep(clock);
    const wake = createTickWake();
    wake.wake();
    expect(await wake.wait(10_000, sleep)).toBe(true);
    expect(sleeps).toHaveLength(0);
    expect(await wake.wait(10_000, sleep)).toBe(false);
    expect(clock.now).toBe(10_000);
  });

  it('a wake during the wait cuts it short and aborts the sleep', async () => {
    const clock = { now: 0 };
    const { sleep, sleeps } = virtualSleep(clock);
    const wake = createTickWake();
    const waiting = wake.wait(10_000, sleep);
    wake.wake();
    expect(await waiting).toBe(true);
    expect(clock.now).toBe(0);
    expect(sleeps[0]?.aborted).toBe(true);
  });
});

describe('runTicks with a wake', () => {
  it('ticks at once on a wake, without a probe, and keeps the cadence', async () => {
    // Prepare: the tick at 20 s makes a probe the solver accepts (it wakes the loop).
    const clock = { now: 0 };
    const { sleep } = virtualSleep(clock);
    const wake = createTickWake();
    const ticks: { at: number; options: TickOptions | undefined }[] = [];
    const loop = {
      async tick(options?: TickOptions) {
        ticks.push({ at: clock.now, options });
        if (clock.now === 20_000 && options?.probe !== false) wake.wake();
        return { decision: { reason: { code: 'IDLE' } } } as never;
      },
      lastDecision: undefined,
      beginInvocation: () => undefined,
    } as GovernorLoop;
    // Act: an invocation of 45 s, ticks 10 s apart.
    const result = await runTicks({
      loop,
      tickMs: 10_000,
      remainingMs: () => 45_000 - clock.now,
      sleep,
      clock: () => clock.now,
      wake,
    });
    // Assess: the woken tick at 20 s, right after the one that probed; the next at 30 s as before,
    // and the last at 40 s (5 s left after it: the margin).
    expect(ticks.map((t) => [t.at, t.options?.probe ?? true])).toEqual([
      [0, true],
      [10_000, true],
      [20_000, true],
      [20_000, false],
      [30_000, true],
      [40_000, true],
    ]);
    expect(result.ticks).toBe(6);
  });
});

/**
 * A loop on a plan of 8 whose thread ledger reads `reading()` (others hold the whole plan: the
 * decision asks for a probe from its second tick, the first paying for the refusal that showed
 * it), the clock `now()`, 40 tasks waiting, and the probe given.
 */
function starvedLoop(reading: () => ThreadLedgerReading, now: () => number, probe: ThreadProbe): GovernorLoop {
  const config = governorConfigFrom(resolveSettings({ planThreads: 8, tickMs: 1000 }), { probeSubmissions: true });
  let setting = { ceiling: 2, enabled: true };
  return createGovernorLoop({
    config,
    queues: { read: async () => ({ normal: { at: now(), visible: 40, notVisible: 0, delayed: 0 } }) },
    metrics: { read: async () => undefined },
    balance: { read: async () => 10 },
    threadLedger: { read: async () => reading() },
    actuator: {
      read: async () => ({ normal: setting }),
      apply: async (d) => {
        setting = { ceiling: d.ceilings.normal, enabled: d.enabled.normal };
        return { changes: [] };
      },
    },
    state: createMemoryGovernorState(),
    probe,
    clock: now,
  });
}

/** Others hold the whole plan: a refusal while the fleet held nothing. */
const STARVED: ThreadLedgerReading = {
  held: 0,
  refusals: 1,
  acceptances: 0,
  refusalRun: 1,
  lastRefusal: { at: 1_000, held: 0 },
};

describe('the loop’s probe on a woken tick', () => {
  it('a woken tick makes no probe, though the decision asks for one; the next tick makes it', async () => {
    // Prepare: others hold the whole plan
    let now = 1_000;
    const submitted: number[] = [];
    const loop = starvedLoop(
      () => STARVED,
      () => now,
      {
        submit: async (at) => {
          submitted.push(at);
        },
      },
    );
    // Act
    const first = await loop.tick();
    now = 2_000;
    const woken = await loop.tick({ probe: false });
    now = 3_000;
    const next = await loop.tick();
    // Assess
    expect(first.decision.probe).toBe(false);
    expect(woken.decision.probe).toBe(true);
    expect(next.decision.probe).toBe(true);
    expect(submitted).toEqual([3_000]);
  });
});

describe('the probe’s hook', () => {
  function ledgerRecording(events: string[]): ThreadLedgerRecorder {
    return {
      accepted: async () => {
        await new Promise((resolve) => setImmediate(resolve));
        events.push('accepted written');
        return { bucket: Number.NaN };
      },
      refused: async () => {
        events.push('refused written');
        return 0;
      },
      released: async () => undefined,
    } as unknown as ThreadLedgerRecorder;
  }

  function solverAnswering(outcome: 'accepted' | 'over_cap'): Pick<SolverPort, 'solve'> {
    return {
      async solve(_task, options: SolveOptions) {
        options.onSolverAnswer?.({ request: 'submit', outcome });
        if (outcome === 'over_cap') throw Object.assign(new Error('ERROR_NO_SLOT_AVAILABLE'), { name: 'OverCapError' });
        return { answer: 'probe', solverId: '1', acceptedAt: 0 } as never;
      },
    };
  }

  async function settle() {
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  }

  it.each([
    ['is called once the acceptance is in the ledger', 'accepted', ['accepted written', 'woken']],
    ['is not called on a refusal', 'over_cap', ['refused written']],
  ] as const)('%s', async (_, outcome, expected) => {
    const events: string[] = [];
    const probe = createThreadProbe({
      solver: solverAnswering(outcome),
      ledger: ledgerRecording(events),
      onAccepted: () => events.push('woken'),
    });
    await probe.submit(0);
    await settle();
    expect(events).toEqual(expected);
  });
});

describe('the probe’s kept task (probe-carrier.ts keeps a refused one for the next probe)', () => {
  it('stays kept while the fleet is starved, goes back on the first tick that is not, and when the invocation ends', async () => {
    // Prepare: others hold the whole plan (the probe's turn from the second tick), then an
    // acceptance shows threads handed back.
    let reading = STARVED;
    let now = 1_000;
    const calls: string[] = [];
    const loop = starvedLoop(
      () => reading,
      () => now,
      {
        submit: async (at) => {
          calls.push(`submit ${at}`);
        },
        release: async () => {
          calls.push(`release ${now}`);
        },
      },
    );
    // Act: two starved ticks (the second probes), then the probe's acceptance is in the ledger
    const reasons: string[] = [];
    reasons.push((await loop.tick()).decision.reason.code);
    now = 2_000;
    reasons.push((await loop.tick()).decision.reason.code);
    reading = {
      held: 1,
      refusals: 1,
      acceptances: 1,
      refusalRun: 0,
      lastRefusal: { at: 1_000, held: 0 },
      lastAcceptance: { at: 2_500, held: 1 },
    };
    now = 3_000;
    reasons.push((await loop.tick()).decision.reason.code);
    now = 3_500;
    await loop.endInvocation?.();
    // Assess: nothing released while starved (the kept task is the next probe's); released on the
    // tick that resumed the mappings, and again (a no-op for a carrier keeping none) at the end
    expect(reasons.slice(0, 2)).toEqual(['WAIT_FOR_THREADS', 'WAIT_FOR_THREADS']);
    expect(reasons[2]).not.toBe('WAIT_FOR_THREADS');
    expect(calls).toEqual(['submit 2000', 'release 3000', 'release 3500']);
  });

  it('runTicks ends each invocation by ending the loop’s, after its last tick, failed ticks or not', async () => {
    const clock = { now: 0 };
    const { sleep } = virtualSleep(clock);
    const events: string[] = [];
    const loop = {
      async tick() {
        events.push(`tick ${clock.now}`);
        if (clock.now === 10_000) throw new Error('state store down');
        return { decision: { reason: { code: 'IDLE' } } } as never;
      },
      lastDecision: undefined,
      beginInvocation: () => undefined,
      endInvocation: async () => {
        events.push(`end ${clock.now}`);
      },
    } as GovernorLoop;
    await expect(
      runTicks({ loop, tickMs: 10_000, remainingMs: () => 25_000 - clock.now, sleep, clock: () => clock.now }),
    ).rejects.toThrow();
    expect(events).toEqual(['tick 0', 'tick 10000', 'tick 20000', 'end 20000']);
  });
});
