/**
 * The simulator's JSON task API (local/solver-sim/json-api.ts through the model, no HTTP): each
 * dialect's ids, statuses, error bodies and codes, the thread cap and the balance shared with
 * res.php, report windows and refunds. A hand-stepped clock, no sleeping.
 */
import { describe, expect, it } from 'vitest';
import type { Dialect } from '../../functions/core/solver-protocol.js';
import { SolverSimModel, type SimResponse } from '../../local/solver-sim/model.js';

const KEY = '00112233445566778899aabbccddeeff';
const RECAPTCHA = {
  type: 'RecaptchaV2TaskProxyless',
  websiteURL: 'https://a.example/',
  websiteKey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-',
};

function model(dialect: Dialect, options: ConstructorParameters<typeof SolverSimModel>[0] = {}) {
  let now = 1_700_000_000_000;
  const sim = new SolverSimModel({ dialect, seed: 3, medianMs: 1000, latencyScale: 1, clock: () => now, ...options });
  const call = (jsonMethod: string, body: Record<string, unknown> = {}, ip = '127.0.0.1') => {
    const response = sim.handle({ endpoint: 'json', jsonMethod, body: { clientKey: KEY, ...body }, fields: {}, ip });
    return { ...response, json: JSON.parse(response.body) as Record<string, unknown> } as SimResponse & {
      json: Record<string, unknown>;
    };
  };
  return { sim, call, advance: (ms: number) => (now += ms) };
}

