/**
 * Stack configuration: context parsing, one error listing every problem, initial ceilings.
 * No synthesis here: the stack validates before it creates anything.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { App, Lazy, Stack, Token } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { CaptchaFleet } from '../../lib/captcha-fleet.js';
import { ENV, parseEnvironment } from '../../functions/core/environment.js';
import { ConfigError, MAPPING_MIN_CONCURRENCY, PLAN_THREADS, resolveSettings } from '../../functions/core/settings.js';
import { fleetOptionsFromContext, initialCeilings, resolveFleetStackConfig } from '../../lib/config.js';
import { CaptchaFleetStack } from '../../lib/fleet-stack.js';
import { removeOutdir, ROOT } from './synth-helpers.js';

const fromContext = (context: Record<string, unknown>) => fleetOptionsFromContext((key) => context[key]);

function problemsOf(run: () => unknown): ConfigError['problems'] {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('context', () => {
  it('converts -c strings to numbers and booleans, and keeps string settings as strings', () => {
    const options = fromContext({
      planThreads: '50',
      tasksPerInvocation: '2',
      haltBalance: '2.5',
      eventsIncludeAnswer: 'true',
      prefix: 'fleet-a',
      reserveConsumerConcurrency: 'false',
    });
    expect(options).toEqual({
      planThreads: 50,
      tasksPerInvocation: 2,
      haltBalance: 2.5,
      eventsIncludeAnswer: true,
      prefix: 'fleet-a',
      reserveConsumerConcurrency: false,
    });
  });

  it('accepts a plan name for planThreads', () => {
    const config = resolveFleetStackConfig(fromContext({ planThreads: 'advance' }));
    expect(config.settings.planThreads).toBe(PLAN_THREADS.advance);
  });
});

describe('overflow from context', () => {
  const block = { baseUrl: 'https://2captcha.com', capUsdPerHour: 2, capUsdPerDay: 20, priceHintUsd: 0.003 };

  it("parses -c overflow='{…}' (JSON text) into the fleet’s overflow block", () => {
    // Act
    const config = resolveFleetStackConfig(fromContext({ overflow: JSON.stringify(block), prefix: 'shop' }));
    // Assess
    expect(config.settings.overflow).toMatchObject({ ...block, functionName: 'shop-consumer-overflow' });
    expect(config.fleetConfig.overflow).toMatchObject(block);
  });

  it('takes an object from cdk.json as it is', () => {
    const options = fromContext({ overflow: block });
    expect(options.overflow).toEqual(block);
    expect(resolveFleetStackConfig(options).settings.overflow).toMatchObject(block);
  });

  it('leaves overflow off when the context has none', () => {
    const options = fromContext({ planThreads: '50' });
    expect(options).not.toHaveProperty('overflow');
    expect(resolveFleetStackConfig(options).settings.overflow).toBeUndefined();
  });

  it('refuses text that is not JSON, naming overflow and how to write it, with the other problems', () => {
    // Act
    const problems = problemsOf(() =>
      resolveFleetStackConfig(fromContext({ overflow: 'baseUrl=https://2captcha.com', alarmEmail: 'nobody' })),
    );
    // Assess
    expect(problems.map((p) => p.field).sort()).toEqual(['alarmEmail', 'overflow']);
    const overflow = problems.find((p) => p.field === 'overflow');
    expect(overflow?.problem).toMatch(/^is not a JSON object: /);
    expect(overflow?.fix).toContain('-c overflow=\'{"baseUrl":"https://2captcha.com"');
    expect(overflow?.fix).toContain('cdk.json');
  });

  it('refuses JSON text that is a string, not an object', () => {
    const problems = problemsOf(() => resolveFleetStackConfig(fromContext({ overflow: '"https://2captcha.com"' })));
    expect(problems).toEqual([
      expect.objectContaining({ field: 'overflow', problem: expect.stringContaining('JSON string') }),
    ]);
  });

  it('reports the block’s own problems by field from JSON text too', () => {
    const problems = problemsOf(() =>
      resolveFleetStackConfig(fromContext({ overflow: JSON.stringify({ ...block, capUsdPerHour: 50, colour: 1 }) })),
    );
    expect(problems.map((p) => p.field)).toEqual(['overflow']);
    expect(problems[0]?.fix).toContain('remove "colour"');
  });

  it('reaches the stack from props as well', () => {
    const config = resolveFleetStackConfig({ overflow: block });
    expect(config.settings.overflow?.capUsdPerDay).toBe(20);
  });
});

describe('validation', () => {
  it('lists every problem at once, the fleet’s and the stack’s, each with a fix', () => {
    const problems = problemsOf(
      () =>
        new CaptchaFleetStack(new App(), 'Invalid', {
          plan: 'gold',
          reservedThreads: 60,
          haltBalance: 0.05,
          pauseBalance: 0.5,
          solverBaseUrl: 'not a url',
          alarmEmail: 'ops-at-example',
          solverKeySecretName: 'arn:aws:secretsmanager:eu-west-1:123:secret:key with spaces',
          resultsRemoval: 'keep' as never,
        }),
    );
    const fields = problems.map((p) => p.field);
    expect(fields).toEqual(
      expect.arrayContaining(['plan', 'alarmEmail', 'solverKeySecretName', 'resultsRemoval', 'solverBaseUrl']),
    );
    for (const problem of problems) expect(problem.fix.length).toBeGreaterThan(0);
  });

  it('reports the cross-checks of the settings together with the stack’s own', () => {
    const problems = problemsOf(() =>
      resolveFleetStackConfig({
        planThreads: 10,
        reservedThreads: 2,
        maxConcurrency: 9,
        pauseBalance: 2,
        haltBalance: 1,
        alarmEmail: 'x',
      }),
    );
    expect(problems.map((p) => p.field).sort()).toEqual(['alarmEmail', 'maxConcurrency', 'pauseBalance']);
  });

  it('refuses a waiting fleet too small for two lanes at the mapping floor, naming the setting given, and says what would do', () => {
    // Before: filed under maxConcurrency, which the user never set.
    const problems = problemsOf(() => resolveFleetStackConfig({ planThreads: 3, solveMode: 'wait' }));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ field: 'planThreads' });
    expect(problems[0]?.fix).toContain('raise planThreads to at least 4');
    // The parked design runs that plan: the fix says so.
    expect(problems[0]?.fix).toContain("solveMode 'park'");
    expect(() => resolveFleetStackConfig({ planThreads: 4, solveMode: 'wait' })).not.toThrow();
    // A plan the parked design cannot run either (one thread) is not told to park.
    const [one] = problemsOf(() => resolveFleetStackConfig({ planThreads: 1, solveMode: 'wait' }));
    expect(one?.fix).not.toContain('solveMode');
  });

  it('takes a parked fleet of two or three usable threads (its leases hold them), as `npm start` runs it, and refuses one', () => {
    // Before: refused below 4 whatever the solve mode (the waiting design's two lanes × the
    // mapping floor), while the lab and `npm start` ran plans of 2 and 3.
    for (const props of [
      { planThreads: 2 },
      { planThreads: 3 },
      { planThreads: 5, reservedThreads: 3 },
      { planThreads: 10, maxConcurrency: 3 },
      { planThreads: 4, tasksPerInvocation: 2 },
    ]) {
      const { settings } = resolveFleetStackConfig(props);
      expect(settings.solveMode, JSON.stringify(props)).toBe('park');
      const ceilings = initialCeilings(settings);
      // Each mapping at least the floor (Lambda's minimum), the reservation their sum.
      expect(ceilings.normal).toBeGreaterThanOrEqual(MAPPING_MIN_CONCURRENCY);
      expect(ceilings.high).toBeGreaterThanOrEqual(MAPPING_MIN_CONCURRENCY);
    }
    const [problem] = problemsOf(() => resolveFleetStackConfig({ planThreads: 5, reservedThreads: 4 }));
    expect(problem).toMatchObject({
      field: 'reservedThreads',
      fix: 'lower reservedThreads to 3 or raise planThreads to at least 6',
    });
  });

  it('gives, for a fleet too small for its lanes, fixes that each pass when applied', () => {
    // Before: sized for one lane, "raise planThreads to at least 2" was refused next for 4, and
    // "lower reservedThreads to 8" and "lower tasksPerInvocation to 5" the same way.
    const waiting = { solveMode: 'wait' as const };
    const cases = [
      { planThreads: 1 },
      { planThreads: 2, ...waiting },
      { planThreads: 10, reservedThreads: 9 },
      { planThreads: 10, reservedThreads: 8, ...waiting },
      { planThreads: 10, tasksPerInvocation: 10 },
      { planThreads: 10, tasksPerInvocation: 5, ...waiting },
      { planThreads: 3, tasksPerInvocation: 2 },
      { planThreads: 3, tasksPerInvocation: 2, ...waiting },
      { planThreads: 5, reservedThreads: 4 },
    ];
    for (const props of cases) {
      const [problem] = problemsOf(() => resolveFleetStackConfig(props));
      const fixes = [...(problem?.fix ?? '').matchAll(/(?:lower|raise) (\w+) to (?:at least )?(\d+)/g)];
      expect(fixes.length, JSON.stringify(props)).toBeGreaterThan(0);
      for (const [, field, value] of fixes) {
        const fixed = { ...props, [field as string]: Number(value) };
        expect(
          () => resolveFleetStackConfig(fixed),
          `${JSON.stringify(props)} → ${JSON.stringify(fixed)}`,
        ).not.toThrow();
      }
    }
  });

  it('ends `cdk synth` with one message that lists every problem, and no stack trace', () => {
    const outdir = mkdtempSync(join(tmpdir(), 'captcha-fleet-cdk-'));
    const result = spawnSync(process.execPath, ['--import', 'tsx', 'bin/app.ts'], {
      cwd: ROOT,
      encoding: 'utf8',
      env: {
        ...process.env,
        CDK_OUTDIR: outdir,
        CDK_CONTEXT_JSON: JSON.stringify({ planThreads: 'gold', alarmEmail: 'nobody', tasksPerInvocation: '0' }),
      },
      timeout: 60_000,
    });
    removeOutdir(outdir);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('Invalid captcha-fleet configuration (3 problems)');
    for (const field of ['plan', 'alarmEmail', 'tasksPerInvocation']) expect(result.stderr).toContain(`- ${field}:`);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });
});

describe('props an embedder may get wrong from JavaScript or CDK', () => {
  it('refuses a secret name that is a token, a reserve flag that is text, and takes null as no props', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const made = new Secret(new Stack(app, 'Keys'), 'Key');
    // Before: "${Token[…]}" is not a Secrets Manager secret name.
    expect(problemsOf(() => resolveFleetStackConfig({ solverKeySecretName: made.secretName }))).toEqual([
      expect.objectContaining({ field: 'solverKeySecretName', problem: expect.stringContaining('is a token') }),
    ]);
    // Before: 'false' (text) counted as true and reserved the lanes' concurrency.
    const text = { reserveConsumerConcurrency: 'false' } as unknown as { reserveConsumerConcurrency: boolean };
    expect(problemsOf(() => resolveFleetStackConfig(text))).toEqual([
      expect.objectContaining({ field: 'reserveConsumerConcurrency', problem: '"false" is not true or false' }),
    ]);
    const stack = new Stack(app, 'Shop');
    expect(() => new CaptchaFleet(stack, 'Captcha', null as unknown as Record<string, never>)).not.toThrow();
  });

  it('refuses props that are no object, a plan that is no name, an object setting given as its text, and one key for both lanes', () => {
    // Before: `plan: 5` threw "plan.toLowerCase is not a function"; 42 or a Map was a default
    // 50-thread fleet; a string read as props "0, 1, 2"; the overflow block as JSON text read "the
    // text is a JSON string" with the -c advice; solverPricesUsd's problem showed overflow's
    // example; both lanes on one secret were accepted.
    const block = { baseUrl: 'https://2captcha.com', capUsdPerHour: 2, capUsdPerDay: 20, priceHintUsd: 0.003 };
    for (const props of [42, 'abc', new Map([['planThreads', 3]]), [1]]) {
      const problems = problemsOf(() => resolveFleetStackConfig(props as never));
      expect(problems, String(props)).toEqual([
        expect.objectContaining({ field: '(props)', problem: expect.stringContaining('is not an object of props') }),
      ]);
    }
    // An instance of the caller's own class holding the props as its fields is props.
    class Props {
      readonly planThreads = 20;
    }
    expect(resolveFleetStackConfig(new Props()).settings.planThreads).toBe(20);
    expect(problemsOf(() => resolveFleetStackConfig({ plan: 5 } as never))).toEqual([
      expect.objectContaining({ field: 'plan', problem: '5 is not a plan name' }),
    ]);
    expect(resolveFleetStackConfig({ alarmEmail: null } as never).alarmEmail).toBeUndefined();
    const asText = problemsOf(() => resolveFleetStackConfig({ overflow: JSON.stringify(block) } as never));
    expect(asText).toEqual([
      expect.objectContaining({
        field: 'overflow',
        problem: expect.stringContaining('the construct takes the object itself'),
      }),
    ]);
    const prices = problemsOf(() => resolveFleetStackConfig(fromContext({ solverPricesUsd: '{turnstile:0.00145}' })));
    expect(prices[0]?.fix).toContain("-c solverPricesUsd='{");
    expect(prices[0]?.fix).not.toContain('overflow');
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const key = new Secret(new Stack(app, 'Keys'), 'Key');
    expect(
      problemsOf(() => resolveFleetStackConfig({ overflow: block, solverKeySecret: key, overflowKeySecret: key })),
    ).toEqual([
      expect.objectContaining({ field: 'overflowKeySecret', problem: expect.stringContaining("the plan's own key") }),
    ]);
    expect(
      problemsOf(() =>
        resolveFleetStackConfig({ solverKeySecretName: 'team/k', overflow: { ...block, keySecretName: 'team/k' } }),
      ),
    ).toEqual([expect.objectContaining({ field: 'overflow.keySecretName' })]);
  });

  it('refuses a setting that is a token as one, naming the setting (a member of the overflow block too)', () => {
    // Before: "planThreads: Too small: expected int to be >=-9007199254740991" (a number token's
    // value), and a prefix token failed the name pattern with "see the configuration reference".
    const threads = Token.asNumber(Lazy.number({ produce: () => 20 }));
    const name = Token.asString(Lazy.string({ produce: () => 'shop' }));
    const overflow = { baseUrl: 'https://2captcha.com', capUsdPerHour: threads, capUsdPerDay: 20, priceHintUsd: 0.003 };
    for (const [props, field] of [
      [{ planThreads: threads }, 'planThreads'],
      [{ prefix: name }, 'prefix'],
      [{ tickMs: threads }, 'tickMs'],
      [{ overflow }, 'overflow.capUsdPerHour'],
    ] as const) {
      expect(problemsOf(() => resolveFleetStackConfig(props))).toEqual([
        {
          field,
          problem: expect.stringContaining('is a token, a value known only at deploy'),
          fix: `give ${field} as a literal value (read it in your app before the construct, e.g. from context or the environment)`,
        },
      ]);
    }
    // An alarm address read at deploy is SNS's to check.
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const stack = new Stack(app, 'Shop');
    new CaptchaFleet(stack, 'Captcha', {
      alarmEmail: Token.asString(Lazy.string({ produce: () => 'ops@example.com' })),
    });
    Template.fromStack(stack).hasResourceProperties('AWS::SNS::Subscription', {
      Protocol: 'email',
      Endpoint: 'ops@example.com',
    });
  });

  it('names the fleet whose configuration is wrong, in an app of several', () => {
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    new CaptchaFleet(new Stack(app, 'Shop'), 'Captcha', { prefix: 'shop' });
    const staging = new Stack(app, 'Staging');
    let thrown: unknown;
    try {
      new CaptchaFleet(staging, 'Captcha', { prefix: 'staging', planThreads: 0 });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as ConfigError).where).toBe('Staging/Captcha');
    expect((thrown as Error).message).toMatch(
      /^Invalid captcha-fleet configuration of Staging\/Captcha \(1 problem\):\n {2}- planThreads:/,
    );
  });
});

describe('initial ceilings', () => {
  it('give each lane at least the mapping floor and together never exceed the usable threads', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 4, max: 5000 }),
        fc.integer({ min: 0, max: 200 }),
        fc.integer({ min: 1, max: 10 }),
        (planThreads, reserved, batch) => {
          fc.pre(planThreads - reserved >= 2 * MAPPING_MIN_CONCURRENCY * batch);
          // A plan one mapping's 1 000 invocations cannot fill is refused (settings.test.ts).
          fc.pre(planThreads - reserved <= 1_000 * batch);
          const settings = resolveSettings({ planThreads, reservedThreads: reserved, tasksPerInvocation: batch });
          const ceilings = initialCeilings(settings);
          expect(ceilings.high).toBeGreaterThanOrEqual(MAPPING_MIN_CONCURRENCY);
          expect(ceilings.normal).toBeGreaterThanOrEqual(MAPPING_MIN_CONCURRENCY);
          expect(ceilings.normal + ceilings.high).toBeLessThanOrEqual(settings.maxConcurrency);
          expect((ceilings.normal + ceilings.high) * batch).toBeLessThanOrEqual(settings.effectiveCap);
        },
      ),
    );
  });
});

describe('solverBaseUrl: https except on loopback (the key travels in res.php’s query string)', () => {
  it('refuses http:// to a remote solver at synth, naming the problem and the fix', () => {
    // Act
    const problems = problemsOf(() => resolveFleetStackConfig({ solverBaseUrl: 'http://ocr.captchaai.com' }));
    // Assess
    expect(problems).toEqual([
      expect.objectContaining({
        field: 'solverBaseUrl',
        problem: expect.stringMatching(
          /http:\/\/ocr\.captchaai\.com is not https:\/\/ .*key would travel in the clear/,
        ),
        fix: expect.stringContaining('https://ocr.captchaai.com'),
      }),
    ]);
  });

  it('refuses credentials in the URL, which the template and the environment would keep in plain text', () => {
    const problems = problemsOf(() => resolveFleetStackConfig({ solverBaseUrl: 'https://user:pw@solver.example/api' }));
    expect(problems).toEqual([
      expect.objectContaining({ field: 'solverBaseUrl', problem: expect.stringContaining('carries credentials') }),
    ]);
    expect(JSON.stringify(problems)).not.toContain('pw@');
  });

  it('refuses it at cold start too, with the same message', () => {
    // Prepare
    const env = {
      [ENV.config]: JSON.stringify({ solverBaseUrl: 'http://10.0.0.5:8080' }),
      [ENV.normalQueueUrl]: 'http://127.0.0.1:1/q',
      [ENV.dlqUrl]: 'http://127.0.0.1:1/dlq',
      [ENV.resultsTable]: 'results',
      [ENV.solverKeySecretArn]: 'arn:aws:secretsmanager:us-east-1:1:secret:k',
    };
    // Act
    const problems = problemsOf(() => parseEnvironment(env));
    // Assess
    expect(problems.map((p) => p.field)).toEqual(['solverBaseUrl']);
    expect(problems[0]?.fix).toContain('https://10.0.0.5:8080');
  });

  it.each([
    'http://127.0.0.1:4100',
    'http://127.8.9.10',
    'http://localhost:4100',
    'http://[::1]:4100',
    'https://ocr.captchaai.com',
  ])('accepts %s', (url) => {
    expect(resolveSettings({ solverBaseUrl: url }).solverBaseUrl).toBe(url);
  });

  it.each(['http://128.0.0.1', 'http://localhost.example.com', 'http://127.0.0.1.nip.io', 'ftp://127.0.0.1'])(
    'refuses %s',
    (url) => {
      expect(problemsOf(() => resolveSettings({ solverBaseUrl: url })).map((p) => p.field)).toEqual(['solverBaseUrl']);
    },
  );
});
