/**
 * The SQS queue as the simulator sees it: visible task ids in arrival order (a ring that grows),
 * the messages handed back and hidden until their visibility ends, and the backlog figures the
 * report reads (peak, and the drain from the peak to the next empty moment).
 */
import { i32 } from '../arrays.js';

export class TaskQueue {
  private ids = new Int32Array(1 << 12);
  private head = 0;
  /** Visible messages. */
  length = 0;
  /** Messages handed back and not yet visible again. */
  hidden = 0;
  peakBacklog = 0;
  private peakAt = 0;
  /** From the peak backlog to the next empty moment; null while it has not emptied since the peak. */
  drainSeconds: number | null = 0;

  /** A message becomes visible at `t` (arrival, or a hand-back's visibility ended). */
  enqueue(id: number, t: number): void {
    if (this.length === this.ids.length) {
      const bigger = new Int32Array(this.ids.length * 2);
      for (let i = 0; i < this.length; i++) bigger[i] = i32(this.ids, (this.head + i) % this.ids.length);
      this.ids = bigger;
      this.head = 0;
    }
    this.ids[(this.head + this.length) % this.ids.length] = id;
    this.length++;
    if (this.length > this.peakBacklog) {
      this.peakBacklog = this.length;
      this.peakAt = t;
      this.drainSeconds = null;
    }
  }

  /**
   * A message received a moment ago is visible again at once (a visibility reset to 0): it keeps
   * its place at the head (SQS orders a standard queue's messages by their send, best effort; the
   * lab's hand-backs with a delay rejoin at the end, which is kinder to no one).
   */
  requeueFront(id: number, t: number): void {
    this.enqueue(id, t);
    // Rotate the one just added from the end to the head.
    const size = this.ids.length;
    const tail = (this.head + this.length - 1) % size;
    this.head = (this.head - 1 + size) % size;
    this.ids[this.head] = i32(this.ids, tail);
  }

  /** The oldest visible message leaves the queue at `t` (received). */
  dequeue(t: number): number {
    const id = i32(this.ids, this.head);
    this.head = (this.head + 1) % this.ids.length;
    this.length--;
    if (this.length === 0 && this.drainSeconds === null) this.drainSeconds = t - this.peakAt;
    return id;
  }

  /** The oldest visible message's id (the queue must not be empty). */
  oldest(): number {
    return i32(this.ids, this.head);
  }
}
