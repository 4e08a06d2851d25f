/**
 * The createTask mapping (functions/core/task-types.ts): per method and dialect, the type names
 * and fields the providers document, and — for generated tasks of every method with every
 * optional parameter drawn at random — a request the simulator's reading of that dialect accepts
 * as the same method, whose solution reads back in the method's one answer shape.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type Dialect, METHODS, type SolverMethod } from '../../functions/core/solver-protocol.js';
import { parseTask, type Task } from '../../functions/core/task.js';
import {
  createTaskOf,
  jsonApiMinScore,
  methodOfTaskType,
  parseProxy,
  readSolution,
} from '../../functions/core/task-types.js';
import { answerFor } from '../../local/solver-sim/answers.js';
import { readTaskObject, solutionOf } from '../../local/solver-sim/json-api.js';
import { sampleTask } from '../../local/sample-tasks.js';
import { stream } from '../../local/solver-sim/prng.js';

const JSON_DIALECTS = ['2captcha', 'anti-captcha', 'capmonster', 'capsolver'] as const satisfies readonly Dialect[];
const page = { sites: ['shop.example'], url: (site: string) => `https://${site}/p` };

function task(method: SolverMethod, params: Record<string, unknown>): Task {
  return { id: 't', method, priority: 'normal', submittedAt: 0, params } as Task;
}
const mapped = (t: Task, dialect: Dialect) => {
  const result = createTaskOf(t, dialect);
  if (!result.ok) throw new Error(result.reason);
  return result;
};

describe("createTask mapping, by the providers' documented names", () => {
  const recaptcha = { googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://a.example/' };

  it.each([
    ['2captcha', {}, 'RecaptchaV2TaskProxyless'],
    ['2captcha', { proxy: 'u:p@10.0.0.1:8080' }, 'RecaptchaV2Task'],
    ['2captcha', { enterprise: 1 }, 'RecaptchaV2EnterpriseTaskProxyless'],
    ['anti-captcha', { version: 'v3', min_score: 0.5 }, 'RecaptchaV3TaskProxyless'],
    ['capmonster', {}, 'NoCaptchaTaskProxyless'],
    ['capmonster', { version: 'v3', enterprise: 1 }, 'RecaptchaV3EnterpriseTask'],
    ['capsolver', {}, 'ReCaptchaV2TaskProxyLess'],
    ['capsolver', { version: 'v3', enterprise: 1, proxy: 'h:1' }, 'ReCaptchaV3EnterpriseTask'],
  ] as const)('reCAPTCHA for %s with %j is %s', (dialect, extra, type) => {
    expect(mapped(task('userrecaptcha', { ...recaptcha, ...extra }), dialect).task.type).toBe(type);
  });

  it('sends reCAPTCHA v3 Enterprise with its action, a score the API takes, and isEnterprise', () => {
    const { task: body } = mapped(
      task('userrecaptcha', { ...recaptcha, version: 'v3', enterprise: 1, action: 'checkout', min_score: 0.5 }),
      '2captcha',
    );
    expect(body).toEqual({
      type: 'RecaptchaV3TaskProxyless',
      websiteURL: recaptcha.pageurl,
      websiteKey: recaptcha.googlekey,
      minScore: 0.7,
      pageAction: 'checkout',
      isEnterprise: true,
    });
  });

  it('never asks for a lower score than the task did (Anti-Captcha and 2captcha take 0.3, 0.7, 0.9)', () => {
    fc.assert(
      fc.property(fc.double({ min: 0.1, max: 0.9, noNaN: true }), (score) => {
        const sent = jsonApiMinScore(score);
        expect([0.3, 0.7, 0.9]).toContain(sent);
        expect(sent + 1e-9).toBeGreaterThanOrEqual(Math.min(score, 0.9));
      }),
    );
  });

  it("splits in.php's proxy into the JSON API's fields, or CapSolver's one string", () => {
    const t = task('turnstile', {
      sitekey: '0x4AAAAAAAC3DHQFLr1GavRN',
      pageurl: 'https://a.example/',
      proxy: 'bob:s3cret@203.0.113.9:1080',
      proxytype: 'SOCKS5',
    });
    expect(mapped(t, '2captcha').task).toMatchObject({
      type: 'TurnstileTask',
      proxyType: 'socks5',
      proxyAddress: '203.0.113.9',
      proxyPort: 1080,
      proxyLogin: 'bob',
      proxyPassword: 's3cret',
    });
    expect(parseProxy('203.0.113.9:3128', 'HTTPS')).toEqual({ type: 'http', address: '203.0.113.9', port: 3128 });
    expect(parseProxy('no-port', 'HTTP')).toBeUndefined();
    expect(
      createTaskOf(
        task('geetest', {
          gt: 'g'.repeat(32),
          challenge: 'c'.repeat(32),
          pageurl: 'https://a.example/',
          proxy: 'not a proxy',
        }),
        '2captcha',
      ),
    ).toMatchObject({
      ok: false,
      code: 'ERROR_BAD_PROXY',
    });
  });

  it('names Turnstile challenge-page values the way each provider does', () => {
    const t = task('turnstile', {
      sitekey: '0x4AAAAAAAC3DHQFLr1GavRN',
      pageurl: 'https://a.example/',
      action: 'managed',
      data: 'cd',
      pagedata: 'pd',
      userAgent: 'UA',
    });
    expect(mapped(t, '2captcha').task).toMatchObject({
      action: 'managed',
      data: 'cd',
      pagedata: 'pd',
      userAgent: 'UA',
    });
    expect(mapped(t, 'anti-captcha').task).toMatchObject({ action: 'managed', cData: 'cd', chlPageData: 'pd' });
    expect(mapped(t, 'capmonster').task).toMatchObject({
      cloudflareTaskType: 'token',
      pageAction: 'managed',
      data: 'cd',
      pageData: 'pd',
    });
    expect(createTaskOf(t, 'capsolver')).toMatchObject({ ok: false, code: 'ERROR_TASK_NOT_SUPPORTED' });
  });

  it("sends hCaptcha's rqdata where each provider reads it, and CapMonster's only beside a user agent", () => {
    const withData = (userAgent?: string) =>
      task('hcaptcha', {
        sitekey: '10000000-ffff-ffff-ffff-000000000001',
        pageurl: 'https://a.example/',
        data: 'RQDATA',
        ...(userAgent === undefined ? {} : { userAgent }),
      });
    expect(mapped(withData('UA'), '2captcha').task).toMatchObject({ enterprisePayload: { rqdata: 'RQDATA' } });
    // CapMonster's client sends it as `data`; enterprisePayload there was dropped, the token made without it.
    const capmonster = mapped(withData('UA'), 'capmonster').task;
    expect(capmonster).toMatchObject({ data: 'RQDATA', userAgent: 'UA' });
    expect(capmonster).not.toHaveProperty('enterprisePayload');
    expect(createTaskOf(withData(), 'capmonster')).toMatchObject({ ok: false, code: 'ERROR_BAD_PARAMETERS' });
  });

  it("refuses DataDome at CapMonster, which needs a datadome cookie the task's parameters do not carry", () => {
    const t = task('datadome', {
      captcha_url: 'https://geo.captcha-delivery.com/captcha/?initialCid=abc',
      pageurl: 'https://a.example/',
      userAgent: 'UA',
      proxy: 'user:pass@1.2.3.4:8080',
      proxytype: 'HTTP',
    });
    expect(createTaskOf(t, 'capmonster')).toMatchObject({ ok: false, code: 'ERROR_TASK_NOT_SUPPORTED' });
    expect(createTaskOf(t, '2captcha')).toMatchObject({ ok: true });
  });

  it("sends GeeTest v4 and Amazon WAF by each provider's names", () => {
    const v4 = task('geetest_v4', {
      captcha_id: 'e392e1d7fd421dc63325744d5a2b9c73',
      pageurl: 'https://a.example/',
      risk_type: 'slide',
    });
    expect(mapped(v4, '2captcha').task).toMatchObject({
      type: 'GeeTestTaskProxyless',
      version: 4,
      initParameters: { captcha_id: 'e392e1d7fd421dc63325744d5a2b9c73', risk_type: 'slide' },
    });
    // Anti-Captcha and CapMonster take the id in `gt` and the risk type as `riskType` (a review:
    // `risk_type` went to both, where neither reads it).
    for (const dialect of ['anti-captcha', 'capmonster'] as const)
      expect(mapped(v4, dialect).task).toMatchObject({
        gt: 'e392e1d7fd421dc63325744d5a2b9c73',
        version: 4,
        initParameters: { riskType: 'slide' },
      });
    expect(mapped(v4, 'capsolver').task).toMatchObject({
      type: 'GeeTestTaskProxyLess',
      captchaId: 'e392e1d7fd421dc63325744d5a2b9c73',
    });
    const waf = task('amazon_waf', {
      sitekey: 'AQIDAHjcYu',
      iv: 'CgAFRjIw2vAA',
      context: 'zPT0jOl1rQlU',
      pageurl: 'https://a.example/',
      challenge_script: 'https://x.example/challenge.js',
    });
    expect(mapped(waf, '2captcha').task).toMatchObject({
      type: 'AmazonTaskProxyless',
      websiteKey: 'AQIDAHjcYu',
      iv: 'CgAFRjIw2vAA',
      context: 'zPT0jOl1rQlU',
      challengeScript: 'https://x.example/challenge.js',
    });
    expect(mapped(waf, 'capsolver').task).toMatchObject({
      type: 'AntiAwsWafTaskProxyLess',
      awsKey: 'AQIDAHjcYu',
      awsIv: 'CgAFRjIw2vAA',
      awsContext: 'zPT0jOl1rQlU',
      awsChallengeJS: 'https://x.example/challenge.js',
    });
  });

  it("tells a createTask type name's method in any dialect's spelling", () => {
    expect(methodOfTaskType('NoCaptchaTaskProxyless')).toBe('userrecaptcha');
    expect(methodOfTaskType('recaptchav3enterprisetaskproxyless')).toBe('userrecaptcha');
    expect(methodOfTaskType('AntiAwsWafTaskProxyLess')).toBe('amazon_waf');
    expect(methodOfTaskType('DatadomeSliderTask')).toBe('datadome');
    expect(methodOfTaskType('FooTask')).toBeUndefined();
  });

  it("reads solutions into the method's one shape, with the extras it keeps", () => {
    expect(readSolution('geetest', { challenge: 'c1', validate: 'v1' })).toEqual({
      answer: JSON.stringify({ geetest_challenge: 'c1', geetest_validate: 'v1', geetest_seccode: 'v1|jordan' }),
      extras: {},
    });
    expect(
      readSolution('hcaptcha', {
        gRecaptchaResponse: 'P1_x',
        respKey: 'E0_y',
        userAgent: 'UA',
        cookies: { a: '1', b: '2' },
      }),
    ).toEqual({
      answer: 'P1_x',
      extras: { respKey: 'E0_y', userAgent: 'UA', cookies: 'a=1; b=2' },
    });
    expect(readSolution('datadome', { domains: { 'a.example': { cookies: { datadome: 'abc' } } } })?.answer).toBe(
      'datadome=abc',
    );
    expect(readSolution('userrecaptcha', { text: 'not a token field' })).toBeUndefined();
    expect(readSolution('base64', 'text')).toBeUndefined();
  });
});

describe('generated tasks of every method, in every JSON dialect', () => {
  /** Optional in.php parameters drawn at random onto a sample task, kept only when the schema takes the result. */
  const optional = fc.record(
    {
      proxy: fc.constantFrom('u:p@198.51.100.4:3128', '198.51.100.5:1080'),
      proxytype: fc.constantFrom('HTTP', 'HTTPS', 'SOCKS4', 'SOCKS5'),
      userAgent: fc.constant('Mozilla/5.0 (X11; Linux x86_64)'),
      action: fc.constantFrom('login', 'checkout'),
      version: fc.constantFrom('v2', 'v3'),
      enterprise: fc.constantFrom(0, 1),
      invisible: fc.constantFrom(0, 1),
      'data-s': fc.constant('s-value'),
      data: fc.constant('cdata'),
      api_server: fc.constant('api-na.geetest.com'),
      risk_type: fc.constant('slide'),
      regsense: fc.constantFrom(0, 1),
      language: fc.constantFrom(0, 1, 2),
    },
    { requiredKeys: [] },
  );

  it("maps each to a request the dialect's service takes as the same method, or refuses it as unsupported", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...METHODS),
        fc.constantFrom(...JSON_DIALECTS),
        fc.integer({ min: 0, max: 10_000 }),
        optional,
        (method, dialect, seed, extra) => {
          const sample = sampleTask(method, seed, stream(seed, 'types'), page);
          const allowed = Object.fromEntries(Object.entries(extra).filter(([name]) => name in sampleParamsFor(method)));
          let parsed = parseTask(JSON.stringify({ ...sample, params: { ...sample.params, ...allowed } }), 'x', 0);
          if (!parsed.ok) parsed = parseTask(JSON.stringify(sample), 'x', 0);
          if (!parsed.ok) throw new Error(parsed.rejection.reason);
          const result = createTaskOf(parsed.task, dialect);
          if (!result.ok) {
            expect(result.code).toBe('ERROR_TASK_NOT_SUPPORTED');
            return;
          }
          const read = readTaskObject(dialect, result.task);
          expect(read, `${dialect} ${JSON.stringify(result.task)}`).toMatchObject({ ok: true, method });
          const solution = solutionOf(
            dialect,
            method,
            answerFor(seed, 1, method, { pageurl: 'https://shop.example/p', challenge: 'c'.repeat(32) }),
          );
          const reading = readSolution(method, solution);
          expect(reading, `${dialect} ${method} ${JSON.stringify(solution)}`).toBeDefined();
        },
      ),
      { numRuns: 400, seed: 20261201 },
    );
  });
});

/** The names a method's schema takes (the random extras are drawn from a superset). */
function sampleParamsFor(method: SolverMethod): Record<string, true> {
  const names: Record<SolverMethod, readonly string[]> = {
    userrecaptcha: ['proxy', 'proxytype', 'userAgent', 'action', 'version', 'enterprise', 'invisible', 'data-s'],
    turnstile: ['proxy', 'proxytype', 'userAgent', 'action', 'data'],
    hcaptcha: ['proxy', 'proxytype', 'userAgent', 'invisible', 'data'],
    geetest: ['proxy', 'proxytype', 'userAgent', 'api_server'],
    geetest_v4: ['proxy', 'proxytype', 'userAgent', 'api_server', 'risk_type'],
    funcaptcha: ['proxy', 'proxytype', 'userAgent'],
    amazon_waf: ['proxy', 'proxytype', 'userAgent'],
    datadome: ['userAgent'],
    base64: ['regsense', 'language'],
    textcaptcha: ['language'],
  };
  return Object.fromEntries(names[method].map((name) => [name, true]));
}
