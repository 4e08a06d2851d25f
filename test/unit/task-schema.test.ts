import { readFileSync } from 'node:fs';
import { printable } from '../../functions/core/helpers/printable.js';
import { describe, expect, it } from 'vitest';
import {
  MAX_TASK_BYTES,
  parseTask,
  supportedMethods,
  TaskSchema,
  taskIssues,
  taskJsonSchema,
} from '../../functions/core/task.js';
import { METHODS } from '../../functions/core/solver-protocol.js';
import {
  closestParamName,
  FLEET_OWNED_PARAMS,
  fleetOwnedName,
  METHOD_PARAMS,
  normaliseParamName,
} from '../../functions/core/task-params.js';
import { taskFingerprint } from '../../functions/core/task-identity.js';
import { sampleTask } from '../../local/sample-tasks.js';
import { stream } from '../../local/solver-sim/prng.js';

const SENT_AT = 1_700_000_000_000;
const parse = (message: unknown, fallbackId = 'sqs-message-id') =>
  parseTask(typeof message === 'string' ? message : JSON.stringify(message), fallbackId, SENT_AT);

const valid = {
  userrecaptcha: {
    method: 'userrecaptcha',
    params: { googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://shop.example/checkout' },
  },
  turnstile: {
    method: 'turnstile',
    params: { sitekey: '0x4AAAAAAAC3DHQFLr1GavRN', pageurl: 'https://shop.example/login', action: 'login' },
  },
  hcaptcha: {
    method: 'hcaptcha',
    params: { sitekey: '10000000-ffff-ffff-ffff-000000000001', pageurl: 'https://shop.example/' },
  },
  geetest: {
    method: 'geetest',
    params: {
      gt: '81388ea1fc187e0c335c0a8907ff2625',
      challenge: '2e2f0f65240058b683cb6ea21c303eea6n',
      pageurl: 'https://shop.example/',
    },
  },
  geetest_v4: {
    method: 'geetest_v4',
    params: { captcha_id: 'e392e1d7fd421dc63325744d5a2b9c73', pageurl: 'https://shop.example/' },
  },
  funcaptcha: {
    method: 'funcaptcha',
    params: { publickey: '69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC', pageurl: 'https://shop.example/' },
  },
  amazon_waf: {
    method: 'amazon_waf',
    params: {
      sitekey:
        'AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTbNg96AHDh0IR5vgzHNceHYqZR+GOAAAAfjB8BgkqhkiG9w0BBwagbzBtAgEA',
      iv: 'CgAFRjIw2vAAABSM',
      context: 'zPT0jOl1rQlUNaldX6LUpn4D6Tl9bJ8VUQ/NrWFxPiiFujn/dYa8P+g1PFnlkTgs',
      pageurl: 'https://shop.example/',
    },
  },
  datadome: {
    method: 'datadome',
    params: {
      captcha_url: 'https://geo.captcha-delivery.com/captcha/?initialCid=AHrlqAAAAAMA&cid=abc&t=fe',
      pageurl: 'https://shop.example/',
      proxy: 'user:pw@203.0.113.7:3128',
      proxytype: 'HTTP',
      userAgent: 'Mozilla/5.0 (X11; Linux x86_64)',
    },
  },
  base64: { method: 'base64', params: { body: 'iVBORw0KGgo'.padEnd(400, 'A'), numeric: 1 } },
  textcaptcha: { method: 'textcaptcha', params: { textcaptcha: 'If tomorrow is Saturday, what day is today?' } },
} as const;

describe('task schema v1', () => {
  it('accepts one well-formed task of every supported method', () => {
    expect(Object.keys(valid).sort()).toEqual([...METHODS].sort());
    for (const message of Object.values(valid)) {
      const result = parse(message);
      expect(result.ok, JSON.stringify(result)).toBe(true);
    }
  });

  it('assigns the SQS message id, normal priority and the sent time when absent', () => {
    const result = parse(valid.turnstile, 'a1b2c3d4-0000-1111-2222-333344445555');
    expect(result).toMatchObject({
      ok: true,
      task: { id: 'a1b2c3d4-0000-1111-2222-333344445555', priority: 'normal', submittedAt: SENT_AT },
    });
  });

  it('keeps the producer id, priority and submittedAt (the usual Redis 8-char ids fit)', () => {
    const result = parse({ ...valid.userrecaptcha, id: 'ab12CD34', priority: 'high', submittedAt: 42 });
    expect(result).toMatchObject({ ok: true, task: { id: 'ab12CD34', priority: 'high', submittedAt: 42 } });
  });

  it('passes extra protocol parameters (proxy, userAgent) through verbatim', () => {
    const result = parse({
      ...valid.turnstile,
      params: { ...valid.turnstile.params, proxy: 'user:pw@10.0.0.1:8080', proxytype: 'HTTP' },
    });
    expect(result.ok && result.task.params).toMatchObject({ proxy: 'user:pw@10.0.0.1:8080', proxytype: 'HTTP' });
  });

  it.each([
    ['missing googlekey', { method: 'userrecaptcha', params: { pageurl: 'https://a.example/' } }, 'params.googlekey'],
    [
      'pageurl not a URL',
      { method: 'turnstile', params: { sitekey: '0x4AAAAAAAC3DHQFLr1GavRN', pageurl: 'not a url' } },
      'params.pageurl',
    ],
    ['id outside the alphabet', { ...valid.hcaptcha, id: 'has space' }, 'id'],
    [
      'a key inside params',
      { ...valid.hcaptcha, params: { ...valid.hcaptcha.params, key: 'x'.repeat(32) } },
      'params.key',
    ],
    ['bad priority', { ...valid.hcaptcha, priority: 'urgent' }, 'priority'],
    ['image body too short', { method: 'base64', params: { body: 'abc' } }, 'params.body'],
    // Before, each was accepted and sent on: a CR LF in a user agent injects a header wherever it is sent.
    [
      'a user agent holding CR LF',
      { ...valid.turnstile, params: { ...valid.turnstile.params, userAgent: 'Moz\r\nX-Evil: 1' } },
      'params.userAgent',
    ],
    [
      'a proxy holding NUL',
      { ...valid.turnstile, params: { ...valid.turnstile.params, proxy: 'u:p@10.0.0.1:80\u0000', proxytype: 'HTTP' } },
      'params.proxy',
    ],
    [
      'a text question holding an escape',
      { method: 'textcaptcha', params: { textcaptcha: '\u001b[2J 2+2?' } },
      'params.textcaptcha',
    ],
    [
      'a GeeTest challenge holding a bidi override',
      {
        method: 'geetest',
        params: { gt: 'g'.repeat(32), challenge: `c${'\u202E'}${'c'.repeat(31)}`, pageurl: 'https://a.example/' },
      },
      'params.challenge',
    ],
  ])('rejects %s with a reason that names the field', (_name, message, field) => {
    const result = parse(message);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.rejection.code).toBe('SCHEMA_VIOLATION');
      expect(result.rejection.reason).toContain(field);
    }
  });

  it('rejects an unknown method by name and lists the supported ones', () => {
    const result = parse({ id: 'task-1', method: 'audio', params: {} });
    expect(result).toEqual({
      ok: false,
      rejection: { code: 'UNKNOWN_METHOD', reason: expect.stringContaining('"audio"'), id: 'task-1' },
    });
    if (!result.ok) expect(result.rejection.reason).toContain(supportedMethods().join(', '));
  });

  it('rejects malformed JSON and still reads the id when it can', () => {
    const result = parse('{"id":"task-7","method":"turnstile",');
    expect(result).toMatchObject({ ok: false, rejection: { code: 'MALFORMED_JSON', id: 'task-7' } });
  });

  it("reads a broken message's own id only, not one quoted in its params", () => {
    // Before, the first `"id"` anywhere: a rejected record and event under another task's id.
    expect(parse('{"method":"base64","params":{"id":"victim-9"}, broken')).toMatchObject({
      ok: false,
      rejection: { code: 'MALFORMED_JSON', id: undefined },
    });
    expect(parse('{"params":{"x":"}{"},"id" : "own-1", broken')).toMatchObject({ rejection: { id: 'own-1' } });
  });

  it("refuses, never throws on, names that are Object.prototype's (a throw failed the whole batch)", () => {
    const image = { body: 'A'.repeat(200) };
    for (const message of [
      { id: 'pc-1', method: 'base64', params: { ...image, constructor: 1 } },
      { id: 'pc-2', method: 'base64', params: { ...image, Con_struc: 1, ' CONSTRUCTOR[]': 1 } },
      { id: 'pc-3', method: 'base64', params: { ...image, toString: 1, hasOwnProperty: 1 } },
      { id: 'ct-1', task: { type: 'constructor' } },
      { id: 'ct-2', type: '__proto__' },
      { id: 'ct-3', task: { type: 'AntiConstructorTaskProxyless' } },
      { id: 'm-1', method: 'constructor', params: {} },
    ]) {
      const result = parse(message);
      expect(result.ok, JSON.stringify(message)).toBe(false);
      if (!result.ok) expect(['SCHEMA_VIOLATION', 'UNKNOWN_METHOD']).toContain(result.rejection.code);
    }
  });

  it('writes what a refused message quotes as printable text (no control characters, no lone surrogates)', () => {
    const method = parse({
      id: 'me-1',
      method: '\u001b[2J\u001b[31mPWNED\u0007\r\nlevel=ERROR fake\u0000',
      params: {},
    });
    const emoji = parse('\ud83d\ude00 not json');
    const cut = parse({ id: 'me-2', method: `${'a'.repeat(63)}\ud83d\ude00`, params: {} });
    for (const result of [method, emoji, cut]) {
      expect(result.ok).toBe(false);
      if (result.ok) continue;
      // Printable text is its own printable form: nothing left to write out.
      expect(printable(result.rejection.reason, Number.MAX_SAFE_INTEGER)).toBe(result.rejection.reason);
    }
    if (!method.ok)
      expect(method.rejection.reason).toContain('\\u001b[2J\\u001b[31mPWNED\\u0007\\u000d\\u000alevel=ERROR');
  });

  it('describes at most five refused parameters of a message that brings thousands', () => {
    const names = Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`x${i}`, 1]));
    const message = { id: 'many-1', method: 'base64', params: { body: 'A'.repeat(200), ...names } };
    const result = parse(message);
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.rejection.reason.match(/params\.x\d+:/g)).toHaveLength(5);
    // Each description is an edit-distance search; all 20 000 were made before five were kept.
    const parsed = TaskSchema.safeParse(message);
    expect(parsed.success).toBe(false);
    if (!parsed.success) expect(taskIssues(parsed.error, message)).toHaveLength(5);
  });

  it('rejects a message over the size limit before parsing it', () => {
    const body = JSON.stringify({
      id: 'big-1',
      method: 'textcaptcha',
      params: { textcaptcha: 'x', pad: 'y'.repeat(MAX_TASK_BYTES) },
    });
    expect(parse(body)).toMatchObject({ ok: false, rejection: { code: 'TOO_LARGE', id: 'big-1' } });
  });
});

