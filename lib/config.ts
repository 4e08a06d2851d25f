/**
 * The fleet's configuration: what the CaptchaFleet construct's props, the stack's props and
 * `-c key=value` context may set, validated at synth. Every problem is collected (the fleet
 * settings' own checks and the construct's) and thrown as one ConfigError that lists them all
 * with their fix.
 */
import { Token } from 'aws-cdk-lib';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Dialect, SolverMethod, SolverProtocol } from '../functions/core/solver-protocol.js';
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
  type OverflowConfigInput,
  type ParsedFleetConfig,
} from '../functions/core/settings.js';

/** What happens to the results table when the stack is deleted. */
export type TableRemoval = 'retain' | 'destroy';

/**
 * The overflow block: a pay-per-solve provider on the same protocol, which the governor opens a
 * second lane to while every plan thread is busy and the backlog would wait past the latency target,
 * never past the spend caps. See docs/governor.md, "Overflow".
 */
export interface OverflowProps extends Readonly<OverflowConfigInput> {
  /** The provider's base URL (in.php and res.php under it): `https://`, or `http://` on loopback only. */
  readonly baseUrl: string;
  /**
   * The provider's error dialect.
   * @default '2captcha'
   */
  readonly dialect?: Dialect;
  /**
   * The provider's wire protocol: `res-php` (in.php / res.php) or `create-task` (the JSON task API);
   * its dialect must speak it.
   * @default 'res-php'
   */
  readonly solverProtocol?: SolverProtocol;
  /**
   * The operator's developer id at this provider (`soft_id`, `softId`, or CapSolver's `appId`).
   * @default - none sent
   */
  readonly softId?: string;
  /**
   * Prices per method at this provider, USD: a solve's cost where the provider reports none.
   * @default - none (a solve's cost is the provider's own figure, or unknown)
   */
  readonly pricesUsd?: Partial<Record<SolverMethod, number>>;
  /**
   * Name of an existing Secrets Manager secret holding the provider's key.
   * @default - a new secret `<prefix>/overflow-key` holding a placeholder the operator replaces
   */
  readonly keySecretName?: string;
  /**
   * Queue wait (p95, seconds) the backlog should drain within; past it the lane opens (1–3600).
   * @default 30
   */
  readonly latencyTargetSeconds?: number;
  /** Most the provider may cost in one UTC hour, USD (at most capUsdPerDay). */
  readonly capUsdPerHour: number;
  /** Most the provider may cost in one UTC day, USD. */
  readonly capUsdPerDay: number;
  /** The provider's price per solve for the dearest method sent, USD: the budget never prices a solve lower. */
  readonly priceHintUsd: number;
  /**
   * Widest the lane may open, invocations (2–1000).
   * @default - the fleet's maxConcurrency
   */
  readonly maxConcurrency?: number;
  /**
   * Widest the lane opens while no price is learned yet, invocations.
   * @default 2
   */
  readonly probeCeiling?: number;
  /**
   * One slot starts at most one solve per this many seconds (the budget's bound on solves per slot).
   * @default 5
   */
  readonly minSolveSeconds?: number;
  /**
   * The provider's balance (USD) under which the lane does not grow.
   * @default 1
   */
  readonly haltBalance?: number;
  /**
   * The provider's balance (USD) under which the lane closes.
   * @default 0.1
   */
  readonly pauseBalance?: number;
}

/**
 * The fleet's settings (functions/core/settings.ts), one prop each: the names of `-c key=value`
 * and of the README's configuration table. The handlers receive them as JSON.
 */
