/**
 * The benchmarks' flags: a seed, a count of runs or tasks, threads that are not a whole number
 * (or not a number at all) are refused with what was expected, before anything runs. Before,
 * `bench:cost --seed abc` ran every design on a NaN seed and `bench:faults --runs 1.5` ran two;
 * `bench:pipeline --seed ''` ran on seed 0 and `bench:watch-cpu --tasks 1e9` set out to park a
 * billion tasks.
 */
import { describe, it } from 'vitest';
import { integer, outageWindow, positive } from '../../local/cli-values.js';
import { parseCount, parsePositive, parseSeed, parseWhole } from '../../lab/flags.js';
import { runScript } from '../helpers/cli.js';

describe('the lab flags', () => {
  it('take whole seeds of 32 bits and refuse the rest by name', ({ expect }) => {
    expect(parseSeed('0')).toBe(0);
    expect(parseSeed('4294967295')).toBe(4294967295);
    for (const bad of ['abc', '1.5', '-1', '4294967296', '', ' ', '0x10', '1e3'])
      expect(() => parseSeed(bad)).toThrow(/whole number/);
  });

  it('take counts and threads as whole numbers above 0, prices above 0', ({ expect }) => {
    expect(parseCount('1000')).toBe(1000);
    expect(parseWhole('3')).toBe(3);
    expect(parsePositive('0.004')).toBe(0.004);
    for (const bad of ['0', '2.5', 'x', '']) {
      expect(() => parseCount(bad)).toThrow(/whole number/);
      expect(() => parseWhole(bad)).toThrow(/whole number/);
    }
    for (const bad of ['0', '-1', 'x', '', 'Infinity']) expect(() => parsePositive(bad)).toThrow(/above 0/);
  });
});

describe("the CLI's whole numbers and outage windows", () => {
  it('take decimal digits only, and an outage of some length', ({ expect }) => {
    expect(integer(0, 100)('42')).toBe(42);
    expect(integer(-5, 5)('-3')).toBe(-3);
    // Number() read these as 100, 16, 1 and 0.
    for (const bad of ['1e2', '0x10', '1.0', '', ' ']) expect(() => integer(0, 1000)(bad)).toThrow(/whole number/);
    expect(outageWindow('5:2.5', [])).toEqual([{ startMs: 5000, durationMs: 2500 }]);
    expect(() => outageWindow('5:0', [])).toThrow('expected an outage of more than 0 s, got "5:0".');
  });
});

describe("the CLI's positive numbers", () => {
  it('take finite numbers above 0 up to the bound, and name what was expected', ({ expect }) => {
    expect(positive('a rate')('0.5')).toBe(0.5);
    expect(positive('seconds', 60)('60')).toBe(60);
    for (const bad of ['0', '-1', 'x', '', ' ', 'Infinity', 'NaN'])
      expect(() => positive('a rate')(bad)).toThrow(/a rate above 0/);
    expect(() => positive('seconds', 60)('61')).toThrow('expected seconds above 0, at most 60.');
  });
});

// Each spawn pays tsx's start-up (seconds on two cores): run them side by side.
describe.concurrent('the benchmarks refuse a bad flag before they run', () => {
  const cases: [string, string[], RegExp][] = [
    ['lab/cost-bench.ts', ['--seed', 'abc'], /--seed <n>.*'abc' is invalid.*whole number/],
    ['lab/overflow-bench.ts', ['--threads', '2.5'], /--threads <n>.*'2.5' is invalid.*whole number/],
    ['bench/faults.ts', ['--runs', '1.5'], /--runs <n>.*'1.5' is invalid.*whole number/],
    ['bench/faults.ts', ['--seed', 'abc'], /--seed <n>.*'abc' is invalid.*whole number/],
    ['bench/priority.ts', ['--bursts', '0'], /--bursts <n>.*'0' is invalid.*whole number from 1/],
    // Its own parser read an empty value as 0 and took any size: the CLI's now.
    ['bench/pipeline.ts', ['--seed', ''], /--seed <n>.*'' is invalid.*whole number from 0/],
    ['bench/watch-cpu.ts', ['--tasks', '1e9'], /--tasks <n>.*'1e9' is invalid.*whole number from 1 to 10000/],
    ['bench/consumer-cpu.ts', ['--reads', '1.5'], /--reads <n>.*'1\.5' is invalid.*whole number from 1 to 10000/],
    ['bench/faults.ts', ['--rate', '0'], /--rate <r>.*'0' is invalid.*a rate above 0/],
  ];
  for (const [script, args, message] of cases) {
    it(`${script} ${args.join(' ')}`, { timeout: 60_000 }, async ({ expect }) => {
      // A benchmark that took the flag would run for minutes: the helper ends it at 40 s.
      const run = await runScript(script, args, 40_000);
      expect(run.code).not.toBe(0);
      expect(run.stderr).toMatch(message);
      expect(run.stdout).toBe('');
    });
  }
});
