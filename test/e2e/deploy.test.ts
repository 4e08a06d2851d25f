/**
 * `cdk deploy` as an operator runs it, onto moto_server's CloudFormation: bootstrap, deploy the
 * synthesized fleet (bundles and all), drive what was deployed with the project's CLIs —
 * `governor --once` with the deployed governor's own environment applies its decision to the
 * deployed mappings, `status` reads them, `redrive` moves a dead-lettered task back — then change
 * a setting, see it in `cdk diff`, deploy the update, and destroy. moto's gaps are worked around in
 * test/helpers/cdk-deploy.ts, never in the product. Skipped cleanly where moto_server is absent.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import {
  GetFunctionConcurrencyCommand,
  GetFunctionConfigurationCommand,
  LambdaClient,
  ListEventSourceMappingsCommand,
} from '@aws-sdk/client-lambda';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetQueueAttributesCommand, GetQueueUrlCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseClientConfig } from '../../functions/adapters/aws-clients.js';
import { STACK_OUTPUTS } from '../../functions/core/deployment.js';
import { createSolverSimulator, type SolverSimulator } from '../../local/solver-sim/index.js';
import { MotoCdk, motoEnvironment, synthesizeForMoto } from '../helpers/cdk-deploy.js';
import { startDeployedPollers, WarmFunction } from '../helpers/deployed-runtime.js';
import { copyPackageClosure, deployedFunction, externalPackages, findLambdaNode } from '../helpers/lambda-bundle.js';
import { TEST_SOLVER_KEY } from '../helpers/factories.js';
import { HAS_MOTO, type MotoServer, startMotoServer } from '../helpers/moto.js';
import { describeRun, run } from '../helpers/processes.js';
import { ROOT } from '../infra/synth-helpers.js';

const REGION = 'us-east-1';
const STACK = 'DeployE2E';
const PREFIX = 'deploy-e2e';
const TSX = join(ROOT, 'node_modules/.bin/tsx');
/**
 * The tasks the deployed bundle solves: an image, whose first result request the protocol makes
 * after 5 s (a token's after 15 s), so the end-to-end steps wait seconds, not a quarter minute.
 */
const IMAGE_TASK = { method: 'base64', params: { body: Buffer.alloc(300, 7).toString('base64') } } as const;

