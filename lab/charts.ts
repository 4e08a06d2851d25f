/**
 * Charts with ECharts: one chart per trace (backlog, ceiling and in flight over time, one line
 * per policy), embedded in a self-contained HTML report (the library is inlined so the file
 * opens offline) or rendered to SVG on the server for the README.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as echarts from 'echarts';
import { at } from './arrays.js';
import type { TraceRuns } from './bench.js';
import { POLICY_DESCRIPTIONS, type PolicyName } from './policies.js';
import { SUMMARY_COLUMNS, summaryRows, TABLE_COLUMNS, tableRows, type TargetCheck } from './report.js';

/**
 * One colour and dash per policy, the same in every chart. Lines that trace the same values stay
 * visible: the governor is a wide translucent band drawn underneath, and the policies that often
 * equal it (lambda-fixed, static-pool, the oracle) are dashed or dotted on top of it; a pool
 * sized to the plan is its seed's colour, dashed.
 */
interface LineStyle {
  colour: string;
  dash?: number[];
  width: number;
  opacity?: number;
  z: number;
}

const STYLES: Record<string, LineStyle> = {
  governor: { colour: '#d62728', width: 5, opacity: 0.45, z: 1 },
  'thread-pool': { colour: '#1f77b4', width: 1.3, z: 2 },
  'thread-pool-plan': { colour: '#1f77b4', dash: [6, 3], width: 1.3, z: 2 },
  'process-pool': { colour: '#9467bd', width: 1.3, z: 2 },
  'process-pool-plan': { colour: '#9467bd', dash: [6, 3], width: 1.3, z: 2 },
  hpa: { colour: '#ff7f0e', width: 1.3, z: 2 },
  'hpa-plan': { colour: '#ff7f0e', dash: [6, 3], width: 1.3, z: 2 },
  'lambda-fixed': { colour: '#8c564b', dash: [8, 4], width: 1.6, z: 4 },
  'static-pool': { colour: '#7f7f7f', dash: [2, 3], width: 1.6, z: 3 },
  oracle: { colour: '#2ca02c', dash: [1, 3], width: 2.2, z: 5 },
};
const FALLBACK_STYLE: LineStyle = { colour: '#333333', width: 1.3, z: 2 };

const PANELS = [
  { key: 'backlog', label: 'backlog: tasks waiting in the queue' },
  { key: 'ceiling', label: 'ceiling: most consumers allowed (Lambda maximum, pool size)' },
  { key: 'inFlight', label: 'in flight: consumers holding a task' },
] as const;

/** Layout of the chart, px: the legend's rows above, then three panels, each under its own label. */
const LEGEND_TOP = 30;
const FIRST_PANEL_TOP = 112;
const PANEL_HEIGHT = 150;
const PANEL_GAP = 62;

/** Axis numbers short enough not to collide: 1200 → 1.2k. */
function shortNumber(value: number): string {
  return Math.abs(value) >= 1000 ? `${Number((value / 1000).toFixed(1))}k` : String(value);
}

