import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  DEFAULT_ACCEPTANCES_PER_PROBE,
  lowerBoundAt,
  neighbourDecayMs,
} from '../../functions/core/governor/neighbours.js';
import { capFloor, decide, governorConfigFrom, initialState } from '../../functions/core/governor/policy.js';
import type { GovernorConfig, GovernorSignals, GovernorState } from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';
import type { ThreadLedgerReading } from '../../functions/core/thread-ledger.js';
import { enabledTotal, governorSignals, T0 } from '../helpers/governor.js';

function config(fleet: Parameters<typeof resolveSettings>[0] = {}): GovernorConfig {
  return governorConfigFrom(resolveSettings({ tickMs: 1000, planThreads: 10, ...fleet }));
}

/** A tick with the normal lane full at `ceiling`, 2 s solves, and the ledger as read. */
function signals(now: number, ceiling: number, ledger: ThreadLedgerReading | undefined): GovernorSignals {
  return governorSignals(
    now,
    { completionRate: 1, meanSolveMs: 2_000, p95SolveMs: 3_000, ...(ledger ? { threadLedger: ledger } : {}) },
    { inFlight: ceiling, ceiling },
  );
}

describe('decide() with the thread ledger', () => {
  it('shrinks to the threads held at a refusal within one tick', () => {
    // Prepare: 10 threads, the fleet at 10; refused while it held 6
    const c = config();
    const state = initialState(c, T0);
    const ledger = { held: 6, refusals: 3, acceptances: 6, lastRefusal: { at: T0 + 900, held: 6 } };
    // Act
    const d = decide(signals(T0 + 1000, 10, ledger), state, c);
    // Assess
    expect(d.reason.code).toBe('OVER_CAP_SHRINK');
    expect(enabledTotal(d)).toBe(6);
  });

  it('probes with one spare invocation after a quiet period, not by doubling', () => {
    // Prepare: others hold exactly 4 (refused at 6, accepted at 5)
    const c = config();
    const first = decide(
      signals(T0 + 1000, 10, {
        held: 6,
        refusals: 1,
        acceptances: 1,
        lastRefusal: { at: T0 + 900, held: 6 },
        lastAcceptance: { at: T0 + 900, held: 5 },
      }),
      initialState(c, T0),
      c,
    );
    // Act: a decay period and 50 accepted submissions later, no refusal since
    const later = T0 + 1000 + neighbourDecayMs(c);
    const d = decide(
      signals(later, 6, { held: 6, refusals: 1, acceptances: 1 + DEFAULT_ACCEPTANCES_PER_PROBE }),
      first.state,
      c,
    );
    // Assess
    expect(d.reason.code).toBe('OVER_CAP_PROBE');
    expect(enabledTotal(d)).toBe(7);
  });

  it('never sets ceiling × tasks per invocation above plan − the lower bound of others (or the floor)', () => {
    const tickArb = fc.record({
      dt: fc.integer({ min: 1, max: 20_000 }),
      refusedHeld: fc.option(fc.nat(12), { nil: undefined }),
      acceptedHeld: fc.option(fc.nat(12), { nil: undefined }),
      accepted: fc.nat(80),
      readable: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.array(tickArb, { minLength: 1, maxLength: 30 }),
        fc.integer({ min: 1, max: 3 }),
        fc.integer({ min: 6, max: 30 }),
        (ticks, tasksPerInvocation, planThreads) => {
          const c = config({ planThreads, tasksPerInvocation });
          let state: GovernorState = initialState(c, T0);
          let now = T0;
          let ceiling = state.ceilings.normal;
          const counters = { refusals: 0, acceptances: 0 };
          for (const tick of ticks) {
            now += tick.dt;
            if (tick.refusedHeld !== undefined) counters.refusals += 1;
            counters.acceptances += tick.accepted + (tick.acceptedHeld !== undefined ? 1 : 0);
            const ledger: ThreadLedgerReading = {
              held: 0,
              ...counters,
              ...(tick.refusedHeld !== undefined ? { lastRefusal: { at: now, held: tick.refusedHeld } } : {}),
              ...(tick.acceptedHeld !== undefined ? { lastAcceptance: { at: now, held: tick.acceptedHeld } } : {}),
            };
            const d = decide(signals(now, ceiling, tick.readable ? ledger : undefined), state, c);
            const estimate = d.state.overCap.neighbours;
            if (tick.readable && estimate !== undefined) {
              const decay = {
                decayMs: neighbourDecayMs(c),
                acceptancesPerProbe: DEFAULT_ACCEPTANCES_PER_PROBE,
              };
              const allowed = Math.max(capFloor(c), c.planThreads - lowerBoundAt(estimate, now, decay));
              expect(enabledTotal(d) * tasksPerInvocation).toBeLessThanOrEqual(allowed);
            }
            state = d.state;
            ceiling = d.ceilings.normal;
          }
        },
      ),
      { numRuns: 1000 },
    );
  });
});
