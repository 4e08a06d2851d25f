/**
 * The trace generator: days nobody drew. `npm run bench -- --generate N --seed S` draws N traces
 * over the classes below (docs/lab.md), each a valid trace file (lab/trace.ts) that
 * `--trace-file` replays. The axes: plans from 2 to 1,000 threads (tiny ≤ 8 and huge ≥ 500 on
 * purpose), load from idle to 5× the plan in steps and ramps, method mixes with heavy tails (p95
 * up to 5× the median), neighbours stepping anywhere from 0 to the whole plan and holding it
 * minutes to hours, outages from 10 s blips to hours (one, many, or blips repeating every few
 * minutes), slowdowns of 1.5–4×, money running out mid-trace with and without top-ups, and
 * combinations of all of these. Classes are drawn in a shuffled rotation, so any N ≥ the number
 * of class slots covers every class.
 */
import { METHODS, type SolverMethod } from '../functions/core/solver-protocol.js';
import type { TRACE_CLASS_NAMES } from './class-names.js';
import { Rng } from './rng.js';
import { parseTrace, type Trace, type TraceInput } from './trace.js';

/** The classes, each with its share of the draws (slots in the rotation). */
export const TRACE_CLASSES = {
  idle: 1,
  'load-steps': 2,
  'load-ramps': 2,
  'heavy-tails': 2,
  neighbours: 2,
  'neighbour-takes-all': 2,
  outages: 2,
  'blips-tiny': 2,
  'blips-huge': 2,
  'blips-any': 1,
  slowdown: 2,
  'money-out': 2,
  'money-top-ups': 2,
  combined: 6,
} as const;
export type TraceClass = keyof typeof TRACE_CLASSES;
// Every class the generator draws is one a trace file may name, and no other.
const _sameClasses: [TraceClass, (typeof TRACE_CLASS_NAMES)[number]] extends [
  (typeof TRACE_CLASS_NAMES)[number],
  TraceClass,
]
  ? true
  : never = true;

/** One drawn trace: its class, the trace file's content and the validated trace. */
export interface GeneratedTrace {
  traceClass: TraceClass;
  input: TraceInput;
  trace: Trace;
}

/** Expected arrivals a generated trace is kept under (so 1,000 traces run in minutes). */
const MAX_EXPECTED_TASKS = 100_000;
/** Shortest span a busy trace is compressed to before its load is scaled down, seconds. */
const MIN_DURATION = 20 * 60;
/** Longest span of arrivals, seconds. */
const MAX_DURATION = 4 * 3600;

/** The class rotation for a seed: every class's slots, shuffled. */
export function classRotation(seed: number): TraceClass[] {
  const slots: TraceClass[] = [];
  for (const [name, weight] of Object.entries(TRACE_CLASSES))
    for (let i = 0; i < weight; i++) slots.push(name as TraceClass);
  return new Draw(new Rng(seed ^ 0x5eed)).shuffle(slots);
}

/** Draws `count` traces for `seed`; trace i is the same whatever `count` is. */
export function generateTraces(count: number, seed: number): GeneratedTrace[] {
  const rotation = classRotation(seed);
  const out: GeneratedTrace[] = [];
  for (let i = 0; i < count; i++) out.push(generateTrace(seed, i, rotation[i % rotation.length] as TraceClass));
  return out;
}

/** Trace number `index` of `seed`, of class `traceClass`. */
export function generateTrace(seed: number, index: number, traceClass: TraceClass): GeneratedTrace {
  const rng = new Rng((Math.imul(seed + 1, 0x9e3779b1) ^ Math.imul(index + 1, 0x85ebca6b)) >>> 0);
  const draft = DRAW[traceClass](new Draw(rng));
  const input = draft.toInput(`gen-s${seed}-${index}-${traceClass}`, traceClass);
  return { traceClass, input, trace: parseTrace(input, input.name) };
}

/** A piece of a step function: `at` seconds, a value. */
interface Step {
  at: number;
  value: number;
}

/** Random draws with the shapes the classes use. */
class Draw {
  constructor(readonly rng: Rng) {}

  uniform(low: number, high: number): number {
    return low + (high - low) * this.rng.uniform();
  }

  int(low: number, high: number): number {
    return Math.floor(this.uniform(low, high + 1));
  }

  logUniform(low: number, high: number): number {
    return Math.exp(this.uniform(Math.log(low), Math.log(high)));
  }

