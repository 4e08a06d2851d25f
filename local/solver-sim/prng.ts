/**
 * Seeded randomness for the solver simulator.
 *
 * Hand-written on purpose: mulberry32 is ten lines, public domain and well studied for
 * simulation use, and the project has no seeded PRNG among its direct dependencies
 * (`pure-rand` only comes in as a dev dependency of fast-check, so runtime code must not lean
 * on it). Cryptographic quality is not needed here; reproducibility from a seed is.
 */

/** A function returning floats uniformly in [0, 1). */
export type Random = () => number;

/** mulberry32: a 32-bit state PRNG; the same seed always yields the same sequence. */
export function mulberry32(seed: number): Random {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Mix a seed with a label (FNV-1a over the label, then a murmur finaliser) so that independent
 * streams (latency, unsolvable draws, transient errors, answers) stay independent: drawing more
 * from one never shifts another, which keeps a run reproducible when only one knob changes.
 */
export function deriveSeed(seed: number, label: string): number {
  let h = (0x811c9dc5 ^ (seed >>> 0)) >>> 0;
  for (let i = 0; i < label.length; i++) {
    h ^= label.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b) >>> 0;
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35) >>> 0;
  h ^= h >>> 16;
  return h >>> 0;
}

/** A stream of its own for one purpose, derived from the run's seed. */
export function stream(seed: number, label: string): Random {
  return mulberry32(deriveSeed(seed, label));
}

/** Standard normal draw (Box–Muller); uses two uniforms. */
export function normal(random: Random): number {
  // 1 - u keeps the logarithm's argument in (0, 1].
  const u = 1 - random();
  const v = random();
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
}

/**
 * Log-normal draw around a median: `median × e^(spread × z)`. Solve times are skewed to the
 * right (most answers near the median, a long tail of slow ones), which a log-normal models
 * with two numbers an operator can read off a dashboard.
 */
export function logNormal(random: Random, medianMs: number, spread: number): number {
  if (medianMs <= 0) return 0;
  return medianMs * Math.exp(spread * normal(random));
}

/** One of the items, uniformly. */
export function pick<T>(random: Random, items: readonly T[]): T {
  const item = items[Math.floor(random() * items.length)];
  if (item === undefined) throw new RangeError('pick from an empty list');
  return item;
}

/** `length` characters drawn from `alphabet`. */
export function randomString(random: Random, alphabet: string, length: number): string {
  let out = '';
  for (let i = 0; i < length; i++) out += alphabet.charAt(Math.floor(random() * alphabet.length));
  return out;
}
