import { describe, expect, it } from 'vitest';
import { governorFlagsWithoutGovernor, inFlags } from '../../bin/commands/start.js';
import { START_OPTIONS, startCommand } from '../../bin/commands/start/options.js';
import { flagsNpmKept } from '../../bin/commands/npm-flags.js';
import {
  localFunctionTimeoutSeconds,
  localRecordMarginMs,
  minLocalVisibilityTimeoutSeconds,
} from '../../local/runtime.js';

describe('start flags', () => {
  it('startCommand adds every row of START_OPTIONS, in the table order (the help order)', () => {
    const added = startCommand().options.map((option) => option.attributeName());
    expect(added).toEqual(Object.keys(START_OPTIONS));
  });

  it('each key names its flag (solverBadKey is --solver-bad-key)', () => {
    for (const [key, option] of Object.entries(START_OPTIONS))
      expect(option.long).toBe(`--${key.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`);
  });

  it('parses into typed options with the defaults and the parsers of the table', () => {
    const command = startCommand().exitOverride();
    command.parse(['--tasks', '5', '--solver-outage', '1:2', '--solver-outage', '3:4', '--overflow-sim'], {
      from: 'user',
    });
    const options = command.opts();
    expect(options.tasks).toBe(5);
    expect(options.solverThreads).toBe(20);
    expect(options.solverProtocol).toBe('res-php');
    expect(options.solverOutage).toEqual([
      { startMs: 1000, durationMs: 2000 },
      { startMs: 3000, durationMs: 4000 },
    ]);
    expect(options.overflowSim).toBe(true);
    expect(options.malformed).toBeUndefined();
  });

  it('refuses a visibility timeout too short for a local consumer to submit and keep the id under', () => {
    // At 2 s every delivery handed its task back unsubmitted: 0 of 60 solved, 57 valid in the DLQ.
    const least = minLocalVisibilityTimeoutSeconds();
    const windowAt = (seconds: number) => {
      const functionMs = localFunctionTimeoutSeconds(seconds) * 1000;
      return functionMs - localRecordMarginMs(functionMs);
    };
    expect(windowAt(least)).toBeGreaterThanOrEqual(1_500);
    expect(windowAt(least - 1)).toBeLessThan(1_500);
    const parse = (seconds: number) =>
      startCommand()
        .exitOverride()
        .configureOutput({ writeErr: () => undefined })
        .parse(['--visibility-timeout', String(seconds)], { from: 'user' })
        .opts().visibilityTimeout;
    expect(() => parse(least - 1)).toThrow(`expected a whole number from ${least} to 900.`);
    expect(parse(least)).toBe(least);
  });

  it("names the governor's flags given beside --concurrency, which turns the governor off", () => {
    const given = (...args: string[]) => {
      const command = startCommand().exitOverride();
      command.parse(args, { from: 'user' });
      return governorFlagsWithoutGovernor(command.opts(), (key) => command.getOptionValueSource(key));
    };
    // Before, each of these was ignored without a word.
    expect(given('--concurrency', '5', '--plan-threads', '8', '--tick-ms', '100', '--halt-balance', '0')).toEqual([
      'planThreads',
      'haltBalance',
      'tickMs',
    ]);
    // Their defaults are not given; without --concurrency the governor reads them.
    expect(given('--concurrency', '5', '--solver-threads', '8')).toEqual([]);
    expect(given('--plan-threads', '8', '--reserved-threads', '2')).toEqual([]);
  });

  it('speaks of a configuration problem in the flags that set it', () => {
    expect(inFlags('  - planThreads: too few. Fix: raise planThreads to at least 2')).toBe(
      '  - --solver-threads (or --plan-threads): too few. Fix: raise --solver-threads (or --plan-threads) to at least 2',
    );
    // The overflow block's keys are its flags', not the plan's; words that merely contain a key stay.
    expect(inFlags('overflow.dialect and dialect; solverBaseUrl, tasksPerInvocation')).toBe(
      '--overflow-dialect and --solver-dialect; solverBaseUrl, --batch-size',
    );
  });

  it('npm-kept flags are named with their value placeholder from the table', () => {
    const env = { npm_lifecycle_event: 'start', npm_config_seed: 'true', npm_config_json: '' };
    expect(flagsNpmKept(START_OPTIONS, 'start', env)).toEqual(['--seed <s>', '--json']);
  });
});
