/**
 * `npm run build` (and `prepack`): what the published package holds in `dist/`.
 * - the compiled JavaScript and type declarations of the package's entries (`captcha-fleet/producer`,
 *   `captcha-fleet/cdk`, the `captcha-fleet` CLI) and everything they import (tsconfig.build.json);
 * - each Lambda handler's bundle, `dist/lambda/<name>/` (lib/handler-bundle.ts: the same bytes
 *   `cdk synth` builds in a checkout), which the construct deploys from an installed package.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeHandlerBundle } from '../lib/handler-bundle.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = join(root, 'dist');

// `npm test` type-checks these sources (the same compiler options) before its package test packs
// them, which then skips the second check (emit only, half the time).
const check = process.env.CAPTCHA_FLEET_BUILD_TYPECHECKED === '1' ? ['--noCheck'] : [];

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', ...check], {
  cwd: root,
  stdio: 'inherit',
});
const handlers = readdirSync(join(root, 'functions'), { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && readdirSync(join(root, 'functions', entry.name)).includes('handler.ts'))
  .map((entry) => entry.name);
for (const name of handlers) {
  const files = writeHandlerBundle(name, join(dist, 'lambda', name), root);
  console.error(`bundled ${name}: ${files.map((file) => relative(root, file)).join(', ')}`);
}
