import { describe, expect, it } from 'vitest';
import { runLimits, startCommand } from '../../bin/commands/start/options.js';
import { counted } from '../../bin/commands/start/summary-format.js';
import { verdictOf } from '../../bin/commands/start/verdict.js';
import { demoSummaryFixture } from '../helpers/demo-summary.js';

/** `start`'s options as parsed from `args` (the defaults otherwise). */
function optionsOf(args: string[] = []) {
  const command = startCommand().exitOverride();
  command.parse(['--tasks', '2', ...args], { from: 'user' });
  return command.opts();
}

/** A run cut by --max-duration with both tasks still queued, after a pause and with `last` its last decision. */
function cutRun(last: { code: string; message: string; paused?: boolean }) {
  const base = demoSummaryFixture();
  return {
    ...base,
    solved: 0,
    stillQueued: 2,
    complete: false,
    endedBy: 'max_duration' as const,
    governor: base.governor && {
      ...base.governor,
      lastReason: last,
      pause: {
        pausedMs: 40_000,
        reason: { code: 'PAUSE_OUTAGE', message: 'Still paused (outage): sqs: the probe failed.' },
        probes: 3,
        threadProbes: { made: 0, accepted: 0, refused: 0 },
      },
    },
  };
}

describe("start's verdict on a run that ended with tasks queued", () => {
  it('blames the pause only when the governor was still paused at the end', () => {
    const paused = verdictOf(
      cutRun({ code: 'PAUSE_OUTAGE', message: 'Still paused (outage): sqs down.' }),
      optionsOf(),
    );
    expect(paused.code).toBe(1);
    expect(paused.message).toContain(
      '(--max-duration 120 s) — the governor paused consumption (PAUSE_OUTAGE: Still paused (outage): sqs down), so tasks wait in the queue as designed',
    );

    // Resumed since (its last decision consumes): the run only ran out of time. Before, the
    // message named the pause it had left as the reason the tasks waited.
    const resumed = verdictOf(cutRun({ code: 'FREE_THREADS', message: 'Ceiling at the free threads.' }), optionsOf());
    expect(resumed.code).toBe(1);
    expect(resumed.message).toBe(
      "NOT COMPLETE: 2 task(s) still queued when the run ended (--max-duration 120 s); give a longer --max-duration to wait for them (the default allows 2× the work's time at the plan's pace, up to 900 s).",
    );
    // Waiting for threads others hold is a pause too: before, its code alone (not PAUSE_…) left the
    // run's end unexplained.
    const waiting = verdictOf(
      cutRun({
        code: 'WAIT_FOR_THREADS',
        message: 'Waiting for threads: others hold the whole plan of 20.',
        paused: true,
      }),
      optionsOf(),
    );
    expect(waiting.message).toContain(
      'the governor paused consumption (WAIT_FOR_THREADS: Waiting for threads: others hold the whole plan of 20), so tasks wait in the queue as designed',
    );
    // A fixed ceiling (no governor) on an emptied balance: a longer run would only be refused longer.
    const { governor: _none, ...ungoverned } = cutRun({ code: 'FREE_THREADS', message: '' });
    const broke = verdictOf(
      { ...ungoverned, solver: { ...ungoverned.solver, balanceEnd: 0 } },
      optionsOf(['--concurrency', '5']),
    );
    expect(broke.message).toContain("the solver's balance ($0.000) no longer pays for a solve ($0.001)");
    expect(broke.message).not.toContain('give a longer --max-duration');
    // Given, the flag is named as given (to a tenth of a second), without the default's words.
    const given = verdictOf(cutRun({ code: 'FREE_THREADS', message: 'Ceiling at the free threads.' }), {
      ...optionsOf(['--max-duration', '165.675']),
    });
    expect(given.message).toBe(
      'NOT COMPLETE: 2 task(s) still queued when the run ended (--max-duration 165.7 s); give a longer --max-duration to wait for them.',
    );
  });
});

describe("start's words for counts", () => {
  it('say one of a thing in the singular', () => {
    expect([counted(1, 'invocation'), counted(0, 'decision'), counted(3, 'invocation')]).toEqual([
      '1 invocation',
      '0 decisions',
      '3 invocations',
    ]);
    const one = { ...demoSummaryFixture(), submitted: 1, solved: 1 };
    expect(verdictOf(one, optionsOf(['--tasks', '1'])).message).toMatch(/^OK: the 1 task reached a result: 1 solved/);
  });
});

