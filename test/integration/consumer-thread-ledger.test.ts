import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDynamoThreadLedger } from '../../functions/adapters/thread-ledger.js';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { SqsTaskQueue } from '../../functions/adapters/task-queue.js';
import { createConsumerHandler } from '../../functions/consumer/create-handler.js';
import type { SolveOptions, SolveOutcome, SolverPort } from '../../functions/core/ports.js';
import { SolverOverCapError } from '../../functions/core/solver-protocol.js';
import type { Task } from '../../functions/core/task.js';
import type { ThreadLedgerRecorder } from '../../functions/core/thread-ledger.js';
import { ThreadTracking } from '../../functions/consumer/thread-tracking.js';
import { deliver, sendMessage, sleep, startEmulatorFixture, type EmulatorFixture } from '../helpers/fleet-fixture.js';
import { captureLogs, captureMetrics, imageTask } from '../helpers/factories.js';
import { simulatedSolvers } from '../helpers/simulated-solver.js';

let fixture: EmulatorFixture;
const simulated = simulatedSolvers();

beforeAll(async () => {
  fixture = await startEmulatorFixture();
});
afterAll(async () => {
  await fixture?.stop();
});

/**
 * A solver that holds every accepted task until `release()` and refuses the tasks named in
 * `refuse` over the cap, reporting each answer through `onSolverAnswer` as the real client does.
 */
