/**
 * The solver simulator over HTTP: every request shape clients send, both answer modes, the
 * protocol's error codes, and GET /stats. A hand-stepped clock decides when tasks are solved,
 * so no test sleeps.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { connect } from 'node:net';
import { overCapCode } from '../../functions/core/solver-protocol.js';
import { createSolverSimulator, type SolverSimOptions, type SolverSimulator } from '../../local/solver-sim/index.js';

const KEY = 'a'.repeat(32);
const RECAPTCHA = {
  method: 'userrecaptcha',
  googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-',
  pageurl: 'https://example.com/login',
};
/** 300 bytes: above the protocol's 100-byte floor. */
const IMAGE = Buffer.alloc(300, 7);

let sim: SolverSimulator | undefined;
let now = 1_700_000_000_000;

afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

async function start(options: SolverSimOptions = {}): Promise<string> {
  sim = createSolverSimulator({
    clock: () => now,
    solveTimes: { userrecaptcha: { medianMs: 1_000, spread: 0 } },
    ...options,
  });
  const { url } = await sim.listen();
  return url;
}

async function get(url: string, path: string, params: Record<string, string>): Promise<Response> {
  return fetch(`${url}/${path}?${new URLSearchParams(params)}`);
}

async function getJson(
  url: string,
  path: string,
  params: Record<string, string>,
): Promise<{ status: number; request: unknown }> {
  const response = await get(url, path, { ...params, json: '1' });
  expect(response.status).toBe(200);
  return (await response.json()) as { status: number; request: unknown };
}

async function getText(url: string, path: string, params: Record<string, string>): Promise<string> {
  const response = await get(url, path, params);
  expect(response.status).toBe(200);
  return response.text();
}

