/**
 * `captcha-fleet start` (`npm start`): the whole pipeline on this machine — emulators (or an
 * AWS-compatible endpoint), the solver simulator, the consumer handler behind local event
 * source mappings — then a demo workload, live progress and a summary.
 *
 * Options are one table (`START_OPTIONS`); `StartOptions` is derived from it, so a new flag is
 * one row there.
 */
import { type Command, InvalidArgumentError, Option } from 'commander';
import { buildWorkload, newRunId, runDemo, type DemoProgress, type DemoSummary } from '../../local/demo.js';
import { ConfigError, resolveSettings, type FleetConfig } from '../../functions/core/settings.js';
import { DIALECTS, SOLVER_PROTOCOLS } from '../../functions/core/solver-protocol.js';
import { describeFaultPlan } from '../../local/faults/plan.js';
import { LOG_LEVELS, startLocalStack, type LocalStack } from '../../local/runtime.js';
import {
  LocalStackConflictError,
  liveLocalStack,
  removeLocalStackFile,
  stackFilePath,
  writeLocalStackFile,
} from '../../local/stack-file.js';
import { startControlServer } from '../../local/control-server.js';
import type { TickRecord } from '../../functions/governor/loop.js';
import { decimal, integer, type OptionRow, outageWindow } from './option-rows.js';
import { FAULT_START_OPTIONS, faultPlanOf, faultRows } from './start-faults.js';
import { OVERFLOW_START_OPTIONS, overflowConfigOf, overflowSimOf, strayOverflowFlags } from './start-overflow.js';

/** --max-duration when not given, s. */
const DEFAULT_MAX_DURATION_S = 120;
/** Governor ticks paused with nothing in flight before a run without --max-duration stops. */
const PAUSED_TICKS_BEFORE_STOP = 3;

const url = (value: string) => {
  try {
    const parsed = new URL(value);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') throw new Error('not http');
    return value.replace(/\/+$/, '');
  } catch {
    throw new InvalidArgumentError('expected an http(s) URL such as http://127.0.0.1:5000.');
  }
};