export interface FleetSettingsProps extends Readonly<Omit<FleetConfig, 'overflow'>> {
  /**
   * Prefix of every resource name (queues, tables, functions, secret, bus, alarms): two fleets in
   * one account need two prefixes, even in two regions (the operator policy and the dashboard are
   * named per account); refused when another fleet of the app has it in the same account.
   * Lowercase letters, digits and dashes, 2–31 characters.
   * @default 'captcha-fleet'
   */
  readonly prefix?: string;
  /**
   * Concurrent threads the solver plan pays for (1–10000); `plan` names one instead.
   * @default 50
   */
  readonly planThreads?: number;
  /**
   * Threads kept free for other users of the same key.
   * @default 0
   */
  readonly reservedThreads?: number;
  /**
   * Lowest ceiling the governor sets while not paused (the mapping floor is 2).
   * @default 2
   */
  readonly minConcurrency?: number;
  /**
   * Highest ceiling the governor may set (2–1000); ceiling × tasksPerInvocation stays within
   * planThreads − reservedThreads.
   * @default - (planThreads − reservedThreads) ÷ tasksPerInvocation, within 2–1000
   */
  readonly maxConcurrency?: number;
  /**
   * SQS batch size = tasks one invocation solves at once (1–10).
   * @default 1
   */
  readonly tasksPerInvocation?: number;
  /**
   * Deadline of one solve (submit and polls), seconds (10–840); the consumer's timeout is this + 20 s,
   * the queues' visibility 6 × that.
   * @default 180
   */
  readonly solveDeadlineSeconds?: number;
  /**
   * The governor's memory, MB (128–10 240; Lambda's CPU follows memory). In the parked design its
   * watch polls and records every parked task, work that grows with the plan: unset, the memory
   * is sized for a full plan of 10-second solves (256 MB up to 60 threads, 2 304 MB at 600,
   * docs/cost.md "The governor's CPU"); set it for a plan of faster solves.
   * @default - sized from planThreads in the parked design, 256 MB waiting
   */
  readonly governorMemoryMb?: number;
  /**
   * The consumer's memory, MB (128–10 240; Lambda's CPU follows memory). Parked, an invocation
   * lasts about half a second, mostly waiting on I/O, its process at about 150 MB resident after
   * thousands of invocations: at 192 MB an invocation bills about 0.83 of what it bills at 256 MB
   * (three quarters of the memory, its CPU a little longer: docs/cost.md, "The consumer's
   * memory"). Raise it if Lambda's "Max Memory Used" comes near it.
   * @default - 192 MB parked one task an invocation, 256 MB waiting or in batches
   */
  readonly consumerMemoryMb?: number;
  /**
   * How a consumer waits for its answer: `park` submits, keeps the solver id and ends the
   * invocation (thread leases hold the cap; the governor watches parked tasks and hands each back
   * when its answer is ready; a leases table is created); `wait` keeps each invocation through its
   * solve (about twice the AWS bill, docs/cost.md).
   * @default 'park'
   */
  readonly solveMode?: 'park' | 'wait';
  /**
   * Resubmissions of ERROR_CAPTCHA_UNSOLVABLE before the task is recorded failed (0–5).
   * @default 2
   */
  readonly unsolvableResubmits?: number;
  /**
   * Receives before SQS moves a message to the DLQ (at least 5, as AWS advises for Lambda).
   * @default 10
   */
  readonly maxReceiveCount?: number;
  /**
   * Lifetime of a result record, seconds (through the table's TTL).
   * @default 86400
   */
  readonly resultTtlSeconds?: number;
  /**
   * Balance (USD) under which the governor never scales up.
   * @default 1
   */
  readonly haltBalance?: number;
  /**
   * Balance (USD) under which consumption pauses (tasks wait in the queue); at most haltBalance.
   * @default 0.1
   */
  readonly pauseBalance?: number;
  /**
   * Error rate above which the governor does not scale up, and the error alarm's threshold.
   * @default 0.05
   */
  readonly errorRateThreshold?: number;
  /**
   * Backlog above which a capacity shortfall is reported.
   * @default 20
   */
  readonly shortfallBacklog?: number;
  /**
   * p95 solve time (ms) above which a capacity shortfall is reported.
   * @default 60000
   */
  readonly shortfallP95Ms?: number;
  /**
   * Age of the oldest queued task (seconds) that raises the alarm.
   * @default 300
   */
  readonly oldestMessageAlarmSeconds?: number;
  /**
   * Governor tick inside its once-a-minute invocation, ms.
   * @default 10000
   */
  readonly tickMs?: number;
  /**
   * Solver API base URL (in.php and res.php under it): `https://` (res.php carries the key in its
   * query string), `http://` only on loopback.
   * @default 'https://ocr.captchaai.com'
   */
  readonly solverBaseUrl?: string;
  /**
   * The solver's error dialect.
   * @default 'captchaai'
   */
  readonly dialect?: Dialect;
  /**
   * The solver's wire protocol: `res-php` (in.php / res.php) or `create-task` (the JSON task API:
   * createTask / getTaskResult / getBalance); the dialect must speak it.
   * @default 'res-php'
   */
  readonly solverProtocol?: SolverProtocol;
  /**
   * The operator's developer id at the solver (in.php `soft_id`, JSON `softId`, CapSolver `appId`);
   * never a producer's.
   * @default - none sent
   */
  readonly solverSoftId?: string;
  /**
   * Prices per method at the solver, USD: a solve's cost where the provider reports none (res.php never does),
   * and (the dearest) the price the governor's spend grant counts by until the balance shows the real one.
   * @default - none (a solve's cost is the provider's own figure, or unknown; the grant counts at $0.01 until learned)
   */
  readonly solverPricesUsd?: Partial<Record<SolverMethod, number>>;
  /**
   * Put answers (tokens are credentials) in completion events.
   * @default false
   */
  readonly eventsIncludeAnswer?: boolean;
  /**
   * A pay-per-solve provider for surges past the plan.
   * @default - no overflow lane (nothing of it is created)
   */
  readonly overflow?: OverflowProps;
}

