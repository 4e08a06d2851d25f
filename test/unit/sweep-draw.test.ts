import { describe, expect, it } from 'vitest';
import { drawStartRun } from '../../bench/lib/sweep-draw.js';
import { fleetConfigOf } from '../../bin/commands/start.js';
import { startCommand } from '../../bin/commands/start/options.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { DIALECTS } from '../../functions/core/solver-protocol.js';

/** `start`'s options as the CLI parses `flags` (throws on a flag or value it refuses). */
function parsed(flags: string[]) {
  const command = startCommand().exitOverride();
  command.parse(flags, { from: 'user' });
  return command.opts();
}

const SEEDS = Array.from({ length: 400 }, (_, i) => i + 1);

describe("bench:sweep's drawn runs (bench/lib/sweep-draw.ts)", () => {
  it('draws the same flags for the same seed, and other flags for other seeds', () => {
    expect(drawStartRun(17)).toEqual(drawStartRun(17));
    const distinct = new Set(SEEDS.map((seed) => drawStartRun(seed).flags.join(' ')));
    expect(distinct.size).toBe(SEEDS.length);
  });

  it('draws only flag sets that start parses and whose configuration it accepts', () => {
    for (const seed of SEEDS) {
      const { flags } = drawStartRun(seed);
      const options = parsed(flags);
      expect(options.seed, flags.join(' ')).toBe(seed);
      expect(() => resolveSettings(fleetConfigOf(options)), flags.join(' ')).not.toThrow();
    }
  });

  it('reaches every axis over a few hundred seeds: designs, plan sizes, dialects, neighbours, money, faults, crashes, reserved threads, a wrong plan, a rejected key, overflow', () => {
    const runs = SEEDS.map((seed) => parsed(drawStartRun(seed).flags));
    const seen = <T>(pick: (o: (typeof runs)[number]) => T) => new Set(runs.map(pick));
    expect(seen((o) => o.solveMode)).toEqual(new Set(['park', 'wait']));
    expect(seen((o) => o.solverProtocol)).toEqual(new Set(['res-php', 'create-task']));
    expect(seen((o) => o.solverDialect ?? 'default')).toEqual(new Set([...DIALECTS, 'default']));
    const threads = seen((o) => o.solverThreads);
    expect(Math.min(...threads)).toBe(2);
    expect(Math.max(...threads)).toBeGreaterThanOrEqual(50);
    expect(seen((o) => o.batchSize).size).toBeGreaterThanOrEqual(4);
    const some = (test: (o: (typeof runs)[number]) => boolean) => runs.filter(test).length;
    expect(some((o) => o.solverForeignThreads > 0)).toBeGreaterThan(40);
    expect(some((o) => o.solverForeignThreads === o.solverThreads)).toBeGreaterThan(0);
    expect(some((o) => o.solverBalance < 1)).toBeGreaterThan(40);
    expect(some((o) => o.faults !== undefined)).toBeGreaterThan(150);
    expect(some((o) => o.crashRate > 0)).toBeGreaterThan(80);
    expect(some((o) => o.solverOutage.length > 1)).toBeGreaterThan(20);
    expect(some((o) => o.overflowSim === true)).toBeGreaterThan(30);
    expect(some((o) => o.visibilityTimeout < 12)).toBeGreaterThan(20);
    expect(some((o) => o.planThreads !== undefined && o.planThreads < o.solverThreads)).toBeGreaterThan(0);
    expect(some((o) => o.planThreads !== undefined && o.planThreads > o.solverThreads)).toBeGreaterThan(0);
    expect(some((o) => o.reservedThreads > 0)).toBeGreaterThan(10);
    expect(some((o) => o.solverBadKey === true)).toBeGreaterThan(0);
    expect(some((o) => o.overflowOutage.length > 0)).toBeGreaterThan(5);
    expect(some((o) => o.overflowProtocol !== undefined)).toBeGreaterThan(5);
  });
});
