/**
 * A solver key's secret the app gives the construct (`solverKeySecret`, `overflowKeySecret`): a
 * Secret made in the app, or one its own code imports. Before, the construct took a secret by
 * literal name only and refused a token, so a team whose app creates the secret had to let the
 * fleet create a second one.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as kms from 'aws-cdk-lib/aws-kms';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { AwsSolutionsChecks } from 'cdk-nag';
import { afterAll, describe, expect, it } from 'vitest';
import { ENV } from '../../functions/core/environment.js';
import { ConfigError } from '../../functions/core/settings.js';
import { CaptchaFleet } from '../../lib/captcha-fleet.js';
import type { CaptchaFleetProps } from '../../lib/config.js';
import { removeOutdir } from './synth-helpers.js';
import { reportedViolations } from './template-helpers.js';

const OVERFLOW = { baseUrl: 'https://2captcha.com', capUsdPerHour: 1, capUsdPerDay: 5, priceHintUsd: 0.003 };
type Statement = { Action: string | string[]; Resource: unknown; Effect: string };

const outdirs: string[] = [];
afterAll(() => {
  for (const dir of outdirs) removeOutdir(dir);
});

/** An app with cdk-nag as the fleet's own app has it, and a stack `Shop` in it. */
function shopApp(env?: { account: string; region: string }) {
  const outdir = mkdtempSync(join(tmpdir(), 'captcha-fleet-given-secret-'));
  outdirs.push(outdir);
  const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return { app, outdir, stack: new Stack(app, 'Shop', env ? { env } : {}) };
}

/** The team's own key secret: encrypted with its own KMS key, its findings its own to answer. */
function teamSecret(stack: Stack, id = 'TeamKey') {
  const key = new kms.Key(stack, `${id}Cmk`, { enableKeyRotation: true });
  const secret = new Secret(stack, id, { encryptionKey: key });
  Validations.of(secret).acknowledge({ id: 'AwsSolutions-SMG4', reason: "the team's key, rotated at the vendor" });
  return { key, secret };
}

function functionEnv(template: Template, name: string): Record<string, unknown> {
  const [fn] = Object.values(template.findResources('AWS::Lambda::Function', { Properties: { FunctionName: name } }));
  return (fn as { Properties: { Environment: { Variables: Record<string, unknown> } } }).Properties.Environment
    .Variables;
}

/** The statements of the policies attached to the role of function `name`. */
function statementsOfFunction(template: Template, name: string): Statement[] {
  const [fn] = Object.values(template.findResources('AWS::Lambda::Function', { Properties: { FunctionName: name } }));
  const role = JSON.stringify((fn as { Properties: { Role: unknown } }).Properties.Role);
  const roleId = (JSON.parse(role) as { 'Fn::GetAtt': [string] })['Fn::GetAtt'][0];
  return Object.values(template.findResources('AWS::IAM::Policy'))
    .filter((p) => JSON.stringify(p.Properties.Roles).includes(roleId))
    .flatMap((p) => p.Properties.PolicyDocument.Statement as Statement[]);
}

const asArray = (value: string | string[]) => (Array.isArray(value) ? value : [value]);
const reads = (statements: Statement[]) =>
  statements.filter((st) => asArray(st.Action).includes('secretsmanager:GetSecretValue')).map((st) => st.Resource);

/** The role of function `name`, as the key policy names it. */
function roleArnOf(template: Template, name: string): unknown {
  const [fn] = Object.values(template.findResources('AWS::Lambda::Function', { Properties: { FunctionName: name } }));
  return (fn as { Properties: { Role: unknown } }).Properties.Role;
}

/** The principals the KMS key `keyId`'s policy lets decrypt. */
function decryptors(template: Template, keyId: string): unknown[] {
  const key = template.findResources('AWS::KMS::Key')[keyId] as {
    Properties: { KeyPolicy: { Statement: (Statement & { Principal: { AWS?: unknown } })[] } };
  };
  return key.Properties.KeyPolicy.Statement.filter((st) => asArray(st.Action).includes('kms:Decrypt')).map(
    (st) => st.Principal.AWS,
  );
}