class GatedSolver implements SolverPort {
  private open!: () => void;
  private readonly gate = new Promise<void>((resolve) => {
    this.open = resolve;
  });
  /** Before refusing, wait until this holds (so the refusal sees the others' threads). */
  beforeRefusal: () => Promise<void> = async () => undefined;
  constructor(private readonly refuse: Set<string>) {}
  release(): void {
    this.open();
  }
  async solve(task: Task, options: SolveOptions): Promise<SolveOutcome> {
    if (this.refuse.has(task.id)) {
      await this.beforeRefusal();
      options.onSolverAnswer?.({ request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' });
      throw new SolverOverCapError('ERROR_NO_SLOT_AVAILABLE', { taskId: task.id, message: 'no slot' });
    }
    options.onSolverAnswer?.({ request: 'submit', outcome: 'accepted' });
    await options.onSubmitted?.(`sid-${task.id}`);
    const acceptedAt = Date.now();
    await this.gate;
    options.onSolverAnswer?.({ request: 'result', outcome: 'answered' });
    return {
      answer: `answer-${task.id}`,
      solverId: `sid-${task.id}`,
      acceptedAt,
      answeredAt: Date.now(),
      resultRequests: 1,
      retries: { overCap: 0, transient: 0 },
    };
  }
  async getBalance(): Promise<number> {
    return 10;
  }
  async reportBad(): Promise<void> {}
  async reportGood(): Promise<void> {}
}

async function harness(solver: SolverPort, ledger?: ThreadLedgerRecorder) {
  const fleet = await fixture.createFleet({ tasksPerInvocation: 3, solveDeadlineSeconds: 10 });
  const logs = captureLogs();
  const threadLedger =
    ledger ??
    createDynamoThreadLedger({
      documents: fleet.clients.documents,
      tableName: fleet.resources.tables.governor,
      leaseMs: 60_000,
    });
  const handler = createConsumerHandler({
    solver,
    repository: new DynamoResultsRepository({
      documents: fleet.clients.documents,
      tableName: fleet.resources.tables.results,
      ttlSeconds: fleet.settings.resultTtlSeconds,
    }),
    queue: new SqsTaskQueue({
      sqs: fleet.clients.sqs,
      dlqUrl: fleet.resources.queueUrls.dlq,
      sourceQueueUrls: [fleet.resources.queueUrls.normal],
    }),
    metrics: captureMetrics(fleet.settings.metricsNamespace).metrics,
    logger: logs.logger,
    settings: fleet.settings,
    timing: {
      retryBaseSeconds: 0,
      retryMaxSeconds: 0,
      overCapWaiting: { pollMs: 20, maxWaitMs: 3_000, maxWaits: 1 },
    },
    threadLedger,
  });
  const reader = createDynamoThreadLedger({
    documents: fleet.clients.documents,
    tableName: fleet.resources.tables.governor,
    leaseMs: 60_000,
  });
  return { fleet, handler, reader, logs };
}

async function until(check: () => Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await sleep(20);
  }
}

describe('consumer → thread ledger on dynalite', () => {
  it('frees the thread of an answer the submission itself carried (CapSolver images): none left over', async () => {
    // Prepare: the real client on the simulator speaking CapSolver, which answers ImageToText in createTask's response
    const { sim, solver } = await simulated({ seed: 3, medianMs: 20, dialect: 'capsolver', protocol: 'create-task' });
    const h = await harness(solver);
    const tasks = [imageTask(), imageTask(), imageTask()];
    for (const task of tasks)
      await sendMessage(h.fleet.clients, h.fleet.resources.queueUrls.normal, JSON.stringify(task));
    // Act
    await deliver(h.fleet, h.handler, { max: 3 });
    const after = await h.reader.read();
    h.logs.restore();
    // Assess: three accepted and answered at once, no result request; every thread free again
    // (before, each stayed counted as a leftover until its lease aged out: held 3)
    expect(sim.stats()).toMatchObject({ solved: 3, resultRequests: 0 });
    expect(after).toMatchObject({ held: 0, acceptances: 3 });
    expect(after?.leftover ?? 0).toBe(0);
  });

  it('records an over-cap answer with the threads the fleet held then, waits for them to free before submitting again, and frees every thread', async () => {
    // Prepare: a batch of three; two are accepted and held, the third is refused while they hold
    const [a, b, c] = [imageTask(), imageTask(), imageTask()];
    const solver = new GatedSolver(new Set([c.id as string]));
    const h = await harness(solver);
    solver.beforeRefusal = async () => {
      solver.beforeRefusal = async () => undefined;
      await until(async () => (await h.reader.read())?.held === 2);
    };
    for (const task of [a, b, c])
      await sendMessage(h.fleet.clients, h.fleet.resources.queueUrls.normal, JSON.stringify(task));
    // Act
    const delivery = deliver(h.fleet, h.handler, { max: 3 });
    await until(async () => (await h.reader.read())?.refusals === 1);
    const whileHeld = await h.reader.read();
    solver.release();
    await delivery;
    const after = await h.reader.read();
    h.logs.restore();
    // Assess
    expect(whileHeld?.held).toBe(2);
    expect(whileHeld?.lastRefusal?.held).toBe(2);
    // The refused task waited for the two threads to free, then was refused once more (this
    // solver always refuses it) while the fleet held none, and went back to the queue.
    expect(after).toMatchObject({ held: 0, refusals: 2, acceptances: 2, lastRefusal: { held: 0 } });
    expect(after?.lastAcceptance?.held).toBeLessThanOrEqual(1);
  });

  it('solves on when the ledger cannot be written, and says so in the log', async () => {
    // Prepare: a ledger on a table that does not exist
    const solver = new GatedSolver(new Set());
    solver.release();
    const broken = createDynamoThreadLedger({
      documents: fixture.clients.documents,
      tableName: 'no-such-ledger-table',
      leaseMs: 60_000,
    });
    const h = await harness(solver, broken);
    const task = imageTask();
    await sendMessage(h.fleet.clients, h.fleet.resources.queueUrls.normal, JSON.stringify(task));
    // Act
    const delivery = await deliver(h.fleet, h.handler, { max: 1 });
    h.logs.restore();
    // Assess
    expect(delivery.acknowledged).toHaveLength(1);
    expect(h.logs.entries().some((e) => String(e.message).startsWith('thread ledger not written'))).toBe(true);
  });
});

describe('the spend grant across invocations, on dynalite', () => {
  const silent = { warn: () => undefined };
  const waiting = { pollMs: 20, maxWaitMs: 200, maxWaits: 1 };
  /** The thread ledger of a fleet of its own, on dynalite. */
  const freshLedger = async () => {
    const fleet = await fixture.createFleet();
    return createDynamoThreadLedger({
      documents: fleet.clients.documents,
      tableName: fleet.resources.tables.governor,
      leaseMs: 60_000,
    });
  };

  /**
   * The parked design's check before a submission, as TaskRun.room runs it: the grant checked,
   * (the thread lease taken here), then the reservation; one others took first sends the delivery
   * back to wait for a new grant (its lease given back).
   */
  const passes = async (delivery: ThreadTracking) => {
    for (;;) {
      if (!(await delivery.waitForGrant(Date.now() + 10_000))) return false;
      if (await delivery.reserveLeased()) return true;
    }
  };

  it('lets through exactly the solves a grant pays for though every invocation reads the ledger at once; one ended unaccepted gives its reservation back', async () => {
    // GIVEN a grant of two more solves, and six invocations (no gate between them) checking it at once
    const ledger = await freshLedger();
    const start = await ledger.read();
    await ledger.setGrant({ limit: (start?.grantTaken ?? 0) + 2, until: Date.now() + 60_000 });
    const invocations = Array.from({ length: 6 }, () => new ThreadTracking(ledger, Date.now, silent, waiting, 20));
    // WHEN each waits for the grant before its submission
    const passed = await Promise.all(invocations.map(passes));
    // THEN two pass; four wait out their bound (their tasks go back without a submission)
    expect(passed.filter(Boolean)).toHaveLength(2);
    // AND the one whose submission is accepted keeps its reservation spent; the one that ends
    // without a submission gives it back, and the next invocation takes it
    const [spent, unsent] = invocations.filter((_, i) => passed[i]) as [ThreadTracking, ThreadTracking];
    spent.onAnswer({ request: 'submit', outcome: 'accepted' });
    await spent.settle();
    await unsent.settle();
    expect((await ledger.read())?.grantTaken).toBe(1);
    expect(await passes(new ThreadTracking(ledger, Date.now, silent, waiting, 20))).toBe(true);
    expect(await passes(new ThreadTracking(ledger, Date.now, silent, waiting, 20))).toBe(false);
  });

  it('takes no reservation before the lease: the check lets a delivery through unreserved, its reservation comes with the lease', async () => {
    // GIVEN a grant of one
    const ledger = await freshLedger();
    await ledger.setGrant({ limit: 1, until: Date.now() + 60_000 });
    const delivery = new ThreadTracking(ledger, Date.now, silent, waiting, 20);
    // WHEN a delivery passes the check (and would wait for a slot now)
    expect(await delivery.waitForGrant(Date.now() + 10_000)).toBe(true);
    // THEN it holds no reservation while it has no lease: the grant counts it nowhere yet
    expect((await ledger.read())?.grantTaken).toBe(0);
    // AND with its lease held it takes the one the grant has
    expect(await delivery.reserveLeased()).toBe(true);
    expect((await ledger.read())?.grantTaken).toBe(1);
  });

  it('has a delivery refused over the cap give its reservation back while it waits for a slot, and take one again with it', async () => {
    // GIVEN a grant of one, taken by a delivery whose submission the solver refused (others held the thread)
    const ledger = await freshLedger();
    await ledger.setGrant({ limit: 1, until: Date.now() + 60_000 });
    const delivery = new ThreadTracking(ledger, Date.now, silent, waiting, 20);
    expect(await passes(delivery)).toBe(true);
    delivery.onAnswer({ request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' });
    // WHEN it checks the grant again before its next submission (its lease was given back at the refusal)
    expect(await delivery.waitForGrant(Date.now() + 10_000)).toBe(true);
    // THEN its reservation went back while it has no lease
    expect((await ledger.read())?.grantTaken).toBe(0);
    // AND with a lease again it takes one, the grant's only one: no other delivery gets through
    expect(await delivery.reserveLeased()).toBe(true);
    expect((await ledger.read())?.grantTaken).toBe(1);
    expect(await passes(new ThreadTracking(ledger, Date.now, silent, waiting, 20))).toBe(false);
  });
});
