/**
 * The flags of `start`, one table (`START_OPTIONS`) of commander options, each with its parser,
 * choices and default; `startCommand()` adds them all, and `StartOptions` is what commander
 * infers from them (its typed options), so a new flag is one row here and one `.addOption`.
 */
import { Command, Option } from '@commander-js/extra-typings';
import { orphanWaitMsOf } from '../../../functions/consumer/context.js';
import { MAPPING_MIN_CONCURRENCY, SOLVE_MODES } from '../../../functions/core/settings.js';
import { DIALECTS, SOLVER_PROTOCOLS } from '../../../functions/core/solver-protocol.js';
import { LOG_LEVELS, localFunctionTimeoutSeconds, minLocalVisibilityTimeoutSeconds } from '../../../local/runtime.js';
import { decimal, httpUrl, integer, outageWindow } from '../../../local/cli-values.js';
import { FAULT_START_OPTIONS } from '../start-faults.js';
import { OVERFLOW_START_OPTIONS } from '../start-overflow.js';

/** --max-duration when not given, s. */
export const DEFAULT_MAX_DURATION_S = 120;
/** Governor ticks paused with nothing in flight before a run without --max-duration stops. */
export const PAUSED_TICKS_BEFORE_STOP = 3;
/** A run with --faults and without --max-duration lasts at least this long past its last fault window, s. */
export const PAST_FAULTS_S = 60;
/**
 * A run without --max-duration waits this many times the work's time at the plan's pace
 * (`workSeconds`): the solve times' tail, retries, crashes and the parked design's rounds.
 */
export const WORK_ALLOWANCE = 2;
/** …but no longer than this without --max-duration, s: past it, the user says how long to wait. */
export const MAX_DEFAULT_DURATION_S = 900;
/** A solve's time around the solver's own in the local run (submit, park, the watch's round), ms. */
const SOLVE_OVERHEAD_MS = 500;

