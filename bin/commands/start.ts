/**
 * `captcha-fleet start` (`npm start`): the whole pipeline on this machine — emulators (or an
 * AWS-compatible endpoint), the solver simulator, the consumer handler behind local event
 * source mappings — then a demo workload, live progress and a summary.
 *
 * This file is the orchestration; one concern a module under start/: the flags (options.ts),
 * the first lines (banner.ts), the progress line (progress.ts), the summary table
 * (summary-format.ts), the verdict and exit code (verdict.ts) and `--serve` (serve.ts).
 */
import type { Command } from 'commander';
import type { FleetConfig, FleetSettings } from '../../functions/core/settings.js';
import { ConfigError, resolveSettings } from '../../functions/core/settings.js';
import type { TickRecord } from '../../functions/governor/loop.js';
import { buildWorkload, newRunId, runDemo } from '../../local/demo.js';
import { type LocalStack, startLocalStack } from '../../local/runtime.js';
import {
  assertStackFileWritable,
  LocalStackConflictError,
  liveLocalStack,
  stackFilePath,
} from '../../local/stack-file.js';
import { faultPlanEndMs } from '../../local/faults/plan.js';
import { faultPlanOf } from './start-faults.js';
import {
  OVERFLOW_START_OPTIONS,
  overflowConfigOf,
  overflowMedianMs,
  overflowSimOf,
  strayOverflowFlags,
} from './start-overflow.js';
import { describeStack } from './start/banner.js';
import { runLimits, START_OPTIONS, scheduledOutagesEndMs, type StartOptions, startCommand } from './start/options.js';
import { progressPrinter } from './start/progress.js';
import { serveStack } from './start/serve.js';
import { type SyncAnswerLane, syncAnswerProblem } from './start/sync-answers.js';
import { formatSummary } from './start/summary-format.js';
import { verdictOf } from './start/verdict.js';

export { START_OPTIONS, type StartOptions };

/** Add `start` to the program (with the program's settings: exit override, output, …). */
export function register(program: Command): void {
  const command = startCommand();
  command.copyInheritedSettings(program as unknown as Parameters<typeof command.copyInheritedSettings>[0]);
  program.addCommand(command as unknown as Command);
  command.action(async (options) => {
    if (options.malformed !== undefined && options.malformed > options.tasks)
      command.error(`error: --malformed ${options.malformed} is more than --tasks ${options.tasks}`, { exitCode: 2 });
    const stray = strayOverflowFlags(options, (key) => command.getOptionValueSource(key));
    if (stray.length > 0)
      command.error(
        `error: ${stray.map((key) => OVERFLOW_START_OPTIONS[key].long).join(', ')} only mean${stray.length === 1 ? 's' : ''} something with --overflow-sim: add it, or drop ${stray.length === 1 ? 'that flag' : 'those flags'}`,
        { exitCode: 2 },
      );
    const ungoverned = governorFlagsWithoutGovernor(options, (key) => command.getOptionValueSource(key));
    if (ungoverned.length > 0)
      command.error(
        `error: ${ungoverned.map((key) => START_OPTIONS[key].long).join(', ')} only mean${ungoverned.length === 1 ? 's' : ''} something to the governor, and --concurrency turns it off: drop --concurrency, or ${ungoverned.length === 1 ? 'that flag' : 'those flags'}`,
        { exitCode: 2 },
      );
    if (options.overflowSim && options.concurrency !== undefined)
      command.error(
        'error: --overflow-sim needs the governor to open its lane, and --concurrency turns the governor off: drop one',
        { exitCode: 2 },
      );
    let settings: FleetSettings;
    try {
      settings = resolveSettings(fleetConfigOf(options));
    } catch (error) {
      // Flags that are fine one by one but not together (reserved ≥ plan threads, pause above halt, …).
      if (error instanceof ConfigError) command.error(`error: ${inFlags(error.message)}`, { exitCode: 2 });
      throw error;
    }
    const window = syncAnswerProblemOf(options, settings);
    if (window !== undefined) command.error(`error: ${window}`, { exitCode: 2 });
    // Before, the stack came up, sent nothing and ended without a summary (with --json, an empty stdout).
    if (options.tasks === 0 && !options.serve)
      command.error(
        'error: --tasks 0 sends no task, so this run would do nothing: give --tasks N for the demo, or add --serve to keep the stack up for your own producers',
        { exitCode: 2 },
      );
    process.exitCode = await runStart(options);
  });
}

