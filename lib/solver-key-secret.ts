/**
 * The solver API key in Secrets Manager: created holding a placeholder the operator replaces,
 * or an existing secret imported by name. Handlers get its ARN, never its value, and read it
 * once per cold start.
 */
import { SecretValue, Validations } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import { Construct } from 'constructs';
import { SOLVER_KEY_PLACEHOLDER } from '../functions/core/deployment.js';
import type { FleetSettings } from '../functions/core/settings.js';

/** Properties of {@link SolverKeySecret}. */
export interface SolverKeySecretProps {
  /** Fleet settings: the new secret is named `<prefix>/solver-key`. */
  readonly settings: FleetSettings;
  /**
   * Import this existing secret (by name) instead of creating one.
   * @default - a new secret named `<prefix>/solver-key`
   */
  readonly existingSecretName?: string;
}

/** The solver key's secret, created or imported. */
export class SolverKeySecret extends Construct {
  /** The secret. */
  public readonly secret: secretsmanager.ISecret;
  /** True when the secret was imported by name (its ARN then ends in a `-??????` wildcard). */
  public readonly imported: boolean;

  constructor(scope: Construct, id: string, props: SolverKeySecretProps) {
    super(scope, id);
    this.imported = props.existingSecretName !== undefined;
    if (props.existingSecretName !== undefined) {
      this.secret = secretsmanager.Secret.fromSecretNameV2(this, 'Imported', props.existingSecretName);
      return;
    }
    const secret = new secretsmanager.Secret(this, 'Secret', {
      secretName: `${props.settings.prefix}/solver-key`,
      description:
        'captcha-fleet: the solver API key (replace the placeholder with `aws secretsmanager put-secret-value`)',
      // Not a secret: a marker the handlers recognise, so a fleet deployed before the key was
      // put in says so instead of sending a random string to the solver.
      secretStringValue: SecretValue.unsafePlainText(SOLVER_KEY_PLACEHOLDER),
    });
    Validations.of(secret).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The solver vendor issues the API key; it cannot be rotated by a Lambda. Operators rotate it in the vendor console and put the new value here.',
    });
    this.secret = secret;
  }

  /** Let a function read the key. */
  grantRead(grantee: iam.IGrantable): void {
    this.secret.grantRead(grantee);
  }
}