/** The flags of `start`. Governor flags (--plan-threads, --reserved-threads, …) join here. */
export const START_OPTIONS = {
  tasks: new Option('--tasks <n>', 'tasks in the demo workload (0 = none: only with --serve)')
    .argParser(integer(0, 100_000))
    .default(200),
  malformed: new Option(
    '--malformed <n>',
    'of those, malformed on purpose, to show the DLQ path (default: 1 in 20, at most 3)',
  ).argParser(integer(0, 100_000)),
  highShare: new Option(
    '--high-share <p>',
    'share of the demo tasks sent with priority "high" (they travel on the high lane)',
  )
    .argParser(decimal(0, 1, 'a share'))
    .default(0.1),
  rate: new Option('--rate <r>', 'tasks per second; 0 sends them all at once (a burst)')
    .argParser(decimal(0, 10_000))
    .default(0),
  concurrency: new Option(
    '--concurrency <c>',
    "fixed ceiling: invocations at once per lane and in total, at least 2 (Lambda's SQS mapping runs at least 2 at once, as --solver-threads is held to); turns the governor off, and nothing holds it to the plan's threads (default: the governor decides)",
  ).argParser(integer(MAPPING_MIN_CONCURRENCY, 1000)),
  batchSize: new Option('--batch-size <n>', 'tasks per invocation (SQS batch size)')
    .argParser(integer(1, 10))
    .default(1),
  solveMode: new Option(
    '--solve-mode <mode>',
    "how a consumer waits for its answer (the stack's solveMode): park (a thread lease per task, the invocation ends once the task is submitted, the governor's watch records the answer) or wait (each invocation waits through its solve)",
  )
    .choices(SOLVE_MODES)
    .default('park'),
  seed: new Option('--seed <s>', 'seed of the workload, the simulator and the chaos')
    .argParser(integer(0, 2 ** 31 - 1))
    .default(1),
  solverThreads: new Option('--solver-threads <n>', "threads of the simulated solver plan (the fleet's planThreads)")
    .argParser(integer(1, 10_000))
    .default(20),
  solverForeignThreads: new Option(
    '--solver-foreign-threads <n>',
    'threads other users of the key hold (the fleet does not know)',
  )
    .argParser(integer(0, 10_000))
    .default(0),
  solverBalance: new Option('--solver-balance <usd>', 'starting balance of the simulated account, USD')
    .argParser(decimal(0, 1_000_000))
    .default(10),
  solverPrice: new Option('--solver-price <usd>', 'price of one solve, USD').argParser(decimal(0, 100)).default(0.001),
  solverErrorRate: new Option('--solver-error-rate <p>', 'share of solver requests answered with a transient error')
    .argParser(decimal(0, 0.9, 'a share'))
    .default(0.005),
  solverUnsolvableRate: new Option(
    '--solver-unsolvable-rate <p>',
    'share of captchas the solver cannot solve (resubmitted, then failed)',
  )
    .argParser(decimal(0, 1, 'a share'))
    .default(0.01),
  solverLatencyMs: new Option('--solver-latency-ms <ms>', 'median solve time of the simulator, ms')
    .argParser(integer(0, 600_000))
    .default(400),
  solverOutage: new Option(
    '--solver-outage <start:duration>',
    'the solver is down (HTTP 503 everywhere) from START for DURATION seconds after it starts; repeatable',
  )
    .argParser(outageWindow)
    .default([]),
  solverBadKey: new Option('--solver-bad-key', 'the solver rejects the key (account error: tasks stay queued)').default(
    false,
  ),
  solverProtocol: new Option(
    '--solver-protocol <protocol>',
    'the wire protocol to the solver: res-php (in.php / res.php) or create-task (the JSON task API: createTask / getTaskResult)',
  )
    .choices(SOLVER_PROTOCOLS)
    .default('res-php'),
  solverDialect: new Option(
    '--solver-dialect <name>',
    'whose spellings and codes the solver speaks (default: captchaai with res-php, 2captcha with create-task; anti-captcha, capmonster and capsolver speak create-task only)',
  ).choices(DIALECTS),
  crashRate: new Option(
    '--crash-rate <p>',
    'share of invocations that die after solving, before recording (tasks must still end solved once)',
  )
    .argParser(decimal(0, 0.9, 'a share'))
    .default(0),
  visibilityTimeout: new Option(
    '--visibility-timeout <s>',
    'queue visibility timeout, s; the local function timeout is 1 s less (crashed tasks return after it)',
  )
    .argParser(integer(minLocalVisibilityTimeoutSeconds(), 900))
    .default(12),
  planThreads: new Option(
    '--plan-threads <n>',
    'governor: threads the fleet believes its plan has (default: --solver-threads)',
  ).argParser(integer(1, 10_000)),
  reservedThreads: new Option('--reserved-threads <n>', 'governor: threads kept free for other users of the key')
    .argParser(integer(0, 10_000))
    .default(0),
  haltBalance: new Option('--halt-balance <usd>', 'governor: under this balance, no scaling up')
    .argParser(decimal(0, 1_000_000))
    .default(1),
  pauseBalance: new Option(
    '--pause-balance <usd>',
    'governor: under this balance, consumption pauses (tasks wait in the queue)',
  )
    .argParser(decimal(0, 1_000_000))
    .default(0.1),
  tickMs: new Option('--tick-ms <ms>', 'governor: time between decisions, ms (10000 in AWS)')
    .argParser(integer(100, 60_000))
    .default(1_000),
  endpoint: new Option(
    '--endpoint <url>',
    'use this AWS-compatible endpoint for SQS and DynamoDB instead of the embedded emulators (default: AWS_ENDPOINT_URL)',
  ).argParser(httpUrl),
  serve: new Option(
    '--serve',
    'keep running after the workload: print endpoints, queue URLs and example producer commands',
  ).default(false),
  maxDuration: new Option(
    '--max-duration <s>',
    `end the run after this many seconds at the latest (default: ${DEFAULT_MAX_DURATION_S}; or ${WORK_ALLOWANCE}× the time the tasks take at the plan's pace (--tasks, --rate, --solver-latency-ms, the threads left to the fleet), with --crash-rate or --faults and a task whose holder died (a redelivery and the wait for its copy: 3 × --visibility-timeout − 1 s), after the last --faults or --solver-outage window, up to ${MAX_DEFAULT_DURATION_S} in all; or ${PAST_FAULTS_S} past that window however late it ends; whichever is latest; without it, a run the governor keeps paused with no invocation running ends after ${PAUSED_TICKS_BEFORE_STOP} ticks, once every such window has ended, unless the pause is an outage's, which resumes by itself)`,
  ).argParser(decimal(1, 86_400, 'seconds')),
  json: new Option('--json', 'print the summary as one JSON object on the last stdout line').default(false),
  logLevel: new Option(
    '--log-level <level>',
    "log level of the consumer's, the governor's and the reporter's JSON logs (debug and info on stdout, warn and error on stderr)",
  )
    .choices(LOG_LEVELS)
    .default('silent'),
  ...OVERFLOW_START_OPTIONS,
  ...FAULT_START_OPTIONS,
} as const;

