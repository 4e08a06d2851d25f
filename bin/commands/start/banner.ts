/** The lines `start` prints first: what runs where, and with which settings. */
import { describeFaultPlan } from '../../../local/faults/plan.js';
import type { LocalStack } from '../../../local/runtime.js';
import type { StartOptions } from './options.js';

/** How each design's invocations end, as the first lines name it (`--solve-mode`). */
const SOLVE_MODE_WORDS = {
  park: 'parked (solveMode park: each ends once its task is submitted)',
  wait: 'waiting (solveMode wait: each waits through its solve)',
} as const;

export function describeStack(stack: LocalStack, options: StartOptions): string {
  const where = stack.endpoints.external
    ? `endpoint ${stack.endpoints.sqs}`
    : `embedded emulators (SQS ${stack.endpoints.sqs}, DynamoDB ${stack.endpoints.dynamo})`;
  return (
    `captcha-fleet local: ${where}; solver simulator ${stack.endpoints.solver} ` +
    `(${stack.settings.solverProtocol} as ${stack.settings.dialect}, ${options.solverThreads} threads${options.solverForeignThreads ? `, ${options.solverForeignThreads} held by others` : ''}, median ${options.solverLatencyMs} ms)\n` +
    `  ${stack.governor ? `governor every ${options.tickMs} ms (plan ${stack.settings.planThreads}, reserved ${stack.settings.reservedThreads}, halt $${stack.settings.haltBalance}, pause $${stack.settings.pauseBalance})` : `fixed ceiling ${stack.pool.limit}`}` +
    ` · ${stack.settings.tasksPerInvocation} task(s) per invocation, ${SOLVE_MODE_WORDS[stack.settings.solveMode]}; function timeout ${stack.functionTimeoutMs / 1000} s; ` +
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
    `lane up to ${o.maxConcurrency} invocations (${o.probeCeiling} until a price is learned; told $${o.priceHintUsd} a solve)\n` +
    // A balance under the lane's halt level: it never opens (a halted lane does not grow), which the
    // run showed only as OVERFLOW_GUARD ticks and $0 spent.
    (sim.balance < o.haltBalance
      ? `  (the overflow lane will not open: its balance $${sim.balance} is under its halt level $${o.haltBalance}; raise --overflow-balance above it)\n`
      : '')
  );
}
