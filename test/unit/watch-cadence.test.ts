/**
 * How often the governor's watch may ask the solver about one parked submission: never faster
 * than the JSON task API's providers allow (CapMonster Cloud refuses faster than every 2 s;
 * CapSolver says retry in 3 s and keeps a result for 120 queries at most), and as the built
 * governor and the local runtime wire it.
 */
import { describe, expect, it } from 'vitest';
import { DIALECT_PROTOCOLS, DIALECTS, pollGapMs, SINGLE_POLL_GAP_MS } from '../../functions/core/solver-protocol.js';
import { watchCadence } from '../../functions/governor/wiring.js';
import { localPollGapMs } from '../../local/poll-schedule-local.js';

/** A provider that stops answering a task after this many result queries (CapSolver, CapMonster Cloud). */
const QUERIES_PER_TASK = 120;
/** How long CapSolver keeps a task's result to be asked for, ms. */
const RESULT_KEPT_MS = 5 * 60_000;

describe('the gap between two result requests for one submission', () => {
  it.each(DIALECTS.filter((d) => DIALECT_PROTOCOLS[d].includes('create-task')))(
    '%s over the JSON task API: at least 2 s, and a submission asked fewer than 120 times while its result is kept',
    (dialect) => {
      const gap = pollGapMs('create-task', dialect);
      expect(gap).toBeGreaterThanOrEqual(2_000);
      expect(Math.ceil(RESULT_KEPT_MS / gap) + 1).toBeLessThan(QUERIES_PER_TASK);
    },
  );

  it('is CapSolver’s 3 s and 2captcha’s 5 s', () => {
    expect(SINGLE_POLL_GAP_MS.capsolver).toBe(3_000);
    expect(SINGLE_POLL_GAP_MS['2captcha']).toBe(5_000);
  });

  it.each(DIALECTS.filter((d) => DIALECT_PROTOCOLS[d].includes('res-php')))(
    '%s over res.php: none (100 ids to a bulk request; the request rate is bounded instead)',
    (dialect) => {
      expect(pollGapMs('res-php', dialect)).toBe(0);
    },
  );
});

describe("the governor's watch as wired", () => {
  it('asks each CapSolver submission at most every 3 s, and res.php ids every round', () => {
    expect(watchCadence({ solverProtocol: 'create-task', dialect: 'capsolver' }).pollGapMs).toBe(3_000);
    expect(watchCadence({ solverProtocol: 'create-task', dialect: '2captcha' }).pollGapMs).toBe(5_000);
    expect(watchCadence({ solverProtocol: 'res-php', dialect: 'captchaai' }).pollGapMs).toBe(0);
  });

  it("keeps its round cadence: res.php's at 100 ms however many are parked, the JSON API's one request per id at 500 ms at most", () => {
    const { pollMs } = watchCadence({ solverProtocol: 'res-php', dialect: 'captchaai' });
    expect(pollMs(50)).toBe(100);
    // 100 bulk requests a round, 1 000 a second: one per parked submission per 5 s, the providers' polling.
    expect(pollMs(10_000)).toBe(100);
    const json = watchCadence({ solverProtocol: 'create-task', dialect: 'capsolver' });
    expect(json.pollMs(1)).toBe(100);
    expect(json.pollMs(2)).toBe(200);
    expect(json.pollMs(10_000)).toBe(500);
  });
});

describe('the local runtime’s gap', () => {
  it('is the provider’s, scaled like the protocol’s schedule to the simulator’s median (a 20 s token median is 1:1)', () => {
    expect(localPollGapMs(3_000, 20_000)).toBe(3_000);
    expect(localPollGapMs(5_000, 300)).toBe(75);
    expect(localPollGapMs(3_000, 1)).toBe(10);
  });

  it('is unscaled when the simulator has real-world per-method times, and none stays none', () => {
    expect(localPollGapMs(3_000, undefined)).toBe(3_000);
    expect(localPollGapMs(0, 300)).toBe(0);
  });
});
