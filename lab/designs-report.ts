/**
 * The design comparison's figures and tables (lab/designs.ts): run by `npm run bench:cost` and
 * by the docs' generated block of docs/cost.md.
 */
import { describeBill } from '../functions/core/cost/fleet-bill.js';
import { AWS_PRICES } from '../functions/core/cost/prices.js';
import { shippedTraces } from './bench.js';
import { costOfRun } from './cost.js';
import {
  compareDesigns,
  DESIGN_SIZING,
  DESIGN_TIMING,
  type DesignResult,
  mixFigures,
  PARKED_WATCH_ALL_MINUTE,
} from './designs.js';
import type { ModelParams } from './model.js';
import { createPolicy } from './policies.js';
import { simulate } from './sim.js';
import { type Trace, withSolveMode } from './trace.js';

/** The designs on one trace, and the plan-sized thread pool on one VM beside them. */
export function designsOn(trace: Trace, seed: number): { trace: Trace; designs: DesignResult[]; pool: DesignResult } {
  const run = (name: 'governor' | 'oracle' | 'thread-pool-plan', t: Trace = trace, model: Partial<ModelParams> = {}) =>
    simulate(t, createPolicy(name, t.settings, model), { seed, model });
  const waiting = withSolveMode(trace, 'wait');
  const parked = withSolveMode(trace, 'park');
  const oracle = run('oracle');
  const designs = compareDesigns(
    trace,
    {
      waiting: run('governor', waiting),
      waitingSmall: run('governor', waiting, { consumerMemoryMb: DESIGN_SIZING.small.memoryMb }),
      protocolPolls: run('governor', { ...waiting, pollLoss: true }),
      tightPolls: run('governor', { ...waiting, pollLoss: true }, { pollSchedule: DESIGN_TIMING.parkedPoll }),
      parked: run('governor', parked),
      parkedAllMinute: run('governor', parked, PARKED_WATCH_ALL_MINUTE),
      parkedLarge: run('governor', parked, { consumerMemoryMb: DESIGN_SIZING.waiting.memoryMb }),
      oracle,
    },
    mixFigures(trace, seed),
  );
  const poolRun = run('thread-pool-plan');
  const pool: DesignResult = {
    design: 'thread pool on one t4g.small (not Lambda; reference)',
    p95: poolRun.latency.p95,
    p95VsOracle: poolRun.latency.p95 !== null && oracle.latency.p95 ? poolRun.latency.p95 / oracle.latency.p95 : null,
    overCapShare: poolRun.overCapShare,
    overCapRejections: poolRun.overCapRejections,
    cost: costOfRun(trace, poolRun),
    latencyFrom: 'simulated',
  };
  return { trace, designs, pool };
}

const pct = (share: number) => `${(share * 100).toFixed(2)} %`;
const num = (value: number | null, digits = 1) => (value === null ? '–' : value.toFixed(digits));

export function rows(results: DesignResult[]): string[][] {
  return results.map((d) => [
    d.design,
    num(d.p95),
    d.p95VsOracle === null ? '–' : `× ${d.p95VsOracle.toFixed(2)}`,
    `${d.overCapRejections} (${pct(d.overCapShare)})`,
    `$${d.cost.awsUsd.toFixed(3)}`,
    `× ${d.cost.awsPerPlan.toFixed(2)}`,
    describeBill(d.cost.bill, 3),
  ]);
}

export const HEAD = ['design', 'p95 s', 'vs oracle', 'over-cap', 'aws $', 'aws / plan', 'by service'];

export function designsMarkdown(all: ReturnType<typeof designsOn>[], seed: number): string {
  const out = [
    `Seed ${seed}; prices ${AWS_PRICES.region}, read ${AWS_PRICES.asOf}; the same figures as \`npm run bench:cost -- --seed ${seed}\`.`,
  ];
  for (const { trace, designs, pool } of all) {
    const plan = designs[0]?.cost.planUsd ?? 0;
    out.push(
      '',
      `### ${trace.name} — plan $${plan.toFixed(3)} (${trace.settings.planThreads} threads, ${(trace.durationSeconds / 3600).toFixed(1)} h)`,
      '',
    );
    out.push(`| ${HEAD.join(' | ')} |`, `|${HEAD.map(() => '---').join('|')}|`);
    for (const row of rows([...designs, pool])) out.push(`| ${row.join(' | ')} |`);
  }
  return `${out.join('\n')}\n`;
}

export function align(table: string[][]): string[] {
  const widths = (table[0] ?? []).map((_, i) => Math.max(...table.map((r) => (r[i] ?? '').length)));
  return table.map((r) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd(),
  );
}

/** The designs on the named shipped traces, as markdown tables. */
export function designsMarkdownFor(names: readonly string[], seed = 1): string {
  const traces = shippedTraces().filter((t) => names.includes(t.name));
  return designsMarkdown(
    traces.map((trace) => designsOn(trace, seed)),
    seed,
  );
}
