/**
 * A worker thread of the generated benchmark: draws its share of the traces (the generator is
 * deterministic, so each worker draws the same trace i), runs them and posts their runs back
 * without the chart samples.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { SolveMode } from '../functions/core/settings.js';
import { runGenerated } from './classes.js';
import { generateTrace, type TraceClass } from './generate.js';
import type { ModelParams } from './model.js';

interface Job {
  seed: number;
  items: { index: number; traceClass: TraceClass }[];
  solveMode?: SolveMode;
  model?: Partial<ModelParams>;
}

const job = workerData as Job;
for (const { index, traceClass } of job.items) {
  const generated = generateTrace(job.seed, index, traceClass);
  const [run] = runGenerated([generated], {
    seed: job.seed,
    offset: index,
    solveMode: job.solveMode,
    model: job.model,
  });
  if (run === undefined) throw new Error(`no run for trace ${index}`);
  for (const r of run.runs) r.samples = { t: [], backlog: [], ceiling: [], inFlight: [] };
  parentPort?.postMessage({ index, runs: run.runs, verdict: run.verdict });
}
