/**
 * The generators of the docs' generated blocks (scripts/doc-blocks.ts). Each is a deterministic
 * run: the same code gives the same text. Add one per figure or output a page shows.
 *
 * - `help [command]`: `captcha-fleet <command> --help`.
 * - `bench ARGS…`, `bench:overflow ARGS…`: the policy lab's stdout for those arguments (seeded
 *   simulations: deterministic; timings go to stderr and are not shown).
 * - `status-example text|json`: what `status` prints for a fixed fleet state (its renderer).
 * - `event-source`: the completion events' source and detail-type, from the code.
 * - `lab-table`: the README's table of the lab (`npm run bench`, seed 1): p95 per policy and trace.
 * - `overflow-readme`: the README's paragraph on `npm run bench:overflow`, its figures from the run.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import type { Command } from 'commander';
import { renderStatus } from '../bin/commands/status.js';
import { buildProgram } from '../bin/program.js';
import type { FleetStatus } from '../clients/fleet-status.js';
import { COMPLETION_EVENT_DETAIL_TYPE } from '../functions/core/events.js';
import { fleetEventSource, resolveSettings } from '../functions/core/settings.js';
import { designsMarkdownFor } from '../lab/designs-report.js';
import { POLICY_NAMES } from '../lab/policies.js';
import { monthlyBillMarkdown } from './cost-bill.js';
import type { DocGenerator } from './doc-blocks.js';

const ROOT = new URL('..', import.meta.url);

/** `captcha-fleet <command> --help`, as printed 100 columns wide, in a fenced block. */
function help([name]: string[]): string {
  const program = buildProgram();
  const command: Command | undefined = name === undefined ? program : program.commands.find((c) => c.name() === name);
  if (command === undefined) throw new Error(`help: no command "${name}"`);
  command.configureHelp({ helpWidth: 100 });
  return [
    '```text',
    `$ captcha-fleet${name === undefined ? '' : ` ${name}`} --help`,
    command.helpInformation().trimEnd(),
    '```',
  ].join('\n');
}

/** The lab's scripts a block may show, by npm script name. */
const LAB_SCRIPTS: Readonly<Record<string, string>> = {
  bench: 'lab/cli.ts',
  'bench:overflow': 'lab/overflow-bench.ts',
};

/** A lab script's stdout for `args` (`--no-report` added for `bench`: a block writes no files), in a fenced block. */
function lab(script: string): DocGenerator {
  return async (args) => {
    const file = LAB_SCRIPTS[script];
    if (file === undefined) throw new Error(`no lab script ${script}`);
    const argv = script === 'bench' && !args.includes('--no-report') ? [...args, '--no-report'] : args;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', file, ...argv], {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, NO_COLOR: '1' },
    });
    const shown = args.filter((arg) => arg !== '--no-report').join(' ');
    return ['```text', `$ npm run ${script}${shown ? ` -- ${shown}` : ''}`, stdout.trimEnd(), '```'].join('\n');
  };
}

/** The policies of the README's lab table, in the lab's order: all but the static pool and the ramp-bound floor. */
const LAB_TABLE_POLICIES = POLICY_NAMES.filter(
  (policy) => policy !== 'static-pool' && policy !== 'oracle-ramp' && policy !== 'oracle-park',
);

/** One policy's run of one trace in `npm run bench -- --json`, the figures the table shows. */
interface LabRun {
  policy: string;
  latency: { p95: number | null };
  overCapRejections: number;
  overCapShare: number;
  deadLettered: number;
  idleThreadSecondsPerTask: number;
}

/** `npm run bench -- --json` (seed 1, every shipped trace and policy): its traces' runs and its target checks. */
export interface LabFigures {
  traces: { name: string; runs: (LabRun & { arrivals: number })[] }[];
  targets: { trace: string; target: string; pass: boolean }[];
}

let lab1: Promise<LabFigures> | undefined;

