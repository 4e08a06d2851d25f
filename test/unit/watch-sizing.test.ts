/**
 * The parked governor's memory follows the CPU its watch needs (functions/core/watch-sizing.ts):
 * Lambda's CPU follows memory, and the watch's polls and records grow with the plan.
 */
import { describe, expect, it } from 'vitest';
import { FUNCTION_SIZING, LAMBDA_MB_PER_VCPU } from '../../functions/core/function-sizing.js';
import {
  governorCpuWarning,
  parkedGovernorSizing,
  WATCH_CPU,
  watchCpuNeed,
  watchRequestsPerSecond,
} from '../../functions/core/watch-sizing.js';

const resPhp = (planThreads: number) => ({ planThreads, solverProtocol: 'res-php', dialect: 'captchaai' }) as const;
const createTask = (planThreads: number) =>
  ({ planThreads, solverProtocol: 'create-task', dialect: 'anti-captcha' }) as const;

describe('the parked governor’s memory', () => {
  it('stays at the functions’ 256 MB for the plans the shipped traces run (50 threads)', () => {
    expect(parkedGovernorSizing(resPhp(50))).toEqual(FUNCTION_SIZING.governor);
    expect(parkedGovernorSizing(resPhp(5)).memoryMb).toBe(FUNCTION_SIZING.governor.memoryMb);
  });

  it('leaves the watch at most its share of the CPU on a full plan, whatever the plan and protocol, up to Lambda’s largest memory', () => {
    for (const fleet of [resPhp, createTask])
      for (let planThreads = 1; planThreads <= 2_000; planThreads += 7) {
        const sizing = parkedGovernorSizing(fleet(planThreads));
        const vcpu = sizing.memoryMb / LAMBDA_MB_PER_VCPU;
        const share = watchCpuNeed(fleet(planThreads)) / vcpu;
        // Only past Lambda's 10 240 MB, where no more CPU can be had, and then the stack warns.
        if (share > WATCH_CPU.share + 1e-9) {
          expect(sizing.memoryMb).toBe(10_240);
          expect(governorCpuWarning(fleet(planThreads))).toContain(`${planThreads} threads`);
        } else expect(governorCpuWarning(fleet(planThreads))).toBeUndefined();
        expect(sizing.memoryMb % 64).toBe(0);
        expect(sizing.architecture).toBe(FUNCTION_SIZING.governor.architecture);
      }
  });

  it('grows with the plan: a 600-thread plan gets several times the 50-thread one, never past Lambda’s 10 240 MB', () => {
    const sizes = [50, 100, 200, 600, 1_000, 10_000].map((threads) => parkedGovernorSizing(resPhp(threads)).memoryMb);
    for (let i = 1; i < sizes.length; i++) expect(sizes[i]).toBeGreaterThanOrEqual(sizes[i - 1] as number);
    expect(sizes[3]).toBeGreaterThan(4 * (sizes[0] as number));
    expect(sizes.at(-1)).toBe(10_240);
  });

  it('counts the JSON task API’s one request per id against res.php’s hundred ids a request', () => {
    expect(watchRequestsPerSecond(600, createTask(600))).toBeGreaterThan(watchRequestsPerSecond(600, resPhp(600)));
    expect(parkedGovernorSizing(createTask(600)).memoryMb).toBeGreaterThan(parkedGovernorSizing(resPhp(600)).memoryMb);
    // res.php: a round every 100 ms of one request per 100 ids.
    expect(watchRequestsPerSecond(1_000, resPhp(1_000))).toBeCloseTo(100, 6);
    expect(watchRequestsPerSecond(0, resPhp(0))).toBe(0);
  });

  it('takes governorMemoryMb as it is, and warns when it leaves the watch more than its share', () => {
    expect(parkedGovernorSizing({ ...resPhp(1_000), governorMemoryMb: 512 }).memoryMb).toBe(512);
    expect(governorCpuWarning({ ...resPhp(1_000), governorMemoryMb: 512 })).toMatch(/governorMemoryMb/);
    expect(governorCpuWarning(resPhp(1_000))).toBeUndefined();
    expect(governorCpuWarning({ ...resPhp(50), governorMemoryMb: 256 })).toBeUndefined();
    // A plan no one Lambda can watch at its share: 10 000 threads of res.php.
    expect(governorCpuWarning(resPhp(10_000))).toMatch(/10000 threads/);
  });
});
