/**
 * The generated benchmark: each drawn trace replayed against the governor, the clairvoyant
 * floors (oracle-ramp, oracle-park) and the fixed-maximum Lambda, judged against its floor (lab/targets.ts), then
 * summed per class: the share of traces that meet every target, each target's passes, the
 * worst p95 ratios, and the worst traces with the cause of each miss.
 */
import type { SolveMode } from '../functions/core/settings.js';
import type { GeneratedTrace, TraceClass } from './generate.js';
import type { ModelParams } from './model.js';
import { createPolicy, type PolicyName } from './policies.js';
import { simulate } from './sim.js';
import type { RunResult } from './sim/types.js';
import { judgeTrace, P95_HARD_FACTOR, TARGET_KEYS, type TargetKey, type TraceVerdict } from './targets.js';
import { withSolveMode } from './trace.js';

/** The policies every generated trace runs. */
export const GENERATED_POLICIES: readonly PolicyName[] = ['governor', 'oracle-ramp', 'oracle-park', 'lambda-fixed'];

/** One generated trace's runs and verdict. */
export interface GeneratedRun {
  generated: GeneratedTrace;
  runs: RunResult[];
  verdict: TraceVerdict;
  /** The seed it was simulated with (`seed` + offset + its index). */
  seed: number;
}

/**
 * Runs every generated trace; the simulation seed of trace i is `seed` + offset + i. `solveMode`
 * replaces the drawn fleet's (the default `park`), to compare the designs on the same traces.
 */
export function runGenerated(
  traces: readonly GeneratedTrace[],
  options: {
    seed: number;
    offset?: number;
    solveMode?: SolveMode;
    model?: Partial<ModelParams>;
    onTrace?: (run: GeneratedRun, index: number) => void;
  },
): GeneratedRun[] {
  return traces.map((drawn, i) => {
    const seed = options.seed + (options.offset ?? 0) + i;
    const generated = { ...drawn, trace: withSolveMode(drawn.trace, options.solveMode) };
    const runs = GENERATED_POLICIES.map((name) =>
      simulate(generated.trace, createPolicy(name, generated.trace.settings, options.model), {
        seed,
        model: options.model,
      }),
    );
    const verdict = judgeTrace(generated.trace, runs);
    if (verdict === undefined) throw new Error(`no verdict for ${generated.trace.name}`);
    // As the rng reads it (a seed past 2³² wraps): what a replay passes.
    const run = { generated, runs, verdict, seed: seed >>> 0 };
    options.onTrace?.(run, i);
    return run;
  });
}

/**
 * The same on `jobs` worker threads (lab/generate-worker.ts), each drawing and running its share;
 * results come back in trace order, identical to runGenerated's.
 */
export async function runGeneratedParallel(
  traces: readonly GeneratedTrace[],
  options: {
    seed: number;
    jobs: number;
    solveMode?: SolveMode;
    model?: Partial<ModelParams>;
    onTrace?: (run: GeneratedRun, done: number) => void;
  },
): Promise<GeneratedRun[]> {
  const { Worker } = await import('node:worker_threads');
  const byIndex = new Map(traces.map((g) => [generatedIndex(g), g]));
  const items = traces.map((g) => ({ index: generatedIndex(g), traceClass: g.traceClass }));
  const results = new Map<number, GeneratedRun>();
  const shares = Array.from({ length: options.jobs }, (_, w) => items.filter((_, i) => i % options.jobs === w));
  await Promise.all(
    shares
      .filter((share) => share.length > 0)
      .map(
        (share) =>
          new Promise<void>((done, fail) => {
            // The lab runs from TypeScript source: the .mjs entry loads the worker through tsx.
            const worker = new Worker(new URL('./generate-worker.mjs', import.meta.url), {
              workerData: { seed: options.seed, items: share, solveMode: options.solveMode, model: options.model },
            });
            worker.on('message', (m: { index: number; runs: RunResult[]; verdict: GeneratedRun['verdict'] }) => {
              const generated = byIndex.get(m.index) as GeneratedTrace;
              // The seed the worker simulated it with (runGenerated's: `seed` + its index), as the rng reads it.
              const run = { generated, runs: m.runs, verdict: m.verdict, seed: (options.seed + m.index) >>> 0 };
              results.set(m.index, run);
              options.onTrace?.(run, results.size);
            });
            worker.on('error', fail);
            worker.on('exit', (code) => (code === 0 ? done() : fail(new Error(`worker exited with ${code}`))));
          }),
      ),
  );
  return items.map((item) => results.get(item.index) as GeneratedRun);
}

/** A generated trace's index, from its name (gen-s<seed>-<index>-<class>). */
function generatedIndex(g: GeneratedTrace): number {
  return Number(g.trace.name.split('-')[2]);
}

