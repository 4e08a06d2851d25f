/**
 * `npm start -- --serve` as a child process, then `captcha-fleet status --local --json` and
 * `captcha-fleet redrive --local --dry-run --json` against it from other processes: the
 * governor's state lives in the local governor table (DynamoDB), so another process reads the
 * last decision, the ceilings and the balance; the DLQ holds the demo's malformed messages.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { killGroup, spawnGroup } from '../helpers/processes.js';

const TSX = 'node_modules/.bin/tsx';
const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-serve-'));
const stackFile = join(dir, 'local-stack.json');
const env = {
  ...process.env,
  AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  CAPTCHA_FLEET_STACK_FILE: stackFile,
};

let server: ChildProcess | undefined;

afterAll(() => {
  if (server) killGroup(server);
  rmSync(dir, { recursive: true, force: true });
});

/** The CLI against this test's stack file. */
const cli = (args: string[], timeoutMs = 30_000) => runCli(args, timeoutMs, { CAPTCHA_FLEET_STACK_FILE: stackFile });

describe('status and redrive against a served local stack', () => {
  it('reads the governor decision, ceilings, balance and DLQ from another process', async () => {
    server = spawnGroup(
      TSX,
      [
        'bin/captcha-fleet.ts',
        'start',
        '--serve',
        '--tasks',
        '30',
        '--malformed',
        '3',
        '--high-share',
        '0.3',
        '--solver-latency-ms',
        '20',
        '--solver-threads',
        '6',
        '--tick-ms',
        '300',
      ],
      { cwd: process.cwd(), env, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    let serverOut = '';
    server.stdout?.on('data', (chunk: Buffer) => (serverOut += chunk.toString()));
    server.stderr?.on('data', (chunk: Buffer) => (serverOut += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => server!.on('close', (code) => resolve(code)));

    // The stack file appears once the demo is done and the stack serves.
    const until = Date.now() + 60_000;
    while (!existsSync(stackFile)) {
      if (Date.now() > until || server.exitCode !== null)
        throw new Error(`the served stack did not come up:\n${serverOut}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }

    const status = await cli(['status', '--local', '--json']);
    expect(status.code, status.stderr).toBe(0);
    const s = JSON.parse(status.stdout.trim().split('\n').pop()!) as Record<string, any>;
    expect(s.fleet).toMatch(/^local stack \(pid \d+\)$/);
    // The last decision comes from the governor table, written by the serving process.
    expect(typeof s.governor.code).toBe('string');
    expect(s.governor.message.length).toBeGreaterThan(0);
    expect(Date.now() - s.governor.at).toBeLessThan(10_000);
    expect(s.governor.freeThreads).toBe(6);
    expect(s.lanes.normal.ceiling).toEqual(expect.any(Number));
    expect(s.lanes.high.ceiling).toEqual(expect.any(Number));
    expect(s.lanes.normal.ceiling + s.lanes.high.ceiling).toBeGreaterThanOrEqual(6);
    // The simulator's $10 less what the demo's solves cost.
    expect(s.balance).toBeGreaterThan(9.9);
    expect(s.balance).toBeLessThan(10);
    expect(s.dlqDepth).toBe(3);
    expect(s.recent).toMatchObject({ source: 'results-table', rejected: 2 });
    expect(s.recent.solved).toBeGreaterThan(20);

    const redrive = await cli(['redrive', '--local', '--dry-run', '--json']);
    expect(redrive.code, redrive.stderr).toBe(0);
    const r = JSON.parse(redrive.stdout.trim().split('\n').pop()!) as Record<string, any>;
    expect(r.dryRun).toBe(true);
    expect(r.copied).toBe(0);
    expect(r.nativeMove).toBeUndefined();
    expect(r.inventory.depth).toBe(3);
    expect(Object.keys(r.inventory.byReason).sort()).toEqual(['MALFORMED_JSON', 'SCHEMA_VIOLATION', 'UNKNOWN_METHOD']);
    for (const group of Object.values(r.inventory.byReason) as { count: number; movable: boolean }[])
      expect(group).toMatchObject({ count: 1, movable: false });

    // The dry run moved nothing: status still sees the three.
    const again = JSON.parse((await cli(['status', '--local', '--json'])).stdout.trim().split('\n').pop()!) as Record<
      string,
      any
    >;
    expect(again.dlqDepth).toBe(3);

    // Suggestions carry the flags that chose the fleet: run as shown, they reach the same stack.
    const human = await cli(['status', '--local']);
    expect(human.code, human.stderr).toBe(0);
    expect(human.stdout).toContain('→ npx captcha-fleet redrive --dry-run --local');
    expect(human.stdout).toMatch(/lane +backlog +in flight +waiting/);

    // One governor tick inside the served stack, from another process.
    const tick = await cli(['governor', '--once', '--local', '--json']);
    expect(tick.code, tick.stderr).toBe(0);
    const t = JSON.parse(tick.stdout.trim().split('\n').pop()!) as Record<string, any>;
    expect(typeof t.reason).toBe('string');
    expect(t.freeThreads).toBe(6);
    const dry = await cli(['governor', '--once', '--local', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    expect(dry.stdout).toContain('Governor decision (dry run: nothing applied)');

    // The served line counts the messages handed back, not the parked ones: every one of the 27
    // valid tasks parks (a parked message is a batch item failure too), and the line said "retried"
    // for each while the summary said none were handed back.
    const served = Date.now() + 8_000;
    while (!/served: /.test(serverOut) && Date.now() < served) await new Promise((resolve) => setTimeout(resolve, 200));
    const back = /served: \d+ invocations · \d+ acknowledged · (\d+) handed back/.exec(serverOut);
    expect(back, serverOut).not.toBeNull();
    expect(Number(back?.[1])).toBeLessThan(27);

    server.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(existsSync(stackFile)).toBe(false);
  }, 120_000);

  it('exits 0 on Ctrl-C through npm, where the signal reaches npm and the stack at once', async () => {
    // Prepare: no stack left from the test above (its file would be taken for this one's), then
    // `npm start -- --serve` in its own process group, as a terminal runs it.
    if (server) killGroup(server);
    rmSync(stackFile, { force: true });
    const npm = spawn('npm', ['start', '--silent', '--', '--serve', '--tasks', '0'], {
      cwd: process.cwd(),
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    let out = '';
    npm.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    npm.stderr.on('data', (chunk: Buffer) => (out += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => npm.on('close', (code) => resolve(code)));
    const until = Date.now() + 60_000;
    while (!existsSync(stackFile)) {
      if (Date.now() > until || npm.exitCode !== null) throw new Error(`the served stack did not come up:\n${out}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }

    // Act: Ctrl-C is SIGINT to the whole foreground group.
    process.kill(-(npm.pid as number), 'SIGINT');

    // Assess
    expect(await exited, out).toBe(0);
    expect(existsSync(stackFile)).toBe(false);
  }, 90_000);
});
