/**
 * `npm start --endpoint` against a second emulator: moto_server serves SQS and DynamoDB on one
 * URL. moto is not a dependency (it is a Python tool): without `moto_server` on PATH the test
 * is skipped.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lastJson, runCli } from '../helpers/cli.js';
import { HAS_MOTO, startMotoServer, type MotoServer } from '../helpers/moto.js';

describe.skipIf(!HAS_MOTO)('captcha-fleet start --endpoint (moto_server)', () => {
  let moto: MotoServer | undefined;
  let endpoint = '';

  beforeAll(async () => {
    moto = await startMotoServer();
    endpoint = moto.endpoint;
  });

  afterAll(async () => {
    await moto?.stop();
  });

  it('runs the whole demo against it: every task reaches a result, nothing lost', async () => {
    const run = await runCli([
      'start',
      '--endpoint',
      endpoint,
      '--tasks',
      '30',
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
    expect(run.stderr).toContain(`endpoint ${endpoint}`);
    const summary = lastJson(run.stdout);
    expect(summary).toMatchObject({
      submitted: 30,
      lost: 0,
      stillQueued: 0,
      inDlq: 2,
      duplicateSolves: 0,
      complete: true,
    });
    expect((summary.solver as { peakThreads: number }).peakThreads).toBeLessThanOrEqual(6);
    // The rows partition the tasks sent, and "solved" is what the solver solved: a record read
    // back without a status is never counted as a result.
    const rows = ['solved', 'failed', 'rejected', 'inDlq', 'unknown', 'stillQueued', 'lost'] as const;
    const counts = summary as Record<(typeof rows)[number], number>;
    expect(rows.reduce((sum, row) => sum + counts[row], 0)).toBe(30);
    expect(counts.unknown).toBe(0);
    expect(counts.solved).toBe((summary.solver as { solved: number }).solved);
  });
});
