/**
 * Unmodified third-party clients of the JSON task API (createTask / getTaskResult / getBalance)
 * solve tasks against the simulator: proof that it speaks the protocol as real clients expect,
 * not only as our own client does.
 *
 * - `@zennolab_com/capmonstercloud-client` (CapMonster Cloud's official client) takes its
 *   service URL as a documented option (`ClientOptions.serviceUrl`); the simulator speaks the
 *   `capmonster` dialect.
 * - `anticaptcha` (a wrapper of Anti-Captcha's API) has `https://api.anti-captcha.com` built in;
 *   its HTTP library (axios through apisauce) honours the standard `HTTPS_PROXY` variable and then
 *   sends each request to the proxy in absolute form (`POST https://api.anti-captcha.com/createTask`),
 *   which the simulator reads by its path. Only the host is overridden, over plain HTTP on
 *   loopback; the library runs as published. The simulator speaks the `anti-captcha` dialect.
 */
import { createRequire } from 'node:module';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createSolverSimulator, type SolverSimulator } from '../../local/solver-sim/index.js';

const require = createRequire(import.meta.url);
// Both ship CommonJS; loaded as any consumer of the package would.
const capmonster = require('@zennolab_com/capmonstercloud-client') as CapMonsterModule;
const { AntiCaptcha, AntiCaptchaError } = require('anticaptcha') as AntiCaptchaModule;

const KEY = '0123456789abcdef0123456789abcdef';
const RECAPTCHA_KEY = '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-';
/** CapMonster's poll timing for a simulator answering in ~150 ms (its defaults are seconds). */
const FAST = { firstRequestDelay: 50, requestsInterval: 50, timeout: 10_000 };

describe('@zennolab_com/capmonstercloud-client against the simulator (capmonster dialect)', () => {
  let sim: SolverSimulator;
  let client: CapMonsterClient;

  beforeAll(async () => {
    sim = createSolverSimulator({ dialect: 'capmonster', seed: 21, medianMs: 150, balance: 5, pricePerSolve: 0.0006 });
    const { url } = await sim.listen();
    client = capmonster.CapMonsterCloudClientFactory.Create(
      new capmonster.ClientOptions({ clientKey: KEY, serviceUrl: url }),
    );
  });
  afterAll(async () => sim.close());

  it('reads the balance and solves reCAPTCHA v2, Turnstile, GeeTest v3 and v4, an image and DataDome', async () => {
    expect(await client.getBalance()).toMatchObject({ errorId: 0, balance: 5 });
    const recaptcha = await client.Solve(
      new capmonster.RecaptchaV2Request({ websiteURL: 'https://shop.example/login', websiteKey: RECAPTCHA_KEY }),
      FAST,
    );
    expect(recaptcha.solution?.gRecaptchaResponse).toMatch(/^03AGdBq2[A-Za-z0-9_-]{480,}$/);
    const turnstile = await client.Solve(
      new capmonster.TurnstileRequest({ websiteURL: 'https://shop.example/', websiteKey: '0x4AAAAAAAC3DHQFLr1GavRN' }),
      FAST,
    );
    expect(turnstile.solution?.token).toMatch(/^0\./);
    expect(turnstile.solution?.userAgent).toContain('Mozilla/5.0');
    const geetest = await client.Solve(
      new capmonster.GeeTestRequest({
        websiteURL: 'https://shop.example/',
        gt: '022397c99c9f646f6477822485f30404',
        challenge: '7f044f48bc951ecfbfc03842b5e1fe59',
      }),
      FAST,
    );
    expect(geetest.solution).toMatchObject({
      challenge: expect.stringMatching(/^7f044f48/),
      seccode: expect.stringMatching(/\|jordan$/),
    });
    const geetestV4 = await client.Solve(
      new capmonster.GeeTestRequest({
        websiteURL: 'https://shop.example/',
        gt: 'e392e1d7fd421dc63325744d5a2b9c73',
        version: 4,
        initParameters: { riskType: 'slide' },
      }),
      FAST,
    );
    expect(geetestV4.solution).toMatchObject({
      captcha_id: 'e392e1d7fd421dc63325744d5a2b9c73',
      lot_number: expect.any(String),
    });
    const image = await client.Solve(
      new capmonster.ImageToTextRequest({ body: Buffer.alloc(400, 7).toString('base64') }),
      FAST,
    );
    expect(image.solution?.text).toMatch(/^[a-z0-9]{4,6}$/);
    const datadome = await client.Solve(
      new capmonster.DataDomeRequest({
        websiteURL: 'https://shop.example/',
        userAgent: 'Mozilla/5.0 (X11; Linux x86_64)',
        // The client's MetadataCaptchaUrl type requires the page's datadome cookie beside the URL.
        metadata: {
          captchaUrl: 'https://geo.captcha-delivery.com/captcha/?initialCid=abc&cid=def',
          datadomeCookie: 'datadome=6BvxqELMoorFNoo7GT1',
        },
      }),
      FAST,
    );
    expect(JSON.stringify(datadome.solution)).toContain('"datadome"');
    expect(sim.stats()).toMatchObject({ accepted: 6, solved: 6, threadsInUse: 0, duplicateSolves: 0 });
    expect(await client.getBalance()).toMatchObject({ balance: expect.closeTo(5 - 6 * 0.0006, 9) });
  });

  it("gets over-cap, unsolvable and revoked-key answers as the client's error types", async () => {
    const task = () =>
      new capmonster.RecaptchaV2Request({ websiteURL: 'https://shop.example/x', websiteKey: RECAPTCHA_KEY });
    sim.update({ planThreads: 0 });
    expect((await client.Solve(task(), FAST)).error).toBe('NO_SLOT_AVAILABLE');
    sim.update({ planThreads: 50, unsolvableRate: 1 });
    expect((await client.Solve(task(), FAST)).error).toBe('CAPTCHA_UNSOLVABLE');
    sim.update({ unsolvableRate: 0, badKey: true });
    expect((await client.Solve(task(), FAST)).error).toBe('KEY_DOES_NOT_EXIST');
    sim.update({ badKey: false });
    expect(sim.stats()).toMatchObject({ overCapRejections: 1, unsolvable: 1, keyRejections: 1 });
  });
});

