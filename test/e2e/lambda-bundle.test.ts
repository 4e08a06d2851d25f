/**
 * The consumer as deployed, run as Lambda runs it. The stack is synthesized with bundling
 * (in-process, offline), the consumer's bundle is taken out of the cloud assembly and invoked in
 * a child process with only the AWS SDK beside it (what the nodejs24.x runtime provides), on the
 * Lambda's Node.js where .ci/run installed it (else on this Node.js, with a notice). It gets the
 * environment the template gives it, with the stack's resources replaced by local ones: queues
 * and tables on the embedded emulators, the key in a Secrets Manager secret and the event bus on
 * moto_server, the solver simulator over HTTP. The same bundle runs a second time as the overflow
 * consumer (SOLVER_PROVIDER=overflow, only the overflow key's secret, a second simulator as the
 * overflow provider), both invocations at once. Then the governor's bundle runs the same way for
 * two ticks (its event source mappings and the consumer's function, and CloudWatch, on moto), and
 * its watch records the task the consumer parked. Skipped cleanly where moto_server is absent.
 */
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CreateEventBusCommand, EventBridgeClient } from '@aws-sdk/client-eventbridge';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { baseClientConfig } from '../../functions/adapters/aws-clients.js';
import { DynamoResultsRepository } from '../../functions/adapters/results-repository.js';
import { ENV } from '../../functions/core/environment.js';
import { FUNCTION_SIZING } from '../../functions/core/function-sizing.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { FLEET_RUNTIME } from '../../lib/fleet-function.js';
import { createSolverSimulator, type SolverSimulator } from '../../local/solver-sim/index.js';
import { imageTask, TEST_SOLVER_KEY } from '../helpers/factories.js';

const OVERFLOW_KEY = 'fedcba9876543210fedcba9876543210';
import {
  receive,
  sendMessage,
  startEmulatorFixture,
  toSqsEvent,
  type EmulatorFixture,
} from '../helpers/fleet-fixture.js';
import {
  type BundleInvocation,
  copyPackageClosure,
  type DeployedFunction,
  deployedFunction,
  externalPackages,
  findLambdaNode,
  invokeBundle,
} from '../helpers/lambda-bundle.js';
import { createMotoConsumer, HAS_MOTO, type MotoServer, startMotoServer } from '../helpers/moto.js';
import { removeOutdir, synthesizeFleet } from '../infra/synth-helpers.js';

const REGION = 'us-east-1';
/** How long the deployed governor's invocation is given: two ticks 10 s apart and its watch between. */
const GOVERNOR_RUN_MS = 16_000;
const node = findLambdaNode();
const runtimeMajor = Number(/^nodejs(\d+)\.x$/.exec(FLEET_RUNTIME.name)?.[1]);