/** The `start` command with every flag of `START_OPTIONS`, in the table's order (the help's). */
export function startCommand() {
  const o = START_OPTIONS;
  return new Command('start')
    .description('run the whole fleet locally (emulators + solver simulator) with a demo workload')
    .addOption(o.tasks)
    .addOption(o.malformed)
    .addOption(o.highShare)
    .addOption(o.rate)
    .addOption(o.concurrency)
    .addOption(o.batchSize)
    .addOption(o.solveMode)
    .addOption(o.seed)
    .addOption(o.solverThreads)
    .addOption(o.solverForeignThreads)
    .addOption(o.solverBalance)
    .addOption(o.solverPrice)
    .addOption(o.solverErrorRate)
    .addOption(o.solverUnsolvableRate)
    .addOption(o.solverLatencyMs)
    .addOption(o.solverOutage)
    .addOption(o.solverBadKey)
    .addOption(o.solverProtocol)
    .addOption(o.solverDialect)
    .addOption(o.crashRate)
    .addOption(o.visibilityTimeout)
    .addOption(o.planThreads)
    .addOption(o.reservedThreads)
    .addOption(o.haltBalance)
    .addOption(o.pauseBalance)
    .addOption(o.tickMs)
    .addOption(o.endpoint)
    .addOption(o.serve)
    .addOption(o.maxDuration)
    .addOption(o.json)
    .addOption(o.logLevel)
    .addOption(o.overflowSim)
    .addOption(o.overflowTarget)
    .addOption(o.overflowCapHour)
    .addOption(o.overflowCapDay)
    .addOption(o.overflowPrice)
    .addOption(o.overflowPriceHint)
    .addOption(o.overflowThreads)
    .addOption(o.overflowLatencyMs)
    .addOption(o.overflowBalance)
    .addOption(o.overflowOutage)
    .addOption(o.overflowProtocol)
    .addOption(o.overflowDialect)
    .addOption(o.overflowMaxConcurrency)
    .addOption(o.faults);
}

/** Every flag of `start`, parsed and range-checked: commander's typed options of `startCommand()`. */
export type StartOptions = ReturnType<ReturnType<typeof startCommand>['opts']>;

/** How long a run without --max-duration waits, paused with nothing in flight, before it stops. */
export function pausedStopMs(options: StartOptions): number {
  return PAUSED_TICKS_BEFORE_STOP * options.tickMs;
}

/**
 * When the last outage the run scheduled ends, ms after its start: its --faults windows (from the
 * proxy's arming, `faultsEndMs`) and the simulators' --solver-outage and --overflow-outage windows
 * (from their start, a little before the run's: a bound that is, if anything, late).
 */