describe("anticaptcha (npm) against the simulator through its HTTP library's proxy setting (anti-captcha dialect)", () => {
  let sim: SolverSimulator;
  const saved = {
    HTTPS_PROXY: process.env.HTTPS_PROXY,
    https_proxy: process.env.https_proxy,
    NO_PROXY: process.env.NO_PROXY,
    no_proxy: process.env.no_proxy,
  };

  beforeAll(async () => {
    sim = createSolverSimulator({ dialect: 'anti-captcha', seed: 22, medianMs: 150, balance: 5, pricePerSolve: 0.002 });
    const { url } = await sim.listen();
    // Every request the library makes goes to the simulator, nowhere else.
    process.env.HTTPS_PROXY = url;
    process.env.https_proxy = url;
    delete process.env.NO_PROXY;
    delete process.env.no_proxy;
  });
  afterAll(async () => {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
    await sim.close();
  });
  afterEach(() => sim.update({ planThreads: 50, unsolvableRate: 0, badKey: false }));

  it('would talk to api.anti-captcha.com (the host the proxy setting overrides)', () => {
    const untouched = new AntiCaptcha(KEY) as unknown as { api: { getBaseURL(): string } };
    expect(untouched.api.getBaseURL()).toBe('https://api.anti-captcha.com');
  });

  it('reads the balance, solves reCAPTCHA v2, Turnstile and an image with their costs, and gets them counted', async () => {
    const client = new AntiCaptcha(KEY);
    expect(await client.getBalance()).toBe(5);
    const recaptchaId = await client.createTaskRecaptchaV2Proxyless('https://shop.example/login', RECAPTCHA_KEY);
    expect(recaptchaId).toBeGreaterThan(10_000_000_000);
    const recaptcha = await client.getTaskResult<{ gRecaptchaResponse: string }>(recaptchaId, 40, 50);
    expect(recaptcha).toMatchObject({ errorId: 0, status: 'ready', cost: '0.002000', solveCount: 1 });
    expect(recaptcha.solution.gRecaptchaResponse).toMatch(/^03AGdBq2/);

    const turnstileId = await client.createTask({
      type: 'TurnstileTaskProxyless',
      websiteURL: 'https://shop.example/',
      websiteKey: '0x4AAAAAAAC3DHQFLr1GavRN',
      action: 'login',
      cData: 'c-7',
      chlPageData: 'page-data',
    });
    const turnstile = await client.getTaskResult<{ token: string; userAgent: string }>(turnstileId, 40, 50);
    expect(turnstile.solution.token).toMatch(/^0\./);

    const imageId = await client.createTask({
      type: 'ImageToTextTask',
      body: Buffer.alloc(400, 9).toString('base64'),
      numeric: 1,
    });
    const image = await client.getTaskResult<{ text: string }>(imageId, 40, 50);
    expect(image.solution.text).toMatch(/^\d{4,6}$/);
    expect(sim.stats()).toMatchObject({ accepted: 3, solved: 3, duplicateSolves: 0 });
    expect(await client.getBalance()).toBeCloseTo(5 - 3 * 0.002, 9);
  });

  it('gets refused keys, over-cap and unsupported tasks as AntiCaptchaError with the protocol code', async () => {
    const refused = await new AntiCaptcha('f'.repeat(31)).getBalance().catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(AntiCaptchaError);
    expect((refused as { code: string }).code).toBe('ERROR_KEY_DOES_NOT_EXIST');

    const client = new AntiCaptcha(KEY);
    sim.update({ planThreads: 0 });
    const overCap = await client
      .createTask({ type: 'RecaptchaV2TaskProxyless', websiteURL: 'https://shop.example/', websiteKey: RECAPTCHA_KEY })
      .catch((error: unknown) => error);
    expect((overCap as { code: string }).code).toBe('ERROR_NO_SLOT_AVAILABLE');
    sim.update({ planThreads: 50 });
    // Anti-Captcha has no DataDome task type.
    const unsupported = await client
      .createTask({
        type: 'DataDomeSliderTask',
        websiteURL: 'https://shop.example/',
        captchaUrl: 'https://x.example/',
        userAgent: 'UA',
      })
      .catch((error: unknown) => error);
    expect((unsupported as { code: string }).code).toBe('ERROR_TASK_NOT_SUPPORTED');
  });

  it('gets an unsolvable task as AntiCaptchaError from getTaskResult', async () => {
    const client = new AntiCaptcha(KEY);
    sim.update({ unsolvableRate: 1 });
    const id = await client.createTask({ type: 'ImageToTextTask', body: Buffer.alloc(400, 11).toString('base64') });
    const unsolvable = await client.getTaskResult(id, 40, 50).catch((error: unknown) => error);
    expect((unsolvable as { code: string }).code).toBe('ERROR_CAPTCHA_UNSOLVABLE');
  });
});

