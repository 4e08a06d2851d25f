/**
 * `npm run bench` — the policy lab's command line. Runs every shipped trace against every
 * policy unless told otherwise, prints the table and the targets, writes the HTML report.
 */
import { accessSync, constants, mkdirSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Command, InvalidArgumentError, Option } from 'commander';
import { runBench, shippedTraces, TRACES_DIR, type TraceRuns } from './bench.js';
import { renderHtml, renderSvg } from './charts.js';
import {
  formatGenerated,
  GENERATED_POLICIES,
  type GeneratedRun,
  generatedJson,
  runGeneratedParallel,
} from './classes.js';
import { parseCount, parseSeed } from './flags.js';
import { generateTraces, TRACE_CLASSES, type TraceClass } from './generate.js';
import { type ModelParams, parseModelSettings } from './model.js';
import { POLICY_NAMES, type PolicyName } from './policies.js';
import { checkTargets, formatTable, toJson } from './report.js';
import { judgeTrace, type TraceVerdict } from './targets.js';
import { SOLVE_MODES, type SolveMode } from '../functions/core/settings.js';
import { loadTraceFile, TraceFileError, type Trace, type TraceInput, withSolveMode } from './trace.js';

interface Options {
  trace?: string;
  traceFile?: string[];
  policy?: string;
  seed: number;
  out: string;
  json?: boolean;
  report: boolean;
  svg?: string;
  svgTrace?: string;
  pollLoss?: boolean;
  perf?: boolean;
  generate?: number;
  classes?: string;
  jobs: number;
  worst: number;
  solveMode?: SolveMode;
  model?: Partial<ModelParams>;
}

const program = new Command()
  .name('bench')
  .description(
    'Replay traffic traces against the governor and the usual scalers; print the table, write the HTML report.',
  )
  .option('--trace <names>', 'shipped traces to run, comma-separated (default: all)')
  .option('--trace-file <files...>', 'your own trace files (JSON, see docs/lab.md)')
  .option('--policy <names>', `policies, comma-separated: ${POLICY_NAMES.join(', ')} (default: all)`)
  .option('--seed <n>', 'random seed', parseSeed, 1)
  .option('--out <dir>', 'where report.html and results.json go', 'lab/out')
  .option('--json', 'print the results as JSON instead of the table')
  .option('--no-report', 'do not write report.html and results.json')
  .option('--svg <file>', 'also render one trace chart to an SVG file')
  .option('--svg-trace <name>', 'the trace drawn by --svg (default: sale-day-surge, else the first)')
  .option('--poll-loss', 'model answers waiting for the next res.php poll on every trace')
  .option(
    '--solve-mode <mode>',
    `run every trace (shipped, --trace-file, --generate) with this solveMode: ${SOLVE_MODES.join(' or ')} (default: the trace's own, park unless it sets one)`,
    parseSolveMode,
  )
  .option(
    '--model <settings>',
    'override numeric model constants of lab/model.ts for every run, comma-separated name=value (e.g. watchSecondsPerMinute=60)',
    parseModel,
  )
  .option('--perf', 'speed benchmark: a simulated day of 10^6 tasks (lab/traces/perf/day-1m.json)')
  .option(
    '--generate <n>',
    'draw N traces over the classes (docs/lab.md), judge each against its fair floor',
    parseCount,
  )
  .option(
    '--classes <names>',
    `with --generate: only these classes, comma-separated: ${Object.keys(TRACE_CLASSES).join(', ')}`,
  )
  .addOption(
    new Option('--jobs <n>', 'with --generate: worker threads')
      .argParser(parseCount)
      .default(Math.min(4, cpus().length), 'the CPUs, at most 4'),
  )
  .option('--worst <n>', 'with --generate: how many failing traces to print with their causes', parseCount, 10)
  .action((options: Options) => main(options));

