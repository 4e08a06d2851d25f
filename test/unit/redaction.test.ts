/**
 * The solver key is found in any case and reversed, wherever text leaves the process: the
 * redaction helpers, the solver client's error codes and messages (which reach the consumer's
 * records and logs and the governor's saved decisions), and the consumer's own log lines.
 */
import { MockAgent } from 'undici';
import { describe, expect, it } from 'vitest';
import { createSolverClient } from '../../functions/adapters/solver-client.js';
import { UNRECOGNIZED_CODE } from '../../functions/adapters/solver-http.js';
import { containsSecret, createRedactor, redactSecrets } from '../../functions/core/redaction.js';
import { redactKey, SolverError } from '../../functions/core/solver-protocol.js';
import type { Task } from '../../functions/core/task.js';

const KEY = 'a1b2c3d4e5f60718293a4b5c6d7e8f90';
const UPPER = KEY.toUpperCase();
const REVERSED = [...KEY].reverse().join('');
const ORIGIN = 'http://solver.test';

describe('redaction', () => {
  it.each([
    ['as it is', `echo ${KEY}`],
    ['upper-cased inside an error code', `ERROR_${UPPER}`],
    ['reversed', `x${REVERSED}x`],
    ['in mixed case', `k=${KEY.slice(0, 16)}${UPPER.slice(16)}`],
    ['as a query parameter', `GET /res.php?key=${KEY}&action=get`],
  ])('finds the key %s', (_, text) => {
    expect(redactKey(text, KEY)).not.toMatch(new RegExp(`${KEY}|${REVERSED}`, 'i'));
    expect(redactKey(text, KEY)).toContain('***');
  });

  // A key outside the providers' hex: each form a request carries it in was missed before.
  const ODD = 'Ab+c/d=EF12"gh\\ij k';
  it.each([
    [
      'URL-encoded in a form body echoed by a proxy',
      `bad gateway; request was: key=${encodeURIComponent(ODD)}&method=post`,
    ],
    ['form-encoded in a query', `GET /res.php?${new URLSearchParams({ action: 'get', key: ODD })}`],
    ['JSON-escaped in an echoed createTask body', `<pre>${JSON.stringify({ clientKey: ODD, task: {} })}</pre>`],
    ['JSON-escaped and reversed', JSON.stringify({ echo: [...ODD].reverse().join('') })],
    ['URL-encoded in upper case', encodeURIComponent(ODD).toUpperCase()],
  ])('finds a key with characters a request escapes, %s', (_, text) => {
    const clean = redactKey(text, ODD);
    for (const form of [ODD, encodeURIComponent(ODD), JSON.stringify(ODD).slice(1, -1), 'EF12'])
      expect(clean.toLowerCase()).not.toContain(form.toLowerCase());
    expect(clean).toContain('***');
  });

  it.each([
    ['a form body that begins with it', `key=${KEY}&method=userrecaptcha`, `key=***&method=userrecaptcha`],
    ['a query', `/in.php?json=1&key=${KEY}`, '/in.php?json=1&key=***'],
    ["createTask's clientKey", `{"clientKey":"${KEY}","task":{}}`, '{"clientKey":"***","task":{}}'],
  ])('masks the key in %s before the key is known', (_, text, masked) => {
    expect(createRedactor().redact(text)).toBe(masked);
  });

  it('redacts a key holding a quote or a backslash from log attributes, the rest of them intact', () => {
    const redactor = createRedactor([ODD]);
    const attributes = { error: `echo ${ODD}`, [`k${ODD}`]: 1, list: [`${JSON.stringify(ODD)}`], n: 3, ok: 'kept' };
    // Before, the attributes were redacted as their JSON text, where such a key is escaped: it stayed.
    const clean = redactor.redactValue(attributes);
    expect(JSON.stringify(clean)).not.toContain('EF12');
    expect(clean).toMatchObject({ n: 3, ok: 'kept' });
    expect(redactor.redactValue({ ok: 'kept' })).toEqual({ ok: 'kept' });
  });

  it('leaves text without the key alone, and short secrets unsearched', () => {
    expect(redactSecrets('ERROR_CAPTCHA_UNSOLVABLE', [KEY, 'ab'])).toBe('ERROR_CAPTCHA_UNSOLVABLE');
    expect(containsSecret('ERROR_CAPTCHA_UNSOLVABLE', [KEY])).toBe(false);
    expect(containsSecret(`ERROR_${UPPER}`, [KEY])).toBe(true);
  });

  it('redacts every string of a log attribute object with the keys it learned', () => {
    const redactor = createRedactor();
    const attributes = { error: `SolverTransientError: ERROR_${UPPER}`, nested: { list: [REVERSED] }, n: 3 };
    expect(JSON.stringify(redactor.redactValue(attributes))).toContain(UPPER);
    redactor.add(KEY);
    const clean = redactor.redactValue(attributes);
    expect(JSON.stringify(clean)).not.toMatch(new RegExp(`${KEY}|${REVERSED}`, 'i'));
    expect(clean.n).toBe(3);
  });
});

describe('the solver client with an echo of its key', () => {
  const task = {
    id: 't1',
    method: 'base64',
    priority: 'normal',
    submittedAt: 0,
    params: { body: 'A'.repeat(200) },
  } as unknown as Task;

  /** A client whose in.php answers `body`. */
  function echoing(body: unknown) {
    const agent = new MockAgent();
    agent.disableNetConnect();
    agent
      .get(ORIGIN)
      .intercept({ path: (p) => p.startsWith('/'), method: () => true })
      .reply(200, body as object)
      .persist();
    const logged: string[] = [];
    const client = createSolverClient({
      baseUrl: ORIGIN,
      key: KEY,
      dialect: '2captcha',
      dispatcher: agent,
      sleep: async () => undefined,
      retry: { maxTransientRetries: 0 },
      logger: {
        debug: (m, a) => logged.push(m + JSON.stringify(a)),
        warn: (m, a) => logged.push(m + JSON.stringify(a)),
      },
    });
    return { client, logged };
  }

  it.each([
    ['upper-cased', `ERROR_${UPPER}`],
    ['reversed and upper-cased', `ERROR_${REVERSED.toUpperCase()}`],
  ])('does not pass an error code with the key %s on as a code (records, logs, the governor)', async (_, echoed) => {
    const { client, logged } = echoing({ status: 0, request: echoed });
    const error = (await client
      .solve(task, { deadlineAt: Date.now() + 5_000 })
      .catch((e: unknown) => e)) as SolverError;
    expect(error).toBeInstanceOf(SolverError);
    expect(error.code).toBe(UNRECOGNIZED_CODE);
    const balance = (await client.getBalance().catch((e: unknown) => e)) as SolverError;
    expect(balance.code).toBe(UNRECOGNIZED_CODE);
    const everything = JSON.stringify([error.code, error.message, balance.code, balance.message, logged]);
    expect(everything).not.toMatch(new RegExp(`${KEY}|${REVERSED}`, 'i'));
  });

  it('takes the key out of an answer that echoes it in another case', async () => {
    const { client } = echoing({ status: 1, request: `token-${UPPER}` });
    // in.php answers the same echo: an id that is no id is refused, the key never surfaces.
    const outcome = await client.solve(task, { deadlineAt: Date.now() + 5_000 }).catch((e: unknown) => e);
    expect(JSON.stringify(outcome, Object.getOwnPropertyNames(outcome))).not.toMatch(new RegExp(KEY, 'i'));
  });
});