describe('simulator, JSON task API', () => {
  it('issues numeric task ids (CapSolver: UUIDs it alone can read back), processing then ready with cost and times', () => {
    const { call, advance } = model('anti-captcha', { pricePerSolve: 0.0007 });
    const created = call('createTask', { task: RECAPTCHA });
    expect(created.json).toEqual({ errorId: 0, taskId: expect.any(Number) });
    expect(call('getTaskResult', { taskId: created.json.taskId }).json).toEqual({ errorId: 0, status: 'processing' });
    advance(60_000);
    expect(call('getTaskResult', { taskId: created.json.taskId }).json).toMatchObject({
      errorId: 0,
      status: 'ready',
      solution: { gRecaptchaResponse: expect.stringMatching(/^03AGdBq2/) },
      cost: '0.000700',
      solveCount: 1,
      createTime: expect.any(Number),
      endTime: expect.any(Number),
    });

    const capsolver = model('capsolver');
    const id = capsolver.call('createTask', { task: { ...RECAPTCHA, type: 'ReCaptchaV2TaskProxyLess' } }).json
      .taskId as string;
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-a[0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(capsolver.call('getTaskResult', { taskId: id }).json).toEqual({
      errorId: 0,
      taskId: id,
      status: 'processing',
    });
    const forged = `00000000-0000-4000-a000-${id.slice(-12)}`;
    const unknown = capsolver.call('getTaskResult', { taskId: forged });
    expect(unknown.status).toBe(400);
    expect(unknown.json).toMatchObject({ errorId: 1, errorCode: 'ERROR_TASKID_INVALID' });
  });

  it.each(['anti-captcha', 'capsolver'] as const)(
    'names the paid submissions of a task paid twice by the ids it issued (%s), as the consumers learned them',
    (dialect) => {
      // The run's summary matches them against the ids a crash lost: a CapSolver UUID read as its
      // number matched none, and every crash-explained second payment read as a defect.
      const { sim, call } = model(dialect);
      const task = { ...RECAPTCHA, type: dialect === 'capsolver' ? 'ReCaptchaV2TaskProxyLess' : RECAPTCHA.type };
      const ids = [call('createTask', { task }).json.taskId, call('createTask', { task }).json.taskId];
      expect([...sim.paidSubmissions().values()].map((paid) => paid.map((p) => p.id))).toEqual([ids.map(String)]);
    },
  );

  it.each([
    [
      '2captcha',
      { task: { type: 'RecaptchaV2TaskProxyless', websiteURL: 'https://a.example/' } },
      'ERROR_BAD_PARAMETERS',
      110,
    ],
    [
      'anti-captcha',
      { task: { type: 'RecaptchaV2Task', websiteURL: 'https://a.example/', websiteKey: 'k' } },
      'ERROR_INCORRECT_SESSION_DATA',
      24,
    ],
    ['anti-captcha', { task: { type: 'DataDomeSliderTask' } }, 'ERROR_TASK_NOT_SUPPORTED', 23],
    ['2captcha', {}, 'ERROR_TASK_ABSENT', 22],
    [
      'capmonster',
      { task: { type: 'CustomTask', class: 'Basilisk', websiteURL: 'x', userAgent: 'y', metadata: {} } },
      'ERROR_TASK_NOT_SUPPORTED',
      23,
    ],
    [
      'capsolver',
      { task: { type: 'HCaptchaTaskProxyless', websiteURL: 'x', websiteKey: 'y' } },
      'ERROR_TASK_NOT_SUPPORTED',
      1,
    ],
    ['2captcha', { task: { type: 'ImageToTextTask', body: 'aGVsbG8=' } }, 'ERROR_ZERO_CAPTCHA_FILESIZE', 3],
    // A type named like Object's own members: it threw (HTTP 500) where the service refuses the type.
    ['anti-captcha', { task: { type: 'constructor' } }, 'ERROR_TASK_NOT_SUPPORTED', 23],
    ['capmonster', { task: { type: 'toString' } }, 'ERROR_TASK_NOT_SUPPORTED', 23],
    ['capsolver', { task: { type: '__proto__' } }, 'ERROR_TASK_NOT_SUPPORTED', 1],
  ] as const)('%s refuses %j with %s (errorId %i)', (dialect, body, code, errorId) => {
    const { call, sim } = model(dialect);
    const answer = call('createTask', body);
    expect(answer.json).toMatchObject({ errorId, errorCode: code, errorDescription: expect.any(String) });
    expect(answer.status).toBe(dialect === 'capsolver' ? 400 : 200);
    expect(sim.stats()).toMatchObject({ accepted: 0, parameterRejections: 1 });
  });

  it("refuses a key in the body by the dialect's code (CapSolver: 401), an unknown method, and a banned IP", () => {
    const anti = model('anti-captcha', { banAfterBadKeyRequests: 2 });
    const badKey = anti.sim.handle({
      endpoint: 'json',
      jsonMethod: 'getBalance',
      body: { clientKey: 'short' },
      fields: {},
      ip: '10.0.0.9',
    });
    expect(JSON.parse(badKey.body)).toMatchObject({ errorId: 1, errorCode: 'ERROR_KEY_DOES_NOT_EXIST' });
    anti.sim.handle({ endpoint: 'json', jsonMethod: 'getBalance', body: {}, fields: {}, ip: '10.0.0.9' });
    expect(anti.call('getBalance', {}, '10.0.0.9').json).toMatchObject({ errorCode: 'ERROR_IP_BLOCKED' });
    expect(anti.call('getQueueStats').json).toMatchObject({ errorId: 14, errorCode: 'ERROR_NO_SUCH_METHOD' });
    // CapMonster's own code for the ban (its client reads Anti-Captcha's as an unknown error).
    const capmonster = model('capmonster', { banAfterBadKeyRequests: 1 });
    capmonster.sim.handle({ endpoint: 'json', jsonMethod: 'getBalance', body: {}, fields: {}, ip: '10.0.0.7' });
    expect(capmonster.call('getBalance', {}, '10.0.0.7').json).toMatchObject({ errorCode: 'ERROR_IP_BANNED' });
    const capsolver = model('capsolver', { badKey: true });
    const refused = capsolver.call('getBalance');
    expect(refused.status).toBe(401);
    expect(refused.json).toMatchObject({ errorCode: 'ERROR_KEY_DENIED_ACCESS' });
  });

  it('shares the thread cap and the balance with res.php: over cap at cap + 1, no funds, the balance', () => {
    const { call, sim } = model('2captcha', { planThreads: 2, balance: 0.0035, pricePerSolve: 0.001 });
    sim.handle({
      endpoint: 'in',
      fields: { key: KEY, method: 'userrecaptcha', googlekey: 'g'.repeat(40), pageurl: 'https://a.example/' },
      ip: 'x',
    });
    expect(call('createTask', { task: RECAPTCHA }).json).toMatchObject({ errorId: 0 });
    expect(call('createTask', { task: { ...RECAPTCHA, websiteURL: 'https://b.example/' } }).json).toMatchObject({
      errorId: 2,
      errorCode: 'ERROR_NO_SLOT_AVAILABLE',
    });
    sim.update({ planThreads: 10 });
    expect(call('createTask', { task: { ...RECAPTCHA, websiteURL: 'https://b.example/' } }).json).toMatchObject({
      errorId: 0,
    });
    expect(call('createTask', { task: { ...RECAPTCHA, websiteURL: 'https://c.example/' } }).json).toMatchObject({
      errorId: 10,
      errorCode: 'ERROR_ZERO_BALANCE',
    });
    expect(call('getBalance').json).toEqual({ errorId: 0, balance: 0.0035 });
    expect(
      model('capsolver', { planThreads: 0 }).call('createTask', {
        task: { ...RECAPTCHA, type: 'ReCaptchaV2TaskProxyLess' },
      }).json,
    ).toMatchObject({ errorCode: 'ERROR_RATE_LIMIT' });
  });

  it('refunds a bad report once, refuses a repeat and a report past the window, and counts them', () => {
    const { call, sim, advance } = model('anti-captcha', { pricePerSolve: 0.002, medianMs: 0 });
    const id = call('createTask', { task: RECAPTCHA }).json.taskId;
    call('getTaskResult', { taskId: id });
    expect(call('reportIncorrectImageCaptcha', { taskId: id }).json).toMatchObject({
      errorCode: 'ERROR_NO_SUCH_CAPCHA_ID',
    });
    expect(call('reportIncorrectRecaptcha', { taskId: id }).json).toEqual({ errorId: 0, status: 'success' });
    expect(call('reportIncorrectRecaptcha', { taskId: id }).json).toMatchObject({
      errorCode: 'ERROR_NO_SUCH_CAPCHA_ID',
    });
    const late = call('createTask', { task: { ...RECAPTCHA, websiteURL: 'https://late.example/' } }).json.taskId;
    advance(60_001);
    expect(call('reportCorrectRecaptcha', { taskId: late }).json).toMatchObject({
      errorCode: 'ERROR_NO_SUCH_CAPCHA_ID',
    });
    expect(sim.stats()).toMatchObject({
      reportBad: 1,
      refunds: 1,
      refundedUsd: 0.002,
      reportsRefused: 3,
      balance: 10 - 0.002,
    });
  });

  it.each([
    ['anti-captcha', 'ERROR_NO_SUCH_CAPCHA_ID'],
    ['capmonster', 'ERROR_NO_SUCH_CAPCHA_ID'],
  ] as const)("forgets a %s task's result 5 minutes after its upload, as the provider does", (dialect, code) => {
    // Before, every dialect answered for an hour: a slow poll or a takeover found an answer the
    // provider no longer has (both providers' clients: "only within 5 minutes of uploading").
    const { call, advance } = model(dialect);
    const type = dialect === 'capmonster' ? 'RecaptchaV2Task' : RECAPTCHA.type;
    const id = call('createTask', { task: { ...RECAPTCHA, type } }).json.taskId;
    expect(id).toEqual(expect.any(Number));
    advance(299_000);
    expect(call('getTaskResult', { taskId: id }).json).toMatchObject({ errorId: 0, status: 'ready' });
    advance(2_000);
    expect(call('getTaskResult', { taskId: id }).json).toMatchObject({ errorCode: code });
  });

  it("refuses 2captcha's report on a task solved over 15 minutes before, as the service does", () => {
    // Before, a report was taken (and a bad one refunded) for as long as the task was remembered: an hour.
    const { sim, advance } = model('2captcha', { medianMs: 0, pricePerSolve: 0.001 });
    const res = (fields: Record<string, string>) =>
      sim.handle({ endpoint: 'res', fields: { key: KEY, json: '1', ...fields }, ip: '127.0.0.1' }).body;
    const submit = (pageurl: string) =>
      JSON.parse(
        sim.handle({
          endpoint: 'in',
          fields: { key: KEY, json: '1', method: 'userrecaptcha', googlekey: RECAPTCHA.websiteKey, pageurl },
          ip: '127.0.0.1',
        }).body,
      ).request as number;
    const early = submit('https://early.example/');
    const late = submit('https://late.example/');
    advance(60_000);
    res({ action: 'get', id: String(early) });
    res({ action: 'get', id: String(late) });
    expect(JSON.parse(res({ action: 'reportbad', id: String(early) }))).toEqual({
      status: 1,
      request: 'OK_REPORT_RECORDED',
    });
    advance(15 * 60_000);
    expect(JSON.parse(res({ action: 'reportbad', id: String(late) }))).toMatchObject({ status: 0 });
    expect(sim.stats()).toMatchObject({ reportBad: 1, refunds: 1, reportsRefused: 1 });
  });

  it("answers CapSolver's image task in the createTask response once it is solved", () => {
    const { call, advance } = model('capsolver', { medianMs: 500 });
    const held = call('createTask', {
      task: { type: 'ImageToTextTask', body: Buffer.alloc(300, 1).toString('base64') },
    });
    expect(held.holdUntil).toBeGreaterThan(0);
    advance(60_000);
    const answer = JSON.parse(held.complete?.().body ?? '{}');
    expect(answer).toMatchObject({
      errorId: 0,
      status: 'ready',
      solution: { text: expect.stringMatching(/^[a-z0-9]{4,6}$/) },
    });
  });

  it('fails passing faults the way each API does: CapSolver a code, the others an HTTP 500', () => {
    const capsolver = model('capsolver', { transientErrorRate: 1, transientKinds: ['error_code'] });
    expect(capsolver.call('getBalance').json).toMatchObject({ errorCode: 'ERROR_SERVICE_UNAVALIABLE' });
    const twoCaptcha = model('2captcha', { transientErrorRate: 1, transientKinds: ['error_code'] });
    expect(
      twoCaptcha.sim.handle({
        endpoint: 'json',
        jsonMethod: 'getBalance',
        body: { clientKey: KEY },
        fields: {},
        ip: 'x',
      }).status,
    ).toBe(500);
    const down = model('2captcha', { outages: [{ startMs: 0, durationMs: 10_000 }] });
    expect(
      down.sim.handle({ endpoint: 'json', jsonMethod: 'getBalance', body: { clientKey: KEY }, fields: {}, ip: 'x' })
        .status,
    ).toBe(503);
  });
});

describe("simulator, CapSolver's held answers cut in an outage", () => {
  const IMAGE = { type: 'ImageToTextTask', body: Buffer.alloc(300, 1).toString('base64') };

  it('names a task whose answer an outage held until after its client closed the request, and no other', () => {
    // Prepare: the service goes down 100 ms after the start for 5 s; recognitions take about 500 ms.
    const { sim, call } = model('capsolver', { medianMs: 500, outages: [{ startMs: 100, durationMs: 5_000 }] });
    const stretched = call('createTask', { task: IMAGE });
    // Act: the client gives up on the held answer (its request closed), and on none other.
    stretched.undelivered?.();
    // Assess: paid, the id never reached the client: named by the id createTask would have answered.
    expect(stretched.holdUntil).toBeGreaterThan(1_700_000_000_000 + 5_100);
    expect(sim.answersCutInOutages()).toEqual(new Set([String(stretched.json.taskId)]));
  });

  it('does not name a task found unsolvable (not paid), though an outage held its answer past the request', () => {
    const { sim, call, advance } = model('capsolver', {
      medianMs: 500,
      unsolvableRate: 1,
      outages: [{ startMs: 100, durationMs: 5_000 }],
    });
    const held = call('createTask', { task: IMAGE });
    held.undelivered?.();
    advance(60_000);
    expect(sim.stats().unsolvable).toBe(1);
    expect(sim.answersCutInOutages().size).toBe(0);
  });

  it('does not name an answer no outage held (a recognition longer than the client waited is no outage)', () => {
    const { sim, call } = model('capsolver', { medianMs: 500 });
    const held = call('createTask', { task: IMAGE });
    held.undelivered?.();
    expect(held.undelivered).toBeTypeOf('function');
    expect(sim.answersCutInOutages().size).toBe(0);
  });
});