/** The flags of `start`. Governor flags (--plan-threads, --reserved-threads, …) join here. */
export const START_OPTIONS = {
  tasks: {
    arg: 'n',
    description: 'tasks in the demo workload (0 = none, e.g. with --serve)',
    parse: integer(0, 100_000),
    default: 200,
  },
  malformed: {
    arg: 'n',
    description: 'of those, malformed on purpose, to show the DLQ path (default: 1 in 20, at most 3)',
    parse: integer(0, 100_000),
  },
  highShare: {
    arg: 'p',
    description: 'share of the demo tasks sent with priority "high" (they travel on the high lane)',
    parse: decimal(0, 1, 'a share'),
    default: 0.1,
  },
  rate: {
    arg: 'r',
    description: 'tasks per second; 0 sends them all at once (a burst)',
    parse: decimal(0, 10_000),
    default: 0,
  },
  concurrency: {
    arg: 'c',
    description:
      'fixed ceiling: invocations at once per lane and in total; turns the governor off (default: the governor decides)',
    parse: integer(1, 1000),
  },
  batchSize: {
    arg: 'n',
    description: 'tasks per invocation (SQS batch size)',
    parse: integer(1, 10),
    default: 1,
  },
  seed: {
    arg: 's',
    description: 'seed of the workload, the simulator and the chaos',
    parse: integer(0, 2 ** 31 - 1),
    default: 1,
  },
  solverThreads: {
    arg: 'n',
    description: "threads of the simulated solver plan (the fleet's planThreads)",
    parse: integer(1, 10_000),
    default: 20,
  },
  solverForeignThreads: {
    arg: 'n',
    description: 'threads other users of the key hold (the fleet does not know)',
    parse: integer(0, 10_000),
    default: 0,
  },
  solverBalance: {
    arg: 'usd',
    description: 'starting balance of the simulated account, USD',
    parse: decimal(0, 1_000_000),
    default: 10,
  },
  solverPrice: {
    arg: 'usd',
    description: 'price of one solve, USD',
    parse: decimal(0, 100),
    default: 0.001,
  },
  solverErrorRate: {
    arg: 'p',
    description: 'share of solver requests answered with a transient error',
    parse: decimal(0, 0.9, 'a share'),
    default: 0.005,
  },
  solverUnsolvableRate: {
    arg: 'p',
    description: 'share of captchas the solver cannot solve (resubmitted, then failed)',
    parse: decimal(0, 1, 'a share'),
    default: 0.01,
  },
  solverLatencyMs: {
    arg: 'ms',
    description: 'median solve time of the simulator, ms',
    parse: integer(0, 600_000),
    default: 400,
  },
  solverOutage: {
    arg: 'start:duration',
    description: 'the solver is down (HTTP 503 everywhere) from START for DURATION seconds after it starts; repeatable',
    parse: outageWindow,
    default: [],
  },
  solverBadKey: {
    description: 'the solver rejects the key (account error: tasks stay queued)',
    default: false,
  },
  solverProtocol: {
    arg: 'protocol',
    description:
      'the wire protocol to the solver: res-php (in.php / res.php) or create-task (the JSON task API: createTask / getTaskResult)',
    choices: SOLVER_PROTOCOLS,
    default: 'res-php',
  },
  solverDialect: {
    arg: 'name',
    description:
      'whose spellings and codes the solver speaks (default: captchaai with res-php, 2captcha with create-task; anti-captcha, capmonster and capsolver speak create-task only)',
    choices: DIALECTS,
  },
  crashRate: {
    arg: 'p',
    description: 'share of invocations that die after solving, before recording (tasks must still end solved once)',
    parse: decimal(0, 0.9, 'a share'),
    default: 0,
  },
  visibilityTimeout: {
    arg: 's',
    description: 'queue visibility timeout, s; the local function timeout is 1 s less (crashed tasks return after it)',
    parse: integer(2, 900),
    default: 12,
  },
  planThreads: {
    arg: 'n',
    description: 'governor: threads the fleet believes its plan has (default: --solver-threads)',
    parse: integer(1, 10_000),
  },
  reservedThreads: {
    arg: 'n',
    description: 'governor: threads kept free for other users of the key',
    parse: integer(0, 10_000),
    default: 0,
  },
  haltBalance: {
    arg: 'usd',
    description: 'governor: under this balance, no scaling up',
    parse: decimal(0, 1_000_000),
    default: 1,
  },
  pauseBalance: {
    arg: 'usd',
    description: 'governor: under this balance, consumption pauses (tasks wait in the queue)',
    parse: decimal(0, 1_000_000),
    default: 0.1,
  },
  tickMs: {
    arg: 'ms',
    description: 'governor: time between decisions, ms (10000 in AWS)',
    parse: integer(100, 60_000),
    default: 1_000,
  },
  endpoint: {
    arg: 'url',
    description:
      'use this AWS-compatible endpoint for SQS and DynamoDB instead of the embedded emulators (default: AWS_ENDPOINT_URL)',
    parse: url,
  },
  serve: {
    description: 'keep running after the workload: print endpoints, queue URLs and example producer commands',
    default: false,
  },
  maxDuration: {
    arg: 's',
    description: `end the run after this many seconds at the latest (default: ${DEFAULT_MAX_DURATION_S}; without it, a run the governor keeps paused with no invocation running ends after ${PAUSED_TICKS_BEFORE_STOP} ticks)`,
    parse: decimal(1, 86_400, 'seconds'),
  },
  json: { description: 'print the summary as one JSON object on the last stdout line', default: false },
  logLevel: {
    arg: 'level',
    description: "the consumer's log level (its JSON logs go to stdout)",
    choices: LOG_LEVELS,
    default: 'silent',
  },
  ...OVERFLOW_START_OPTIONS,
  ...FAULT_START_OPTIONS,
} as const satisfies Record<string, OptionRow>;

