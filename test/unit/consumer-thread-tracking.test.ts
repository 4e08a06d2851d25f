import { describe, expect, it } from 'vitest';
import { createMemoryThreadLedger } from '../../functions/adapters/thread-ledger.js';
import { ThreadTracking } from '../../functions/consumer/thread-tracking.js';
import { REFUSAL_HOLD_OFF_MS } from '../../functions/core/thread-ledger.js';

const silent = { warn: () => undefined };

/** The waits of a delivery on a fake clock: 100 ms polls (no jitter), 2 s bound; a sleep moves the clock. */
function waitingOn(now: { t: number }) {
  return {
    pollMs: 100,
    maxWaitMs: 2_000,
    maxWaits: 2,
    random: () => 0.5,
    sleep: async (ms: number) => {
      now.t += ms;
    },
  };
}

/** A parked delivery's tracking on `ledger` (waits as `waitingOn`, a plan of 20, the leases' count 0). */
function parkedDelivery(ledger: ConstructorParameters<typeof ThreadTracking>[0], now: { t: number }): ThreadTracking {
  return new ThreadTracking(
    ledger,
    () => now.t,
    silent,
    waitingOn(now),
    20,
    () => 0,
  );
}

function setup(held: number) {
  const now = { t: 1_000_000 };
  const ledger = createMemoryThreadLedger({ leaseMs: 60_000, clock: () => now.t });
  const sleeps: number[] = [];
  let onSleep: () => Promise<void> = async () => undefined;
  const tracking = new ThreadTracking(ledger, () => now.t, silent, {
    pollMs: 100,
    maxWaitMs: 2_000,
    maxWaits: 2,
    random: () => 0.5,
    sleep: async (ms) => {
      sleeps.push(ms);
      now.t += ms;
      await onSleep();
    },
  });
  return {
    now,
    ledger,
    sleeps,
    tracking,
    onSleep: (fn: () => Promise<void>) => {
      onSleep = fn;
    },
    async hold() {
      const leases = [];
      for (let i = 0; i < held; i++) leases.push(await ledger.accepted(now.t));
      return leases;
    },
  };
}

