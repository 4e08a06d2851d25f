/**
 * The JSON task API wire of the solver client against scripted answers (undici MockAgent): what
 * it sends (the key only in the body, the operator's developer id, ids with every digit), and a
 * provider or proxy that cannot hurt it (4xx bodies, malformed ids, echoed keys, unbelievable
 * costs, oversized extras, unknown statuses).
 */
import { MockAgent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSolverClient, type SolverClientOptions } from '../../functions/adapters/solver-client.js';
import { createFixedPollSchedule } from '../../functions/core/poll-schedule.js';
import { SolverTaskError, SolverTransientError } from '../../functions/core/solver-protocol.js';
import type { Task } from '../../functions/core/task.js';

const KEY = 'c0ffee00c0ffee00c0ffee00c0ffee00';
const ORIGIN = 'http://json-solver.test';

const turnstile: Task = {
  id: 'task-j',
  method: 'turnstile',
  priority: 'normal',
  submittedAt: 0,
  params: { sitekey: '0x4AAAAAAAC3DHQFLr1GavRN', pageurl: 'https://shop.example/login', action: 'login' },
} as Task;

interface Seen {
  path: string;
  body: string;
  contentType: string | undefined;
}

describe('solver client, JSON task API wire', () => {
  let agent: MockAgent;
  let seen: Seen[];
  let logs: string[];

  beforeEach(() => {
    agent = new MockAgent();
    agent.disableNetConnect();
    seen = [];
    logs = [];
  });
  afterEach(async () => agent.close());

  /** Script the answers of one JSON API method, in order. */
  function script(method: string, replies: { status?: number; body: unknown }[]): void {
    for (const reply of replies) {
      agent
        .get(ORIGIN)
        .intercept({ path: `/${method}`, method: 'POST' })
        .reply((options) => {
          const headers = options.headers as Record<string, string>;
          seen.push({ path: options.path, body: String(options.body), contentType: headers['content-type'] });
          return {
            statusCode: reply.status ?? 200,
            data: typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body),
          };
        });
    }
  }

  function client(options: Partial<SolverClientOptions> = {}) {
    return createSolverClient({
      baseUrl: ORIGIN,
      key: KEY,
      dialect: '2captcha',
      protocol: 'create-task',
      dispatcher: agent,
      sleep: async () => undefined,
      schedule: createFixedPollSchedule({
        pollDefaults: { image: { firstPollMs: 1, intervalMs: 1 }, token: { firstPollMs: 1, intervalMs: 1 } },
      }),
      retry: { baseBackoffMs: 1, maxBackoffMs: 1, maxTransientRetries: 1, maxOverCapRetries: 0 },
      logger: { debug: (m, a) => logs.push(m + JSON.stringify(a)), warn: (m, a) => logs.push(m + JSON.stringify(a)) },
      ...options,
    });
  }
  const solve = (c: ReturnType<typeof client>, task = turnstile) => c.solve(task, { deadlineAt: Date.now() + 60_000 });
  const ready = (solution: unknown, extra: Record<string, unknown> = {}) => ({
    body: { errorId: 0, status: 'ready', solution, ...extra },
  });

  it.each([
    ['capmonster', 3_000],
    ['capsolver', 3_000],
    ['2captcha', 5_000],
  ] as const)("keeps %s's gap between two polls of one task, whatever the schedule plans", async (dialect, gap) => {
    // Before: only the parked watch kept it; a learned schedule polled a waiting solve every 0.8 s
    // and CapMonster refused every other request (ERROR_TOO_MUCH_REQUESTS).
    let now = 1_000_000;
    const polledAt: number[] = [];
    script('createTask', [{ body: { errorId: 0, taskId: 70000000031 } }]);
    script('getTaskResult', [
      ...Array.from({ length: 3 }, () => ({ body: { errorId: 0, status: 'processing' } })),
      ready({ token: '0.t' }),
    ]);
    const c = client({
      dialect,
      clock: () => now,
      sleep: async (ms) => {
        now += Math.max(0, ms);
      },
      schedule: createFixedPollSchedule({
        pollDefaults: { image: { firstPollMs: 500, intervalMs: 500 }, token: { firstPollMs: 500, intervalMs: 500 } },
      }),
    });
    const outcome = await c.solve(turnstile, {
      deadlineAt: now + 120_000,
      onSolverAnswer: (answer) => {
        if (answer.request === 'result') polledAt.push(now);
      },
    });
    expect(outcome.resultRequests).toBe(4);
    const gaps = polledAt.slice(1).map((at, i) => at - (polledAt[i] as number));
    expect(gaps).toHaveLength(3);
    for (const g of gaps) expect(g).toBeGreaterThanOrEqual(gap);
    // The first poll keeps the plan's own time: the gap is between two requests.
    expect(polledAt[0]).toBeLessThan(1_000_000 + gap);
  });

  it('polls an id written as text with a leading zero as text: the request stays JSON', async () => {
    script('createTask', [{ body: { errorId: 0, taskId: '0123' } }]);
    script('getTaskResult', [ready({ token: '0.t' })]);
    const outcome = await solve(client());
    expect(outcome.solverId).toBe('0123');
    const poll = seen.find((request) => request.path === '/getTaskResult');
    expect(JSON.parse(poll?.body ?? '')).toEqual({ clientKey: KEY, taskId: '0123' });
  });

  it("sends the key only in the body, the task mapped, and the operator's softId as a number", async () => {
    script('createTask', [{ body: { errorId: 0, taskId: 72345678901 } }]);
    script('getTaskResult', [
      { body: { errorId: 0, status: 'processing' } },
      ready({ token: '0.tok', userAgent: 'UA/1' }, { cost: '0.00145' }),
    ]);
    const outcome = await solve(client({ softId: '4580' }));
    expect(outcome).toMatchObject({
      answer: '0.tok',
      solverId: '72345678901',
      extras: { userAgent: 'UA/1' },
      costUsd: 0.00145,
      costSource: 'provider',
      resultRequests: 2,
    });
    const [create, poll] = seen;
    expect(create?.contentType).toBe('application/json');
    expect(JSON.parse(create?.body ?? '')).toEqual({
      clientKey: KEY,
      task: {
        type: 'TurnstileTaskProxyless',
        websiteURL: 'https://shop.example/login',
        websiteKey: '0x4AAAAAAAC3DHQFLr1GavRN',
        action: 'login',
      },
      softId: 4580,
    });
    expect(poll?.body).toBe(`{"clientKey":"${KEY}","taskId":72345678901}`);
    expect(seen.every((request) => !request.path.includes(KEY))).toBe(true);
  });

  it("sends CapSolver's appId as text and its task id as a string", async () => {
    const id = '61138bb6-19fb-11ec-a9c8-0242ac110006';
    script('createTask', [{ body: { errorId: 0, taskId: id } }]);
    script('getTaskResult', [ready({ token: '0.t' })]);
    await solve(client({ dialect: 'capsolver', softId: 'FC3D8005-4358-4E90-8835-0B0456FFE2FA' }));
    expect(JSON.parse(seen[0]?.body ?? '')).toMatchObject({
      appId: 'FC3D8005-4358-4E90-8835-0B0456FFE2FA',
      task: { type: 'AntiTurnstileTaskProxyLess' },
    });
    expect(JSON.parse(seen[1]?.body ?? '')).toMatchObject({ taskId: id });
  });

  it('keeps every digit of a task id past 2^53', async () => {
    script('createTask', [{ body: '{"errorId":0,"taskId":12345678901234567890}' }]);
    script('getTaskResult', [ready({ token: '0.t' })]);
    const outcome = await solve(client());
    expect(outcome.solverId).toBe('12345678901234567890');
    expect(seen[1]?.body).toContain('"taskId":12345678901234567890');
  });

  it('reads a 4xx errorId body as the code (CapSolver answers errors with 400), but never a 4xx success', async () => {
    script('createTask', [
      { status: 400, body: { errorId: 1, errorCode: 'ERROR_INVALID_TASK_DATA', errorDescription: 'bad' } },
    ]);
    await expect(solve(client({ dialect: 'capsolver' }))).rejects.toMatchObject({
      name: 'SolverTaskError',
      code: 'ERROR_INVALID_TASK_DATA',
    });
    script('createTask', [
      { status: 404, body: { errorId: 0, taskId: 70000000001 } },
      { status: 302, body: { errorId: 0, taskId: 70000000002 } },
    ]);
    const error = await solve(client()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SolverTransientError);
    expect((error as SolverTransientError).code).toBe('HTTP_302');
  });

  it('reads a 4xx error body as a passing fault from a provider that answers its errors with 200', async () => {
    script('getBalance', [{ status: 401, body: { errorId: 1, errorCode: 'ERROR_KEY_DOES_NOT_EXIST' } }]);
    await expect(client().getBalance()).rejects.toMatchObject({ name: 'SolverTransientError', code: 'HTTP_401' });
    script('getBalance', [{ status: 401, body: { errorId: 1, errorCode: 'ERROR_KEY_DENIED_ACCESS' } }]);
    await expect(client({ dialect: 'capsolver' }).getBalance()).rejects.toMatchObject({
      name: 'SolverAccountError',
      code: 'ERROR_KEY_DENIED_ACCESS',
    });
  });

  it.each([
    ['the key echoed', KEY],
    ['letters', 'abc'],
    ['negative', -5],
    ['a fraction', 1.5],
  ])(
    'refuses a task id that is not one (%s) before anything records it, and never sends the task again',
    async (_label, taskId) => {
      // Before: a passing fault, retried: accepted (errorId 0) and so paid at every try.
      script('createTask', [{ body: { errorId: 0, taskId } }, { body: { errorId: 0, taskId } }]);
      let recorded = 0;
      const error = await client()
        .solve(turnstile, { deadlineAt: Date.now() + 60_000, onSubmitted: () => void recorded++ })
        .catch((e: unknown) => e);
      expect(error).toMatchObject({ name: 'SolverTaskError', code: 'MALFORMED_SOLVER_ID' });
      expect(String((error as Error).message)).toContain('not sent again');
      expect(seen.filter((request) => request.path === '/createTask')).toHaveLength(1);
      expect(recorded).toBe(0);
      expect(String((error as Error).message)).not.toContain(KEY);
    },
  );

  it('takes the key out of an answer and its extras, drops an oversized extra, ignores unknown fields', async () => {
    script('createTask', [{ body: { errorId: 0, taskId: 70000000003 } }]);
    script('getTaskResult', [
      ready({ token: `0.${KEY}.x`, userAgent: `UA ${KEY}`, cookies: 'c'.repeat(9_000), secret: 'not kept' }),
    ]);
    const outcome = await solve(client());
    expect(outcome.answer).toBe('0.***.x');
    expect(outcome.extras).toEqual({ userAgent: 'UA ***' });
    expect(logs.join('\n')).not.toContain(KEY);
    expect(logs.some((line) => line.includes('over its bound'))).toBe(true);
  });

  it('takes the key out upper-cased or reversed too: from the answer, its extras and an error code', async () => {
    const upper = KEY.toUpperCase();
    const reversed = [...KEY].reverse().join('');
    script('createTask', [{ body: { errorId: 0, taskId: 70000000013 } }]);
    script('getTaskResult', [ready({ token: `0.${upper}.x`, userAgent: `UA ${reversed}`, cookies: `c=${upper}` })]);
    const outcome = await solve(client());
    expect(outcome.answer).toBe('0.***.x');
    expect(outcome.extras).toEqual({ userAgent: 'UA ***', cookies: 'c=***' });
    // An errorCode that is the key passes the protocol's code shape: keyed out, not carried.
    script('getBalance', [{ body: { errorId: 1, errorCode: `ERROR_${upper}` } }]);
    const error = await client()
      .getBalance()
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: 'UNRECOGNIZED_CODE' });
    const said = `${String((error as Error).message)} ${logs.join('\n')}`.toLowerCase();
    expect(said).not.toContain(KEY);
    expect(said).not.toContain(reversed);
  });

  it('reads a solution nested thousands deep as a passing fault, not a stack overflow', async () => {
    script('createTask', [{ body: { errorId: 0, taskId: 70000000014 } }]);
    const nested = `{"errorId":0,"status":"ready","solution":{"token":"0.t","cookies":{"c":${'['.repeat(12_000)}${']'.repeat(12_000)}}}}`;
    script('getTaskResult', [{ body: nested }, { body: nested }]);
    await expect(solve(client())).rejects.toMatchObject({ name: 'SolverTransientError', code: 'UNPARSEABLE_BODY' });
  });

  it('fails a ready answer holding control characters, and drops such an extra', async () => {
    // A CR LF in a cookie or user agent injects headers in a producer that sends it on.
    for (const token of ['tok\r\nSet-Cookie: evil=1', 'a\u001b[31mred', 'line\u2028sep', 'lone \ud800 surrogate']) {
      script('createTask', [{ body: { errorId: 0, taskId: 70000000015 } }]);
      script('getTaskResult', [ready({ token })]);
      const error = await solve(client()).catch((e: unknown) => e);
      expect(error, JSON.stringify(token)).toBeInstanceOf(SolverTaskError);
      expect((error as SolverTaskError).code).toBe('UNREADABLE_SOLUTION');
    }
    script('createTask', [{ body: { errorId: 0, taskId: 70000000016 } }]);
    script('getTaskResult', [ready({ token: '0.t', userAgent: 'Mozilla\r\nX-Evil: 1', cookies: 'c=1' })]);
    const outcome = await solve(client());
    expect(outcome.answer).toBe('0.t');
    expect(outcome.extras).toEqual({ cookies: 'c=1' });
    expect(logs.some((line) => line.includes('holds control characters; dropped'))).toBe(true);
  });

  it("fails a GeeTest or Amazon answer whose member holds control characters (each member checked, not the answer's JSON)", async () => {
    // Before: escaped in the answer's JSON text, a member's CR LF and ESC passed and came back whole when parsed.
    const geetest = {
      ...turnstile,
      method: 'geetest',
      params: { gt: '022397c99c9f646f6477822485f30404', challenge: 'abc', pageurl: 'https://shop.example/' },
    } as Task;
    const amazon = {
      ...turnstile,
      method: 'amazon_waf',
      params: {
        sitekey: 'AQIDAHjcYu/GjX+QlghicBg',
        iv: 'CgAHbCe2GgAAAAAj',
        context: 'c',
        pageurl: 'https://shop.example/',
      },
    } as Task;
    for (const [task, solution] of [
      [geetest, { challenge: 'c\u001b[2Jh', validate: 'v', seccode: 'v|jordan' }],
      [geetest, { challenge: 'c', validate: 'v\r\nSet-Cookie: evil=1', seccode: 'v|jordan' }],
      [amazon, { captcha_voucher: 'v\r\nX: 1', existing_token: 't' }],
    ] as const) {
      script('createTask', [{ body: { errorId: 0, taskId: 70000000021 } }]);
      script('getTaskResult', [ready(solution)]);
      const error = await solve(client(), task).catch((e: unknown) => e);
      expect(error, JSON.stringify(solution)).toBeInstanceOf(SolverTaskError);
      expect((error as SolverTaskError).code).toBe('UNREADABLE_SOLUTION');
    }
    // A challenge given as a number is text in the answer; a cookie that is not text is left out.
    script('createTask', [{ body: { errorId: 0, taskId: 70000000022 } }]);
    script('getTaskResult', [
      ready({ challenge: 42, validate: 'v', seccode: 's', cookies: { a: { b: 'c' }, keep: 'yes', n: 7 } }),
    ]);
    const outcome = await solve(client(), geetest);
    expect(JSON.parse(outcome.answer)).toEqual({
      geetest_challenge: '42',
      geetest_validate: 'v',
      geetest_seccode: 's',
    });
    expect(outcome.extras).toEqual({ cookies: 'keep=yes; n=7' });
  });

  it('reads an errorId written as text as its number: "1" carries its code, "0" is a success', async () => {
    script('getBalance', [
      { body: { errorId: '1', errorCode: 'ERROR_KEY_DOES_NOT_EXIST' } },
      { body: { errorId: '0', balance: 4.5 } },
    ]);
    const c = client();
    // Before, "1" was no answer (UNPARSEABLE_BODY, a passing fault) and the refused key went unseen.
    await expect(c.getBalance()).rejects.toMatchObject({ code: 'ERROR_KEY_DOES_NOT_EXIST', errorClass: 'account' });
    await expect(c.getBalance()).resolves.toBe(4.5);
  });

  it('believes only a balance an account can have', async () => {
    script('getBalance', [
      { body: '{"errorId":0,"balance":1e308}' },
      { body: { errorId: 0, balance: '0x1F' } },
      { body: { errorId: 0, balance: 12.5 } },
      { body: { errorId: 0, balance: '3.10' } },
    ]);
    const c = client({ retry: { baseBackoffMs: 1, maxBackoffMs: 1, maxTransientRetries: 0, maxOverCapRetries: 0 } });
    await expect(c.getBalance()).rejects.toMatchObject({ code: 'UNPARSEABLE_BODY' });
    await expect(c.getBalance()).rejects.toMatchObject({ code: 'UNPARSEABLE_BODY' });
    await expect(c.getBalance()).resolves.toBe(12.5);
    await expect(c.getBalance()).resolves.toBe(3.1);
  });

  it('believes only a plausible cost, else uses the configured price', async () => {
    for (const cost of ['abc', -1, 1_000_000, '0x1', '0xA', '1e-3', ' 0.005', 'Infinity']) {
      script('createTask', [{ body: { errorId: 0, taskId: 70000000004 } }]);
      script('getTaskResult', [ready({ token: '0.t' }, { cost })]);
      const outcome = await solve(client({ prices: { turnstile: 0.002 } }));
      expect(outcome, String(cost)).toMatchObject({ costUsd: 0.002, costSource: 'configured' });
    }
  });

  it("polls on through CapMonster's CAPTCHA_NOT_READY error and an idle status; a ready body with no answer fails the task", async () => {
    script('createTask', [{ body: { errorId: 0, taskId: 70000000005 } }]);
    script('getTaskResult', [
      { body: { errorId: 1, errorCode: 'CAPTCHA_NOT_READY' } },
      { body: { errorId: 0, status: 'idle' } },
      ready({ token: '0.t' }),
    ]);
    expect((await solve(client({ dialect: 'capmonster' }))).resultRequests).toBe(3);
    script('createTask', [{ body: { errorId: 0, taskId: 70000000006 } }]);
    script('getTaskResult', [ready({ gRecaptchaResponse: 'wrong field' })]);
    const error = await solve(client()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SolverTaskError);
    expect((error as SolverTaskError).code).toBe('UNREADABLE_SOLUTION');
  });

  it('ends a task the provider answers `failed` (a task error, not polled again)', async () => {
    script('createTask', [{ body: { errorId: 0, taskId: 70000000008 } }]);
    script('getTaskResult', [{ body: { errorId: 0, status: 'failed' } }, { body: { errorId: 0, status: 'failed' } }]);
    await expect(solve(client())).rejects.toMatchObject({ name: 'SolverTaskError', code: 'TASK_FAILED' });
    expect(seen.filter((request) => request.path === '/getTaskResult')).toHaveLength(1);
  });

  it('treats an unknown status as a passing fault', async () => {
    script('createTask', [{ body: { errorId: 0, taskId: 70000000007 } }]);
    script('getTaskResult', [{ body: { errorId: 0, status: 'weird' } }, { body: { errorId: 0, status: 'weird' } }]);
    await expect(solve(client())).rejects.toMatchObject({ name: 'SolverTransientError', code: 'UNRECOGNIZED_STATUS' });
  });

  it("sends the operator's soft_id to in.php after the task's params", async () => {
    agent
      .get(ORIGIN)
      .intercept({ path: '/in.php', method: 'POST' })
      .reply((options) => {
        seen.push({ path: options.path, body: String(options.body), contentType: undefined });
        return { statusCode: 200, data: '{"status":1,"request":"70000000008"}' };
      });
    agent
      .get(ORIGIN)
      .intercept({ path: (p) => p.startsWith('/res.php'), method: 'GET' })
      .reply(200, '{"status":1,"request":"0.t","useragent":"UA/2"}');
    const outcome = await solve(client({ protocol: 'res-php', softId: '4580' }));
    expect(new URLSearchParams(seen[0]?.body).get('soft_id')).toBe('4580');
    expect(outcome.extras).toEqual({ userAgent: 'UA/2' });
    expect(outcome.costUsd).toBeUndefined();
  });
});