describe('published JSON Schema', () => {
  it('is exactly what the zod schema generates (run `npm run schema` after changing task.ts)', () => {
    const published = JSON.parse(readFileSync(new URL('../../schema/task-v1.schema.json', import.meta.url), 'utf8'));
    expect(published).toEqual(JSON.parse(JSON.stringify(taskJsonSchema())));
  });

  it('has one alternative per method, each requiring the protocol parameters', () => {
    const schema = taskJsonSchema() as {
      oneOf: Array<{ properties: { method: { const: string }; params: { required: string[] } } }>;
    };
    const byMethod = Object.fromEntries(
      schema.oneOf.map((alt) => [alt.properties.method.const, alt.properties.params.required]),
    );
    expect(Object.keys(byMethod).sort()).toEqual([...METHODS].sort());
    expect(byMethod.userrecaptcha).toEqual(expect.arrayContaining(['googlekey', 'pageurl']));
    expect(byMethod.turnstile).toEqual(expect.arrayContaining(['sitekey', 'pageurl']));
    expect(byMethod.base64).toEqual(['body']);
  });
});

describe('parameter allow-list', () => {
  const recaptcha = valid.userrecaptcha;
  const withParam = (name: string, value: unknown = 'x') => ({
    ...recaptcha,
    id: 'allow-1',
    params: { ...recaptcha.params, [name]: value },
  });

  it.each([
    [' key', 'key'],
    ['KEY', 'key'],
    ['key[]', 'key'],
    ['key[0]', 'key'],
    ['soft.id', 'soft_id'],
    ['soft id', 'soft_id'],
    ['Soft-Id', 'soft_id'],
    ['header.acao', 'header_acao'],
    [' pingback', 'pingback'],
    ['JSON', 'json'],
    ['method', 'method'],
    ['id', 'id'],
  ])('refuses %j, read by a PHP backend as the fleet-owned "%s", naming it', (name, owned) => {
    const result = parse(withParam(name));
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.rejection.code).toBe('SCHEMA_VIOLATION');
      expect(result.rejection.reason).toContain(JSON.stringify(name));
      expect(result.rejection.reason).toMatch(owned === name ? /set by the fleet/ : `read as "${owned}"`);
    }
  });

  it.each([
    ['page_url', 'pageurl'],
    ['sitekey', 'googlekey'],
    ['useragent', 'userAgent'],
    ['minScore', 'min_score'],
    ['ACTION', 'action'],
    ['googlekye', 'googlekey'],
  ])('refuses the unknown name %j and suggests "%s"', (name, closest) => {
    const result = parse(withParam(name));
    expect(result).toMatchObject({ ok: false, rejection: { code: 'SCHEMA_VIOLATION' } });
    if (!result.ok) {
      expect(result.rejection.reason).toContain(`params.${name}: ${JSON.stringify(name)} is not a parameter`);
      expect(result.rejection.reason).toContain(`did you mean "${closest}"?`);
    }
  });

  it('refuses a name with no near match, listing what the method accepts', () => {
    const result = parse(withParam('callback_url_of_mine'));
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.rejection.reason).not.toContain('did you mean');
      expect(result.rejection.reason).toContain(`allowed: ${METHOD_PARAMS.userrecaptcha.join(', ')}`);
    }
  });

  it('refuses a name documented for another method only', () => {
    const result = parse({ ...valid.turnstile, params: { ...valid.turnstile.params, 'data-s': 'x' } });
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.rejection.reason).toContain('"data-s" is not a parameter of turnstile');
  });

  it('accepts every documented name of a method with a valid value', () => {
    const result = parse({
      ...recaptcha,
      params: {
        ...recaptcha.params,
        version: 'v3',
        action: 'login',
        min_score: 0.3,
        invisible: 1,
        enterprise: 0,
        'data-s': 'abc',
        domain: 'recaptcha.net',
        cookies: 'a:1;b:2',
        proxy: 'user:pw@10.0.0.1:8080',
        proxytype: 'SOCKS5',
        userAgent: 'Mozilla/5.0',
      },
    });
    expect(result.ok, JSON.stringify(result)).toBe(true);
  });

  it('holds no allowed name that a backend would read as a fleet-owned one', () => {
    for (const names of Object.values(METHOD_PARAMS)) {
      for (const name of names) expect(fleetOwnedName(name), name).toBeUndefined();
    }
    expect(FLEET_OWNED_PARAMS.map(normaliseParamName)).toEqual([
      'key',
      'json',
      'method',
      'softid',
      'pingback',
      'headeracao',
      'id',
      'clientkey',
      'appid',
      'callbackurl',
      'taskid',
    ]);
  });

  it.each([
    [
      'a minimum score without v3',
      { ...recaptcha, params: { ...recaptcha.params, min_score: 0.7 } },
      'params.min_score',
    ],
    [
      'a challenge page without its action and cData',
      {
        ...valid.turnstile,
        params: { sitekey: valid.turnstile.params.sitekey, pageurl: 'https://a.example/', pagedata: 'x' },
      },
      'params.pagedata',
    ],
    [
      'DataDome without the proxy it must be solved through',
      { ...valid.datadome, params: { ...valid.datadome.params, proxy: undefined } },
      'params.proxy',
    ],
    [
      'DataDome without a user agent',
      { ...valid.datadome, params: { ...valid.datadome.params, userAgent: '' } },
      'params.userAgent',
    ],
    [
      'GeeTest v4 without captcha_id',
      { method: 'geetest_v4', params: { pageurl: 'https://a.example/' } },
      'params.captcha_id',
    ],
    [
      'Amazon WAF without iv',
      { ...valid.amazon_waf, params: { ...valid.amazon_waf.params, iv: undefined } },
      'params.iv',
    ],
  ])('refuses %s, naming the parameter', (_name, message, path) => {
    const result = parse(message);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.rejection.code).toBe('SCHEMA_VIOLATION');
      expect(result.rejection.reason).toContain(path);
    }
  });

  it('accepts a Turnstile challenge page and reCAPTCHA Enterprise v3 with its action and score', () => {
    const challenge = parse({
      ...valid.turnstile,
      params: { ...valid.turnstile.params, data: 'cdata-7f3', pagedata: 'chl-page-data', userAgent: 'Mozilla/5.0' },
    });
    expect(challenge.ok, JSON.stringify(challenge)).toBe(true);
    const enterprise = parse({
      ...recaptcha,
      params: { ...recaptcha.params, version: 'v3', enterprise: 1, action: 'checkout', min_score: 0.7 },
    });
    expect(enterprise.ok, JSON.stringify(enterprise)).toBe(true);
  });

  it.each([
    [
      { task: { type: 'RecaptchaV2TaskProxyless', websiteURL: 'https://a.example/', websiteKey: 'k' } },
      'userrecaptcha',
    ],
    [{ clientKey: 'x', task: { type: 'AntiTurnstileTaskProxyLess' } }, 'turnstile'],
    [{ task: { type: 'AmazonTaskProxyless' } }, 'amazon_waf'],
    [{ task: { type: 'DataDomeSliderTask' } }, 'datadome'],
    [{ task: { type: 'ImageToTextTask', body: 'x' } }, 'base64'],
  ])('refuses a createTask-shaped message (%j), naming the method to send instead', (message, method) => {
    const result = parse({ id: 'ct-1', ...message });
    expect(result).toMatchObject({ ok: false, rejection: { code: 'SCHEMA_VIOLATION', id: 'ct-1' } });
    if (!result.ok) {
      expect(result.rejection.reason).toContain('createTask shape');
      expect(result.rejection.reason).toContain(`method "${method}"`);
    }
  });

  it("refuses the JSON API names of the fleet-owned parameters as the fleet's own", () => {
    for (const name of ['softId', 'clientKey', 'appId', 'callbackUrl']) {
      const result = parse({ ...valid.turnstile, params: { ...valid.turnstile.params, [name]: '1' } });
      expect(result.ok, name).toBe(false);
      if (!result.ok) expect(result.rejection.reason, name).toMatch(/set by the fleet|which the fleet sets/);
    }
  });

  it('suggests nothing for an empty or far-off name', () => {
    expect(closestParamName('', METHOD_PARAMS.base64)).toBeUndefined();
    expect(closestParamName('zzzzzzzz', METHOD_PARAMS.base64)).toBeUndefined();
  });

  it("publishes each method's names, and only those, in the JSON Schema", () => {
    const schema = taskJsonSchema() as {
      oneOf: Array<{
        properties: {
          method: { const: keyof typeof METHOD_PARAMS };
          params: { properties: Record<string, unknown>; additionalProperties: boolean };
        };
      }>;
    };
    for (const alternative of schema.oneOf) {
      const { method, params } = alternative.properties;
      expect(Object.keys(params.properties).sort(), method.const).toEqual([...METHOD_PARAMS[method.const]].sort());
      expect(params.additionalProperties).toBe(false);
    }
  });

  it('accepts the local demo and benchmark sample tasks of every method', () => {
    const random = stream(7, 'allow-list');
    for (const method of METHODS) {
      for (let n = 0; n < 5; n++) {
        const sample = sampleTask(method, n, random, {
          sites: ['shop'],
          url: (site) => `https://${site}.example/p${n}`,
        });
        const result = parse(sample);
        expect(result.ok, `${method}: ${JSON.stringify(result)}`).toBe(true);
      }
    }
  });
});

