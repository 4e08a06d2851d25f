/**
 * The parked design's two solver calls against the protocol simulator over real HTTP: `submit`
 * (the submission alone) and `pollMany` (which of many submissions are ready), on both wire
 * protocols; res.php asks about up to 100 ids in one request.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createSolverClient, type SolverClient } from '../../functions/adapters/solver-client.js';
import { RES_PHP_IDS_PER_REQUEST } from '../../functions/core/solver-protocol.js';
import type { PollState } from '../../functions/core/ports.js';
import type { Task } from '../../functions/core/task.js';
import { createSolverSimulator, type SolverSimOptions, type SolverSimulator } from '../../local/solver-sim/index.js';

const KEY = 'fedcba9876543210fedcba9876543210';

let sims: SolverSimulator[] = [];
let clients: SolverClient[] = [];

async function start(options: SolverSimOptions, protocol: 'res-php' | 'create-task' = 'res-php') {
  const sim = createSolverSimulator({ seed: 5, validKeys: [KEY], ...options });
  sims.push(sim);
  const { url } = await sim.listen();
  const solver = createSolverClient({
    baseUrl: url,
    key: KEY,
    dialect: protocol === 'create-task' ? '2captcha' : 'captchaai',
    protocol,
    retry: { maxOverCapRetries: 0, maxTransientRetries: 3, baseBackoffMs: 10, maxBackoffMs: 40 },
  });
  clients.push(solver);
  return { sim, solver };
}

let ids = 0;
const image = (): Task =>
  ({
    id: `poll-many-${++ids}`,
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

async function submitMany(solver: SolverClient, n: number) {
  const submitted = [];
  for (let i = 0; i < n; i++) submitted.push(await solver.submit(image(), { deadlineAt: Date.now() + 10_000 }));
  return submitted;
}

async function untilAll(solver: SolverClient, ids: string[], want: PollState['state']) {
  const targets = ids.map((solverId) => ({ solverId, method: 'userrecaptcha' }));
  for (let round = 0; round < 100; round++) {
    const states = await solver.pollMany(targets);
    if ([...states.values()].every((s) => s.state === want)) return states;
    await new Promise((resolve) => setTimeout(resolve, 30));
  }
  throw new Error(`not every id became ${want}`);
}

describe('submit alone, then which are ready', () => {
  it.each(['res-php', 'create-task'] as const)(
    '%s: says not ready while solving, ready once answered',
    async (protocol) => {
      const { sim, solver } = await start({ medianMs: 150, planThreads: 20 }, protocol);
      const submitted = await submitMany(solver, 5);
      expect(new Set(submitted.map((s) => s.solverId)).size).toBe(5);
      expect(sim.stats().submissions).toBe(5);
      const first = await solver.pollMany(submitted.map((s) => ({ solverId: s.solverId, method: 'userrecaptcha' })));
      expect([...first.keys()].sort()).toEqual(submitted.map((s) => s.solverId).sort());
      const ready = await untilAll(
        solver,
        submitted.map((s) => s.solverId),
        'ready',
      );
      expect(ready.size).toBe(5);
      // Nothing was paid twice: the polls asked, they did not submit.
      expect(sim.stats().submissions).toBe(5);
    },
  );

  it('asks res.php about many ids in one request each hundred', async () => {
    const { sim, solver } = await start({ medianMs: 20, planThreads: 250 });
    const submitted = await submitMany(solver, RES_PHP_IDS_PER_REQUEST + 30);
    await untilAll(
      solver,
      submitted.map((s) => s.solverId),
      'ready',
    );
    const before = sim.stats().resultRequests;
    await solver.pollMany(submitted.map((s) => ({ solverId: s.solverId, method: 'userrecaptcha' })));
    expect(sim.stats().resultRequests - before).toBe(2);
  });

  it('says an unknown id ended, without failing the others', async () => {
    const { solver } = await start({ medianMs: 20, planThreads: 5 });
    const [known] = await submitMany(solver, 1);
    const states = await untilAll(solver, [known?.solverId as string], 'ready');
    expect(states.get(known?.solverId as string)).toEqual({ state: 'ready' });
    const mixed = await solver.pollMany([
      { solverId: known?.solverId as string, method: 'userrecaptcha' },
      { solverId: '999999999', method: 'userrecaptcha' },
    ]);
    expect(mixed.get(known?.solverId as string)).toEqual({ state: 'ready' });
    expect(mixed.get('999999999')).toEqual({ state: 'ended', code: 'ERROR_WRONG_CAPTCHA_ID' });
  });
});
