import { describe, expect, it } from 'vitest';
import { START_OPTIONS, startCommand } from '../../bin/commands/start/options.js';
import { flagsNpmKept } from '../../bin/commands/npm-flags.js';

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

  it('npm-kept flags are named with their value placeholder from the table', () => {
    const env = { npm_lifecycle_event: 'start', npm_config_seed: 'true', npm_config_json: '' };
    expect(flagsNpmKept(START_OPTIONS, 'start', env)).toEqual(['--seed <s>', '--json']);
  });
});