describe("start's default --max-duration", () => {
  const limitOf = (args: string[], outagesEndMs = 0) => runLimits(optionsOf(args), outagesEndMs).maxDurationMs / 1000;

  it('waits twice the work at the plan’s pace on a small plan, and the default where the plan is quick', () => {
    // The default run: 200 tasks of 0.4 s on 20 threads take seconds; two minutes stand.
    expect(limitOf(['--tasks', '200'])).toBe(120);
    // 200 tasks of 3 s on 3 threads: 200 × 3.5 s / 3 = 233 s of work, 467 s allowed.
    expect(limitOf(['--tasks', '200', '--solver-threads', '3', '--solver-latency-ms', '3000'])).toBeCloseTo(466.7, 1);
    // Others' threads and the reservation leave 2 of those 3 to 1: the same work at a third of the pace.
    expect(
      limitOf([
        '--tasks',
        '60',
        '--solver-threads',
        '3',
        '--solver-foreign-threads',
        '1',
        '--reserved-threads',
        '1',
        '--solver-latency-ms',
        '3000',
      ]),
    ).toBeCloseTo(420, 1);
    // The plan the governor is told, when smaller than the simulator's, sets the pace.
    expect(
      limitOf(['--tasks', '100', '--solver-threads', '10', '--plan-threads', '2', '--solver-latency-ms', '2000']),
    ).toBe(250);
    // A fixed ceiling of 2 invocations of 1 task in the waiting design: 2 threads of the 20.
    expect(
      limitOf(['--tasks', '100', '--solver-latency-ms', '2000', '--solve-mode', 'wait', '--concurrency', '2']),
    ).toBe(250);
    // Sent at 1 a second, 200 tasks take 200 s to arrive.
    expect(limitOf(['--tasks', '200', '--rate', '1'])).toBe(400);
  });

  it('counts the work after the last outage, stops at its ceiling, and leaves a starved run to the paused stop', () => {
    expect(limitOf(['--tasks', '200', '--solver-threads', '3', '--solver-latency-ms', '3000'], 106_000)).toBeCloseTo(
      572.7,
      1,
    );
    expect(limitOf(['--tasks', '5000', '--solver-threads', '2', '--solver-latency-ms', '5000'])).toBe(900);
    // Others hold the whole plan: no pace to wait for; the default and the paused stop decide.
    expect(limitOf(['--tasks', '200', '--solver-threads', '4', '--solver-foreign-threads', '4'])).toBe(120);
    expect(limitOf(['--tasks', '0'])).toBe(120);
    // Given, it is what was given.
    expect(limitOf(['--tasks', '5000', '--solver-threads', '2', '--max-duration', '30'])).toBe(30);
  });

  it('adds, where holders die, a redelivery and the wait for a dead holder’s copy (3 × --visibility-timeout − 1 s)', () => {
    // A drawn run (bench:sweep seed 12012): 80 tasks of 3 s on 12 threads, outages to 50 s, crashes
    // 0.1. Its last task waited for a dead holder's copy and was being solved when 120 s cut it.
    const run = ['--tasks', '80', '--solver-latency-ms', '3000', '--solver-threads', '12', '--rate', '20'];
    expect(limitOf(run, 50_000)).toBe(120);
    expect(limitOf([...run, '--crash-rate', '0.1'], 50_000)).toBeCloseTo(50 + (2 * 80 * 3.5) / 12 + 35, 1);
    expect(limitOf([...run, '--crash-rate', '0.1', '--visibility-timeout', '6'], 50_000)).toBe(120);
    expect(limitOf([...run, '--crash-rate', '0.1', '--visibility-timeout', '30'], 50_000)).toBeCloseTo(
      50 + (2 * 80 * 3.5) / 12 + 89,
      1,
    );
  });
});

describe("start's verdict on completion events", () => {
  it('reads an event still owed by a message in a lane as not complete, and one that no message owes as broken', () => {
    // Every task has its record, but two solved ones' events have not gone out: a crash between
    // the record and the event hid their messages, and the run ended before they came back.
    // Before, both counted as "solved task(s) never announced": an invariant broken.
    const owed = verdictOf({ ...demoSummaryFixture(), announcementsOwed: 2 }, optionsOf());
    expect(owed.code).toBe(1);
    expect(owed.message).toBe(
      "NOT COMPLETE: 2 solved task(s) whose completion event is still owed (their records are not noted announced; the next delivery of each one's message publishes it).",
    );

    const missing = verdictOf({ ...demoSummaryFixture(), solvedNotAnnounced: 1 }, optionsOf());
    expect(missing).toEqual({ code: 1, message: 'INVARIANT BROKEN: 1 solved task(s) never announced.' });

    expect(verdictOf(demoSummaryFixture(), optionsOf()).code).toBe(0);
  });
});

describe("start's verdict on a complete run within the protocols' bound", () => {
  it('says a task paid twice for a lost id, or a second DLQ copy SQS allows, instead of a plain OK (exit 0)', () => {
    // Before: "OK: all … reached a result" over a run that paid one task twice (README's fault scenario).
    const base = demoSummaryFixture();
    const paid = verdictOf(
      { ...base, paidTwice: 1, paidTwiceBeyondLostIds: 0, consumer: { ...base.consumer, idsLostInCrashes: 1 } },
      optionsOf(),
    );
    expect(paid.code).toBe(0);
    expect(paid.message).toMatch(
      /^OK within the protocols' bound \(1 paid twice, each an id lost in a crash \(1 lost\)\): /,
    );
    const copies = verdictOf({ ...base, dlqDuplicates: 2, dlqDuplicatesUnexplained: 0 }, optionsOf());
    expect(copies.message).toMatch(/^OK within the protocols' bound \(2 second DLQ copies/);
    expect(verdictOf(base, optionsOf()).message).toMatch(/^OK: /);
  });
});
