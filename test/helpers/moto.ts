/**
 * moto_server for the optional integration tests: it is on PATH on the project's machines,
 * not on users'. Tests use `describe.skipIf(!HAS_MOTO)` so they skip cleanly without it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';

export const HAS_MOTO = spawnSync('sh', ['-c', 'command -v moto_server'], { encoding: 'utf8' }).status === 0;

export interface MotoServer {
  endpoint: string;
  stop(): Promise<void>;
}

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

/**
 * Start moto_server on a free loopback port and wait until it answers (30 s at most). The
 * endpoint names the host `127.0.0.1`, or `localhost` when asked (moto reads an S3 URL path-style,
 * as the CDK CLI's TemplateURL is, only when its host contains "localhost").
 */
export async function startMotoServer(
  options: { env?: Record<string, string>; hostName?: '127.0.0.1' | 'localhost' } = {},
): Promise<MotoServer> {
  const port = await freePort();
  const endpoint = `http://${options.hostName ?? '127.0.0.1'}:${port}`;
  const moto: ChildProcess = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], {
    stdio: 'ignore',
    env: { ...process.env, ...options.env },
  });
  const stop = async () => {
    if (moto.exitCode !== null || moto.signalCode !== null) return;
    const exited = new Promise((resolve) => moto.once('exit', resolve));
    moto.kill('SIGTERM');
    await exited;
  };
  const until = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${endpoint}/moto-api/`)).status < 500) return { endpoint, stop };
    } catch {
      // not listening yet
    }
    if (Date.now() > until) {
      await stop();
      throw new Error('moto_server did not start within 30 s');
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
