/**
 * The benchmark: every selected policy on every selected trace, same seed, one run each.
 */
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { costOfRun, type RunCost } from './cost.js';
import type { ModelParams } from './model.js';
import { createPolicy, POLICY_NAMES, type PolicyName } from './policies.js';
import { simulate, type RunResult } from './sim.js';
import { loadTraceFile, type Trace } from './trace.js';

/** Where the shipped traces live. */
export const TRACES_DIR = join(dirname(fileURLToPath(import.meta.url)), 'traces');

/** The shipped traces (lab/traces/*.json), in a stable order: steady first, then by name. */
export function shippedTraces(): Trace[] {
  const files = readdirSync(TRACES_DIR)
    .filter((file) => file.endsWith('.json'))
    .sort((a, b) => (a === 'steady.json' ? -1 : b === 'steady.json' ? 1 : a.localeCompare(b)));
  return files.map((file) => loadTraceFile(join(TRACES_DIR, file)));
}

/** One trace's runs, in policy order. */
export interface TraceRuns {
  trace: Trace;
  runs: RunResult[];
  /** What each run would have cost on AWS, beside the plan's cost (lab/cost.ts), in the order of `runs`. */
  costs: RunCost[];
}

export interface BenchOptions {
  traces: Trace[];
  policies?: readonly PolicyName[];
  seed: number;
  model?: Partial<ModelParams>;
  /** Called after each run (progress on stderr). */
  onRun?: (result: RunResult) => void;
}

/** Runs every policy on every trace. */
export function runBench(options: BenchOptions): TraceRuns[] {
  const policies = options.policies ?? POLICY_NAMES;
  return options.traces.map((trace) => {
    const runs = policies.map((name) => {
      const result = simulate(trace, createPolicy(name, trace.settings, options.model), {
        seed: options.seed,
        model: options.model,
      });
      options.onRun?.(result);
      return result;
    });
    return { trace, runs, costs: runs.map((run) => costOfRun(trace, run)) };
  });
}