describe.skipIf(!HAS_MOTO)('cdk deploy onto moto_server, then the CLIs against what was deployed', () => {
  let moto: MotoServer | undefined;
  let simulator: SolverSimulator | undefined;
  let env: NodeJS.ProcessEnv;
  let cdk: MotoCdk;
  let lambda: LambdaClient;
  let sqs: SQSClient;
  let cloudformation: CloudFormationClient;
  const assemblies: string[] = [];
  let context: Record<string, unknown>;

  /** The mappings of the deployed consumer, by queue name. */
  async function mappings() {
    const listed = await lambda.send(new ListEventSourceMappingsCommand({ FunctionName: `${PREFIX}-consumer` }));
    return Object.fromEntries(
      (listed.EventSourceMappings ?? []).map((m) => [
        m.EventSourceArn?.split(':').pop(),
        { max: m.ScalingConfig?.MaximumConcurrency, state: m.State, batchSize: m.BatchSize },
      ]),
    );
  }

  async function outputs(): Promise<Record<string, string>> {
    const described = await cloudformation.send(new DescribeStacksCommand({ StackName: STACK }));
    return Object.fromEntries((described.Stacks?.[0]?.Outputs ?? []).map((o) => [o.OutputKey, o.OutputValue]));
  }

  /** `captcha-fleet <args>` from this checkout with `extra` in moto's environment. */
  async function cli(args: string[], extra: NodeJS.ProcessEnv = {}) {
    const result = await run(TSX, ['bin/captcha-fleet.ts', ...args], ROOT, { ...env, ...extra }, 60_000);
    expect(result.code, describeRun(`captcha-fleet ${args.join(' ')}`, result)).toBe(0);
    return result;
  }

  beforeAll(async () => {
    moto = await startMotoServer({ hostName: 'localhost' });
    env = motoEnvironment(moto.endpoint, REGION);
    cdk = new MotoCdk(env, REGION);
    const config = baseClientConfig(moto.endpoint, REGION);
    lambda = new LambdaClient(config);
    sqs = new SQSClient(config);
    cloudformation = new CloudFormationClient(config);
    simulator = createSolverSimulator({ seed: 7, planThreads: 50, balance: 10, medianMs: 20 });
    const { url } = await simulator.listen();
    // moto's CloudFormation cannot create the secret: it exists first, as an imported key would.
    await new SecretsManagerClient(config).send(
      new CreateSecretCommand({ Name: `${PREFIX}/solver-key`, SecretString: TEST_SOLVER_KEY }),
    );
    context = {
      prefix: PREFIX,
      stackName: STACK,
      solverKeySecretName: `${PREFIX}/solver-key`,
      solverBaseUrl: url,
      resultsRemoval: 'destroy',
    };
    const [, synthesized] = await Promise.all([cdk.bootstrap(), Promise.resolve(synthesizeForMoto(context, REGION))]);
    assemblies.push(synthesized.outdir);
    expect(synthesized.rewrites).toBeGreaterThan(0);
  }, 400_000);

  afterAll(async () => {
    await simulator?.close();
    await moto?.stop();
    for (const dir of assemblies) rmSync(dir, { recursive: true, force: true });
  });

  it('deploys the synthesized fleet: outputs, mappings and reserved concurrency as the template says', async () => {
    // Act
    await cdk.deploy(assemblies[0] as string, STACK);

    // Assess
    const out = await outputs();
    expect(out[STACK_OUTPUTS.consumerFunctionName]).toBe(`${PREFIX}-consumer`);
    expect(out[STACK_OUTPUTS.governorFunctionName]).toBe(`${PREFIX}-governor`);
    expect(out[STACK_OUTPUTS.normalQueueUrl]).toContain(`${PREFIX}-tasks`);
    expect(JSON.parse(out[STACK_OUTPUTS.fleetConfig] ?? '{}')).toMatchObject({ prefix: PREFIX, planThreads: 50 });
    const deployed = await mappings();
    expect(deployed[`${PREFIX}-tasks`]).toMatchObject({ max: 38, state: 'Enabled', batchSize: 1 });
    expect(deployed[`${PREFIX}-tasks-high`]).toMatchObject({ max: 12, state: 'Enabled' });
    const reserved = await lambda.send(new GetFunctionConcurrencyCommand({ FunctionName: `${PREFIX}-consumer` }));
    expect(reserved.ReservedConcurrentExecutions).toBe(50);
  });

  it('governor --once, with the deployed governor’s own environment, applies its decision to the deployed mappings', async () => {
    // Prepare: the variables the stack gave the governor Lambda, here pointed at moto
    const fn = await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: `${PREFIX}-governor` }));
    const variables = fn.Environment?.Variables ?? {};
    expect(Object.keys(variables)).toEqual(
      expect.arrayContaining(['EVENT_SOURCE_MAPPING_IDS', 'CAPTCHA_FLEET_CONFIG']),
    );

    // Act
    const tick = await cli(['governor', '--once', '--json'], variables);

    // Assess: an idle fleet opens the normal lane to the plan's free threads and parks the high lane
    const decision = JSON.parse(tick.stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
    expect(JSON.stringify(decision)).toContain('IDLE');
    const deployed = await mappings();
    expect(deployed[`${PREFIX}-tasks`]).toMatchObject({ max: 50, state: 'Enabled' });
    expect(deployed[`${PREFIX}-tasks-high`]?.state).toBe('Disabled');
    const reserved = await lambda.send(new GetFunctionConcurrencyCommand({ FunctionName: `${PREFIX}-consumer` }));
    expect(reserved.ReservedConcurrentExecutions).toBeGreaterThanOrEqual(50);
  });

  it('status reads the deployed fleet: its lanes, the ceilings the governor set and its last decision', async () => {
    const status = await cli(['status', '--endpoint', env.AWS_ENDPOINT_URL as string, '--prefix', PREFIX, '--json']);
    const report = JSON.parse(status.stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
    const text = JSON.stringify(report);
    expect(text).toContain('IDLE');
    expect(text).toContain(`"fleet":"endpoint ${env.AWS_ENDPOINT_URL}"`);
  });

  it('redrive moves a dead-lettered task back to its lane', async () => {
    // Prepare
    const url = async (name: string) =>
      (await sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl as string;
    const task = { id: 'redriven-1', ...IMAGE_TASK };
    await sqs.send(
      new SendMessageCommand({ QueueUrl: await url(`${PREFIX}-tasks-dlq`), MessageBody: JSON.stringify(task) }),
    );

    // Act
    const redriven = await cli(['redrive', '--endpoint', env.AWS_ENDPOINT_URL as string, '--prefix', PREFIX, '--json']);

    // Assess
    expect(JSON.parse(redriven.stdout.trim().split('\n').pop() ?? '{}')).toMatchObject({ copied: 1, left: 0 });
    const depth = async (name: string) =>
      Number(
        (
          await sqs.send(
            new GetQueueAttributesCommand({
              QueueUrl: await url(name),
              AttributeNames: ['ApproximateNumberOfMessages'],
            }),
          )
        ).Attributes?.ApproximateNumberOfMessages,
      );
    expect(await depth(`${PREFIX}-tasks-dlq`)).toBe(0);
    expect(await depth(`${PREFIX}-tasks`)).toBe(1);
  });

  it('the deployed bundle solves tasks under pollers that follow the deployed mappings: the governor’s writes throttle it', async () => {
    // Prepare: the consumer's synthesized bundle in warm environments with its deployed variables
    const outdir = assemblies[0] as string;
    const template = JSON.parse(readFileSync(join(outdir, `${STACK}.template.json`), 'utf8'));
    const fn = deployedFunction(template, outdir, `${PREFIX}-consumer`);
    const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-deployed-'));
    copyPackageClosure(externalPackages(readFileSync(join(fn.assetDir, 'index.mjs'), 'utf8')), dir);
    const deployed = await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: `${PREFIX}-consumer` }));
    const consumer = new WarmFunction({
      dir,
      assetDir: fn.assetDir,
      node: findLambdaNode().path,
      timeoutMs: fn.timeoutSeconds * 1000,
      env: {
        ...deployed.Environment?.Variables,
        PATH: process.env.PATH,
        AWS_LAMBDA_FUNCTION_NAME: `${PREFIX}-consumer`,
        AWS_REGION: REGION,
        AWS_ENDPOINT_URL: env.AWS_ENDPOINT_URL,
        AWS_ACCESS_KEY_ID: 'testing',
        AWS_SECRET_ACCESS_KEY: 'testing',
      },
    });
    const runtime = await startDeployedPollers({
      lambda,
      sqs,
      region: REGION,
      functionName: `${PREFIX}-consumer`,
      invoke: (event) => consumer.invoke(event),
      functionTimeoutMs: fn.timeoutSeconds * 1000,
    });
    const documents = DynamoDBDocumentClient.from(new DynamoDBClient(baseClientConfig(env.AWS_ENDPOINT_URL, REGION)));
    const statusOf = async (taskId: string) =>
      (await documents.send(new GetCommand({ TableName: `${PREFIX}-results`, Key: { taskId }, ConsistentRead: true })))
        .Item?.status as string | undefined;
    const until = async (what: string, check: () => Promise<boolean>, ms = 30_000) => {
      for (const end = Date.now() + ms; !(await check()); ) {
        if (Date.now() > end) throw new Error(`${what} did not happen within ${ms} ms\n${consumer.output}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    };
    try {
      // The governor parked the high lane: its poller follows the mapping
      expect(runtime.pollers[`${PREFIX}-tasks`]?.maxConcurrency).toBe(50);
      expect(runtime.pollers[`${PREFIX}-tasks-high`]?.enabled).toBe(false);
      // Act 1: the normal lane is open, so the redriven task is solved end to end: the deployed
      // consumer submits and parks it, the governor's watch (as its Lambda runs it between ticks)
      // records the answer once the solver has it.
      const variables = (await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: `${PREFIX}-governor` })))
        .Environment?.Variables;
      const watching = cli(['governor', '--once', '--json', '--watch', '20'], variables);
      await until('the redriven task solved', async () => (await statusOf('redriven-1')) === 'solved');
      const watched = JSON.parse((await watching).stdout.trim().split('\n').pop() ?? '{}') as {
        watched?: { recorded: number };
      };
      expect(watched.watched?.recorded, consumer.output).toBeGreaterThanOrEqual(1);
      // ...while a high task waits behind its disabled mapping
      const high = { id: 'urgent-1', priority: 'high', ...IMAGE_TASK };
      const highUrl = (await sqs.send(new GetQueueUrlCommand({ QueueName: `${PREFIX}-tasks-high` }))).QueueUrl;
      await sqs.send(new SendMessageCommand({ QueueUrl: highUrl, MessageBody: JSON.stringify(high) }));
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      expect(await statusOf('urgent-1')).toBeUndefined();
      expect(runtime.pollers[`${PREFIX}-tasks-high`]?.stats().invocations).toBe(0);

      // Act 2: the governor sees the high backlog and enables the lane; the poller follows it
      await cli(['governor', '--once', '--json', '--watch', '20'], variables);
      await until('the high task solved', async () => (await statusOf('urgent-1')) === 'solved');

      // Assess
      expect(runtime.pollers[`${PREFIX}-tasks-high`]?.enabled).toBe(true);
      expect(runtime.pollers[`${PREFIX}-tasks-high`]?.stats().invocations).toBeGreaterThanOrEqual(1);
      expect(simulator?.stats().solved).toBeGreaterThanOrEqual(2);
    } finally {
      await runtime.stop();
      consumer.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('the deployed report function refunds a wrong answer: captcha-fleet report → its mapping → the provider, once', async () => {
    // Prepare: the report function's synthesized bundle with its deployed variables, under pollers
    // that follow its deployed mapping on the reports queue
    const outdir = assemblies[0] as string;
    const template = JSON.parse(readFileSync(join(outdir, `${STACK}.template.json`), 'utf8'));
    const fn = deployedFunction(template, outdir, `${PREFIX}-reporter`);
    const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-reporter-'));
    copyPackageClosure(externalPackages(readFileSync(join(fn.assetDir, 'index.mjs'), 'utf8')), dir);
    const deployed = await lambda.send(new GetFunctionConfigurationCommand({ FunctionName: `${PREFIX}-reporter` }));
    const reporter = new WarmFunction({
      dir,
      assetDir: fn.assetDir,
      node: findLambdaNode().path,
      timeoutMs: fn.timeoutSeconds * 1000,
      env: {
        ...deployed.Environment?.Variables,
        PATH: process.env.PATH,
        AWS_LAMBDA_FUNCTION_NAME: `${PREFIX}-reporter`,
        AWS_REGION: REGION,
        AWS_ENDPOINT_URL: env.AWS_ENDPOINT_URL,
        AWS_ACCESS_KEY_ID: 'testing',
        AWS_SECRET_ACCESS_KEY: 'testing',
      },
    });
    const runtime = await startDeployedPollers({
      lambda,
      sqs,
      region: REGION,
      functionName: `${PREFIX}-reporter`,
      invoke: (event) => reporter.invoke(event),
      functionTimeoutMs: fn.timeoutSeconds * 1000,
    });
    const badBefore = simulator?.stats().reportBad ?? 0;
    try {
      expect(Object.keys(runtime.pollers)).toEqual([`${PREFIX}-reports`]);
      // Act: the task the deployed consumer solved above, reported wrong from the CLI
      const target = ['--endpoint', env.AWS_ENDPOINT_URL as string, '--prefix', PREFIX];
      const first = await cli(['report', 'redriven-1', 'bad', ...target, '--json', '--timeout', '60']);
      const again = await cli(['report', 'redriven-1', 'bad', ...target, '--json']);

      // Assess
      const report = JSON.parse(first.stdout.trim().split('\n').pop() ?? '{}') as Record<string, unknown>;
      expect(report).toMatchObject({ taskId: 'redriven-1', verdict: 'bad', state: 'accepted', provider: 'primary' });
      expect(JSON.parse(again.stdout.trim().split('\n').pop() ?? '{}')).toEqual(report);
      expect((simulator?.stats().reportBad ?? 0) - badBefore).toBe(1);
    } catch (error) {
      throw new Error(`${(error as Error).message}\n${reporter.output}`, { cause: error });
    } finally {
      await runtime.stop();
      reporter.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it('a changed setting shows in cdk diff and deploys as an update', async () => {
    // Prepare: a smaller plan
    const changed = synthesizeForMoto({ ...context, planThreads: 20 }, REGION);
    assemblies.push(changed.outdir);

    // Act
    const diff = await cdk.diff(changed.outdir, STACK);
    await cdk.deploy(changed.outdir, STACK);

    // Assess
    const said = `${diff.stdout}\n${diff.stderr}`;
    expect(said).toMatch(/AWS::Lambda::EventSourceMapping/);
    expect(said).toMatch(/MaximumConcurrency/);
    expect(said).toContain('Number of stacks with differences: 1');
    expect(JSON.parse((await outputs())[STACK_OUTPUTS.fleetConfig] ?? '{}')).toMatchObject({ planThreads: 20 });
    const deployed = await mappings();
    expect(deployed[`${PREFIX}-tasks`]?.max).toBe(15);
    expect(deployed[`${PREFIX}-tasks-high`]?.max).toBe(5);
  });

  it('destroy removes the stack and its resources', async () => {
    await cdk.destroy(assemblies[1] as string, STACK);
    await expect(cloudformation.send(new DescribeStacksCommand({ StackName: STACK }))).rejects.toThrow();
    await expect(sqs.send(new GetQueueUrlCommand({ QueueName: `${PREFIX}-tasks` }))).rejects.toThrow();
  });
});
