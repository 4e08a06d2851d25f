/**
 * The lab's SQS queue (lab/sim/queue.ts): arrival order, and a message made visible again at once
 * (the governor's refused probe: a visibility reset) back in its place at the head, whether the
 * ring wraps or grows.
 */
import { describe, expect, it } from 'vitest';
import { TaskQueue } from '../../lab/sim/queue.js';

function drain(queue: TaskQueue): number[] {
  const out: number[] = [];
  while (queue.length > 0) out.push(queue.dequeue(0));
  return out;
}

describe('the lab’s queue', () => {
  it('puts a message made visible again at once back at the head, and every other in its order', () => {
    for (const size of [1, 5, 4095, 4096, 4097, 9000]) {
      // GIVEN `size` messages, the ring turned part-way (some received and gone)
      const queue = new TaskQueue();
      for (let id = 0; id < size + 3; id++) queue.enqueue(id, 0);
      for (let k = 0; k < 3; k++) queue.dequeue(0);
      // WHEN the head is received and shown again at once
      const head = queue.dequeue(0);
      queue.requeueFront(head, 0);
      // THEN it is received first again, the rest in arrival order
      expect(drain(queue)).toEqual(Array.from({ length: size }, (_, k) => k + 3));
    }
  });
});
