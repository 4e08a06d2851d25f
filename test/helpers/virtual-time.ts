/**
 * Timers on a virtual clock, for code that sleeps between calls that take time: `sleep` resolves
 * when `runUntil` reaches its time, and every promise chain settles before the next timer fires.
 */
export class VirtualTime {
  now = 0;
  private timers: Array<{ at: number; seq: number; fire: () => void }> = [];
  private seq = 0;
  constructor(start = 0) {
    this.now = start;
  }
  readonly clock = () => this.now;
  readonly sleep = (ms: number) =>
    new Promise<void>((fire) => {
      this.timers.push({ at: this.now + Math.max(0, ms), seq: this.seq++, fire });
    });

  async runUntil(end: number): Promise<void> {
    for (;;) {
      // Every promise chain settles before the next timer fires.
      await new Promise((resolve) => setImmediate(resolve));
      this.timers.sort((a, b) => a.at - b.at || a.seq - b.seq);
      const next = this.timers[0];
      if (next === undefined || next.at > end) {
        this.now = end;
        return;
      }
      this.timers.shift();
      this.now = next.at;
      next.fire();
    }
  }
}