/** Properties of the CaptchaFleet construct (and the CaptchaFleetStack): the fleet's settings and the deployment's own. */
export interface CaptchaFleetProps extends FleetSettingsProps {
  /**
   * A plan name from PLAN_THREADS (`basic`, `standard`, `advance`, `enterprise`) instead of
   * `planThreads`.
   * @default - `planThreads`
   */
  readonly plan?: string;
  /**
   * E-mail address subscribed to the alarm topic (the recipient confirms the subscription).
   * @default - no subscription; subscribe to the topic yourself
   */
  readonly alarmEmail?: string;
  /**
   * Name of an existing Secrets Manager secret that holds the solver key. When absent the fleet
   * creates `<prefix>/solver-key` holding a placeholder the operator replaces.
   * @default - a new secret
   */
  readonly solverKeySecretName?: string;
  /**
   * The secret that holds the solver key, from your own CDK code: a `Secret` your app creates (in
   * this stack or another of the app, in the fleet's region), or one imported with
   * `Secret.fromSecretNameV2` or `fromSecretAttributes`. The fleet creates none, and grants its
   * functions read on this one (and decrypt on its `encryptionKey`, where the secret carries one;
   * an imported secret's customer managed key is yours to grant, as with `solverKeySecretName`).
   * Not with `solverKeySecretName`; not from CDK context (`-c`): a secret is an object.
   * @default - `solverKeySecretName`'s secret, else a new secret
   */
  readonly solverKeySecret?: secretsmanager.ISecret;
  /**
   * The overflow provider's key's secret, from your own CDK code, as `solverKeySecret` is the
   * primary's. Only with the `overflow` block, and not with its `keySecretName`.
   * @default - `overflow.keySecretName`'s secret, else a new secret
   */
  readonly overflowKeySecret?: secretsmanager.ISecret;
  /**
   * Removal policy of the results table.
   * @default 'retain'
   */
  readonly resultsRemoval?: TableRemoval;
  /**
   * Reserve the consumer's concurrency (the sum of both mappings' maxima), the overflow
   * consumer's and the governor's. Accounts whose unreserved pool cannot spare it (new accounts
   * have 10) set false: the mappings' maxima then cap the fleet alone, and no function reserves.
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
  /** The solver key's secret the app gave, if it gave one. */
  readonly solverKeySecret: secretsmanager.ISecret | undefined;
  /** The overflow provider's key's secret the app gave, if it gave one. */
  readonly overflowKeySecret: secretsmanager.ISecret | undefined;
  /** Removal policy of the results table. */
  readonly resultsRemoval: TableRemoval;
  /** Whether the consumer's concurrency is reserved. */
  readonly reserveConsumerConcurrency: boolean;
  /** Initial `MaximumConcurrency` of each lane's mapping (the governor moves them). */
  readonly initialCeilings: { readonly normal: number; readonly high: number };
}

const EMAIL = /^[^@\s]+@[^@\s]+\.[^@\s]+$/;
const TABLE_REMOVALS: readonly TableRemoval[] = ['retain', 'destroy'];