/**
 * The governor's flags (their help begins `governor:`) given on the command line beside
 * `--concurrency`, which turns the governor off: before, each was ignored without a word.
 */
export function governorFlagsWithoutGovernor(
  options: StartOptions,
  sourceOf: (key: keyof typeof START_OPTIONS) => string | undefined,
): (keyof typeof START_OPTIONS)[] {
  if (options.concurrency === undefined) return [];
  const keys = Object.keys(START_OPTIONS) as (keyof typeof START_OPTIONS)[];
  return keys.filter((key) => START_OPTIONS[key].description.startsWith('governor:') && sourceOf(key) === 'cli');
}

/**
 * The flags that set each configuration key `fleetConfigOf` writes (the overflow block's first,
 * so `overflow.dialect` is not read as `dialect`).
 */
const FLAG_OF_CONFIG_KEY: Readonly<Record<string, string>> = {
  'overflow.capUsdPerHour': '--overflow-cap-hour',
  'overflow.capUsdPerDay': '--overflow-cap-day',
  'overflow.priceHintUsd': '--overflow-price-hint',
  'overflow.latencyTargetSeconds': '--overflow-target',
  'overflow.maxConcurrency': '--overflow-max-concurrency',
  'overflow.solverProtocol': '--overflow-protocol',
  'overflow.dialect': '--overflow-dialect',
  planThreads: '--solver-threads (or --plan-threads)',
  reservedThreads: '--reserved-threads',
  tasksPerInvocation: '--batch-size',
  haltBalance: '--halt-balance',
  pauseBalance: '--pause-balance',
  tickMs: '--tick-ms',
  solveMode: '--solve-mode',
  solverProtocol: '--solver-protocol',
  dialect: '--solver-dialect',
};
const CONFIG_KEY = new RegExp(
  `(?<![\\w.-])(${Object.keys(FLAG_OF_CONFIG_KEY)
    .map((key) => key.replace('.', '\\.'))
    .join('|')})(?![\\w])`,
  'g',
);

/**
 * A configuration error in the flags' words: `start` is told flags, not configuration keys (a fix
 * read "raise planThreads to at least 2" to someone who had typed --solver-threads 1).
 */
export function inFlags(message: string): string {
  return message.replace(CONFIG_KEY, (key) => FLAG_OF_CONFIG_KEY[key] ?? key);
}

/** Whether a lane's provider answers images in its submission's response with too little of an invocation to wait for them (start/sync-answers.ts). */
function syncAnswerProblemOf(options: StartOptions, settings: FleetSettings): string | undefined {
  const lanes: SyncAnswerLane[] = [
    {
      dialectFlag: `--solver-dialect ${settings.dialect}`,
      dialect: settings.dialect,
      latencyFlag: '--solver-latency-ms',
      medianMs: options.solverLatencyMs,
    },
  ];
  if (settings.overflow !== undefined)
    lanes.push({
      dialectFlag: `--overflow-dialect ${settings.overflow.dialect}`,
      dialect: settings.overflow.dialect,
      latencyFlag: '--overflow-latency-ms',
      medianMs: overflowMedianMs(options),
    });
  for (const lane of lanes) {
    const problem = syncAnswerProblem(lane, options.visibilityTimeout);
    if (problem !== undefined) return problem;
  }
  return undefined;
}

/** The fleet configuration the flags describe (what the stack would be given). */
export function fleetConfigOf(options: StartOptions): FleetConfig {
  return {
    dialect: options.solverDialect ?? (options.solverProtocol === 'create-task' ? '2captcha' : 'captchaai'),
    solverProtocol: options.solverProtocol,
    planThreads: options.planThreads ?? options.solverThreads,
    reservedThreads: options.reservedThreads,
    tasksPerInvocation: options.batchSize,
    solveMode: options.solveMode,
    haltBalance: options.haltBalance,
    pauseBalance: options.pauseBalance,
    tickMs: options.tickMs,
    ...(options.overflowSim ? { overflow: overflowConfigOf(options) } : {}),
  };
}

