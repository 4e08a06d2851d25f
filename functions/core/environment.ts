/**
 * The handlers' environment: one zod schema, parsed once at cold start; every problem is
 * listed at once. The stack sets these variables; the local runtime sets the same ones.
 */
import { z } from 'zod';
import { PROVIDERS, type SolverProvider } from './provider.js';
import { ConfigError, FleetConfigSchema, resolveSettings, type ConfigProblem, type FleetSettings } from './settings.js';

export const ENV = {
  /** JSON of the FleetConfig (stack props / context / CLI flags). */
  config: 'CAPTCHA_FLEET_CONFIG',
  normalQueueUrl: 'TASKS_QUEUE_URL',
  highQueueUrl: 'HIGH_QUEUE_URL',
  dlqUrl: 'DLQ_URL',
  /** The reports queue (producers' bad / good reports) and its dead-letter queue. */
  reportsQueueUrl: 'REPORTS_QUEUE_URL',
  reportsDlqUrl: 'REPORTS_DLQ_URL',
  resultsTable: 'RESULTS_TABLE',
  governorTable: 'GOVERNOR_TABLE',
  /** The thread leases of the parked design (solveMode `park`): consumer and governor. */
  leasesTable: 'LEASES_TABLE',
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
  /** Consumer: which provider it solves through, `primary` (default) or `overflow`. */
  solverProvider: 'SOLVER_PROVIDER',
  /** AWS: the Secrets Manager secret holding the overflow provider's key (overflow consumer, governor). */
  overflowKeySecretArn: 'OVERFLOW_KEY_SECRET_ARN',
  /** Local only: the overflow provider's key itself. */
  overflowKey: 'OVERFLOW_KEY',
  /** Governor: the overflow consumer's event source mapping id. */
  overflowMappingId: 'OVERFLOW_MAPPING_ID',
  /** Governor: the overflow consumer's mapping on the high queue (opened only while the primary is paused). */
  overflowHighMappingId: 'OVERFLOW_HIGH_MAPPING_ID',
  /** Governor: the overflow consumer function (its reserved concurrency follows the lane's ceiling). */
  overflowFunctionName: 'OVERFLOW_FUNCTION_NAME',
} as const;

/** The consumer's event source mapping ids, one per lane. */
const MappingIdsSchema = z.object({ normal: z.string().min(1), high: z.string().min(1).optional() });

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
    [ENV.reportsQueueUrl]: z.string().min(1).optional(),
    [ENV.reportsDlqUrl]: z.string().min(1).optional(),
    [ENV.resultsTable]: z.string().min(1),
    [ENV.governorTable]: z.string().min(1).optional(),
    [ENV.leasesTable]: z.string().min(1).optional(),
    [ENV.solverKeySecretArn]: z.string().min(1).optional(),
    [ENV.solverKey]: z.string().min(1).optional(),
    [ENV.consumerFunctionName]: z.string().min(1).optional(),
    [ENV.eventBusName]: z.string().min(1).optional(),
    [ENV.mappingIds]: z
      .string()
      .optional()
      .transform((text, ctx) => {
        if (text === undefined) return undefined;
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          ctx.addIssue({ code: 'custom', message: 'not JSON; expected {"normal": "<uuid>", "high": "<uuid>"}' });
          return z.NEVER;
        }
        const parsed = MappingIdsSchema.safeParse(json);
        if (!parsed.success) {
          ctx.addIssue({
            code: 'custom',
            message: `expected {"normal": "<uuid>", "high"?: "<uuid>"}: ${parsed.error.issues.map((i) => i.message).join('; ')}`,
          });
          return z.NEVER;
        }
        return parsed.data;
      }),
    [ENV.endpoint]: z.url().optional(),
    [ENV.solverProvider]: z.enum(PROVIDERS).default('primary'),
    [ENV.overflowKeySecretArn]: z.string().min(1).optional(),
    [ENV.overflowKey]: z.string().min(1).optional(),
    [ENV.overflowMappingId]: z.string().min(1).optional(),
    [ENV.overflowHighMappingId]: z.string().min(1).optional(),
    [ENV.overflowFunctionName]: z.string().min(1).optional(),
  })
  // The overflow consumer holds only the overflow key (checked in parseEnvironment); every other
  // handler solves, or reads the balance, through the plan's.
  .refine(
    (env) =>
      env[ENV.solverProvider] === 'overflow' ||
      env[ENV.solverKeySecretArn] !== undefined ||
      env[ENV.solverKey] !== undefined,
    {
      message: `set ${ENV.solverKeySecretArn} (AWS) or ${ENV.solverKey} (local)`,
      path: [ENV.solverKeySecretArn],
    },
  );

/** Where a provider's key comes from: a Secrets Manager secret (AWS) or the key itself (local). */
export type SolverKeySource = { secretArn: string } | { key: string };

