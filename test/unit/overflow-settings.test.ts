/**
 * The overflow block of the fleet configuration (issue 12): off unless set; when set, every problem
 * is named with its field and a fix, at once, before anything is deployed or started.
 */
import { describe, expect, it } from 'vitest';
import {
  ConfigError,
  type ConfigProblem,
  type OverflowConfigInput,
  OverflowConfigSchema,
  resolveSettings,
} from '../../functions/core/settings.js';

const VALID: OverflowConfigInput = {
  baseUrl: 'https://2captcha.com',
  capUsdPerHour: 2,
  capUsdPerDay: 20,
  priceHintUsd: 0.003,
};

function problemsOf(overflow: unknown, fleet: Record<string, unknown> = {}): ConfigProblem[] {
  try {
    resolveSettings({ ...fleet, overflow } as never);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('overflow block: off unless set', () => {
  it('leaves settings.overflow undefined without a block', () => {
    expect(resolveSettings({}).overflow).toBeUndefined();
  });

  it('resolves a minimal block: defaults applied, the lane as wide as the fleet, its function named after the prefix', () => {
    // Act
    const settings = resolveSettings({ prefix: 'shop', planThreads: 20, overflow: VALID });
    // Assess
    expect(settings.overflow).toEqual({
      ...VALID,
      dialect: '2captcha',
      solverProtocol: 'res-php',
      latencyTargetSeconds: 30,
      probeCeiling: 2,
      minSolveSeconds: 5,
      haltBalance: 1,
      pauseBalance: 0.1,
      maxConcurrency: settings.maxConcurrency,
      functionName: 'shop-consumer-overflow',
    });
  });

  it('keeps an explicit maxConcurrency and key secret name', () => {
    const overflow = resolveSettings({ overflow: { ...VALID, maxConcurrency: 7, keySecretName: 'team/ovf' } }).overflow;
    expect(overflow).toMatchObject({ maxConcurrency: 7, keySecretName: 'team/ovf' });
  });
});

describe('overflow block: baseUrl is https, or http on loopback only (the key rides in res.php’s query)', () => {
  it.each(['https://2captcha.com', 'https://rucaptcha.com/api', 'http://127.0.0.1:4101', 'http://localhost:4101'])(
    'accepts %s',
    (baseUrl) => {
      expect(resolveSettings({ overflow: { ...VALID, baseUrl } }).overflow?.baseUrl).toBe(baseUrl);
    },
  );

  it('refuses http:// to a remote provider, naming overflow.baseUrl and the https URL to use', () => {
    expect(problemsOf({ ...VALID, baseUrl: 'http://2captcha.com' })).toEqual([
      {
        field: 'overflow.baseUrl',
        problem: expect.stringMatching(/^http:\/\/2captcha\.com is not https:\/\/ .*in the clear/),
        fix: 'use https://2captcha.com',
      },
    ]);
  });

  it("names an http:// provider alongside the block's other problems", () => {
    const problems = problemsOf({ baseUrl: 'http://2captcha.com', capUsdPerHour: 2 });

    expect(problems.map((p) => p.field).sort()).toEqual(
      ['overflow.baseUrl', 'overflow.capUsdPerDay', 'overflow.priceHintUsd'].sort(),
    );
    expect(problems.find((p) => p.field === 'overflow.baseUrl')?.fix).toBe('use https://2captcha.com');
  });

  it('refuses what is not a URL', () => {
    expect(problemsOf({ ...VALID, baseUrl: 'not a url' })).toEqual([
      expect.objectContaining({ field: 'overflow.baseUrl', fix: expect.stringContaining('https://2captcha.com') }),
    ]);
  });
});

describe('overflow block: the caps', () => {
  it.each([
    ['capUsdPerHour', 0],
    ['capUsdPerHour', -1],
    ['capUsdPerDay', 0],
    ['priceHintUsd', 0],
    ['priceHintUsd', 11],
  ])('refuses %s = %s, naming the field and what to give', (field, value) => {
    const problems = problemsOf({ ...VALID, [field]: value });
    expect(problems.map((p) => p.field)).toContain(`overflow.${field}`);
    const problem = problems.find((p) => p.field === `overflow.${field}`);
    expect(problem?.fix).toMatch(/USD/);
  });

  it('refuses an hourly cap above the daily cap: it would never bind', () => {
    expect(problemsOf({ ...VALID, capUsdPerHour: 30, capUsdPerDay: 20 })).toEqual([
      {
        field: 'overflow.capUsdPerHour',
        problem: 'the hourly cap $30 is above the daily cap $20, so it never binds',
        fix: 'set overflow.capUsdPerHour ≤ overflow.capUsdPerDay',
      },
    ]);
  });

  it('accepts an hourly cap equal to the daily cap', () => {
    expect(resolveSettings({ overflow: { ...VALID, capUsdPerHour: 20, capUsdPerDay: 20 } }).overflow).toBeDefined();
  });
});

describe('overflow block: the provider’s balance levels', () => {
  it('refuses pauseBalance above haltBalance: the lane would close before it stops growing', () => {
    expect(problemsOf({ ...VALID, haltBalance: 1, pauseBalance: 2 })).toEqual([
      expect.objectContaining({
        field: 'overflow.pauseBalance',
        fix: 'set overflow.pauseBalance ≤ overflow.haltBalance',
      }),
    ]);
  });

  it('does not mix them up with the fleet’s own levels', () => {
    // The fleet's pause ≤ halt holds; the block's does not: only the block is named.
    const problems = problemsOf({ ...VALID, haltBalance: 0.5, pauseBalance: 0.6 }, { haltBalance: 5, pauseBalance: 1 });
    expect(problems.map((p) => p.field)).toEqual(['overflow.pauseBalance']);
  });
});

describe('overflow block: shape', () => {
  it('refuses an unknown key (strict), naming it and the keys the block takes', () => {
    const problems = problemsOf({ ...VALID, capUsdPerHr: 2 });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ field: 'overflow', problem: expect.stringContaining('capUsdPerHr') });
    expect(problems[0]?.fix).toContain('remove "capUsdPerHr"');
    for (const key of Object.keys(OverflowConfigSchema.shape)) expect(problems[0]?.fix).toContain(key);
  });

  it('names every missing required field at once, each with its own fix', () => {
    // Act
    const problems = problemsOf({});
    // Assess
    expect(problems.map((p) => p.field).sort()).toEqual(
      ['overflow.baseUrl', 'overflow.capUsdPerDay', 'overflow.capUsdPerHour', 'overflow.priceHintUsd'].sort(),
    );
    const fixOf = (field: string) => problems.find((p) => p.field === field)?.fix ?? '';
    expect(fixOf('overflow.baseUrl')).toContain('https://2captcha.com');
    expect(fixOf('overflow.capUsdPerHour')).toMatch(/per UTC hour/);
    expect(fixOf('overflow.capUsdPerDay')).toMatch(/per UTC day/);
    expect(fixOf('overflow.priceHintUsd')).toMatch(/price per solve/);
  });

  it.each(['baseUrl', 'capUsdPerHour', 'capUsdPerDay', 'priceHintUsd'] as const)(
    'names %s alone when only it is missing',
    (field) => {
      const { [field]: _left, ...rest } = VALID;
      expect(problemsOf(rest).map((p) => p.field)).toEqual([`overflow.${field}`]);
    },
  );

  it('refuses an ARN for keySecretName: it takes the secret’s name', () => {
    const problems = problemsOf({ ...VALID, keySecretName: 'arn:aws:secretsmanager:eu-west-1:1:secret:k x' });
    expect(problems).toEqual([
      expect.objectContaining({ field: 'overflow.keySecretName', fix: expect.stringContaining('not the ARN') }),
    ]);
  });

  it('refuses a block that is not an object', () => {
    expect(problemsOf('https://2captcha.com')).toEqual([
      expect.objectContaining({ field: 'overflow', fix: expect.stringContaining('baseUrl, capUsdPerHour') }),
    ]);
  });

  it('refuses a probe ceiling wider than the lane', () => {
    expect(problemsOf({ ...VALID, maxConcurrency: 4, probeCeiling: 5 })).toEqual([
      { field: 'overflow.probeCeiling', problem: expect.any(String), fix: 'set overflow.probeCeiling ≤ 4' },
    ]);
  });

  it('lists the block’s problems with the fleet’s, in one error', () => {
    const problems = problemsOf(
      { ...VALID, baseUrl: 'http://2captcha.com', capUsdPerHour: 50 },
      { pauseBalance: 2, haltBalance: 1 },
    );
    expect(problems.map((p) => p.field).sort()).toEqual(['overflow.baseUrl', 'overflow.capUsdPerHour', 'pauseBalance']);
  });
});
