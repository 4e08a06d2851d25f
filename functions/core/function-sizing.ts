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

/** Lambda's CPU per memory: one vCPU at 1 769 MB. */
export const LAMBDA_MB_PER_VCPU = 1_769;

/** How long work that takes `cpuSeconds` on one vCPU takes in a function of `memoryMb` (its share of a vCPU). */
export function lambdaCpuSeconds(cpuSeconds: number, memoryMb: number): number {
  return (cpuSeconds * LAMBDA_MB_PER_VCPU) / memoryMb;
}

/** Graviton for every function: cheaper per GB-second, and the handlers have no native dependencies. */
export const FLEET_FUNCTION_ARCHITECTURE: FunctionArchitecture = 'arm64';

/** The fleet's functions, as the stack deploys them; the consumer's memory follows its settings (consumerSizing). */
export const FUNCTION_SIZING = {
  /** The consumer that waits through its solve (solveMode `wait`), or takes batches (`tasksPerInvocation` > 1). */
  consumer: { memoryMb: 256, architecture: FLEET_FUNCTION_ARCHITECTURE },
  /**
   * The consumer that parks its task (solveMode `park`, the default): its invocation lasts about
   * half a second, mostly waiting on I/O; its process levels off at 136–139 MB resident after
   * about 2 000 warm invocations at 128 MB's V8 flags (95 MB at its first), 148–150 MB at 192 MB's:
   * 192 MB leaves 28–30 % (docs/cost.md, "The consumer's memory").
   */
  parkedConsumer: { memoryMb: 192, architecture: FLEET_FUNCTION_ARCHITECTURE },
  overflowConsumer: { memoryMb: 256, architecture: FLEET_FUNCTION_ARCHITECTURE },
  governor: { memoryMb: 256, architecture: FLEET_FUNCTION_ARCHITECTURE },
  /** The report function: one provider call per report, a few a day; the cost model does not bill it yet. */
  reporter: { memoryMb: 256, architecture: FLEET_FUNCTION_ARCHITECTURE },
} as const satisfies Record<string, FunctionSizing>;

/**
 * The consumer's CPU on one core, s: what Lambda's share of a vCPU stretches (at 128 MB 13.8 ×,
 * at 256 MB 6.9 ×). The lab times invocations with it (lab/model.ts). Measured (docs/cost.md,
 * "The consumer's memory"): the deployed bundle on Node.js 24 with Lambda's V8 flags, one core
 * of an x86_64 machine, five processes of 30 invocations; `npm run bench:consumer-cpu` measures
 * the same parts with the checkout's code on this machine's Node.js.
 */
export const CONSUMER_CPU = {
  /** A warm invocation that parks its task (the median of invocations 3–30: 22 ms; 9 ms after hundreds). */
  warmSeconds: 0.022,
  /**
   * What a cold start adds: the bundle's import (median 0.44 s) and the first two invocations'
   * extra over a warm one (the clients' first requests: 0.16 s and 0.055 s).
   */
  initSeconds: 0.6,
  /** A waiting invocation's round over the leases (a Query of a full shard: median 3.6 ms). */
  readSeconds: 0.004,
} as const;

/** What the consumer's memory depends on (FleetSettings' fields). */
export interface ConsumerSizingSettings {
  solveMode: 'park' | 'wait';
  tasksPerInvocation: number;
  consumerMemoryMb?: number | undefined;
}

/**
 * The consumer's function as the stack deploys it: `consumerMemoryMb` when set; else 192 MB when it
 * parks one task an invocation (FUNCTION_SIZING.parkedConsumer), 256 MB when it waits through its
 * solve or takes batches (ten of the largest image tasks reach 134–143 MB under 128 MB's flags).
 */
export function consumerSizing(settings: ConsumerSizingSettings): FunctionSizing {
  if (settings.consumerMemoryMb !== undefined)
    return { ...FUNCTION_SIZING.consumer, memoryMb: settings.consumerMemoryMb };
  return settings.solveMode === 'park' && settings.tasksPerInvocation === 1
    ? FUNCTION_SIZING.parkedConsumer
    : FUNCTION_SIZING.consumer;
}
