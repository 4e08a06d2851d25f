/**
 * `npm run bench:pipeline` — a benchmark of the solve path on one machine, not a test.
 *
 * 1. instant: the simulator answers at once; local throughput (tasks/s end to end) and the
 *    overhead per task (end-to-end minus solve time, from the results table's timings), for
 *    each batch size, plus a paced run that shows the overhead without queueing.
 * 2. backlog: a backlog on a small plan with scaled solve times (log-normal); thread utilization
 *    while the backlog exists, result requests per task and the answers' mean wait for their
 *    poll — the fixed protocol schedule vs the adaptive one (solver client against the
 *    simulator), and the whole local stack with the governor on.
 * 3. governor: the same backlog on the local stack, governor vs a fixed `--concurrency` at the cap.
 *
 * People read the table on stdout; `--json` prints one JSON object instead.
 */
import { Command, InvalidArgumentError } from 'commander';
import { integer, positive } from '../local/cli-values.js';
import { runClientOnly, type ClientRunResult, type ScheduleKind } from './lib/client-run.js';
import { machineInfo, percentile, utilizationReport, type MachineInfo, type UtilizationReport } from './lib/measure.js';
import { runOnStack, type StackRunResult } from './lib/stack-run.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const SCENARIOS = ['instant', 'backlog', 'governor'] as const;
type Scenario = (typeof SCENARIOS)[number];

interface Options {
  scenario: Scenario[];
  seed: number;
  instantTasks: number;
  instantThreads: number;
  batchSizes: number[];
  pacedTasks: number;
  pacedRate: number;
  backlogTasks: number;
  threads: number;
  medianMs: number;
  tickMs: number;
  timeout: number;
  json?: boolean;
}

/** Figures of one instant-simulator run. */
interface InstantFigures {
  label: string;
  batchSize: number;
  tasks: number;
  terminal: number;
  /** Tasks per second from the first send to the last terminal record. */
  throughput: number;
  durationMs: number;
  /** End-to-end (submittedAt → completedAt) minus the solve time, per task. */
  overheadP50Ms: number | undefined;
  overheadP95Ms: number | undefined;
  /** submittedAt → claim: time queued. */
  queueWaitP95Ms: number | undefined;
  /** claim → record, minus the solve: the invocation's own work (claim, submit, record). */
  inInvocationP95Ms: number | undefined;
  solveP95Ms: number | undefined;
  peakInvocations: number;
}

/** Figures of one backlog run (stack or client only). */
interface BacklogFigures {
  label: string;
  schedule: ScheduleKind;
  where: 'client+simulator' | 'local stack';
  ceiling: string;
  tasks: number;
  completed: number;
  utilization: UtilizationReport | undefined;
  /** res.php get requests ÷ tasks accepted (the simulator's count). */
  resultRequestsPerTask: number | undefined;
  /** Ready answer → its first read, mean and max (the simulator's exact figure). */
  meanAnswerWaitMs: number | null;
  maxAnswerWaitMs: number | null;
  overCapRejections: number;
  peakThreads: number;
  peakInvocations: number | undefined;
  durationMs: number;
  governor?:
    | { maxCeiling: number | undefined; startCeiling: number | undefined; reasons: Record<string, number> }
    | undefined;
}

interface BenchOutput {
  machine: MachineInfo;
  options: Omit<Options, 'json'>;
  instant: InstantFigures[];
  backlog: BacklogFigures[];
  governor: BacklogFigures[];
  wallMs: number;
}

const program = new Command()
  .name('bench:pipeline')
  .description(
    'Benchmark the solve path on the local stack (embedded emulators + solver simulator); prints a table, or JSON with --json.',
  )
  .option('--scenario <names>', `scenarios to run, comma-separated: ${SCENARIOS.join(', ')}`, parseScenarios, [
    ...SCENARIOS,
  ])
  .option('--seed <n>', 'seed of the workload and the simulator', integer(0, 2 ** 31 - 1), 1)
  .option('--instant-tasks <n>', 'instant: tasks sent at once per batch size', integer(1, 100_000), 1000)
  .option(
    '--instant-threads <n>',
    'instant: plan threads (ceiling × batch size never exceeds them)',
    integer(1, 10_000),
    50,
  )
  .option('--batch-sizes <list>', 'instant: SQS batch sizes to run, comma-separated (1-10)', parseBatchSizes, [1, 10])
  .option('--paced-tasks <n>', 'instant: tasks of the paced run (0 = none)', integer(0, 100_000), 100)
  .option('--paced-rate <r>', 'instant: tasks per second of the paced run', positive('a rate'), 20)
  .option('--backlog-tasks <n>', 'backlog, governor: tasks sent at once', integer(1, 100_000), 400)
  .option('--threads <n>', 'backlog, governor: plan threads', integer(1, 10_000), 20)
  .option(
    '--median-ms <ms>',
    'backlog, governor: median solve time (log-normal, σ 0.35)',
    positive('milliseconds', 600_000),
    1000,
  )
  .option('--tick-ms <ms>', 'governor tick, ms (10 000 in AWS; local default 1000)', integer(100, 60_000), 1000)
  .option('--timeout <s>', 'give up on one run after this many seconds', positive('seconds', 86_400), 120)
  .option('--json', 'print one JSON object instead of the table')
  // A usage error exits 2, as `npm start` does; help and version exit 0.
  .exitOverride((error) => process.exit(error.exitCode === 0 ? 0 : 2))
  .action(async (options: Options) => {
    const output = await runBench(options);
    process.stdout.write(options.json ? `${JSON.stringify(output)}\n` : formatReport(output));
  });