/** The ECharts option of one trace's chart: three stacked panels sharing the time axis. */
export function chartOption(entry: TraceRuns, options: { interactive?: boolean } = {}): Record<string, unknown> {
  const { trace, runs } = entry;
  const panelTop = (i: number) => FIRST_PANEL_TOP + i * (PANEL_HEIGHT + PANEL_GAP);
  const grid = PANELS.map((_, i) => ({ left: 64, right: 28, top: panelTop(i), height: PANEL_HEIGHT }));
  const maxMinutes = Math.max(...runs.map((r) => r.samples.t[r.samples.t.length - 1] ?? 0)) / 60;
  // Every panel shows its minutes: the panels' gaps leave room, and no label needs the eye to travel.
  const xAxis = PANELS.map((_, i) => ({
    type: 'value',
    gridIndex: i,
    min: 0,
    max: Math.ceil(maxMinutes),
    name: 'min',
    nameLocation: 'end',
    nameGap: 6,
    axisLabel: { hideOverlap: true },
  }));
  const yAxis = PANELS.map((_, i) => ({
    type: 'value',
    gridIndex: i,
    splitNumber: 3,
    axisLabel: { hideOverlap: true, formatter: shortNumber },
  }));
  // Panel labels as titles above each panel, clear of the axis numbers and of the panel above.
  const panelTitles = PANELS.map((panel, i) => ({
    text: panel.label,
    left: 64,
    top: panelTop(i) - 24,
    textStyle: { fontSize: 12, fontWeight: 'normal' },
  }));
  const series = runs.flatMap((run) => {
    const style = STYLES[run.policy] ?? FALLBACK_STYLE;
    return PANELS.map((panel, i) => ({
      name: run.policy,
      type: 'line',
      xAxisIndex: i,
      yAxisIndex: i,
      showSymbol: false,
      step: panel.key === 'ceiling' ? 'end' : undefined,
      lineStyle: { width: style.width, type: style.dash ?? 'solid', opacity: style.opacity ?? 1 },
      z: style.z,
      color: style.colour,
      data: run.samples.t.map((t, k) => [round(t / 60, 2), at(run.samples[panel.key], k)]),
    }));
  });
  return {
    animation: false,
    title: [
      {
        text: `${trace.name}: backlog, ceiling and in flight`,
        left: 'center',
        top: 4,
        textStyle: { fontSize: 14 },
      },
      ...panelTitles,
    ],
    legend: { top: LEGEND_TOP, left: 64, right: 28, itemWidth: 28, data: runs.map((r) => r.policy) },
    tooltip: options.interactive ? { trigger: 'axis', axisPointer: { type: 'line' } } : undefined,
    axisPointer: options.interactive ? { link: [{ xAxisIndex: 'all' }] } : undefined,
    dataZoom: options.interactive
      ? [
          { type: 'inside', xAxisIndex: [0, 1, 2] },
          { type: 'slider', xAxisIndex: [0, 1, 2], bottom: 4, height: 18 },
        ]
      : undefined,
    grid,
    xAxis,
    yAxis,
    series,
  };
}

/** Height the chart's panels need, px (room for the zoom slider under the last panel). */
export const CHART_HEIGHT = FIRST_PANEL_TOP + 3 * PANEL_HEIGHT + 2 * PANEL_GAP + 56;

/** One trace's chart as an SVG document, drawn by ECharts' server-side SVG renderer. */
export function renderSvg(entry: TraceRuns, width = 960): string {
  const chart = echarts.init(null, null, { renderer: 'svg', ssr: true, width, height: CHART_HEIGHT });
  try {
    chart.setOption({ backgroundColor: '#ffffff', ...chartOption(entry) });
    return chart.renderToSVGString();
  } finally {
    chart.dispose();
  }
}

