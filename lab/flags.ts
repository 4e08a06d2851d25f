/**
 * The lab's command-line value parsers (`npm run bench`, `bench:cost`, `bench:overflow`): each
 * range-checks a value, so a bad one names what was expected instead of running on NaN.
 */
import { InvalidArgumentError } from 'commander';

/** A seed of the lab's generator: a whole number of 32 bits. */
export function parseSeed(value: string): number {
  const seed = Number(value);
  if (value.trim() === '' || !Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
    throw new InvalidArgumentError('a whole number from 0 to 4294967295');
  return seed;
}

/** A count of traces or rows: a whole number from 1 to 100 000. */
export function parseCount(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n) || n < 1 || n > 100_000)
    throw new InvalidArgumentError('a whole number from 1 to 100000');
  return n;
}

/** A number above 0 (a price, a rate, a factor). */
export function parsePositive(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('a number above 0');
  return n;
}

/** A whole number above 0 (threads). */
export function parseWhole(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n) || n <= 0) throw new InvalidArgumentError('a whole number above 0');
  return n;
}