export interface FleetEnvironment {
  settings: FleetSettings;
  queueUrls: { normal: string; high: string | undefined; dlq: string };
  /** The reports queue and its DLQ (the report function's environment, and producers'). */
  reportQueueUrls?: { reports: string; dlq: string } | undefined;
  tables: { results: string; governor: string | undefined; leases?: string | undefined };
  /**
   * The plan's (primary provider's) key. Absent only in the overflow consumer's environment
   * (SOLVER_PROVIDER=overflow), which holds the overflow key and never the primary's; everything
   * else (the primary consumer, the governor) has it.
   */
  solverKeySource?: SolverKeySource | undefined;
  consumerFunctionName: string | undefined;
  eventBusName: string | undefined;
  endpoint: string | undefined;
  /** Governor: the consumer's event source mapping ids (EVENT_SOURCE_MAPPING_IDS). */
  mappingIds?: { normal: string; high?: string | undefined } | undefined;
  /** Consumer: the provider it solves through (SOLVER_PROVIDER). @default 'primary' */
  provider?: SolverProvider;
  /** The overflow provider's key (overflow consumer and governor, when `settings.overflow` is set). */
  overflowKeySource?: SolverKeySource | undefined;
  /** Governor: the overflow consumer's mapping id and function name. */
  overflowMappingId?: string | undefined;
  /** Governor: the overflow consumer's mapping on the high queue, when the stack has one. */
  overflowHighMappingId?: string | undefined;
  overflowFunctionName?: string | undefined;
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
  const settings = resolveSettings(e[ENV.config]);
  const provider = e[ENV.solverProvider];
  const solverKeySource = keySourceOf(e[ENV.solverKeySecretArn], e[ENV.solverKey]);
  const overflowKeySource = keySourceOf(e[ENV.overflowKeySecretArn], e[ENV.overflowKey]);
  const problems =
    provider === 'overflow' ? overflowConsumerProblems(settings, solverKeySource, overflowKeySource) : [];
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    settings,
    queueUrls: { normal: e[ENV.normalQueueUrl], high: e[ENV.highQueueUrl], dlq: e[ENV.dlqUrl] },
    ...reportQueueUrlsOf(e[ENV.reportsQueueUrl], e[ENV.reportsDlqUrl]),
    tables: { results: e[ENV.resultsTable], governor: e[ENV.governorTable], leases: e[ENV.leasesTable] },
    ...(solverKeySource !== undefined ? { solverKeySource } : {}),
    consumerFunctionName: e[ENV.consumerFunctionName],
    eventBusName: e[ENV.eventBusName],
    endpoint: e[ENV.endpoint],
    mappingIds: e[ENV.mappingIds],
    provider,
    overflowKeySource,
    overflowMappingId: e[ENV.overflowMappingId],
    overflowHighMappingId: e[ENV.overflowHighMappingId],
    overflowFunctionName: e[ENV.overflowFunctionName],
  };
}

function reportQueueUrlsOf(reports: string | undefined, dlq: string | undefined) {
  return reports !== undefined && dlq !== undefined ? { reportQueueUrls: { reports, dlq } } : {};
}

/** A secret (AWS) wins over a key in the environment (local). */
function keySourceOf(secretArn: string | undefined, key: string | undefined): SolverKeySource | undefined {
  if (secretArn !== undefined) return { secretArn };
  return key !== undefined ? { key } : undefined;
}

/**
 * What an overflow consumer's environment must hold: the overflow block and the overflow key, and
 * not the primary key. Least privilege: the lane solves through its own account only, so the
 * plan's key has no business there (and a stack that passes it is wrong somewhere else too).
 */
function overflowConsumerProblems(
  settings: FleetSettings,
  solverKeySource: SolverKeySource | undefined,
  overflowKeySource: SolverKeySource | undefined,
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  if (settings.overflow === undefined)
    problems.push({
      field: ENV.solverProvider,
      problem: 'is "overflow" but the fleet configuration has no overflow block',
      fix: `add the overflow block to the configuration, or set ${ENV.solverProvider}=primary`,
    });
  if (overflowKeySource === undefined)
    problems.push({
      field: ENV.overflowKeySecretArn,
      problem: 'not set: the overflow consumer has no key for the overflow provider',
      fix: `set ${ENV.overflowKeySecretArn} (AWS) or ${ENV.overflowKey} (local)`,
    });
  if (solverKeySource !== undefined)
    problems.push({
      field: 'secretArn' in solverKeySource ? ENV.solverKeySecretArn : ENV.solverKey,
      problem: 'is set on the overflow consumer, which must hold only the overflow provider key',
      fix: `remove it from the overflow consumer's environment (it reads ${ENV.overflowKeySecretArn} or ${ENV.overflowKey})`,
    });
  return problems;
}
