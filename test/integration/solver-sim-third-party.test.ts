/**
 * An unmodified third-party 2captcha client (@2captcha/captcha-solver) solves tasks against the
 * simulator: proof that the simulator speaks the protocol real clients expect, not just the one
 * our own client speaks.
 *
 * The library hard-codes https://2captcha.com and reads the endpoints through the `in` and `res`
 * getters of its Solver class on every call (typed `private`, so there is no constructor option).
 * We shadow those two getters on our one instance with own properties pointing at the simulator:
 * the library's code runs as published, only the URL it is handed differs. Its polling interval is
 * a constructor argument, so polls come every 50 ms instead of 5 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { APIError, Solver } from '@2captcha/captcha-solver';
import { createSolverSimulator, type SolverSimulator } from '../../local/solver-sim/index.js';

const KEY = '0123456789abcdef0123456789abcdef';
const POLL_MS = 50;

let sim: SolverSimulator;
let baseUrl: string;

/** A library Solver whose requests go to the simulator instead of 2captcha.com. */
function solverAgainstSimulator(): Solver {
  const solver = new Solver(KEY, POLL_MS);
  Object.defineProperty(solver, 'in', { get: () => `${baseUrl}/in.php` });
  Object.defineProperty(solver, 'res', { get: () => `${baseUrl}/res.php` });
  return solver;
}

beforeAll(async () => {
  sim = createSolverSimulator({ dialect: '2captcha', seed: 11, medianMs: 150, balance: 5, pricePerSolve: 0.001 });
  ({ url: baseUrl } = await sim.listen());
});

afterAll(async () => {
  await sim.close();
});

describe('@2captcha/captcha-solver against the simulator', () => {
  it('would talk to 2captcha.com unless pointed elsewhere (the seam we use is the one it reads)', () => {
    const untouched = new Solver(KEY, POLL_MS) as unknown as { in: string; res: string };
    expect(untouched.in).toBe('https://2captcha.com/in.php');
    expect(untouched.res).toBe('https://2captcha.com/res.php');
  });

  it('solves reCAPTCHA, Turnstile and an image, reads the balance and reports a bad answer', async () => {
    const solver = solverAgainstSimulator();

    const recaptcha = await solver.recaptcha({
      googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-',
      pageurl: 'https://example.com/login',
    });
    expect(recaptcha.data).toMatch(/^03AGdBq2[A-Za-z0-9_-]{480,}$/);
    expect(String(recaptcha.id)).toMatch(/^\d{11}$/);

    const turnstile = await solver.cloudflareTurnstile({
      sitekey: '0x4AAAAAAAC3DHQFLr1GavRN',
      pageurl: 'https://example.com/form',
    });
    expect(turnstile.data).toMatch(/^0\./);

    // imageCaptcha sends a JSON POST body.
    const image = await solver.imageCaptcha({
      body: Buffer.alloc(400, 3).toString('base64'),
      numeric: 1,
      min_len: 4,
      max_len: 4,
    });
    expect(image.data).toMatch(/^\d{4}$/);

    const stats = sim.stats();
    expect(stats).toMatchObject({ accepted: 3, solved: 3, threadsInUse: 0, duplicateSolves: 0 });
    expect(stats.resultRequests).toBeGreaterThanOrEqual(3);
    expect(await solver.balance()).toBeCloseTo(stats.balance, 9);
    expect(stats.balance).toBeCloseTo(5 - 3 * 0.001, 9);

    expect(await solver.badReport(String(recaptcha.id))).toBe('OK_REPORT_RECORDED');
    expect(sim.stats().reportBad).toBe(1);
  });

  it('surfaces the service errors as the library APIError with the protocol code', async () => {
    const solver = solverAgainstSimulator();

    sim.update({ planThreads: 0 });
    const overCap = await solver
      .recaptcha({ googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://example.com/cap' })
      .catch((error: unknown) => error);
    expect(overCap).toBeInstanceOf(APIError);
    expect((overCap as APIError).err).toBe('ERROR_NO_SLOT_AVAILABLE');

    sim.update({ planThreads: 50, unsolvableRate: 1 });
    const unsolvable = await solver
      .recaptcha({ googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://example.com/hard' })
      .catch((error: unknown) => error);
    expect(unsolvable).toBeInstanceOf(APIError);
    expect((unsolvable as APIError).err).toBe('ERROR_CAPTCHA_UNSOLVABLE');

    sim.update({ unsolvableRate: 0, badKey: true });
    const revoked = await solver
      .recaptcha({ googlekey: '6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-', pageurl: 'https://example.com/key' })
      .catch((error: unknown) => error);
    expect((revoked as APIError).err).toBe('ERROR_KEY_DOES_NOT_EXIST');
    sim.update({ badKey: false });

    expect(sim.stats()).toMatchObject({ overCapRejections: 1, unsolvable: 1, keyRejections: 1 });
  });
});