/** Props of the construct that are not fleet settings (the deployment's own). */
export const DEPLOYMENT_PROP_KEYS = [
  'plan',
  'alarmEmail',
  'solverKeySecretName',
  'solverKeySecret',
  'overflowKeySecret',
  'resultsRemoval',
  'reserveConsumerConcurrency',
] as const satisfies readonly (keyof CaptchaFleetProps)[];

/** Props only code can give (objects): CDK context cannot carry them. */
const CODE_ONLY_PROP_KEYS: ReadonlySet<string> = new Set(['solverKeySecret', 'overflowKeySecret']);

/** Context keys that are not fleet settings: the deployment's props and the stack's name. */
export const STACK_CONTEXT_KEYS = [
  ...DEPLOYMENT_PROP_KEYS.filter((key) => !CODE_ONLY_PROP_KEYS.has(key)),
  'stackName',
] as const;

/** Every prop of {@link CaptchaFleetProps}: the fleet settings' keys, then the deployment's. */
export function captchaFleetPropKeys(): string[] {
  return [...Object.keys(FleetConfigSchema.shape), ...DEPLOYMENT_PROP_KEYS];
}

/** The CaptchaFleet props among `props` (a stack's props carry StackProps beside them); undefined values dropped. */
export function pickCaptchaFleetProps(props: object): CaptchaFleetProps {
  const known = new Set(captchaFleetPropKeys());
  return Object.fromEntries(
    Object.entries(props).filter(([key, value]) => known.has(key) && value !== undefined),
  ) as CaptchaFleetProps;
}

/** Fleet settings whose values are strings: every other one is a number or a boolean. */
const STRING_SETTINGS = new Set(['prefix', 'solverBaseUrl', 'dialect', 'solverProtocol', 'solverSoftId']);
/** Fleet settings whose values are objects: `-c` gives them as JSON text. */
const OBJECT_SETTINGS = new Set(['overflow', 'solverPricesUsd']);

/** How to give each object setting on the command line, for the problem a malformed one reports. */
const OBJECT_CONTEXT_EXAMPLES = {
  overflow:
    '-c overflow=\'{"baseUrl":"https://2captcha.com","capUsdPerHour":2,"capUsdPerDay":20,"priceHintUsd":0.003}\'',
  solverPricesUsd: '-c solverPricesUsd=\'{"turnstile":0.00145,"base64":0.0007}\'',
} as const;

/**
 * Split initial ceilings between the lanes: the high lane starts at a quarter of the ceiling
 * (never below the mapping floor), the normal lane gets the rest. From a maximum of twice the
 * floor the sum is the fleet's maximum, so ceiling × tasks per invocation stays within the usable
 * threads; under it (the parked design only: its thread leases hold the threads) each lane keeps
 * the floor, the invocations past the slots waiting for one.
 */
export function initialCeilings(settings: FleetSettings): { normal: number; high: number } {
  const total = settings.maxConcurrency;
  const high = Math.max(MAPPING_MIN_CONCURRENCY, Math.floor(total / 4));
  return { normal: Math.max(MAPPING_MIN_CONCURRENCY, total - high), high };
}

/**
 * Validate the fleet's props and derive the settings.
 * @throws ConfigError listing every problem found, each with its fix.
 */