describe('task fingerprint', () => {
  it('is the same for the same method and params in any order, whatever the id and priority', () => {
    const a = { method: 'turnstile', params: { sitekey: '0x4AAAAAAAC3DHQFLr1GavRN', pageurl: 'https://a.example/' } };
    const b = { method: 'turnstile', params: { pageurl: 'https://a.example/', sitekey: '0x4AAAAAAAC3DHQFLr1GavRN' } };
    expect(taskFingerprint(a)).toBe(taskFingerprint(b));
    expect(taskFingerprint({ ...a, id: 'one', priority: 'high' } as typeof a)).toBe(taskFingerprint(a));
    expect(taskFingerprint(a)).toMatch(/^[0-9a-f]{64}$/);
  });

  it('differs when a param value, a param name or the method differs', () => {
    const a = { method: 'hcaptcha', params: { sitekey: '10000000-ffff', pageurl: 'https://a.example/' } };
    const fingerprints = new Set([
      taskFingerprint(a),
      taskFingerprint({ ...a, params: { ...a.params, pageurl: 'https://b.example/' } }),
      taskFingerprint({ ...a, params: { ...a.params, invisible: 1 } }),
      taskFingerprint({ ...a, method: 'turnstile' }),
    ]);
    expect(fingerprints.size).toBe(4);
  });
});