/** The slice of CapMonster's client this test uses (the package ships its own types; these keep the test readable). */
interface CapMonsterClient {
  getBalance(): Promise<{ errorId: number; balance: number }>;
  Solve(task: unknown, timeouts?: typeof FAST): Promise<{ solution?: Record<string, string>; error?: string }>;
}
interface CapMonsterModule {
  CapMonsterCloudClientFactory: { Create(options: unknown): CapMonsterClient };
  ClientOptions: new (options: { clientKey: string; serviceUrl: string }) => unknown;
  RecaptchaV2Request: new (args: Record<string, unknown>) => unknown;
  TurnstileRequest: new (args: Record<string, unknown>) => unknown;
  GeeTestRequest: new (args: Record<string, unknown>) => unknown;
  ImageToTextRequest: new (args: Record<string, unknown>) => unknown;
  DataDomeRequest: new (args: Record<string, unknown>) => unknown;
}
interface AntiCaptchaModule {
  AntiCaptcha: new (
    key: string,
  ) => {
    getBalance(): Promise<number>;
    createTask(task: Record<string, unknown>): Promise<number>;
    createTaskRecaptchaV2Proxyless(websiteURL: string, websiteKey: string): Promise<number>;
    getTaskResult<T>(
      taskId: number,
      retry?: number,
      interval?: number,
    ): Promise<{ errorId: number; status: string; solution: T; cost?: string }>;
  };
  AntiCaptchaError: new (...args: never[]) => Error;
}
