/**
 * Traces: the traffic and the world a policy is replayed against, as a documented JSON format
 * (docs/lab.md) so users can replay their own day. Everything that changes over time is a list
 * of `{ at, … }` pieces, each holding from its `at` (seconds from the start) until the next one.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import {
  ConfigError,
  MAPPING_MAX_CONCURRENCY,
  FleetConfigSchema,
  resolveSettings,
  type FleetConfig,
  type FleetSettings,
  type SolveMode,
} from '../functions/core/settings.js';
import { METHODS, type SolverMethod } from '../functions/core/solver-protocol.js';
import { closestParamName } from '../functions/core/task-params.js';
import { at } from './arrays.js';
import { TRACE_CLASS_NAMES } from './class-names.js';
import { parseModelSettings } from './model.js';

const nonNegative = z.number().finite().min(0);
const piece = <T extends z.ZodRawShape>(shape: T) => z.object({ at: nonNegative, ...shape }).strict();

/** The JSON trace format, version 1. */
export const TraceSchema = z
  .object({
    /** Short name, used by `--trace` and in reports. */
    name: z.string().regex(/^[a-z0-9][a-z0-9-]{0,60}$/, 'lowercase letters, digits and dashes'),
    description: z.string().max(500).default(''),
    /** Simulated span; arrivals stop here and the run continues until the queue drains. */
    durationSeconds: z
      .number()
      .finite()
      .gt(0)
      .max(31 * 86_400),
    /** Fleet settings (the same fields as the stack's configuration), e.g. `{ "planThreads": 50 }`. */
    fleet: z.record(z.string(), z.unknown()).default({}),
    /** Arrival rate in tasks per second, piecewise constant; Poisson within a piece. */
    arrivals: z.array(piece({ perSecond: nonNegative })).min(1),
    /**
     * The method mix: relative shares and solve times. Log-normal (the default) takes the median
     * and p95 in seconds; exponential takes the mean (for closed-form checks such as M/M/c).
     */
    methods: z
      .array(
        z
          .object({
            method: z.enum(METHODS),
            share: z.number().finite().gt(0),
            distribution: z.enum(['lognormal', 'exponential']).default('lognormal'),
            medianSeconds: z.number().finite().gt(0).optional(),
            p95Seconds: z.number().finite().gt(0).optional(),
            meanSeconds: z.number().finite().gt(0).optional(),
          })
          .strict(),
      )
      .min(1),
    /** Threads of the plan held by other users of the key. */
    foreignThreads: z
      .array(piece({ threads: z.number().int().min(0) }))
      .min(1, 'at least one piece (leave the field out for none held)')
      .default([{ at: 0, threads: 0 }]),
    /** Multiplies every solve time started in the piece (2 = the solver is twice as slow). */
    solveTimeFactor: z
      .array(piece({ factor: z.number().finite().gt(0) }))
      .min(1, 'at least one piece (leave the field out for a factor of 1)')
      .default([{ at: 0, factor: 1 }]),
    /**
     * Solver outages: from `at`, for `durationSeconds`, every request (in.php, res.php, the
     * balance read) answers a transient error (HTTP 503), and solves already accepted pause
     * (their clocks resume after), as the solver simulator's `outages` do.
     */
    outages: z.array(z.object({ at: nonNegative, durationSeconds: z.number().finite().gt(0) }).strict()).default([]),
    /** Account balance, what one solve costs, and money added during the run. */
    balance: z
      .object({
        initialUsd: nonNegative,
        pricePerSolveUsd: nonNegative,
        topUps: z.array(z.object({ at: nonNegative, usd: z.number().finite().gt(0) }).strict()).default([]),
      })
      .strict()
      .default({ initialUsd: 1000, pricePerSolveUsd: 0, topUps: [] }),
    /** Marks a surge: the benchmark checks the governor against the usual scalers on it. */
    surge: z.boolean().default(false),
    /** Model the answer waiting for the next res.php poll (protocol schedule) while holding its thread. */
    pollLoss: z.boolean().default(false),
    /**
     * A trace the generator drew (`--generate`) and wrote as failing: its class, the seed it was
     * simulated with and the `--model` settings it ran with (its `--solve-mode` is the fleet's
     * `solveMode`), so `--trace-file` replays it as it ran and judges it by the generator's
     * targets against its fair floor.
     */
    generated: z
      .object({
        class: z.enum(TRACE_CLASS_NAMES),
        seed: z.number().int().min(0).max(0xffffffff),
        model: z.string().max(2_000).optional(),
      })
      .strict()
      .optional(),
  })
  .strict();

