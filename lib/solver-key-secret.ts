/**
 * A solver API key in Secrets Manager (the primary solver's, or the overflow provider's): created
 * holding a placeholder the operator replaces, or an existing secret imported by name. Handlers
 * get its ARN, never its value, and read it once per cold start.
 */
import { SecretValue, Stack, Token, Validations } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { SOLVER_KEY_PLACEHOLDER } from '../functions/core/deployment.js';
import type { SolverProvider } from '../functions/core/provider.js';
import type { ConfigProblem, FleetSettings } from '../functions/core/settings.js';

/** What each provider's secret is called after the prefix, and what its description says it holds. */
const KEY_SECRETS: Readonly<Record<SolverProvider, { name: string; holds: string }>> = {
  primary: { name: 'solver-key', holds: 'the solver API key' },
  overflow: { name: 'overflow-key', holds: "the overflow provider's API key" },
};

/** Properties of {@link SolverKeySecret}. */
export interface SolverKeySecretProps {
  /** Fleet settings: the new secret is named after the prefix. */
  readonly settings: FleetSettings;
  /**
   * Whose key: the primary solver's (`<prefix>/solver-key`) or the overflow provider's
   * (`<prefix>/overflow-key`).
   * @default 'primary'
   */
  readonly provider?: SolverProvider;
  /**
   * Import this existing secret (by name) instead of creating one.
   * @default - a new secret named `<prefix>/solver-key` (`<prefix>/overflow-key` for the overflow provider)
   */
  readonly existingSecretName?: string;
  /**
   * Use this secret the app gives (created in it, or imported by its own code) instead of creating
   * one. Not with `existingSecretName`.
   * @default - a new secret, or `existingSecretName`'s
   */
  readonly existingSecret?: secretsmanager.ISecret;
}

/** A solver key's secret, created or imported. */
export class SolverKeySecret extends Construct {
  /** The secret. */
  public readonly secret: secretsmanager.ISecret;
  /** The secret's name where its policy resource ends in a wildcard suffix (a secret known by name only). */
  readonly #wildcardName: string | undefined;

  constructor(scope: Construct, id: string, props: SolverKeySecretProps) {
    super(scope, id);
    if (props.existingSecret !== undefined) {
      this.secret = props.existingSecret;
      // Known by name only (fromSecretNameV2, or attributes with a partial ARN): read is granted on `<name>-??????`.
      const name = props.existingSecret.secretName;
      this.#wildcardName =
        props.existingSecret.secretFullArn === undefined && !Token.isUnresolved(name) ? name : undefined;
      return;
    }
    this.#wildcardName = props.existingSecretName;
    if (props.existingSecretName !== undefined) {
      this.secret = secretsmanager.Secret.fromSecretNameV2(this, 'Imported', props.existingSecretName);
      return;
    }
    const { name, holds } = KEY_SECRETS[props.provider ?? 'primary'];
    const secret = new secretsmanager.Secret(this, 'Secret', {
      secretName: `${props.settings.prefix}/${name}`,
      description: `captcha-fleet: ${holds} (replace the placeholder with \`aws secretsmanager put-secret-value\`)`,
      // Not a secret: a marker the handlers recognise (whichever provider's key it stands for), so
      // a fleet deployed before the key was put in says so instead of sending a random string.
      secretStringValue: SecretValue.unsafePlainText(SOLVER_KEY_PLACEHOLDER),
    });
    Validations.of(secret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The solver vendor issues the API key; it cannot be rotated by a Lambda. Operators rotate it in the vendor console and put the new value here.',
    });
    this.secret = secret;
  }

  /** Let a function's role read the key. */
  grantRead(role: iam.IRole): void {
    this.secret.grantRead(role);
    if (this.#wildcardName === undefined) return;
    Validations.of(role).acknowledge({
      id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:secretsmanager:<AWS::Region>:<AWS::AccountId>:secret:${this.#wildcardName}-??????]`,
      reason:
        'A secret imported by name has an ARN ending in a random 6-character suffix; "-??????" matches only that suffix of this one secret.',
    });
  }
}

/**
 * The secrets the app gives (`solverKeySecret`, `overflowKeySecret`) that live in another region
 * than `scope`'s stack, as config problems. The handlers read the key from the Secrets Manager of
 * their own region by the secret's ARN: a secret of another region (an ARN the app imported) would
 * fail every read at run time. Unknown regions (environment-agnostic stacks) pass.
 */
export function givenSecretRegionProblems(
  scope: Construct,
  given: Readonly<Record<'solverKeySecret' | 'overflowKeySecret', secretsmanager.ISecret | undefined>>,
): ConfigProblem[] {
  const fleetRegion = Stack.of(scope).region;
  if (Token.isUnresolved(fleetRegion)) return [];
  const fields = ['solverKeySecret', 'overflowKeySecret'] as const;
  return fields.flatMap((field) => {
    const secretRegion = given[field]?.env?.region;
    if (secretRegion === undefined || Token.isUnresolved(secretRegion) || secretRegion === fleetRegion) return [];
    return [
      {
        field,
        problem: `is in ${secretRegion}, the fleet in ${fleetRegion}: its functions read the key from their own region`,
        fix: `give a secret in ${fleetRegion} (a replica of it: \`aws secretsmanager replicate-secret-to-regions\`)`,
      },
    ];
  });
}
