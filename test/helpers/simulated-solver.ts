/**
 * The parked design's integration tests share these: a consumer timing fast enough for a test,
 * and a solver simulator (every answer at `medianMs`, no errors) with the undici client on it,
 * both closed after each test.
 */
import { afterEach } from 'vitest';
import { createSolverClient, type SolverClient } from '../../functions/adapters/solver-client.js';
import type { ConsumerTiming } from '../../functions/consumer/create-handler.js';
import type { SolverRetryOptions } from '../../functions/adapters/solver-context.js';
import { createFixedPollSchedule } from '../../functions/core/poll-schedule.js';
import type { Dialect, SolverProtocol } from '../../functions/core/solver-protocol.js';
import { createSolverSimulator, type SolverSimulator } from '../../local/solver-sim/index.js';
import { TEST_SOLVER_KEY } from './factories.js';

/** Retries at once, short leases and waits: a consumer that keeps up with a test. */
export const FAST_TIMING: Partial<ConsumerTiming> = {
  leaseMs: 2_000,
  recordMarginMs: 100,
  retryBaseSeconds: 0,
  retryMaxSeconds: 0,
  minSolveWindowMs: 100,
  overCapWaiting: { pollMs: 20, maxWaitMs: 300, maxWaits: 3 },
};

/** A simulated solver's options beyond its seed and speed: another dialect, protocol or plan, the client's retries. */
export interface SimulatedSolverOptions {
  seed: number;
  medianMs: number;
  dialect?: Dialect;
  protocol?: SolverProtocol;
  planThreads?: number;
  foreignThreads?: number;
  retry?: Partial<SolverRetryOptions>;
}

/** Call at a test file's top level: returns a maker of simulated solvers, each closed after its test. */
export function simulatedSolvers(): (options: SimulatedSolverOptions) => Promise<{
  sim: SolverSimulator;
  solver: SolverClient;
}> {
  let sims: SolverSimulator[] = [];
  let solvers: SolverClient[] = [];
  afterEach(async () => {
    await Promise.all(solvers.map((s) => s.close()));
    await Promise.all(sims.map((s) => s.close()));
    sims = [];
    solvers = [];
  });
  return async ({
    seed,
    medianMs,
    dialect = 'captchaai',
    protocol,
    planThreads = 1_000,
    foreignThreads = 0,
    retry,
  }) => {
    const sim = createSolverSimulator({
      seed,
      dialect,
      validKeys: [TEST_SOLVER_KEY],
      planThreads,
      foreignThreads,
      medianMs,
      transientErrorRate: 0,
      unsolvableRate: 0,
    });
    sims.push(sim);
    const { url } = await sim.listen();
    const solver = createSolverClient({
      baseUrl: url,
      key: TEST_SOLVER_KEY,
      dialect,
      ...(protocol ? { protocol } : {}),
      ...(retry ? { retry } : {}),
      schedule: createFixedPollSchedule({
        pollDefaults: { token: { firstPollMs: 20, intervalMs: 20 }, image: { firstPollMs: 20, intervalMs: 20 } },
      }),
    });
    solvers.push(solver);
    return { sim, solver };
  };
}
