/**
 * `npx cdk synth --quiet` as a user runs it on a fresh clone: no network (this machine has none),
 * version check, notices and telemetry off, esbuild bundling on the machine (no Docker). It must
 * exit 0 with cdk-nag and CloudFormation validation on, and bundle both handlers as ESM.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_STACK_NAME } from '../../functions/core/deployment.js';
import { removeOutdir, ROOT } from './synth-helpers.js';

describe('npx cdk synth --quiet (offline)', () => {
  const outdir = mkdtempSync(join(tmpdir(), 'captcha-fleet-cdk-out-'));
  let result: ReturnType<typeof spawnSync>;

  beforeAll(() => {
    result = spawnSync('npx', ['--no-install', 'cdk', 'synth', '--quiet', '--output', outdir], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, CDK_DISABLE_VERSION_CHECK: '1', npm_config_update_notifier: 'false' },
      timeout: 240_000,
    });
  }, 250_000);
  afterAll(() => removeOutdir(outdir));

  it('exits 0', () => {
    expect(result.error).toBeUndefined();
    expect(result.status, String(result.stderr)).toBe(0);
    expect(existsSync(join(outdir, `${DEFAULT_STACK_NAME}.template.json`))).toBe(true);
  });

  it('bundles every handler (consumer, governor, reporter) as ESM with a require shim and source maps', () => {
    const assets = JSON.parse(readFileSync(join(outdir, `${DEFAULT_STACK_NAME}.assets.json`), 'utf8')) as {
      files: Record<string, { source: { path: string; packaging?: string } }>;
    };
    const bundles = Object.values(assets.files).filter((f) => f.source.packaging === 'zip');
    expect(bundles).toHaveLength(3);
    for (const bundle of bundles) {
      const code = readFileSync(join(outdir, bundle.source.path, 'index.mjs'), 'utf8');
      expect(code.startsWith("import { createRequire } from 'node:module';")).toBe(true);
      expect(existsSync(join(outdir, bundle.source.path, 'index.mjs.map'))).toBe(true);
    }
  });
});
