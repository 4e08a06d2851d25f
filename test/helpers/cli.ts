/**
 * The real `captcha-fleet` CLI (or another of the project's entry points) as a child process (tsx),
 * for end-to-end tests: its exit code and both streams, killed with a clear error when it outlives
 * the timeout.
 */
import { killGroup, spawnGroup } from './processes.js';

const CLI = ['node_modules/.bin/tsx', 'bin/captcha-fleet.ts'] as const;

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run `captcha-fleet <args>`; rejects (after killing it) when it has not ended within `timeoutMs`. */
export function runCli(args: string[], timeoutMs = 90_000, env: NodeJS.ProcessEnv = {}): Promise<CliRun> {
  return runScript(CLI[1], args, timeoutMs, env);
}

/** Run one of the project's TypeScript entry points (`bench/faults.ts`) under tsx, as `runCli` runs the CLI. */
export function runScript(
  script: string,
  args: string[],
  timeoutMs = 90_000,
  env: NodeJS.ProcessEnv = {},
): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawnGroup(CLI[0], [script, ...args], {
      cwd: process.cwd(),
      env: { ...process.env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => {
      killGroup(child);
      reject(new Error(`${script} did not end in ${timeoutMs} ms\nstdout:\n${stdout}\nstderr:\n${stderr}`));
    }, timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The JSON object on the last stdout line (`--json`). */
export function lastJson(stdout: string): Record<string, unknown> {
  const lines = stdout.trim().split('\n');
  return JSON.parse(lines[lines.length - 1] as string) as Record<string, unknown>;
}
