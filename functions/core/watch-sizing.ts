/**
 * The governor's memory in the parked design, from the CPU its watch needs. Lambda gives a
 * function CPU in proportion to its memory (one vCPU at 1 769 MB), and the watch's work grows
 * with the plan: its rounds ask the solver about every parked submission (res.php: one request
 * per 100 ids, a round every 100 ms at any size; the JSON task API: one request per id, each at
 * most every few seconds), and it records every ready answer itself (the lease freed, a result
 * request, the record's write, the event, the delete). A governor short of CPU frees leases late:
 * threads the plan pays for wait for the watch instead of a task. The stack (lib/governor.ts)
 * and the cost model (functions/core/cost/fleet-bill.ts) both size it here.
 */
import { FUNCTION_SIZING, type FunctionSizing, LAMBDA_MB_PER_VCPU } from './function-sizing.js';
import type { FleetSettings } from './settings.js';
import { pollGapMs, pollRequestsFor } from './solver-protocol.js';
import { watchPollMs } from './thread-leases.js';

/** Lambda's largest function memory, MB. */
const LAMBDA_MAX_MB = 10_240;

/**
 * The watch's CPU, measured with the real code and the AWS SDK against the emulators (`npm run
 * bench:watch-cpu`, docs/cost.md "The governor's CPU": 1 000 parked tasks on an x86_64 machine,
 * Node.js 20, plain HTTP: Lambda's TLS comes on top), the most of any run.
 */
export interface WatchCpu {
  recordMs: number;
  requestMs: number;
  solveSeconds: number;
  share: number;
}

export const WATCH_CPU: Readonly<WatchCpu> = {
  /** Per task the watch records (the lease freed, a result request, the record, the event, the delete), ms (measured 7.2–9.0). */
  recordMs: 9,
  /** Per poll request to the solver (res.php: 100 ids; measured 1.2–1.8 a request of 100 ids), ms. */
  requestMs: 1.8,
  /**
   * The mean solve the sizing assumes, s: a plan's threads finish planThreads ÷ this many tasks a
   * second when full (reCAPTCHA and Turnstile take 8–20 s, images 4 s: a plan of images on a big
   * plan needs `governorMemoryMb`).
   */
  solveSeconds: 10,
  /** The watch may use this share of its CPU at the plan's full rate: the rest is for bursts and the ticks. */
  share: 0.5,
};

/** Poll requests a second the watch's rounds make for `parked` submissions, as the governor paces them (governor/wiring.ts). */
export function watchRequestsPerSecond(
  parked: number,
  settings: Pick<FleetSettings, 'solverProtocol' | 'dialect'>,
): number {
  if (parked <= 0) return 0;
  const requests = pollRequestsFor(settings.solverProtocol, parked);
  const byRounds = (requests * 1000) / watchPollMs(requests, parked);
  const gap = pollGapMs(settings.solverProtocol, settings.dialect);
  // The JSON task API asks each id at most once per gap.
  return gap > 0 ? Math.min(byRounds, (parked * 1000) / gap) : byRounds;
}

/** vCPU the watch needs on a full plan of `planThreads`: its polls of every thread's submission and the answers it records. */
export function watchCpuNeed(
  settings: Pick<FleetSettings, 'planThreads' | 'solverProtocol' | 'dialect'>,
  cpu: Pick<WatchCpu, 'recordMs' | 'requestMs' | 'solveSeconds'> = WATCH_CPU,
): number {
  const polls = watchRequestsPerSecond(settings.planThreads, settings) * cpu.requestMs;
  const records = (settings.planThreads / cpu.solveSeconds) * cpu.recordMs;
  return (polls + records) / 1000;
}

/**
 * Why the parked governor's memory leaves its watch more than `WATCH_CPU.share` of its CPU on a
 * full plan (a `governorMemoryMb` set too low, or a plan past what Lambda's largest memory gives),
 * or undefined. The stack shows it as a synth warning.
 */
export function governorCpuWarning(
  settings: Pick<FleetSettings, 'planThreads' | 'solverProtocol' | 'dialect'> & {
    governorMemoryMb?: number | undefined;
  },
): string | undefined {
  const { memoryMb } = parkedGovernorSizing(settings);
  const share = watchCpuNeed(settings) / (memoryMb / LAMBDA_MB_PER_VCPU);
  if (share <= WATCH_CPU.share + 1e-9) return undefined;
  const cause =
    settings.governorMemoryMb !== undefined
      ? `governorMemoryMb ${settings.governorMemoryMb}`
      : `Lambda's largest memory (${LAMBDA_MAX_MB} MB)`;
  return `the governor's watch over ${settings.planThreads} threads (${settings.solverProtocol}) would use ${Math.round(share * 100)} % of the CPU ${memoryMb} MB gives on a full plan of ${WATCH_CPU.solveSeconds}-second solves (more than ${WATCH_CPU.share * 100} %: leases would free late); cause: ${cause}. Fix: ${settings.governorMemoryMb !== undefined ? 'raise governorMemoryMb or leave it unset' : 'split the plan over two fleets (two prefixes)'}`;
}

/**
 * The parked design's governor: at least the waiting design's memory, more as the plan grows so
 * that the watch uses at most `WATCH_CPU.share` of its CPU (in 64 MB steps, at most Lambda's
 * 10 240 MB); `governorMemoryMb` sets it instead.
 */
export function parkedGovernorSizing(
  settings: Pick<FleetSettings, 'planThreads' | 'solverProtocol' | 'dialect'> & {
    governorMemoryMb?: number | undefined;
  },
): FunctionSizing {
  const base = FUNCTION_SIZING.governor;
  if (settings.governorMemoryMb !== undefined) return { ...base, memoryMb: settings.governorMemoryMb };
  const needMb = (watchCpuNeed(settings) / WATCH_CPU.share) * LAMBDA_MB_PER_VCPU;
  const memoryMb = Math.min(LAMBDA_MAX_MB, Math.max(base.memoryMb, Math.ceil(needMb / 64) * 64));
  return { ...base, memoryMb };
}
