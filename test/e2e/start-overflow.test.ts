/**
 * `npm start --overflow-sim` end to end: a second simulator plays the pay-per-solve provider,
 * the overflow consumer solves through the Lambda's own wiring, and the governor opens, sizes
 * and closes its lane. Each run checks the split, the latency it buys and the spend against the
 * caps from the summary's own figures.
 */
import { describe, expect, it } from 'vitest';
import type { DemoSummary } from '../../local/demo.js';
import { lastJson, runCli } from '../helpers/cli.js';

/** A plan far too small for a burst: the backlog cannot drain within the 2 s target. */
const SMALL_PLAN_BURST = [
  'start',
  '--tasks',
  '120',
  '--malformed',
  '0',
  '--solver-threads',
  '4',
  '--solver-latency-ms',
  '300',
  '--overflow-sim',
  '--json',
  '--max-duration',
  '80',
];

function summaryOf(stdout: string): DemoSummary {
  return lastJson(stdout) as unknown as DemoSummary;
}

describe('captcha-fleet start --overflow-sim', () => {
  it('spills a burst the plan cannot drain to the overflow provider, records who solved what, and stays within the caps', async () => {
    const run = await runCli(SMALL_PLAN_BURST);
    expect(run.code, run.stderr).toBe(0);
    const summary = summaryOf(run.stdout);
    expect(summary).toMatchObject({ submitted: 120, lost: 0, stillQueued: 0, complete: true });
    const overflow = summary.overflow;
    expect(overflow).toBeDefined();
    if (overflow === undefined) return;
    // Every solved task is on one provider's books, and the overflow took part of the burst.
    expect(overflow.solved.primary + overflow.solved.overflow).toBe(summary.solved);
    expect(overflow.solved.overflow).toBeGreaterThan(0);
    expect(overflow.solved.primary).toBeGreaterThan(0);
    // What the provider charged is what it solved at its price, and within the hourly cap.
    expect(overflow.provider.spentUsd).toBeCloseTo(overflow.provider.solved * overflow.provider.pricePerSolve, 6);
    expect(overflow.provider.spentUsd).toBeLessThanOrEqual(overflow.capUsdPerHour);
    expect(overflow.withinCaps).toBe(true);
    // The plan's simulator never saw more than its threads; the lane opened and closed again.
    expect(summary.solver.peakThreads).toBeLessThanOrEqual(4);
    expect(overflow.lane.maxCeiling).toBeGreaterThanOrEqual(2);
    expect(run.stderr).toMatch(/by provider +plan \d+ · overflow \d+ solved/);
  });

  it('never spends past a tight cap: the lane opens as far as the cap funds, the plan solves the rest', async () => {
    // $0.20 an hour funds the mapping floor for a while (the budget books ~27 solves a slot ahead at $0.003).
    const run = await runCli([...SMALL_PLAN_BURST, '--overflow-cap-hour', '0.2', '--overflow-cap-day', '0.2']);
    expect(run.code, run.stderr).toBe(0);
    const summary = summaryOf(run.stdout);
    expect(summary).toMatchObject({ submitted: 120, lost: 0, complete: true });
    const overflow = summary.overflow;
    expect(overflow).toBeDefined();
    if (overflow === undefined) return;
    expect(overflow.provider.spentUsd).toBeGreaterThan(0);
    expect(overflow.provider.spentUsd).toBeLessThanOrEqual(0.2);
    expect(overflow.withinCaps).toBe(true);
    expect(overflow.solved.primary).toBeGreaterThan(overflow.solved.overflow);
  });

  it('moves all the work, high lane included, to the overflow provider while the plan is down, and nothing reaches the DLQ', async () => {
    // The plan is down for the whole run: every task must be solved on overflow, priority ones too.
    const run = await runCli([
      'start',
      '--tasks',
      '60',
      '--malformed',
      '0',
      '--rate',
      '10',
      '--high-share',
      '0.3',
      '--solver-threads',
      '6',
      '--solver-latency-ms',
      '200',
      '--solver-outage',
      '0:300',
      '--overflow-sim',
      '--json',
      '--max-duration',
      '80',
    ]);
    expect(run.code, run.stderr).toBe(0);
    const summary = summaryOf(run.stdout);
    expect(summary).toMatchObject({ submitted: 60, lost: 0, inDlq: 0, complete: true });
    const overflow = summary.overflow;
    expect(overflow).toBeDefined();
    if (overflow === undefined) return;
    expect(summary.governor?.reasons.PAUSE_OUTAGE ?? 0).toBeGreaterThan(0);
    expect(overflow.solved.primary).toBe(0);
    expect(overflow.solved.overflow).toBe(summary.solved);
    // The high lane is not left behind the pause while normal tasks are solved.
    expect(summary.lanes.high.submitted).toBeGreaterThan(0);
    expect(summary.lanes.high.solved + summary.lanes.high.failed).toBe(summary.lanes.high.submitted);
    expect(overflow.withinCaps).toBe(true);
    // The harness waits past the run's own --max-duration (80 s), so a loaded machine fails the
    // run's assertions, not the test's clock.
  }, 120_000);

  it("keeps the lane closed on the overflow provider's own outage: its guard, nothing spent, the plan solves everything", async () => {
    const run = await runCli([...SMALL_PLAN_BURST, '--overflow-outage', '0:300']);
    expect(run.code, run.stderr).toBe(0);
    const summary = summaryOf(run.stdout);
    expect(summary).toMatchObject({ submitted: 120, lost: 0, inDlq: 0, complete: true });
    const overflow = summary.overflow;
    expect(overflow).toBeDefined();
    if (overflow === undefined) return;
    expect(overflow.solved).toEqual({ primary: summary.solved, overflow: 0 });
    expect(overflow.provider.spentUsd).toBe(0);
    expect(overflow.lane.reasons.OVERFLOW_GUARD ?? 0).toBeGreaterThan(0);
    expect(overflow.lane.reasons.OVERFLOW_OPEN ?? 0).toBe(0);
  });

  it('says at the start that a lane whose balance is under its halt level will not open', async () => {
    // Before, such a run showed only OVERFLOW_GUARD ticks and $0 spent, without a word why.
    const withBalance = (usd: string) =>
      runCli(['start', '--tasks', '2', '--malformed', '0', '--overflow-sim', '--overflow-balance', usd]);
    const run = await withBalance('0.15');
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain(
      '(the overflow lane will not open: its balance $0.15 is under its halt level $1; raise --overflow-balance above it)',
    );
    const funded = await withBalance('5');
    expect(funded.stdout).not.toContain('will not open');
  });

  it('refuses overflow flags without --overflow-sim, naming them, exit 2', async () => {
    const run = await runCli(['start', '--tasks', '0', '--overflow-cap-hour', '3', '--overflow-price', '0.01'], 30_000);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--overflow-cap-hour, --overflow-price only mean something with --overflow-sim');
  });

  it('refuses --overflow-sim with a fixed ceiling (no governor to open the lane), exit 2', async () => {
    const run = await runCli(['start', '--tasks', '0', '--overflow-sim', '--concurrency', '4'], 30_000);
    expect(run.code).toBe(2);
    expect(run.stderr).toContain('--overflow-sim needs the governor');
  });

  it('refuses an hourly cap above the daily cap with the fix, exit 2', async () => {
    const run = await runCli(
      ['start', '--tasks', '0', '--overflow-sim', '--overflow-cap-hour', '5', '--overflow-cap-day', '2'],
      30_000,
    );
    expect(run.code).toBe(2);
    // In the flags' words: the configuration keys behind them meant nothing to the one who typed them.
    expect(run.stderr).toContain('--overflow-cap-hour: the hourly cap $5 is above the daily cap $2');
    expect(run.stderr).toContain('Fix: set --overflow-cap-hour ≤ --overflow-cap-day');
  });
});