async function runBench(options: Options): Promise<BenchOutput> {
  const began = Date.now();
  const machine = machineInfo();
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const timeoutMs = options.timeout * 1000;
  const instant: InstantFigures[] = [];
  const backlog: BacklogFigures[] = [];
  const governor: BacklogFigures[] = [];

  if (options.scenario.includes('instant')) {
    for (const batchSize of options.batchSizes) {
      log(`instant: ${options.instantTasks} tasks, batch ${batchSize}, ${options.instantThreads} threads…`);
      const run = await runOnStack({
        tasks: options.instantTasks,
        seed: options.seed,
        planThreads: options.instantThreads,
        batchSize,
        medianMs: 0,
        rate: 0,
        timeoutMs,
      });
      instant.push(instantFigures(`burst, batch ${batchSize}`, batchSize, options.instantTasks, run));
    }
    if (options.pacedTasks > 0) {
      log(`instant: ${options.pacedTasks} tasks paced at ${options.pacedRate}/s, batch 1…`);
      const run = await runOnStack({
        tasks: options.pacedTasks,
        seed: options.seed,
        planThreads: options.instantThreads,
        batchSize: 1,
        medianMs: 0,
        rate: options.pacedRate,
        timeoutMs,
      });
      instant.push(instantFigures(`paced ${options.pacedRate}/s, batch 1`, 1, options.pacedTasks, run));
    }
  }

  const backlogRun = {
    tasks: options.backlogTasks,
    seed: options.seed,
    planThreads: options.threads,
    medianMs: options.medianMs,
  };
  let stackGoverned: BacklogFigures | undefined;
  const governedOnStack = async () => {
    if (stackGoverned) return stackGoverned;
    log(`stack: ${options.backlogTasks} tasks, ${options.threads} threads, governor on…`);
    const run = await runOnStack({ ...backlogRun, batchSize: 1, rate: 0, tickMs: options.tickMs, timeoutMs });
    stackGoverned = stackFigures(
      'stack, governor',
      `governor (plan ${options.threads})`,
      options.backlogTasks,
      options.threads,
      run,
    );
    return stackGoverned;
  };
  if (options.scenario.includes('backlog')) {
    for (const schedule of ['fixed', 'adaptive'] as const) {
      log(`client only: ${options.backlogTasks} tasks, ${options.threads} threads, ${schedule} schedule…`);
      const run = await runClientOnly({ ...backlogRun, schedule });
      backlog.push(clientFigures(schedule, options.backlogTasks, options.threads, run));
    }
    backlog.push(await governedOnStack());
    log(`stack: ${options.backlogTasks} tasks, ${options.threads} threads, governor on, fixed schedule…`);
    const fixedRun = await runOnStack({
      ...backlogRun,
      batchSize: 1,
      rate: 0,
      tickMs: options.tickMs,
      timeoutMs,
      schedule: 'fixed',
    });
    backlog.push(
      stackFigures(
        'stack, governor, fixed schedule',
        `governor (plan ${options.threads}), fixed schedule`,
        options.backlogTasks,
        options.threads,
        fixedRun,
        'fixed',
      ),
    );
  }
  if (options.scenario.includes('governor')) {
    governor.push(await governedOnStack());
    log(`stack: ${options.backlogTasks} tasks, ${options.threads} threads, --concurrency ${options.threads}…`);
    const run = await runOnStack({ ...backlogRun, batchSize: 1, rate: 0, concurrency: options.threads, timeoutMs });
    governor.push(
      stackFigures('stack, fixed', `--concurrency ${options.threads}`, options.backlogTasks, options.threads, run),
    );
  }
  const { json: _json, ...shown } = options;
  return { machine, options: shown, instant, backlog, governor, wallMs: Date.now() - began };
}

