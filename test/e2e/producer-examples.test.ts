/**
 * The producer examples as a user pastes them, against `npm start -- --serve` in another
 * process: the README's TypeScript block from a project that installed this package (a
 * node_modules symlink, as `npm install /path/to/captcha-fleet` makes) run with tsx, and
 * docs/producer.md's Python block with python3 and boto3 (skipped cleanly where boto3 is absent).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localStack } from '../../clients/index.js';
import { ROOT } from '../infra/synth-helpers.js';

const TSX = join(ROOT, 'node_modules/.bin/tsx');
const HAS_BOTO3 = spawnSync('python3', ['-c', 'import boto3'], { stdio: 'ignore' }).status === 0;

/** The fenced code block of `file` whose first line starts with `marker`, as the reader copies it. */
function codeBlock(file: string, marker: string): string {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const blocks = [...text.matchAll(/^```\w*\n([\s\S]*?)^```$/gm)].map((m) => m[1] ?? '');
  const block = blocks.find((b) => b.split('\n')[0]?.startsWith(marker));
  if (block === undefined) throw new Error(`${file} has no code block starting with ${JSON.stringify(marker)}`);
  return block;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(command: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 60_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('producer examples against `npm start -- --serve`', () => {
  const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-producer-'));
  const stackFile = join(dir, 'local-stack.json');
  // No AWS credentials: the examples must reach the emulators without any.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    CAPTCHA_FLEET_STACK_FILE: stackFile,
  };
  let server: ChildProcess | undefined;
  let serverOut = '';

  beforeAll(async () => {
    server = spawn(TSX, ['bin/captcha-fleet.ts', 'start', '--serve', '--tasks', '0', '--solver-latency-ms', '20'], {
      cwd: ROOT,
      env: { ...env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
      stdio: 'pipe',
    });
    server.stdout?.on('data', (chunk: Buffer) => (serverOut += chunk.toString()));
    server.stderr?.on('data', (chunk: Buffer) => (serverOut += chunk.toString()));
    const until = Date.now() + 60_000;
    while (!existsSync(stackFile)) {
      if (Date.now() > until || server.exitCode !== null) throw new Error(`--serve did not come up:\n${serverOut}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }, 90_000);

  afterAll(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server?.once('close', resolve));
      server.kill('SIGINT');
      const timer = setTimeout(() => server?.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  /** The result record of the task id an example printed second on its line (`solved <id> …`). */
  async function recordOf(stdout: string) {
    const taskId = /^solved (\S+)/m.exec(stdout)?.[1];
    expect(taskId, stdout).toBeDefined();
    const { clients, table } = localStack({ stackFile });
    try {
      return (await clients.documents.send(new GetCommand({ TableName: table, Key: { taskId }, ConsistentRead: true })))
        .Item;
    } finally {
      clients.sqs.destroy();
      clients.dynamo.destroy();
    }
  }

  it("runs the README's TypeScript producer from a project that installed the package", async () => {
    // Prepare: a user's project with captcha-fleet installed from a path
    const project = join(dir, 'my-producer');
    mkdirSync(join(project, 'node_modules'), { recursive: true });
    symlinkSync(ROOT, join(project, 'node_modules/captcha-fleet'), 'dir');
    writeFileSync(join(project, 'package.json'), '{ "name": "my-producer", "private": true, "type": "module" }\n');
    writeFileSync(join(project, 'producer.ts'), codeBlock('README.md', '// producer.ts'));

    // Act
    const result = await run(TSX, ['producer.ts'], project, env);

    // Assess
    expect(result.code, `${result.stderr}\n${result.stdout}\n--serve:\n${serverOut}`).toBe(0);
    expect(await recordOf(result.stdout)).toMatchObject({ status: 'solved', method: 'turnstile' });
  }, 90_000);

  it.skipIf(!HAS_BOTO3)(
    "runs docs/producer.md's Python producer (boto3)",
    async () => {
      // Prepare
      writeFileSync(join(dir, 'producer.py'), codeBlock('docs/producer.md', '# producer.py'));

      // Act
      const result = await run('python3', ['producer.py'], dir, env);

      // Assess
      expect(result.code, `${result.stderr}\n${result.stdout}\n--serve:\n${serverOut}`).toBe(0);
      expect(await recordOf(result.stdout)).toMatchObject({ status: 'solved', method: 'turnstile' });
    },
    90_000,
  );
});
