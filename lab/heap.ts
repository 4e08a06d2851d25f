import { f64 } from './arrays.js';

/**
 * The simulator's event queue: a binary min-heap on (time, sequence). The sequence number breaks
 * ties in insertion order, so events at the same virtual instant run in the order they were
 * scheduled and a run is deterministic. Times and sequence numbers sit in typed arrays beside the
 * payloads, which keeps the sift loops on unboxed numbers: a simulated day pushes millions of events.
 */
export class EventHeap<T> {
  private times = new Float64Array(1024);
  private seqs = new Float64Array(1024);
  private items: (T | undefined)[] = new Array(1024);
  private count = 0;
  private nextSeq = 0;

  get size(): number {
    return this.count;
  }

  /** Time of the earliest event; `Infinity` when empty. */
  peekTime(): number {
    return this.count === 0 ? Infinity : f64(this.times, 0);
  }

  push(time: number, item: T): void {
    if (this.count === this.times.length) this.grow();
    const seq = this.nextSeq++;
    let i = this.count++;
    const times = this.times;
    const seqs = this.seqs;
    const items = this.items;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      const pt = f64(times, parent);
      if (pt < time || (pt === time && f64(seqs, parent) < seq)) break;
      times[i] = pt;
      seqs[i] = f64(seqs, parent);
      items[i] = items[parent];
      i = parent;
    }
    times[i] = time;
    seqs[i] = seq;
    items[i] = item;
  }

  /** Removes and returns the earliest event; `undefined` when empty. */
  pop(): T | undefined {
    if (this.count === 0) return undefined;
    const items = this.items;
    const top = items[0];
    const last = --this.count;
    if (last > 0) {
      const times = this.times;
      const seqs = this.seqs;
      const time = f64(times, last);
      const seq = f64(seqs, last);
      const item = items[last];
      let i = 0;
      const half = last >> 1;
      while (i < half) {
        let child = 2 * i + 1;
        const right = child + 1;
        if (
          right < last &&
          (f64(times, right) < f64(times, child) ||
            (times[right] === times[child] && f64(seqs, right) < f64(seqs, child)))
        )
          child = right;
        const ct = f64(times, child);
        if (time < ct || (time === ct && seq < f64(seqs, child))) break;
        times[i] = ct;
        seqs[i] = f64(seqs, child);
        items[i] = items[child];
        i = child;
      }
      times[i] = time;
      seqs[i] = seq;
      items[i] = item;
    }
    items[last] = undefined;
    return top;
  }

  private grow(): void {
    const size = this.times.length * 2;
    const times = new Float64Array(size);
    times.set(this.times);
    const seqs = new Float64Array(size);
    seqs.set(this.seqs);
    this.times = times;
    this.seqs = seqs;
    this.items.length = size;
  }
}
