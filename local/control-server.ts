/**
 * The served stack's control endpoint on 127.0.0.1: other processes (`captcha-fleet governor
 * --once --local`) reach the governor that runs inside `npm start -- --serve`, since the lanes it
 * moves live in that process. Listed in the stack file as `controlUrl`; it holds no secret.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TickRecord } from '../functions/governor/loop.js';
import type { LocalGovernor } from './governor-local.js';

/** Path of a governor tick: POST runs one now; with `?dryRun=1` it returns the latest decision, applying nothing. */
export const GOVERNOR_TICK_PATH = '/governor/tick';

/** JSON cannot hold Infinity (a drain time of "never"): it travels as a string and comes back. */
export const tickReplacer = (_key: string, value: unknown) => (value === Number.POSITIVE_INFINITY ? 'Infinity' : value);
export const tickReviver = (_key: string, value: unknown) => (value === 'Infinity' ? Number.POSITIVE_INFINITY : value);

export interface ControlServer {
  url: string;
  close(): Promise<void>;
}

/** Serve the governor of a running stack. `latest` gives the last tick record the loop made. */
export async function startControlServer(
  governor: LocalGovernor | undefined,
  latest: () => TickRecord | undefined,
): Promise<ControlServer> {
  const server = createServer((request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const answer = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body, tickReplacer));
    };
    if (request.method !== 'POST' || url.pathname !== GOVERNOR_TICK_PATH) return answer(404, { error: 'not found' });
    if (governor === undefined)
      return answer(409, { error: 'this local stack runs a fixed ceiling (--concurrency): no governor' });
    const dryRun = url.searchParams.get('dryRun') === '1';
    const tick = dryRun ? Promise.resolve(latest()) : governor.tickNow();
    tick.then(
      (record) =>
        record === undefined
          ? answer(503, { error: 'the governor has no decision yet (its last tick failed)' })
          : answer(200, dryRun ? { ...record, applied: false, changes: [] } : record),
      (error: unknown) => answer(500, { error: (error as Error).message }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
