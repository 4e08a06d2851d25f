/**
 * The benchmark's tasks: a seeded mix of the protocol's methods, each with its own page URL so
 * the simulator's duplicate-solve count stays meaningful. Drawn by the demo's generator
 * (`sampleTaskMessages`) with the benchmark's own mix, sites and stream, so the benchmark's
 * workload does not change when the demo's mix does.
 */
import type { Task, TaskMessage } from '../../functions/core/task.js';
import { type MethodMix, sampleTaskMessages } from '../../local/sample-tasks.js';
import { stream } from '../../local/solver-sim/prng.js';

/** Weights of the methods: mostly token types, some images, like a scraping fleet's traffic. */
const MIX: MethodMix = [
  { method: 'userrecaptcha', weight: 35 },
  { method: 'turnstile', weight: 25 },
  { method: 'hcaptcha', weight: 15 },
  { method: 'base64', weight: 15 },
  { method: 'geetest', weight: 10 },
];

const SITES = ['shop', 'login', 'tickets'];

/** A task message whose id the benchmark set (the producer's id is optional in general). */
export type BenchTaskMessage = TaskMessage & { id: string };

/** `count` valid task messages with ids `bench-<runId>-NNNNN`, the same for the same seed. */
export function buildBenchTasks(count: number, seed: number, runId: string): BenchTaskMessage[] {
  return sampleTaskMessages(stream(seed, `bench-workload-${runId}`), count, {
    mix: MIX,
    sites: SITES,
    url: (site, n) => `https://${site}.bench.example.com/${runId}/p${n + 1}`,
    id: (n) => `bench-${runId}-${String(n + 1).padStart(5, '0')}`,
  });
}

/** The same messages as the consumer sees them after parsing (for driving the solver client directly). */
export function asTasks(messages: readonly BenchTaskMessage[], submittedAt: number): Task[] {
  return messages.map((message) => ({ ...message, priority: 'normal', submittedAt }) as Task);
}
