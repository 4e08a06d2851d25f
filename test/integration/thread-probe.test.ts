/**
 * The governor's probe in the parked design holds a thread lease (functions/governor/thread-probe.ts):
 * taken before it submits, at an index no consumer takes, live while the solver may hold its
 * thread, released once the solver refused or answered it. On dynalite, through the real SDK;
 * the solver is scripted (the probe's answers are what the test is about). And the probe reaches
 * every provider the client speaks, through the real client and the simulator.
 */
import { describe, expect, it } from 'vitest';
import { createDynamoThreadLeases } from '../../functions/adapters/thread-leases.js';
import type { SolveOptions, SolverPort } from '../../functions/core/ports.js';
import type { Task } from '../../functions/core/task.js';
import {
  freeSlotIndexes,
  LEASE_SHARD_SLOTS,
  liveHeld,
  PROBE_SLOT_BASE,
  roomInShard,
} from '../../functions/core/thread-leases.js';
import type { ThreadLedgerRecorder } from '../../functions/core/thread-ledger.js';
import { createThreadProbe } from '../../functions/governor/thread-probe.js';
import { leasesTableOnEmulators } from '../helpers/fleet-fixture.js';
import { simulatedSolvers } from '../helpers/simulated-solver.js';

const emulated = leasesTableOnEmulators();

/** A ledger that only counts what the probe tells it. */
function countingLedger() {
  const events: string[] = [];
  const ledger = {
    accepted: async () => {
      events.push('accepted');
      return { bucket: Number.NaN };
    },
    refused: async () => {
      events.push('refused');
      return 0;
    },
    released: async () => undefined,
    leftOver: async () => undefined,
    leftoverAnswered: async () => undefined,
    recordEvent: async () => undefined,
    read: async () => ({ held: 0, refusals: 0, acceptances: 0 }),
  } as ThreadLedgerRecorder;
  return { ledger, events };
}

/** A solver whose submissions are answered as scripted: accepted (then solved when `finish` is called) or refused. */
function scriptedSolver(outcome: 'accepted' | 'over_cap') {
  const submitted: Task[] = [];
  const finishers: Array<() => void> = [];
  const solver: Pick<SolverPort, 'solve'> = {
    async solve(task: Task, options: SolveOptions) {
      submitted.push(task);
      options.onSolverAnswer?.({ request: 'submit', outcome });
      if (outcome === 'over_cap') throw Object.assign(new Error('ERROR_NO_SLOT_AVAILABLE'), { name: 'OverCapError' });
      await new Promise<void>((resolve) => finishers.push(resolve));
      return { answer: 'probe', solverId: `id-${submitted.length}`, acceptedAt: Date.now() } as never;
    },
  };
  const finishAll = () => {
    for (const finish of finishers.splice(0)) finish();
  };
  return { solver, submitted, finishAll };
}

async function until(check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error('condition not met in 2 s');
}

describe('the governor probe’s thread lease (parked design), on dynalite', () => {
  it('holds a lease while the solver works on an accepted probe: counted held, closing the consumers’ room; freed once answered', async () => {
    // Prepare: a one-thread shard the governor opened (limit 1); the solver accepts the probe.
    const shard = 'probe-accepted#0';
    const leases = createDynamoThreadLeases({
      documents: emulated.fixture.clients.documents,
      tableName: emulated.leasesTable,
    });
    await leases.setLimit(shard, 1);
    const { ledger, events } = countingLedger();
    const scripted = scriptedSolver('accepted');
    const probe = createThreadProbe({ solver: scripted.solver, ledger, leases: { leases, shard } });
    // Act
    await probe.submit(Date.now());
    await until(async () => events.includes('accepted'));
    const during = await leases.view(shard);
    scripted.finishAll();
    await until(async () => probe.inFlight() === 0);
    const after = await leases.view(shard);
    // Assess: one live slot at the probe index, its task the probe's; no consumer index free, no room.
    const now = Date.now();
    expect(during.slots.map((slot) => slot.slot)).toEqual([PROBE_SLOT_BASE]);
    expect(during.slots[0]?.taskId).toBe(scripted.submitted[0]?.id);
    expect(liveHeld([during], now)).toBe(1);
    expect(roomInShard(during, 1, 0, now)).toBe(0);
    expect(PROBE_SLOT_BASE).toBeGreaterThanOrEqual(LEASE_SHARD_SLOTS);
    expect(freeSlotIndexes(during, 1, now, Math.random)).toEqual([0]);
    expect(after.slots).toEqual([]);
    expect(probe.stats()).toEqual({ made: 1, accepted: 1, refused: 0 });
  });

  it('releases the lease at once when the solver refuses the probe over the cap', async () => {
    // Prepare
    const shard = 'probe-refused#0';
    const leases = createDynamoThreadLeases({
      documents: emulated.fixture.clients.documents,
      tableName: emulated.leasesTable,
    });
    const { ledger, events } = countingLedger();
    const scripted = scriptedSolver('over_cap');
    const probe = createThreadProbe({ solver: scripted.solver, ledger, leases: { leases, shard } });
    // Act
    await probe.submit(Date.now());
    await until(async () => probe.inFlight() === 0);
    // Assess
    expect(events).toEqual(['refused']);
    expect(scripted.submitted).toHaveLength(1);
    expect((await leases.view(shard)).slots).toEqual([]);
    expect(probe.stats()).toEqual({ made: 1, accepted: 0, refused: 1 });
  });

  it('takes one lease per probe in flight (two at most), and makes no probe whose lease it cannot take', async () => {
    // Prepare: both probe slots of the shard held already (a crashed governor's, still live).
    const shard = 'probe-held#0';
    const leases = createDynamoThreadLeases({
      documents: emulated.fixture.clients.documents,
      tableName: emulated.leasesTable,
    });
    const scripted = scriptedSolver('accepted');
    const warnings: string[] = [];
    const first = createThreadProbe({
      solver: scripted.solver,
      ledger: countingLedger().ledger,
      leases: { leases, shard },
    });
    // Act: two probes in flight, a third asked for; then another governor's probe on the same shard.
    await first.submit(Date.now());
    await first.submit(Date.now() + 1);
    await first.submit(Date.now() + 2);
    await until(async () => (await leases.view(shard)).slots.length === 2);
    const other = createThreadProbe({
      solver: scripted.solver,
      ledger: countingLedger().ledger,
      leases: { leases, shard },
      warn: (message) => warnings.push(message),
    });
    await other.submit(Date.now() + 3);
    await until(async () => other.inFlight() === 0);
    const held = await leases.view(shard);
    scripted.finishAll();
    await until(async () => first.inFlight() === 0);
    // Assess: two slots, the two probe indexes; three submissions asked, two made; the other governor made none.
    expect(held.slots.map((slot) => slot.slot).sort()).toEqual([PROBE_SLOT_BASE, PROBE_SLOT_BASE + 1]);
    expect(scripted.submitted).toHaveLength(2);
    expect(warnings).toEqual(['governor probe not made: its thread lease could not be taken']);
    expect((await leases.view(shard)).slots).toEqual([]);
    // A probe not made is not counted as one.
    expect(first.stats().made).toBe(2);
    expect(other.stats()).toEqual({ made: 0, accepted: 0, refused: 0 });
  });
});

