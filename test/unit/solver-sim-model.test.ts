/**
 * The solver simulator's model, driven without HTTP through `handle()`: thread cap and foreign
 * threads, balance and no-funds, seeded rates, solve-time distributions, duplicate solves,
 * runtime updates. A hand-stepped clock replaces waiting.
 */
import { describe, expect, it } from 'vitest';
import { NO_FUNDS_CODE, overCapCode, type SolverMethod } from '../../functions/core/solver-protocol.js';
import { SolverSimConfigError, SolverSimModel, type SolverSimOptions } from '../../local/solver-sim/index.js';

const KEY = 'k'.repeat(32);

function harness(options: SolverSimOptions = {}) {
  const clock = { now: 1_000_000 };
  const model = new SolverSimModel({ clock: () => clock.now, ...options });
  let site = 0;
  const submit = (params: Record<string, string> = {}): string =>
    model.handle({
      endpoint: 'in',
      ip: '127.0.0.1',
      fields: {
        key: KEY,
        method: 'userrecaptcha',
        googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-',
        pageurl: `https://example.com/${site++}`,
        ...params,
      },
    }).body;
  const res = (fields: Record<string, string>): string =>
    model.handle({ endpoint: 'res', ip: '127.0.0.1', fields: { key: KEY, ...fields } }).body;
  const idOf = (answer: string): string => {
    expect(answer).toMatch(/^OK\|\d+$/);
    return answer.slice(3);
  };
  return { model, clock, submit, res, idOf };
}

/** Fixed one-second solves so thread release happens at a known instant. */
const ONE_SECOND: SolverSimOptions = { solveTimes: { userrecaptcha: { medianMs: 1_000, spread: 0 } } };

describe('plan threads', () => {
  it.each(['captchaai', '2captcha'] as const)(
    '%s: accepts exactly the cap, rejects cap + 1, frees the thread when the task ends',
    (dialect) => {
      const { model, clock, submit, idOf } = harness({ ...ONE_SECOND, dialect, planThreads: 3 });
      const ids = [submit(), submit(), submit()].map(idOf);
      expect(ids).toHaveLength(3);
      expect(submit()).toBe(overCapCode(dialect));

      clock.now += 999; // not yet solved: the threads are still held
      expect(submit()).toBe(overCapCode(dialect));
      clock.now += 1; // solved, and nobody has read the answers yet: the threads are free anyway
      expect(model.stats().threadsInUse).toBe(0);
      idOf(submit());
      expect(model.stats()).toMatchObject({ accepted: 4, solved: 3, overCapRejections: 2, peakThreads: 3 });
    },
  );

  it('holds a thread until an unsolvable task ends, then frees it', () => {
    const { clock, submit, res, idOf } = harness({ ...ONE_SECOND, planThreads: 1, unsolvableRate: 1 });
    const id = idOf(submit());
    expect(submit()).toBe(overCapCode('captchaai'));
    clock.now += 1_000;
    expect(res({ action: 'get', id })).toBe('ERROR_CAPTCHA_UNSOLVABLE');
    idOf(submit());
  });

  it('counts foreign threads against the cap and follows their changes at runtime', () => {
    const { model, submit, idOf } = harness({ ...ONE_SECOND, planThreads: 5, foreignThreads: 3 });
    idOf(submit());
    idOf(submit());
    expect(submit()).toBe(overCapCode('captchaai'));
    model.update({ foreignThreads: 1 });
    idOf(submit());
    idOf(submit());
    expect(submit()).toBe(overCapCode('captchaai'));
    model.update({ foreignThreads: 5 });
    expect(submit()).toBe(overCapCode('captchaai'));
    expect(model.stats()).toMatchObject({
      threadsInUse: 4,
      foreignThreads: 5,
      peakThreads: 4,
      peakThreadsTotal: 9,
      overCapRejections: 3,
    });
  });

  it('lets the plan change at runtime without revoking held threads', () => {
    const { model, clock, submit, idOf } = harness({ ...ONE_SECOND, planThreads: 4 });
    for (let i = 0; i < 4; i++) idOf(submit());
    model.update({ planThreads: 2 });
    expect(model.stats().threadsInUse).toBe(4);
    expect(submit()).toBe(overCapCode('captchaai'));
    clock.now += 1_000;
    idOf(submit());
    idOf(submit());
    expect(submit()).toBe(overCapCode('captchaai'));
  });
});

