/**
 * Seeded pseudo-random numbers for the policy lab. The simulator must replay the same day
 * bit for bit from a seed, so `Math.random` is never used. sfc32 (Chris Doty-Humphrey's Small
 * Fast Counting generator) passes PractRand and is fast on 32-bit integer maths in V8.
 */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  /** Second normal deviate of the last Box–Muller pair, kept so no draw is wasted. */
  private spareNormal: number | undefined;

  constructor(seed: number) {
    // splitmix32 spreads a small integer seed over the 128-bit state.
    let s = seed >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) | 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    for (let i = 0; i < 12; i++) this.nextUint32();
  }

  /** A uniform 32-bit unsigned integer. */
  nextUint32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in (0, 1): never 0, so `Math.log` of it is finite. */
  uniform(): number {
    return (this.nextUint32() + 0.5) / 4_294_967_296;
  }

  /** Exponential with the given rate (mean 1/rate). */
  exponential(rate: number): number {
    return -Math.log(this.uniform()) / rate;
  }

  /** Standard normal (Box–Muller). */
  normal(): number {
    if (this.spareNormal !== undefined) {
      const spare = this.spareNormal;
      this.spareNormal = undefined;
      return spare;
    }
    const r = Math.sqrt(-2 * Math.log(this.uniform()));
    const theta = 2 * Math.PI * this.uniform();
    this.spareNormal = r * Math.sin(theta);
    return r * Math.cos(theta);
  }

  /** Log-normal with the given log-mean and log-standard-deviation. */
  logNormal(mu: number, sigma: number): number {
    return Math.exp(mu + sigma * this.normal());
  }

  /** A child generator with an independent stream, so adding draws in one model leaves others unchanged. */
  fork(salt: number): Rng {
    return new Rng((this.nextUint32() ^ Math.imul(salt + 1, 0x9e3779b1)) >>> 0);
  }
}
