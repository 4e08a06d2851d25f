import { describe, expect, it } from 'vitest';
import { startCommand } from '../../bin/commands/start/options.js';
import { verdictOf } from '../../bin/commands/start/verdict.js';
import { demoSummaryFixture } from '../helpers/demo-summary.js';

/** `start`'s options as parsed from `args` (the defaults otherwise). */
function optionsOf(args: string[] = []) {
  const command = startCommand().exitOverride();
  command.parse(['--tasks', '2', ...args], { from: 'user' });
  return command.opts();
}

/** A run cut by --max-duration with both tasks still queued, after a pause and with `last` its last decision. */
function cutRun(last: { code: string; message: string }) {
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
    expect(resumed.message).toBe('NOT COMPLETE: 2 task(s) still queued when the run ended (--max-duration 120 s).');
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