function instantFigures(label: string, batchSize: number, tasks: number, run: StackRunResult): InstantFigures {
  // Narrowed once here, so the figures below read the two timestamps without assertions.
  const finished = run.results.flatMap((r) =>
    r.completedAt !== undefined && r.submittedAt !== undefined
      ? [{ ...r, completedAt: r.completedAt, submittedAt: r.submittedAt }]
      : [],
  );
  const solveMs = (r: (typeof finished)[number]) => r.solveMs ?? 0;
  const durationMs = run.finishedAt - run.startedAt;
  return {
    label,
    batchSize,
    tasks,
    terminal: run.terminal,
    throughput: run.terminal / (durationMs / 1000),
    durationMs,
    overheadP50Ms: percentile(
      finished.map((r) => r.completedAt - r.submittedAt - solveMs(r)),
      0.5,
    ),
    overheadP95Ms: percentile(
      finished.map((r) => r.completedAt - r.submittedAt - solveMs(r)),
      0.95,
    ),
    queueWaitP95Ms: percentile(
      finished.flatMap((r) => (r.queueWaitMs !== undefined ? [r.queueWaitMs] : [])),
      0.95,
    ),
    inInvocationP95Ms: percentile(
      finished.flatMap((r) => (r.startedAt !== undefined ? [r.completedAt - r.startedAt - solveMs(r)] : [])),
      0.95,
    ),
    solveP95Ms: percentile(finished.map(solveMs), 0.95),
    peakInvocations: run.peakInvocations,
  };
}

/** What the simulator's counters say of a run, the same for stack and client runs. */
function simulatorFigures(sim: StackRunResult['sim']) {
  return {
    resultRequestsPerTask: sim.accepted > 0 ? sim.resultRequests / sim.accepted : undefined,
    meanAnswerWaitMs: sim.meanAnswerWaitMs,
    maxAnswerWaitMs: sim.maxAnswerWaitMs,
    overCapRejections: sim.overCapRejections,
    peakThreads: sim.peakThreads,
  };
}

function stackFigures(
  label: string,
  ceiling: string,
  tasks: number,
  planThreads: number,
  run: StackRunResult,
  schedule: ScheduleKind = 'adaptive',
): BacklogFigures {
  return {
    label,
    schedule,
    where: 'local stack',
    ceiling,
    tasks,
    completed: run.terminal,
    utilization: utilizationReport({
      planThreads,
      startedAt: run.startedAt,
      intervals: run.intervals,
      samples: run.samples,
    }),
    ...simulatorFigures(run.sim),
    peakInvocations: run.peakInvocations,
    durationMs: run.finishedAt - run.startedAt,
    governor: run.governor
      ? {
          maxCeiling: run.governor.maxCeiling,
          startCeiling: run.governor.startCeiling,
          reasons: run.governor.reasons as Record<string, number>,
        }
      : undefined,
  };
}

function clientFigures(
  schedule: ScheduleKind,
  tasks: number,
  planThreads: number,
  run: ClientRunResult,
): BacklogFigures {
  return {
    label: `client, ${schedule}`,
    schedule,
    where: 'client+simulator',
    ceiling: `${planThreads} workers`,
    tasks,
    completed: run.solved,
    utilization: utilizationReport({
      planThreads,
      startedAt: run.startedAt,
      intervals: run.intervals,
      samples: run.samples,
    }),
    ...simulatorFigures(run.sim),
    peakInvocations: undefined,
    durationMs: run.finishedAt - run.startedAt,
  };
}

// ---------------------------------------------------------------------------------------------
// The table

const ms = (v: number | null | undefined) => (v === undefined || v === null ? '–' : `${Math.round(v)} ms`);
const pct = (v: number | undefined) => (v === undefined ? '–' : `${(v * 100).toFixed(1)} %`);
const num = (v: number | undefined, digits = 1) => (v === undefined ? '–' : v.toFixed(digits));

function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) =>
    widths.map((width, c) => (c === 0 ? (cells[c] ?? '').padEnd(width) : (cells[c] ?? '').padStart(width))).join('  ');
  return [line(header), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}