describe("the governor probe's counts", () => {
  it('counts a probe as made with its first answer, never while it waits for one: made is accepted + refused + failed at any moment', async () => {
    // Prepare: a solver that answers the submission only when told (the simulator under load).
    const answers: Array<(outcome: 'over_cap' | 'transport') => void> = [];
    const solver: Pick<SolverPort, 'solve'> = {
      solve: (_task: Task, options: SolveOptions) =>
        new Promise((_resolve, reject) => {
          answers.push((outcome) => {
            if (outcome === 'over_cap') options.onSolverAnswer?.({ request: 'submit', outcome });
            reject(Object.assign(new Error(outcome === 'over_cap' ? 'ERROR_NO_SLOT_AVAILABLE' : 'socket hang up')));
          });
        }),
    };
    const probe = createThreadProbe({ solver, ledger: countingLedger().ledger });
    // Act: two probes sent, neither answered yet; then one refused, one never answered.
    await probe.submit(Date.now());
    await probe.submit(Date.now() + 1);
    await until(async () => answers.length === 2);
    const waiting = probe.stats();
    answers[0]?.('over_cap');
    await until(async () => probe.inFlight() === 1);
    const oneRefused = probe.stats();
    answers[1]?.('transport');
    await until(async () => probe.inFlight() === 0);
    // Assess
    expect(waiting).toEqual({ made: 0, accepted: 0, refused: 0 });
    expect(oneRefused).toEqual({ made: 1, accepted: 0, refused: 1 });
    expect(probe.stats()).toEqual({ made: 2, accepted: 0, refused: 1 });
  });
});

describe('the governor probe reaches every provider', () => {
  const simulated = simulatedSolvers();

  it.each([
    ['2captcha', 'create-task'],
    ['anti-captcha', 'create-task'],
    ['capmonster', 'create-task'],
    ['capsolver', 'create-task'],
    ['captchaai', 'res-php'],
  ] as const)('%s over %s: refused while others hold the plan, accepted once they leave', async (dialect, protocol) => {
    // Prepare: the real client on the simulator; others hold both threads of a 2-thread plan.
    const { sim, solver } = await simulated({
      seed: 9,
      medianMs: 20,
      dialect,
      protocol,
      planThreads: 2,
      foreignThreads: 2,
      retry: { maxOverCapRetries: 0, maxTransientRetries: 0 },
    });
    const { ledger, events } = countingLedger();
    const probe = createThreadProbe({ solver, ledger });
    // Act: one probe while starved, one after the others left
    await probe.submit(Date.now());
    await until(async () => probe.inFlight() === 0);
    sim.update({ foreignThreads: 0 });
    await probe.submit(Date.now() + 1);
    await until(async () => probe.inFlight() === 0);
    // Assess: both reached the solver (Anti-Captcha, CapMonster and CapSolver have no text
    // type: the probe is an image there; before, the client refused it and nothing was sent)
    expect(sim.stats()).toMatchObject({ submissions: 2, overCapRejections: 1 });
    expect(events).toEqual(['refused', 'accepted']);
    expect(probe.stats()).toEqual({ made: 2, accepted: 1, refused: 1 });
  });
});