type RowValue<R> = R extends { parse: (value: string, previous: never) => infer T }
  ? T
  : R extends { choices: readonly (infer C)[] }
    ? C
    : boolean;
type Table = typeof START_OPTIONS;
type WithDefault = { [K in keyof Table]: Table[K] extends { default: unknown } ? K : never }[keyof Table];

/** Every flag of `start`, parsed and range-checked: derived from `START_OPTIONS`. */
export type StartOptions = { [K in WithDefault]: RowValue<Table[K]> } & {
  [K in Exclude<keyof Table, WithDefault>]?: RowValue<Table[K]>;
};

/** `solverBadKey` → `--solver-bad-key`. */
function flagOf(key: string, row: OptionRow): string {
  const name = key.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`);
  return `--${name}${row.arg ? ` <${row.arg}>` : ''}`;
}

/** Add `start` to the program. */
export function register(program: Command): void {
  const command = program
    .command('start')
    .description('run the whole fleet locally (emulators + solver simulator) with a demo workload');
  for (const [key, row] of Object.entries(START_OPTIONS) as [string, OptionRow][]) {
    const option = new Option(flagOf(key, row), row.description);
    if (row.parse) option.argParser(row.parse as (value: string, previous: unknown) => unknown);
    if (row.choices) option.choices(row.choices);
    if (row.default !== undefined) option.default(row.default);
    command.addOption(option);
  }
  command.action(async (options: StartOptions) => {
    if (options.malformed !== undefined && options.malformed > options.tasks)
      command.error(`error: --malformed ${options.malformed} is more than --tasks ${options.tasks}`, { exitCode: 2 });
    const stray = strayOverflowFlags(options, (key) => command.getOptionValueSource(key));
    if (stray.length > 0)
      command.error(
        `error: ${stray.map((key) => flagOf(key, {} as OptionRow)).join(', ')} only mean${stray.length === 1 ? 's' : ''} something with --overflow-sim: add it, or drop ${stray.length === 1 ? 'that flag' : 'those flags'}`,
        { exitCode: 2 },
      );
    if (options.overflowSim && options.concurrency !== undefined)
      command.error(
        'error: --overflow-sim needs the governor to open its lane, and --concurrency turns the governor off: drop one',
        { exitCode: 2 },
      );
    try {
      resolveSettings(fleetConfigOf(options));
    } catch (error) {
      // Flags that are fine one by one but not together (reserved ≥ plan threads, pause above halt, …).
      if (error instanceof ConfigError) command.error(`error: ${error.message}`, { exitCode: 2 });
      throw error;
    }
    process.exitCode = await runStart(options);
  });
}

/** The fleet configuration the flags describe (what the stack would be given). */
export function fleetConfigOf(options: StartOptions): FleetConfig {
  return {
    dialect: options.solverDialect ?? (options.solverProtocol === 'create-task' ? '2captcha' : 'captchaai'),
    solverProtocol: options.solverProtocol,
    planThreads: options.planThreads ?? options.solverThreads,
    reservedThreads: options.reservedThreads,
    tasksPerInvocation: options.batchSize,
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
  // With --json, stdout carries only the JSON line; people read stderr.
  const human = options.json ? stderr : stdout;
  const interrupt = new AbortController();
  const onSignal = () => interrupt.abort();
  // `on`, not `once`: Ctrl-C reaches this process from the terminal and again from a parent
  // that forwards it (npm, tsx); a second signal must not find the default handler (exit 130).
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  let stack: LocalStack | undefined;
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
        outages: options.solverOutage,
      },
      ...(options.overflowSim ? { overflowSolver: { seed: options.seed + 1, ...overflowSimOf(options) } } : {}),
      ...(options.faults ? { faults: faultPlanOf(options.faults, options.seed) } : {}),
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
        maxDurationMs: (options.maxDuration ?? DEFAULT_MAX_DURATION_S) * 1000,
        ...(options.maxDuration === undefined ? { stopWhenPausedMs: pausedStopMs(options) } : {}),
        onProgress: progress.update,
        signal: interrupt.signal,
      });
      progress.done();
      human.write(formatSummary(summary));
      const verdict = verdictOf(summary, options);
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

/** Write the stack file (with the control URL for `governor --once --local`) and serve until a stop. */
async function serveStack(
  stack: LocalStack,
  latestTick: () => TickRecord | undefined,
  signal: AbortSignal,
  io: { human: NodeJS.WriteStream; stderr: NodeJS.WriteStream },
): Promise<void> {
  const control = await startControlServer(stack.governor, latestTick);
  const file = writeLocalStackFile({
    version: 1,
    pid: process.pid,
    startedAt: Date.now(),
    prefix: stack.settings.prefix,
    sqsEndpoint: stack.endpoints.sqs,
    dynamoEndpoint: stack.endpoints.dynamo,
    solverUrl: stack.endpoints.solver,
    controlUrl: control.url,
    queueUrls: stack.resources.queueUrls,
    reportsQueueUrl: stack.resources.reportQueueUrls.reports,
    tables: stack.resources.tables,
  });
  io.human.write(serveInstructions(stack, file));
  try {
    await serveUntil(stack, signal, io.stderr);
  } finally {
    removeLocalStackFile(file);
    await control.close();
  }
}

function describeStack(stack: LocalStack, options: StartOptions): string {
  const where = stack.endpoints.external
    ? `endpoint ${stack.endpoints.sqs}`
    : `embedded emulators (SQS ${stack.endpoints.sqs}, DynamoDB ${stack.endpoints.dynamo})`;
  return (
    `captcha-fleet local: ${where}; solver simulator ${stack.endpoints.solver} ` +
    `(${stack.settings.solverProtocol} as ${stack.settings.dialect}, ${options.solverThreads} threads${options.solverForeignThreads ? `, ${options.solverForeignThreads} held by others` : ''}, median ${options.solverLatencyMs} ms)\n` +
    `  ${stack.governor ? `governor every ${options.tickMs} ms (plan ${stack.settings.planThreads}, reserved ${stack.settings.reservedThreads}, halt $${stack.settings.haltBalance}, pause $${stack.settings.pauseBalance})` : `fixed ceiling ${stack.pool.limit}`}` +
    ` · ${stack.settings.tasksPerInvocation} task(s) per invocation; function timeout ${stack.functionTimeoutMs / 1000} s; ` +
    `visibility ${stack.settings.visibilityTimeoutSeconds} s; DLQ after ${stack.settings.maxReceiveCount} receives` +
    `${options.crashRate > 0 ? `; crash rate ${options.crashRate}` : ''}\n` +
    (stack.faults ? `  fault proxy ${stack.faults.url}: ${describeFaultPlan(stack.faults.plan)}\n` : '') +
    describeOverflow(stack)
  );
}

function describeOverflow(stack: LocalStack): string {
  const overflow = stack.overflow;
  if (overflow === undefined) return '';
  const o = overflow.settings;
  const sim = overflow.simulator.options();
  return (
    `  overflow simulator ${overflow.settings.baseUrl} ($${sim.pricePerSolve} a solve, ${sim.planThreads} threads, balance $${sim.balance}): ` +
    `opens when the backlog cannot drain within ${o.latencyTargetSeconds} s; caps $${o.capUsdPerHour}/hour, $${o.capUsdPerDay}/day; ` +
    `lane up to ${o.maxConcurrency} invocations (${o.probeCeiling} until a price is learned; told $${o.priceHintUsd} a solve)\n`
  );
}

/** One redrawn line on a TTY; a line every 2 s otherwise (logs stay readable). */
function progressPrinter(stream: NodeJS.WriteStream, total: number) {
  const tty = stream.isTTY === true;
  let lastLine = 0;
  let drawn = false;
  // Per lane: backlog (visible) / in flight (received, not yet deleted) / ceiling ("off" while the
  // lane's mapping is disabled); waiting (delayed) only when there is any. Words: docs/local.md.
  const lane = (name: string, l: DemoProgress['lanes']['high']) =>
    `${name} ${l.backlog}/${l.inFlight}/${l.ceiling === 0 ? 'off' : l.ceiling}`;
  const line = (p: DemoProgress) =>
    `[${(p.elapsedMs / 1000).toFixed(1).padStart(5)}s] sent ${p.submitted}/${total} · ${lane('high', p.lanes.high)} · ${lane('normal', p.lanes.normal)} (backlog/in flight/ceiling) · ` +
    `solved ${p.solved} · failed ${p.failed} · rejected ${p.rejected} · DLQ ${p.dlqDepth} · p95 ${p.p95Ms === undefined ? '–' : `${Math.round(p.p95Ms)} ms`} · ` +
    `ceiling ${p.ceiling}${p.governorReason ? ` (${p.governorReason})` : ''}` +
    `${p.overflow ? ` · overflow ${p.overflow.inFlight}/${p.overflow.ceiling === 0 ? 'off' : p.overflow.ceiling} solved ${p.overflow.solved}` : ''}` +
    `${waiting(p) ? ` · waiting ${waiting(p)}` : ''}${p.unknown ? ` · unknown status ${p.unknown}` : ''}`;
  const waiting = (p: DemoProgress) => p.lanes.high.waiting + p.lanes.normal.waiting;
  return {
    update(p: DemoProgress) {
      if (tty) {
        stream.write(`\r\x1b[2K${line(p)}`);
        drawn = true;
      } else if (p.elapsedMs - lastLine >= 2_000 || lastLine === 0) {
        stream.write(`${line(p)}\n`);
        lastLine = Math.max(1, p.elapsedMs);
      }
    },
    done() {
      if (tty && drawn) stream.write('\n');
    },
  };
}

function formatSummary(s: DemoSummary): string {
  const ms = (value: number | null) =>
    value === null ? '–' : value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`;
  const codes = (record: Record<string, number>) =>
    Object.entries(record)
      .map(([code, n]) => `${code} ${n}`)
      .join(', ');
  // The rows from `solved` to `lost` partition the tasks sent: each task is in exactly one.
  const rows: [string, string | number, string?][] = [
    ['submitted', s.submitted, `= the ${rowsOf(s)} below, each task in one row`],
    ['solved', s.solved],
    ['failed', s.failed, codes(s.failuresByCode)],
    ['rejected', s.rejected, s.rejected ? 'a `rejected` record, the message not (yet) in the DLQ' : ''],
    [
      'in DLQ',
      s.inDlq,
      `${s.dlqWithRejectedRecord} of them with a rejected record${s.inDlq ? `; ${codes(s.dlqByReason)}` : ''}` +
        (s.foreignDlqMessages ? `; ${s.foreignDlqMessages} more from earlier runs, not counted` : ''),
    ],
    ...(s.unknown
      ? [['unknown', s.unknown, 'a record without a known status: not finished'] as [string, number, string]]
      : []),
    ['still queued', s.stillQueued],
    ['lost', s.lost],
    ['latency', `p50 ${ms(s.p50Ms)} · p95 ${ms(s.p95Ms)}`, `submit → result; solver time p95 ${ms(s.solveP95Ms)}`],
    ...(['high', 'normal'] as const).map((name): [string, string, string] => {
      const l = s.lanes[name];
      const ceiling = l.ceiling.start === null ? '–' : `${l.ceiling.start} → max ${l.ceiling.max}`;
      return [
        `${name} lane`,
        `${l.submitted} sent · ${l.solved} solved · p50 ${ms(l.p50Ms)} · p95 ${ms(l.p95Ms)}`,
        `start wait p50 ${ms(l.startWaitP50Ms)} · p95 ${ms(l.startWaitP95Ms)}; ceiling ${ceiling}; ${l.invocations} invocations, peak ${l.peakInFlight} at once`,
      ];
    }),
    [
      'solver',
      `${s.solver.submissions} submissions · ${s.solver.solved} solved`,
      `peak ${s.solver.peakThreads}/${s.solver.planThreads} threads · over-cap ${s.solver.overCapRejections} · transient ${s.solver.transientErrors}`,
    ],
    [
      'balance',
      `$${s.solver.balanceStart.toFixed(3)} → $${s.solver.balanceEnd.toFixed(3)}`,
      `duplicate solves ${s.duplicateSolves}`,
    ],
    [
      'consumer',
      `${s.consumer.invocations} invocations · peak ${s.consumer.peakConcurrency} at once`,
      `ceiling now ${s.consumer.ceiling} · retried ${s.consumer.retriedItems} · timeouts ${s.consumer.timeouts} · crashes ${s.consumer.crashes} · errors ${s.consumer.errors}`,
    ],
  ];
  rows.push(...overflowRows(s, ms));
  rows.push(...faultRows(s));
  if (s.governor?.pause) {
    const { pausedMs, reason, probes } = s.governor.pause;
    rows.push([
      'paused',
      `${(pausedMs / 1000).toFixed(1)} s`,
      `${reason ? `${reason.code}: ${reason.message.replace(/\.$/, '')}` : 'reason not seen'} · ${probes} probe(s)`,
    ]);
  }
  if (s.governor) {
    const reasons = Object.entries(s.governor.reasons)
      .sort((a, b) => b[1] - a[1])
      .map(([code, n]) => `${code} ${n}`)
      .join(', ');
    rows.push([
      'governor',
      `${s.governor.decisions} decisions · ceiling ${s.governor.startCeiling ?? '–'} → max ${s.governor.maxCeiling ?? '–'}`,
      `${reasons}${s.governor.pausedMs > 0 ? ` · paused ${(s.governor.pausedMs / 1000).toFixed(1)} s` : ''}${s.governor.failedTicks ? ` · failed ticks ${s.governor.failedTicks}` : ''}`,
    ]);
  }
  const width = Math.max(...rows.map(([, value]) => String(value).length));
  return (
    `\nSummary (${(s.durationMs / 1000).toFixed(1)} s)\n` +
    rows
      .map(
        ([label, value, note]) => `  ${label.padEnd(13)} ${String(value).padStart(width)}${note ? `   ${note}` : ''}`,
      )
      .join('\n') +
    '\n'
  );
}

/** Decisions by reason, most first: `OVERFLOW_CLOSED 5, OVERFLOW_OPEN 3`. */
function reasonsOf(reasons: Record<string, number>): string {
  return Object.entries(reasons)
    .sort((a, b) => b[1] - a[1])
    .map(([code, n]) => `${code} ${n}`)
    .join(', ');
}

/** The split between the plan and the overflow provider, and what overflow cost against its caps. */
function overflowRows(s: DemoSummary, ms: (value: number | null) => string): [string, string, string][] {
  const o = s.overflow;
  if (o === undefined) return [];
  return [
    [
      'by provider',
      `plan ${o.solved.primary} · overflow ${o.solved.overflow} solved`,
      `p95 plan ${ms(o.p95Ms.primary)} · overflow ${ms(o.p95Ms.overflow)} (target: drain within ${ms(o.latencyTargetMs)}); solver time p95 plan ${ms(o.solveP95Ms.primary)} · overflow ${ms(o.solveP95Ms.overflow)}`,
    ],
    [
      'overflow',
      `$${o.provider.spentUsd.toFixed(3)} spent`,
      `${o.provider.solved} solves at $${o.provider.pricePerSolve}; caps $${o.capUsdPerHour}/hour, $${o.capUsdPerDay}/day; balance $${o.provider.balanceStart.toFixed(3)} → $${o.provider.balanceEnd.toFixed(3)}; lane ${o.lane.invocations} invocations, ceiling max ${o.lane.maxCeiling}, peak ${o.lane.peakConcurrency} at once; ${reasonsOf(o.lane.reasons)}`,
    ],
  ];
}

/** How long a run without --max-duration waits, paused with nothing in flight, before it stops. */
function pausedStopMs(options: StartOptions): number {
  return PAUSED_TICKS_BEFORE_STOP * options.tickMs;
}

/** The summary's partition of the tasks sent (each in exactly one row) adds up to them. */
function rowsOf(s: DemoSummary): number {
  return s.solved + s.failed + s.rejected + s.inDlq + s.unknown + s.stillQueued + s.lost;
}

/** Exit 0 only when the rows add up to the tasks sent, each with a terminal record or a DLQ message. */
function verdictOf(s: DemoSummary, options: StartOptions): { code: number; message: string } {
  const rows = rowsOf(s);
  if (s.overflow && !s.overflow.withinCaps)
    return {
      code: 1,
      message: `OVER THE CAP: the overflow provider charged $${s.overflow.provider.spentUsd.toFixed(4)}, more than its caps ($${s.overflow.capUsdPerHour}/hour, $${s.overflow.capUsdPerDay}/day) allow over this run.`,
    };
  const broken = invariantsBroken(s);
  if (broken.length > 0) return { code: 1, message: `INVARIANT BROKEN: ${broken.join('; ')}.` };
  if (s.complete && rows === s.submitted)
    return {
      code: 0,
      message: `OK: all ${s.submitted} tasks reached a result: ${s.solved} solved, ${s.failed} failed, ${s.rejected} rejected, ${s.inDlq} in the DLQ (${s.dlqWithRejectedRecord} of them with a rejected record).`,
    };
  const why: string[] = [];
  if (rows !== s.submitted) why.push(`the summary's rows add up to ${rows}, not the ${s.submitted} task(s) sent`);
  if (s.unknown > 0) why.push(`${s.unknown} task(s) with a record that has no known status (not counted as finished)`);
  if (s.lost > 0) why.push(`${s.lost} task(s) LOST: no record, not in the DLQ, not queued`);
  if (s.stillQueued > 0) why.push(`${s.stillQueued} task(s) still queued when the run ended ${endedWhy(s, options)}`);
  if (s.unsent > 0) why.push(`${s.unsent} task(s) could not be sent (SQS refused them after retries)`);
  else if (s.submitted < options.tasks)
    why.push(`only ${s.submitted} of ${options.tasks} task(s) were sent before the run ended`);
  return { code: 1, message: `NOT COMPLETE: ${why.join('; ')}.` };
}

/** What a run must never show, faults or not: a task paid twice, a valid task dead-lettered, a solve unannounced. */
function invariantsBroken(s: DemoSummary): string[] {
  const broken: string[] = [];
  if (s.paidTwice > 0) broken.push(`${s.paidTwice} task(s) paid twice`);
  if (s.validInDlq > 0) broken.push(`${s.validInDlq} valid task(s) in the DLQ`);
  if (s.solvedNotAnnounced > 0) broken.push(`${s.solvedNotAnnounced} solved task(s) never announced`);
  if (s.dlqDuplicates > 0) broken.push(`${s.dlqDuplicates} second DLQ copies of one message`);
  return broken;
}

/** Why the run ended with tasks still queued, and why they wait when the governor paused. */
function endedWhy(s: DemoSummary, options: StartOptions): string {
  const ended =
    s.endedBy === 'interrupted'
      ? 'interrupted'
      : s.endedBy === 'paused'
        ? `stopped after ${PAUSED_TICKS_BEFORE_STOP} ticks paused with no invocation running; --max-duration waits longer`
        : `--max-duration ${options.maxDuration ?? DEFAULT_MAX_DURATION_S} s`;
  const reason = s.governor?.pause?.reason ?? s.governor?.lastReason;
  if (reason?.code.startsWith('PAUSE'))
    return `(${ended}) — the governor paused consumption (${reason.code}: ${reason.message.replace(/\.$/, '')}), so tasks wait in the queue as designed`;
  if (options.solverBadKey) return `(${ended}): the solver rejects the key, so tasks wait in the queue as designed`;
  return `(${ended})`;
}

function serveInstructions(stack: LocalStack, stackFile: string): string {
  const { queueUrls, tables } = stack.resources;
  // Any credentials do for an emulator; the AWS CLI needs some, and a region as a flag (v1 ignores AWS_REGION).
  const env = 'AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local';
  const region = `--region ${stack.clients.region}`;
  const task = '{"method":"turnstile","params":{"sitekey":"0x4AAAAAAAexample","pageurl":"https://example.com/login"}}';
  // The package's own producer entry, pointed at this stack by its stack file.
  // A checkout runs this file as TypeScript (tsx is there); the installed package runs compiled JS.
  const runner = import.meta.url.endsWith('.ts') ? 'npx tsx' : 'node --input-type=module';
  const node =
    `${runner} -e 'import { createProducer, localStack } from "captcha-fleet/producer"; ` +
    `createProducer(localStack({ stackFile: ${JSON.stringify(stackFile)} })).solve(${task}).then((r) => console.log(r.status, r.answer));'`;
  return (
    `\nServing until Ctrl-C (details for other commands in ${stackFile}).\n` +
    `  SQS        ${stack.endpoints.sqs}\n` +
    `  DynamoDB   ${stack.endpoints.dynamo}\n` +
    `  solver     ${stack.endpoints.solver} (simulator; GET /stats for its counters)\n` +
    (stack.overflow
      ? `  overflow   ${stack.overflow.settings.baseUrl} (the overflow provider's simulator; GET /stats)\n`
      : '') +
    `  queues     normal ${queueUrls.normal}\n             high   ${queueUrls.high}\n             DLQ    ${queueUrls.dlq}\n` +
    `  results    table ${tables.results}\n\n` +
    `Send a task with the AWS CLI:\n  ${env} aws sqs send-message ${region} --endpoint-url ${stack.endpoints.sqs} --queue-url ${queueUrls.normal} --message-body '{"id":"my-task-1",${task.slice(1)}'\n` +
    `Read its result:\n  ${env} aws dynamodb get-item ${region} --endpoint-url ${stack.endpoints.dynamo} --table-name ${tables.results} --consistent-read --key '{"taskId":{"S":"my-task-1"}}'\n` +
    `Or submit and wait from Node (here, or in a project that installed captcha-fleet):\n  ${node}\n\n`
  );
}

/** Keep serving; a status line when something changed, at most every 5 s. */
async function serveUntil(stack: LocalStack, signal: AbortSignal, stream: NodeJS.WriteStream): Promise<void> {
  let last = '';
  while (!signal.aborted) {
    await new Promise<void>((resolve) => {
      const onAbort = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, 5_000);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    const p = stack.pollerStats();
    const sim = stack.simulator.stats();
    const spill = stack.overflow?.simulator.stats();
    const line =
      `served: ${p.invocations} invocations · ${p.deleted} acknowledged · ${p.failedItems} retried · in flight ${p.inFlight} · solver solved ${sim.solved}, peak ${sim.peakThreads}/${sim.planThreads} threads` +
      (spill ? ` · overflow solved ${spill.solved}, $${(spill.balanceStart - spill.balance).toFixed(3)} spent` : '');
    if (line !== last) stream.write(`${line}\n`);
    last = line;
  }
  stream.write('stopping…\n');
}