describe('in.php and res.php in json mode', () => {
  it('accepts a GET submission, answers CAPCHA_NOT_READY while solving, then the token', async () => {
    const url = await start();
    const submitted = await getJson(url, 'in.php', { key: KEY, ...RECAPTCHA });
    expect(submitted.status).toBe(1);
    expect(typeof submitted.request).toBe('number');
    const id = String(submitted.request);

    expect(await getJson(url, 'res.php', { key: KEY, action: 'get', id })).toEqual({
      status: 0,
      request: 'CAPCHA_NOT_READY',
    });
    now += 1_000;
    const solved = await getJson(url, 'res.php', { key: KEY, action: 'get', id });
    expect(solved.status).toBe(1);
    expect(solved.request).toMatch(/^03AGdBq2[A-Za-z0-9_-]{480,}$/);
  });

  it('answers a request target no URL reads with 400, not a crash (HTTP 500)', async () => {
    const url = new URL(await start());
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () =>
        socket.write('GET http://[zz/in.php HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'),
      );
      let text = '';
      socket.on('data', (chunk) => {
        text += chunk.toString('utf8');
      });
      socket.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1])));
      socket.on('error', reject);
    });
    expect(status).toBe(400);
  });

  it('sends ids as strings when told to', async () => {
    const url = await start({ jsonIdType: 'string' });
    const submitted = await getJson(url, 'in.php', { key: KEY, ...RECAPTCHA });
    expect(submitted.request).toMatch(/^\d{11}$/);
  });

  it('answers GeeTest with an object, as the service does', async () => {
    const url = await start({ medianMs: 0 });
    const { request: id } = await getJson(url, 'in.php', {
      key: KEY,
      method: 'geetest',
      gt: '81dc9bdb52d04dc20036dbd8313ed055',
      challenge: '1ad03db8aff920037fb8117827eab171',
      pageurl: 'https://example.com',
    });
    const solved = await getJson(url, 'res.php', { key: KEY, action: 'get', id: String(id) });
    expect(solved.request).toMatchObject({
      geetest_challenge: expect.stringMatching(/^1ad03db8aff920037fb8117827eab171[a-z]{2}$/),
      geetest_seccode: expect.stringMatching(/\|jordan$/),
    });
  });

  it('takes a JSON POST with a base64 image and answers short text', async () => {
    const url = await start({ medianMs: 0 });
    const response = await fetch(`${url}/in.php`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        key: KEY,
        json: 1,
        method: 'base64',
        body: IMAGE.toString('base64'),
        numeric: 1,
        min_len: 5,
        max_len: 5,
      }),
    });
    const submitted = (await response.json()) as { status: number; request: number };
    expect(submitted.status).toBe(1);
    const solved = await getJson(url, 'res.php', { key: KEY, action: 'get', id: String(submitted.request) });
    expect(solved).toEqual({ status: 1, request: expect.stringMatching(/^\d{5}$/) });
  });

  it('names the missing parameter with the documented code', async () => {
    const url = await start();
    const cases: Array<[Record<string, string>, string]> = [
      [{ method: 'userrecaptcha', pageurl: 'https://e.com' }, 'ERROR_GOOGLEKEY'],
      [{ method: 'userrecaptcha', googlekey: '6Le-wvkSAAAA' }, 'ERROR_PAGEURL'],
      [{ method: 'turnstile', pageurl: 'https://e.com' }, 'ERROR_SITEKEY'],
      [{ method: 'hcaptcha', sitekey: 'a5f74b19-9e45' }, 'ERROR_PAGEURL'],
      [{ method: 'geetest', gt: '81dc9bdb52d04dc2', pageurl: 'https://e.com' }, 'ERROR_BAD_PARAMETERS'],
      [{ method: 'funcaptcha', pageurl: 'https://e.com' }, 'ERROR_BAD_PARAMETERS'],
      [{ method: 'textcaptcha' }, 'ERROR_BAD_PARAMETERS'],
      [{ method: 'base64' }, 'ERROR_ZERO_CAPTCHA_FILESIZE'],
      [{ method: 'base64', body: Buffer.alloc(50).toString('base64') }, 'ERROR_ZERO_CAPTCHA_FILESIZE'],
      [{ method: 'base64', body: '!!not base64!!' }, 'ERROR_IMAGE_TYPE_NOT_SUPPORTED'],
      [{ method: 'no-such-method' }, 'ERROR_BAD_PARAMETERS'],
      [{}, 'ERROR_BAD_PARAMETERS'],
    ];
    for (const [params, code] of cases) {
      expect(await getJson(url, 'in.php', { key: KEY, ...params }), JSON.stringify(params)).toMatchObject({
        status: 0,
        request: code,
      });
    }
    expect(sim!.stats()).toMatchObject({ submissions: cases.length, accepted: 0, parameterRejections: cases.length });
  });

  it('answers unknown, malformed and missing ids and actions', async () => {
    const url = await start();
    expect(await getJson(url, 'res.php', { key: KEY, action: 'get', id: '12345' })).toMatchObject({
      status: 0,
      request: 'ERROR_WRONG_CAPTCHA_ID',
    });
    expect(await getJson(url, 'res.php', { key: KEY, action: 'get', id: '12ab' })).toMatchObject({
      status: 0,
      request: 'ERROR_WRONG_ID_FORMAT',
    });
    expect(await getJson(url, 'res.php', { key: KEY, action: 'get' })).toMatchObject({
      status: 0,
      request: 'ERROR_WRONG_CAPTCHA_ID',
    });
    expect(await getJson(url, 'res.php', { key: KEY })).toMatchObject({ status: 0, request: 'ERROR_EMPTY_ACTION' });
  });

  it('reports the balance and records reports once', async () => {
    const url = await start({ balance: 2.5, medianMs: 0 });
    expect(await getJson(url, 'res.php', { key: KEY, action: 'getbalance' })).toEqual({ status: 1, request: '2.5' });
    const { request: id } = await getJson(url, 'in.php', { key: KEY, ...RECAPTCHA });
    expect(await getJson(url, 'res.php', { key: KEY, action: 'reportbad', id: String(id) })).toEqual({
      status: 1,
      request: 'OK_REPORT_RECORDED',
    });
    expect(await getJson(url, 'res.php', { key: KEY, action: 'reportgood', id: String(id) })).toMatchObject({
      status: 0,
      request: 'ERROR_DUPLICATE_REPORT',
    });
    expect(sim!.stats()).toMatchObject({ reportBad: 1, reportGood: 0 });
  });
});

