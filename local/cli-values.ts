/**
 * The parsers of command-line values, for `captcha-fleet`'s flags (`start`'s table), the solver
 * simulator's (`npm run solver-sim`) and the benchmarks' under bench/: each range-checks a value,
 * so a bad value (an empty one included) names the range expected instead of running on 0 or NaN.
 */
import { InvalidArgumentError } from '@commander-js/extra-typings';
import type { OutageWindow } from './solver-sim/options.js';

/** A whole number within [min, max], in decimal digits (`1e2` and `0x10` read as 100 and 16 before). */
export const integer = (min: number, max: number) => (value: string) => {
  const n = Number(value);
  if (!/^\s*-?\d+\s*$/.test(value) || !Number.isInteger(n) || n < min || n > max)
    throw new InvalidArgumentError(`expected a whole number from ${min} to ${max}.`);
  return n;
};

/** A finite number within [min, max]; `what` names it in the error. */
export const decimal =
  (min: number, max: number, what = 'a number') =>
  (value: string) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max)
      throw new InvalidArgumentError(`expected ${what} from ${min} to ${max}.`);
    return n;
  };

/** A finite number above 0, at most `max`; `what` names it in the error. */
export const positive =
  (what = 'a number', max = Number.MAX_VALUE) =>
  (value: string) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n <= 0 || n > max)
      throw new InvalidArgumentError(`expected ${what} above 0${max < Number.MAX_VALUE ? `, at most ${max}` : ''}.`);
    return n;
  };

/** An http(s) URL (an AWS-compatible endpoint), without its trailing slashes. */
export const httpUrl = (value: string) => {
  try {
    const parsed = new URL(value);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('not http');
    return value.replace(/\/+$/, '');
  } catch {
    throw new InvalidArgumentError('expected an http(s) URL such as http://127.0.0.1:5000.');
  }
};

/** `START:DURATION` in seconds, collected into a list as the flag repeats (the simulator's `outages`). */
export const outageWindow = (value: string, previous: readonly OutageWindow[]): OutageWindow[] => {
  const match = /^\s*(\d+(?:\.\d+)?)\s*:\s*(\d+(?:\.\d+)?)\s*$/.exec(value);
  if (!match) throw new InvalidArgumentError(`expected START:DURATION in seconds (e.g. 20:30), got "${value}".`);
  const durationMs = Number(match[2]) * 1000;
  if (durationMs <= 0) throw new InvalidArgumentError(`expected an outage of more than 0 s, got "${value}".`);
  return [...previous, { startMs: Number(match[1]) * 1000, durationMs }];
};
