/**
 * `npm start --endpoint` against a second emulator: moto_server serves SQS and DynamoDB on one
 * URL. moto is not a dependency (it is a Python tool): without `moto_server` on PATH the test
 * is skipped.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const hasMoto = spawnSync('sh', ['-c', 'command -v moto_server'], { encoding: 'utf8' }).status === 0;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe.skipIf(!hasMoto)('captcha-fleet start --endpoint (moto_server)', () => {
  let moto: ChildProcess | undefined;
  let endpoint = '';

  beforeAll(async () => {
    const port = await freePort();
    endpoint = `http://127.0.0.1:${port}`;
    moto = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
    const until = Date.now() + 30_000;
    for (;;) {
      try {
        if ((await fetch(`${endpoint}/moto-api/`)).status < 500) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > until) throw new Error('moto_server did not start within 30 s');
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });

  afterAll(() => {
    moto?.kill('SIGTERM');
  });

  it('runs the whole demo against it: every task reaches a result, nothing lost', async () => {
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(
        'node_modules/.bin/tsx',
        ['bin/captcha-fleet.ts', 'start', '--endpoint', endpoint, '--tasks', '30', '--malformed', '2', '--solver-latency-ms', '20', '--solver-threads', '6', '--json', '--max-duration', '60'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain(`endpoint ${endpoint}`);
    const summary = JSON.parse(run.stdout.trim().split('\n').pop()!) as Record<string, unknown>;
    expect(summary).toMatchObject({ submitted: 30, lost: 0, stillQueued: 0, inDlq: 2, duplicateSolves: 0, complete: true });
    expect((summary.solver as { peakThreads: number }).peakThreads).toBeLessThanOrEqual(6);
  });
});
