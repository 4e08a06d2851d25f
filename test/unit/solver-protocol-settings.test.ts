/**
 * The solver protocol settings (functions/core/settings.ts): solverProtocol, solverSoftId and
 * solverPricesUsd for the plan, and the overflow block's own, checked against the dialect.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, resolveSettings } from '../../functions/core/settings.js';
import { DIALECT_PROTOCOLS, DIALECTS, speaks } from '../../functions/core/solver-protocol.js';

const problemsOf = (input: Parameters<typeof resolveSettings>[0]) => {
  try {
    resolveSettings(input);
    return [];
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    return error.problems;
  }
};
const overflow = { baseUrl: 'https://api.2captcha.com', capUsdPerHour: 1, capUsdPerDay: 10, priceHintUsd: 0.003 };

describe('solver protocol settings', () => {
  it('defaults to in.php / res.php with no developer id and no prices', () => {
    const settings = resolveSettings({});
    expect(settings).toMatchObject({ solverProtocol: 'res-php', dialect: 'captchaai' });
    expect(settings.solverSoftId).toBeUndefined();
    expect(settings.solverPricesUsd).toBeUndefined();
  });

  it('takes every dialect with every protocol it speaks, and refuses the others naming the fix', () => {
    for (const dialect of DIALECTS)
      for (const protocol of ['res-php', 'create-task'] as const) {
        const problems = problemsOf({ dialect, solverProtocol: protocol, solverBaseUrl: 'https://api.example' });
        if (speaks(dialect, protocol)) expect(problems, `${dialect} ${protocol}`).toEqual([]);
        else {
          expect(problems).toHaveLength(1);
          expect(problems[0]).toMatchObject({ field: 'solverProtocol' });
          expect(problems[0]?.fix).toContain(DIALECT_PROTOCOLS[dialect].join(' or '));
        }
      }
  });

  it("checks the overflow provider's protocol and developer id on their own", () => {
    expect(problemsOf({ overflow: { ...overflow, dialect: 'capsolver' } })).toEqual([
      expect.objectContaining({ field: 'overflow.solverProtocol' }),
    ]);
    const settings = resolveSettings({
      overflow: {
        ...overflow,
        dialect: 'capsolver',
        solverProtocol: 'create-task',
        softId: 'FC3D8005-4358-4E90-8835-0B0456FFE2FA',
        pricesUsd: { turnstile: 0.0012 },
      },
    });
    expect(settings.overflow).toMatchObject({
      solverProtocol: 'create-task',
      softId: 'FC3D8005-4358-4E90-8835-0B0456FFE2FA',
      pricesUsd: { turnstile: 0.0012 },
    });
  });

  it("takes a developer id in the dialect's form only (digits; CapSolver a UUID), and per-method prices", () => {
    expect(
      problemsOf({ dialect: '2captcha', solverSoftId: '4580', solverPricesUsd: { userrecaptcha: 0.00299 } }),
    ).toEqual([]);
    expect(problemsOf({ dialect: '2captcha', solverSoftId: 'abc-def' })).toEqual([
      expect.objectContaining({ field: 'solverSoftId' }),
    ]);
    expect(problemsOf({ dialect: 'capsolver', solverProtocol: 'create-task', solverSoftId: '4580' })).toEqual([
      expect.objectContaining({ field: 'solverSoftId' }),
    ]);
    expect(problemsOf({ solverPricesUsd: { nosuchmethod: 1 } as never }).length).toBeGreaterThan(0);
    expect(problemsOf({ solverPricesUsd: { base64: 11 } }).length).toBeGreaterThan(0);
  });
});