describe('balance', () => {
  it('charges each solve, reserves in-flight prices, and answers no funds when the balance cannot pay', () => {
    const { model, clock, submit, res, idOf } = harness({
      ...ONE_SECOND,
      dialect: '2captcha',
      balance: 0.003,
      pricePerSolve: 0.001,
    });
    for (let i = 0; i < 3; i++) idOf(submit());
    // Three solves in flight already spend the whole balance.
    expect(submit()).toBe(NO_FUNDS_CODE);
    expect(res({ action: 'getbalance' })).toBe('0.003');
    clock.now += 1_000;
    expect(res({ action: 'getbalance' })).toBe('0');
    expect(submit()).toBe(NO_FUNDS_CODE);
    expect(model.stats()).toMatchObject({
      solved: 3,
      noFundsRejections: 2,
      overCapRejections: 0,
      balanceStart: 0.003,
      balance: 0,
      spent: 0.003,
    });

    model.update({ balance: 1 });
    idOf(submit());
    expect(model.stats().balanceStart).toBe(0.003);
  });

  it('never goes below zero when the balance is drained while tasks are in flight', () => {
    const { model, clock, submit, idOf } = harness({ ...ONE_SECOND, balance: 0.003, pricePerSolve: 0.001 });
    for (let i = 0; i < 3; i++) idOf(submit());
    model.update({ balance: 0.001 });
    clock.now += 1_000;
    expect(model.stats()).toMatchObject({ solved: 3, balance: 0, spent: 0.001 });
    expect(() => model.update({ foreignThreads: 1 })).not.toThrow();
  });

  it('does not charge unsolvable tasks and honours per-method prices', () => {
    const { model, clock, submit, idOf } = harness({
      ...ONE_SECOND,
      balance: 1,
      prices: { userrecaptcha: 0.00299 },
      unsolvableRate: 1,
    });
    idOf(submit());
    clock.now += 1_000;
    expect(model.stats()).toMatchObject({ unsolvable: 1, spent: 0, balance: 1 });
    model.update({ unsolvableRate: 0 });
    idOf(submit());
    clock.now += 1_000;
    expect(model.stats()).toMatchObject({ solved: 1, spent: 0.00299, balance: 0.99701 });
  });

  it('tells no-funds from over-cap in the counters although CaptchaAI uses one code for both', () => {
    const { model, submit } = harness({ ...ONE_SECOND, dialect: 'captchaai', planThreads: 1, balance: 0.001 });
    submit();
    expect(submit()).toBe('ERROR_ZERO_BALANCE');
    model.update({ balance: 5 });
    expect(submit()).toBe('ERROR_ZERO_BALANCE');
    expect(model.stats()).toMatchObject({ noFundsRejections: 1, overCapRejections: 1 });
  });
});