function main(options: Options): void {
  refuseIgnoredFlags(options);
  const policies = selectPolicies(options.policy);
  // Where the report goes is checked before the runs (an unwritable --out ended minutes of
  // simulation with a stack trace).
  if (options.report || options.generate !== undefined) writableDir(resolve(options.out), '--out');
  if (options.svg !== undefined) writableDir(dirname(resolve(options.svg)), '--svg');
  if (options.perf) {
    perf(options, policies ?? ['governor']);
    return;
  }
  if (options.generate !== undefined) {
    void generated(options, options.generate);
    return;
  }
  let traces = selectTraces(options).map((trace) => withSolveMode(trace, options.solveMode));
  if (options.pollLoss) traces = traces.map((trace) => ({ ...trace, pollLoss: true }));
  // A generated trace replays with the seed it ran with, unless --seed says otherwise.
  const seedGiven = program.getOptionValueSource('seed') === 'cli';
  const seedOf = (trace: Trace) => (seedGiven ? options.seed : (trace.generated?.seed ?? options.seed));
  const bench = traces.flatMap((trace) =>
    runBench({
      traces: [trace],
      policies: trace.generated !== undefined && policies === undefined ? [...GENERATED_POLICIES] : policies,
      seed: seedOf(trace),
      // A failing generated trace replays with the model settings it ran with, unless --model says otherwise.
      model:
        options.model ?? (trace.generated?.model !== undefined ? parseModelSettings(trace.generated.model) : undefined),
      onRun: (r) =>
        process.stderr.write(
          `  ${r.trace} / ${r.policy}: ${r.arrivals} tasks, ${r.events} events, ${r.wallMs.toFixed(0)} ms\n`,
        ),
    }),
  );
  const checks = checkTargets(bench);
  const verdicts = generatedVerdicts(bench, seedOf);
  process.stdout.write(
    options.json
      ? `${JSON.stringify({ ...(toJson(bench, checks) as object), ...(verdicts.length > 0 ? { generated: verdicts } : {}) }, null, 2)}\n`
      : `${formatTable(bench, checks)}\n${verdicts.map(describeVerdict).join('')}`,
  );
  if (options.report) {
    const dir = resolve(options.out);
    mkdirSync(dir, { recursive: true });
    // What the run was made with beyond the traces: two runs of other settings were otherwise
    // the same files (the report even described the parked design for a waiting run).
    const run = runSettings(options);
    writeFileSync(
      join(dir, 'report.html'),
      renderHtml(bench, checks, {
        seed: options.seed,
        generatedAt: new Date().toISOString(),
        ...(run.described !== '' ? { settings: run.described } : {}),
      }),
    );
    writeFileSync(
      join(dir, 'results.json'),
      `${JSON.stringify({ run: run.fields, ...(toJson(bench, checks, { samples: true }) as object) })}\n`,
    );
    process.stderr.write(`Report: ${join(dir, 'report.html')}\n`);
  }
  if (options.svg) writeSvg(bench, options.svg, options.svgTrace);
}

/** The settings a run was made with besides its traces: for results.json, and in words for the report. */
function runSettings(options: Options): { fields: Record<string, unknown>; described: string } {
  const fields = {
    seed: options.seed,
    ...(options.solveMode !== undefined ? { solveMode: options.solveMode } : {}),
    ...(options.model !== undefined ? { model: options.model } : {}),
    ...(options.pollLoss ? { pollLoss: true } : {}),
  };
  const described = [
    options.solveMode !== undefined ? `--solve-mode ${options.solveMode}` : '',
    options.model !== undefined ? `--model ${modelText(options.model)}` : '',
    options.pollLoss ? '--poll-loss' : '',
  ]
    .filter(Boolean)
    .join(' ');
  return { fields, described };
}

/** A generated trace's verdict by the generator's own targets, as `--generate` judged it (lab/targets.ts). */
interface ReplayedVerdict {
  trace: string;
  class: string;
  seed: number;
  verdict: TraceVerdict | undefined;
}

function generatedVerdicts(bench: readonly TraceRuns[], seedOf: (trace: Trace) => number): ReplayedVerdict[] {
  return bench.flatMap(({ trace, runs }) =>
    trace.generated === undefined
      ? []
      : [{ trace: trace.name, class: trace.generated.class, seed: seedOf(trace), verdict: judgeTrace(trace, runs) }],
  );
}

function describeVerdict({ trace, class: traceClass, seed, verdict }: ReplayedVerdict): string {
  const head = `\nGenerated trace ${trace} (${traceClass}, seed ${seed}), judged as --generate judges it: `;
  if (verdict === undefined)
    return `${head}no verdict: it needs the governor and the fair floor's policies (${GENERATED_POLICIES.join(', ')})\n`;
  if (verdict.pass) return `${head}every target met\n`;
  const misses = verdict.targets
    .filter((target) => !target.pass)
    .map(
      (target) => `  MISS ${target.target} — ${target.detail}${target.cause ? `\n       why: ${target.cause}` : ''}`,
    );
  return `${head}${misses.length} target(s) missed\n${misses.join('\n')}\n`;
}

/**
 * Flags that do nothing in the mode asked for, refused rather than ignored: `--generate` runs its
 * own traces and policies (a missing --trace-file, --policy, --poll-loss, --svg passed unseen), and
 * --classes, --jobs and --worst are the generator's.
 */