describe.skipIf(!HAS_MOTO)('the synthesized consumer bundle on the Lambda runtime', () => {
  const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-lambda-'));
  let outdir: string | undefined;
  const overflowDir = mkdtempSync(join(tmpdir(), 'captcha-fleet-lambda-overflow-'));
  const governorDir = mkdtempSync(join(tmpdir(), 'captcha-fleet-lambda-governor-'));
  let moto: MotoServer | undefined;
  let emulators: EmulatorFixture | undefined;
  let simulator: SolverSimulator | undefined;
  let overflowSimulator: SolverSimulator | undefined;
  let fn: DeployedFunction;
  let governorFn: DeployedFunction;
  let invocation: BundleInvocation;
  let governorInvocation: BundleInvocation;
  let overflowInvocation: BundleInvocation;
  let taskId: string;
  let overflowTaskId: string;
  let resultsTable: string;
  let parkedBeforeWatch: Awaited<ReturnType<DynamoResultsRepository['get']>>;
  // The overflow consumer runs the consumer's bundle at its own memory (lib/overflow-consumer.ts).
  const overflowFn = (): DeployedFunction => ({ ...fn, memoryMb: FUNCTION_SIZING.overflowConsumer.memoryMb });

  beforeAll(async () => {
    if (node.source === 'current') {
      console.warn(
        `lambda-bundle: no Lambda Node.js here (LAMBDA_NODE unset, ${'.ci/lambda-node'} not installed); ` +
          `running the bundle on this Node.js ${process.version} instead of nodejs${runtimeMajor}.x`,
      );
    }
    const synth = synthesizeFleet({ bundle: true });
    outdir = synth.outdir;
    const settingsName = resolveSettings({}).prefix;
    fn = deployedFunction(synth.template.toJSON(), outdir, `${settingsName}-consumer`);
    governorFn = deployedFunction(synth.template.toJSON(), outdir, `${settingsName}-governor`);
    const packages = externalPackages(readFileSync(join(fn.assetDir, 'index.mjs'), 'utf8'));
    copyPackageClosure(packages, dir);
    copyPackageClosure(externalPackages(readFileSync(join(governorFn.assetDir, 'index.mjs'), 'utf8')), governorDir);
    // The overflow invocation's layout shares the one copy of the SDK.
    symlinkSync(join(dir, 'node_modules'), join(overflowDir, 'node_modules'), 'dir');

    [moto, emulators] = await Promise.all([startMotoServer(), startEmulatorFixture()]);
    simulator = createSolverSimulator({ seed: 5, medianMs: 0, validKeys: [TEST_SOLVER_KEY] });
    overflowSimulator = createSolverSimulator({ seed: 6, medianMs: 0, dialect: '2captcha', validKeys: [OVERFLOW_KEY] });
    const [{ url: solverBaseUrl }, { url: overflowBaseUrl }] = await Promise.all([
      simulator.listen(),
      overflowSimulator.listen(),
    ]);
    const config = { ...JSON.parse(String(fn.variables[ENV.config])), solverBaseUrl };
    const overflow = { baseUrl: overflowBaseUrl, capUsdPerHour: 1, capUsdPerDay: 10, priceHintUsd: 0.003 };
    const settings = resolveSettings(config);
    const fleet = await emulators.createFleet(config);
    resultsTable = fleet.resources.tables.results;
    const motoConfig = baseClientConfig(moto.endpoint, REGION);
    const secrets = new SecretsManagerClient(motoConfig);
    const secret = await secrets.send(
      new CreateSecretCommand({ Name: `${settings.prefix}/solver-key`, SecretString: TEST_SOLVER_KEY }),
    );
    const overflowSecret = await secrets.send(
      new CreateSecretCommand({ Name: `${settings.prefix}/overflow-key`, SecretString: OVERFLOW_KEY }),
    );
    const busName = `${settings.prefix}-events`;
    await new EventBridgeClient(motoConfig).send(new CreateEventBusCommand({ Name: busName }));

    // The stack's resources, by the variable that names them; anything else the template sets
    // from a resource has no local stand-in and fails here rather than running half-configured.
    // The queues by the URLs the emulator gave them: it looks a queue up by its URL exactly (a
    // URL rewritten onto its endpoint found no queue, and the governor's ticks held on a backlog
    // they could not read).
    const standIns: Record<string, string> = {
      [ENV.normalQueueUrl]: fleet.resources.queueUrls.normal,
      [ENV.highQueueUrl]: fleet.resources.queueUrls.high,
      [ENV.dlqUrl]: fleet.resources.queueUrls.dlq,
      [ENV.resultsTable]: fleet.resources.tables.results,
      [ENV.governorTable]: fleet.resources.tables.governor,
      [ENV.leasesTable]: fleet.resources.tables.leases,
      [ENV.solverKeySecretArn]: secret.ARN ?? '',
      [ENV.eventBusName]: busName,
    };
    const variables: Record<string, string> = {};
    for (const [name, value] of Object.entries(fn.variables)) {
      const local = typeof value === 'string' ? value : standIns[name];
      if (local === undefined) throw new Error(`the template sets ${name} to ${JSON.stringify(value)}: no stand-in`);
      variables[name] = local;
    }
    variables[ENV.config] = JSON.stringify(config);

    // The overflow consumer: the same bundle and variables, but the overflow provider's key
    // instead of the primary's (it must never hold that one) and the overflow block in its config.
    const { [ENV.solverKeySecretArn]: _primaryKey, ...shared } = variables;
    const overflowVariables: Record<string, string> = {
      ...shared,
      [ENV.config]: JSON.stringify({ ...config, overflow }),
      [ENV.solverProvider]: 'overflow',
      [ENV.overflowKeySecretArn]: overflowSecret.ARN ?? '',
    };

    const task = imageTask();
    const overflowTask = imageTask();
    taskId = task.id ?? '';
    overflowTaskId = overflowTask.id ?? '';
    const { sqsEndpoint, dynamoEndpoint } = emulators.emulators;
    const motoEndpoint = moto.endpoint;
    const lambdaEnv = (functionName: string, root: string) => ({
      // What the Lambda runtime sets, then where the emulators stand in for the services.
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      TZ: ':UTC',
      AWS_REGION: REGION,
      AWS_DEFAULT_REGION: REGION,
      AWS_LAMBDA_FUNCTION_NAME: functionName,
      AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(fn.memoryMb),
      AWS_LAMBDA_FUNCTION_VERSION: '$LATEST',
      AWS_ACCESS_KEY_ID: 'lambda-role',
      AWS_SECRET_ACCESS_KEY: 'lambda-role',
      AWS_SESSION_TOKEN: 'lambda-role',
      LAMBDA_TASK_ROOT: join(root, 'task'),
      AWS_ENDPOINT_URL_SQS: sqsEndpoint,
      AWS_ENDPOINT_URL_DYNAMODB: dynamoEndpoint,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: motoEndpoint,
      AWS_ENDPOINT_URL_EVENTBRIDGE: motoEndpoint,
      ...(node.source === 'current' ? { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' } : {}),
    });
    /** One message to the normal queue, received as the event source mapping would. */
    const eventOf = async (body: string) => {
      await sendMessage(fleet.clients, fleet.resources.queueUrls.normal, body);
      return toSqsEvent(
        await receive(fleet.clients, fleet.resources.queueUrls.normal, 1),
        fleet.resources.queueArns.normal,
        REGION,
      );
    };
    const event = await eventOf(JSON.stringify(task));
    const overflowEvent = await eventOf(JSON.stringify(overflowTask));

    [invocation, overflowInvocation] = await Promise.all([
      invokeBundle({
        dir,
        fn,
        node: node.path,
        event,
        timeoutMs: 60_000,
        env: { ...variables, ...lambdaEnv(`${settings.prefix}-consumer`, dir) },
      }),
      invokeBundle({
        dir: overflowDir,
        // The same bundle, deployed as the overflow consumer at its own memory.
        fn: overflowFn(),
        node: node.path,
        event: overflowEvent,
        timeoutMs: 60_000,
        env: { ...overflowVariables, ...lambdaEnv(`${settings.prefix}-consumer-overflow`, overflowDir) },
      }),
    ]);

    // The primary consumer parked its submission (solveMode park, the default): the governor as
    // deployed records it, its watch between its ticks. Its bundle, on the same Node.js, with the
    // template's variables: the queues and tables on the emulators, the consumer's function and
    // its two event source mappings, the key's secret, CloudWatch and the bus on moto.
    const results = new DynamoResultsRepository({
      documents: fleet.clients.documents,
      tableName: fleet.resources.tables.results,
      ttlSeconds: settings.resultTtlSeconds,
    });
    parkedBeforeWatch = await results.get(taskId);
    const consumer = await createMotoConsumer(motoEndpoint, { functionName: `${settings.prefix}-consumer` });
    const governorStandIns: Record<string, string> = {
      ...standIns,
      [ENV.consumerFunctionName]: consumer.functionName,
      [ENV.mappingIds]: JSON.stringify(consumer.mappingIds),
    };
    const governorVariables: Record<string, string> = {};
    for (const [name, value] of Object.entries(governorFn.variables)) {
      const local = typeof value === 'string' ? value : governorStandIns[name];
      if (local === undefined) throw new Error(`the template sets ${name} to ${JSON.stringify(value)}: no stand-in`);
      governorVariables[name] = local;
    }
    governorVariables[ENV.config] = JSON.stringify({
      ...JSON.parse(String(governorFn.variables[ENV.config])),
      solverBaseUrl,
    });
    governorInvocation = await invokeBundle({
      dir: governorDir,
      fn: governorFn,
      node: node.path,
      event: {} as SQSEvent,
      // Two ticks and the watch between them, not the minute the schedule gives it.
      remainingMs: GOVERNOR_RUN_MS,
      timeoutMs: GOVERNOR_RUN_MS + 30_000,
      env: {
        ...governorVariables,
        ...lambdaEnv(`${settings.prefix}-governor`, governorDir),
        AWS_LAMBDA_FUNCTION_MEMORY_SIZE: String(governorFn.memoryMb),
        AWS_ENDPOINT_URL_LAMBDA: motoEndpoint,
        AWS_ENDPOINT_URL_CLOUDWATCH: motoEndpoint,
      },
    });
  }, 240_000);

  afterAll(async () => {
    await simulator?.close();
    await overflowSimulator?.close();
    await emulators?.stop();
    await moto?.stop();
    if (outdir) removeOutdir(outdir);
    rmSync(dir, { recursive: true, force: true });
    rmSync(overflowDir, { recursive: true, force: true });
    rmSync(governorDir, { recursive: true, force: true });
  });

  it('imports nothing from outside the bundle but the AWS SDK and Node.js built-ins', () => {
    // Prepare
    const code = readFileSync(join(fn.assetDir, 'index.mjs'), 'utf8');

    // Act
    const external = externalPackages(code);

    // Assess
    expect(external.length).toBeGreaterThan(0);
    expect(external.filter((name) => !name.startsWith('@aws-sdk/'))).toEqual([]);
  });

  it('submits with the key from the secret and parks the task, which the watch then records', async () => {
    // Prepare: the invocation ran in beforeAll
    const diagnostics = `exit ${invocation.exitCode}\n${invocation.stderr}\n${invocation.stdout}`.slice(-4000);

    // Act
    const record = await emulators?.clients.documents.send(
      new GetCommand({ TableName: resultsTable, Key: { taskId }, ConsistentRead: true }),
    );

    // Assess: the parked message is left to SQS (a batch item failure: not deleted, its
    // visibility set by the consumer), its submission kept on the record; the watch recorded it
    expect(invocation.exitCode, diagnostics).toBe(0);
    expect(invocation.response, diagnostics).toEqual({ batchItemFailures: [{ itemIdentifier: expect.any(String) }] });
    expect(invocation.stdout, diagnostics).toContain('"Parked":1');
    expect(parkedBeforeWatch?.status, diagnostics).toBe('solving');
    expect(parkedBeforeWatch?.solverId, diagnostics).toEqual(expect.any(String));
    expect(record?.Item?.status, diagnostics).toBe('solved');
    expect(record?.Item?.provider, diagnostics).toBe('primary');
    expect(simulator?.stats()).toMatchObject({ accepted: 1, solved: 1, keyRejections: 0 });
  });

  it('runs the governor as deployed: it ticks, its watch records the parked task, within its memory and without the key', async () => {
    // Prepare: the invocation ran in beforeAll
    const diagnostics =
      `exit ${governorInvocation.exitCode}\n${governorInvocation.stderr}\n${governorInvocation.stdout}`.slice(-4000);

    // Act
    const record = await emulators?.clients.documents.send(
      new GetCommand({ TableName: resultsTable, Key: { taskId }, ConsistentRead: true }),
    );

    // Assess: ticks decided and logged, the parked task recorded by the watch (not by a second
    // delivery), its peak resident memory under the function's (docs/cost.md, row (f'')).
    expect(governorInvocation.exitCode, diagnostics).toBe(0);
    const response = governorInvocation.response as unknown as { ticks: number; lastReason?: string };
    expect(response.ticks, diagnostics).toBeGreaterThanOrEqual(1);
    expect(governorInvocation.stdout, diagnostics).toContain('"message":"governor decision"');
    // It read the queues at their URLs as deployed: every tick knew the backlog and decided on
    // it (none held for a missing signal), and nothing warned of a failed read.
    const decisions = governorInvocation.stdout
      .split('\n')
      .filter((line) => line.includes('"message":"governor decision"'))
      .map((line) => JSON.parse(line) as { reason: string; backlog: Record<string, number> });
    expect(decisions.length, diagnostics).toBe(response.ticks);
    for (const decision of decisions) {
      expect(decision.reason, diagnostics).not.toBe('HOLD_MISSING_SIGNAL');
      expect(decision.backlog, diagnostics).toEqual({ normal: expect.any(Number), high: expect.any(Number) });
    }
    expect(governorInvocation.stdout, diagnostics).not.toContain('read failed');
    expect(record?.Item?.completedBy, diagnostics).toMatch(/^watch:/);
    if (process.platform === 'linux') expect(governorInvocation.peakSource).toBe('VmHWM');
    expect(governorInvocation.maxRssMb).toBeGreaterThan(0);
    expect(governorInvocation.maxRssMb).toBeLessThan(governorFn.memoryMb);
    expect(`${governorInvocation.stdout}${governorInvocation.stderr}`).not.toContain(TEST_SOLVER_KEY);
  });

  it("stays within the function's memory size through its invocation", () => {
    // Peak resident memory of the process that loaded the bundle and ran one invocation (what
    // Lambda reports as Max Memory Used), V8 started with the flags Lambda gives a function of
    // this memory: here, Node.js 24, about 95 MB of the parked consumer's 192 MB on a first
    // invocation (about 150 MB after thousands: docs/cost.md, "The consumer's memory"), the
    // overflow consumer's at its own 256 MB. On Linux the peak is the process's own (VmHWM):
    // getrusage's maxRSS carries the forking test worker's peak across exec.
    expect(fn.memoryMb).toBeGreaterThanOrEqual(128);
    for (const [run, memoryMb] of [
      [invocation, fn.memoryMb],
      [overflowInvocation, overflowFn().memoryMb],
    ] as const) {
      if (process.platform === 'linux') expect(run.peakSource).toBe('VmHWM');
      expect(run.maxRssMb).toBeGreaterThan(0);
      expect(run.maxRssMb).toBeLessThan(memoryMb);
    }
  });

  it('never prints the key', () => {
    expect(invocation.stdout).toContain('"SolverSubmissions"'); // EMF on stdout, as CloudWatch reads it
    expect(`${invocation.stdout}${invocation.stderr}`).not.toContain(TEST_SOLVER_KEY);
  });

  it('solves as the overflow consumer with only the overflow key, through the overflow provider', async () => {
    // Prepare: the invocation ran in beforeAll
    const diagnostics =
      `exit ${overflowInvocation.exitCode}\n${overflowInvocation.stderr}\n${overflowInvocation.stdout}`.slice(-4000);

    // Act
    const record = await emulators?.clients.documents.send(
      new GetCommand({ TableName: resultsTable, Key: { taskId: overflowTaskId }, ConsistentRead: true }),
    );

    // Assess: solved by the overflow provider, its metrics under its own service, no key printed
    expect(overflowInvocation.exitCode, diagnostics).toBe(0);
    expect(overflowInvocation.response, diagnostics).toEqual({ batchItemFailures: [] });
    expect(record?.Item, diagnostics).toMatchObject({ status: 'solved', provider: 'overflow' });
    expect(overflowSimulator?.stats()).toMatchObject({ accepted: 1, solved: 1, keyRejections: 0 });
    expect(overflowInvocation.stdout).toContain('"service":"consumer-overflow"');
    const printed = `${overflowInvocation.stdout}${overflowInvocation.stderr}`;
    expect(printed).not.toContain(OVERFLOW_KEY);
    expect(printed).not.toContain(TEST_SOLVER_KEY);
  });

  it.skipIf(node.source === 'current')(`runs on the Lambda runtime's Node.js (${FLEET_RUNTIME.name})`, () => {
    expect(invocation.nodeVersion).toMatch(new RegExp(`^v${runtimeMajor}\\.`));
  });
});
