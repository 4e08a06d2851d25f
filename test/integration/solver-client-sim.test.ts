/**
 * The solver client against the protocol simulator over real HTTP (127.0.0.1): solves with
 * ms-scale solve times, learns the schedule from them, respects a small thread cap by backing
 * off on over-cap answers, and reads the balance and reports.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  createSolverClient,
  type SolverClient,
  type SolverClientOptions,
} from '../../functions/adapters/solver-client.js';
import { createAdaptivePollSchedule, createFixedPollSchedule } from '../../functions/core/poll-schedule.js';
import { SolverAccountError, SolverOverCapError } from '../../functions/core/solver-protocol.js';
import type { Task } from '../../functions/core/task.js';
import { createSolverSimulator, type SolverSimOptions, type SolverSimulator } from '../../local/solver-sim/index.js';

const KEY = 'fedcba9876543210fedcba9876543210';
/** Simulated solves take tens of ms, so the defaults a schedule starts from must too. */
const FAST_DEFAULTS = { token: { firstPollMs: 40, intervalMs: 40 }, image: { firstPollMs: 40, intervalMs: 40 } };
const FAST_RETRY = { maxOverCapRetries: 40, maxTransientRetries: 3, baseBackoffMs: 10, maxBackoffMs: 40 };

let sims: SolverSimulator[] = [];
let clients: SolverClient[] = [];

async function start(options: SolverSimOptions, client: Partial<SolverClientOptions> = {}) {
  const sim = createSolverSimulator({ seed: 3, validKeys: [KEY], ...options });
  sims.push(sim);
  const { url } = await sim.listen();
  const solver = createSolverClient({
    baseUrl: url,
    key: KEY,
    dialect: options.dialect ?? 'captchaai',
    schedule: createAdaptivePollSchedule({ pollDefaults: FAST_DEFAULTS, minSamples: 4 }),
    retry: FAST_RETRY,
    ...client,
  });
  clients.push(solver);
  return { sim, solver };
}

let ids = 0;
const recaptcha = (): Task =>
  ({
    id: `sim-${++ids}`,
    method: 'userrecaptcha',
    priority: 'normal',
    submittedAt: Date.now(),
    params: { googlekey: `6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_${ids}`, pageurl: 'https://example.com/login' },
  }) as Task;

afterEach(async () => {
  await Promise.all(clients.map((client) => client.close()));
  await Promise.all(sims.map((sim) => sim.close()));
  clients = [];
  sims = [];
});

