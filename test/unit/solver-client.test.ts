import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, MockAgent } from 'undici';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createSolverClient, type SolverClientOptions } from '../../functions/adapters/solver-client.js';
import { AnswerWaits } from '../../functions/adapters/solver-context.js';
import { createAdaptivePollSchedule, createFixedPollSchedule } from '../../functions/core/poll-schedule.js';
import {
  SolverAccountError,
  SolverError,
  SolverOverCapError,
  SolverTaskError,
  SolverTimeoutError,
  SolverTransientError,
} from '../../functions/core/solver-protocol.js';
import type { SolverAnswer } from '../../functions/core/ports.js';
import type { Task } from '../../functions/core/task.js';

const KEY = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
const ORIGIN = 'http://solver.test';
const START = 1_700_000_000_000;

/** What one scripted exchange answers. */
type Reply = { status?: number; body: unknown } | { error: Error };

interface Seen {
  path: string;
  method: string;
  body: string | undefined;
  contentType: string | undefined;
  /** Fake-clock time the request was made. */
  at: number;
}

const task = (overrides: Partial<Task> = {}): Task =>
  ({
    id: 'task-1',
    method: 'userrecaptcha',
    priority: 'normal',
    submittedAt: START,
    params: {
      googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-',
      pageurl: 'https://example.com/login?a=1&b=2',
      invisible: 1,
      userAgent: 'Mozilla/5.0 (X11)',
    },
    ...overrides,
  }) as Task;

const ok = (request: unknown): Reply => ({ body: { status: 1, request } });
const code = (request: string): Reply => ({ body: { status: 0, request } });
const NOT_READY = code('CAPCHA_NOT_READY');

