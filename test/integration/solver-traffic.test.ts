/**
 * The bill's solver traffic (functions/core/cost/solver-traffic.ts) is what the client sends: each
 * of the solver client's res.php requests, over real HTTP to a local server that counts the bytes
 * it receives, stays within the figure the bill prices it at (data transfer out is billed by the
 * byte; the solver's answers come in, free).
 */
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createSolverClient, type SolverClient } from '../../functions/adapters/solver-client.js';
import { DEFAULT_COST_ASSUMPTIONS } from '../../functions/core/cost/fleet-bill.js';
import { SOLVER_REQUEST_BYTES } from '../../functions/core/cost/solver-traffic.js';
import type { Task } from '../../functions/core/task.js';

const KEY = 'fedcba9876543210fedcba9876543210';

/** A server that answers every request at once and counts the bytes of each (one per connection turn). */
let server: Server;
let requests: number[] = [];
let client: SolverClient;

beforeAll(async () => {
  server = createServer((socket) => {
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk) => {
      pending = Buffer.concat([pending, chunk]);
      const text = pending.toString('latin1');
      const headEnd = text.indexOf('\r\n\r\n');
      if (headEnd < 0) return;
      const length = Number(/content-length: *(\d+)/i.exec(text.slice(0, headEnd))?.[1] ?? 0);
      if (pending.length < headEnd + 4 + length) return;
      requests.push(pending.length);
      const body = text.includes('in.php')
        ? '{"status":1,"request":"7438219382412"}'
        : text.includes('getbalance')
          ? '{"status":1,"request":"12.5"}'
          : '{"status":0,"request":"CAPCHA_NOT_READY"}';
      pending = Buffer.alloc(0);
      socket.write(
        `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  client = createSolverClient({
    baseUrl: `http://127.0.0.1:${port}`,
    key: KEY,
    dialect: 'captchaai',
    protocol: 'res-php',
  });
});

afterAll(async () => {
  await client.close();
  await new Promise((resolve) => server.close(resolve));
});

beforeEach(() => {
  requests = [];
});

/** Solver ids of 13 digits, longer than either provider's today (11–12). */
const ids = (n: number) =>
  Array.from({ length: n }, (_, i) => ({ solverId: String(7_438_219_382_412 + i), method: 'userrecaptcha' }));
const total = () => requests.reduce((sum, bytes) => sum + bytes, 0);
const b = SOLVER_REQUEST_BYTES;

describe("the solver client's requests, as the bill prices them", () => {
  it('a poll of one submission', async () => {
    await client.pollMany(ids(1));
    expect(requests).toHaveLength(1);
    expect(total()).toBeLessThanOrEqual(b.pollBase + b.pollPerId);
  });

  it('a bulk poll: one request per 100 submissions, each id within its share', async () => {
    await client.pollMany(ids(100));
    expect(requests).toHaveLength(1);
    expect(total()).toBeLessThanOrEqual(b.pollBase + 100 * b.pollPerId);
    requests = [];
    await client.pollMany(ids(250));
    expect(requests).toHaveLength(3);
    expect(total()).toBeLessThanOrEqual(3 * b.pollBase + 250 * b.pollPerId);
  });

  it('a balance read', async () => {
    await client.getBalance();
    expect(requests).toHaveLength(1);
    expect(total()).toBeLessThanOrEqual(b.balance);
  });

  it("a reCAPTCHA task's submission, under the message size a submission is billed at", async () => {
    const task = {
      id: 'traffic-1',
      method: 'userrecaptcha',
      priority: 'normal',
      submittedAt: Date.now(),
      params: {
        googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-',
        pageurl: 'https://example.com/login?next=%2Faccount',
      },
    } as Task;
    await client.submit(task, { deadlineAt: Date.now() + 10_000 });
    expect(requests).toHaveLength(1);
    expect(total()).toBeLessThan(DEFAULT_COST_ASSUMPTIONS.taskBytes);
  });
});