function formatReport(out: BenchOutput): string {
  const m = out.machine;
  const parts = [
    `Machine: ${m.cpus} CPUs (${m.cpuModel}), ${m.memoryGiB} GiB, Node ${m.node}, ${m.platform}, load ${m.loadAverage1m} at start`,
    `Seed ${out.options.seed}; whole run ${(out.wallMs / 1000).toFixed(1)} s.`,
  ];
  if (out.instant.length > 0) {
    parts.push(
      '',
      `1. Instant simulator (answers ready at once; ${out.options.instantThreads} plan threads, governor on; overhead = end-to-end − solve)`,
      table(
        [
          'run',
          'tasks',
          'done',
          'tasks/s',
          'overhead p50',
          'overhead p95',
          'queued p95',
          'in invocation p95',
          'solve p95',
          'peak invocations',
        ],
        out.instant.map((r) => [
          r.label,
          `${r.tasks}`,
          `${r.terminal}`,
          num(r.throughput),
          ms(r.overheadP50Ms),
          ms(r.overheadP95Ms),
          ms(r.queueWaitP95Ms),
          ms(r.inInvocationP95Ms),
          ms(r.solveP95Ms),
          `${r.peakInvocations}`,
        ]),
      ),
    );
  }
  const backlogHeader = [
    'run',
    'ceiling',
    'done',
    'utilization',
    'formula',
    'steady',
    'whole run',
    'ramp-up',
    'tail',
    'requests/task',
    'answer wait mean / max',
    'over-cap',
    'peak threads',
  ];
  const backlogRow = (r: BacklogFigures) => [
    r.label,
    r.ceiling,
    `${r.completed}/${r.tasks}`,
    pct(r.utilization?.utilization),
    pct(r.utilization?.formulaUtilization),
    pct(r.utilization?.steadyUtilization),
    pct(r.utilization?.runUtilization),
    ms(r.utilization?.rampUpMs),
    ms(r.utilization?.tailMs),
    num(r.resultRequestsPerTask),
    `${ms(r.meanAnswerWaitMs)} / ${ms(r.maxAnswerWaitMs)}`,
    `${r.overCapRejections}`,
    `${r.peakThreads}`,
  ];
  const lossHeader = [
    'run',
    'threads used',
    'poll wait',
    'invocation overhead',
    'unfilled slots',
    'ceiling full after',
    'solves/s',
    'mean solve',
    'backlog lasted',
  ];
  const perTask = (v: number | undefined) => (v === undefined ? '' : ` (${Math.round(v)} ms/task)`);
  const lossRow = (r: BacklogFigures) => [
    r.label,
    pct(r.utilization?.loss.used),
    `${pct(r.utilization?.loss.pollWait)}${perTask(r.utilization?.loss.pollWaitPerTaskMs)}`,
    `${pct(r.utilization?.loss.overhead)}${perTask(r.utilization?.loss.overheadPerTaskMs)}`,
    pct(r.utilization?.loss.unfilledSlots),
    ms(r.utilization?.ceilingFullMs),
    num(r.utilization?.solvesPerSecond),
    ms(r.utilization?.meanSolveMs),
    ms(r.utilization?.backlogMs),
  ];
  const backlogParams = `${out.options.backlogTasks} tasks at once, ${out.options.threads} plan threads, median solve ${out.options.medianMs} ms (log-normal σ 0.35)`;
  if (out.backlog.length > 0) {
    parts.push(
      '',
      `2. Backlog: ${backlogParams}; fixed vs adaptive poll schedule`,
      table(backlogHeader, out.backlog.map(backlogRow)),
      '',
      "   Where the plan's thread-time went while the backlog lasted (shares of plan threads × backlog time):",
      table(lossHeader, out.backlog.map(lossRow)),
    );
  }
  if (out.governor.length > 0) {
    parts.push(
      '',
      `3. Governor vs a fixed --concurrency at the cap: ${backlogParams}`,
      table(
        [...backlogHeader, 'peak invocations', 'governor'],
        out.governor.map((r) => [...backlogRow(r), `${r.peakInvocations ?? '–'}`, governorSummary(r)]),
      ),
      '',
      table(lossHeader, out.governor.map(lossRow)),
    );
  }
  return `${parts.join('\n')}\n`;
}

function governorSummary(r: BacklogFigures): string {
  if (!r.governor) return 'off';
  const reasons = Object.entries(r.governor.reasons)
    .map(([code, n]) => `${code} ${n}`)
    .join(', ');
  return `ceiling ${r.governor.startCeiling ?? '–'} → max ${r.governor.maxCeiling ?? '–'}; ${reasons}`;
}

// ---------------------------------------------------------------------------------------------
// Flags

function parseScenarios(value: string): Scenario[] {
  const names = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = names.filter((n) => !(SCENARIOS as readonly string[]).includes(n));
  if (names.length === 0 || unknown.length > 0)
    throw new InvalidArgumentError(
      `unknown scenario(s) ${unknown.join(', ') || '(none)'}; choose from ${SCENARIOS.join(', ')}`,
    );
  return names as Scenario[];
}

function parseBatchSizes(value: string): number[] {
  const sizes = value.split(',').map((s) => Number(s.trim()));
  if (sizes.length === 0 || sizes.some((n) => !Number.isInteger(n) || n < 1 || n > 10))
    throw new InvalidArgumentError(`expected batch sizes 1-10, comma-separated, got "${value}"`);
  return sizes;
}

await program.parseAsync();
