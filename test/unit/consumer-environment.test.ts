/**
 * The consumer's environment per provider: the overflow consumer holds the overflow block and the
 * overflow key and never the primary key; everything else holds the primary key as before.
 */
import { describe, expect, it } from 'vitest';
import { solverFromEnvironment } from '../../functions/adapters/solver-from-environment.js';
import { ENV, parseEnvironment } from '../../functions/core/environment.js';
import { ConfigError, type ConfigProblem } from '../../functions/core/settings.js';

const PRIMARY_KEY = 'primary-key-0123456789abcdef0123';
const OVERFLOW_KEY = 'overflow-key-fedcba9876543210fed';
const OVERFLOW_ARN = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:captcha-fleet/overflow-key-AbCdEf';
const PRIMARY_ARN = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:captcha-fleet/solver-key-AbCdEf';

const overflowBlock = {
  baseUrl: 'https://overflow.example.com',
  capUsdPerHour: 2,
  capUsdPerDay: 20,
  priceHintUsd: 0.003,
};
const base = {
  [ENV.normalQueueUrl]: 'http://127.0.0.1:1/q',
  [ENV.dlqUrl]: 'http://127.0.0.1:1/dlq',
  [ENV.resultsTable]: 'results',
};

function problemsOf(run: () => unknown): ConfigProblem[] {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('environment of the overflow consumer (SOLVER_PROVIDER=overflow)', () => {
  it('parses without a primary key: the overflow key is its only key', () => {
    // Act
    const environment = parseEnvironment({
      ...base,
      [ENV.config]: JSON.stringify({ overflow: overflowBlock }),
      [ENV.solverProvider]: 'overflow',
      [ENV.overflowKey]: OVERFLOW_KEY,
    });
    // Assess
    expect(environment.provider).toBe('overflow');
    expect(environment.overflowKeySource).toEqual({ key: OVERFLOW_KEY });
    expect(environment.solverKeySource).toBeUndefined();
    expect(environment.settings.overflow?.baseUrl).toBe(overflowBlock.baseUrl);
  });

  it('takes the overflow key from its secret in AWS', () => {
    const environment = parseEnvironment({
      ...base,
      [ENV.config]: JSON.stringify({ overflow: overflowBlock }),
      [ENV.solverProvider]: 'overflow',
      [ENV.overflowKeySecretArn]: OVERFLOW_ARN,
    });
    expect(environment.overflowKeySource).toEqual({ secretArn: OVERFLOW_ARN });
  });

  it('refuses a configuration without the overflow block, naming the variable and the fix', () => {
    // Act
    const problems = problemsOf(() =>
      parseEnvironment({ ...base, [ENV.solverProvider]: 'overflow', [ENV.overflowKey]: OVERFLOW_KEY }),
    );
    // Assess
    expect(problems).toEqual([
      {
        field: ENV.solverProvider,
        problem: expect.stringContaining('no overflow block'),
        fix: expect.stringContaining('add the overflow block'),
      },
    ]);
  });

  it('refuses a missing overflow key, naming both ways to set it', () => {
    const problems = problemsOf(() =>
      parseEnvironment({
        ...base,
        [ENV.config]: JSON.stringify({ overflow: overflowBlock }),
        [ENV.solverProvider]: 'overflow',
      }),
    );
    expect(problems).toEqual([
      {
        field: ENV.overflowKeySecretArn,
        problem: expect.stringContaining('no key for the overflow provider'),
        fix: `set ${ENV.overflowKeySecretArn} (AWS) or ${ENV.overflowKey} (local)`,
      },
    ]);
  });

  it('lists every problem at once: no overflow block and no overflow key', () => {
    const problems = problemsOf(() => parseEnvironment({ ...base, [ENV.solverProvider]: 'overflow' }));
    expect(problems.map((p) => p.field)).toEqual([ENV.solverProvider, ENV.overflowKeySecretArn]);
  });

  it.each([
    [ENV.solverKey, PRIMARY_KEY],
    [ENV.solverKeySecretArn, PRIMARY_ARN],
  ])('refuses the primary key in its environment (%s), without quoting it', (variable, value) => {
    // Act
    let message = '';
    const problems = problemsOf(() => {
      try {
        return parseEnvironment({
          ...base,
          [ENV.config]: JSON.stringify({ overflow: overflowBlock }),
          [ENV.solverProvider]: 'overflow',
          [ENV.overflowKey]: OVERFLOW_KEY,
          [variable]: value,
        });
      } catch (error) {
        message = (error as Error).message;
        throw error;
      }
    });
    // Assess
    expect(problems).toEqual([
      { field: variable, problem: expect.stringContaining('only the overflow provider key'), fix: expect.any(String) },
    ]);
    expect(message).not.toContain(PRIMARY_KEY);
    expect(message).not.toContain(OVERFLOW_KEY);
  });

  it('cannot build a primary solver: the primary is asked for, and there is no key for it', () => {
    // Prepare
    const environment = parseEnvironment({
      ...base,
      [ENV.config]: JSON.stringify({ overflow: overflowBlock }),
      [ENV.solverProvider]: 'overflow',
      [ENV.overflowKey]: OVERFLOW_KEY,
    });
    // Act
    const problems = problemsOf(() => solverFromEnvironment(environment, 'us-east-1', undefined, undefined, 'primary'));
    // Assess
    expect(problems.map((p) => p.field)).toEqual([ENV.solverKeySecretArn]);
  });
});

describe('environment of the primary consumer and the governor', () => {
  it('still requires the primary key', () => {
    const problems = problemsOf(() => parseEnvironment(base));
    expect(problems).toEqual([
      expect.objectContaining({
        field: ENV.solverKeySecretArn,
        problem: `set ${ENV.solverKeySecretArn} (AWS) or ${ENV.solverKey} (local)`,
      }),
    ]);
  });

  it('keeps both keys where both are set (the governor reads both balances)', () => {
    // Act
    const environment = parseEnvironment({
      ...base,
      [ENV.config]: JSON.stringify({ overflow: overflowBlock }),
      [ENV.solverKeySecretArn]: PRIMARY_ARN,
      [ENV.overflowKeySecretArn]: OVERFLOW_ARN,
    });
    // Assess
    expect(environment.provider).toBe('primary');
    expect(environment.solverKeySource).toEqual({ secretArn: PRIMARY_ARN });
    expect(environment.overflowKeySource).toEqual({ secretArn: OVERFLOW_ARN });
    expect(() => solverFromEnvironment(environment, 'us-east-1', undefined, undefined, 'overflow')).not.toThrow();
    expect(() => solverFromEnvironment(environment, 'us-east-1')).not.toThrow();
  });
});