export function scheduledOutagesEndMs(options: StartOptions, faultsEndMs = 0): number {
  const windows = [...options.solverOutage, ...(options.overflowSim ? options.overflowOutage : [])];
  return Math.max(faultsEndMs, ...windows.map((w) => w.startMs + w.durationMs));
}

/**
 * The time the demo's work takes at the plan's pace, s: its tasks sent at --rate, and solved at
 * the simulator's median (plus the local run's own round) on the threads left to the fleet (the
 * plan it is told, less others' threads and the reservation, within the simulator's, and within
 * a fixed --concurrency's tasks in the waiting design). 0 with no
 * task or no thread left (the governor then waits for threads, and the paused stop ends the run).
 */
export function workSeconds(options: StartOptions): number {
  const plan = Math.min(options.planThreads ?? options.solverThreads, options.solverThreads);
  const left = plan - options.solverForeignThreads - options.reservedThreads;
  // A fixed ceiling in the waiting design holds a thread per task of each invocation at most.
  const held =
    options.concurrency !== undefined && options.solveMode === 'wait'
      ? options.concurrency * options.batchSize
      : Number.POSITIVE_INFINITY;
  const threads = Math.min(left, held);
  if (options.tasks === 0 || threads <= 0) return 0;
  const sendSeconds = options.rate > 0 ? options.tasks / options.rate : 0;
  const solveSeconds = (options.tasks * (options.solverLatencyMs + SOLVE_OVERHEAD_MS)) / 1000 / threads;
  return Math.max(sendSeconds, solveSeconds);
}

/**
 * What a task whose holder died costs on top of its work, s, in a run where holders die
 * (`--crash-rate`, or `--faults` where the table cannot take a claim's release): its message
 * back after a visibility timeout, and when no solver id was on the record, the wait for the copy
 * that may carry it (the consumer's `orphanWaitMs`: a visibility timeout and a lease, the local
 * lease being the function timeout). 0 in a run where none dies.
 */
export function deadHolderSeconds(options: Pick<StartOptions, 'crashRate' | 'faults' | 'visibilityTimeout'>): number {
  if (options.crashRate === 0 && options.faults === undefined) return 0;
  const visibility = options.visibilityTimeout;
  // The local runtime's lease is its function timeout (local/runtime.ts).
  return visibility + orphanWaitMsOf(visibility * 1000, localFunctionTimeoutSeconds(visibility) * 1000) / 1000;
}

/**
 * How long the run watches, and when it may stop early for a pause: --max-duration as given;
 * without it, the latest of the default, a minute past the last outage the run scheduled
 * (`outagesEndMs`, scheduledOutagesEndMs) and `WORK_ALLOWANCE` times the work's time at the
 * plan's pace after that outage (`workSeconds`, up to `MAX_DEFAULT_DURATION_S`: a small plan's
 * work is not cut at two minutes); a paused fleet with nothing in flight ends the run only once
 * those windows are over (an outage pauses it as designed; it resumes after).
 */
export function runLimits(
  options: StartOptions,
  outagesEndMs = 0,
): { maxDurationMs: number; stopWhenPausedMs?: number; stopWhenPausedFromMs?: number } {
  if (options.maxDuration !== undefined) return { maxDurationMs: options.maxDuration * 1000 };
  const forWorkMs = Math.min(
    MAX_DEFAULT_DURATION_S * 1000,
    outagesEndMs + (WORK_ALLOWANCE * workSeconds(options) + deadHolderSeconds(options)) * 1000,
  );
  return {
    maxDurationMs: Math.max(DEFAULT_MAX_DURATION_S * 1000, outagesEndMs + PAST_FAULTS_S * 1000, Math.round(forWorkMs)),
    stopWhenPausedMs: pausedStopMs(options),
    stopWhenPausedFromMs: outagesEndMs,
  };
}
