/**
 * The producer examples as a user pastes them, against `npm start -- --serve` in another
 * process: the README's TypeScript block run with tsx in the checkout (as the README says), and
 * docs/producer.md's Python block with python3 and boto3 (skipped cleanly where boto3 is absent).
 * The README's blocks from an installed package, without tsx: test/e2e/package.test.ts.
 */
import { type ChildProcess, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localStack } from '../../clients/index.js';
import { codeBlock, killGroup, run, spawnGroup } from '../helpers/processes.js';
import { ROOT } from '../infra/synth-helpers.js';

const TSX = join(ROOT, 'node_modules/.bin/tsx');
const HAS_BOTO3 = spawnSync('python3', ['-c', 'import boto3'], { stdio: 'ignore' }).status === 0;

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
    server = spawnGroup(
      TSX,
      ['bin/captcha-fleet.ts', 'start', '--serve', '--tasks', '0', '--solver-latency-ms', '20'],
      {
        cwd: ROOT,
        env: { ...env, AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
        stdio: 'pipe',
      },
    );
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
      const timer = setTimeout(() => server && killGroup(server), 10_000);
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

  it("runs the README's TypeScript producer in the checkout with tsx", async () => {
    // Prepare: saved in the checkout, where `captcha-fleet/producer` is the source (tsconfig paths)
    const file = join(ROOT, `.producer-example-${process.pid}.ts`);
    writeFileSync(file, codeBlock('README.md', '// producer.ts'));

    // Act
    const result = await run(TSX, [file], ROOT, env).finally(() => rmSync(file, { force: true }));

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
