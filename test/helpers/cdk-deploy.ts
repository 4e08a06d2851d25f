/**
 * `cdk bootstrap | deploy | diff | destroy` with the project's CDK CLI onto moto_server. Every
 * workaround for moto's gaps lives here, in the test harness, and nowhere in the product:
 * - the endpoint is `http://localhost:PORT` (moto reads the CLI's S3 TemplateURL path-style only
 *   when the host contains "localhost"; see startMotoServer's `hostName`);
 * - `deploy --method=direct` (a change set leaves the stack's Outputs empty) with
 *   `--parameters BootstrapVersion=…` on every deploy (moto fails on UsePreviousValue), and
 *   `diff --method=template` (its change-set diff errors);
 * - moto's CloudFormation has no `AWS::SecretsManager::Secret` (the caller creates the key's
 *   secret first and passes `solverKeySecretName`) and no `AWS::CloudWatch::Alarm`, so a
 *   `Fn::GetAtt [Alarm, Arn]` fails: {@link patchForMoto} writes the alarm's ARN instead; `Ref` on
 *   an `AWS::Events::EventBus` yields an object there: it becomes the bus's name.
 * The cloud assembly is synthesized in-process (bundling on), patched, and deployed with
 * `--app <assembly directory>`, so the CLI deploys exactly the patched templates.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describeRun, type Run, run } from './processes.js';
import { ROOT, synthesizeFleet } from '../infra/synth-helpers.js';

/** moto's account, and the bootstrap version parameter the stack's template declares. */
export const MOTO_ACCOUNT = '123456789012';
const BOOTSTRAP_VERSION = 'BootstrapVersion=/cdk-bootstrap/hnb659fds/version';
const CDK = join(ROOT, 'node_modules/aws-cdk/bin/cdk');

type Json = unknown;
interface Resource {
  Type: string;
  Properties?: Record<string, Json>;
}

/** The environment the CLI and the project's CLIs get: moto's endpoint, its credentials, nothing of the shell's AWS. */
export function motoEnvironment(endpoint: string, region: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^(AWS_|CDK_)/.test(key)) env[key] = value;
  return {
    ...env,
    AWS_ENDPOINT_URL: endpoint,
    AWS_ACCESS_KEY_ID: 'testing',
    AWS_SECRET_ACCESS_KEY: 'testing',
    AWS_REGION: region,
    AWS_DEFAULT_REGION: region,
    CDK_DISABLE_VERSION_CHECK: '1',
    AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
  };
}

/** Rewrite what moto's CloudFormation cannot resolve (see the file's notes); returns the number of rewrites. */
export function patchForMoto(template: { Resources: Record<string, Resource> }, region: string): number {
  const resources = template.Resources;
  let rewrites = 0;
  const visit = (value: Json): Json => {
    if (Array.isArray(value)) return value.map(visit);
    if (value === null || typeof value !== 'object') return value;
    const object = value as Record<string, Json>;
    const getAtt = object['Fn::GetAtt'];
    if (Array.isArray(getAtt) && getAtt[1] === 'Arn') {
      const target = resources[String(getAtt[0])];
      if (target?.Type === 'AWS::CloudWatch::Alarm') {
        rewrites++;
        return `arn:aws:cloudwatch:${region}:${MOTO_ACCOUNT}:alarm:${String(target.Properties?.AlarmName)}`;
      }
    }
    const ref = object.Ref;
    if (typeof ref === 'string' && resources[ref]?.Type === 'AWS::Events::EventBus') {
      rewrites++;
      return resources[ref]?.Properties?.Name;
    }
    return Object.fromEntries(Object.entries(object).map(([key, inner]) => [key, visit(inner)]));
  };
  const patched = visit(template) as typeof template;
  Object.assign(template, patched);
  return rewrites;
}

/** Synthesize the fleet app with `context` (bundling on) and patch every template for moto. */
export function synthesizeForMoto(
  context: Record<string, unknown>,
  region: string,
): { outdir: string; rewrites: number } {
  const { outdir } = synthesizeFleet({ bundle: true, context });
  let rewrites = 0;
  for (const file of readdirSync(outdir).filter((name) => name.endsWith('.template.json'))) {
    const path = join(outdir, file);
    const template = JSON.parse(readFileSync(path, 'utf8')) as { Resources: Record<string, Resource> };
    rewrites += patchForMoto(template, region);
    writeFileSync(path, JSON.stringify(template, null, 1));
  }
  return { outdir, rewrites };
}

/** The project's CDK CLI against moto; throws with both streams when it fails. */
export class MotoCdk {
  constructor(
    private readonly env: NodeJS.ProcessEnv,
    private readonly region: string,
  ) {}

  private async cli(args: string[], timeoutMs = 300_000, cwd = ROOT): Promise<Run> {
    const result = await run(process.execPath, [CDK, ...args], cwd, this.env, timeoutMs);
    if (result.code !== 0) throw new Error(describeRun(`cdk ${args.join(' ')}`, result));
    return result;
  }

  /**
   * `cdk bootstrap` of moto's account and region, from an empty directory: in the project's
   * directory the CLI would first synthesize the app of cdk.json (about 20 s, longer under load)
   * only to learn environments the command already names.
   */
  async bootstrap(): Promise<Run> {
    const empty = mkdtempSync(join(tmpdir(), 'captcha-fleet-bootstrap-'));
    try {
      return await this.cli(['bootstrap', `aws://${MOTO_ACCOUNT}/${this.region}`], 300_000, empty);
    } finally {
      rmSync(empty, { recursive: true, force: true });
    }
  }

  deploy(assembly: string, stack: string): Promise<Run> {
    return this.cli([
      'deploy',
      stack,
      '--app',
      assembly,
      '--method=direct',
      '--require-approval',
      'never',
      '--parameters',
      BOOTSTRAP_VERSION,
    ]);
  }

  diff(assembly: string, stack: string): Promise<Run> {
    return this.cli(['diff', stack, '--app', assembly, '--method=template']);
  }

  destroy(assembly: string, stack: string): Promise<Run> {
    return this.cli(['destroy', stack, '--app', assembly, '--force']);
  }
}
