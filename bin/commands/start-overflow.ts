/**
 * The overflow flags of `start` (`--overflow-sim` and its knobs): a second simulator plays a
 * pay-per-solve provider, and the governor opens a lane to it when the plan cannot keep the
 * queue wait within the target, never past the caps. The rows join `START_OPTIONS`.
 */
import { Option } from '@commander-js/extra-typings';
import type { OverflowConfigInput } from '../../functions/core/settings.js';
import { DIALECTS, type Dialect, SOLVER_PROTOCOLS, type SolverProtocol } from '../../functions/core/solver-protocol.js';
import type { SolverSimOptions } from '../../local/solver-sim/options.js';
import { OVERFLOW_SIM_DEFAULTS, SIM_FASTEST_SHARE_OF_MEDIAN } from '../../local/overflow-local.js';
import type { OutageWindow } from '../../local/solver-sim/options.js';
import { decimal, integer, outageWindow } from '../../local/cli-values.js';

export const OVERFLOW_START_OPTIONS = {
  overflowSim: new Option(
    '--overflow-sim',
    'run a second simulator as a pay-per-solve overflow provider; the governor opens a lane to it when the plan cannot drain the backlog within --overflow-target, within the caps',
  ).default(false),
  overflowTarget: new Option(
    '--overflow-target <s>',
    'overflow: queue wait (p95) the backlog should drain within, seconds (30 in AWS by default)',
  )
    .argParser(integer(1, 3_600))
    .default(2),
  overflowCapHour: new Option('--overflow-cap-hour <usd>', 'overflow: most it may cost in one UTC hour, USD')
    .argParser(decimal(0.000_001, 100_000, 'an amount'))
    .default(1),
  overflowCapDay: new Option('--overflow-cap-day <usd>', 'overflow: most it may cost in one UTC day, USD')
    .argParser(decimal(0.000_001, 1_000_000, 'an amount'))
    .default(10),
  overflowPrice: new Option('--overflow-price <usd>', 'overflow simulator: price of one solve, USD')
    .argParser(decimal(0, 10))
    .default(OVERFLOW_SIM_DEFAULTS.pricePerSolve),
  overflowPriceHint: new Option(
    '--overflow-price-hint <usd>',
    'overflow: the price per solve the fleet assumes until it learns one (default: --overflow-price)',
  ).argParser(decimal(0.000_001, 10, 'a price')),
  overflowThreads: new Option('--overflow-threads <n>', 'overflow simulator: threads it serves at once')
    .argParser(integer(1, 10_000))
    .default(OVERFLOW_SIM_DEFAULTS.planThreads),
  overflowLatencyMs: new Option(
    '--overflow-latency-ms <ms>',
    'overflow simulator: median solve time, ms (default: --solver-latency-ms)',
  ).argParser(integer(0, 600_000)),
  overflowBalance: new Option('--overflow-balance <usd>', 'overflow simulator: starting balance, USD')
    .argParser(decimal(0, 1_000_000))
    .default(OVERFLOW_SIM_DEFAULTS.balance),
  overflowOutage: new Option(
    '--overflow-outage <start:duration>',
    'overflow simulator: down (HTTP 503 everywhere) from START for DURATION seconds after it starts; repeatable (its guard closes the lane)',
  )
    .argParser(outageWindow)
    .default([]),
  overflowProtocol: new Option(
    '--overflow-protocol <protocol>',
    'overflow: the wire protocol to the overflow provider (default: --solver-protocol)',
  ).choices(SOLVER_PROTOCOLS),
  overflowDialect: new Option(
    '--overflow-dialect <name>',
    'overflow: whose spellings and codes the overflow provider speaks (default: 2captcha, which speaks both protocols)',
  ).choices(DIALECTS),
  overflowMaxConcurrency: new Option(
    '--overflow-max-concurrency <n>',
    "overflow: widest the lane may open, invocations (default: --overflow-threads ÷ --batch-size, at most 1000; in AWS the fleet's maxConcurrency)",
  ).argParser(integer(2, 1000)),
} as const;

/** The overflow flags as `start` parsed them. */
export interface OverflowFlags {
  overflowSim: boolean;
  overflowTarget: number;
  overflowCapHour: number;
  overflowCapDay: number;
  overflowPrice: number;
  overflowPriceHint?: number;
  overflowThreads: number;
  overflowLatencyMs?: number;
  overflowBalance: number;
  overflowOutage: readonly OutageWindow[];
  overflowMaxConcurrency?: number;
  overflowProtocol?: SolverProtocol;
  overflowDialect?: Dialect;
  solverProtocol: SolverProtocol;
  solverLatencyMs: number;
  batchSize: number;
  solverErrorRate: number;
  solverUnsolvableRate: number;
}

/** The overflow simulator's median solve time, ms. */
export function overflowMedianMs(flags: OverflowFlags): number {
  return flags.overflowLatencyMs ?? flags.solverLatencyMs;
}

/**
 * The overflow block the flags describe (what the stack would be given), undefined without
 * `--overflow-sim`. Its `baseUrl` is a loopback placeholder: the runtime points it at the
 * simulator it starts. The budget's fastest solve is the simulator's (see SIM_FASTEST_SHARE_OF_MEDIAN).
 */
export function overflowConfigOf(flags: OverflowFlags): OverflowConfigInput | undefined {
  if (!flags.overflowSim) return undefined;
  const fastestMs = overflowMedianMs(flags) * SIM_FASTEST_SHARE_OF_MEDIAN;
  return {
    baseUrl: 'http://127.0.0.1',
    dialect: flags.overflowDialect ?? '2captcha',
    solverProtocol: flags.overflowProtocol ?? flags.solverProtocol,
    latencyTargetSeconds: flags.overflowTarget,
    capUsdPerHour: flags.overflowCapHour,
    capUsdPerDay: flags.overflowCapDay,
    priceHintUsd: flags.overflowPriceHint ?? Math.max(flags.overflowPrice, 0.000_001),
    // Locally the simulated provider's threads bound the lane (in AWS the fleet's maxConcurrency is the default).
    maxConcurrency:
      flags.overflowMaxConcurrency ?? Math.min(1000, Math.max(2, Math.floor(flags.overflowThreads / flags.batchSize))),
    minSolveSeconds: Math.max(0.01, fastestMs / 1000),
  };
}

/** The overflow simulator's options: its own price, threads, balance and latency; the primary's error rates. */
export function overflowSimOf(flags: OverflowFlags): SolverSimOptions {
  return {
    planThreads: flags.overflowThreads,
    pricePerSolve: flags.overflowPrice,
    balance: flags.overflowBalance,
    medianMs: overflowMedianMs(flags),
    transientErrorRate: flags.solverErrorRate,
    unsolvableRate: flags.solverUnsolvableRate,
    outages: [...flags.overflowOutage],
  };
}

/** A key of the overflow flags (`overflowTarget` is `--overflow-target`). */
type OverflowKey = keyof typeof OVERFLOW_START_OPTIONS;

/** Flags given on the command line that only mean something with `--overflow-sim`. */
export function strayOverflowFlags(
  flags: OverflowFlags,
  sourceOf: (key: OverflowKey) => string | undefined,
): OverflowKey[] {
  if (flags.overflowSim) return [];
  return (Object.keys(OVERFLOW_START_OPTIONS) as OverflowKey[]).filter(
    (key) => key !== 'overflowSim' && sourceOf(key) === 'cli',
  );
}
