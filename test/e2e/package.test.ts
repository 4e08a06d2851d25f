/**
 * The package as a user gets it: `npm pack` (which builds it), the tarball installed into a fresh
 * project with the CDK peers, then used from projects of each kind (CommonJS and ESM, TypeScript
 * compiled by tsc and plain JavaScript) on Node.js 22 and 24 — never through tsx, which the
 * install does not even hold:
 * - the README's producer blocks run against a local stack that the installed `captcha-fleet start
 *   --serve` serves, and their task is solved;
 * - a user's own CDK app embedding `CaptchaFleet` in one of its stacks synthesizes with the CDK
 *   CLI, deploying the bundles the package ships (no esbuild, no Docker), the same bytes a checkout
 *   builds.
 * The install is shared by every project (each links it as its node_modules), so it happens once.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localStack } from '../../clients/index.js';
import { writeHandlerBundle } from '../../lib/handler-bundle.js';
import { nodeBuilds } from '../helpers/node-builds.js';
import { codeBlock, describeRun, type Run, run } from '../helpers/processes.js';
import { ROOT } from '../infra/synth-helpers.js';

const MANIFEST = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  version: string;
  devDependencies: Record<string, string>;
};
const NODES = nodeBuilds();
const NEWEST = NODES[NODES.length - 1] as (typeof NODES)[number];
const TS_PRODUCER = codeBlock('README.md', '// producer.ts');
const CJS_PRODUCER = codeBlock('README.md', '// producer.cjs');

/** One kind of user project: its package.json type, its producer file and how it is built. */
interface ProjectKind {
  name: string;
  type: 'commonjs' | 'module';
  file: string;
  source: string;
  /** tsc's settings when the project is TypeScript (one kind checks the package's declarations: skipLibCheck false). */
  typescript?: { module: string; moduleResolution: string; skipLibCheck: boolean };
  /** The file node runs. */
  main: string;
}

const KINDS: ProjectKind[] = [
  {
    name: 'TypeScript, CommonJS',
    type: 'commonjs',
    file: 'producer.ts',
    source: TS_PRODUCER,
    typescript: { module: 'nodenext', moduleResolution: 'nodenext', skipLibCheck: true },
    main: 'producer.js',
  },
  {
    name: 'TypeScript, ESM',
    type: 'module',
    file: 'producer.ts',
    source: TS_PRODUCER,
    typescript: { module: 'nodenext', moduleResolution: 'nodenext', skipLibCheck: false },
    main: 'producer.js',
  },
  { name: 'JavaScript, CommonJS', type: 'commonjs', file: 'producer.js', source: CJS_PRODUCER, main: 'producer.js' },
  { name: 'JavaScript, ESM', type: 'module', file: 'producer.mjs', source: TS_PRODUCER, main: 'producer.mjs' },
];

/** What a user's shell has: a PATH whose `node` is `nodePath`, a HOME, no AWS credentials, nothing of this test's. */
function userEnv(nodePath: string, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    PATH: [dirname(nodePath), process.env.PATH].join(delimiter),
    HOME: process.env.HOME,
    npm_config_update_notifier: 'false',
    ...extra,
  };
}