export type TraceInput = z.input<typeof TraceSchema>;
type ParsedTrace = z.output<typeof TraceSchema>;

/** A step function of time, with its breakpoints in seconds. */
export interface Piecewise {
  readonly at: readonly number[];
  readonly value: readonly number[];
}

/** One method of the mix: its share (normalized to sum 1) and solve-time distribution. */
export type MethodMix =
  | { method: SolverMethod; share: number; distribution: 'lognormal'; medianSeconds: number; p95Seconds: number }
  | { method: SolverMethod; share: number; distribution: 'exponential'; meanSeconds: number };

/** A validated trace with the fleet settings it resolves to. */
export interface Trace {
  readonly name: string;
  readonly description: string;
  readonly durationSeconds: number;
  readonly settings: FleetSettings;
  readonly arrivals: Piecewise;
  readonly methods: readonly MethodMix[];
  readonly foreignThreads: Piecewise;
  readonly solveTimeFactor: Piecewise;
  /** Outage windows [start, end), seconds, ascending and disjoint. */
  readonly outages: readonly { start: number; end: number }[];
  readonly balance: { initialUsd: number; pricePerSolveUsd: number; topUps: readonly { at: number; usd: number }[] };
  readonly pollLoss: boolean;
  readonly surge: boolean;
  /** A generated trace's class and simulation seed (written with a failing trace), when it is one. */
  readonly generated?: { class: string; seed: number; model?: string };
}

/** A trace that cannot be used: names the file and every problem found, with its JSON path. */
export class TraceFileError extends Error {
  override readonly name = 'TraceFileError';
  constructor(
    readonly source: string,
    readonly problems: string[],
    options?: { cause?: unknown },
  ) {
    super(
      `Invalid trace ${source} (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n${problems.map((p) => `  - ${p}`).join('\n')}`,
      options,
    );
  }
}

