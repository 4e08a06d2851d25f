/**
 * The governor is built once per cold start (functions/governor/handler.ts) and kept by the
 * environment's later invocations. With the watch relay's overlap, consecutive minutes run in two
 * warm environments by turns (A, B, A, B…), so what each one remembers of its own writes is two
 * minutes old: the state's version and the lease shards' limits. Each invocation reads and writes
 * them afresh (GovernorLoop.beginInvocation, called by runTicks). Real DynamoDB on the emulator;
 * the queues, balance and mappings are fakes of a healthy fleet.
 */
import { describe, expect, it } from 'vitest';
import { createDynamoGovernorState } from '../../functions/adapters/governor-state.js';
import { createDynamoThreadLeases } from '../../functions/adapters/thread-leases.js';
import { governorConfigFrom } from '../../functions/core/governor/config.js';
import type { LaneActuator } from '../../functions/core/governor/ports.js';
import type { Decision } from '../../functions/core/governor/types.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { withLeaseLimits } from '../../functions/governor/lease-step.js';
import { createGovernorLoop } from '../../functions/governor/loop.js';
import { runTicks } from '../../functions/governor/run.js';
import { leasesTableOnEmulators } from '../helpers/fleet-fixture.js';

const env = leasesTableOnEmulators();

describe('two warm governor environments taking alternate minutes', () => {
  it('tick without a conflict: each invocation reads the state the other saved', async () => {
    // Prepare: one state table, two loops (two environments' cold starts).
    const table = (await env.fixture.createFleet()).resources.tables.governor;
    const config = governorConfigFrom(resolveSettings({ planThreads: 8, tickMs: 1000 }));
    let now = 1_000_000;
    const state = createDynamoGovernorState({ documents: env.fixture.clients.documents, tableName: table });
    const environment = () => {
      let setting = { ceiling: 2, enabled: true };
      return createGovernorLoop({
        config,
        queues: { read: async () => ({ normal: { at: now, visible: 40, notVisible: 0, delayed: 0 } }) },
        metrics: { read: async () => undefined },
        balance: { read: async () => 10 },
        actuator: {
          read: async () => ({ normal: setting }),
          apply: async (d) => {
            setting = { ceiling: d.ceilings.normal, enabled: d.enabled.normal };
            return { changes: [] };
          },
        },
        state,
        clock: () => now,
      });
    };
    const loops = { A: environment(), B: environment() };

    // Act: five minutes, A and B by turns, five ticks each.
    const failed: string[] = [];
    for (const [minute, name] of (['A', 'B', 'A', 'B', 'A'] as const).entries()) {
      const start = now;
      await runTicks({
        loop: loops[name],
        tickMs: 1000,
        remainingMs: () => start + 5_000 - now,
        clock: () => now,
        sleep: async (ms) => {
          now += ms;
        },
      }).catch((error: Error) => failed.push(`minute ${minute + 1} (${name}): ${(error.cause as Error)?.name}`));
      now = start + 60_000;
    }

    // Assess: before, minutes 3, 4 and 5 each failed their first tick (GovernorStateConflictError).
    expect(failed).toEqual([]);
  });

  it("write the lease shards' limits anew: a pause or a shrink is not skipped as already written", async () => {
    // Prepare: the real lease adapter; the mappings' actuator is a fake.
    const leases = createDynamoThreadLeases({ documents: env.fixture.clients.documents, tableName: env.leasesTable });
    const lane = { leases, shards: ['primary#0'], planCap: 10, tasksPerInvocation: 1 };
    const mappings = (): LaneActuator => ({
      read: async () => ({ normal: { ceiling: 2, enabled: true }, high: { ceiling: 2, enabled: false } }),
      apply: async () => ({ changes: [] }),
    });
    const decision = (normal: number, enabled: boolean) =>
      ({ ceilings: { normal, high: 2 }, enabled: { normal: enabled, high: false }, paused: !enabled }) as Decision;
    const environments = { A: withLeaseLimits(mappings(), lane), B: withLeaseLimits(mappings(), lane) };
    const limit = async () => (await leases.views(['primary#0']))[0]?.meta?.limit;
    // One invocation: it begins (forget), then applies its decision.
    const invocation = async (name: 'A' | 'B', d: Decision) => {
      environments[name].forget?.();
      await environments[name].apply(d);
      return limit();
    };

    // Act: paused (A), resumed (B), paused again (A); then shrunk (A), climbed (B), shrunk again (A).
    const paused = [
      await invocation('A', decision(10, false)),
      await invocation('B', decision(10, true)),
      await invocation('A', decision(10, false)),
    ];
    const shrunk = [
      await invocation('A', decision(4, true)),
      await invocation('B', decision(8, true)),
      await invocation('A', decision(4, true)),
    ];

    // Assess: before, A's third minute found its own write of two minutes ago "unchanged" and kept
    // B's limits: 10 slots open on a paused fleet, 8 after a shrink to 4.
    expect(paused).toEqual([0, 10, 0]);
    expect(shrunk).toEqual([4, 8, 4]);
  });
});