describe('A solver key secret the app gives', () => {
  it('is the key the consumer, the governor and the reporter read; none is created; its KMS key decrypts for them; no finding', () => {
    // Prepare
    const { app, outdir, stack } = shopApp();
    const { key, secret } = teamSecret(stack);

    // Act
    new CaptchaFleet(stack, 'Captcha', { prefix: 'shop', planThreads: 20, solverKeySecret: secret });
    app.synth();

    // Assess
    const template = Template.fromStack(stack);
    expect(Object.keys(template.findResources('AWS::SecretsManager::Secret'))).toEqual([
      stack.getLogicalId(secret.node.defaultChild as never),
    ]);
    const secretRef = { Ref: stack.getLogicalId(secret.node.defaultChild as never) };
    // CDK grants a secret's own key through the key's policy (kms:ViaService Secrets Manager).
    const keyDecryptors = decryptors(template, stack.getLogicalId(key.node.defaultChild as never));
    for (const name of ['shop-consumer', 'shop-governor', 'shop-reporter']) {
      expect(functionEnv(template, name)[ENV.solverKeySecretArn], name).toEqual(secretRef);
      expect(reads(statementsOfFunction(template, name)), name).toEqual([secretRef]);
      expect(keyDecryptors, name).toContainEqual(roleArnOf(template, name));
    }
    expect(reportedViolations({ outdir } as never)).toEqual([]);
  });

  it('may live in another stack of the app (a cross-stack reference)', () => {
    const { app, stack } = shopApp({ account: '111111111111', region: 'eu-west-1' });
    const shared = new Stack(app, 'Shared', { env: { account: '111111111111', region: 'eu-west-1' } });
    // Under Secrets Manager's own key: a customer managed key of the other stack would be granted
    // through its key policy, naming the fleet's roles there, a cycle CDK refuses (docs/deploy.md).
    const secret = new Secret(shared, 'TeamKey');
    Validations.of(secret).acknowledge({ id: 'AwsSolutions-SMG4', reason: "the team's key, rotated at the vendor" });
    new CaptchaFleet(stack, 'Captcha', { prefix: 'shop', planThreads: 20, solverKeySecret: secret });
    const template = Template.fromStack(stack);
    expect(Object.keys(template.findResources('AWS::SecretsManager::Secret'))).toEqual([]);
    expect(JSON.stringify(functionEnv(template, 'shop-consumer')[ENV.solverKeySecretArn])).toContain('Fn::ImportValue');
  });

  it('imported by name in the app’s own code: read on that name’s suffix only, acknowledged as the name prop’s is', () => {
    const { app, outdir, stack } = shopApp();
    const secret = Secret.fromSecretNameV2(stack, 'Imported', 'team/captcha-key');
    new CaptchaFleet(stack, 'Captcha', { prefix: 'shop', planThreads: 20, solverKeySecret: secret });
    app.synth();
    const template = Template.fromStack(stack);
    expect(Object.keys(template.findResources('AWS::SecretsManager::Secret'))).toEqual([]);
    for (const name of ['shop-consumer', 'shop-governor', 'shop-reporter']) {
      const resources = reads(statementsOfFunction(template, name));
      expect(resources, name).toHaveLength(1);
      expect(JSON.stringify(resources[0]), name).toContain(':secret:team/captcha-key-??????');
    }
    expect(reportedViolations({ outdir } as never)).toEqual([]);
  });

  it('for the overflow provider: read by the overflow consumer, the reporter and the primary consumer (it resumes there); the primary key never by the overflow consumer', () => {
    const { app, outdir, stack } = shopApp();
    const primary = teamSecret(stack, 'PrimaryKey').secret;
    const overflow = teamSecret(stack, 'OverflowKey').secret;
    new CaptchaFleet(stack, 'Captcha', {
      prefix: 'shop',
      planThreads: 20,
      overflow: OVERFLOW,
      solverKeySecret: primary,
      overflowKeySecret: overflow,
    });
    app.synth();
    const template = Template.fromStack(stack);
    const ref = (secret: Secret) => ({ Ref: stack.getLogicalId(secret.node.defaultChild as never) });
    expect(Object.keys(template.findResources('AWS::SecretsManager::Secret')).sort()).toEqual(
      [ref(overflow).Ref, ref(primary).Ref].sort(),
    );
    expect(functionEnv(template, 'shop-consumer-overflow')[ENV.overflowKeySecretArn]).toEqual(ref(overflow));
    expect(reads(statementsOfFunction(template, 'shop-consumer-overflow'))).toEqual([ref(overflow)]);
    expect(reads(statementsOfFunction(template, 'shop-reporter'))).toEqual(
      expect.arrayContaining([ref(primary), ref(overflow)]),
    );
    expect(reads(statementsOfFunction(template, 'shop-consumer'))).toEqual(
      expect.arrayContaining([ref(primary), ref(overflow)]),
    );
    expect(reportedViolations({ outdir } as never)).toEqual([]);
  });

  it('is refused, naming the prop and the fix, beside a name, without the overflow block, when not a secret, or in another region', () => {
    const problemsOf = (build: (stack: Stack) => CaptchaFleetProps, env?: { account: string; region: string }) => {
      const { stack } = shopApp(env);
      try {
        new CaptchaFleet(stack, 'Captcha', { prefix: 'shop', planThreads: 20, ...build(stack) });
      } catch (error) {
        expect(error).toBeInstanceOf(ConfigError);
        expect(stack.node.tryFindChild('Captcha')).toBeUndefined();
        return (error as ConfigError).problems.map((p) => `${p.field}: ${p.problem} — ${p.fix}`);
      }
      return [];
    };
    expect(
      problemsOf((stack) => ({ solverKeySecret: teamSecret(stack).secret, solverKeySecretName: 'team/key' })),
    ).toEqual([expect.stringMatching(/^solverKeySecret: is given beside solverKeySecretName.*keep one/)]);
    expect(
      problemsOf((stack) => ({
        overflow: { ...OVERFLOW, keySecretName: 'team/overflow' },
        overflowKeySecret: teamSecret(stack).secret,
      })),
    ).toEqual([expect.stringMatching(/^overflowKeySecret: is given beside overflow.keySecretName/)]);
    expect(problemsOf((stack) => ({ overflowKeySecret: teamSecret(stack).secret }))).toEqual([
      expect.stringMatching(/^overflowKeySecret: is given without the overflow block.*add the overflow block/),
    ]);
    // From JavaScript: a name where the secret goes.
    expect(problemsOf(() => ({ solverKeySecret: 'team/key' as never }))).toEqual([
      expect.stringMatching(/^solverKeySecret: is not a Secrets Manager secret.*fromSecretNameV2/),
    ]);
    // The handlers read the key in their own region: an ARN of another region would fail every read.
    const elsewhere = 'arn:aws:secretsmanager:us-west-2:111111111111:secret:team/key-AbCdEf';
    expect(
      problemsOf((stack) => ({ solverKeySecret: Secret.fromSecretCompleteArn(stack, 'Far', elsewhere) }), {
        account: '111111111111',
        region: 'eu-west-1',
      }),
    ).toEqual([expect.stringMatching(/^solverKeySecret: is in us-west-2, the fleet in eu-west-1.*replicate/)]);
    // The same region is taken.
    const near = 'arn:aws:secretsmanager:eu-west-1:111111111111:secret:team/key-AbCdEf';
    expect(
      problemsOf((stack) => ({ solverKeySecret: Secret.fromSecretCompleteArn(stack, 'Near', near) }), {
        account: '111111111111',
        region: 'eu-west-1',
      }),
    ).toEqual([]);
  });
});