describe('plain-text mode', () => {
  it('answers OK|id, CAPCHA_NOT_READY, OK|answer, bare errors and a bare balance', async () => {
    const url = await start({ balance: 3 });
    const submitted = await getText(url, 'in.php', { key: KEY, ...RECAPTCHA });
    expect(submitted).toMatch(/^OK\|\d{11}$/);
    const id = submitted.slice(3);
    expect(await getText(url, 'res.php', { key: KEY, action: 'get', id })).toBe('CAPCHA_NOT_READY');
    now += 1_000;
    expect(await getText(url, 'res.php', { key: KEY, action: 'get', id })).toMatch(/^OK\|03AGdBq2/);
    expect(await getText(url, 'res.php', { key: KEY, action: 'get', id: '1' })).toBe('ERROR_WRONG_CAPTCHA_ID');
    expect(await getText(url, 'in.php', { key: KEY, method: 'userrecaptcha' })).toBe('ERROR_GOOGLEKEY');
    expect(Number(await getText(url, 'res.php', { key: KEY, action: 'getbalance' }))).toBeCloseTo(2.999, 9);
  });

  it('takes an urlencoded POST (turnstile) and answers a 0.-token', async () => {
    const url = await start({ medianMs: 0 });
    const response = await fetch(`${url}/in.php`, {
      method: 'POST',
      body: new URLSearchParams({
        key: KEY,
        method: 'turnstile',
        sitekey: '0x4AAAAAAAC3DHQFLr1GavRN',
        pageurl: 'https://example.com',
      }),
    });
    const submitted = await response.text();
    expect(submitted).toMatch(/^OK\|\d+$/);
    const answer = await getText(url, 'res.php', { key: KEY, action: 'get', id: submitted.slice(3) });
    expect(answer).toMatch(/^OK\|0\.[A-Za-z0-9_.-]{250,}$/);
  });

  it('takes multipart uploads: method=post with a file part, and base64 as a field', async () => {
    const url = await start({ medianMs: 0 });
    const upload = new FormData();
    upload.append('key', KEY);
    upload.append('method', 'post');
    upload.append('file', new Blob([IMAGE], { type: 'image/png' }), 'captcha.png');
    const posted = await (await fetch(`${url}/in.php`, { method: 'POST', body: upload })).text();
    expect(posted).toMatch(/^OK\|\d+$/);
    expect(await getText(url, 'res.php', { key: KEY, action: 'get', id: posted.slice(3) })).toMatch(
      /^OK\|[a-z0-9]{4,6}$/,
    );

    const asField = new FormData();
    asField.append('key', KEY);
    asField.append('method', 'base64');
    asField.append('json', '1');
    asField.append('body', IMAGE.toString('base64'));
    const json = (await (await fetch(`${url}/in.php`, { method: 'POST', body: asField })).json()) as { status: number };
    expect(json.status).toBe(1);
    // The same image uploaded and sent as base64 is the same work.
    expect(sim!.stats().duplicateSolves).toBe(1);

    const noFile = new FormData();
    noFile.append('key', KEY);
    noFile.append('method', 'post');
    expect(await (await fetch(`${url}/in.php`, { method: 'POST', body: noFile })).text()).toBe(
      'ERROR_ZERO_CAPTCHA_FILESIZE',
    );

    const wrongType = new FormData();
    wrongType.append('key', KEY);
    wrongType.append('method', 'post');
    wrongType.append('file', new Blob([IMAGE]), 'captcha.exe');
    expect(await (await fetch(`${url}/in.php`, { method: 'POST', body: wrongType })).text()).toBe(
      'ERROR_WRONG_FILE_EXTENSION',
    );

    const tooBig = new FormData();
    tooBig.append('key', KEY);
    tooBig.append('method', 'post');
    tooBig.append('file', new Blob([Buffer.alloc(200 * 1024, 1)]), 'captcha.jpg');
    expect(await (await fetch(`${url}/in.php`, { method: 'POST', body: tooBig })).text()).toBe(
      'ERROR_TOO_BIG_CAPTCHA_FILESIZE',
    );
  });

  it('answers many ids at once, in order, joined with |', async () => {
    const url = await start();
    const first = (await getText(url, 'in.php', { key: KEY, ...RECAPTCHA })).slice(3);
    now += 1_000;
    const second = (
      await getText(url, 'in.php', { key: KEY, ...RECAPTCHA, pageurl: 'https://example.com/other' })
    ).slice(3);
    const answer = await getText(url, 'res.php', { key: KEY, action: 'get', ids: `${first},${second},1` });
    const parts = answer.split('|');
    expect(parts).toHaveLength(3);
    expect(parts[0]).toMatch(/^03AGdBq2/);
    expect(parts.slice(1)).toEqual(['CAPCHA_NOT_READY', 'ERROR_WRONG_CAPTCHA_ID']);
  });
});

