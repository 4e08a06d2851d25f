/**
 * The benchmark's tasks: a seeded mix of the protocol's methods, each with its own page URL so
 * the simulator's duplicate-solve count stays meaningful. Kept here rather than borrowed from
 * the demo so the benchmark's workload does not change when the demo's does.
 */
import type { Task, TaskMessage } from '../../functions/core/task.js';
import { pick, randomString, stream, type Random } from '../../local/solver-sim/prng.js';

/** Weights of the methods: mostly token types, some images, like a scraping fleet's traffic. */
const MIX: readonly { method: TaskMessage['method']; weight: number }[] = [
  { method: 'userrecaptcha', weight: 35 },
  { method: 'turnstile', weight: 25 },
  { method: 'hcaptcha', weight: 15 },
  { method: 'base64', weight: 15 },
  { method: 'geetest', weight: 10 },
];

const KEY_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-';
const HEX = '0123456789abcdef';

/** `count` valid task messages with ids `bench-<runId>-NNNNN`, the same for the same seed. */
export function buildBenchTasks(count: number, seed: number, runId: string): TaskMessage[] {
  const random = stream(seed, `bench-workload-${runId}`);
  const total = MIX.reduce((sum, entry) => sum + entry.weight, 0);
  const tasks: TaskMessage[] = [];
  for (let n = 0; n < count; n++) {
    let draw = random() * total;
    const method = MIX.find((entry) => (draw -= entry.weight) < 0)?.method ?? 'userrecaptcha';
    tasks.push({ id: `bench-${runId}-${String(n + 1).padStart(5, '0')}`, ...paramsOf(method, n, runId, random) } as TaskMessage);
  }
  return tasks;
}

/** The same messages as the consumer sees them after parsing (for driving the solver client directly). */
export function asTasks(messages: readonly TaskMessage[], submittedAt: number): Task[] {
  return messages.map((message) => ({ ...message, id: message.id!, priority: 'normal', submittedAt }) as Task);
}

function paramsOf(method: TaskMessage['method'], n: number, runId: string, random: Random): Omit<TaskMessage, 'id'> {
  const pageurl = `https://${pick(random, ['shop', 'login', 'tickets'])}.bench.example.com/${runId}/p${n + 1}`;
  const hex = (length: number) => randomString(random, HEX, length);
  switch (method) {
    case 'userrecaptcha':
      return { method, params: { googlekey: `6Le${randomString(random, KEY_ALPHABET, 37)}`, pageurl } };
    case 'turnstile':
      return { method, params: { sitekey: `0x4AAAAAAA${randomString(random, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789', 12)}`, pageurl } };
    case 'hcaptcha':
      return { method, params: { sitekey: `${hex(8)}-${hex(4)}-${hex(4)}-${hex(4)}-${hex(12)}`, pageurl } };
    case 'geetest':
      return { method, params: { gt: hex(32), challenge: hex(32), pageurl } };
    default:
      // A stand-in image: random bytes (the simulator does not decode images, only sizes them).
      return { method: 'base64', params: { body: Buffer.from(Array.from({ length: 300 }, () => Math.floor(random() * 256))).toString('base64'), numeric: 1 } };
  }
}