/** One class's figures. */
export interface ClassFigures {
  traceClass: TraceClass | 'all';
  traces: number;
  passed: number;
  /** Passes per target. */
  byTarget: Record<TargetKey, number>;
  /** Largest governor ÷ floor p95, and how many traces are above 1.5 ×. */
  worstRatio: number | null;
  hardMisses: number;
}

/** Figures per class (in the order first seen), then all classes together. */
export function classFigures(runs: readonly GeneratedRun[]): ClassFigures[] {
  const groups = new Map<TraceClass, GeneratedRun[]>();
  for (const run of runs) groups.set(run.generated.traceClass, [...(groups.get(run.generated.traceClass) ?? []), run]);
  const rows = [...groups.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([c, g]) => figuresOf(c, g));
  rows.push(figuresOf('all', runs));
  return rows;
}

function figuresOf(traceClass: TraceClass | 'all', runs: readonly GeneratedRun[]): ClassFigures {
  const byTarget: Record<TargetKey, number> = { p95: 0, 'over-cap': 0, dlq: 0, unfinished: 0 };
  let worstRatio: number | null = null;
  for (const { verdict } of runs) {
    for (const t of verdict.targets) if (t.pass) byTarget[t.key] += 1;
    if (verdict.ratio !== null && (worstRatio === null || verdict.ratio > worstRatio)) worstRatio = verdict.ratio;
  }
  return {
    traceClass,
    traces: runs.length,
    passed: runs.filter((r) => r.verdict.pass).length,
    byTarget,
    worstRatio,
    hardMisses: runs.filter((r) => r.verdict.hardMiss).length,
  };
}

/** The per-class table, the worst traces with their causes, and where the failing traces were written. */
export function formatGenerated(
  runs: readonly GeneratedRun[],
  options: { seed: number; worst?: number; failingDir?: string },
): string {
  const out = [
    `Generated traces (seed ${options.seed}): ${runs.length}; targets against the fair floor (the better of oracle-ramp, oracle-park and a qualifying lambda-fixed)`,
  ];
  const header = ['class', 'traces', 'all targets', ...TARGET_KEYS, 'worst ×', `> ${P95_HARD_FACTOR} ×`];
  const rows = classFigures(runs).map((f) => [
    f.traceClass,
    String(f.traces),
    `${f.passed} (${pct(f.passed / Math.max(1, f.traces))})`,
    ...TARGET_KEYS.map((key) => String(f.byTarget[key])),
    f.worstRatio === null ? '–' : f.worstRatio.toFixed(2),
    String(f.hardMisses),
  ]);
  out.push(...align([header, ...rows]).map((line) => `  ${line}`), '');
  const worst = [...runs]
    .filter((r) => !r.verdict.pass)
    .sort((a, b) => (b.verdict.ratio ?? 0) - (a.verdict.ratio ?? 0))
    .slice(0, options.worst ?? 10);
  if (worst.length > 0) out.push(`Worst traces (of ${runs.filter((r) => !r.verdict.pass).length} that miss a target)`);
  for (const { generated, verdict } of worst) {
    const t = generated.trace;
    out.push(
      `  ${t.name}: plan ${t.settings.planThreads}, ${Math.round(t.durationSeconds / 60)} min, ${verdict.ratio === null ? 'p95 –' : `p95 × ${verdict.ratio.toFixed(2)}`} of ${verdict.floorPolicy}`,
    );
    out.push(`    ${t.description}`);
    for (const target of verdict.targets.filter((x) => !x.pass)) {
      out.push(`    MISS ${target.target} — ${target.detail}`);
      if (target.cause) out.push(`         why: ${target.cause}`);
    }
  }
  if (options.failingDir)
    out.push(
      '',
      `Failing traces written to ${options.failingDir} (replay one: npm run bench -- --trace-file FILE; each file keeps its class and seed, and is judged as here)`,
    );
  return out.join('\n');
}

/** The JSON document of a generated run: per class, then every trace's verdict and figures. */
export function generatedJson(runs: readonly GeneratedRun[], seed: number): unknown {
  return {
    seed,
    classes: classFigures(runs),
    traces: runs.map(({ generated, runs: rs, verdict }) => ({
      name: generated.trace.name,
      traceClass: generated.traceClass,
      planThreads: generated.trace.settings.planThreads,
      verdict,
      runs: rs.map(({ samples: _samples, ...figures }) => figures),
    })),
  };
}

function align(rows: string[][]): string[] {
  const columns = Math.max(...rows.map((row) => row.length));
  const widths = Array.from({ length: columns }, (_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length)));
  return rows.map((row) =>
    widths.map((width, i) => (i === 0 ? (row[i] ?? '').padEnd(width) : (row[i] ?? '').padStart(width))).join('  '),
  );
}

function pct(share: number): string {
  return `${(share * 100).toFixed(1)} %`;
}
