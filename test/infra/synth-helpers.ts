/**
 * Synthesis helpers for the infra tests: an app configured like `cdk synth` (cdk.json context),
 * synthesized once per test file. Bundling is skipped here (the synth-cli test bundles for real).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type { CaptchaFleetProps } from '../../lib/config.js';
import { addFleetStack } from '../../lib/fleet-app.js';
import type { CaptchaFleetStack } from '../../lib/fleet-stack.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CDK_JSON = JSON.parse(readFileSync(join(ROOT, 'cdk.json'), 'utf8')) as { context: Record<string, unknown> };

export interface Synthesized {
  app: App;
  stack: CaptchaFleetStack;
  template: Template;
  /** The cloud assembly directory (validation-report.json lives there). */
  outdir: string;
  /** Error and warning annotations recorded on the stack (info messages left out). */
  messages: { level: string; id: string; text: string }[];
}

/** Build and synthesize the fleet app with cdk.json's context plus `context`, skipping bundling. */
export function synthesizeFleet(
  options: {
    context?: Record<string, unknown>;
    overrides?: CaptchaFleetProps;
    bundle?: boolean;
    /** Change the stack before synthesis (e.g. add a non-compliant resource). */
    extend?: (stack: CaptchaFleetStack) => unknown;
  } = {},
): Synthesized {
  const outdir = mkdtempSync(join(tmpdir(), 'captcha-fleet-cdk-'));
  const app = new App({
    outdir,
    context: {
      ...CDK_JSON.context,
      ...(options.bundle ? {} : { 'aws:cdk:bundling-stacks': [] }),
      ...options.context,
    },
  });
  let stack: CaptchaFleetStack;
  let assembly: ReturnType<App['synth']>;
  try {
    stack = addFleetStack(app, options.overrides);
    options.extend?.(stack);
    assembly = app.synth();
  } catch (error) {
    removeOutdir(outdir);
    throw error;
  }
  const messages = assembly
    .getStackArtifact(stack.artifactId)
    .messages.filter((m) => m.level !== 'info')
    .map((m) => ({ level: m.level, id: m.id, text: String(m.entry.data) }));
  return { app, stack, template: Template.fromStack(stack), outdir, messages };
}

/** Remove a cloud assembly directory made by synthesizeFleet. */
export function removeOutdir(outdir: string): void {
  rmSync(outdir, { recursive: true, force: true });
}
