/**
 * Vitest's global setup: every test's temporary files go under one directory of this run, removed
 * when the run ends. The suite synthesizes stacks (aws-cdk-lib's `Template.fromStack` writes a
 * `cdk.out*` directory under the system's temporary directory and never removes it), packs the
 * package and runs bundles in temporary directories; a test that stops half-way, or one that
 * cannot clean up after itself, would otherwise leave them in /tmp on every run. The workers
 * inherit `TMPDIR` (Node.js's `os.tmpdir()` reads it on every call).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
  const root = mkdtempSync(join(tmpdir(), 'captcha-fleet-test-run-'));
  const previous = process.env.TMPDIR;
  process.env.TMPDIR = root;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    rmSync(root, { recursive: true, force: true });
  };
}