  chance(p: number): boolean {
    return this.rng.uniform() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.rng.uniform() * items.length)] as T;
  }

  /** The items in a random order (Fisher–Yates). */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = Math.floor(this.rng.uniform() * (i + 1));
      [out[i], out[j]] = [out[j] as T, out[i] as T];
    }
    return out;
  }

  /** Plan threads: tiny (2–8), huge (500–1000), or anything between, log-uniform. */
  plan(size: 'tiny' | 'huge' | 'any' = 'any'): number {
    if (size === 'tiny' || (size === 'any' && this.chance(0.25))) return this.int(2, 8);
    if (size === 'huge' || (size === 'any' && this.chance(0.15))) return this.int(500, 1000);
    return Math.round(this.logUniform(9, 499));
  }
}

/** A trace being drawn: load as a share of the plan's capacity, the world around it. */
class Draft {
  duration: number;
  /** Arrival rate as a multiple of the plan's capacity (plan ÷ mean solve time). */
  load: Step[] = [{ at: 0, value: 0.5 }];
  foreign: Step[] = [{ at: 0, value: 0 }];
  factor: Step[] = [{ at: 0, value: 1 }];
  outages: { at: number; durationSeconds: number }[] = [];
  balance: { initialUsd: number; pricePerSolveUsd: number; topUps: { at: number; usd: number }[] } | undefined;
  methods: { method: SolverMethod; share: number; medianSeconds: number; p95Seconds: number }[];
  /** The load may be scaled down to keep the trace's task count bounded (its shape stays). */
  scalableLoad = true;

  constructor(
    readonly d: Draw,
    readonly plan: number,
    options: { heavy?: boolean; duration?: number } = {},
  ) {
    this.duration = options.duration ?? d.uniform(30, 180) * 60;
    this.methods = drawMix(d, options.heavy === true);
  }

  /**
   * Mean solve time of the mix, seconds (log-normal: median × e^(σ²/2)), its shares weighed as
   * the trace file's are: relative, normalized to sum 1 (lab/trace.ts). Before, the raw shares
   * (each 0.2–1, drawn apart) were summed, so a mix whose shares summed to 0.4 was said to solve in
   * 0.4 × its time and its loads came out 2.5× the drawn ones (up to 25× the plan for "5×").
   */
  meanSolve(): number {
    const total = this.methods.reduce((sum, m) => sum + m.share, 0);
    return (
      this.methods.reduce((sum, m) => {
        const sigma = Math.log(m.p95Seconds / m.medianSeconds) / 1.6448536269514722;
        return sum + m.share * m.medianSeconds * Math.exp((sigma * sigma) / 2);
      }, 0) / total
    );
  }

  /** Tasks per second at load 1: every plan thread busy. */
  capacityRate(): number {
    return this.plan / this.meanSolve();
  }

  expectedTasks(): number {
    const rate = this.capacityRate();
    let total = 0;
    this.load.forEach((step, i) => {
      const end = Math.min(this.duration, this.load[i + 1]?.at ?? this.duration);
      total += Math.max(0, end - step.at) * step.value * rate;
    });
    return total;
  }

  /**
   * Keeps a busy trace's task count bounded by compressing its load profile in time (down to
   * MIN_DURATION), so a huge plan keeps its load relative to the plan; only what is still over
   * is scaled down in rate (toInput). Called after the load is drawn, before the other axes.
   */
  fitTasks(): this {
    const expected = this.expectedTasks();
    if (expected <= MAX_EXPECTED_TASKS) return this;
    const k = Math.max(Math.min(1, MIN_DURATION / this.duration), MAX_EXPECTED_TASKS / expected);
    if (k < 1) {
      this.load = this.load.map((step) => ({ at: step.at * k, value: step.value }));
      this.duration *= k;
    }
    return this;
  }

