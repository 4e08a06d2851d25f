/**
 * `npm start -- --solver-protocol create-task` end to end: the whole demo over the JSON task
 * API (createTask / getTaskResult), with the overflow provider on it too, and the dialects that
 * speak nothing else; every task accounted for, nothing lost.
 */
import { describe, expect, it } from 'vitest';
import type { DemoSummary } from '../../local/demo.js';
import { lastJson, runCli } from '../helpers/cli.js';

const run = async (args: string[]) => {
  const result = await runCli(['start', '--json', '--max-duration', '80', ...args]);
  return { ...result, summary: lastJson(result.stdout) as unknown as DemoSummary };
};

describe('captcha-fleet start --solver-protocol create-task', () => {
  it('runs the demo over the JSON task API and the overflow provider on it: every task accounted for', async () => {
    const { code, stderr, summary } = await run([
      '--solver-protocol',
      'create-task',
      '--tasks',
      '60',
      '--solver-threads',
      '4',
      '--solver-latency-ms',
      '300',
      '--overflow-sim',
    ]);
    expect(code, stderr).toBe(0);
    expect(stderr).toContain('create-task as 2captcha');
    expect(summary).toMatchObject({ submitted: 60, lost: 0, stillQueued: 0, complete: true, duplicateSolves: 0 });
    expect(summary.solved + summary.failed + summary.rejected + summary.inDlq).toBe(60);
    expect(summary.overflow?.solved.overflow).toBeGreaterThan(0);
    expect(summary.solver.overCapRejections).toBe(0);
  });

  it('speaks Anti-Captcha: the methods it has no task type for end failed with the code, nothing else lost', async () => {
    const { code, stderr, summary } = await run([
      '--solver-protocol',
      'create-task',
      '--solver-dialect',
      'anti-captcha',
      '--tasks',
      '40',
    ]);
    expect(code, stderr).toBe(0);
    expect(summary).toMatchObject({ submitted: 40, lost: 0, stillQueued: 0, complete: true });
    expect(
      Object.keys(summary.failuresByCode).every(
        (failure) => failure === 'ERROR_TASK_NOT_SUPPORTED' || failure === 'ERROR_CAPTCHA_UNSOLVABLE',
      ),
    ).toBe(true);
  });

  it('refuses a dialect with a protocol it does not speak, exit 2, naming the fix', async () => {
    const result = await runCli(['start', '--solver-dialect', 'capsolver', '--tasks', '1']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('capsolver speaks create-task only');
  });

  it('refuses CapSolver images with a function too short to wait for their recognition, exit 2, naming both fixes', async () => {
    // A drawn run (bench:sweep seed 10015): 3 s recognitions answered in createTask's own
    // response, a 5 s function timeout. Run, it paid 5 images twice (cut short at the
    // invocation's end); with the consumer's headroom, it never sent them and they went to the DLQ.
    const flags = ['start', '--solver-protocol', 'create-task', '--solver-dialect', 'capsolver', '--tasks', '1'];
    const result = await runCli([...flags, '--solver-latency-ms', '3000', '--visibility-timeout', '6']);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--solver-dialect capsolver answers image tasks in createTask's own response");
    expect(result.stderr).toContain(
      'Raise --visibility-timeout to at least 16, or lower --solver-latency-ms to at most 1017.',
    );
    expect(result.stderr).toContain('`captcha-fleet start --help`');
    // Another dialect answers images through getTaskResult: the same flags run.
    const other = await runCli([
      ...flags.slice(0, 4),
      '2captcha',
      '--tasks',
      '1',
      '--solver-latency-ms',
      '3000',
      '--visibility-timeout',
      '6',
    ]);
    expect(other.code, other.stderr).toBe(0);
  });

  it('refuses the same of the overflow lane, by its own flags, while the primary lane is fine', async () => {
    const result = await runCli([
      'start',
      '--tasks',
      '1',
      '--visibility-timeout',
      '6',
      '--overflow-sim',
      '--overflow-protocol',
      'create-task',
      '--overflow-dialect',
      'capsolver',
      '--overflow-latency-ms',
      '3000',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain("--overflow-dialect capsolver answers image tasks in createTask's own response");
    expect(result.stderr).toContain(
      'Raise --visibility-timeout to at least 16, or lower --overflow-latency-ms to at most 1017.',
    );
  });
});