export function resolveFleetStackConfig(given: CaptchaFleetProps = {}): ResolvedFleetStackConfig {
  // null is no props, as undefined. From JavaScript anything else comes: a number or a Map was
  // taken as no props (a default 50-thread fleet, the Map's settings ignored), a string as props "0, 1, 2".
  const props: CaptchaFleetProps = given ?? {};
  if (!isPropsObject(props as unknown))
    throw new ConfigError([
      {
        field: '(props)',
        problem: `${describeValue(props)} is not an object of props`,
        fix: "give the props as one object, e.g. { planThreads: 50, alarmEmail: 'ops@example.com' }, or leave them out",
      },
    ]);
  const problems: ConfigProblem[] = unknownPropProblems(props);
  const settingsKeys = new Set(Object.keys(FleetConfigSchema.shape));
  const fleet: Record<string, unknown> = Object.fromEntries(
    Object.entries(props).filter(([key, value]) => settingsKeys.has(key) && value !== undefined),
  );
  // A token (a value known only at deploy) reached the schema as a huge negative number or a
  // "${Token[…]}" text, and was refused as "Too small: expected int to be >= -9007199254740991".
  for (const [key, value] of Object.entries(fleet)) {
    const field = tokenPath(value, key);
    if (field === undefined) continue;
    delete fleet[key];
    problems.push({
      field,
      problem:
        'is a token, a value known only at deploy (a parameter, an SSM value, another resource’s attribute): the fleet sizes its queues, mappings, alarms and functions from its settings at synth',
      fix: `give ${field} as a literal value (read it in your app before the construct, e.g. from context or the environment)`,
    });
  }
  problems.push(...planProblems(props.plan, fleet));
  // A token (an address read at deploy) is SNS's to check; a literal is checked here.
  // null is "not given", as for the other props (it read "null" is not an e-mail address).
  const alarmEmail: unknown = props.alarmEmail;
  if (
    alarmEmail !== undefined &&
    alarmEmail !== null &&
    !Token.isUnresolved(alarmEmail) &&
    (typeof alarmEmail !== 'string' || !EMAIL.test(alarmEmail))
  ) {
    problems.push({
      field: 'alarmEmail',
      problem: `${typeof alarmEmail === 'string' ? `"${alarmEmail}"` : describeValue(alarmEmail)} is not an e-mail address`,
      fix: 'give one address such as ops@example.com, or leave it out',
    });
  }
  if (props.solverKeySecretName !== undefined && Token.isUnresolved(props.solverKeySecretName)) {
    problems.push({
      field: 'solverKeySecretName',
      problem:
        'is a token, a value known only at deploy (a secret made in this app, a name read from SSM): the fleet checks the name and grants read on the secret by it at synth',
      fix: 'give the literal name of a secret in this account and region, or pass the secret itself as solverKeySecret',
    });
  } else if (
    props.solverKeySecretName !== undefined &&
    (typeof props.solverKeySecretName !== 'string' || !SECRET_NAME.test(props.solverKeySecretName))
  ) {
    problems.push({
      field: 'solverKeySecretName',
      problem: `"${props.solverKeySecretName}" is not a Secrets Manager secret name`,
      fix: 'use 1-512 of letters, digits and / _ + = . @ - (the name, not the ARN)',
    });
  }
  problems.push(...secretProblems(props));
  // From JavaScript a string slips through the type: 'false' counted as true and reserved the lanes.
  const reserve: unknown = props.reserveConsumerConcurrency;
  if (reserve !== undefined && typeof reserve !== 'boolean') {
    problems.push({
      field: 'reserveConsumerConcurrency',
      problem: `${JSON.stringify(reserve)} is not true or false`,
      fix: 'give true or false (a boolean, not text), or leave it out (true)',
    });
  }
  problems.push(...objectSettingProblems(fleet));
  const resultsRemoval = props.resultsRemoval ?? 'retain';
  if (!TABLE_REMOVALS.includes(resultsRemoval)) {
    problems.push({
      field: 'resultsRemoval',
      problem: `"${String(resultsRemoval)}" is not a removal policy`,
      fix: `use one of ${TABLE_REMOVALS.join(', ')}`,
    });
  }

  let settings: FleetSettings | undefined;
  try {
    // Sized for the stack's two lanes, so a fix the check gives is one the stack takes.
    settings = resolveSettings(fleet as FleetConfig, { lanes: 2 });
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    problems.push(...error.problems);
  }
  // Waiting, the two lanes' mapping floors are invocations each holding its threads: the fleet
  // must be allowed both. Parked, the thread leases hold the threads whatever the invocations: a
  // ceiling under both floors opens that many slots and the lanes take turns (splitOverLanes).
  if (settings !== undefined && settings.solveMode === 'wait') {
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
    alarmEmail: props.alarmEmail ?? undefined,
    solverKeySecretName: props.solverKeySecretName,
    solverKeySecret: props.solverKeySecret,
    overflowKeySecret: props.overflowKeySecret,
    resultsRemoval,
    reserveConsumerConcurrency: props.reserveConsumerConcurrency ?? true,
    initialCeilings: initialCeilings(settings),
  };
}

