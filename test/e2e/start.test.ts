/**
 * `npm start` end to end: the real CLI as a child process (tsx), the embedded emulators, the
 * simulator and the consumer handler. Small numbers keep each run to seconds.
 */
import { describe, expect, it } from 'vitest';
import { usageOfSummary } from '../../local/aws-cost.js';
import type { DemoSummary } from '../../local/demo/summary.js';
import { lastJson, runCli } from '../helpers/cli.js';

describe('captcha-fleet start', () => {
  it('runs a small demo to the end: every task reaches a result, nothing lost, JSON on the last line', async () => {
    const run = await runCli([
      'start',
      '--tasks',
      '40',
      '--malformed',
      '2',
      '--solver-latency-ms',
      '20',
      '--solver-threads',
      '6',
      '--json',
      '--max-duration',
      '60',
    ]);
    expect(run.code, run.stderr).toBe(0);
    // Only the JSON on stdout with --json: people read stderr.
    expect(run.stdout.trim().split('\n')).toHaveLength(1);
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({
      submitted: 40,
      lost: 0,
      stillQueued: 0,
      duplicateSolves: 0,
      complete: true,
      endedBy: 'complete',
    });
    const { solved, failed, rejected, inDlq, dlqWithRejectedRecord, unknown } = summary as Record<string, number>;
    // The two malformed messages: one with a readable id (rejected record + DLQ), one not JSON (DLQ only).
    // Each task is in one row: the rejected one counts in the DLQ row, not twice.
    expect(inDlq).toBe(2);
    expect(dlqWithRejectedRecord).toBe(1);
    expect(rejected).toBe(0);
    expect(unknown).toBe(0);
    expect(solved! + failed!).toBe(38);
    expect(run.stderr).toContain('in the DLQ (1 of them with a rejected record)');
    expect(summary.p50Ms).toEqual(expect.any(Number));
    expect(summary.p95Ms as number).toBeGreaterThanOrEqual(summary.p50Ms as number);
    expect(summary.durationMs).toEqual(expect.any(Number));
    const solver = summary.solver as Record<string, number>;
    expect(Object.keys(solver)).toEqual(
      expect.arrayContaining([
        'submissions',
        'accepted',
        'solved',
        'peakThreads',
        'overCapRejections',
        'balanceStart',
        'balanceEnd',
      ]),
    );
    expect(solver.solved).toBe(solved);
    // Each solved task was a submission the solver took on (an unsolvable one is taken on again).
    expect(solver.accepted).toBeGreaterThanOrEqual(solved!);
    expect(solver.submissions).toBeGreaterThanOrEqual(solver.accepted!);
    expect(run.stderr).toMatch(
      new RegExp(`${solver.submissions} submissions · ${solver.accepted} accepted · ${solved} solved`),
    );
    expect(solver.peakThreads).toBeGreaterThan(0);
    expect(solver.peakThreads).toBeLessThanOrEqual(6);
    expect(solver.overCapRejections).toBe(0);
    expect(solver.balanceEnd).toBeLessThan(solver.balanceStart!);
    expect((summary.governor as Record<string, number>).decisions).toBeGreaterThan(0);
    expect(run.stderr).toContain('Summary');
    expect(run.stderr).not.toMatch(/local-[0-9a-f]{32}/);
    // The default design parks: the consumers park their tasks, the governor's watch records them.
    expect(run.stderr).toContain('parked (solveMode park');
    const consumer = summary.consumer as { solveMode: string; parked: number };
    expect(consumer.solveMode).toBe('park');
    expect(consumer.parked).toBeGreaterThan(0);
    expect((summary.governor as { watch?: { recorded: number } }).watch?.recorded).toBeGreaterThan(0);
  });

  it('runs the waiting design with --solve-mode wait: no task parked, no watch, every task solved within the plan', async () => {
    const run = await runCli([
      'start',
      '--solve-mode',
      'wait',
      '--tasks',
      '30',
      '--malformed',
      '0',
      '--solver-latency-ms',
      '20',
      '--solver-threads',
      '4',
      '--solver-unsolvable-rate',
      '0',
      '--json',
      '--max-duration',
      '60',
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain('waiting (solveMode wait');
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({ submitted: 30, solved: 30, lost: 0, stillQueued: 0, duplicateSolves: 0 });
    const consumer = summary.consumer as { solveMode: string; parked: number; invocations: number };
    expect(consumer).toMatchObject({ solveMode: 'wait', parked: 0 });
    expect(consumer.invocations).toBeGreaterThanOrEqual(30);
    expect((summary.governor as { watch?: unknown }).watch).toBeUndefined();
    const solver = summary.solver as Record<string, number>;
    expect(solver.peakThreads).toBeLessThanOrEqual(4);
    expect(solver.overCapRejections).toBe(0);
  });

  it('recovers from invocations that die after solving: everything solved once, nothing lost', async () => {
    const run = await runCli([
      'start',
      '--tasks',
      '30',
      '--malformed',
      '0',
      '--solver-latency-ms',
      '20',
      '--solver-threads',
      '8',
      '--solver-unsolvable-rate',
      '0',
      '--crash-rate',
      '0.3',
      '--visibility-timeout',
      '3',
      '--seed',
      '7',
      '--json',
      '--max-duration',
      '80',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({ submitted: 30, solved: 30, lost: 0, stillQueued: 0, duplicateSolves: 0 });
    const consumer = summary.consumer as Record<string, number>;
    const solver = summary.solver as Record<string, number>;
    // The knob really fired, and the takeovers resumed the same submissions (no paid re-solve).
    expect(consumer.crashes).toBeGreaterThan(0);
    expect(solver.solved).toBe(30);
  });

  it('ends by --max-duration with a non-zero exit saying why when tasks are still queued (rejected key: the governor pauses)', async () => {
    const run = await runCli([
      'start',
      '--tasks',
      '12',
      '--malformed',
      '0',
      '--solver-bad-key',
      '--max-duration',
      '5',
      '--json',
    ]);
    expect(run.code, run.stderr).toBe(1);
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({
      submitted: 12,
      solved: 0,
      stillQueued: 12,
      lost: 0,
      complete: false,
      endedBy: 'max_duration',
    });
    expect((summary.governor as { reasons: Record<string, number> }).reasons.PAUSE_ACCOUNT).toBeGreaterThan(0);
    expect(run.stderr).toMatch(/NOT COMPLETE: 12 task\(s\) still queued .*--max-duration 5 s.*PAUSE_ACCOUNT/);
  });

  it('ends early, saying why, when the governor keeps the fleet paused with nothing in flight and no --max-duration is given', async () => {
    const run = await runCli(['start', '--tasks', '12', '--malformed', '0', '--solver-bad-key', '--json']);
    expect(run.code, run.stderr).toBe(1);
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({ submitted: 12, solved: 0, stillQueued: 12, lost: 0, endedBy: 'paused' });
    // Well before the 120 s default: a few ticks once nothing is in flight.
    expect(summary.durationMs as number).toBeLessThan(60_000);
    const governor = summary.governor as { pause: { pausedMs: number; reason: { code: string } } };
    expect(governor.pause.reason.code).toBe('PAUSE_ACCOUNT');
    expect(governor.pause.pausedMs).toBeGreaterThan(0);
    expect(run.stderr).toMatch(
      /NOT COMPLETE: 12 task\(s\) still queued .*stopped after 3 ticks paused with no invocation running.*PAUSE_ACCOUNT/,
    );
  });

  it("counts the governor's own probe submissions while others hold the whole plan, one a tick at most", async () => {
    const run = await runCli([
      'start',
      '--solver-threads',
      '2',
      '--solver-foreign-threads',
      '2',
      '--tasks',
      '5',
      '--malformed',
      '0',
      '--max-duration',
      '12',
      '--json',
    ]);
    expect(run.code, run.stderr).toBe(1);
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({ solved: 0, stillQueued: 5, lost: 0 });
    const governor = summary.governor as {
      decisions: number;
      pause: { reason: { code: string }; threadProbes: { made: number; accepted: number; refused: number } };
    };
    expect(governor.pause.reason.code).toBe('WAIT_FOR_THREADS');
    const { made, accepted, refused } = governor.pause.threadProbes;
    // Before, the row said "0 probe(s)" (the resume probes) beside "one probe submission this tick".
    expect(made).toBeGreaterThanOrEqual(3);
    expect(made).toBeLessThanOrEqual(governor.decisions);
    expect({ accepted, refused }).toEqual({ accepted: 0, refused: made });
    expect((summary.solver as Record<string, number>).overCapRejections).toBeGreaterThanOrEqual(refused);
    expect(run.stderr).toContain(`${made} probe submission(s), 0 accepted, ${made} refused`);
  });

  it("does not count the governor's accepted probes as a task paid twice (each is the same synthetic task)", async () => {
    // Others hold 4 of the account's 5 threads and 1 is reserved for them: the fleet, at the
    // mapping's floor of two invocations × 2 tasks, is refused into starved spells, and its probes
    // are accepted on the thread left free. Before, the accounting grouped the probes' paid
    // submissions by their task's method and parameters, the same every time, and the run ended
    // "INVARIANT BROKEN: 1 task(s) paid twice" (exit 1) with every producer's task paid once.
    const run = await runCli([
      'start',
      '--solver-threads',
      '5',
      '--reserved-threads',
      '1',
      '--solver-foreign-threads',
      '4',
      '--batch-size',
      '2',
      '--solve-mode',
      'wait',
      '--tasks',
      '20',
      '--malformed',
      '0',
      '--max-duration',
      '60',
      '--json',
    ]);
    const summary = lastJson(run.stdout);
    const governor = summary.governor as { pause: { threadProbes: { accepted: number } } | null };
    // The case this test is for: two probes or more accepted (else the scenario no longer shows it).
    expect(governor.pause?.threadProbes.accepted ?? 0, run.stderr).toBeGreaterThanOrEqual(2);
    expect(summary).toMatchObject({ paidTwice: 0, paidTwiceBeyondLostIds: 0, lost: 0 });
    expect(run.stderr).not.toContain('INVARIANT BROKEN');
  });

  it.each([
    { threads: '20', balance: '0.15', solves: 6 },
    { threads: '60', balance: '0.35', solves: 26 },
  ])(
    'stops at the pause level from a start a few solves above it, the price not yet learned (threads: $threads, balance: $balance USD)',
    async ({ threads, balance, solves }) => {
      // $0.01 a solve, halt at the pause level (no halt hold). Before, the first second's burst
      // spent the balance to $0, the whole $0.10 under the pause level.
      const run = await runCli([
        'start',
        '--tasks',
        '60',
        '--malformed',
        '0',
        '--solver-threads',
        threads,
        '--solver-balance',
        balance,
        '--solver-price',
        '0.01',
        '--pause-balance',
        '0.10',
        '--halt-balance',
        '0.10',
        '--json',
      ]);
      const summary = lastJson(run.stdout);
      expect(summary, run.stderr).toMatchObject({ lost: 0, endedBy: 'paused' });
      const solver = summary.solver as Record<string, number>;
      // The floor's rule: a solve starts while the money less what is in flight is at the level,
      // so the last ends at most one price under it. The assumed price ($0.01) is the real one here.
      // And it spends what the money above the level pays for: it ends under the level.
      expect(solver.balanceEnd).toBeGreaterThanOrEqual(0.09 - 1e-9);
      expect(solver.balanceEnd).toBeLessThan(0.1 + 1e-9);
      expect(summary.solved).toBeLessThanOrEqual(solves);
    },
  );

  it('stops at the pause level while a tenth of the invocations crash (the price learned while answers wait to be counted)', async () => {
    // Before, on this seed: $0.076–0.079, 7–8 solves past the level. A fresh fleet's first price was
    // learned from a drop that had charged answers the watch had freed and was still recording
    // (in neither the leases nor the ledger's solved count): $0.0015 for a $0.003 solve.
    const run = await runCli([
      'start',
      '--solver-balance',
      '0.25',
      '--solver-price',
      '0.003',
      '--halt-balance',
      '0.1',
      '--crash-rate',
      '0.1',
      '--seed',
      '306',
      '--json',
    ]);
    const summary = lastJson(run.stdout);
    expect(summary, run.stderr).toMatchObject({ lost: 0, paidTwice: 0, validInDlq: 0, endedBy: 'paused' });
    const solver = summary.solver as Record<string, number>;
    // The floor's rule: the last solve ends at most one price under the level.
    expect(solver.balanceEnd).toBeGreaterThanOrEqual(0.1 - 0.003 - 1e-9);
    expect(solver.balanceEnd).toBeLessThan(0.1 + 1e-9);
  });

  it('waits out a solver outage it was asked for, paused as designed, and reaches every result (no --max-duration)', async () => {
    // The solver down from 2 s for 20 s: the governor pauses with nothing in flight, which used to
    // end the run 3 ticks later with the tasks still queued, the recovery the flag asks to see never shown.
    const run = await runCli([
      'start',
      '--tasks',
      '20',
      '--malformed',
      '0',
      '--rate',
      '10',
      '--solver-latency-ms',
      '50',
      '--solver-outage',
      '2:20',
      '--json',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({ submitted: 20, solved: 20, stillQueued: 0, lost: 0, endedBy: 'complete' });
    expect((summary.governor as { reasons: Record<string, number> }).reasons.PAUSE_OUTAGE).toBeGreaterThan(0);
    expect(summary.durationMs as number).toBeGreaterThan(20_000);
    // The submissions the outage answered (503) took no task: the solver's count of those it took
    // on is what the run's AWS bill writes solver ids and ledger acceptances for.
    const solver = summary.solver as Record<string, number>;
    expect(solver.accepted).toBeGreaterThanOrEqual(20);
    expect(solver.accepted).toBeLessThanOrEqual(solver.submissions!);
  });

  it('bills the submissions the solver took on, not those an outage answered before the pause', async () => {
    // GIVEN tasks sent while the solver is down for 3 s: the consumers submit them and are
    // answered HTTP 503, retrying, until the outage ends or the governor pauses (six ticks)
    const run = await runCli([
      'start',
      '--tasks',
      '20',
      '--rate',
      '5',
      '--malformed',
      '0',
      '--solver-latency-ms',
      '50',
      '--solver-outage',
      '1:3',
      '--solver-unsolvable-rate',
      '0',
      '--solver-error-rate',
      '0',
      '--json',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const summary = lastJson(run.stdout) as unknown as DemoSummary;
    expect(summary).toMatchObject({ submitted: 20, solved: 20, lost: 0, endedBy: 'complete' });
    // THEN the solver took on one submission per task (nothing unsolvable, no transient error), and
    // answered the rest in its outage
    expect(summary.solver.accepted).toBe(20);
    expect(summary.solver.submissions).toBeGreaterThan(20);
    // and the AWS cost line bills a solver id and a ledger acceptance for those 20 alone
    expect(usageOfSummary(summary).acceptedSubmissions).toBe(20);
    expect(usageOfSummary(summary).submissions).toBe(summary.solver.submissions);
  });

  it('bills a claim per message delivered when invocations carry batches', async () => {
    // GIVEN batches of 5 in the waiting design, the plan wide enough for every batch
    const run = await runCli([
      'start',
      '--tasks',
      '30',
      '--malformed',
      '0',
      '--batch-size',
      '5',
      '--solve-mode',
      'wait',
      '--solver-latency-ms',
      '50',
      '--solver-threads',
      '20',
      '--json',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const summary = lastJson(run.stdout) as unknown as DemoSummary;
    expect(summary).toMatchObject({ submitted: 30, lost: 0, endedBy: 'complete' });
    // THEN every message was delivered at least once, fewer invocations carrying them
    expect(summary.consumer.received).toBeGreaterThanOrEqual(30);
    expect(summary.consumer.invocations).toBeLessThan(summary.consumer.received);
    // and the bill claims each delivery, and bills each invocation's request
    const usage = usageOfSummary(summary);
    expect(usage.deliveries).toBe(summary.consumer.received);
    expect(usage.invocations).toBe(summary.consumer.invocations);
  });

  it('resubmits an unsolvable captcha unsolvableResubmits times in all, though each resumption of a parked task is a new delivery', async () => {
    // Every captcha unsolvable: 3 submissions a task (the first and 2 resubmissions), then failed.
    // The count lived in each delivery: a parked task resumed by a new one started again at 0 and
    // was resubmitted until its message neared the DLQ (80 submissions for 10 tasks).
    const run = await runCli([
      'start',
      '--tasks',
      '6',
      '--malformed',
      '0',
      '--solver-unsolvable-rate',
      '1',
      '--solver-error-rate',
      '0',
      '--json',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({ submitted: 6, solved: 0, failed: 6, lost: 0 });
    expect(summary.failuresByCode).toEqual({ ERROR_CAPTCHA_UNSOLVABLE: 6 });
    expect((summary.solver as { submissions: number }).submissions).toBe(18);
  });

  it('sends --high-share of the tasks on the high lane and reports both lanes in the live view, the summary and --json', async () => {
    const run = await runCli([
      'start',
      '--tasks',
      '40',
      '--malformed',
      '0',
      '--high-share',
      '0.5',
      '--solver-latency-ms',
      '20',
      '--solver-threads',
      '6',
      '--seed',
      '3',
      '--json',
      '--max-duration',
      '60',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const summary = lastJson(run.stdout);
    const lanes = summary.lanes as Record<'high' | 'normal', Record<string, any>>;
    expect(lanes.high.submitted + lanes.normal.submitted).toBe(40);
    // About half, drawn per task from the seed.
    expect(lanes.high.submitted).toBeGreaterThanOrEqual(12);
    expect(lanes.high.submitted).toBeLessThanOrEqual(28);
    for (const lane of [lanes.high, lanes.normal]) {
      expect(lane.solved + lane.failed).toBe(lane.submitted);
      expect(lane.invocations).toBeGreaterThanOrEqual(lane.submitted);
      expect(lane.p95Ms).toBeGreaterThanOrEqual(lane.p50Ms);
      expect(lane.startWaitP50Ms).toEqual(expect.any(Number));
      expect(lane.ceiling.max).toBeGreaterThanOrEqual(2);
      expect(lane.ceiling.max).toBeLessThanOrEqual(6);
      expect(lane.peakInFlight).toBeLessThanOrEqual(6);
    }
    expect(run.stderr).toMatch(/high \d+\/\d+\/(\d+|off) · normal \d+\/\d+\/(\d+|off) \(backlog\/in flight\/ceiling\)/);
    expect(run.stderr).toMatch(/high lane +\d+ sent · \d+ solved/);
    expect(run.stderr).toMatch(/normal lane +\d+ sent · \d+ solved/);

    const none = await runCli([
      'start',
      '--tasks',
      '10',
      '--malformed',
      '0',
      '--high-share',
      '0',
      '--solver-latency-ms',
      '20',
      '--json',
      '--max-duration',
      '60',
    ]);
    expect(none.code, none.stderr).toBe(0);
    expect((lastJson(none.stdout).lanes as Record<'high' | 'normal', { submitted: number }>).high.submitted).toBe(0);
  });

  it('runs a parked plan of two threads on both lanes (under their two mapping floors): the leases hold it to two', async () => {
    // The stack takes such a plan parked (lib/config.ts): each mapping at Lambda's floor of 2, the
    // thread leases holding the threads, the lanes taking turns under twice the floor.
    const run = await runCli([
      'start',
      '--tasks',
      '30',
      '--malformed',
      '0',
      '--high-share',
      '0.5',
      '--solver-latency-ms',
      '150',
      '--solver-threads',
      '2',
      '--solver-unsolvable-rate',
      '0',
      '--seed',
      '5',
      '--json',
      '--max-duration',
      '90',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({ submitted: 30, solved: 30, lost: 0, stillQueued: 0, duplicateSolves: 0 });
    const lanes = summary.lanes as Record<'high' | 'normal', { submitted: number; solved: number }>;
    for (const lane of [lanes.high, lanes.normal]) {
      expect(lane.submitted).toBeGreaterThan(0);
      expect(lane.solved).toBe(lane.submitted);
    }
    const solver = summary.solver as Record<string, number>;
    expect(solver.peakThreads).toBe(2);
    expect(solver.overCapRejections).toBe(0);
  });

  it('refuses a --high-share outside 0..1 with where the usage is, exit 2', async () => {
    for (const value of ['1.5', '-0.1', 'half']) {
      const run = await runCli(['start', '--high-share', value]);
      expect(run.code).toBe(2);
      expect(run.stderr).toContain(`option '--high-share <p>' argument '${value}' is invalid`);
      expect(run.stderr).toContain('expected a share from 0 to 1');
      expect(run.stderr).toContain('`captcha-fleet start --help`');
    }
  });

  it('refuses a bad flag with what is wrong and where the usage is, exit 2', async () => {
    const bad = await runCli(['start', '--tasks', 'many']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("option '--tasks <n>' argument 'many' is invalid");
    expect(bad.stderr).toContain('`captcha-fleet start --help`');
    const unknown = await runCli(['start', '--no-such-flag']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("unknown option '--no-such-flag'");
    expect(unknown.stderr).toContain('`captcha-fleet start --help`');
    expect(unknown.stderr).not.toContain('--solver-latency-ms');
    const range = await runCli(['start', '--crash-rate', '1.5']);
    expect(range.code).toBe(2);
    expect(range.stderr).toContain('expected a share from 0 to 0.9');
    const together = await runCli(['start', '--solver-threads', '4', '--reserved-threads', '4']);
    expect(together.code).toBe(2);
    // Named by its flag: the configuration key behind it (reservedThreads) meant nothing to who typed it.
    expect(together.stderr).toContain('--reserved-threads: reserves 4 of 4 plan threads');
    expect(together.stderr).toContain('`captcha-fleet start --help`');
  });

  it('names only the cause when reserved threads leave none: no minConcurrency fix for a ceiling of 0', async () => {
    const run = await runCli(['start', '--solver-threads', '20', '--reserved-threads', '20']);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('reserves 20 of 20 plan threads, leaving none for the fleet');
    expect(run.stderr).not.toContain('minConcurrency');
  });

  it('prints its version', async () => {
    const run = await runCli(['--version']);
    expect(run.code).toBe(0);
    expect(run.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