/** Validates parsed JSON as a trace. `source` names it in errors (a file path or a shipped name). */
export function parseTrace(json: unknown, source: string): Trace {
  const parsed = TraceSchema.safeParse(json);
  if (!parsed.success) {
    throw new TraceFileError(
      source,
      parsed.error.issues.map((issue) => `${formatPath(issue.path)}: ${issue.message}`),
    );
  }
  const trace: ParsedTrace = parsed.data;
  const problems: string[] = [];
  checkPieces(trace.arrivals, 'arrivals', trace.durationSeconds, problems);
  checkPieces(trace.foreignThreads, 'foreignThreads', trace.durationSeconds, problems);
  checkPieces(trace.solveTimeFactor, 'solveTimeFactor', trace.durationSeconds, problems);
  trace.outages.forEach((outage, i) => {
    if (outage.at >= trace.durationSeconds)
      problems.push(`outages[${i}].at: ${outage.at} is not before durationSeconds ${trace.durationSeconds}`);
    const previous = trace.outages[i - 1];
    if (previous !== undefined && outage.at < previous.at)
      problems.push(
        `outages[${i}].at: ${outage.at} is before the previous outage's ${previous.at} (list them in order)`,
      );
    else if (previous !== undefined && outage.at < previous.at + previous.durationSeconds)
      problems.push(`outages[${i}].at: ${outage.at} starts before the previous outage ends`);
  });
  trace.balance.topUps.forEach((topUp, i) => {
    if (topUp.at >= trace.durationSeconds)
      problems.push(`balance.topUps[${i}].at: ${topUp.at} is not before durationSeconds ${trace.durationSeconds}`);
  });
  trace.methods.forEach((m, i) => {
    if (trace.methods.findIndex((other) => other.method === m.method) !== i)
      problems.push(`methods[${i}].method: ${m.method} is in the mix twice (give one entry its whole share)`);
    if (m.distribution === 'exponential') {
      if (m.meanSeconds === undefined)
        problems.push(`methods[${i}].meanSeconds: required for the exponential distribution`);
      if (m.medianSeconds !== undefined || m.p95Seconds !== undefined)
        problems.push(
          `methods[${i}]: the exponential distribution takes meanSeconds only (not medianSeconds or p95Seconds)`,
        );
    } else if (m.meanSeconds !== undefined) {
      problems.push(
        `methods[${i}].meanSeconds: the lognormal distribution takes medianSeconds and p95Seconds, not a mean`,
      );
    } else if (m.medianSeconds === undefined || m.p95Seconds === undefined) {
      problems.push(`methods[${i}]: the lognormal distribution needs medianSeconds and p95Seconds`);
    } else if (m.p95Seconds < m.medianSeconds) {
      problems.push(`methods[${i}].p95Seconds: ${m.p95Seconds} is below medianSeconds ${m.medianSeconds}`);
    }
  });
  if (trace.generated?.model !== undefined) {
    try {
      parseModelSettings(trace.generated.model);
    } catch (error) {
      problems.push(`generated.model: ${(error as Error).message}`);
    }
  }
  // The fleet block is the stack's configuration, read loosely there: a misspelt key here ran the
  // default plan of 50 threads without a word, and the overflow block is not modelled by this run.
  const knownFleet = new Set(Object.keys(FleetConfigSchema.shape));
  for (const key of Object.keys(trace.fleet)) {
    if (key === 'overflow')
      problems.push('fleet.overflow: the lab’s traces do not model the overflow lane (npm run bench:overflow does)');
    else if (!knownFleet.has(key))
      problems.push(`fleet.${key}: not a fleet setting${hint(closestParamName(key, [...knownFleet]))}`);
  }
  let settings: FleetSettings | undefined;
  try {
    const { overflow: _refusedAbove, ...fleet } = trace.fleet;
    settings = resolveSettings(fleet as FleetConfig);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    for (const p of error.problems)
      problems.push(
        // The settings' fix (a batch of more tasks) is not one the lab takes: it models one task per invocation.
        p.field === 'tasksPerInvocation' && (trace.fleet as FleetConfig).tasksPerInvocation === undefined
          ? `fleet.planThreads: ${p.problem}; the lab models one task per invocation, so a fleet of at most ${MAPPING_MAX_CONCURRENCY} usable threads: set fleet.reservedThreads to leave the rest to others`
          : `fleet.${p.field}: ${p.problem}`,
      );
  }
  if (settings && settings.tasksPerInvocation !== 1) {
    problems.push(
      `fleet.tasksPerInvocation: the lab models one task per invocation, got ${settings.tasksPerInvocation}`,
    );
  }
  if (problems.length > 0 || !settings) throw new TraceFileError(source, problems);
  const built = toTrace(trace, settings);
  // Each task is an object through the run: past this, memory runs out before a line is printed.
  const expected = expectedArrivals(built);
  if (expected > MAX_EXPECTED_TASKS)
    throw new TraceFileError(source, [
      `arrivals: about ${Math.round(expected).toLocaleString('en-US')} tasks expected; the lab runs at most ${MAX_EXPECTED_TASKS.toLocaleString('en-US')} (a day of 10⁶ is its speed benchmark): lower the rates or the duration`,
    ]);
  return built;
}

const hint = (near: string | undefined) => (near !== undefined ? ` (did you mean ${near}?)` : '');