/** The first place in `value` (a setting, or an object setting's members) that is a token, or undefined. */
function tokenPath(value: unknown, path: string): string | undefined {
  if (Token.isUnresolved(value)) return path;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  for (const [key, member] of Object.entries(value)) {
    const found = tokenPath(member, `${path}.${key}`);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** A secret the app gives: a Secrets Manager secret, one way per key, for a lane that exists. */
function secretProblems(props: CaptchaFleetProps): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const given = [
    ['solverKeySecret', props.solverKeySecret, 'solverKeySecretName', props.solverKeySecretName],
    ['overflowKeySecret', props.overflowKeySecret, 'overflow.keySecretName', props.overflow?.keySecretName],
  ] as const;
  for (const [field, secret, byName, name] of given) {
    if (secret === undefined) continue;
    if (!isSecret(secret)) {
      problems.push({
        field,
        problem: 'is not a Secrets Manager secret (an ISecret with a secretArn)',
        fix: 'pass a Secret your app creates, or one from Secret.fromSecretNameV2 / fromSecretAttributes',
      });
    } else if (name !== undefined) {
      problems.push({
        field,
        problem: `is given beside ${byName}: the key would come from two secrets`,
        fix: `keep one of ${field} and ${byName}`,
      });
    }
  }
  // One key for both lanes: the overflow lane would submit on the plan's own threads, which the
  // governor holds to the plan's cap without counting the overflow lane's (accepted silently before).
  const sameSecret =
    isSecret(props.solverKeySecret) &&
    isSecret(props.overflowKeySecret) &&
    (props.solverKeySecret === props.overflowKeySecret ||
      props.solverKeySecret.secretArn === props.overflowKeySecret.secretArn);
  const sameName =
    typeof props.solverKeySecretName === 'string' && props.solverKeySecretName === props.overflow?.keySecretName;
  if (sameSecret || sameName) {
    problems.push({
      field: sameSecret ? 'overflowKeySecret' : 'overflow.keySecretName',
      problem:
        "is the plan's own key: the overflow lane would submit on the plan's threads, past the thread cap the governor holds the plan to",
      fix: "give the overflow provider's own key (its account's), or leave the overflow block out",
    });
  }
  if (props.overflowKeySecret !== undefined && props.overflow === undefined) {
    problems.push({
      field: 'overflowKeySecret',
      problem: 'is given without the overflow block: there is no overflow provider to read it',
      fix: 'add the overflow block (baseUrl, capUsdPerHour, capUsdPerDay, priceHintUsd), or leave overflowKeySecret out',
    });
  }
  return problems;
}

/** A value from JavaScript in a few words: `a Map`, `the number 42`, `the text "abc"`. */
function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return `a ${(value as object).constructor?.name ?? 'object'}`;
  if (typeof value === 'string')
    return `the text ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value)}`;
  return `the ${typeof value} ${String(value)}`;
}

/** Whether `value` looks like a Secrets Manager secret to CDK (from JavaScript, anything may come). */
function isSecret(value: unknown): value is secretsmanager.ISecret {
  if (typeof value !== 'object' || value === null) return false;
  const secret = value as Partial<secretsmanager.ISecret>;
  return typeof secret.secretArn === 'string' && typeof secret.grantRead === 'function';
}

/** Props no fleet knows (a misspelt name from plain JavaScript, or a key of another version). */
function unknownPropProblems(props: object): ConfigProblem[] {
  const known = new Set(captchaFleetPropKeys());
  const unknown = Object.keys(props).filter((key) => !known.has(key));
  if (unknown.length === 0) return [];
  return [
    {
      field: unknown.join(', '),
      problem: `${unknown.length === 1 ? 'is not a prop' : 'are not props'} of CaptchaFleet`,
      fix: `remove ${unknown.length === 1 ? 'it' : 'them'} (a misspelt name?); the props are ${[...known].join(', ')}`,
    },
  ];
}

