/**
 * The benchmark's text outputs: the results table, the targets of issue 5 checked against the
 * figures, and the JSON document.
 */
import type { TraceRuns } from './bench.js';
import type { RunResult } from './sim.js';
import type { Trace } from './trace.js';

/** A target checked on one trace. */
export interface TargetCheck {
  trace: string;
  target: string;
  pass: boolean;
  detail: string;
}

const P95_VS_ORACLE = 1.2;
const MIN_UTILIZATION = 0.9;
const MAX_OVER_CAP_SHARE_WITH_FOREIGN = 0.01;
const SURGE_FACTOR = 2;
const USUAL_SCALERS = ['thread-pool', 'process-pool', 'hpa'] as const;

/** Checks the governor's targets on every trace where the needed runs exist. */
export function checkTargets(bench: TraceRuns[]): TargetCheck[] {
  const checks: TargetCheck[] = [];
  for (const { trace, runs } of bench) {
    const by = (name: string) => runs.find((r) => r.policy === name);
    const governor = by('governor');
    if (!governor) continue;
    const add = (target: string, pass: boolean, detail: string) =>
      checks.push({ trace: trace.name, target, pass, detail });
    const oracle = by('oracle');
    if (oracle && oracle.latency.p95 !== null && governor.latency.p95 !== null) {
      const ratio = governor.latency.p95 / oracle.latency.p95;
      add(
        'p95 ≤ 1.2 × oracle',
        ratio <= P95_VS_ORACLE,
        `governor p95 ${s(governor.latency.p95)} vs oracle ${s(oracle.latency.p95)} (× ${ratio.toFixed(2)})`,
      );
    }
    const utilization = governor.utilizationWhileBacklog;
    add(
      'utilization while backlog ≥ 0.9',
      utilization === null || utilization >= MIN_UTILIZATION,
      utilization === null
        ? 'no backlog ever'
        : `${utilization.toFixed(2)} over ${s(governor.backlogSeconds)} with tasks waiting`,
    );
    const foreign = hasForeignThreads(trace);
    add(
      foreign ? 'over-cap ≤ 1 % (foreign threads)' : 'zero over-cap',
      foreign ? governor.overCapShare <= MAX_OVER_CAP_SHARE_WITH_FOREIGN : governor.overCapRejections === 0,
      `${governor.overCapRejections} of ${governor.submissions} submissions (${pct(governor.overCapShare)})`,
    );
    add(
      'zero tasks started past the halt level',
      governor.startedPastHalt === 0,
      `${governor.startedPastHalt} started under the $${trace.settings.haltBalance} halt level, ${governor.startedPastPause} under the $${trace.settings.pauseBalance} pause level`,
    );
    if (trace.surge) {
      for (const name of USUAL_SCALERS) {
        const other = by(name);
        if (!other || other.latency.p95 === null || governor.latency.p95 === null) continue;
        const faster = other.latency.p95 / governor.latency.p95;
        const cheaper = governor.computeUsd <= other.computeUsd;
        add(
          `surge: p95 ≥ 2× lower than ${name} at no more cost`,
          faster >= SURGE_FACTOR && cheaper,
          `p95 ${s(governor.latency.p95)} vs ${s(other.latency.p95)} (${faster.toFixed(1)}× lower); compute $${governor.computeUsd.toFixed(4)} vs $${other.computeUsd.toFixed(4)}`,
        );
      }
    }
  }
  return checks;
}

/** Whether any other user of the key holds threads during the trace. */
export function hasForeignThreads(trace: Trace): boolean {
  return trace.foreignThreads.value.some((threads) => threads > 0);
}

const COLUMNS = [
  'policy',
  'p50 s',
  'p95 s',
  'p99 s',
  'peak',
  'drain s',
  'util',
  'over-cap',
  'past halt',
  'changes',
  'compute s',
  '$/1k solves',
  'unfinished',
];

/** One row of figures per run. */
export function tableRows(runs: RunResult[]): string[][] {
  return runs.map((r) => [
    r.policy,
    num(r.latency.p50),
    num(r.latency.p95),
    num(r.latency.p99),
    String(r.peakBacklog),
    r.drainSeconds === null ? 'never' : num(r.drainSeconds),
    r.utilizationWhileBacklog === null ? '–' : r.utilizationWhileBacklog.toFixed(2),
    `${r.overCapRejections} (${pct(r.overCapShare)})`,
    String(r.startedPastHalt),
    String(r.scalingChanges),
    Math.round(r.computeSeconds).toString(),
    r.usdPer1000Solves === null ? '–' : r.usdPer1000Solves.toFixed(4),
    String(r.unfinished),
  ]);
}

/** The results as plain-text tables, one per trace, then the targets. */
export function formatTable(bench: TraceRuns[], checks: TargetCheck[]): string {
  const out: string[] = [];
  for (const { trace, runs } of bench) {
    const arrivals = runs[0]?.arrivals ?? 0;
    out.push(`${trace.name} — ${trace.description}`);
    out.push(
      `  ${arrivals} tasks, plan ${trace.settings.planThreads} threads, ${(trace.durationSeconds / 60).toFixed(0)} min${trace.pollLoss ? ', polling loss on' : ''}`,
    );
    out.push(...align([COLUMNS, ...tableRows(runs)]).map((line) => `  ${line}`));
    out.push('');
  }
  if (checks.length > 0) {
    out.push('Targets (governor)');
    for (const check of checks)
      out.push(`  ${check.pass ? 'PASS' : 'MISS'}  ${check.trace}: ${check.target} — ${check.detail}`);
    const missed = checks.filter((c) => !c.pass).length;
    out.push(`  ${checks.length - missed} of ${checks.length} met`);
  }
  return out.join('\n');
}

/** The JSON document: figures without the chart samples unless asked. */
export function toJson(bench: TraceRuns[], checks: TargetCheck[], options: { samples?: boolean } = {}): unknown {
  return {
    traces: bench.map(({ trace, runs }) => ({
      name: trace.name,
      description: trace.description,
      durationSeconds: trace.durationSeconds,
      planThreads: trace.settings.planThreads,
      runs: runs.map((r) => {
        if (options.samples) return r;
        const { samples: _samples, ...figures } = r;
        return figures;
      }),
    })),
    targets: checks,
  };
}

function align(rows: string[][]): string[] {
  const columns = Math.max(...rows.map((row) => row.length));
  const widths = Array.from({ length: columns }, (_, i) => Math.max(...rows.map((row) => (row[i] ?? '').length)));
  return rows.map((row) =>
    widths.map((width, i) => (i === 0 ? (row[i] ?? '').padEnd(width) : (row[i] ?? '').padStart(width))).join('  '),
  );
}

function num(value: number | null): string {
  if (value === null) return '–';
  return value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

function s(seconds: number): string {
  return `${num(seconds)} s`;
}

function pct(share: number): string {
  return `${(share * 100).toFixed(share > 0 && share < 0.001 ? 3 : 2)} %`;
}
