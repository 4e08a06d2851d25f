/**
 * Builds the captcha-fleet app: the stack from CDK context, with cdk-nag's AwsSolutions pack as
 * a validation plugin (findings fail the synth unless acknowledged next to what they concern).
 */
import { type App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { DEFAULT_STACK_NAME } from '../functions/core/deployment.js';
import { type CaptchaFleetProps, fleetOptionsFromContext } from './config.js';
import { CaptchaFleetStack } from './fleet-stack.js';

/**
 * Add the fleet stack to an app, configured from the app's context and `overrides`.
 * @throws ConfigError listing every configuration problem.
 */
export function addFleetStack(app: App, overrides: CaptchaFleetProps = {}): CaptchaFleetStack {
  const read = (key: string): unknown => app.node.tryGetContext(key);
  const options: CaptchaFleetProps = { ...fleetOptionsFromContext(read), ...overrides };
  const stackName = (read('stackName') as string | undefined) ?? DEFAULT_STACK_NAME;
  // Environment-agnostic: the same template whatever credentials the shell has (deploy picks the account).
  const stack = new CaptchaFleetStack(app, stackName, options);
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return stack;
}
