import { describe, expect, it } from 'vitest';
import { ConfigError, resolveSettings } from '../../functions/core/settings.js';

describe('fleet settings', () => {
  it('derives timings per AWS guidance for Lambda consumers', () => {
    const settings = resolveSettings({ solveDeadlineSeconds: 180 });
    expect(settings.functionTimeoutSeconds).toBeGreaterThan(180);
    expect(settings.visibilityTimeoutSeconds).toBe(6 * settings.functionTimeoutSeconds);
    expect(settings.leaseSeconds).toBeGreaterThan(settings.functionTimeoutSeconds);
    expect(settings.maxReceiveCount).toBeGreaterThanOrEqual(5);
  });

  it('follows the plan: ceiling × tasks per invocation never exceeds the usable threads', () => {
    for (const [planThreads, reservedThreads, tasksPerInvocation] of [
      [50, 0, 1],
      [50, 5, 3],
      [8, 0, 1],
      [7, 1, 2],
    ] as const) {
      const settings = resolveSettings({ planThreads, reservedThreads, tasksPerInvocation });
      expect(settings.effectiveCap).toBe(planThreads - reservedThreads);
      expect(settings.maxConcurrency * tasksPerInvocation).toBeLessThanOrEqual(settings.effectiveCap);
    }
  });

  it('names every resource from the prefix', () => {
    const settings = resolveSettings({ prefix: 'shop-fleet' });
    expect(settings.queueNames).toEqual({
      normal: 'shop-fleet-tasks',
      high: 'shop-fleet-tasks-high',
      dlq: 'shop-fleet-tasks-dlq',
      reports: 'shop-fleet-reports',
      reportsDlq: 'shop-fleet-reports-dlq',
    });
    expect(settings.tableNames.results).toBe('shop-fleet-results');
  });

  it('lists every problem at once, each with its fix', () => {
    let error: unknown;
    try {
      resolveSettings({ planThreads: 10, maxConcurrency: 40, minConcurrency: 12, pauseBalance: 5, haltBalance: 1 });
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    const problems = (error as ConfigError).problems.map((p) => p.field);
    expect(problems).toEqual(expect.arrayContaining(['maxConcurrency', 'minConcurrency', 'pauseBalance']));
    expect((error as ConfigError).message).toMatch(/3 problems/);
    expect((error as ConfigError).message).toContain('Fix:');
  });

  it('refuses a batch size the plan cannot carry at the mapping floor of 2', () => {
    expect(() => resolveSettings({ planThreads: 5, tasksPerInvocation: 3 })).toThrow(/tasksPerInvocation.*floor of 2/s);
  });

  it('refuses a plan under the mapping floor by naming the plan, not the batch that is already one task', () => {
    const problemsOf = (input: Parameters<typeof resolveSettings>[0]) => {
      try {
        resolveSettings(input);
      } catch (error) {
        return (error as ConfigError).problems;
      }
      throw new Error('accepted');
    };
    expect(problemsOf({ planThreads: 1 })).toEqual([
      expect.objectContaining({ field: 'planThreads', fix: 'raise planThreads to at least 2' }),
    ]);
    expect(problemsOf({ planThreads: 3, reservedThreads: 2 })).toEqual([
      expect.objectContaining({
        field: 'reservedThreads',
        fix: 'lower reservedThreads to 1 or raise planThreads to at least 4',
      }),
    ]);
    for (const problem of [...problemsOf({ planThreads: 1 }), ...problemsOf({ planThreads: 3, reservedThreads: 2 })])
      expect(problem.fix).not.toContain('tasksPerInvocation');
  });

  it('refuses a plan one mapping cannot fill: past 1 000 invocations × the batch, paid threads never used', () => {
    // Before: accepted, and a 1 500-thread plan ran 1 000 threads with 150 000 tasks waiting.
    const problem = (input: Parameters<typeof resolveSettings>[0]) => {
      try {
        resolveSettings(input);
      } catch (error) {
        return (error as ConfigError).problems.find((p) => p.field === 'tasksPerInvocation');
      }
      return undefined;
    };
    expect(problem({ planThreads: 1500 })).toMatchObject({
      problem: expect.stringContaining('500 paid threads would never be used'),
      fix: 'set tasksPerInvocation to 2 (or raise reservedThreads to 500 to leave the rest to other users of the key)',
    });
    expect(problem({ planThreads: 10_000, tasksPerInvocation: 9 })?.fix).toMatch(
      /tasksPerInvocation to 10 .*reservedThreads to 1000/,
    );
    expect(problem({ planThreads: 1500, tasksPerInvocation: 2 })).toBeUndefined();
    expect(problem({ planThreads: 1500, reservedThreads: 500 })).toBeUndefined();
    expect(problem({ planThreads: 1000 })).toBeUndefined();
  });

  it('refuses schema violations with the field named', () => {
    expect(() => resolveSettings({ planThreads: 0 } as never)).toThrow(/planThreads/);
    expect(() => resolveSettings({ dialect: 'anticaptcha' } as never)).toThrow(/dialect.*captchaai, 2captcha/s);
  });

  it('refuses a visibility timeout shorter than the function timeout', () => {
    expect(() => resolveSettings({ solveDeadlineSeconds: 30 }, { visibilityTimeoutSeconds: 10 })).toThrow(/visibility/);
  });
});