function refuseIgnoredFlags(options: Options): void {
  const given = (name: string) => program.getOptionValueSource(name) === 'cli';
  const generating = options.generate !== undefined;
  const notWithGenerate = ['trace', 'traceFile', 'policy', 'pollLoss', 'svg', 'svgTrace', 'perf'].filter(given);
  const onlyWithGenerate = ['classes', 'jobs', 'worst'].filter(given);
  const flag = (name: string) => `--${name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;
  if (generating && notWithGenerate.length > 0)
    fail(
      `${notWithGenerate.map(flag).join(', ')} ${notWithGenerate.length === 1 ? 'does' : 'do'} nothing with --generate (it draws its traces and runs ${GENERATED_POLICIES.join(', ')}); drop ${notWithGenerate.length === 1 ? 'it' : 'them'}, or replay a trace it wrote with --trace-file.`,
    );
  if (!generating && onlyWithGenerate.length > 0)
    fail(
      `${onlyWithGenerate.map(flag).join(', ')} only work${onlyWithGenerate.length === 1 ? 's' : ''} with --generate N.`,
    );
}

/** Make `dir` (and its parents) now, or end with what is wrong with it. */
function writableDir(dir: string, flag: string): void {
  try {
    mkdirSync(dir, { recursive: true });
    accessSync(dir, constants.W_OK);
  } catch (error) {
    fail(`${flag}: cannot write to ${dir} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}).`);
  }
}

function selectPolicies(list: string | undefined): PolicyName[] | undefined {
  if (list === undefined) return undefined;
  const names = list
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !(POLICY_NAMES as readonly string[]).includes(n));
  if (unknown.length > 0) fail(`Unknown policy ${unknown.join(', ')}. Choose from: ${POLICY_NAMES.join(', ')}.`);
  return names as PolicyName[];
}

function selectTraces(options: Options): Trace[] {
  const traces: Trace[] = [];
  if (options.trace !== undefined || options.traceFile === undefined) {
    const shipped = shippedTraces();
    if (options.trace === undefined) traces.push(...shipped);
    else {
      for (const name of options.trace
        .split(',')
        .map((n) => n.trim())
        .filter(Boolean)) {
        const trace = shipped.find((t) => t.name === name);
        if (!trace)
          fail(
            `Unknown trace "${name}". Shipped traces: ${shipped.map((t) => t.name).join(', ')} (or use --trace-file FILE).`,
          );
        traces.push(trace);
      }
    }
  }
  for (const file of options.traceFile ?? []) traces.push(loadTraceFile(file));
  // The report and the targets go by name: two traces of one name merged their checks.
  const names = traces.map((trace) => trace.name);
  const repeated = [...new Set(names.filter((name, i) => names.indexOf(name) !== i))];
  if (repeated.length > 0)
    fail(
      `Two traces are named ${repeated.map((name) => `"${name}"`).join(', ')} (a file given twice, or named as a shipped trace): give each its own "name".`,
    );
  return traces;
}

function writeSvg(bench: TraceRuns[], file: string, name: string | undefined): void {
  const entry = name
    ? bench.find((b) => b.trace.name === name)
    : (bench.find((b) => b.trace.name === 'sale-day-surge') ?? bench[0]);
  if (!entry) fail(`No run of trace "${name}" to draw.`);
  mkdirSync(dirname(resolve(file)), { recursive: true });
  writeFileSync(file, renderSvg(entry));
  process.stderr.write(`SVG: ${file} (${entry.trace.name})\n`);
}

/** A simulated day of 10⁶ tasks per policy: wall and CPU time, events per second. */
function perf(options: Options, policies: PolicyName[]): void {
  const trace = withSolveMode(loadTraceFile(join(TRACES_DIR, 'perf', 'day-1m.json')), options.solveMode);
  process.stdout.write(`CPU: ${cpus()[0]?.model ?? 'unknown'} (${cpus().length} logical), Node ${process.version}\n`);
  for (const policy of policies) {
    const before = process.cpuUsage();
    const [run] = runBench({ traces: [trace], policies: [policy], seed: options.seed, model: options.model }).flatMap(
      (entry) => entry.runs,
    );
    const used = process.cpuUsage(before);
    if (run === undefined) fail(`The ${policy} policy produced no run.`);
    const cpuSeconds = (used.user + used.system) / 1e6;
    process.stdout.write(
      `${policy}: ${run.arrivals} tasks over ${(run.simulatedSeconds / 3600).toFixed(1)} simulated h, ${run.events} events in ${(run.wallMs / 1000).toFixed(2)} s wall / ${cpuSeconds.toFixed(2)} s CPU (${Math.round(run.events / (run.wallMs / 1000)).toLocaleString('en-US')} events/s); p95 ${run.latency.p95?.toFixed(1)} s\n`,
    );
  }
}

/**
 * `--generate N`: draws N traces (of the chosen classes), runs the governor, the fair floor and
 * the fixed-maximum Lambda on each, prints the per-class table and the worst traces, and writes
 * each failing trace to <out>/failing/ as a file --trace-file replays, and the figures to
 * <out>/generated.json.
 */
async function generated(options: Options, count: number): Promise<void> {
  const wanted = selectClasses(options.classes);
  const traces = wanted === undefined ? generateTraces(count, options.seed) : drawOnly(count, options.seed, wanted);
  const started = performance.now();
  const runs = await runGeneratedParallel(traces, {
    seed: options.seed,
    jobs: options.jobs,
    solveMode: options.solveMode,
    model: options.model,
    onTrace: (run, done) => {
      if (done % 50 === 0 || done === traces.length)
        process.stderr.write(
          `  ${done}/${traces.length} traces, ${((performance.now() - started) / 1000).toFixed(0)} s\n`,
        );
      if (!run.verdict.pass)
        process.stderr.write(`  MISS ${run.generated.trace.name} (× ${run.verdict.ratio?.toFixed(2) ?? '–'})\n`);
    },
  });
  let failingDir: string | undefined;
  if (options.report) {
    const dir = resolve(options.out);
    failingDir = join(dir, 'failing');
    mkdirSync(failingDir, { recursive: true });
    for (const run of runs.filter((r) => !r.verdict.pass))
      writeFileSync(
        join(failingDir, `${run.generated.trace.name}.json`),
        `${JSON.stringify(failingTraceFile(run, options), null, 2)}\n`,
      );
    writeFileSync(join(dir, 'generated.json'), `${JSON.stringify(generatedJson(runs, options.seed))}\n`);
  }
  const wall = ((performance.now() - started) / 1000).toFixed(1);
  process.stdout.write(
    options.json
      ? `${JSON.stringify(generatedJson(runs, options.seed), null, 2)}\n`
      : `${formatGenerated(runs, { seed: options.seed, worst: options.worst, failingDir })}\n\n${runs.length} traces in ${wall} s wall\n`,
  );
}

/** N traces of the wanted classes only: the generator's draws, those of other classes skipped. */
function drawOnly(count: number, seed: number, wanted: readonly TraceClass[]) {
  const out = [];
  for (let batch = 0; out.length < count; batch++) {
    const drawn = generateTraces((batch + 1) * 200, seed).slice(batch * 200);
    out.push(...drawn.filter((g) => wanted.includes(g.traceClass)));
  }
  return out.slice(0, count);
}

function selectClasses(list: string | undefined): TraceClass[] | undefined {
  if (list === undefined) return undefined;
  const names = list
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  // An empty list drew forever (no draw is of no class).
  if (names.length === 0) fail(`--classes names no class. Choose from: ${Object.keys(TRACE_CLASSES).join(', ')}.`);
  const unknown = names.filter((n) => !(n in TRACE_CLASSES));
  if (unknown.length > 0)
    fail(`Unknown class ${unknown.join(', ')}. Choose from: ${Object.keys(TRACE_CLASSES).join(', ')}.`);
  return names as TraceClass[];
}

/**
 * A failing generated trace as a file `--trace-file` replays as it ran: the drawn trace, its
 * `--solve-mode` as the fleet's `solveMode` and its `--model` settings beside its class and seed
 * (without them a trace that missed under `--solve-mode wait` replayed parked and met every target).
 */
function failingTraceFile(run: GeneratedRun, options: Options): TraceInput {
  const { input } = run.generated;
  const model = options.model !== undefined ? modelText(options.model) : undefined;
  return {
    ...input,
    ...(options.solveMode !== undefined ? { fleet: { ...input.fleet, solveMode: options.solveMode } } : {}),
    generated: { class: run.generated.traceClass, seed: run.seed, ...(model !== undefined ? { model } : {}) },
  };
}

/** `--model` settings as the flag writes them. */
function modelText(model: Partial<ModelParams>): string {
  return Object.entries(model)
    .map(([name, value]) => `${name}=${value}`)
    .join(',');
}

/** `--model` given more than once adds up (the later setting of a name wins): the first was dropped. */
function parseModel(value: string, previous: Partial<ModelParams> | undefined): Partial<ModelParams> {
  try {
    return { ...previous, ...parseModelSettings(value) };
  } catch (error) {
    throw new InvalidArgumentError((error as Error).message);
  }
}

function parseSolveMode(value: string): SolveMode {
  if (!(SOLVE_MODES as readonly string[]).includes(value))
    throw new InvalidArgumentError(`one of ${SOLVE_MODES.join(', ')}`);
  return value as SolveMode;
}

function fail(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(2);
}

try {
  program.parse();
} catch (error) {
  if (error instanceof TraceFileError) fail(error.message);
  throw error;
}