/** Run `start` with parsed options; resolves to the exit code. Exported for in-process tests. */
export async function runStart(
  options: StartOptions,
  io: { stdout?: NodeJS.WriteStream; stderr?: NodeJS.WriteStream } = {},
): Promise<number> {
  const stdout = io.stdout ?? process.stdout;
  const stderr = io.stderr ?? process.stderr;
  // A second server of one fleet would fail only when it writes its stack file, after its whole demo.
  const servedFile = stackFilePath(resolveSettings(fleetConfigOf(options)).prefix);
  const serving = options.serve ? liveLocalStack(servedFile) : undefined;
  if (serving !== undefined) throw new LocalStackConflictError(serving, servedFile);
  if (options.serve) assertStackFileWritable(servedFile);
  // With --json, stdout carries only the JSON line; people read stderr.
  const human = options.json ? stderr : stdout;
  const interrupt = new AbortController();
  const onSignal = () => interrupt.abort();
  // `on`, not `once`: Ctrl-C reaches this process from the terminal and again from a parent
  // that forwards it (npm, tsx); a second signal must not find the default handler (exit 130).
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let stack: LocalStack | undefined;
  const faults = options.faults ? faultPlanOf(options.faults, options.seed) : undefined;
  const limits = runLimits(options, scheduledOutagesEndMs(options, faults ? faultPlanEndMs(faults) : 0));
  let lastTick: TickRecord | undefined;
  try {
    stack = await startLocalStack({
      ...(options.endpoint ? { endpoint: options.endpoint } : {}),
      config: fleetConfigOf(options),
      governor: { tickMs: options.tickMs, onDecision: (record) => (lastTick = record) },
      visibilityTimeoutSeconds: options.visibilityTimeout,
      ...(options.concurrency !== undefined ? { concurrency: options.concurrency } : {}),
      crashRate: options.crashRate,
      seed: options.seed,
      logLevel: options.logLevel,
      solver: {
        seed: options.seed,
        planThreads: options.solverThreads,
        foreignThreads: options.solverForeignThreads,
        balance: options.solverBalance,
        pricePerSolve: options.solverPrice,
        transientErrorRate: options.solverErrorRate,
        unsolvableRate: options.solverUnsolvableRate,
        medianMs: options.solverLatencyMs,
        badKey: options.solverBadKey,
        outages: [...options.solverOutage],
      },
      ...(options.overflowSim ? { overflowSolver: { seed: options.seed + 1, ...overflowSimOf(options) } } : {}),
      ...(faults ? { faults } : {}),
    });
    human.write(describeStack(stack, options));

    let code = 0;
    if (options.tasks > 0) {
      const items = buildWorkload({
        tasks: options.tasks,
        malformed: options.malformed ?? Math.min(3, Math.floor(options.tasks / 20)),
        seed: options.seed,
        highShare: options.highShare,
        runId: newRunId(),
      });
      const progress = progressPrinter(stderr, options.tasks);
      const summary = await runDemo(stack, items, {
        rate: options.rate,
        ...limits,
        onProgress: progress.update,
        signal: interrupt.signal,
      });
      progress.done();
      human.write(formatSummary(summary));
      const verdict = verdictOf(summary, options, limits.maxDurationMs);
      human.write(`${verdict.message}\n`);
      code = verdict.code;
      // The `--json` object is the summary itself: one type, `DemoSummary`.
      if (options.json) stdout.write(`${JSON.stringify(summary)}\n`);
    }

    if (options.serve && !interrupt.signal.aborted)
      await serveStack(stack, () => lastTick, interrupt.signal, { human, stderr });
    // Ctrl-C ends a serving stack normally; otherwise it is an interrupted run.
    return interrupt.signal.aborted && !options.serve ? 130 : code;
  } finally {
    await stack?.stop({ graceMs: 2_000 });
    // After a stop request the handler stays until exit: npm forwards the Ctrl-C the terminal
    // already sent, and that late copy must not find the default handler (exit 130).
    if (!interrupt.signal.aborted) {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  }
}