describe('a refused invocation waits for a thread', () => {
  it('submits again once one of the fleet threads frees, not before', async () => {
    // Prepare: 6 held, this invocation refused
    const s = setup(6);
    const leases = await s.hold();
    s.tracking.onAnswer({ request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' });
    // a thread frees after the third poll
    let polls = 0;
    s.onSleep(async () => {
      polls += 1;
      if (polls === 3) await s.ledger.released(leases[0] as (typeof leases)[number]);
    });
    // Act
    const again = await s.tracking.waitForFreeThread(s.now.t + 10_000);
    // Assess
    expect(again).toBe(true);
    expect(s.sleeps).toEqual([100, 100, 100]);
  });

  it('gives up a wait after maxWaitMs (a neighbour may have freed a thread) and hands back after maxWaits', async () => {
    // Prepare: nothing of ours frees
    const s = setup(6);
    await s.hold();
    s.tracking.onAnswer({ request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' });
    // Act
    const results = [
      await s.tracking.waitForFreeThread(s.now.t + 60_000),
      await s.tracking.waitForFreeThread(s.now.t + 60_000),
      await s.tracking.waitForFreeThread(s.now.t + 60_000),
    ];
    // Assess: two waits of 2 s each, then the task goes back to the queue
    expect(results).toEqual([true, true, false]);
    expect(s.sleeps.reduce((a, b) => a + b, 0)).toBe(4_000);
  });

  it('does not wait past the solve deadline', async () => {
    const s = setup(6);
    await s.hold();
    s.tracking.onAnswer({ request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' });
    expect(await s.tracking.waitForFreeThread(s.now.t + 10)).toBe(false);
    expect(s.sleeps).toEqual([]);
  });

  it('does not wait without a ledger', async () => {
    const tracking = new ThreadTracking(undefined, () => 0, silent, { pollMs: 100, maxWaitMs: 2_000, maxWaits: 3 });
    expect(await tracking.waitForFreeThread(10_000)).toBe(false);
  });
});

describe('solves counted with the thread they free', () => {
  it('counts an answer read, not a captcha the solver failed, and frees both threads', async () => {
    // Prepare: two deliveries' submissions accepted
    const s = setup(0);
    const solvedOne = new ThreadTracking(s.ledger, () => s.now.t, silent);
    const failedOne = new ThreadTracking(s.ledger, () => s.now.t, silent);
    solvedOne.onAnswer({ request: 'submit', outcome: 'accepted' });
    failedOne.onAnswer({ request: 'submit', outcome: 'accepted' });
    // Act
    solvedOne.onAnswer({ request: 'result', outcome: 'not_ready', code: 'CAPCHA_NOT_READY' });
    solvedOne.onAnswer({ request: 'result', outcome: 'answered' });
    failedOne.onAnswer({ request: 'result', outcome: 'task_terminal', code: 'ERROR_CAPTCHA_UNSOLVABLE' });
    await Promise.all([solvedOne.settle(), failedOne.settle()]);
    // Assess
    expect(await s.ledger.read()).toMatchObject({ held: 0, acceptances: 2, solved: 1 });
  });

  it('keeps the thread of a submission handed back unanswered counted, as a leftover, and counts no solve', async () => {
    // Prepare: accepted, then the delivery ends (deadline, outage) with the solver still at work.
    const s = setup(0);
    const tracking = new ThreadTracking(s.ledger, () => s.now.t, silent);
    tracking.onAnswer({ request: 'submit', outcome: 'accepted' });
    tracking.submitted('4711');
    // Act
    await tracking.settle();
    // Assess: the solver still holds it, so the ledger does too (the next invocation must not submit on top).
    const reading = await s.ledger.read();
    expect(reading?.held).toBe(1);
    expect(reading?.leftover).toBe(1);
    expect(reading).not.toHaveProperty('solved');
  });

  it('frees a leftover when the delivery that resumes its solver id reads the answer, once', async () => {
    // Prepare: a delivery left submission 4711 unanswered.
    const s = setup(0);
    const first = new ThreadTracking(s.ledger, () => s.now.t, silent);
    first.onAnswer({ request: 'submit', outcome: 'accepted' });
    first.submitted('4711');
    await first.settle();
    // Act: the next delivery resumes 4711 and reads its answer; a duplicate resumer reads it too.
    const second = new ThreadTracking(s.ledger, () => s.now.t, silent);
    second.resuming('4711');
    second.onAnswer({ request: 'result', outcome: 'answered' });
    await second.settle();
    const duplicate = new ThreadTracking(s.ledger, () => s.now.t, silent);
    duplicate.resuming('4711');
    duplicate.onAnswer({ request: 'result', outcome: 'answered' });
    await duplicate.settle();
    // Assess
    const reading = await s.ledger.read();
    expect(reading?.held).toBe(0);
    expect(reading).not.toHaveProperty('leftover');
  });

  it('waits before submitting while the fleet holds every thread of the plan, leftovers included', async () => {
    // Prepare: a plan of 3, all held (one of them a leftover the solver still works on).
    const s = setup(3);
    const leases = await s.hold();
    await s.ledger.leftOver(leases[2] as (typeof leases)[number], '99');
    const tracking = new ThreadTracking(
      s.ledger,
      () => s.now.t,
      silent,
      {
        pollMs: 100,
        maxWaitMs: 2_000,
        maxWaits: 2,
        random: () => 0.5,
        sleep: async (ms) => {
          s.now.t += ms;
          if (s.now.t >= 1_000_300) await s.ledger.leftoverAnswered('99');
        },
      },
      3,
    );
    // Act
    const room = await tracking.waitForRoom(s.now.t + 10_000);
    // Assess: it submitted only once the leftover was answered (a thread freed), not into a refusal.
    expect(room).toBe(true);
    expect(s.now.t).toBeGreaterThanOrEqual(1_000_300);
    expect((await s.ledger.read())?.held).toBe(2);
  });

  /** A tracking for a plan of `cap` whose room waits sleep `pollMs` at a time. */
  const roomTracking = (s: ReturnType<typeof setup>, cap: number, onSleep?: () => Promise<void>) =>
    new ThreadTracking(
      s.ledger,
      () => s.now.t,
      silent,
      {
        pollMs: 100,
        maxWaitMs: 2_000,
        maxWaits: 2,
        random: () => 0.5,
        sleep: async (ms) => {
          s.sleeps.push(ms);
          s.now.t += ms;
          await onSleep?.();
        },
      },
      cap,
    );

  it('hands the task back after maxWaitMs when leftovers fill the plan (their tasks must come back to free them)', async () => {
    // Prepare: a plan of 2, both threads leftovers of submissions handed back unanswered.
    const s = setup(2);
    const leases = await s.hold();
    for (const [i, lease] of leases.entries()) await s.ledger.leftOver(lease, `left-${i}`);
    // Act
    const room = await roomTracking(s, 2).waitForRoom(s.now.t + 60_000);
    // Assess: 2 s of waiting, not 60, and no submission.
    expect(room).toBe(false);
    expect(s.sleeps.reduce((a, b) => a + b, 0)).toBe(2_000);
  });

  it('waits past maxWaitMs, up to its deadline, while the fleet’s own solves fill the room (one frees as it ends)', async () => {
    // Prepare: a plan of 2, both threads held by live solves; one ends after 5 s.
    const s = setup(2);
    const leases = await s.hold();
    const start = s.now.t;
    const tracking = roomTracking(s, 2, async () => {
      if (s.now.t - start >= 5_000 && (await s.ledger.read())?.held === 2)
        await s.ledger.released(leases[0] as (typeof leases)[number]);
    });
    // Act
    const room = await tracking.waitForRoom(start + 60_000);
    // Assess: it took the thread when it freed, 5 s in (past the 2 s bound), without going back.
    expect(room).toBe(true);
    expect(s.now.t - start).toBeGreaterThanOrEqual(5_000);
    expect(s.now.t - start).toBeLessThan(6_000);
  });

  it('never waits past its deadline, even for the fleet’s own solves', async () => {
    // Prepare: both threads held by solves that outlast the deadline.
    const s = setup(2);
    await s.hold();
    // Act
    const room = await roomTracking(s, 2).waitForRoom(s.now.t + 10_000);
    // Assess
    expect(room).toBe(false);
    expect(s.sleeps.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(10_000);
  });

  it('holds off right after another invocation was refused at the threads the fleet holds (fleet-wide refusal signal)', async () => {
    // Prepare: a plan of 10; the fleet holds 6 and one invocation was just refused there (a neighbour holds the rest).
    const s = setup(6);
    const leases = await s.hold();
    await s.ledger.refused(s.now.t);
    let polls = 0;
    const tracking = roomTracking(s, 10, async () => {
      polls += 1;
      if (polls === 4) await s.ledger.released(leases[0] as (typeof leases)[number]);
    });
    // Act
    const room = await tracking.waitForRoom(s.now.t + 60_000);
    // Assess: no submission into the refusal while 6 are held; one once a thread of ours freed.
    expect(room).toBe(true);
    expect(polls).toBe(4);
  });

  it('does not hold off on a refusal an acceptance has since followed, nor on one older than the hold-off', async () => {
    // Prepare: refused at 6 held, then an acceptance (a thread came back).
    const s = setup(6);
    await s.hold();
    await s.ledger.refused(s.now.t);
    s.now.t += 10;
    await s.ledger.accepted(s.now.t);
    // Act + Assess: room at once (7 of 10 held).
    expect(await roomTracking(s, 10).waitForRoom(s.now.t + 60_000)).toBe(true);
    expect(s.sleeps).toEqual([]);
    // Prepare: a fresh refusal at 7 held, then the hold-off passes without an acceptance.
    await s.ledger.refused(s.now.t);
    s.now.t += REFUSAL_HOLD_OFF_MS + 1;
    // Act + Assess
    expect(await roomTracking(s, 10).waitForRoom(s.now.t + 60_000)).toBe(true);
    expect(s.sleeps).toEqual([]);
  });

  it('waits while the governor’s spend grant is used up, and submits once a new grant pays for a solve', async () => {
    // Prepare: 2 of 10 held; the grant, counted in reservations, is used up (none left of it).
    const s = setup(2);
    await s.hold();
    await s.ledger.setGrant({ limit: 0, until: s.now.t + 60_000 });
    let polls = 0;
    const tracking = roomTracking(s, 10, async () => {
      polls += 1;
      if (polls === 3) await s.ledger.setGrant({ limit: 1, until: s.now.t + 60_000 });
    });
    // Act
    const room = await tracking.waitForRoom(s.now.t + 60_000);
    // Assess: no submission while the money above the pause level was spoken for.
    expect(room).toBe(true);
    expect(polls).toBe(3);
  });

  it('hands the task back without a submission when the grant stays used up, and ignores a lapsed one', async () => {
    // Prepare: a grant used up (no reservation left of it)
    const s = setup(1);
    await s.hold();
    await s.ledger.setGrant({ limit: 0, until: s.now.t + 60_000 });
    // Act + Assess: used up for the whole wait.
    expect(await roomTracking(s, 10).waitForRoom(s.now.t + 60_000)).toBe(false);
    // Act + Assess: a grant the governor stopped renewing no longer holds anyone.
    s.now.t += 60_001;
    expect(await roomTracking(s, 10).waitForRoom(s.now.t + 60_000)).toBe(true);
  });

  it('hands back at once when refused while the fleet holds no thread (others hold the whole plan)', async () => {
    // Prepare: nothing held, this invocation refused.
    const s = setup(0);
    s.tracking.onAnswer({ request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' });
    // Act
    const again = await s.tracking.waitForFreeThread(s.now.t + 10_000);
    // Assess: no wait (a retry would be refused again); the governor probes instead.
    expect(again).toBe(false);
    expect(s.sleeps).toEqual([]);
  });

  it('waits for the fleet’s one thread when refused while holding it (two invocations sharing the one free thread)', async () => {
    // Prepare: one thread held by the other invocation; this one refused.
    const s = setup(1);
    const [lease] = await s.hold();
    s.tracking.onAnswer({ request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' });
    s.onSleep(async () => {
      if ((await s.ledger.read())?.held === 1) await s.ledger.released(lease as NonNullable<typeof lease>);
    });
    // Act
    const again = await s.tracking.waitForFreeThread(s.now.t + 10_000);
    // Assess: it submits again once that thread freed.
    expect(again).toBe(true);
    expect(s.sleeps.length).toBeGreaterThan(0);
  });
});

describe('a parked invocation reads the spend grant before a fresh submission', () => {
  it('submits at once without a grant or with one that pays for a solve', async () => {
    const s = setup(0);
    expect(await s.tracking.waitForGrant(s.now.t + 60_000)).toBe(true);
    await s.ledger.setGrant({ limit: 1, until: s.now.t + 60_000 });
    expect(await s.tracking.waitForGrant(s.now.t + 60_000)).toBe(true);
    expect(s.sleeps).toEqual([]);
  });

  it('waits while the grant is used up and submits once a new one pays for a solve', async () => {
    // Prepare: a grant of 0 more acceptances; the governor grants one on the third poll.
    const s = setup(0);
    await s.ledger.setGrant({ limit: 0, until: s.now.t + 60_000 });
    let polls = 0;
    s.onSleep(async () => {
      polls += 1;
      if (polls === 3) await s.ledger.setGrant({ limit: 1, until: s.now.t + 60_000 });
    });
    // Act + Assess
    expect(await s.tracking.waitForGrant(s.now.t + 60_000)).toBe(true);
    expect(polls).toBe(3);
  });

  it('hands the task back after maxWaitMs, or sooner at its deadline, while the grant stays used up', async () => {
    const s = setup(0);
    await s.ledger.setGrant({ limit: 0, until: s.now.t + 600_000 });
    const started = s.now.t;
    expect(await s.tracking.waitForGrant(s.now.t + 60_000)).toBe(false);
    expect(s.now.t - started).toBe(2_000);
    const again = s.now.t;
    expect(await s.tracking.waitForGrant(s.now.t + 500)).toBe(false);
    expect(s.now.t - again).toBe(400);
  });

  it('waits on a ledger it cannot read while the last reading showed a grant in force, until that grant lapses', async () => {
    // Prepare: a ledger that reads, then is throttled; a grant with room left, in force for 30 s
    const now = { t: 1_000_000 };
    const memory = createMemoryThreadLedger({ leaseMs: 60_000, clock: () => now.t });
    let readable = true;
    const flaky = {
      ...memory,
      read: async () => {
        if (!readable) throw new Error('ProvisionedThroughputExceededException');
        return memory.read();
      },
    };
    await memory.setGrant({ limit: 5, until: now.t + 30_000 });
    const delivery = () => parkedDelivery(flaky, now);
    expect(await delivery().waitForGrant(now.t + 60_000)).toBe(true);
    // Act: the ledger is throttled
    readable = false;
    const started = now.t;
    const throttled = await delivery().waitForGrant(now.t + 60_000);
    // Assess: no submission that no reservation counts; it waited out its bound (the task goes back)
    expect(throttled).toBe(false);
    expect(now.t - started).toBe(2_000);
    // Act + Assess: the grant lapsed (a governor that cannot read the ledger either lets it): no wait
    now.t = 1_000_000 + 30_001;
    expect(await delivery().waitForGrant(now.t + 60_000)).toBe(true);
  });

  it('does not wait on a ledger it cannot read', async () => {
    const unreadable = {
      ...createMemoryThreadLedger({ leaseMs: 60_000 }),
      read: async () => {
        throw new Error('ProvisionedThroughputExceededException');
      },
    };
    const tracking = new ThreadTracking(unreadable, () => 1_000_000, silent, {
      pollMs: 100,
      maxWaitMs: 2_000,
      maxWaits: 2,
      sleep: async () => {
        throw new Error('no wait expected');
      },
    });
    expect(await tracking.waitForGrant(1_060_000)).toBe(true);
  });
});

describe('a batch’s deliveries share the spend grant through its reservations', () => {
  /** `count` deliveries of one invocation on one ledger, the parked design (held from the leases). */
  function batch(count: number) {
    const now = { t: 1_000_000 };
    const ledger = createMemoryThreadLedger({ leaseMs: 60_000, clock: () => now.t });
    const deliveries = Array.from({ length: count }, () => parkedDelivery(ledger, now));
    /** The parked design's check before a submission (TaskRun.room): the grant, (the lease), the reservation. */
    const passes = async (delivery: ThreadTracking | undefined) => {
      if (delivery === undefined) throw new Error('no such delivery');
      for (;;) {
        if (!(await delivery.waitForGrant(now.t + 60_000))) return false;
        if (await delivery.reserveLeased()) return true;
      }
    };
    return { now, ledger, deliveries, passes };
  }

  it('lets exactly the solves the grant pays for through, though all read the ledger at once', async () => {
    // Prepare: 5 deliveries, a grant of 2 more solves.
    const b = batch(5);
    await b.ledger.setGrant({ limit: 2, until: b.now.t + 60_000 });
    // Act
    const passed = await Promise.all(b.deliveries.map(b.passes));
    // Assess: two submit; three wait out their bound (their tasks go back without a submission).
    expect(passed.filter(Boolean)).toHaveLength(2);
    expect((await b.ledger.read())?.grantTaken).toBe(2);
  });

  it('keeps an accepted submission’s reservation spent; the next delivery takes the last one, the third waits', async () => {
    // Prepare: a grant of 2; one delivery passes and is accepted.
    const b = batch(3);
    await b.ledger.setGrant({ limit: 2, until: b.now.t + 60_000 });
    expect(await b.passes(b.deliveries[0])).toBe(true);
    b.deliveries[0]?.onAnswer({ request: 'submit', outcome: 'accepted' });
    await b.deliveries[0]?.settle();
    // Assess: its reservation stays taken; one more passes, the third waits.
    expect((await b.ledger.read())?.grantTaken).toBe(1);
    expect(await b.passes(b.deliveries[1])).toBe(true);
    expect(await b.passes(b.deliveries[2])).toBe(false);
  });

  it('gives back the reservation of a delivery refused over the cap or ending without a submission', async () => {
    // Prepare
    const b = batch(2);
    await b.ledger.setGrant({ limit: 1, until: b.now.t + 60_000 });
    expect(await b.passes(b.deliveries[0])).toBe(true);
    // Act: refused, and it ends; then the other passes, and ends (no submission accepted)
    b.deliveries[0]?.onAnswer({ request: 'submit', outcome: 'over_cap', code: 'ERROR_NO_SLOT_AVAILABLE' });
    await b.deliveries[0]?.settle();
    expect(await b.passes(b.deliveries[1])).toBe(true);
    await b.deliveries[1]?.settle();
    // Assess
    expect((await b.ledger.read())?.grantTaken).toBe(0);
  });
});

describe('a reservation the ledger does not write (it answers the read, refuses the write)', () => {
  /** A ledger whose reservation writes fail while `failing` says so; a grant of 5 with none taken. */
  async function refusingWrites() {
    const now = { t: 1_000_000 };
    const memory = createMemoryThreadLedger({ leaseMs: 60_000, clock: () => now.t });
    const state = { failing: true, attempts: 0 };
    const ledger = {
      ...memory,
      takeGrant: async () => {
        state.attempts += 1;
        if (state.failing) throw new Error('ProvisionedThroughputExceededException');
        return (await memory.takeGrant?.()) ?? false;
      },
    };
    await memory.setGrant({ limit: 5, until: now.t + 600_000 });
    const delivery = () => parkedDelivery(ledger, now);
    return { now, memory, state, delivery };
  }

  it('submits nothing the grant does not count: the parked delivery gives its lease back and tries again a poll later', async () => {
    // Prepare
    const r = await refusingWrites();
    const tracking = r.delivery();
    const deadlineAt = r.now.t + 10_000;
    /** TaskRun.room's order: the grant, (the lease), the reservation; its lease given back between. */
    const passes = async () => {
      for (let rounds = 0; ; rounds++) {
        if (!(await tracking.waitForGrant(deadlineAt))) return { passed: false, rounds };
        if (await tracking.reserveLeased()) return { passed: true, rounds };
      }
    };
    // Act: the writes keep failing up to the delivery's deadline
    const started = r.now.t;
    const throttled = await passes();
    // Assess: never through; every try a poll apart, until the deadline; nothing reserved
    expect(throttled.passed).toBe(false);
    expect(r.state.attempts).toBe(throttled.rounds);
    expect(r.now.t - started).toBeGreaterThanOrEqual(10_000 - 100);
    expect(r.state.attempts).toBeLessThanOrEqual(100);
    expect((await r.memory.read())?.grantTaken).toBe(0);
  });

  it('takes the reservation once the ledger writes again, a poll after the write that failed', async () => {
    const r = await refusingWrites();
    const tracking = r.delivery();
    expect(await tracking.waitForGrant(r.now.t + 60_000)).toBe(true);
    expect(await tracking.reserveLeased()).toBe(false);
    r.state.failing = false;
    const before = r.now.t;
    expect(await tracking.waitForGrant(r.now.t + 60_000)).toBe(true);
    expect(r.now.t - before).toBe(100);
    expect(await tracking.reserveLeased()).toBe(true);
    expect((await r.memory.read())?.grantTaken).toBe(1);
  });

  it('waits out its bound in the waiting design, which reserves as it reads, and hands the task back', async () => {
    const r = await refusingWrites();
    const started = r.now.t;
    expect(await r.delivery().waitForRoom(r.now.t + 60_000)).toBe(false);
    expect(r.now.t - started).toBe(2_000);
    expect((await r.memory.read())?.grantTaken).toBe(0);
    r.state.failing = false;
    expect(await r.delivery().waitForRoom(r.now.t + 60_000)).toBe(true);
    expect((await r.memory.read())?.grantTaken).toBe(1);
  });
});

describe('a parked delivery that reads an answer itself', () => {
  it('adds the solve to the ledger’s solved count (the watch counts the ones it records)', async () => {
    // Prepare: the parked design (held threads from the leases), a resumed submission
    const now = { t: 1_000_000 };
    const ledger = createMemoryThreadLedger({ leaseMs: 60_000, clock: () => now.t });
    const tracking = new ThreadTracking(
      ledger,
      () => now.t,
      silent,
      undefined,
      10,
      () => 3,
    );
    // Act: its answer is read, and another delivery's task failed
    tracking.onAnswer({ request: 'result', outcome: 'answered' });
    tracking.onAnswer({ request: 'result', outcome: 'task_terminal', code: 'ERROR_CAPTCHA_UNSOLVABLE' });
    await tracking.settle();
    // Assess: one solve counted, no thread released from the ledger's own buckets
    const reading = await ledger.read();
    expect(reading?.solved).toBe(1);
    expect(reading?.held).toBe(0);
  });
});

describe('a parked delivery refused over the cap', () => {
  it('records the refusal with the exact count of the fleet’s leases, at the time of the answer, and an acceptance with the scaled one', async () => {
    // Prepare: the parked design; the scaled count a take saw is 21, the exact count 14 (read later)
    const now = { t: 1_000_000 };
    const ledger = createMemoryThreadLedger({ leaseMs: 60_000, clock: () => now.t });
    let release: (count: number) => void = () => undefined;
    const exact = new Promise<number>((resolve) => {
      release = resolve;
    });
    const tracking = new ThreadTracking(
      ledger,
      () => now.t,
      silent,
      undefined,
      100,
      () => 21,
      () => exact,
    );
    // Act: refused at 1 000 000; the shards' reads answer 30 ms later
    tracking.onAnswer({ request: 'submit', outcome: 'over_cap' });
    now.t += 30;
    release(14);
    tracking.onAnswer({ request: 'submit', outcome: 'accepted' });
    await tracking.settle();
    // Assess
    const reading = await ledger.read();
    expect(reading?.lastRefusal).toEqual({ at: 1_000_000, held: 14 });
    expect(reading?.lastAcceptance).toEqual({ at: 1_000_030, held: 21 });
  });
});