/** A plan name resolved into `fleet.planThreads`, or the problem with it. */
function planProblems(plan: string | undefined, fleet: Record<string, unknown>): ConfigProblem[] {
  if (plan === undefined || plan === null) return [];
  // From JavaScript: `plan: 5` (for planThreads) threw "plan.toLowerCase is not a function".
  if (typeof plan !== 'string')
    return [
      {
        field: 'plan',
        problem: `${JSON.stringify(plan)} is not a plan name`,
        fix: `give a plan's name as text (${Object.keys(PLAN_THREADS).join(', ')}), or the number of threads as planThreads`,
      },
    ];
  const threads = Object.hasOwn(PLAN_THREADS, plan.toLowerCase()) ? PLAN_THREADS[plan.toLowerCase()] : undefined;
  if (threads === undefined)
    return [
      {
        field: 'plan',
        problem: `unknown plan "${plan}"`,
        fix: `use one of ${Object.entries(PLAN_THREADS)
          .map(([name, n]) => `${name} (${n} threads)`)
          .join(', ')}, or give planThreads as a number`,
      },
    ];
  if (fleet.planThreads !== undefined && fleet.planThreads !== threads)
    return [
      {
        field: 'plan',
        problem: `plan "${plan}" has ${threads} threads but planThreads is ${String(fleet.planThreads)}`,
        fix: 'give either plan or planThreads, not both',
      },
    ];
  fleet.planThreads = threads;
  return [];
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
    const parsed = parsedJsonOf(value);
    const example = OBJECT_CONTEXT_EXAMPLES[key as keyof typeof OBJECT_CONTEXT_EXAMPLES];
    // Text that holds a JSON object came from the construct's caller (-c text is parsed before):
    // the construct takes the object itself.
    problems.push(
      parsed.ok && isPropsObject(parsed.value)
        ? {
            field: key,
            problem: 'is text holding a JSON object: the construct takes the object itself',
            fix: `pass the object (e.g. JSON.parse of that text), not its text; from the command line, ${example}`,
          }
        : {
            field: key,
            problem: `is not a JSON object: ${parsed.ok ? `the text is JSON ${parsed.value === null ? 'null' : typeof parsed.value}, not an object` : parsed.error}`,
            fix: `give the block as one JSON object in single quotes, e.g. ${example}, or as an object under "context" in cdk.json`,
          },
    );
  }
  return problems;
}

function parsedJsonOf(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, error: (error as Error).message };
  }
}

/**
 * An object whose own keys can be props: not a primitive, a list, or a collection whose entries
 * are not its keys (a Map, a Set) or a Date or a RegExp. (An instance of the caller's own class
 * holding the props as its fields is one.)
 */
function isPropsObject(value: unknown): boolean {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  return !(value instanceof Map || value instanceof Set || value instanceof Date || value instanceof RegExp);
}

/** Reads one context value (`-c key=value` gives strings; cdk.json may give any JSON). */
export type ContextReader = (key: string) => unknown;

/**
 * The fleet's props from CDK context. Numbers and booleans given as strings by `-c` are converted,
 * and the `overflow` block given as JSON text is parsed; `planThreads` may also be a plan name.
 * Values that do not convert pass through unchanged so validation reports them with the rest.
 */
export function fleetOptionsFromContext(read: ContextReader): CaptchaFleetProps {
  const props: Record<string, unknown> = {};
  for (const key of Object.keys(FleetConfigSchema.shape)) {
    const raw = read(key);
    if (raw === undefined) continue;
    if (key === 'planThreads' && typeof raw === 'string' && !/^\s*\d+\s*$/.test(raw)) {
      props.plan = raw;
      continue;
    }
    props[key] = STRING_SETTINGS.has(key) ? raw : OBJECT_SETTINGS.has(key) ? parseObject(raw) : coerce(raw);
  }
  const planContext = read('plan');
  const removal = read('resultsRemoval');
  const reserve = read('reserveConsumerConcurrency');
  if (planContext !== undefined) props.plan = String(planContext);
  if (read('alarmEmail') !== undefined) props.alarmEmail = String(read('alarmEmail'));
  if (read('solverKeySecretName') !== undefined) props.solverKeySecretName = String(read('solverKeySecretName'));
  if (removal !== undefined) props.resultsRemoval = String(removal).toLowerCase();
  if (reserve !== undefined) props.reserveConsumerConcurrency = coerce(reserve) !== false;
  return props as CaptchaFleetProps;
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
