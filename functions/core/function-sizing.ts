/**
 * Memory and architecture of the fleet's functions: the stack builds them from here
 * (lib/fleet-function.ts, lib/consumer.ts, lib/governor.ts) and the cost model bills them from
 * here (functions/core/cost/), so a bill never prices a copy of the stack's numbers.
 */

/** Lambda's architectures, as the price table names them. */
export type FunctionArchitecture = 'arm64' | 'x86_64';

export interface FunctionSizing {
  /** Memory, MB (128–10 240); Lambda bills duration × memory in GB-seconds. */
  readonly memoryMb: number;
  readonly architecture: FunctionArchitecture;
}

/** Graviton for every function: cheaper per GB-second, and the handlers have no native dependencies. */
export const FLEET_FUNCTION_ARCHITECTURE: FunctionArchitecture = 'arm64';

/** The fleet's functions, as the stack deploys them. */
export const FUNCTION_SIZING = {
  consumer: { memoryMb: 256, architecture: FLEET_FUNCTION_ARCHITECTURE },
  overflowConsumer: { memoryMb: 256, architecture: FLEET_FUNCTION_ARCHITECTURE },
  governor: { memoryMb: 256, architecture: FLEET_FUNCTION_ARCHITECTURE },
  /** The report function: one provider call per report, a few a day; the cost model does not bill it yet. */
  reporter: { memoryMb: 256, architecture: FLEET_FUNCTION_ARCHITECTURE },
} as const satisfies Record<string, FunctionSizing>;