describe('threads, money and keys over HTTP', () => {
  it.each(['captchaai', '2captcha'] as const)(
    'rejects the submission at cap + 1 with the %s over-cap code',
    async (dialect) => {
      const url = await start({ dialect, planThreads: 2 });
      expect(await getText(url, 'in.php', { key: KEY, ...RECAPTCHA })).toMatch(/^OK\|/);
      expect(await getText(url, 'in.php', { key: KEY, ...RECAPTCHA })).toMatch(/^OK\|/);
      expect(await getText(url, 'in.php', { key: KEY, ...RECAPTCHA })).toBe(overCapCode(dialect));
      expect(sim!.stats()).toMatchObject({ accepted: 2, overCapRejections: 1, threadsInUse: 2, peakThreads: 2 });
    },
  );

  it('answers ERROR_KEY_DOES_NOT_EXIST to every request of a revoked key', async () => {
    const url = await start({ badKey: true });
    expect(await getText(url, 'in.php', { key: KEY, ...RECAPTCHA })).toBe('ERROR_KEY_DOES_NOT_EXIST');
    expect(await getText(url, 'res.php', { key: KEY, action: 'getbalance' })).toBe('ERROR_KEY_DOES_NOT_EXIST');
    expect(await getJson(url, 'res.php', { key: KEY, action: 'get', id: '1' })).toMatchObject({
      status: 0,
      request: 'ERROR_KEY_DOES_NOT_EXIST',
    });
    sim!.update({ badKey: false });
    expect(await getText(url, 'in.php', { key: KEY, ...RECAPTCHA })).toMatch(/^OK\|/);
  });

  it('accepts only listed keys, and a missing key is ERROR_WRONG_USER_KEY', async () => {
    const url = await start({ validKeys: [KEY] });
    expect(await getText(url, 'in.php', { key: 'b'.repeat(32), ...RECAPTCHA })).toBe('ERROR_KEY_DOES_NOT_EXIST');
    expect(await getText(url, 'in.php', { ...RECAPTCHA })).toBe('ERROR_WRONG_USER_KEY');
    expect(await getText(url, 'in.php', { key: KEY, ...RECAPTCHA })).toMatch(/^OK\|/);
    expect(sim!.stats()).toMatchObject({
      keyRejections: 2,
      errorsByCode: { ERROR_KEY_DOES_NOT_EXIST: 1, ERROR_WRONG_USER_KEY: 1 },
    });
  });

  it('bans an IP after repeated wrong keys, even for a good key', async () => {
    const url = await start({ validKeys: [KEY], banAfterBadKeyRequests: 3, ipBanMs: 60_000 });
    for (let i = 0; i < 3; i++)
      expect(await getText(url, 'res.php', { key: 'b'.repeat(32), action: 'getbalance' })).toBe(
        'ERROR_KEY_DOES_NOT_EXIST',
      );
    expect(await getText(url, 'res.php', { key: KEY, action: 'getbalance' })).toBe('IP_BANNED');
    now += 60_000;
    expect(Number(await getText(url, 'res.php', { key: KEY, action: 'getbalance' }))).toBe(10);
  });
});