describe('seeded rates', () => {
  function unsolvableIds(seed: number): number[] {
    const { model, clock, submit, res, idOf } = harness({ seed, medianMs: 0, unsolvableRate: 0.3, planThreads: 1_000 });
    const failed: number[] = [];
    for (let i = 0; i < 200; i++) {
      const id = idOf(submit());
      clock.now += 1;
      if (res({ action: 'get', id }) === 'ERROR_CAPTCHA_UNSOLVABLE') failed.push(i);
    }
    expect(model.stats().unsolvable).toBe(failed.length);
    return failed;
  }

  it('makes about the unsolvable share of tasks unsolvable, the same ones for the same seed', () => {
    const first = unsolvableIds(42);
    // 200 draws at 0.3: mean 60, σ ≈ 6.5; ±3σ.
    expect(first.length).toBeGreaterThanOrEqual(40);
    expect(first.length).toBeLessThanOrEqual(80);
    expect(unsolvableIds(42)).toEqual(first);
    expect(unsolvableIds(43)).not.toEqual(first);
  });

  function transientPattern(seed: number, rate: number): string[] {
    const { model } = harness({ seed, transientErrorRate: rate });
    const seen: string[] = [];
    for (let i = 0; i < 300; i++) {
      const answer = model.handle({ endpoint: 'res', ip: '127.0.0.1', fields: { key: KEY, action: 'getbalance' } });
      seen.push(
        answer.status === 500 ? 'HTTP_500' : answer.contentType.startsWith('text/html') ? 'HTML_PAGE' : answer.body,
      );
    }
    return seen;
  }

  it('fails about the transient share of requests, mixing the three kinds, reproducibly', () => {
    const pattern = transientPattern(7, 0.2);
    const failures = pattern.filter((answer) => answer !== '10');
    // 300 draws at 0.2: mean 60, σ ≈ 6.9; ±3σ.
    expect(failures.length).toBeGreaterThanOrEqual(39);
    expect(failures.length).toBeLessThanOrEqual(81);
    expect(new Set(failures)).toEqual(new Set(['ERROR_SERVER_ERROR', 'HTTP_500', 'HTML_PAGE']));
    expect(transientPattern(7, 0.2)).toEqual(pattern);
    expect(transientPattern(8, 0.2)).not.toEqual(pattern);
    expect(transientPattern(7, 0).every((answer) => answer === '10')).toBe(true);
    expect(transientPattern(7, 1).some((answer) => answer === '10')).toBe(false);
  });

  it('gives the same ids and answers for the same seed', () => {
    const run = (seed: number) => {
      const { submit, res, idOf } = harness({ seed, medianMs: 0 });
      const id = idOf(submit({ pageurl: 'https://example.com/fixed' }));
      return { id, answer: res({ action: 'get', id }) };
    };
    expect(run(5)).toEqual(run(5));
    expect(run(5).id).not.toBe(run(6).id);
    expect(run(5).answer).not.toBe(run(6).answer);
  });
});

describe('solve times', () => {
  function medianSolveMs(method: SolverMethod, fields: Record<string, string>, options: SolverSimOptions = {}): number {
    const { model, submit, idOf } = harness({ planThreads: 1_000, seed: 3, ...options });
    const times: number[] = [];
    for (let i = 0; i < 201; i++) {
      const info = model.taskInfo(Number(idOf(submit({ method, ...fields, nonce: String(i) }))));
      times.push(info!.readyAt - info!.acceptedAt);
    }
    times.sort((a, b) => a - b);
    return times[100]!;
  }

  it('centres token types on 15-25 s and images on a few seconds, log-normally spread', () => {
    const recaptcha = medianSolveMs('userrecaptcha', {});
    expect(recaptcha).toBeGreaterThan(15_000);
    expect(recaptcha).toBeLessThan(25_000);
    const image = medianSolveMs('base64', { body: Buffer.alloc(200, 1).toString('base64') });
    expect(image).toBeGreaterThan(2_000);
    expect(image).toBeLessThan(6_000);
  });

  it('scales every solve time with latencyScale, and medianMs overrides the medians', () => {
    expect(medianSolveMs('userrecaptcha', {}, { latencyScale: 0.01 })).toBeLessThan(300);
    const fixed = medianSolveMs('userrecaptcha', {}, { medianMs: 50 });
    expect(fixed).toBeGreaterThan(35);
    expect(fixed).toBeLessThan(70);
    expect(medianSolveMs('userrecaptcha', {}, { medianMs: 0 })).toBe(0);
  });
});

