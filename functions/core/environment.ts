/**
 * The handlers' environment: one zod schema, parsed once at cold start; every problem is
 * listed at once. The stack sets these variables; the local runtime sets the same ones.
 */
import { z } from 'zod';
import { ConfigError, FleetConfigSchema, resolveSettings, type FleetSettings } from './settings.js';

export const ENV = {
  /** JSON of the FleetConfig (stack props / context / CLI flags). */
  config: 'CAPTCHA_FLEET_CONFIG',
  normalQueueUrl: 'TASKS_QUEUE_URL',
  highQueueUrl: 'HIGH_QUEUE_URL',
  dlqUrl: 'DLQ_URL',
  resultsTable: 'RESULTS_TABLE',
  governorTable: 'GOVERNOR_TABLE',
  /** AWS: the Secrets Manager secret holding the key. */
  solverKeySecretArn: 'SOLVER_KEY_SECRET_ARN',
  /** Local only: the key itself. */
  solverKey: 'SOLVER_KEY',
  consumerFunctionName: 'CONSUMER_FUNCTION_NAME',
  eventBusName: 'EVENT_BUS_NAME',
  /** Governor: JSON {"normal": uuid, "high"?: uuid} of the consumer's event source mappings. */
  mappingIds: 'EVENT_SOURCE_MAPPING_IDS',
  /** Local / alternative endpoints (AWS-compatible emulators). */
  endpoint: 'AWS_ENDPOINT_URL',
} as const;

const EnvSchema = z
  .object({
    [ENV.config]: z
      .string()
      .default('{}')
      .transform((text, ctx) => {
        try {
          return FleetConfigSchema.parse(JSON.parse(text));
        } catch (error) {
          ctx.addIssue({ code: 'custom', message: `not a valid fleet configuration: ${(error as Error).message}` });
          return z.NEVER;
        }
      }),
    [ENV.normalQueueUrl]: z.string().min(1),
    [ENV.highQueueUrl]: z.string().min(1).optional(),
    [ENV.dlqUrl]: z.string().min(1),
    [ENV.resultsTable]: z.string().min(1),
    [ENV.governorTable]: z.string().min(1).optional(),
    [ENV.solverKeySecretArn]: z.string().min(1).optional(),
    [ENV.solverKey]: z.string().min(1).optional(),
    [ENV.consumerFunctionName]: z.string().min(1).optional(),
    [ENV.eventBusName]: z.string().min(1).optional(),
    [ENV.endpoint]: z.url().optional(),
  })
  .refine((env) => env[ENV.solverKeySecretArn] !== undefined || env[ENV.solverKey] !== undefined, {
    message: `set ${ENV.solverKeySecretArn} (AWS) or ${ENV.solverKey} (local)`,
    path: [ENV.solverKeySecretArn],
  });

export interface FleetEnvironment {
  settings: FleetSettings;
  queueUrls: { normal: string; high: string | undefined; dlq: string };
  tables: { results: string; governor: string | undefined };
  solverKeySource: { secretArn: string } | { key: string };
  consumerFunctionName: string | undefined;
  eventBusName: string | undefined;
  endpoint: string | undefined;
}

/** Parse the environment. @throws ConfigError listing every problem. */
export function parseEnvironment(env: NodeJS.ProcessEnv = process.env): FleetEnvironment {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(
      parsed.error.issues.map((issue) => ({
        field: String(issue.path[0] ?? '(environment)'),
        problem: issue.message,
        fix: 'the stack sets this variable; locally `npm start` does. Check the function configuration',
      })),
    );
  }
  const e = parsed.data;
  const secretArn = e[ENV.solverKeySecretArn];
  return {
    settings: resolveSettings(e[ENV.config]),
    queueUrls: { normal: e[ENV.normalQueueUrl], high: e[ENV.highQueueUrl], dlq: e[ENV.dlqUrl] },
    tables: { results: e[ENV.resultsTable], governor: e[ENV.governorTable] },
    solverKeySource: secretArn !== undefined ? { secretArn } : { key: e[ENV.solverKey] as string },
    consumerFunctionName: e[ENV.consumerFunctionName],
    eventBusName: e[ENV.eventBusName],
    endpoint: e[ENV.endpoint],
  };
}