describe('solver client against the simulator', () => {
  it('solves tasks, counts every result request, and learns to poll where the answers arrive', async () => {
    const { sim, solver } = await start({ medianMs: 60, planThreads: 10 });

    const outcomes = [];
    for (let round = 0; round < 4; round += 1) {
      outcomes.push(
        ...(await Promise.all(
          [recaptcha(), recaptcha(), recaptcha()].map((task) =>
            solver.solve(task, { deadlineAt: Date.now() + 10_000 }),
          ),
        )),
      );
    }

    const stats = sim.stats();
    expect(outcomes.every((outcome) => outcome.answer.startsWith('03AGdBq2'))).toBe(true);
    expect(new Set(outcomes.map((outcome) => outcome.solverId)).size).toBe(12);
    expect(stats).toMatchObject({
      accepted: 12,
      solved: 12,
      answersDelivered: 12,
      duplicateSolves: 0,
      overCapRejections: 0,
    });
    expect(stats.resultRequests).toBe(outcomes.reduce((sum, outcome) => sum + outcome.resultRequests, 0));
    expect(solver.schedule.stats().total).toMatchObject({ tasks: 12, resultRequests: stats.resultRequests });
    expect(solver.schedule.plan('userrecaptcha').source).toBe('adaptive');
  });

  it('the adaptive schedule leaves answers waiting less than the fixed one, for the requests it spends', async () => {
    const runs = [];
    for (const schedule of [
      createFixedPollSchedule({ pollDefaults: FAST_DEFAULTS }),
      createAdaptivePollSchedule({ pollDefaults: FAST_DEFAULTS, minSamples: 4 }),
    ]) {
      const { sim, solver } = await start({ medianMs: 120, planThreads: 10 }, { schedule });
      for (let round = 0; round < 5; round += 1) {
        await Promise.all(
          [recaptcha(), recaptcha(), recaptcha(), recaptcha()].map((task) =>
            solver.solve(task, { deadlineAt: Date.now() + 10_000 }),
          ),
        );
      }
      // Measure after the warm-up: the simulator knows when each answer was ready.
      sim.resetStats();
      for (let round = 0; round < 3; round += 1) {
        await Promise.all(
          [recaptcha(), recaptcha(), recaptcha(), recaptcha()].map((task) =>
            solver.solve(task, { deadlineAt: Date.now() + 10_000 }),
          ),
        );
      }
      runs.push(sim.stats());
    }
    const [fixed, adaptive] = runs as [ReturnType<SolverSimulator['stats']>, ReturnType<SolverSimulator['stats']>];

    expect(fixed.meanAnswerWaitMs).not.toBeNull();
    expect(adaptive.meanAnswerWaitMs as number).toBeLessThan(fixed.meanAnswerWaitMs as number);
    expect(adaptive.pollsPerTask as number).toBeLessThanOrEqual(20);
  });

  it('stays under a small thread cap: over-cap answers are backed off and retried until a thread frees', async () => {
    const { sim, solver } = await start({ medianMs: 80, planThreads: 2 });

    const outcomes = await Promise.all(
      Array.from({ length: 6 }, () => solver.solve(recaptcha(), { deadlineAt: Date.now() + 20_000 })),
    );

    const stats = sim.stats();
    expect(stats.solved).toBe(6);
    expect(stats.peakThreads).toBeLessThanOrEqual(2);
    expect(stats.overCapRejections).toBeGreaterThan(0);
    expect(outcomes.reduce((sum, outcome) => sum + outcome.retries.overCap, 0)).toBe(stats.overCapRejections);
  });

  it.each(['captchaai', '2captcha'] as const)(
    'throws SolverOverCapError when no thread frees in time (%s dialect)',
    async (dialect) => {
      const { sim, solver } = await start(
        { dialect, medianMs: 50, planThreads: 1, foreignThreads: 1 },
        { retry: { ...FAST_RETRY, maxOverCapRetries: 2 } },
      );

      const error = await solver.solve(recaptcha(), { deadlineAt: Date.now() + 10_000 }).catch((e: unknown) => e);

      expect(error).toBeInstanceOf(SolverOverCapError);
      expect((error as SolverOverCapError).code).toBe(
        dialect === 'captchaai' ? 'ERROR_ZERO_BALANCE' : 'ERROR_NO_SLOT_AVAILABLE',
      );
      expect(sim.stats()).toMatchObject({ overCapRejections: 3, accepted: 0 });
    },
  );

  it('reads the balance, reports answers, and refuses a key the service does not know', async () => {
    const { sim, solver } = await start({ medianMs: 20, balance: 3.5, pricePerSolve: 0.5 });
    const [bad, good] = await Promise.all(
      [recaptcha(), recaptcha()].map((task) => solver.solve(task, { deadlineAt: Date.now() + 10_000 })),
    );

    await expect(solver.getBalance()).resolves.toBeCloseTo(2.5);
    await solver.reportBad((bad as { solverId: string }).solverId);
    await solver.reportGood((good as { solverId: string }).solverId);
    // A second report of the same answer is refused by the service as a duplicate: not an error here.
    await solver.reportBad((bad as { solverId: string }).solverId);
    expect(sim.stats()).toMatchObject({ reportBad: 1, reportGood: 1 });

    const stranger = createSolverClient({
      baseUrl: sim.url as string,
      key: '0000aaaa1111bbbb2222cccc3333dddd',
      dialect: 'captchaai',
    });
    clients.push(stranger);
    const error = await stranger.solve(recaptcha(), { deadlineAt: Date.now() + 10_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SolverAccountError);
    expect((error as Error).message).not.toContain('0000aaaa1111bbbb2222cccc3333dddd');
  });
});