/** The self-contained HTML report: summary, targets with the cause of each miss, then per trace a table and a chart. */
export function renderHtml(
  bench: TraceRuns[],
  checks: TargetCheck[],
  meta: { seed: number; generatedAt: string; settings?: string },
): string {
  const library = readFileSync(createRequire(import.meta.url).resolve('echarts/dist/echarts.min.js'), 'utf8');
  const options = bench.map((entry) => chartOption(entry, { interactive: true }));
  const policies = [...new Set(bench.flatMap((b) => b.runs.map((r) => r.policy)))];
  const sections = bench
    .map(
      (entry, i) => `
<section id="trace-${esc(entry.trace.name)}">
  <h2>${esc(entry.trace.name)}</h2>
  <p>${esc(entry.trace.description)} — ${entry.runs[0]?.arrivals ?? 0} tasks, plan ${entry.trace.settings.planThreads} threads.</p>
  ${table(TABLE_COLUMNS, tableRows(entry.runs, entry.costs))}
  <div class="chart" id="chart-${i}"></div>
</section>`,
    )
    .join('\n');
  const missed = checks.filter((c) => !c.pass).length;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>captcha-fleet policy lab</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1180px; padding: 0 12px; color: #222; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; font-size: 13px; }
th, td { padding: 3px 7px; border-bottom: 1px solid #ddd; text-align: right; }
th { vertical-align: bottom; background: #f4f4f4; }
th:first-child, td:first-child { text-align: left; }
.chart { width: 100%; height: ${CHART_HEIGHT}px; }
.targets { padding-left: 0; list-style: none; }
.targets li { margin: 4px 0; }
.targets b { display: inline-block; width: 3.4em; }
.targets .pass b { color: #2ca02c; } .targets .miss b { color: #d62728; }
.targets .why { margin: 2px 0 8px 3.4em; color: #444; }
section { margin-top: 32px; }
dt { font-weight: 600; } dd { margin: 0 0 6px 16px; }
</style>
</head>
<body>
<h1>captcha-fleet policy lab</h1>
<p>Seed ${meta.seed}; generated ${esc(meta.generatedAt)}${meta.settings ? `; run with ${esc(meta.settings)}` : ''}. Every policy replays the same arrivals. Times in seconds. ${checks.length - missed} of ${checks.length} targets met; each miss says why below.</p>
<h2>Summary</h2>
${table(SUMMARY_COLUMNS, summaryRows(bench, checks))}
<p>× is the governor's p95 divided by that policy's. “fixed” is lambda-fixed, Lambda's own scaling with its maximum at the plan. The plan-sized pools are the seeds' scalers with their maximum raised from 20 (16) workers to the plan threads.</p>
${targetList(checks)}
<h2>Figures</h2>
<dl>
<dt>idle thr-s/task</dt><dd>Lost capacity: solver thread-seconds free (plan − neighbours − ours) while tasks waited in the queue, the solver was up and the balance above the pause level, per task that arrived. The oracle's is the floor.</dd>
<dt>DLQ, hand-backs</dt><dd>Tasks moved to the dead-letter queue after maxReceiveCount receives, and the times an invocation gave its task back (over cap, outage, no money, solve deadline). Pools keep a task in the worker: “–”.</dd>
<dt>over-cap</dt><dd>Submissions the solver refused for lack of free threads, and their share of all submissions.</dd>
<dt>past halt, changes, compute s</dt><dd>Solves started under the halt level; scaling changes; worker-seconds (pools, billed while idle) or invocation-seconds (Lambda).</dd>
</dl>
<h2>Policies</h2>
<ul>${policies.map((p) => `<li><b>${esc(p)}</b>: ${esc(POLICY_DESCRIPTIONS[p as PolicyName] ?? '')}</li>`).join('')}</ul>
<p>In the charts the governor is the wide translucent red band; lambda-fixed (dashed), the static pool (short dashes) and the oracle (dotted) are drawn over it, so a line equal to the governor's stays visible inside the band. Click a legend entry to hide a policy; scroll to zoom.</p>
${sections}
<script>${library}</script>
<script>
const options = ${safeJson(options)};
options.forEach((option, i) => {
  const chart = echarts.init(document.getElementById('chart-' + i));
  chart.setOption(option);
  addEventListener('resize', () => chart.resize());
});
</script>
</body>
</html>
`;
}

function targetList(checks: TargetCheck[]): string {
  if (checks.length === 0) return '';
  const items = checks.map((c) => {
    const why = c.cause ? `<div class="why">Why: ${esc(c.cause)}</div>` : '';
    return `<li class="${c.pass ? 'pass' : 'miss'}"><b>${c.pass ? 'PASS' : 'MISS'}</b> <a href="#trace-${esc(c.trace)}">${esc(c.trace)}</a>: ${esc(c.target)} — ${esc(c.detail)}${why}</li>`;
  });
  return `<h2>Targets (governor)</h2><ul class="targets">${items.join('')}</ul>`;
}

function table(head: readonly string[], rows: string[][]): string {
  return `<table><thead><tr>${head.map((h) => `<th>${esc(h)}</th>`).join('')}</tr></thead><tbody>${rows
    .map((row) => `<tr>${row.map((cell) => `<td>${esc(cell)}</td>`).join('')}</tr>`)
    .join('')}</tbody></table>`;
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

const ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' };

function esc(text: string): string {
  return text.replace(/[&<>"]/g, (c) => ENTITIES[c] ?? c);
}

/** JSON safe inside a script element. */
function safeJson(value: unknown): string {
  return JSON.stringify(value).replace(/</g, '\\u003c');
}