describe('transient failures over HTTP', () => {
  it('shows each kind as a client sees it: an error code, an HTTP 500, an HTML page', async () => {
    const url = await start({ transientErrorRate: 1, transientKinds: ['error_code'] });
    expect(await getJson(url, 'res.php', { key: KEY, action: 'getbalance' })).toMatchObject({
      status: 0,
      request: 'ERROR_SERVER_ERROR',
    });
    sim!.update({ transientKinds: ['http_500'] });
    const failed = await get(url, 'in.php', { key: KEY, ...RECAPTCHA, json: '1' });
    expect(failed.status).toBe(500);
    sim!.update({ transientKinds: ['html'] });
    const html = await get(url, 'in.php', { key: KEY, ...RECAPTCHA, json: '1' });
    expect(html.headers.get('content-type')).toMatch(/text\/html/);
    await expect(html.json()).rejects.toThrow();
    expect(sim!.stats()).toMatchObject({
      accepted: 0,
      transientErrors: 3,
      errorsByCode: { ERROR_SERVER_ERROR: 1, HTTP_500: 1, HTML_PAGE: 1 },
    });
  });
});

describe('outage windows over HTTP', () => {
  it('answers in.php and res.php with a 503 and plain text inside a window while /stats keeps answering', async () => {
    const url = await start({ outages: [{ startMs: 0, durationMs: 60_000 }] });
    const submitted = await get(url, 'in.php', { key: KEY, ...RECAPTCHA, json: '1' });
    const balance = await get(url, 'res.php', { key: KEY, action: 'getbalance', json: '1' });
    for (const response of [submitted, balance]) {
      expect(response.status).toBe(503);
      expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await response.text()).toBe('Service Unavailable');
    }
    const stats = await fetch(`${url}/stats`);
    expect(stats.status).toBe(200);
    expect(await stats.json()).toMatchObject({ outageAnswers: 2, inOutage: true, submissions: 1, accepted: 0 });
  });
});

describe('GET /stats', () => {
  it('returns the counters as JSON, including the wait of a ready answer until it was read', async () => {
    const url = await start();
    const id = (await getText(url, 'in.php', { key: KEY, ...RECAPTCHA })).slice(3);
    await getText(url, 'res.php', { key: KEY, action: 'get', id });
    now += 1_500; // ready at +1000, read at +1500: the answer waited 500 ms
    await getText(url, 'res.php', { key: KEY, action: 'get', id });
    await getText(url, 'res.php', { key: KEY, action: 'get', id });
    const response = await fetch(`${url}/stats`);
    expect(response.headers.get('content-type')).toBe('application/json');
    const stats = (await response.json()) as Record<string, unknown>;
    expect(stats).toEqual(sim!.stats());
    expect(stats).toMatchObject({
      submissions: 1,
      accepted: 1,
      solved: 1,
      threadsInUse: 0,
      resultRequests: 3,
      notReadyAnswers: 1,
      answersDelivered: 1,
      meanAnswerWaitMs: 500,
      answerReadsPerTask: 2,
      pollsPerTask: 3,
      balanceStart: 10,
      balance: 9.999,
      spent: 0.001,
    });
  });

  it('sends a CORS header when the client asks with header_acao=1', async () => {
    const url = await start();
    const response = await get(url, 'res.php', { key: KEY, action: 'getbalance', header_acao: '1' });
    expect(response.headers.get('access-control-allow-origin')).toBe('*');
  });
});