describe('duplicate solves', () => {
  it('counts a second solve of the same method and parameters, whatever their order', () => {
    const { model, clock, submit, idOf } = harness({ ...ONE_SECOND });
    const same = { pageurl: 'https://example.com/same' };
    idOf(submit(same));
    idOf(submit(same));
    idOf(submit({ pageurl: 'https://example.com/different' }));
    // Parameters in another order are still the same work.
    model.handle({
      endpoint: 'in',
      ip: '127.0.0.1',
      fields: {
        pageurl: 'https://example.com/same',
        googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-',
        method: 'userrecaptcha',
        key: KEY,
      },
    });
    expect(model.stats().duplicateSolves).toBe(0); // nothing solved yet
    clock.now += 1_000;
    expect(model.stats()).toMatchObject({ solved: 4, duplicateSolves: 2 });
  });

  it('does not count an unsolvable attempt as a solve', () => {
    const { model, clock, submit, idOf } = harness({ ...ONE_SECOND, unsolvableRate: 1 });
    idOf(submit({ pageurl: 'https://example.com/same' }));
    clock.now += 1_000;
    model.update({ unsolvableRate: 0 });
    idOf(submit({ pageurl: 'https://example.com/same' }));
    clock.now += 1_000;
    expect(model.stats()).toMatchObject({ solved: 1, unsolvable: 1, duplicateSolves: 0 });
  });
});

describe('result expiry', () => {
  it('forgets a finished task after forgetAfterMs, as results expire on the service', () => {
    const { clock, submit, res, idOf } = harness({ ...ONE_SECOND, forgetAfterMs: 10_000 });
    const id = idOf(submit());
    clock.now += 1_000 + 10_000;
    expect(res({ action: 'get', id })).toMatch(/^OK\|03AGdBq2/);
    clock.now += 1;
    expect(res({ action: 'get', id })).toBe('ERROR_WRONG_CAPTCHA_ID');
  });
});

describe('keys', () => {
  it.each(['captchaai', '2captcha'] as const)(
    '%s: refuses a key that is not 32 characters with ERROR_WRONG_USER_KEY, plain and json',
    (dialect) => {
      const { model } = harness({ dialect });
      const ask = (key: string, json: boolean) =>
        model.handle({
          endpoint: 'res',
          ip: '127.0.0.1',
          fields: { key, action: 'getbalance', ...(json ? { json: '1' } : {}) },
        }).body;
      for (const key of ['', 'k'.repeat(31), 'k'.repeat(33), 'any-key']) {
        expect(ask(key, false)).toBe('ERROR_WRONG_USER_KEY');
        expect(JSON.parse(ask(key, true))).toMatchObject({ status: 0, request: 'ERROR_WRONG_USER_KEY' });
      }
      expect(ask('k'.repeat(32), false)).toBe('10');
      expect(model.stats()).toMatchObject({ keyRejections: 8, errorsByCode: { ERROR_WRONG_USER_KEY: 8 } });
    },
  );

  it('checks the shape before the account: a short key is WRONG_USER_KEY even when the key is revoked', () => {
    const { model } = harness({ badKey: true });
    const ask = (key: string) =>
      model.handle({ endpoint: 'in', ip: '127.0.0.1', fields: { key, method: 'textcaptcha', textcaptcha: '2+2' } })
        .body;
    expect(ask('short')).toBe('ERROR_WRONG_USER_KEY');
    expect(ask(KEY)).toBe('ERROR_KEY_DOES_NOT_EXIST');
  });

  it('refuses a configured valid key that the services would refuse', () => {
    expect(() => new SolverSimModel({ validKeys: ['k-test'] })).toThrow(/validKeys\.0/);
  });
});