  toInput(name: string, traceClass: TraceClass): TraceInput {
    const duration = Math.round(this.duration);
    // A step is kept by the whole second it lands on: one at 1199.7 s of a 1200 s trace would round onto its end.
    const within = <T extends { at: number }>(steps: T[]) => dedupe(steps.filter((s) => Math.round(s.at) < duration));
    // The task bound holds on the steps as written (whole seconds), not only as drawn.
    const load = within(this.load);
    const expected =
      this.capacityRate() *
      load.reduce((sum, step, i) => sum + Math.max(0, (load[i + 1]?.at ?? duration) - step.at) * step.value, 0);
    const scale = this.scalableLoad && expected > MAX_EXPECTED_TASKS ? MAX_EXPECTED_TASKS / expected : 1;
    const rate = this.capacityRate() * scale;
    const input: TraceInput = {
      name,
      description: `Generated (${traceClass}): plan ${this.plan}, mean solve ${this.meanSolve().toFixed(1)} s, peak load ${(Math.max(...this.load.map((s) => s.value)) * scale).toFixed(2)}× the plan.`,
      durationSeconds: duration,
      fleet: { planThreads: this.plan },
      arrivals: load.map((s) => ({ at: s.at, perSecond: round(s.value * rate, 6) })),
      methods: this.methods,
      foreignThreads: within(this.foreign).map((s) => ({ at: s.at, threads: Math.round(s.value) })),
      solveTimeFactor: within(this.factor).map((s) => ({ at: s.at, factor: round(s.value, 3) })),
      outages: wholeSeconds(this.outages.filter((o) => o.at < duration - 1)),
    };
    if (this.balance) input.balance = { ...this.balance, topUps: this.balance.topUps.filter((t) => t.at < duration) };
    return input;
  }
}

/** Steps at whole seconds, ascending, the first at 0, no two at the same second (the later wins). */
function dedupe<T extends { at: number }>(steps: T[]): T[] {
  const bySecond = new Map<number, T>();
  for (const step of [...steps].sort((a, b) => a.at - b.at))
    bySecond.set(Math.round(step.at), { ...step, at: Math.round(step.at) });
  const out = [...bySecond.values()];
  if (out[0]?.at !== 0 && out[0] !== undefined) out.unshift({ ...out[0], at: 0 });
  return out;
}