/** The lab's figures, run once per process (the table and the checks of the prose read the same run). */
export function labJson(): Promise<LabFigures> {
  lab1 ??= promisify(execFile)(process.execPath, ['--import', 'tsx', 'lab/cli.ts', '--json', '--no-report'], {
    cwd: ROOT,
    maxBuffer: 256 * 1024 * 1024,
  }).then(({ stdout }) => JSON.parse(stdout) as LabFigures);
  return lab1;
}

/** The README's lab table, from `npm run bench -- --json` (seed 1, every shipped trace). */
async function labTable(): Promise<string> {
  const { traces } = await labJson();
  // As the lab's own table writes seconds: whole from 100 up, one decimal below.
  const num = (value: number | null) => (value === null ? '–' : value >= 100 ? value.toFixed(0) : value.toFixed(1));
  const lines = [
    `| trace | ${LAB_TABLE_POLICIES.join(' | ')} | governor over-cap | DLQ governor / lambda-fixed | idle thr-s/task governor / oracle |`,
    `|---|${LAB_TABLE_POLICIES.map(() => '---|').join('')}---|---|---|`,
  ];
  for (const trace of traces) {
    const run = (policy: string) => {
      const found = trace.runs.find((r) => r.policy === policy);
      if (found === undefined) throw new Error(`lab: ${trace.name} has no ${policy} run`);
      return found;
    };
    const governor = run('governor');
    lines.push(
      `| ${trace.name} | ${LAB_TABLE_POLICIES.map((policy) => num(run(policy).latency.p95)).join(' | ')} | ` +
        `${governor.overCapRejections} (${(governor.overCapShare * 100).toFixed(2)} %) | ` +
        `${governor.deadLettered} / ${run('lambda-fixed').deadLettered} | ` +
        `${governor.idleThreadSecondsPerTask.toFixed(2)} / ${run('oracle').idleThreadSecondsPerTask.toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}

/** One row of `npm run bench:overflow -- --json`. */
interface OverflowRow {
  trace: string;
  policy: string;
  p95: number;
  overflowUsd: number;
  deadLettered: number;
  capBreaches: number;
  startedPastPause: number | null;
}

/** The README's paragraph on the overflow lane: every figure from `npm run bench:overflow` (seed 1, its defaults). */
async function overflowReadme(): Promise<string> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    ['--import', 'tsx', 'lab/overflow-bench.ts', '--json'],
    {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  const rows = JSON.parse(stdout) as OverflowRow[];
  const row = (trace: string, policy: string) => {
    const found = rows.find((r) => r.trace === trace && r.policy === policy);
    if (found === undefined) throw new Error(`bench:overflow has no row ${trace} / ${policy}`);
    return found;
  };
  const s = (value: number, digits = 0) => value.toFixed(digits);
  const spike = { without: row('spike-and-drop', 'governor'), oracle: row('spike-and-drop', 'oracle') };
  const spike2 = row('spike-and-drop', 'governor-overflow $2/h');
  const outage = { without: row('solver-outage', 'governor'), six: row('solver-outage', 'governor-overflow $6/h') };
  const overflowRuns = rows.filter((r) => r.policy.startsWith('governor-overflow'));
  const breaching = overflowRuns.filter((r) => r.capBreaches > 0).length;
  const pastPause = overflowRuns.filter((r) => (r.startedPastPause ?? 0) > 0).length;
  return [
    '`npm run bench:overflow` adds a pay-per-solve overflow lane to the governor (the stack deploys it',
    'with `overflow` in the fleet config, see [docs/deploy.md](docs/deploy.md); locally',
    `\`npm start -- --overflow-sim\`): on spike-and-drop the p95 falls from ${s(spike.without.p95)} s (the`,
    `oracle without overflow: ${s(spike.oracle.p95)} s) to ${s(spike2.p95, 1)} s at a $2/h spend cap, for $${s(spike2.overflowUsd, 2)} of overflow solves.`,
    "Through the 30-minute outage of `solver-outage` the paused primary's work moves to the overflow",
    `provider: p95 ${s(outage.six.p95)} s instead of ${s(outage.without.p95)} s at a $6/h cap, for $${s(outage.six.overflowUsd, 2)} of overflow solves, ${outage.six.deadLettered === 0 ? 'none' : outage.six.deadLettered} to the DLQ.`,
    `${breaching === 0 ? 'No run spends a cent past its cap' : `${breaching} of ${overflowRuns.length} runs spend past their cap`}, ${pastPause === 0 ? 'nor takes the overflow account under its pause level' : `and ${pastPause} start tasks under the overflow account's pause level`}`,
    '([docs/lab.md](docs/lab.md#overflow-to-a-pay-per-solve-provider-issue-12)).',
  ].join('\n');
}

/** A fleet's state as a local `npm start -- --serve` leaves it after a demo: fixed, so its rendering is deterministic. */
export const STATUS_EXAMPLE: FleetStatus = {
  at: Date.UTC(2026, 10, 30, 9, 1, 41, 444),
  unread: [],
  lanes: {
    normal: { backlog: 0, inFlight: 0, delayed: 0, oldestAgeSeconds: undefined, ceiling: 20, enabled: true },
    high: { backlog: 0, inFlight: 0, delayed: 0, oldestAgeSeconds: undefined, ceiling: 15, enabled: false },
  },
  dlqDepth: 3,
  governor: {
    at: Date.UTC(2026, 10, 30, 9, 1, 40, 502),
    code: 'IDLE',
    message: 'No work queued; ceiling stays at the free threads (20) so a burst starts at once.',
    paused: false,
    pausedReason: undefined,
    freeThreads: 20,
    neededThreads: 0,
    shortfall: 0,
  },
  balance: 9.943,
  overflow: undefined,
  solvesByProvider: { primary: undefined, overflow: undefined },
  // The demo's default: res.php with no prices configured, so no solve has a known cost.
  spend: {
    windowMinutes: 60,
    totalUsd: undefined,
    byProvider: {},
    byMethod: {},
    unpriced: 57,
    source: 'results-table',
  },
  recent: { windowMinutes: 5, solved: 57, failed: 0, rejected: 2, p95SolveMs: 688, source: 'results-table' },
};

/** `status --local` (text) or `status --local --json` for `STATUS_EXAMPLE`, in a fenced block. */
function statusExample([form]: string[]): string {
  const fleet = 'local stack (pid 18911)';
  if (form === 'json') return ['```json', JSON.stringify({ fleet, ...STATUS_EXAMPLE }), '```'].join('\n');
  if (form !== 'text') throw new Error('status-example: text or json');
  return ['```', '$ npx captcha-fleet status --local', renderStatus(STATUS_EXAMPLE, fleet), '```'].join('\n');
}

/** The completion events' source and detail-type sentence. */
function eventSource(): string {
  const prefix = resolveSettings({}).prefix;
  return (
    `Source \`${fleetEventSource('<prefix>')}\` (\`${fleetEventSource(prefix)}\` with the default prefix), ` +
    `detail-type \`${COMPLETION_EVENT_DETAIL_TYPE}\`.`
  );
}

/** The Node.js floor of the package (`engines.node`). */
export function nodeFloor(): string {
  const manifest = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { engines: { node: string } };
  const floor = /^>=\s*(\d+(?:\.\d+)*)$/.exec(manifest.engines.node)?.[1];
  if (floor === undefined) throw new Error(`engines.node is not ">=X": ${manifest.engines.node}`);
  return floor;
}

export const DOC_GENERATORS: Readonly<Record<string, DocGenerator>> = {
  help,
  'monthly-bill': () => monthlyBillMarkdown(),
  /** `cost-designs steady,sale-day-surge`: the design comparison of docs/cost.md (lab/designs.ts). */
  'cost-designs': ([names]) => designsMarkdownFor((names ?? 'steady,sale-day-surge').split(',')),
  bench: lab('bench'),
  'bench:overflow': lab('bench:overflow'),
  'status-example': statusExample,
  'event-source': eventSource,
  'overflow-readme': overflowReadme,
  'lab-table': labTable,
};
