/**
 * `npm run solver-sim`: flags reach the simulator, a bad flag exits 2 with the usage, and
 * SIGTERM prints the final stats.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function runCli(args: string[]) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'local/solver-sim/cli.ts', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  // 'close', not 'exit': the process can exit before its stderr is read to the end (a clean-clone
  // CI run saw exit 2 with an empty stderr); 'close' comes once both streams have ended.
  const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
  return { child, exited, output: () => ({ stdout, stderr }) };
}

async function waitFor(predicate: () => boolean, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!predicate()) {
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for the CLI`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

// Each spawn pays tsx's start-up (seconds on two cores): run them side by side.
describe.concurrent('solver-sim CLI', () => {
  it('names a bad flag value, prints the usage and exits 2', async ({ expect }) => {
    const run = runCli(['--threads', 'many']);
    expect(await run.exited).toBe(2);
    const { stderr } = run.output();
    expect(stderr).toMatch(/--threads <n>.*'many' is invalid.*whole number from 0 to 10000/);
    expect(stderr).toMatch(/Usage: solver-sim/);
  });

  // Before, an empty value read as 0 (a simulator of no threads served on) and a port past 65 535
  // ended in the listener's stack trace.
  for (const [flag, value, range] of [
    ['--threads', '', /whole number from 0 to 10000/],
    ['--port', '70000', /whole number from 0 to 65535/],
    ['--error-rate', '1.5', /a share from 0 to 1/],
  ] as const) {
    it(`refuses ${flag} '${value}' with the range expected`, async ({ expect }) => {
      const run = runCli(['--port', '0', flag, value]);
      const ended = await Promise.race([
        run.exited,
        new Promise((resolve) => setTimeout(() => resolve('running'), 40_000)),
      ]);
      if (ended === 'running') run.child.kill('SIGTERM');
      expect(ended).toBe(2);
      expect(run.output().stderr).toMatch(new RegExp(`${flag} <[a-z]+>.*'${value}' is invalid`));
      expect(run.output().stderr).toMatch(range);
    }, 60_000);
  }

  it('rejects an unknown flag the same way', async ({ expect }) => {
    const unknown = runCli(['--bogus']);
    expect(await unknown.exited).toBe(2);
    expect(unknown.output().stderr).toMatch(/unknown option '--bogus'/);
    expect(unknown.output().stderr).toMatch(/Usage: solver-sim/);
  });

  it('prints a curl example that works as pasted: its key is well-formed', async ({ expect }) => {
    const run = runCli(['--port', '0', '--balance', '3']);
    try {
      await waitFor(() => /curl -s '(\S+\/res\.php\S+)'/.test(run.output().stdout), 45_000);
      const examples = [...run.output().stdout.matchAll(/curl -s '(\S+)'/g)].map((match) => match[1] ?? '');
      const submission = new URL(examples.find((example) => example.includes('/in.php?')) ?? '');
      expect(submission.searchParams.get('key')).toMatch(/^[0-9a-f]{32}$/);
      expect(await (await fetch(submission)).json()).toMatchObject({ status: 1 });
    } finally {
      run.child.kill('SIGTERM');
    }
    expect(await run.exited).toBe(0);
  });

  it('names a malformed --outage and exits 2', async ({ expect }) => {
    const run = runCli(['--outage', '30']);
    expect(await run.exited).toBe(2);
    expect(run.output().stderr).toMatch(/--outage <start:duration>.*expected START:DURATION.*"30"/);
  });

  it('is down inside each --outage window given', async ({ expect }) => {
    const run = runCli(['--port', '0', '--outage', '3600:60', '--outage', '0:600']);
    try {
      await waitFor(() => /listening at (http:\S+)/.test(run.output().stdout), 45_000);
      const url = /listening at (http:\S+)/.exec(run.output().stdout)![1]!;
      expect(run.output().stdout).toContain('outage: down (HTTP 503) from 0 s for 600 s');
      const balance = await fetch(`${url}/res.php?key=${'k'.repeat(32)}&action=getbalance`);
      expect(balance.status).toBe(503);
      const stats = (await (await fetch(`${url}/stats`)).json()) as Record<string, unknown>;
      expect(stats).toMatchObject({ outageAnswers: 1, inOutage: true });
    } finally {
      run.child.kill('SIGTERM');
    }
    expect(await run.exited).toBe(0);
  });

  it('serves with the flags given and prints the final stats on SIGTERM', async ({ expect }) => {
    const run = runCli([
      '--port',
      '0',
      '--threads',
      '1',
      '--latency-ms',
      '0',
      '--balance',
      '2',
      '--price',
      '0.5',
      '--dialect',
      '2captcha',
    ]);
    try {
      // Generous: tsx compiles on start, and a loaded two-core machine makes that slow.
      await waitFor(() => /listening at (http:\S+)/.test(run.output().stdout), 45_000);
      const url = /listening at (http:\S+)/.exec(run.output().stdout)![1]!;
      expect(run.output().stdout).toContain(`curl -s '${url}/in.php?`);
      const key = 'k'.repeat(32);
      const submit = () =>
        fetch(`${url}/in.php?key=${key}&method=textcaptcha&textcaptcha=${encodeURIComponent('2+2?')}`).then((r) =>
          r.text(),
        );
      expect(await submit()).toMatch(/^OK\|\d+$/);
      expect(await (await fetch(`${url}/res.php?key=${key}&action=getbalance`)).text()).toBe('1.5');
    } finally {
      run.child.kill('SIGTERM');
    }
    expect(await run.exited).toBe(0);
    const { stdout } = run.output();
    expect(stdout).toMatch(/SIGTERM: final stats/);
    const stats = JSON.parse(stdout.slice(stdout.indexOf('{', stdout.indexOf('final stats')))) as Record<
      string,
      unknown
    >;
    expect(stats).toMatchObject({ submissions: 1, solved: 1, planThreads: 1, balance: 1.5, spent: 0.5 });
  });
});