/** Tasks a trace may be expected to bring (its rates over its pieces): a simulated day of 10⁶ is the lab's speed benchmark. */
export const MAX_EXPECTED_TASKS = 5_000_000;

function toTrace(trace: ParsedTrace, settings: FleetSettings): Trace {
  const totalShare = trace.methods.reduce((sum, m) => sum + m.share, 0);
  return {
    name: trace.name,
    description: trace.description,
    durationSeconds: trace.durationSeconds,
    settings,
    arrivals: toPiecewise(trace.arrivals, (p) => p.perSecond),
    methods: trace.methods.map((m): MethodMix => {
      const share = m.share / totalShare;
      return m.distribution === 'exponential'
        ? { method: m.method, share, distribution: 'exponential', meanSeconds: m.meanSeconds as number }
        : {
            method: m.method,
            share,
            distribution: 'lognormal',
            medianSeconds: m.medianSeconds as number,
            p95Seconds: m.p95Seconds as number,
          };
    }),
    foreignThreads: toPiecewise(trace.foreignThreads, (p) => p.threads),
    solveTimeFactor: toPiecewise(trace.solveTimeFactor, (p) => p.factor),
    outages: trace.outages.map((o) => ({ start: o.at, end: o.at + o.durationSeconds })),
    balance: trace.balance,
    pollLoss: trace.pollLoss,
    surge: trace.surge,
    ...(trace.generated !== undefined ? { generated: trace.generated } : {}),
  };
}

/**
 * The trace with its fleet's `solveMode` set (`park`, the default: the parked design; `wait`:
 * each invocation waits through its solve), to compare the designs on the same traffic.
 */
export function withSolveMode(trace: Trace, solveMode: SolveMode | undefined): Trace {
  return solveMode === undefined ? trace : { ...trace, settings: { ...trace.settings, solveMode } };
}

/** Reads and validates a trace file. @throws TraceFileError naming the file and its problems. */
export function loadTraceFile(path: string): Trace {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new TraceFileError(path, [`cannot be read: ${(error as Error).message}`], { cause: error });
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new TraceFileError(path, [`is not valid JSON: ${(error as Error).message}`], { cause: error });
  }
  return parseTrace(json, path);
}

/** The value of a step function at `t` (the first piece's value before it starts). */
export function valueAt(fn: Piecewise, t: number): number {
  const starts = fn.at;
  let lo = 0;
  let hi = starts.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (at(starts, mid) <= t) lo = mid;
    else hi = mid - 1;
  }
  return at(fn.value, lo);
}

/** Expected arrivals in [0, duration): the integral of the rate. */
export function expectedArrivals(trace: Trace): number {
  const { at: starts, value: rates } = trace.arrivals;
  let total = 0;
  for (let i = 0; i < starts.length; i++) {
    const end = Math.min(trace.durationSeconds, starts[i + 1] ?? trace.durationSeconds);
    total += Math.max(0, end - at(starts, i)) * at(rates, i);
  }
  return total;
}

function toPiecewise<P extends { at: number }>(pieces: P[], value: (p: P) => number): Piecewise {
  return { at: pieces.map((p) => p.at), value: pieces.map(value) };
}

function checkPieces(pieces: { at: number }[], field: string, duration: number, problems: string[]): void {
  if (pieces[0] && pieces[0].at !== 0)
    problems.push(`${field}[0].at: the first piece must start at 0, got ${pieces[0].at}`);
  pieces.forEach((p, i) => {
    const previous = pieces[i - 1];
    if (previous !== undefined && p.at <= previous.at)
      problems.push(`${field}[${i}].at: ${p.at} is not after the previous piece's ${previous.at}`);
  });
  pieces.forEach((p, i) => {
    if (p.at >= duration) problems.push(`${field}[${i}].at: ${p.at} is not before durationSeconds ${duration}`);
  });
}

function formatPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(trace)';
  return path
    .map((part, i) => (typeof part === 'number' ? `[${part}]` : `${i === 0 ? '' : '.'}${String(part)}`))
    .join('');
}
