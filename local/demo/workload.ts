/**
 * The demo's workload: a seeded mix of task types (reCAPTCHA, Turnstile, hCaptcha, GeeTest,
 * FunCaptcha, images, text), drawn by the generator the benchmarks share (`sampleTaskMessages`),
 * and a few malformed messages among them to show the DLQ path.
 */
import { randomBytes } from 'node:crypto';
import { type MethodMix, sampleTaskMessages } from '../sample-tasks.js';
import { randomString, stream, type Random } from '../solver-sim/prng.js';

/** A message the demo sent, valid or not, and how to recognise its outcome. */
export interface DemoItem {
  /** The task id (malformed messages have one too, even when the consumer cannot read it). */
  id: string;
  method: string;
  priority: 'normal' | 'high';
  /** The exact body sent (the DLQ keeps bodies unchanged). */
  body: string;
  /** Why this message is malformed, when it is. */
  malformed?: 'not_json' | 'unknown_method' | 'schema';
}

export interface WorkloadOptions {
  tasks: number;
  /** Of `tasks`, how many are malformed on purpose. */
  malformed: number;
  seed: number;
  /** Share of valid tasks sent with priority high. @default 0.1 */
  highShare?: number;
  /** Distinguishes this run's ids and page URLs from other runs against the same tables. */
  runId?: string;
}

/** Weights of the task types, roughly what a scraping fleet sees. */
const MIX: MethodMix = [
  { method: 'userrecaptcha', weight: 30 },
  { method: 'turnstile', weight: 20 },
  { method: 'hcaptcha', weight: 15 },
  { method: 'base64', weight: 15 },
  { method: 'geetest', weight: 8 },
  { method: 'funcaptcha', weight: 7 },
  { method: 'textcaptcha', weight: 5 },
];
const SITES = ['shop', 'login', 'tickets', 'search', 'signup'];

/** Build the workload: deterministic for a seed, distinct parameters per task (so the solver's duplicate-solve count means something). */
export function buildWorkload(options: WorkloadOptions): DemoItem[] {
  const random = stream(options.seed, 'demo-workload');
  const runId = options.runId ?? randomString(random, 'abcdefghijklmnopqrstuvwxyz0123456789', 6);
  const malformed = Math.min(options.malformed, options.tasks);
  const highShare = options.highShare ?? 0.1;
  const valid = sampleTaskMessages(
    random,
    options.tasks - malformed,
    {
      mix: MIX,
      sites: SITES,
      url: (site, n) => `https://${site}.demo.example.com/${runId}/page-${n + 1}`,
      id: (n) => `demo-${runId}-${String(n + 1).padStart(4, '0')}`,
    },
    (draw) => (draw() < highShare ? { priority: 'high' as const } : {}),
  );
  const items: DemoItem[] = valid.map((task) => ({
    id: task.id,
    method: task.method,
    priority: task.priority === 'high' ? 'high' : 'normal',
    body: JSON.stringify(task),
  }));
  // Not-JSON second: with two malformed messages both DLQ paths show (with and without a record).
  const kinds: NonNullable<DemoItem['malformed']>[] = ['schema', 'not_json', 'unknown_method'];
  for (let m = 0; m < malformed; m++) {
    const id = `demo-${runId}-bad${m + 1}`;
    const kind = kinds[m % kinds.length] ?? 'schema';
    const body =
      kind === 'schema'
        ? JSON.stringify({ id, method: 'turnstile', params: { sitekey: '0x4AAAAAAADemoKey', pageurl: 'not-a-url' } })
        : kind === 'unknown_method'
          ? JSON.stringify({ id, method: 'audiocaptcha', params: { pageurl: 'https://demo.example.com/' } })
          : `not JSON at all (${id})`;
    items.push({
      id,
      method: kind === 'unknown_method' ? 'audiocaptcha' : kind === 'schema' ? 'turnstile' : '?',
      priority: 'normal',
      body,
      malformed: kind,
    });
  }
  // Malformed ones arrive among the others, as they would from a buggy producer.
  return shuffle(items, random);
}

function shuffle<T>(items: T[], random: Random): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const [a, b] = [items[i] as T, items[j] as T];
    items[i] = b;
    items[j] = a;
  }
  return items;
}

/** A short random id for a run. */
export function newRunId(): string {
  return randomBytes(4).toString('hex');
}
