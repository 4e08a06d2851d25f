/**
 * Stack configuration: what `-c key=value` context and stack props may set, validated at synth.
 * Every problem is collected (the fleet settings' own checks and the stack's) and thrown as one
 * ConfigError that lists them all with their fix.
 */
import {
  ConfigError,
  FleetConfigSchema,
  MAPPING_MIN_CONCURRENCY,
  PLAN_THREADS,
  resolveSettings,
  SECRET_NAME,
  type ConfigProblem,
  type FleetConfig,
  type FleetSettings,
  type ParsedFleetConfig,
} from '../functions/core/settings.js';

/** What happens to the results table when the stack is deleted. */
export type TableRemoval = 'retain' | 'destroy';

/** Options of the captcha-fleet stack beyond the fleet configuration. */
export interface FleetStackOptions {
  /**
   * Fleet configuration: names, limits and timings (see FleetConfigSchema).
   * @default {} (every field at its default)
   */
  readonly fleet?: FleetConfig;
  /**
   * A plan name from PLAN_THREADS (`basic`, `standard`, `advance`, `enterprise`) instead of
   * `fleet.planThreads`.
   * @default - `fleet.planThreads`
   */
  readonly plan?: string;
  /**
   * E-mail address subscribed to the alarm topic (the recipient confirms the subscription).
   * @default - no subscription; subscribe to the topic yourself
   */
  readonly alarmEmail?: string;
  /**
   * Name of an existing Secrets Manager secret that holds the solver key. When absent the stack
   * creates `<prefix>/solver-key` holding a placeholder the operator replaces.
   * @default - a new secret
   */
  readonly solverKeySecretName?: string;
  /**
   * Removal policy of the results table.
   * @default 'retain'
   */
  readonly resultsRemoval?: TableRemoval;
  /**
   * Reserve the consumer's concurrency (the sum of both mappings' maxima). Accounts whose
   * unreserved pool cannot spare it (new accounts have 10) set false: the mappings' maxima then
   * cap the fleet alone.
   * @default true
   */
  readonly reserveConsumerConcurrency?: boolean;
}

/** Validated configuration the constructs read. */
export interface ResolvedFleetStackConfig {
  /** Settings derived from the configuration. */
  readonly settings: FleetSettings;
  /** The operator's configuration with defaults applied: what the handlers receive as JSON. */
  readonly fleetConfig: ParsedFleetConfig;
  /** Alarm e-mail, if one was given. */
  readonly alarmEmail: string | undefined;
  /** Existing secret to import, if one was named. */
  readonly solverKeySecretName: string | undefined;
  /** Removal policy of the results table. */
  readonly resultsRemoval: TableRemoval;
  /** Whether the consumer's concurrency is reserved. */
  readonly reserveConsumerConcurrency: boolean;
  /** Initial `MaximumConcurrency` of each lane's mapping (the governor moves them). */
  readonly initialCeilings: { readonly normal: number; readonly high: number };
}

const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]+$/;
const TABLE_REMOVALS: readonly TableRemoval[] = ['retain', 'destroy'];

/** Context keys that are not fleet settings. */
export const STACK_CONTEXT_KEYS = [
  'plan',
  'alarmEmail',
  'solverKeySecretName',
  'resultsRemoval',
  'reserveConsumerConcurrency',
  'stackName',
] as const;

/** Fleet settings whose values are strings: every other one is a number or a boolean. */
const STRING_SETTINGS = new Set(['prefix', 'solverBaseUrl', 'dialect', 'solverProtocol', 'solverSoftId']);
/** Fleet settings whose values are objects: `-c` gives them as JSON text. */
const OBJECT_SETTINGS = new Set(['overflow', 'solverPricesUsd']);

/** How to give the overflow block, for the problem a malformed one reports. */
const OVERFLOW_CONTEXT_EXAMPLE =
  '-c overflow=\'{"baseUrl":"https://2captcha.com","capUsdPerHour":2,"capUsdPerDay":20,"priceHintUsd":0.003}\'';

/**
 * Split initial ceilings between the lanes: the high lane starts at a quarter of the ceiling
 * (never below the mapping floor), the normal lane gets the rest. The sum never exceeds the
 * fleet's maximum, so ceiling × tasks per invocation stays within the usable threads.
 */
export function initialCeilings(settings: FleetSettings): { normal: number; high: number } {
  const total = settings.maxConcurrency;
  const high = Math.max(MAPPING_MIN_CONCURRENCY, Math.floor(total / 4));
  return { normal: Math.max(MAPPING_MIN_CONCURRENCY, total - high), high };
}

/**
 * Validate the stack's options and derive the settings.
 * @throws ConfigError listing every problem found, each with its fix.
 */