/** Outage windows at whole seconds, at least 1 s long, ascending and disjoint. */
function wholeSeconds(outages: { at: number; durationSeconds: number }[]) {
  const out: { at: number; durationSeconds: number }[] = [];
  let free = 0;
  for (const o of [...outages].sort((a, b) => a.at - b.at)) {
    const at = Math.max(free, Math.round(o.at));
    const end = Math.max(at + 1, Math.round(o.at + o.durationSeconds));
    out.push({ at, durationSeconds: end - at });
    free = end + 1;
  }
  return out;
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** One to three methods; medians 3–30 s; p95 1.3–2.5× the median, heavy tails up to 5×. */
function drawMix(d: Draw, heavy: boolean) {
  const count = d.int(1, 3);
  const methods = d.shuffle(METHODS).slice(0, count);
  return methods.map((method) => {
    const median = round(d.logUniform(3, 30), 2);
    const tail = heavy ? d.uniform(3, 5) : d.uniform(1.3, 2.5);
    return { method, share: round(d.uniform(0.2, 1), 3), medianSeconds: median, p95Seconds: round(median * tail, 2) };
  });
}

/** Load levels, as a share of the plan: idle, low, near the plan, or over it (up to 5×). */
function drawLevel(d: Draw): number {
  const kind = d.pick(['idle', 'low', 'near', 'over', 'over'] as const);
  if (kind === 'idle') return d.chance(0.5) ? 0 : d.uniform(0, 0.05);
  if (kind === 'low') return d.uniform(0.05, 0.5);
  if (kind === 'near') return d.uniform(0.5, 1);
  return d.uniform(1, 5);
}

/** Load in steps: 3–8 levels, each held a few minutes (over the plan: at most 15 min). */
function loadSteps(draft: Draft): void {
  const d = draft.d;
  const steps: Step[] = [];
  let at = 0;
  while (at < draft.duration) {
    const value = drawLevel(d);
    steps.push({ at, value });
    at += (value > 1 ? d.uniform(1, 15) : d.uniform(3, 40)) * 60;
  }
  draft.load = steps;
}

/** Load in ramps: minute by minute from one level to another, then a drop or a ramp back (sawtooths, surges). */
function loadRamps(draft: Draft): void {
  const d = draft.d;
  const steps: Step[] = [];
  let at = 0;
  let level = d.uniform(0, 0.5);
  while (at < draft.duration) {
    const to = d.chance(0.5) ? d.uniform(1, 5) : d.uniform(0.3, 1.2);
    const minutes = d.int(1, 20);
    for (let m = 0; m < minutes && at < draft.duration; m++, at += 60)
      steps.push({ at, value: level + ((to - level) * (m + 1)) / minutes });
    level = d.chance(0.5) ? d.uniform(0, 0.5) : to;
    steps.push({ at, value: level });
    at += d.uniform(2, 20) * 60;
  }
  draft.load = steps;
}

/** A steady or stepped load under the plan, the usual background of the world classes. */
function background(draft: Draft): void {
  const d = draft.d;
  if (d.chance(0.5)) draft.load = [{ at: 0, value: d.uniform(0.2, 0.9) }];
  else loadSteps(draft);
  draft.fitTasks();
}

/** Neighbours stepping from 0 to the whole plan, each level held 2 min to 2 h. */
function neighbours(draft: Draft): void {
  const d = draft.d;
  const steps: Step[] = [{ at: 0, value: 0 }];
  let at = d.uniform(0, 0.3) * draft.duration;
  while (at < draft.duration) {
    const share = d.pick([0, 0, 0.1, 0.25, 0.5, 0.75, 0.9, 1]);
    steps.push({ at, value: Math.round(share * draft.plan) });
    at += d.logUniform(2, 120) * 60;
  }
  draft.foreign = steps;
}

/** A neighbour takes the whole plan for 1–3 hours, then leaves (perhaps to come back briefly). */
function neighbourTakesAll(draft: Draft): void {
  const d = draft.d;
  const start = d.uniform(5, 30) * 60;
  const hold = d.uniform(60, 180) * 60;
  draft.duration = Math.min(MAX_DURATION, start + hold + d.uniform(20, 60) * 60);
  draft.foreign = [
    { at: 0, value: 0 },
    { at: start, value: draft.plan },
    { at: start + hold, value: 0 },
  ];
  if (d.chance(0.3)) {
    const again = start + hold + d.uniform(5, 15) * 60;
    draft.foreign.push({ at: again, value: draft.plan }, { at: again + d.uniform(2, 20) * 60, value: 0 });
  }
}

/** One to three outages of 1 minute to 2 hours. */
function outages(draft: Draft): void {
  const d = draft.d;
  const count = d.int(1, 3);
  let at = d.uniform(0.05, 0.4) * draft.duration;
  for (let i = 0; i < count && at < draft.duration; i++) {
    const length = d.logUniform(60, 7200);
    draft.outages.push({ at, durationSeconds: length });
    at += length + d.uniform(5, 40) * 60;
  }
  draft.duration = Math.max(draft.duration, Math.min(MAX_DURATION, at));
}

/** Blips of 10–40 s repeating every 2–6 minutes, over the whole trace or a window of it. */
function blips(draft: Draft): void {
  const d = draft.d;
  const every = d.uniform(2, 6) * 60;
  const length = d.uniform(10, 40);
  const from = d.chance(0.5) ? d.uniform(1, 10) * 60 : d.uniform(0.1, 0.5) * draft.duration;
  const to = d.chance(0.6) ? draft.duration : from + d.uniform(0.2, 0.5) * draft.duration;
  for (let at = from; at < Math.min(to, draft.duration); at += every * d.uniform(0.8, 1.2))
    draft.outages.push({ at, durationSeconds: length });
}

/** Solves 1.5–4× slower, once or twice, for 10–60 minutes. */
function slowdown(draft: Draft): void {
  const d = draft.d;
  const steps: Step[] = [{ at: 0, value: 1 }];
  let at = d.uniform(0.1, 0.4) * draft.duration;
  for (let i = d.int(1, 2); i > 0 && at < draft.duration; i--) {
    steps.push({ at, value: d.uniform(1.5, 4) });
    at += d.uniform(10, 60) * 60;
    steps.push({ at, value: 1 });
    at += d.uniform(10, 40) * 60;
  }
  draft.factor = steps;
}

/** Money that runs out mid-trace: it funds 20–70 % of the trace's solves above the halt level; top-ups after, or none. */
function money(draft: Draft, topUps: boolean): void {
  const d = draft.d;
  const price = d.pick([0.001, 0.002, 0.003]);
  const cost = Math.min(draft.expectedTasks(), MAX_EXPECTED_TASKS) * price;
  const initialUsd = round(1 + d.uniform(0.2, 0.7) * cost, 2);
  const ups: { at: number; usd: number }[] = [];
  if (topUps) {
    let at = d.uniform(0.4, 0.7) * draft.duration;
    for (let i = d.int(1, 3); i > 0 && at < draft.duration; i--) {
      // At least a cent: a near-idle trace's share of its cost would round to $0, which no top-up is.
      ups.push({ at: Math.round(at), usd: Math.max(0.01, round(d.uniform(0.3, 1) * cost, 2)) });
      at += d.uniform(0.1, 0.3) * draft.duration;
    }
  }
  draft.balance = { initialUsd, pricePerSolveUsd: price, topUps: ups };
}

/** How each class draws its trace. */
const DRAW: Readonly<Record<TraceClass, (d: Draw) => Draft>> = {
  idle: (d) => {
    const draft = new Draft(d, d.plan());
    draft.load = [{ at: 0, value: d.uniform(0, 0.02) }];
    if (d.chance(0.5)) draft.load.push({ at: d.uniform(0.2, 0.8) * draft.duration, value: d.uniform(0.5, 3) });
    const last = draft.load[draft.load.length - 1] as Step;
    if (draft.load.length > 1) draft.load.push({ at: last.at + d.uniform(30, 300), value: 0 });
    return draft;
  },
  'load-steps': (d) => {
    const draft = new Draft(d, d.plan());
    loadSteps(draft);
    return draft.fitTasks();
  },
  'load-ramps': (d) => {
    const draft = new Draft(d, d.plan());
    loadRamps(draft);
    return draft.fitTasks();
  },
  'heavy-tails': (d) => {
    const draft = new Draft(d, d.plan(), { heavy: true });
    if (d.chance(0.5)) loadSteps(draft);
    else draft.load = [{ at: 0, value: d.uniform(0.3, 1.1) }];
    return draft.fitTasks();
  },
  neighbours: (d) => {
    const draft = new Draft(d, d.plan());
    background(draft);
    neighbours(draft);
    return draft;
  },
  'neighbour-takes-all': (d) => {
    const draft = new Draft(d, d.plan());
    draft.load = [{ at: 0, value: d.uniform(0.1, 0.8) }];
    neighbourTakesAll(draft);
    return draft;
  },
  outages: (d) => {
    const draft = new Draft(d, d.plan());
    background(draft);
    outages(draft);
    return draft;
  },
  'blips-tiny': (d) => {
    const draft = new Draft(d, d.plan('tiny'));
    background(draft);
    blips(draft);
    return draft;
  },
  'blips-huge': (d) => {
    const draft = new Draft(d, d.plan('huge'));
    background(draft);
    blips(draft);
    return draft;
  },
  'blips-any': (d) => {
    const draft = new Draft(d, d.plan());
    background(draft);
    blips(draft);
    return draft;
  },
  slowdown: (d) => {
    const draft = new Draft(d, d.plan());
    draft.load = [{ at: 0, value: d.uniform(0.2, 0.7) }];
    draft.fitTasks();
    slowdown(draft);
    return draft;
  },
  'money-out': (d) => {
    const draft = new Draft(d, d.plan());
    background(draft);
    money(draft, false);
    return draft;
  },
  'money-top-ups': (d) => {
    const draft = new Draft(d, d.plan());
    background(draft);
    money(draft, true);
    return draft;
  },
  combined: (d) => {
    const draft = new Draft(d, d.plan(), { heavy: d.chance(0.4) });
    if (d.chance(0.5)) loadRamps(draft);
    else loadSteps(draft);
    draft.fitTasks();
    const axes = d.shuffle([
      () => neighbours(draft),
      () => (d.chance(0.3) ? neighbourTakesAll(draft) : neighbours(draft)),
      () => outages(draft),
      () => blips(draft),
      () => slowdown(draft),
      () => money(draft, d.chance(0.5)),
    ]);
    const picked = axes.slice(0, d.int(2, 4));
    for (const apply of picked) apply();
    mergeOutages(draft);
    return draft;
  },
};

/** Outages from several axes merged into disjoint windows, ascending. */
function mergeOutages(draft: Draft): void {
  const sorted = [...draft.outages].sort((a, b) => a.at - b.at);
  const merged: { at: number; durationSeconds: number }[] = [];
  for (const o of sorted) {
    const last = merged[merged.length - 1];
    if (last !== undefined && o.at <= last.at + last.durationSeconds + 1)
      last.durationSeconds = Math.max(last.durationSeconds, o.at + o.durationSeconds - last.at);
    else merged.push({ ...o });
  }
  draft.outages = merged;
}