/** A project directory: its package.json, its files, and the shared install as its node_modules. */
function makeProject(dir: string, shared: string, type: string, files: Record<string, string>): string {
  mkdirSync(dir, { recursive: true });
  symlinkSync(join(shared, 'node_modules'), join(dir, 'node_modules'), 'dir');
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify({ name: 'my-app', private: true, type }, null, 2)}\n`);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, name)), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  return dir;
}

function tsconfig(options: Record<string, unknown>): string {
  return `${JSON.stringify({ compilerOptions: { target: 'ES2022', strict: true, types: ['node'], ...options } }, null, 2)}\n`;
}

interface Template {
  Resources: Record<string, { Type: string; Properties: Record<string, unknown> }>;
}

/** A user's CDK app: its files, whether tsc builds it first, the command cdk.json runs, on which Node.js. */
interface CdkAppSpec {
  name: string;
  type: 'commonjs' | 'module';
  files: Record<string, string>;
  typescript: boolean;
  app: string;
  node: string;
}

/** A synthesized app: its directory and template, or the run that failed. */
interface CdkApp {
  dir: string;
  template?: Template;
  failed?: Run & { what: string };
}

const CDK_APPS: CdkAppSpec[] = [
  {
    name: 'shop',
    type: 'commonjs',
    typescript: true,
    app: 'node bin/app.js',
    node: NODES[0]?.path ?? process.execPath,
    files: {
      'tsconfig.json': tsconfig({ module: 'commonjs', moduleResolution: 'node', skipLibCheck: true }),
      'bin/app.ts': [
        "import { App } from 'aws-cdk-lib';",
        "import { ShopStack } from '../lib/shop-stack';",
        '',
        'const app = new App();',
        "new ShopStack(app, 'Shop');",
        '',
      ].join('\n'),
      'lib/shop-stack.ts': [
        "import { Duration, Stack, type StackProps } from 'aws-cdk-lib';",
        "import * as iam from 'aws-cdk-lib/aws-iam';",
        "import * as sqs from 'aws-cdk-lib/aws-sqs';",
        "import type { Construct } from 'constructs';",
        "import { CaptchaFleet } from 'captcha-fleet/cdk';",
        '',
        'export class ShopStack extends Stack {',
        '  constructor(scope: Construct, id: string, props?: StackProps) {',
        '    super(scope, id, props);',
        "    const orders = new sqs.Queue(this, 'Orders', { enforceSSL: true, visibilityTimeout: Duration.seconds(60) });",
        "    const worker = new iam.Role(this, 'Worker', { assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com') });",
        '    orders.grantConsumeMessages(worker);',
        "    const fleet = new CaptchaFleet(this, 'Captcha', { prefix: 'shop-captcha', planThreads: 20, alarmEmail: 'ops@shop.example' });",
        '    fleet.grantProduce(worker);',
        '  }',
        '}',
        '',
      ].join('\n'),
    },
  },
  {
    name: 'ops',
    type: 'module',
    typescript: false,
    app: 'node app.mjs',
    node: NEWEST.path,
    files: {
      'app.mjs': [
        "import { App, Stack } from 'aws-cdk-lib';",
        "import { CaptchaFleet } from 'captcha-fleet/cdk';",
        '',
        'const app = new App();',
        "const stack = new Stack(app, 'Ops');",
        "new CaptchaFleet(stack, 'Fleet', { plan: 'standard', tasksPerInvocation: 2 });",
        '',
      ].join('\n'),
    },
  },
];

/** Make the app's project, build it (tsc) and synthesize it with the CDK CLI as its user would. */
async function buildCdkApp(spec: CdkAppSpec, dir: string, shared: string): Promise<CdkApp> {
  const project = makeProject(join(dir, `${spec.name}-cdk`), shared, spec.type, {
    ...spec.files,
    'cdk.json': `${JSON.stringify({ app: spec.app, notices: false, context: { 'cli-telemetry': false } }, null, 2)}\n`,
  });
  if (spec.typescript) {
    const tsc = join(shared, 'node_modules/typescript/bin/tsc');
    const build = await run(process.execPath, [tsc, '-p', '.'], project, userEnv(process.execPath), 180_000);
    if (build.code !== 0) return { dir: project, failed: { ...build, what: 'tsc' } };
  }
  const synth = await run(
    process.execPath,
    [join(ROOT, 'node_modules/aws-cdk/bin/cdk'), 'synth', '--quiet', '--output', 'cdk.out'],
    project,
    userEnv(spec.node, { CDK_DISABLE_VERSION_CHECK: '1' }),
    300_000,
  );
  // Bundling at the user's synth would mean the prebuilt bundles were not found.
  if (synth.code !== 0 || /Bundling asset/.test(synth.stderr))
    return { dir: project, failed: { ...synth, what: 'cdk synth' } };
  const manifest = readFileSync(join(project, 'cdk.out/manifest.json'), 'utf8');
  const stack = /"([A-Za-z]+)\.template\.json"/.exec(manifest)?.[1];
  const template = JSON.parse(readFileSync(join(project, 'cdk.out', `${stack}.template.json`), 'utf8')) as Template;
  return { dir: project, template };
}

/** The index.mjs of the asset a function's Code points at. */
function functionCode(project: string, template: Template, functionName: string): Buffer {
  const fn = Object.values(template.Resources).find(
    (r) => r.Type === 'AWS::Lambda::Function' && r.Properties.FunctionName === functionName,
  );
  const key = (fn?.Properties.Code as { S3Key?: string } | undefined)?.S3Key;
  expect(key, functionName).toMatch(/\.zip$/);
  return readFileSync(join(project, 'cdk.out', `asset.${key?.slice(0, -'.zip'.length)}`, 'index.mjs'));
}

describe('the packed package in fresh projects', () => {
  const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-package-'));
  const shared = join(dir, 'install');
  const stackFile = join(dir, 'local-stack.json');
  let packed: { tarball: string; files: string[] };
  let server: ChildProcess | undefined;
  let serverOut = '';
  const tsc = () => join(shared, 'node_modules/typescript/bin/tsc');
  /** Each kind's project and its tsc run (TypeScript kinds), made once the install is there. */
  const projects = new Map<ProjectKind, { dir: string; build: Run | undefined }>();
  /** The CDK apps' synthesized templates (or the failed run), made in parallel with the rest. */
  const apps = new Map<string, Promise<CdkApp>>();

  beforeAll(async () => {
    if (NODES.some((n) => n.standIn))
      console.warn(`package: no Node.js 22 or 24 here (.ci/lambda-node not installed); running on ${NEWEST.name}`);
    // npm pack builds the package first (prepack) and says what the tarball holds.
    // `npm test` type-checked the sources before this file runs: the build only emits.
    const pack = await run(
      'npm',
      ['pack', '--json', '--pack-destination', dir],
      ROOT,
      { ...process.env, CAPTCHA_FLEET_BUILD_TYPECHECKED: '1' },
      240_000,
    );
    expect(pack.code, describeRun('npm pack', pack)).toBe(0);
    const report = JSON.parse(pack.stdout.slice(pack.stdout.search(/^\[/m))) as {
      filename: string;
      files: { path: string }[];
    }[];
    packed = { tarball: join(dir, report[0]?.filename ?? ''), files: (report[0]?.files ?? []).map((f) => f.path) };

    // The user's install: the tarball and the CDK peers, TypeScript and Node's types, at the versions this project tests with.
    mkdirSync(shared);
    writeFileSync(join(shared, 'package.json'), '{ "name": "install", "private": true }\n');
    const peers = ['aws-cdk-lib', 'constructs', 'typescript', '@types/node'].map(
      (name) => `${name}@${MANIFEST.devDependencies[name]}`,
    );
    const install = await run(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', packed.tarball, ...peers],
      shared,
      userEnv(process.execPath),
      300_000,
    );
    expect(install.code, describeRun('npm install', install)).toBe(0);

    const builds = KINDS.map(async (kind) => {
      const slug = kind.name.toLowerCase().replace(/[^a-z]+/g, '-');
      const project = makeProject(join(dir, slug), shared, kind.type, {
        [kind.file]: kind.source,
        ...(kind.typescript ? { 'tsconfig.json': tsconfig(kind.typescript) } : {}),
      });
      const build = kind.typescript
        ? await run(process.execPath, [tsc(), '-p', '.'], project, userEnv(process.execPath), 180_000)
        : undefined;
      projects.set(kind, { dir: project, build });
    });
    for (const app of CDK_APPS) apps.set(app.name, buildCdkApp(app, dir, shared));
    server = spawn(
      NEWEST.path,
      [
        join(shared, 'node_modules/captcha-fleet/bin/captcha-fleet.js'),
        'start',
        '--serve',
        '--tasks',
        '0',
        '--solver-latency-ms',
        '20',
      ],
      { cwd: shared, env: userEnv(NEWEST.path, { CAPTCHA_FLEET_STACK_FILE: stackFile }), stdio: 'pipe' },
    );
    server.stdout?.on('data', (chunk: Buffer) => (serverOut += chunk.toString()));
    server.stderr?.on('data', (chunk: Buffer) => (serverOut += chunk.toString()));
    const until = Date.now() + 60_000;
    while (!existsSync(stackFile)) {
      if (Date.now() > until || server.exitCode !== null) throw new Error(`--serve did not come up:\n${serverOut}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    await Promise.all([...builds, ...apps.values()]);
  }, 600_000);

  afterAll(async () => {
    if (server && server.exitCode === null) {
      const exited = new Promise((resolve) => server?.once('close', resolve));
      server.kill('SIGINT');
      const timer = setTimeout(() => server?.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('holds the compiled entries, their declarations, the bundles and the project files, and no source, test or lab output', () => {
    const files = packed.files;
    for (const required of [
      'package.json',
      'README.md',
      'LICENSE',
      'CHANGELOG.md',
      'SECURITY.md',
      'bin/captcha-fleet.js',
      'schema/task-v1.schema.json',
      'dist/clients/index.js',
      'dist/clients/index.d.ts',
      'dist/lib/index.js',
      'dist/lib/index.d.ts',
      'dist/bin/captcha-fleet.js',
      'dist/lambda/consumer/index.mjs',
      'dist/lambda/consumer/index.mjs.map',
      'dist/lambda/governor/index.mjs',
    ])
      expect(files, required).toContain(required);
    const unwanted = files.filter(
      (file) =>
        /^(test|lab|bench|docs|scripts|types|functions|lib|local|clients|cdk\.out|coverage|\.ci|\.captcha-fleet)\//.test(
          file,
        ) ||
        /(\.test\.|\.spec\.)/.test(file) ||
        (/\.ts$/.test(file) && !/\.d\.ts$/.test(file)) ||
        /^dist\/(lab|bench|test|scripts)\//.test(file) ||
        /(^|\/)(tsconfig|vitest|biome|cdk)[.\w]*\.json$|\.tgz$|package-lock\.json$/.test(file),
    );
    expect(unwanted).toEqual([]);
    expect(files.filter((file) => file.startsWith('dist/lambda/')).sort()).toEqual([
      'dist/lambda/consumer/index.mjs',
      'dist/lambda/consumer/index.mjs.map',
      'dist/lambda/governor/index.mjs',
      'dist/lambda/governor/index.mjs.map',
      'dist/lambda/reporter/index.mjs',
      'dist/lambda/reporter/index.mjs.map',
    ]);
  });

  it('is ready to publish: `npm publish --dry-run` exits 0 and warns only that nobody is logged in', async () => {
    // The build already ran for the pack above.
    const publish = await run('npm', ['publish', '--dry-run', '--ignore-scripts'], ROOT, process.env, 120_000);
    expect(publish.code, describeRun('npm publish --dry-run', publish)).toBe(0);
    const warnings = `${publish.stdout}\n${publish.stderr}`
      .split('\n')
      .filter((line) => /npm (warn|WARN|error|ERR)/.test(line))
      .filter((line) => !/requires you to be logged in/.test(line));
    expect(warnings).toEqual([]);
    expect(publish.stderr).toContain(`captcha-fleet@${MANIFEST.version}`);
  });

  it('installs without tsx or esbuild: the installed package needs neither', () => {
    expect(existsSync(join(shared, 'node_modules/tsx'))).toBe(false);
    expect(existsSync(join(shared, 'node_modules/esbuild'))).toBe(false);
  });

  /** The result record of the task id a producer printed (`solved <id> …`). */
  async function recordOf(stdout: string) {
    const taskId = /^solved (\S+)/m.exec(stdout)?.[1];
    expect(taskId, stdout).toBeDefined();
    const { clients, table } = localStack({ stackFile });
    try {
      return (await clients.documents.send(new GetCommand({ TableName: table, Key: { taskId }, ConsistentRead: true })))
        .Item;
    } finally {
      clients.sqs.destroy();
      clients.dynamo.destroy();
    }
  }

  describe.each(KINDS)("the README's producer in a $name project", (kind) => {
    it.runIf(kind.typescript !== undefined)('compiles with tsc', () => {
      const build = projects.get(kind)?.build;
      expect(build?.code, build && describeRun('tsc', build)).toBe(0);
    });

    it.each(NODES)('solves a task on $name, printing nothing but its result', async (node) => {
      // Prepare
      const project = projects.get(kind)?.dir as string;

      // Act
      const result = await run(
        node.path,
        [kind.main],
        project,
        userEnv(node.path, { CAPTCHA_FLEET_STACK_FILE: stackFile }),
      );

      // Assess
      expect(result.code, `${describeRun(kind.main, result)}\n--serve:\n${serverOut}`).toBe(0);
      expect(result.stderr).toBe('');
      expect(result.stdout).toMatch(/^solved \S+ \S+ \(token valid \d+ ms more\)\n$/);
      expect(await recordOf(result.stdout)).toMatchObject({ status: 'solved', method: 'turnstile' });
    });
  });

  describe("a user's CDK app that embeds CaptchaFleet in its own stack", () => {
    /** The bundles the checkout's `cdk synth` deploys, built from source. */
    const checkoutBundle = (name: string) => {
      const out = join(dir, 'checkout-bundles', name);
      writeHandlerBundle(name, out);
      return readFileSync(join(out, 'index.mjs'));
    };

    it('TypeScript, CommonJS (classic node resolution): its own resources beside the fleet, the package’s bundles deployed', async () => {
      const app = await apps.get('shop');
      expect(app?.failed, app?.failed && describeRun(app.failed.what, app.failed)).toBeUndefined();
      const template = app?.template as Template;

      // The user's queue and role, the fleet's resources under its construct id
      const ids = Object.keys(template.Resources);
      expect(ids.some((id) => id.startsWith('Orders'))).toBe(true);
      expect(ids.filter((id) => id.startsWith('CaptchaQueues')).length).toBeGreaterThanOrEqual(3);
      const queueNames = Object.values(template.Resources)
        .filter((r) => r.Type === 'AWS::SQS::Queue')
        .map((r) => r.Properties.QueueName)
        .filter(Boolean);
      expect(queueNames.sort()).toEqual([
        'shop-captcha-reports',
        'shop-captcha-reports-dlq',
        'shop-captcha-tasks',
        'shop-captcha-tasks-dlq',
        'shop-captcha-tasks-high',
      ]);
      // grantProduce: SendMessage on both lanes and GetItem on the results table, on the user's role
      const workerPolicy = JSON.stringify(
        Object.values(template.Resources).filter(
          (r) => r.Type === 'AWS::IAM::Policy' && JSON.stringify(r.Properties.Roles).includes('Worker'),
        ),
      );
      expect(workerPolicy).toContain('sqs:SendMessage');
      expect(workerPolicy).toContain('CaptchaQueuesHighPriorityQueue');
      expect(workerPolicy).toContain('dynamodb:GetItem');
      // The deployed code is the package's bundle, the same bytes the checkout builds
      for (const name of ['consumer', 'governor', 'reporter']) {
        const deployed = functionCode(app?.dir as string, template, `shop-captcha-${name}`);
        const shipped = readFileSync(join(shared, `node_modules/captcha-fleet/dist/lambda/${name}/index.mjs`));
        expect(deployed.equals(shipped)).toBe(true);
        expect(deployed.equals(checkoutBundle(name)), `${name}: the package's bundle is the checkout's`).toBe(true);
      }
    });

    it(`JavaScript, ESM on ${NEWEST.name}: the fleet in a stack of its own app`, async () => {
      const app = await apps.get('ops');
      expect(app?.failed, app?.failed && describeRun(app.failed.what, app.failed)).toBeUndefined();
      const template = app?.template as Template;
      const mappings = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::EventSourceMapping');
      // The two lanes on the consumer, at the app's tasks per invocation, and the reports queue on the report function.
      expect(mappings).toHaveLength(3);
      const consumerMappings = mappings.filter((m) => !JSON.stringify(m.Properties.FunctionName).includes('Reports'));
      expect(consumerMappings).toHaveLength(2);
      for (const mapping of consumerMappings) expect(mapping.Properties.BatchSize).toBe(2);
      expect(functionCode(app?.dir as string, template, 'captcha-fleet-consumer').length).toBeGreaterThan(0);
    });
  });
});