describe('outage windows', () => {
  /** Down from 2 s to 12 s after the simulator started. */
  const OUTAGE: SolverSimOptions = { ...ONE_SECOND, outages: [{ startMs: 2_000, durationMs: 10_000 }] };

  it('answers every in.php and res.php request with HTTP 503 and a short plain-text body inside a window', () => {
    const { model, clock } = harness(OUTAGE);
    clock.now += 2_000;
    const answers = [
      model.handle({ endpoint: 'in', ip: '127.0.0.1', fields: { key: KEY, method: 'userrecaptcha', json: '1' } }),
      model.handle({ endpoint: 'res', ip: '127.0.0.1', fields: { key: KEY, action: 'get', id: '1', json: '1' } }),
      model.handle({ endpoint: 'res', ip: '127.0.0.1', fields: { key: KEY, action: 'getbalance' } }),
      model.handle({ endpoint: 'res', ip: '127.0.0.1', fields: { key: 'not-a-key', action: 'getbalance' } }),
    ];
    for (const answer of answers) {
      expect(answer).toEqual({ status: 503, contentType: 'text/plain; charset=utf-8', body: 'Service Unavailable' });
    }
    expect(model.stats()).toMatchObject({ outageAnswers: 4, inOutage: true, errorsByCode: { HTTP_503: 4 } });
  });

  it('answers normally before the window opens and once it has closed', () => {
    const { model, clock, submit, res, idOf } = harness(OUTAGE);
    clock.now += 1_999;
    idOf(submit());
    clock.now += 10_001;
    expect(res({ action: 'getbalance' })).toBe('10');
    expect(model.stats()).toMatchObject({ outageAnswers: 0, inOutage: false });
  });

  it('does not solve an accepted task during the window, and resumes its clock after', () => {
    const { model, clock, submit, idOf } = harness(OUTAGE);
    clock.now += 1_500; // 500 ms of its 1 s solve left when the outage begins
    const id = Number(idOf(submit()));
    clock.now += 10_999; // 500 ms of work, 10 s down, 500 ms of work: ready at +12.5 s
    expect(model.taskInfo(id)).toMatchObject({ state: 'solving', readyAt: 1_000_000 + 12_500 });
    expect(model.stats().threadsInUse).toBe(1);
    clock.now += 1;
    expect(model.taskInfo(id)?.state).toBe('solved');
  });

  it('skips every window a long solve spans, overlapping ones once', () => {
    const { model, clock, submit, idOf } = harness({
      solveTimes: { userrecaptcha: { medianMs: 5_000, spread: 0 } },
      outages: [
        { startMs: 1_000, durationMs: 2_000 },
        { startMs: 2_000, durationMs: 2_000 },
        { startMs: 6_000, durationMs: 1_000 },
      ],
    });
    const id = Number(idOf(submit()));
    // 1 s of work, down 1–4 s, 2 s of work, down 6–7 s, 2 s of work: ready at 9 s.
    expect(model.taskInfo(id)?.readyAt).toBe(clock.now + 9_000);
  });

  it('re-times tasks in flight when the windows change at runtime', () => {
    const { model, clock, submit, idOf } = harness(ONE_SECOND);
    const id = Number(idOf(submit()));
    model.update({ outages: [{ startMs: 500, durationMs: 60_000 }] });
    clock.now += 30_000;
    expect(model.taskInfo(id)?.state).toBe('solving');
    model.update({ outages: [] });
    expect(model.taskInfo(id)?.state).toBe('solved');
  });

  it('refuses a window with a negative start or duration, naming each', () => {
    expect(() => new SolverSimModel({ outages: [{ startMs: -1, durationMs: -5 }] })).toThrow(
      /outages\.0\.startMs[\s\S]*outages\.0\.durationMs/,
    );
  });
});

describe('options', () => {
  it('lists every bad option at once', () => {
    let thrown: unknown;
    try {
      new SolverSimModel({ planThreads: -1, unsolvableRate: 2, dialect: 'nope' as never });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(SolverSimConfigError);
    const problems = (thrown as SolverSimConfigError).problems;
    expect(problems).toHaveLength(3);
    expect(problems.join('\n')).toMatch(/planThreads/);
    expect(problems.join('\n')).toMatch(/unsolvableRate/);
    expect(problems.join('\n')).toMatch(/dialect/);
  });

  it('rejects a bad update and keeps the options in force', () => {
    const { model } = harness({ planThreads: 7 });
    expect(() => model.update({ planThreads: 1.5 })).toThrow(SolverSimConfigError);
    expect(model.current().planThreads).toBe(7);
  });

  it('resets the counters but not the tasks in flight', () => {
    const { model, submit, idOf } = harness({ ...ONE_SECOND, planThreads: 2 });
    idOf(submit());
    submit();
    submit();
    model.resetStats();
    expect(model.stats()).toMatchObject({
      submissions: 0,
      accepted: 0,
      overCapRejections: 0,
      threadsInUse: 2,
      peakThreads: 2,
      balanceStart: 10,
    });
  });
});