describe('solver client', () => {
  let agent: MockAgent;
  let now: number;
  let seen: Seen[];
  let sleeps: number[];
  let logs: string[];

  /** Script the answers of in.php or res.php, in order; each is used once. */
  function script(path: 'in.php' | 'res.php', replies: Reply[]): void {
    const pool = agent.get(ORIGIN);
    for (const reply of replies) {
      const interceptor = pool.intercept({ path: (p) => p.startsWith(`/${path}`), method: () => true });
      if ('error' in reply) {
        interceptor.replyWithError(reply.error);
        continue;
      }
      interceptor.reply((options) => {
        const headers = options.headers as Record<string, string> | undefined;
        seen.push({
          path: options.path,
          method: options.method,
          body: options.body as string | undefined,
          contentType: headers?.['content-type'],
          at: now,
        });
        return {
          statusCode: reply.status ?? 200,
          data: typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body),
        };
      });
    }
  }

  function client(overrides: Partial<SolverClientOptions> = {}) {
    return createSolverClient({
      baseUrl: `${ORIGIN}/`,
      key: KEY,
      dialect: 'captchaai',
      dispatcher: agent,
      clock: () => now,
      sleep: async (ms) => {
        sleeps.push(ms);
        now += ms;
      },
      schedule: createFixedPollSchedule(),
      random: () => 0,
      retry: { baseBackoffMs: 1_000, maxBackoffMs: 8_000 },
      logger: {
        debug: (m, a) => logs.push(`${m} ${JSON.stringify(a)}`),
        warn: (m, a) => logs.push(`${m} ${JSON.stringify(a)}`),
      },
      ...overrides,
    });
  }

  const options = (extra: Partial<Parameters<ReturnType<typeof client>['solve']>[1]> = {}) => ({
    deadlineAt: now + 180_000,
    ...extra,
  });

  beforeEach(() => {
    agent = new MockAgent();
    agent.disableNetConnect();
    now = START;
    seen = [];
    sleeps = [];
    logs = [];
  });

  afterEach(async () => {
    await agent.close();
  });

  it('submits the task urlencoded with the client key, then polls res.php until the answer', async () => {
    script('in.php', [ok(75357844800)]);
    script('res.php', [NOT_READY, NOT_READY, ok('03AGdBq2-token')]);
    const submitted: Array<{ id: string; at: number }> = [];

    const outcome = await client().solve(
      task(),
      options({ onSubmitted: (id) => void submitted.push({ id, at: now }) }),
    );

    const submit = seen[0] as Seen;
    expect(submit).toMatchObject({ path: '/in.php', method: 'POST', contentType: 'application/x-www-form-urlencoded' });
    expect(Object.fromEntries(new URLSearchParams(submit.body))).toEqual({
      key: KEY,
      method: 'userrecaptcha',
      json: '1',
      googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-',
      pageurl: 'https://example.com/login?a=1&b=2',
      invisible: '1',
      userAgent: 'Mozilla/5.0 (X11)',
    });
    const polls = seen.slice(1);
    for (const poll of polls) {
      const url = new URL(poll.path, ORIGIN);
      expect(url.pathname).toBe('/res.php');
      expect(poll.method).toBe('GET');
      expect(Object.fromEntries(url.searchParams)).toEqual({ key: KEY, action: 'get', id: '75357844800', json: '1' });
    }
    // The protocol's token schedule: 15 s, then every 5 s.
    expect(polls.map((poll) => poll.at - START)).toEqual([15_000, 20_000, 25_000]);
    expect(submitted).toEqual([{ id: '75357844800', at: START }]);
    expect(outcome).toEqual({
      answer: '03AGdBq2-token',
      solverId: '75357844800',
      acceptedAt: START,
      answeredAt: START + 25_000,
      resultRequests: 3,
      retries: { overCap: 0, transient: 0 },
    });
    agent.assertNoPendingInterceptors();
  });

  it('keeps to the planned slots when timers fire late', async () => {
    script('in.php', [ok('1')]);
    script('res.php', [NOT_READY, NOT_READY, ok('token')]);
    const lateSleep = async (ms: number) => {
      now += ms + 3;
    };

    await client({ sleep: lateSleep }).solve(task(), options());

    expect(seen.slice(1).map((poll) => poll.at - START)).toEqual([15_003, 20_003, 25_003]);
  });

  it('reports each completed solve to the schedule, which then adapts', async () => {
    const schedule = createAdaptivePollSchedule({ minSamples: 3 });
    const solver = client({ schedule });
    for (let i = 0; i < 3; i += 1) {
      script('in.php', [ok(`${1000 + i}`)]);
      script('res.php', [NOT_READY, ok('token')]);
      await solver.solve(task(), options());
    }

    expect(schedule.stats().byMethod.userrecaptcha).toMatchObject({ tasks: 3, resultRequests: 6 });
    // Every answer was ready in (15 s, 20 s]: the next solve polls at 15 s or later, not at 1 s.
    const plan = schedule.plan('userrecaptcha');
    expect(plan.source).toBe('adaptive');
    expect(plan.firstPollMs).toBe(15_000);
    expect(plan.offsetsMs[plan.offsetsMs.length - 1]).toBe(20_000);
  });

  it("reads GeeTest answers (an object) as JSON text of the method's members, and nothing else", async () => {
    const geetest = task({ method: 'geetest', params: { gt: 'g', challenge: 'c', pageurl: 'https://example.com/' } });
    script('in.php', [ok('123')]);
    script('res.php', [ok({ geetest_challenge: 'c', geetest_validate: 'v', geetest_seccode: 's', junk: { deep: 1 } })]);

    const outcome = await client().solve(geetest, options());

    expect(JSON.parse(outcome.answer)).toEqual({ geetest_challenge: 'c', geetest_validate: 'v', geetest_seccode: 's' });
  });

  it.each([
    // Before, each was recorded as solved: the object's JSON, the list's, GeeTest's junk.
    ['an object for a token', 'userrecaptcha', { anything: 'x' }],
    ['a list for a token', 'userrecaptcha', ['a', 'b']],
    ['text for GeeTest', 'geetest', 'c|v|s'],
    ['GeeTest without its members', 'geetest', { foo: 'bar' }],
    [
      'a GeeTest member that is not text',
      'geetest',
      { geetest_challenge: { x: 1 }, geetest_validate: 'v', geetest_seccode: 's' },
    ],
    [
      'a GeeTest member holding CR LF',
      'geetest',
      { geetest_challenge: 'c', geetest_validate: 'v\r\nSet-Cookie: a=1', geetest_seccode: 's' },
    ],
    [
      'a GeeTest member holding a terminal escape',
      'geetest',
      { geetest_challenge: 'c\u001b[2J', geetest_validate: 'v', geetest_seccode: 's' },
    ],
  ])('fails a res.php answer that is %s (UNREADABLE_SOLUTION)', async (_label, method, request) => {
    const params = method === 'geetest' ? { gt: 'g', challenge: 'c', pageurl: 'https://example.com/' } : task().params;
    script('in.php', [ok('123')]);
    script('res.php', [ok(request)]);

    const error = await client()
      .solve({ ...task(), method, params } as Task, options())
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(SolverTaskError);
    expect(error).toMatchObject({ code: 'UNREADABLE_SOLUTION' });
  });

  describe('over cap', () => {
    it('backs off with capped exponential delays and retries the submission', async () => {
      script('in.php', [code('ERROR_ZERO_BALANCE'), code('ERROR_NO_SLOT_AVAILABLE'), ok('42')]);
      script('res.php', [ok('token')]);

      const outcome = await client({ random: () => 0.5 }).solve(task(), options());

      // base 1 s × 2^n × (0.5 + 0.5 × 0.5)
      expect(sleeps.slice(0, 2)).toEqual([750, 1_500]);
      expect(outcome.retries).toEqual({ overCap: 2, transient: 0 });
      expect(outcome.acceptedAt).toBe(START + 2_250);
    });

    it('throws SolverOverCapError once the retries are spent', async () => {
      script('in.php', [code('ERROR_ZERO_BALANCE'), code('ERROR_ZERO_BALANCE'), code('ERROR_ZERO_BALANCE')]);

      const error = await client({ retry: { maxOverCapRetries: 2 } })
        .solve(task(), options())
        .catch((e: unknown) => e);

      expect(error).toBeInstanceOf(SolverOverCapError);
      expect(error).toMatchObject({ code: 'ERROR_ZERO_BALANCE', errorClass: 'over_cap', taskId: 'task-1' });
      expect(seen).toHaveLength(3);
      expect(sleeps).toEqual([500, 1_000]);
    });

    it('never backs off past the deadline: throws the over-cap error instead', async () => {
      script('in.php', [code('ERROR_NO_SLOT_AVAILABLE'), code('ERROR_NO_SLOT_AVAILABLE')]);

      const error = await client({ retry: { maxOverCapRetries: 10 } })
        .solve(task(), { deadlineAt: START + 1_200 })
        .catch((e: unknown) => e);

      expect(error).toBeInstanceOf(SolverOverCapError);
      expect((error as Error).message).toMatch(/deadline/);
      expect(now).toBeLessThan(START + 1_200);
      expect(seen).toHaveLength(2);
    });

    it('ERROR_ZERO_BALANCE is an account error in the 2captcha dialect: no retry', async () => {
      script('in.php', [code('ERROR_ZERO_BALANCE')]);

      const error = await client({ dialect: '2captcha' })
        .solve(task(), options())
        .catch((e: unknown) => e);

      expect(error).toBeInstanceOf(SolverAccountError);
      expect(seen).toHaveLength(1);
      expect(sleeps).toEqual([]);
    });
  });

  describe('transient failures', () => {
    it.each<[string, Reply, string]>([
      ['HTTP 500', { status: 500, body: 'Internal Server Error' }, 'HTTP_500'],
      ['an HTML page', { status: 200, body: '<html><body>502 Bad Gateway</body></html>' }, 'HTML_BODY'],
      ['garbage', { status: 200, body: '}{ not json' }, 'UNPARSEABLE_BODY'],
      ['a JSON body without the protocol fields', { status: 200, body: { hello: 'world' } }, 'UNPARSEABLE_BODY'],
      ['a server error code', code('ERROR_SERVER_ERROR'), 'ERROR_SERVER_ERROR'],
      [
        'a connection error',
        { error: Object.assign(new Error('socket hang up'), { code: 'UND_ERR_SOCKET' }) },
        'CONNECTION_ERROR',
      ],
    ])('retries the submission after %s, then throws SolverTransientError', async (_label, reply, expectedCode) => {
      script('in.php', [reply, reply]);

      const error = await client({ retry: { maxTransientRetries: 1 } })
        .solve(task(), options())
        .catch((e: unknown) => e);

      expect(error).toBeInstanceOf(SolverTransientError);
      expect(error).toMatchObject({ code: expectedCode, errorClass: 'transient', taskId: 'task-1' });
      expect(sleeps).toEqual([500]);
      agent.assertNoPendingInterceptors();
    });

    it('a transient failure while polling is retried and polling goes on', async () => {
      script('in.php', [{ status: 503, body: 'busy' }, ok('7')]);
      script('res.php', [NOT_READY, { status: 502, body: '<html>bad gateway</html>' }, NOT_READY, ok('token')]);

      const outcome = await client().solve(task(), options());

      expect(outcome).toMatchObject({ answer: 'token', resultRequests: 4, retries: { overCap: 0, transient: 2 } });
    });

    it('gives up polling after too many transient failures in a row', async () => {
      script('in.php', [ok('7')]);
      script('res.php', [
        { status: 500, body: '' },
        { status: 500, body: '' },
        { status: 500, body: '' },
      ]);

      const error = await client({ retry: { maxTransientRetries: 2 } })
        .solve(task(), options())
        .catch((e: unknown) => e);

      expect(error).toBeInstanceOf(SolverTransientError);
      expect(error).toMatchObject({ code: 'HTTP_500' });
      expect((error as Error).message).toMatch(/2 transient retries in a row/);
    });
  });

  describe('onSolverAnswer', () => {
    /** Collects the answers with the number of backoff sleeps made before each. */
    function recorder() {
      const answers: Array<SolverAnswer & { sleepsBefore: number }> = [];
      return {
        answers,
        onSolverAnswer: (answer: SolverAnswer) => void answers.push({ ...answer, sleepsBefore: sleeps.length }),
      };
    }

    it('reports every response, retried ones included, as it comes (before the backoff)', async () => {
      script('in.php', [code('ERROR_ZERO_BALANCE'), { status: 503, body: 'busy' }, ok('7')]);
      script('res.php', [
        NOT_READY,
        { status: 502, body: '<html>bad gateway</html>' },
        code('ERROR_NO_SLOT_AVAILABLE'),
        NOT_READY,
        { error: Object.assign(new Error('socket hang up'), { code: 'UND_ERR_SOCKET' }) },
        ok('token'),
      ]);
      const { answers, onSolverAnswer } = recorder();

      const outcome = await client().solve(task(), options({ onSolverAnswer }));

      expect(answers.map(({ sleepsBefore: _, ...answer }) => answer)).toEqual([
        { request: 'submit', outcome: 'over_cap', code: 'ERROR_ZERO_BALANCE' },
        { request: 'submit', outcome: 'transient', code: 'HTTP_503' },
        { request: 'submit', outcome: 'accepted' },
        { request: 'result', outcome: 'not_ready', code: 'CAPCHA_NOT_READY' },
        { request: 'result', outcome: 'transient', code: 'HTTP_502' },
        // Over cap on a result request is a passing fault, retried as transient.
        { request: 'result', outcome: 'transient', code: 'ERROR_NO_SLOT_AVAILABLE' },
        { request: 'result', outcome: 'not_ready', code: 'CAPCHA_NOT_READY' },
        { request: 'result', outcome: 'transient', code: 'CONNECTION_ERROR' },
        { request: 'result', outcome: 'answered' },
      ]);
      // The over-cap answer is reported before the client backs off to retry it.
      expect(answers[0]?.sleepsBefore).toBe(0);
      expect(answers[1]?.sleepsBefore).toBe(1);
      expect(answers.filter((answer) => answer.request === 'result')).toHaveLength(outcome.resultRequests);
      expect(outcome.retries).toEqual({ overCap: 1, transient: 4 });
    });

    it('reports the responses of solves that fail: task-terminal, account, over cap spent, deadline', async () => {
      script('in.php', [ok('9')]);
      script('res.php', [NOT_READY, NOT_READY, code('ERROR_CAPTCHA_UNSOLVABLE')]);
      const failed = recorder();
      await expect(client().solve(task(), options({ onSolverAnswer: failed.onSolverAnswer }))).rejects.toBeInstanceOf(
        SolverTaskError,
      );
      expect(failed.answers.map((answer) => answer.outcome)).toEqual([
        'accepted',
        'not_ready',
        'not_ready',
        'task_terminal',
      ]);
      expect(failed.answers[3]).toMatchObject({ request: 'result', code: 'ERROR_CAPTCHA_UNSOLVABLE' });

      script('in.php', [code('ERROR_WRONG_USER_KEY')]);
      const account = recorder();
      await expect(client().solve(task(), options({ onSolverAnswer: account.onSolverAnswer }))).rejects.toBeInstanceOf(
        SolverAccountError,
      );
      expect(account.answers).toMatchObject([{ request: 'submit', outcome: 'account', code: 'ERROR_WRONG_USER_KEY' }]);

      script('in.php', [code('ERROR_NO_SLOT_AVAILABLE'), code('ERROR_NO_SLOT_AVAILABLE')]);
      const refused = recorder();
      await expect(
        client({ retry: { maxOverCapRetries: 1 } }).solve(task(), options({ onSolverAnswer: refused.onSolverAnswer })),
      ).rejects.toBeInstanceOf(SolverOverCapError);
      expect(refused.answers.map((answer) => answer.outcome)).toEqual(['over_cap', 'over_cap']);

      script('in.php', [ok('11')]);
      script(
        'res.php',
        Array.from({ length: 5 }, () => NOT_READY),
      );
      const late = recorder();
      await expect(
        client().solve(task(), { deadlineAt: now + 32_000, onSolverAnswer: late.onSolverAnswer }),
      ).rejects.toBeInstanceOf(SolverTimeoutError);
      expect(late.answers.map((answer) => answer.outcome)).toEqual([
        'accepted',
        ...Array.from({ length: late.answers.length - 1 }, () => 'not_ready'),
      ]);
      expect(late.answers.length).toBeGreaterThan(1);
    });

    it('a resumed solve reports no submission, and a throwing hook changes nothing', async () => {
      script('res.php', [NOT_READY, ok('token')]);
      const outcome = await client().solve(
        task(),
        options({
          resumeSolverId: '77',
          onSolverAnswer: () => {
            throw new Error('sink down');
          },
        }),
      );
      expect(outcome).toMatchObject({ answer: 'token', resultRequests: 2 });
      expect(logs.some((line) => line.startsWith('onSolverAnswer hook threw'))).toBe(true);

      script('res.php', [NOT_READY, ok('token')]);
      const resumed = recorder();
      await client().solve(task(), options({ resumeSolverId: '77', onSolverAnswer: resumed.onSolverAnswer }));
      expect(resumed.answers.map((answer) => `${answer.request}:${answer.outcome}`)).toEqual([
        'result:not_ready',
        'result:answered',
      ]);
    });
  });

  it('a task-terminal answer to a poll throws SolverTaskError at once', async () => {
    script('in.php', [ok('9')]);
    script('res.php', [NOT_READY, code('ERROR_CAPTCHA_UNSOLVABLE')]);

    const error = await client()
      .solve(task(), options())
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(SolverTaskError);
    expect(error).toMatchObject({ code: 'ERROR_CAPTCHA_UNSOLVABLE', errorClass: 'task_terminal', taskId: 'task-1' });
    expect(seen).toHaveLength(3);
  });

  it('a task-terminal answer to the submission is not retried', async () => {
    script('in.php', [code('ERROR_PAGEURL')]);

    await expect(client().solve(task(), options())).rejects.toBeInstanceOf(SolverTaskError);
    expect(seen).toHaveLength(1);
  });

  it('keeps only protocol-shaped error codes, so an answer that echoes the key cannot carry it into logs or records', async () => {
    script('in.php', [
      code(`invalid key ${KEY} for this account`),
      code(`invalid key ${KEY} for this account`),
      code(`invalid key ${KEY} for this account`),
      code(`invalid key ${KEY} for this account`),
    ]);
    const error = (await client({ retry: { baseBackoffMs: 1, maxBackoffMs: 1, maxTransientRetries: 1 } })
      .solve(task(), options())
      .catch((caught: unknown) => caught)) as Error & { code: string };
    expect(error.code).toBe('UNRECOGNIZED_CODE');
    expect(`${error.message} ${error.stack} ${String(error.cause ?? '')}`).not.toContain(KEY);
    expect(logs.join('\n')).not.toContain(KEY);
  });

  it('an account answer throws SolverAccountError at once', async () => {
    script('in.php', [code('ERROR_WRONG_USER_KEY')]);

    const error = await client()
      .solve(task(), options())
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(SolverAccountError);
    expect(error).toMatchObject({ code: 'ERROR_WRONG_USER_KEY', errorClass: 'account' });
    expect(seen).toHaveLength(1);
  });

  it('gives up at the deadline with SolverTimeoutError after a last poll at the deadline', async () => {
    script('in.php', [ok('11')]);
    script(
      'res.php',
      Array.from({ length: 5 }, () => NOT_READY),
    );

    const error = await client()
      .solve(task(), { deadlineAt: START + 32_000 })
      .catch((e: unknown) => e);

    expect(error).toBeInstanceOf(SolverTimeoutError);
    expect(error).toMatchObject({ code: 'DEADLINE_EXCEEDED', taskId: 'task-1' });
    expect(seen.slice(1).map((poll) => poll.at - START)).toEqual([15_000, 20_000, 25_000, 30_000, 32_000]);
    agent.assertNoPendingInterceptors();
    expect(now).toBe(START + 32_000);
  });

  it('stops at once when the caller aborts', async () => {
    const controller = new AbortController();
    script('in.php', [ok('12')]);
    script('res.php', [NOT_READY]);
    const solver = client({
      sleep: async (ms) => {
        now += ms;
        if (seen.length === 2) controller.abort();
      },
    });

    const error = await solver.solve(task(), options({ signal: controller.signal })).catch((e: unknown) => e);

    expect(error).toBeInstanceOf(SolverTimeoutError);
    expect(error).toMatchObject({ code: 'ABORTED' });
    expect(seen).toHaveLength(2);
  });

  it('an abort ends a real wait early', async () => {
    script('in.php', [ok('13')]);
    const controller = new AbortController();
    const solver = client({ clock: Date.now, sleep: undefined });
    const started = Date.now();
    setTimeout(() => controller.abort(), 20);

    const error = await solver
      .solve(task(), { deadlineAt: Date.now() + 60_000, signal: controller.signal })
      .catch((e: unknown) => e);

    expect(error).toMatchObject({ name: 'SolverTimeoutError', code: 'ABORTED' });
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  it('resumes a previous submission: no in.php, an immediate poll, no schedule observation', async () => {
    script('res.php', [NOT_READY, ok('token')]);
    const schedule = createFixedPollSchedule();
    let called = false;

    const outcome = await client({ schedule }).solve(
      task(),
      options({
        resumeSolverId: '555',
        onSubmitted: () => {
          called = true;
        },
      }),
    );

    expect(seen.every((request) => request.path.startsWith('/res.php'))).toBe(true);
    expect(seen.map((poll) => poll.at - START)).toEqual([0, 15_000]);
    expect(new URL(seen[0]?.path as string, ORIGIN).searchParams.get('id')).toBe('555');
    expect(outcome).toMatchObject({ solverId: '555', answer: 'token', resultRequests: 2 });
    expect(called).toBe(false);
    expect(schedule.stats().total.tasks).toBe(0);
  });

  it('getBalance reads the balance as a number', async () => {
    script('res.php', [ok('12.3456')]);

    await expect(client().getBalance()).resolves.toBe(12.3456);
    expect(Object.fromEntries(new URL(seen[0]?.path as string, ORIGIN).searchParams)).toEqual({
      key: KEY,
      action: 'getbalance',
      json: '1',
    });
  });

  it('getBalance throws typed errors', async () => {
    script('res.php', [code('ERROR_KEY_DOES_NOT_EXIST'), ok('not-a-number')]);

    await expect(client().getBalance()).rejects.toBeInstanceOf(SolverAccountError);
    await expect(client().getBalance()).rejects.toBeInstanceOf(SolverTransientError);
  });

  it('getBalance believes only a balance an account can have: decimal text within ten million dollars', async () => {
    // Read with Number(), hex was 31, padded exponents 1000, and 1e308 skewed the governor's spend estimate.
    const bad = ['0x1F', ' 1e3 ', '1e308', 'Infinity', '12,5'];
    script('res.php', [...bad.map((value) => ok(value)), ok('-0.0003'), ok('7.25')]);

    for (const value of bad)
      await expect(client().getBalance(), value).rejects.toMatchObject({ code: 'UNPARSEABLE_BODY' });
    // An overdrawn account reads below zero (it pauses the fleet) rather than unknown (a hold).
    await expect(client().getBalance()).resolves.toBe(-0.0003);
    await expect(client().getBalance()).resolves.toBe(7.25);
  });

  it('reportBad and reportGood send the id with their action', async () => {
    script('res.php', [
      ok('OK_REPORT_RECORDED'),
      ok('OK_REPORT_RECORDED'),
      code('ERROR_WRONG_CAPTCHA_ID'),
      code('ERROR_DUPLICATE_REPORT'),
    ]);
    const solver = client();

    await solver.reportBad('777');
    await solver.reportGood('778');
    await expect(solver.reportBad('779')).rejects.toBeInstanceOf(SolverTaskError);
    await expect(solver.reportBad('777')).resolves.toBeUndefined();

    expect(seen.map((r) => Object.fromEntries(new URL(r.path, ORIGIN).searchParams))).toEqual([
      { key: KEY, action: 'reportbad', id: '777', json: '1' },
      { key: KEY, action: 'reportgood', id: '778', json: '1' },
      { key: KEY, action: 'reportbad', id: '779', json: '1' },
      { key: KEY, action: 'reportbad', id: '777', json: '1' },
    ]);
  });

  it('never lets the key out: not in errors, their causes, their stacks, nor the logs', async () => {
    const errors: unknown[] = [];
    const solver = client({ retry: { maxTransientRetries: 1, maxOverCapRetries: 1 } });
    const urlWithKey = `${ORIGIN}/res.php?key=${KEY}&action=get`;
    // A connection error that quotes the URL (undici errors can), nested in a cause.
    script('in.php', [
      {
        error: Object.assign(
          new Error(`connect ECONNREFUSED ${urlWithKey}`, { cause: new Error(`socket for ${KEY}`) }),
          { code: 'ECONNREFUSED' },
        ),
      },
      { status: 200, body: `<html>echo: key=${KEY}</html>` },
    ]);
    errors.push(await solver.solve(task(), options()).catch((e: unknown) => e));
    // A body that echoes the key in a JSON error answer and an over-cap retry that logs.
    script('in.php', [
      code('ERROR_ZERO_BALANCE'),
      { status: 500, body: `upstream said ${KEY}` },
      { status: 500, body: KEY },
    ]);
    errors.push(await solver.solve(task(), options()).catch((e: unknown) => e));
    // Nothing scripted: MockAgent's own "not matched" error quotes the path with the key.
    errors.push(await solver.getBalance().catch((e: unknown) => e));
    errors.push(await solver.reportBad('1').catch((e: unknown) => e));

    expect(errors.every((error) => error instanceof SolverError)).toBe(true);
    const text = errors.map((error) => dump(error)).join('\n');
    expect(text).toContain('***');
    expect(text).not.toContain(KEY);
    expect(logs.length).toBeGreaterThan(0);
    expect(logs.join('\n')).not.toContain(KEY);
  });
});

describe('a solver that cannot hurt', () => {
  let agent: MockAgent;
  let logs: string[];
  let submitted: string[];
  let server: Server | undefined;
  let realAgent: Agent | undefined;

  function script(path: 'in.php' | 'res.php', replies: Array<{ status?: number; body: string | Buffer }>): void {
    for (const reply of replies) {
      agent
        .get(ORIGIN)
        .intercept({ path: (p) => p.startsWith(`/${path}`), method: () => true })
        .reply(reply.status ?? 200, reply.body);
    }
  }

  function client(overrides: Partial<SolverClientOptions> = {}) {
    return createSolverClient({
      baseUrl: ORIGIN,
      key: KEY,
      dialect: 'captchaai',
      dispatcher: agent,
      sleep: async () => {},
      schedule: createFixedPollSchedule({ pollDefaults: { token: { firstPollMs: 0, intervalMs: 1 } } }),
      retry: { maxTransientRetries: 1, baseBackoffMs: 1, maxBackoffMs: 1 },
      logger: {
        debug: (m, a) => logs.push(`${m} ${JSON.stringify(a)}`),
        warn: (m, a) => logs.push(`${m} ${JSON.stringify(a)}`),
      },
      ...overrides,
    });
  }

  const solve = (solver: ReturnType<typeof client>) =>
    solver
      .solve(task(), { deadlineAt: Date.now() + 60_000, onSubmitted: (id) => void submitted.push(id) })
      .catch((error: unknown) => error as Error & { code?: string });

  /** A real HTTP solver that answers every request with `respond`; the client reaches it through undici. */
  async function serve(respond: (res: ServerResponse) => void): Promise<string> {
    server = createServer((req, res) => {
      req.resume();
      respond(res);
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    realAgent = new Agent();
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  beforeEach(() => {
    agent = new MockAgent();
    agent.disableNetConnect();
    logs = [];
    submitted = [];
  });

  afterEach(async () => {
    await agent.close();
    await realAgent?.close();
    realAgent = undefined;
    server?.closeAllConnections();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    server = undefined;
  });

  it('refuses a body whose Content-Length passes the cap without waiting to read it', async () => {
    // Prepare: headers announce 64 MiB; the body then trickles and never ends.
    const url = await serve((res) => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(64 * 1024 * 1024) });
      res.write('OK|');
    });

    // Act
    const error = await solve(client({ baseUrl: url, dispatcher: realAgent, requestTimeoutMs: 5_000 }));

    // Assess: refused on the header (a read would have hung until the request timeout)
    expect(error).toBeInstanceOf(SolverTransientError);
    expect(error).toMatchObject({ code: 'BODY_TOO_LARGE' });
    expect((error as Error).message).toMatch(/over 65536 bytes; not read/);
  });

  it('stops reading a streamed body with no length as soon as it passes the cap', async () => {
    // Prepare: a chunked 64 MiB answer, written only as fast as the client reads it.
    const total = 64 * 1024 * 1024;
    let written = 0;
    const url = await serve((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      const chunk = Buffer.alloc(16 * 1024, 'a');
      const pump = () => {
        while (written < total && !res.destroyed) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        res.end();
      };
      res.write('OK|');
      pump();
    });

    // Act
    const error = await solve(client({ baseUrl: url, dispatcher: realAgent }));

    // Assess: a transient failure, and the server could not push the whole body through
    expect(error).toMatchObject({ name: 'SolverTransientError', code: 'BODY_TOO_LARGE' });
    expect(written).toBeLessThan(total / 2);
  });

  it('takes the cap from maxResponseBytes: one byte over is refused, the cap itself is read', async () => {
    const atCap = JSON.stringify({ status: 1, request: '1234' });
    script('in.php', [{ body: `${atCap} ` }, { body: `${atCap} ` }]);

    const error = await solve(client({ maxResponseBytes: atCap.length }));

    expect(error).toMatchObject({ code: 'BODY_TOO_LARGE' });
    script('in.php', [{ body: atCap }]);
    script('res.php', [{ body: JSON.stringify({ status: 1, request: 'ok' }) }]);
    await expect(solve(client({ maxResponseBytes: atCap.length }))).resolves.toMatchObject({ solverId: '1234' });
  });

  it.each([302, 404, 409])(
    'does not take an HTTP %i whose body reads OK|… as an accepted submission',
    async (status) => {
      script('in.php', [
        { status, body: 'OK|75357844800' },
        { status, body: JSON.stringify({ status: 1, request: 75357844800 }) },
      ]);

      const error = await solve(client());

      expect(error).toBeInstanceOf(SolverTransientError);
      expect(error).toMatchObject({ code: `HTTP_${status}` });
      expect(submitted).toEqual([]);
    },
  );

  it('does not take a non-2xx result body as the answer: it polls on to the real one', async () => {
    script('in.php', [{ body: 'OK|75357844800' }]);
    script('res.php', [
      { status: 404, body: JSON.stringify({ status: 1, request: 'not-the-answer' }) },
      { body: JSON.stringify({ status: 1, request: '03AG-real' }) },
    ]);

    const outcome = await solve(client());

    expect(outcome).toMatchObject({ answer: '03AG-real', retries: { transient: 1 } });
  });

  it('keeps every digit of an id past 2^53 sent as a JSON number, and polls with it', async () => {
    const id = '12345678901234567890';
    script('in.php', [{ body: `{"status":1,"request":${id}}` }]);
    let polledId: string | null = null;
    agent
      .get(ORIGIN)
      .intercept({ path: (p) => p.startsWith('/res.php'), method: 'GET' })
      .reply((request) => {
        polledId = new URL(request.path, ORIGIN).searchParams.get('id');
        return { statusCode: 200, data: JSON.stringify({ status: 1, request: 'token' }) };
      });

    const outcome = await solve(client());

    expect(submitted).toEqual([id]);
    expect(polledId).toBe(id);
    expect(outcome).toMatchObject({ solverId: id });
  });

  it.each([
    ['an echo of the request', `OK|key=${KEY}&method=userrecaptcha&json=1`],
    ['letters', 'OK|75357844800abc'],
    ['too many digits', `OK|${'9'.repeat(25)}`],
  ])('refuses a solver id that is %s: nothing recorded, nothing sent again, the key nowhere', async (_label, body) => {
    // Before: retried as a passing fault; in.php had answered OK (taken, paid) at every try.
    script('in.php', [{ body }, { body }]);

    const error = await solve(client());

    expect(error).toMatchObject({ name: 'SolverTaskError', code: 'MALFORMED_SOLVER_ID' });
    // The second scripted answer is never asked for.
    expect(agent.pendingInterceptors()).toHaveLength(1);
    expect(submitted).toEqual([]);
    expect(`${(error as Error).message} ${(error as Error).stack} ${logs.join('\n')}`).not.toContain(KEY);
  });

  it('reads an answer nested thousands deep as a passing fault, not a stack overflow', async () => {
    // 24 KB, under the size cap: parsed, it overflowed the stack when read back (an untyped RangeError).
    const deep = `${'['.repeat(12_000)}${']'.repeat(12_000)}`;
    script('in.php', [{ body: 'OK|75357844800' }]);
    script('res.php', [
      { body: `{"status":1,"request":${deep}}` },
      { body: `{"status":1,"request":"03AG","cookies":{"c":${deep}}}` },
    ]);

    const error = await solve(client());

    expect(error).toMatchObject({ name: 'SolverTransientError', code: 'UNPARSEABLE_BODY' });
  });

  it('fails a ready answer holding control characters or bytes that were not UTF-8, and drops such an extra', async () => {
    for (const body of [
      '{"status":1,"request":"tok\\r\\nSet-Cookie: evil=1"}',
      'OK|a\u001b[31mred',
      // A bidi override or a zero-width space: the answer a reader sees is not the one recorded.
      'OK|03AG\u202Eokot',
      'OK|03AG\u200Btok',
      // `OK|a` and two bytes that are not UTF-8, then `b`.
      Buffer.from([0x4f, 0x4b, 0x7c, 0x61, 0xff, 0xfe, 0x62]),
    ]) {
      script('in.php', [{ body: 'OK|75357844800' }]);
      script('res.php', [{ body }]);
      const error = await solve(client());
      expect(error, JSON.stringify(body)).toBeInstanceOf(SolverTaskError);
      expect(error).toMatchObject({ code: 'UNREADABLE_SOLUTION' });
    }
    script('in.php', [{ body: 'OK|75357844800' }]);
    script('res.php', [{ body: '{"status":1,"request":"03AG","useragent":"UA\\r\\nX-Evil: 1","cookies":"c=1"}' }]);
    const outcome = (await solve(client())) as { answer: string; extras: Record<string, string> };
    expect(outcome.answer).toBe('03AG');
    expect(outcome.extras).toEqual({ cookies: 'c=1' });
  });

  it("reads a bulk poll's empty and error-shaped parts as no answer, and keeps their codes to the protocol's shape", async () => {
    const long = `ERROR_${'A'.repeat(60_000)}`;
    script('res.php', [{ body: `OK||ERROR: 1001|${long}|03AGtoken` }]);
    const targets = ['1', '2', '3', '4'].map((solverId) => ({ solverId, method: 'userrecaptcha' }));

    const states = await client().pollMany(targets);

    expect(Object.fromEntries(states)).toEqual({
      '1': { state: 'unknown', code: 'UNRECOGNIZED_CODE' },
      '2': { state: 'unknown', code: 'ERROR: 1001' },
      '3': { state: 'unknown', code: 'UNRECOGNIZED_CODE' },
      '4': { state: 'ready' },
    });
  });

  it("takes a bulk poll's refusal of the whole request as every id's, without asking each alone", async () => {
    script('res.php', [{ body: '{"status":0,"request":"ERROR_WRONG_USER_KEY"}' }]);
    const targets = Array.from({ length: 100 }, (_, i) => ({ solverId: String(1000 + i), method: 'userrecaptcha' }));

    const states = await client().pollMany(targets);

    // Asked each alone, it made 101 requests a round with a key the provider had refused.
    expect([...states.values()].every((s) => s.state === 'unknown' && s.code === 'ERROR_WRONG_USER_KEY')).toBe(true);
    expect(agent.pendingInterceptors()).toEqual([]);
  });

  it.each([
    [
      'geetest',
      { gt: 'g', challenge: 'c', pageurl: 'https://example.com/' },
      { geetest_challenge: KEY, geetest_validate: KEY.toUpperCase(), geetest_seccode: 's' },
    ],
    [
      'amazon_waf',
      { sitekey: 'k', iv: 'i', context: 'c', pageurl: 'https://example.com/' },
      { captcha_voucher: `v${KEY}`, existing_token: 't' },
    ],
  ])(
    'redacts the key from a %s answer object whose members echo it (the answer is built from the object)',
    async (method, params, request) => {
      script('in.php', [{ body: 'OK|123' }]);
      script('res.php', [{ body: JSON.stringify({ status: 1, request }) }]);

      const outcome = (await client().solve({ ...task(), method, params } as Task, {
        deadlineAt: Date.now() + 60_000,
      })) as { answer: string };

      // Before, the members were recorded and published as the solver sent them, key and all.
      expect(outcome.answer.toLowerCase()).not.toContain(KEY.toLowerCase());
      expect(outcome.answer).toContain('***');
      expect(logs.join('\n')).toContain('solver answer contained the key; redacted');
    },
  );

  it('redacts the key from an answer that echoes it before anyone sees the answer', async () => {
    script('in.php', [{ body: 'OK|75357844800' }]);
    script('res.php', [{ body: `OK|03AG-${KEY}-tail` }]);

    const outcome = (await solve(client())) as { answer: string };

    expect(outcome.answer).toBe('03AG-***-tail');
    expect(logs.join('\n')).toContain('solver answer contained the key; redacted');
    expect(logs.join('\n')).not.toContain(KEY);
  });
});

/** Everything an error prints: name, message, stack, and the same for each cause. */
function dump(error: unknown, depth = 0): string {
  if (!(error instanceof Error) || depth > 10) return String(error);
  return [
    error.name,
    error.message,
    error.stack ?? '',
    JSON.stringify(error),
    depth < 10 ? dump(error.cause, depth + 1) : '',
  ].join('\n');
}

describe('AnswerWaits: how much of its deadline a submission answered in its own response needs', () => {
  it('is the longest of the latest 16 accepted ones, each for a minute, then nothing', () => {
    const waits = new AnswerWaits();
    expect(waits.longest(0)).toBe(0);
    waits.note(9_000, 1_000);
    for (let n = 0; n < 15; n += 1) waits.note(2_000, 2_000 + n);
    expect(waits.longest(2_100)).toBe(9_000);
    // A 17th pushes the oldest out.
    waits.note(1_500, 3_000);
    expect(waits.longest(3_000)).toBe(2_000);
    // A minute on, nothing is remembered: nothing sent meanwhile cannot stop sends for good.
    expect(waits.longest(62_015)).toBe(1_500);
    expect(waits.longest(63_001)).toBe(0);
  });
});
