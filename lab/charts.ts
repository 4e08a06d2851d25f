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
import { tableRows, type TargetCheck } from './report.js';

/** One colour per policy, the same in every chart. */
const COLOURS: Record<string, string> = {
  governor: '#d62728',
  'thread-pool': '#1f77b4',
  'process-pool': '#9467bd',
  hpa: '#ff7f0e',
  'lambda-fixed': '#8c564b',
  'static-pool': '#7f7f7f',
  oracle: '#2ca02c',
};

const PANELS = [
  { key: 'backlog', label: 'backlog (tasks waiting)' },
  { key: 'ceiling', label: 'ceiling (max consumers)' },
  { key: 'inFlight', label: 'in flight (consumers busy)' },
] as const;

/** The ECharts option of one trace's chart: three stacked panels sharing the time axis. */
export function chartOption(entry: TraceRuns, options: { interactive?: boolean } = {}): Record<string, unknown> {
  const { trace, runs } = entry;
  const top = 84;
  const gap = 28;
  const panelHeight = 150;
  const grid = PANELS.map((_, i) => ({ left: 60, right: 24, top: top + i * (panelHeight + gap), height: panelHeight }));
  const maxMinutes = Math.max(...runs.map((r) => r.samples.t[r.samples.t.length - 1] ?? 0)) / 60;
  const xAxis = PANELS.map((_, i) => ({
    type: 'value',
    gridIndex: i,
    min: 0,
    max: Math.ceil(maxMinutes),
    name: i === PANELS.length - 1 ? 'minutes' : '',
    nameLocation: 'middle',
    nameGap: 24,
    axisLabel: { show: i === PANELS.length - 1 },
  }));
  const yAxis = PANELS.map((panel, i) => ({
    type: 'value',
    gridIndex: i,
    name: panel.label,
    nameTextStyle: { align: 'left' },
    splitNumber: 3,
  }));
  const series = runs.flatMap((run) =>
    PANELS.map((panel, i) => ({
      name: run.policy,
      type: 'line',
      xAxisIndex: i,
      yAxisIndex: i,
      showSymbol: false,
      step: panel.key === 'ceiling' ? 'end' : undefined,
      lineStyle: { width: run.policy === 'governor' ? 2 : 1.2 },
      // The governor on top: the oracle and static pool often trace the same line.
      z: run.policy === 'governor' ? 3 : 2,
      color: COLOURS[run.policy] ?? '#333',
      data: run.samples.t.map((t, k) => [round(t / 60, 2), at(run.samples[panel.key], k)]),
    })),
  );
  return {
    animation: false,
    title: {
      text: `${trace.name}: backlog, ceiling and in flight`,
      left: 'center',
      top: 4,
      textStyle: { fontSize: 14 },
    },
    legend: { top: 30, data: runs.map((r) => r.policy) },
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

/** Height the chart's panels need, px. */
export const CHART_HEIGHT = 84 + 3 * (150 + 28) + 30;

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

/** The self-contained HTML report: policies, targets, and per trace a table and a chart. */
export function renderHtml(
  bench: TraceRuns[],
  checks: TargetCheck[],
  meta: { seed: number; generatedAt: string },
): string {
  const library = readFileSync(createRequire(import.meta.url).resolve('echarts/dist/echarts.min.js'), 'utf8');
  const options = bench.map((entry) => chartOption(entry, { interactive: true }));
  const policies = [...new Set(bench.flatMap((b) => b.runs.map((r) => r.policy)))];
  const sections = bench
    .map(
      (entry, i) => `
<section>
  <h2>${esc(entry.trace.name)}</h2>
  <p>${esc(entry.trace.description)} — ${entry.runs[0]?.arrivals ?? 0} tasks, plan ${entry.trace.settings.planThreads} threads.</p>
  ${htmlTable(entry)}
  <div class="chart" id="chart-${i}"></div>
</section>`,
    )
    .join('\n');
  const targets = checks.length
    ? `<h2>Targets (governor)</h2><ul class="targets">${checks
        .map(
          (c) =>
            `<li class="${c.pass ? 'pass' : 'miss'}"><b>${c.pass ? 'PASS' : 'MISS'}</b> ${esc(c.trace)}: ${esc(c.target)} — ${esc(c.detail)}</li>`,
        )
        .join('')}</ul>`
    : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>captcha-fleet policy lab</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px auto; max-width: 1100px; color: #222; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.chart { width: 100%; height: ${CHART_HEIGHT}px; }
.targets li.pass b { color: #2ca02c; } .targets li.miss b { color: #d62728; }
section { margin-top: 32px; }
</style>
</head>
<body>
<h1>captcha-fleet policy lab</h1>
<p>Seed ${meta.seed}; generated ${esc(meta.generatedAt)}. Every policy replays the same arrivals. Times in seconds; “util” is solver-thread utilization while tasks wait; cost is compute only (worker- or invocation-seconds).</p>
<h2>Policies</h2>
<ul>${policies.map((p) => `<li><b>${esc(p)}</b>: ${esc(POLICY_DESCRIPTIONS[p as PolicyName] ?? '')}</li>`).join('')}</ul>
${targets}
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

function htmlTable(entry: TraceRuns): string {
  const head = [
    'policy',
    'p50 s',
    'p95 s',
    'p99 s',
    'peak backlog',
    'drain s',
    'util',
    'over-cap',
    'past halt',
    'scaling changes',
    'compute s',
    '$ / 1000 solves',
    'unfinished',
  ];
  const rows = tableRows(entry.runs);
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