export function resolveFleetStackConfig(options: FleetStackOptions = {}): ResolvedFleetStackConfig {
  const problems: ConfigProblem[] = [];
  const fleet: Record<string, unknown> = { ...(options.fleet ?? {}) };

  if (options.plan !== undefined) {
    const threads = PLAN_THREADS[options.plan.toLowerCase()];
    if (threads === undefined) {
      problems.push({
        field: 'plan',
        problem: `unknown plan "${options.plan}"`,
        fix: `use one of ${Object.entries(PLAN_THREADS)
          .map(([name, n]) => `${name} (${n} threads)`)
          .join(', ')}, or give planThreads as a number`,
      });
    } else if (fleet.planThreads !== undefined && fleet.planThreads !== threads) {
      problems.push({
        field: 'plan',
        problem: `plan "${options.plan}" has ${threads} threads but planThreads is ${String(fleet.planThreads)}`,
        fix: 'give either plan or planThreads, not both',
      });
    } else {
      fleet.planThreads = threads;
    }
  }
  if (options.alarmEmail !== undefined && !EMAIL.test(options.alarmEmail)) {
    problems.push({
      field: 'alarmEmail',
      problem: `"${options.alarmEmail}" is not an e-mail address`,
      fix: 'give one address such as ops@example.com, or leave it out',
    });
  }
  if (options.solverKeySecretName !== undefined && !SECRET_NAME.test(options.solverKeySecretName)) {
    problems.push({
      field: 'solverKeySecretName',
      problem: `"${options.solverKeySecretName}" is not a Secrets Manager secret name`,
      fix: 'use 1-512 of letters, digits and / _ + = . @ - (the name, not the ARN)',
    });
  }
  problems.push(...objectSettingProblems(fleet));
  const resultsRemoval = options.resultsRemoval ?? 'retain';
  if (!TABLE_REMOVALS.includes(resultsRemoval)) {
    problems.push({
      field: 'resultsRemoval',
      problem: `"${String(resultsRemoval)}" is not a removal policy`,
      fix: `use one of ${TABLE_REMOVALS.join(', ')}`,
    });
  }

  let settings: FleetSettings | undefined;
  try {
    settings = resolveSettings(fleet as FleetConfig);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems);
  }
  if (settings !== undefined) {
    const lanesNeed = 2 * MAPPING_MIN_CONCURRENCY;
    if (settings.maxConcurrency < lanesNeed) {
      problems.push({
        field: 'maxConcurrency',
        problem: `two lanes (normal and high priority) each need the mapping floor of ${MAPPING_MIN_CONCURRENCY} concurrent invocations, ${lanesNeed} in all, but the fleet may run ${settings.maxConcurrency}`,
        fix: `allow at least ${lanesNeed * settings.tasksPerInvocation + settings.reservedThreads} planThreads (or fewer reservedThreads / tasksPerInvocation), and maxConcurrency ≥ ${lanesNeed} if you set it`,
      });
    }
  }
  if (problems.length > 0 || settings === undefined) throw new ConfigError(problems);

  return {
    settings,
    fleetConfig: FleetConfigSchema.parse(fleet),
    alarmEmail: options.alarmEmail,
    solverKeySecretName: options.solverKeySecretName,
    resultsRemoval,
    reserveConsumerConcurrency: options.reserveConsumerConcurrency ?? true,
    initialCeilings: initialCeilings(settings),
  };
}

/**
 * Object settings (`overflow`) that arrived as text `-c` could not parse as JSON: each is taken out
 * of `fleet` (the schema would only say "expected object") and reported with how to write it.
 */
function objectSettingProblems(fleet: Record<string, unknown>): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const key of OBJECT_SETTINGS) {
    const value = fleet[key];
    if (typeof value !== 'string') continue;
    delete fleet[key];
    problems.push({
      field: key,
      problem: `is not a JSON object: ${jsonErrorOf(value)}`,
      fix: `give the block as one JSON object in single quotes, e.g. ${OVERFLOW_CONTEXT_EXAMPLE}, or as an object under "context" in cdk.json`,
    });
  }
  return problems;
}

function jsonErrorOf(text: string): string {
  try {
    JSON.parse(text);
    return 'the text is a JSON string';
  } catch (error) {
    return (error as Error).message;
  }
}

/** Reads one context value (`-c key=value` gives strings; cdk.json may give any JSON). */
export type ContextReader = (key: string) => unknown;

/**
 * Stack options from CDK context. Numbers and booleans given as strings by `-c` are converted,
 * and the `overflow` block given as JSON text is parsed; `planThreads` may also be a plan name. Values that do not convert pass through unchanged so
 * validation reports them with the rest.
 */
export function fleetOptionsFromContext(read: ContextReader): FleetStackOptions {
  const fleet: Record<string, unknown> = {};
  let plan: string | undefined;
  for (const key of Object.keys(FleetConfigSchema.shape)) {
    const raw = read(key);
    if (raw === undefined) continue;
    if (key === 'planThreads' && typeof raw === 'string' && !/^\s*\d+\s*$/.test(raw)) {
      plan = raw;
      continue;
    }
    fleet[key] = STRING_SETTINGS.has(key) ? raw : OBJECT_SETTINGS.has(key) ? parseObject(raw) : coerce(raw);
  }
  const planContext = read('plan');
  const removal = read('resultsRemoval');
  const reserve = read('reserveConsumerConcurrency');
  return {
    fleet: fleet as FleetConfig,
    ...(planContext !== undefined ? { plan: String(planContext) } : plan !== undefined ? { plan } : {}),
    ...(read('alarmEmail') !== undefined ? { alarmEmail: String(read('alarmEmail')) } : {}),
    ...(read('solverKeySecretName') !== undefined ? { solverKeySecretName: String(read('solverKeySecretName')) } : {}),
    ...(removal !== undefined ? { resultsRemoval: String(removal).toLowerCase() as TableRemoval } : {}),
    ...(reserve !== undefined ? { reserveConsumerConcurrency: coerce(reserve) !== false } : {}),
  };
}

/** JSON text (`-c overflow='{…}'`) parsed; anything else (cdk.json objects, text that is not JSON) unchanged. */
function parseObject(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  try {
    const parsed: unknown = JSON.parse(raw);
    // JSON text that is a string stays text, so validation reports it as not an object.
    return typeof parsed === 'string' ? raw : parsed;
  } catch {
    return raw;
  }
}

function coerce(raw: unknown): unknown {
  if (typeof raw !== 'string') return raw;
  const text = raw.trim();
  if (text === 'true') return true;
  if (text === 'false') return false;
  if (text !== '' && Number.isFinite(Number(text))) return Number(text);
  return raw;
}
