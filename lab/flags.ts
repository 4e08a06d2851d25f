/**
 * The lab's command-line value parsers (`npm run bench`, `bench:cost`, `bench:overflow`): each
 * range-checks a value, so a bad one names what was expected instead of running on NaN. (The
 * CLI's own, local/cli-values.ts, are the runtime's; the lab imports the model, not the runtime.)
 */
import { InvalidArgumentError } from 'commander';

/**
 * A whole number within [min, max] written in decimal digits, named `what` in the error: `Number`
 * alone read `0x10` as 16 and `1e3` as 1 000, which the CLI's own parsers refuse (local/cli-values.ts).
 */
function whole(min: number, max: number, what: string) {
  return (value: string): number => {
    const n = Number(value);
    if (!/^\s*\d+\s*$/.test(value) || !Number.isInteger(n) || n < min || n > max) throw new InvalidArgumentError(what);
    return n;
  };
}

/** A seed of the lab's generator: a whole number of 32 bits. */
export const parseSeed = whole(0, 0xffffffff, 'a whole number from 0 to 4294967295');

/** A count of traces or rows: a whole number from 1 to 100 000. */
export const parseCount = whole(1, 100_000, 'a whole number from 1 to 100000');

/** A whole number above 0 (threads). */
export const parseWhole = whole(1, Number.MAX_SAFE_INTEGER, 'a whole number above 0');

/** A number above 0 (a price, a rate, a factor). */
export function parsePositive(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('a number above 0');
  return n;
}
