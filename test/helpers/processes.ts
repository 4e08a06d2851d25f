/**
 * Child processes for end-to-end tests: run one to its end (exit code and both streams, killed
 * when it outlives its timeout), and the fenced code blocks of the docs as a reader copies them.
 */
import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../infra/synth-helpers.js';

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Spawn `command args` in a process group of its own, so that `killGroup` ends what it started
 * too: tsx and npm run the script in a child of their own, which a kill of theirs alone left
 * running (a benchmark that took a bad flag ran on after its test's timeout).
 */
export function spawnGroup(command: string, args: readonly string[], options: SpawnOptions): ChildProcess {
  return spawn(command, args, { ...options, detached: true });
}

/** Kill a `spawnGroup` child and everything it started. */
export function killGroup(child: ChildProcess): void {
  if (child.pid === undefined || child.exitCode !== null) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
}

/** Run `command args` in `cwd` with exactly `env`; resolves when it ends (killed after `timeoutMs`, with what it started). */
export function run(
  command: string,
  args: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv,
  timeoutMs = 60_000,
): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawnGroup(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => killGroup(child), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** A failed run's streams, for an assertion's message. */
export function describeRun(what: string, result: Run): string {
  return `${what} exited ${result.code}\nstdout:\n${result.stdout}\nstderr:\n${result.stderr}`;
}

/** The fenced code block of `file` whose first line starts with `marker`, as the reader copies it. */
export function codeBlock(file: string, marker: string): string {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const blocks = [...text.matchAll(/^```\w*\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? '');
  const block = blocks.find((b) => b.split('\n')[0]?.startsWith(marker));
  if (block === undefined) throw new Error(`${file} has no code block starting with ${JSON.stringify(marker)}`);
  return block;
}
