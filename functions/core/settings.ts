/**
 * Fleet settings: the one source of names, limits and timings shared by the CDK stack, the
 * Lambda handlers and the local runtime. Pure: parsing and derivation only, no I/O.
 */
import { z } from 'zod';
import {
  DIALECT_PROTOCOLS,
  DIALECTS,
  type Dialect,
  dialectsSpeaking,
  METHODS,
  SOLVER_PROTOCOLS,
  speaks,
} from './solver-protocol.js';

/** Mapping floor of an SQS event source mapping's `ScalingConfig.MaximumConcurrency`. */
export const MAPPING_MIN_CONCURRENCY = 2;
/** Ceiling of `ScalingConfig.MaximumConcurrency`. */
export const MAPPING_MAX_CONCURRENCY = 1000;

/** Known CaptchaAI plans and their concurrent threads, so operators may name a plan instead. */
export const PLAN_THREADS: Readonly<Record<string, number>> = {
  basic: 5,
  standard: 15,
  advance: 50,
  enterprise: 200,
};

const int = (min: number, max: number) => z.number().int().min(min).max(max);

/** Secrets Manager's secret name alphabet (a name, not an ARN). */
export const SECRET_NAME = /^[A-Za-z0-9/_+=.@-]{1,512}$/;

/**
 * The operator's developer id with a provider (2captcha's and Anti-Captcha's `soft_id` /
 * `softId`, a number; CapSolver's `appId`, a UUID): credited with a share of the account's spend.
 * Never a producer's: the task schema refuses the name.
 */
const softId = z
  .string()
  .regex(/^[A-Za-z0-9-]{1,64}$/, 'digits (soft_id) or a UUID (CapSolver appId)')
  .describe("the operator's developer id at the provider");

/** Per-method prices, USD: a solve's cost where the provider reports none (res.php never does). */
const prices = z.partialRecord(z.enum(METHODS), z.number().min(0).max(10));

/**
 * The overflow provider: a pay-per-solve service speaking the same in.php / res.php protocol,
 * which the governor opens a second lane to when the plan's threads cannot keep the queue wait
 * within `latencyTargetSeconds`, never spending past the caps. Absent = no overflow (the stack
 * then creates nothing for it). See docs/governor.md, "Overflow".
 */
export const OverflowConfigSchema = z
  .object({
    /** The provider's base URL (in.php and res.php under it): `https://`, or http:// on loopback (a local simulator). */
    baseUrl: z.url(),
    /** Which error dialect the provider speaks. */
    dialect: z.enum(DIALECTS).default('2captcha'),
    /** Which wire protocol: in.php / res.php, or the JSON task API (createTask). */
    solverProtocol: z.enum(SOLVER_PROTOCOLS).default('res-php'),
    /** The operator's developer id at this provider. @default none */
    softId: softId.optional(),
    /** Prices per method at this provider, USD (the cost of a solve where it reports none). @default none */
    pricesUsd: prices.optional(),
    /**
     * AWS: name of an existing Secrets Manager secret holding the provider's key. When absent the
     * stack creates `<prefix>/overflow-key` holding a placeholder the operator replaces.
     */
    keySecretName: z.string().regex(SECRET_NAME, 'a Secrets Manager secret name (not an ARN)').optional(),
    /** Queue wait (p95) the backlog should drain within, seconds: past it, overflow opens. */
    latencyTargetSeconds: int(1, 3_600).default(30),
    /** Most the overflow provider may cost in one UTC hour, USD. */
    capUsdPerHour: z.number().positive().max(100_000),
    /** Most the overflow provider may cost in one UTC day, USD. */
    capUsdPerDay: z.number().positive().max(1_000_000),
    /** The provider's price per solve for the dearest method sent, USD: the budget never prices a solve lower. */
    priceHintUsd: z.number().positive().max(10),
    /** Widest the overflow lane may open (invocations). @default the fleet's maxConcurrency */
    maxConcurrency: int(MAPPING_MIN_CONCURRENCY, MAPPING_MAX_CONCURRENCY).optional(),
    /** Widest the lane opens while no price is learned yet (invocations). */
    probeCeiling: int(MAPPING_MIN_CONCURRENCY, MAPPING_MAX_CONCURRENCY).default(2),
    /**
     * The budget's bound on solves per slot, seconds: one slot starts at most one solve per this
     * many seconds. The overflow consumer keeps it true by reading no answer sooner after
     * submitting (a faster answer waits for it); lower it for a mix of faster solves.
     */
    minSolveSeconds: z.number().min(0.01).max(600).default(5),
    /** The provider's balance (USD) under which the lane does not grow. */
    haltBalance: z.number().min(0).default(1),
    /** The provider's balance (USD) under which the lane closes. */
    pauseBalance: z.number().min(0).default(0.1),
  })
  .strict();

export type OverflowConfigInput = z.input<typeof OverflowConfigSchema>;
export type ParsedOverflowConfig = z.output<typeof OverflowConfigSchema>;

/** The overflow provider's settings, resolved against the fleet's. */
export interface OverflowSettings extends ParsedOverflowConfig {
  maxConcurrency: number;
  /** `<prefix>-consumer-overflow`: the function its mapping feeds. */
  functionName: string;
}

/** How a consumer waits for an answer (`solveMode`). */
export const SOLVE_MODES = ['park', 'wait'] as const;
export type SolveMode = (typeof SOLVE_MODES)[number];

/**
 * What an operator may set (stack props, `-c` context, CLI flags, environment).
 * Every field has a default so an empty object is a valid configuration.
 */
export const FleetConfigSchema = z.object({
  /** Prefix of every resource name. */
  prefix: z
    .string()
    .regex(/^[a-z][a-z0-9-]{1,30}$/, 'lowercase letters, digits and dashes, 2-31 chars')
    .default('captcha-fleet'),
  /** Concurrent threads the solver plan pays for. */
  planThreads: int(1, 10_000).default(50),
  /** Threads kept free for other users of the same key. */
  reservedThreads: int(0, 10_000).default(0),
  /** Lowest ceiling the governor sets while not paused (the mapping's floor is 2). */
  minConcurrency: int(MAPPING_MIN_CONCURRENCY, MAPPING_MAX_CONCURRENCY).default(MAPPING_MIN_CONCURRENCY),
  /** Highest ceiling the governor may set; defaults to what the plan allows. */
  maxConcurrency: int(MAPPING_MIN_CONCURRENCY, MAPPING_MAX_CONCURRENCY).optional(),
  /** SQS batch size = tasks solved at once by one invocation. */
  tasksPerInvocation: int(1, 10).default(1),
  /** Overall deadline of one solve (submit + polls), seconds. */
  solveDeadlineSeconds: int(10, 840).default(180),
  /**
   * The governor's memory, MB (its CPU follows it). Unset: sized from the plan in the parked
   * design (functions/core/watch-sizing.ts), 256 MB waiting.
   */
  governorMemoryMb: int(128, 10_240).optional(),
  /**
   * The consumer's memory, MB (its CPU follows it). Unset: 192 MB parked one task an invocation, 256 MB waiting or in batches
   * (functions/core/function-sizing.ts, consumerSizing).
   */
  consumerMemoryMb: int(128, 10_240).optional(),
  /**
   * How a consumer waits for its solver's answer. `park` (the default): it takes a thread lease,
   * submits, keeps the solver id on the record and ends its invocation, the task's message hidden
   * until the solve's deadline; the governor, whose invocation runs all minute, polls every
   * parked submission each second and makes the message visible again when its answer is ready,
   * and a short invocation records it (docs/consumer.md "Parking"). `wait`: each invocation waits
   * through its solve, polling (about 2× the AWS bill at the same p95, docs/cost.md); the overflow
   * lane always waits.
   */
  solveMode: z.enum(SOLVE_MODES).default('park'),
  /** How often ERROR_CAPTCHA_UNSOLVABLE is resubmitted before the task is recorded failed. */
  unsolvableResubmits: int(0, 5).default(2),
  /** Receives before SQS moves a message to the DLQ (AWS guidance: at least 5). */
  maxReceiveCount: int(5, 1000).default(10),
  /** Lifetime of a result record, seconds. */
  resultTtlSeconds: int(60, 366 * 86_400).default(86_400),
  /** Balance (USD) under which scaling halts: no increase, the ceiling frozen where it stands. */
  haltBalance: z.number().min(0).default(1),
  /** Balance (USD) under which consumption pauses. */
  pauseBalance: z.number().min(0).default(0.1),
  /** Error rate above which the governor does not scale up. */
  errorRateThreshold: z.number().gt(0).lt(1).default(0.05),
  /** Backlog above which a capacity shortfall is warned about. */
  shortfallBacklog: int(0, 1_000_000).default(20),
  /** p95 solve time (ms) above which a capacity shortfall is warned about. */
  shortfallP95Ms: int(1000, 3_600_000).default(60_000),
  /** Age of the oldest message (s) that raises an alarm. */
  oldestMessageAlarmSeconds: int(10, 1_209_600).default(300),
  /** Governor tick inside one scheduled invocation, ms. */
  tickMs: int(100, 60_000).default(10_000),
  /**
   * Solver API base URL (in.php and res.php live under it). `https://` except on a loopback
   * address (the local simulator): res.php carries the key in its query string.
   */
  solverBaseUrl: z.url().default('https://ocr.captchaai.com'),
  /** Which solver's error dialect (and task type spellings) to speak. */
  dialect: z.enum(DIALECTS).default('captchaai'),
  /**
   * The wire protocol: `res-php` (in.php / res.php) or `create-task` (the JSON task API:
   * createTask / getTaskResult / getBalance). The dialect must speak it (CaptchaAI speaks res-php only).
   */
  solverProtocol: z.enum(SOLVER_PROTOCOLS).default('res-php'),
  /** The operator's developer id at the solver (in.php `soft_id`, JSON `softId` / CapSolver `appId`). @default none */
  solverSoftId: softId.optional(),
  /**
   * Prices per method at the solver, USD: the cost of a solve where the provider reports none,
   * and (the dearest) the price the spend grant counts by until the balance shows the real one
   * (functions/core/governor/price.ts; unset: an assumed $0.01). @default none
   */
  solverPricesUsd: prices.optional(),
  /** Publish the answer inside completion events (tokens are credentials: off by default). */
  eventsIncludeAnswer: z.boolean().default(false),
  /** The overflow provider (off unless set). */
  overflow: OverflowConfigSchema.optional(),
});

export type FleetConfig = z.input<typeof FleetConfigSchema>;
export type ParsedFleetConfig = z.output<typeof FleetConfigSchema>;

/** Settings derived from the configuration: what every part of the fleet reads. */
export interface FleetSettings extends Omit<ParsedFleetConfig, 'overflow'> {
  /** The overflow provider, resolved; undefined when none is configured. */
  overflow: OverflowSettings | undefined;
  /** Threads this fleet may use: plan threads less those reserved for others. */
  effectiveCap: number;
  /** `maxConcurrency` resolved against the plan: never lets ceiling × batch exceed the cap. */
  maxConcurrency: number;
  /** Function timeout: the solve deadline plus time to claim and record. */
  functionTimeoutSeconds: number;
  /** Queue visibility timeout: AWS suggests 6 × function timeout for Lambda consumers. */
  visibilityTimeoutSeconds: number;
  /** How long a claim protects a task from other deliveries. */
  leaseSeconds: number;
  /** The task lanes and their DLQ; the reports queue (producers' bad / good reports) and its own DLQ. */
  queueNames: { normal: string; high: string; dlq: string; reports: string; reportsDlq: string };
  tableNames: { results: string; governor: string; leases: string };
  /**
   * CloudWatch namespace of every metric the fleet emits and reads (`CaptchaFleet/<prefix>`): the
   * fleet's identity in its metrics, so two fleets in one account and region never read each
   * other's signals (see {@link fleetMetricsNamespace}).
   */
  metricsNamespace: string;
  /** `source` of the fleet's completion events (`captcha-fleet.<prefix>`; see {@link fleetEventSource}). */
  eventSource: string;
}

/**
 * The fleet's metrics namespace. A namespace rather than a `fleet` dimension: every emitter and
 * reader already takes the namespace from the settings, so EMF documents (whatever their
 * dimension sets), GetMetricData queries, alarms and SEARCH expressions (`{"CaptchaFleet/<prefix>",…}`
 * schemas) cannot disagree about it. A dimension would have to be added to every dimension set and
 * every query by hand, and a query that missed it would read another dimension set: nothing.
 */
export function fleetMetricsNamespace(prefix: string): string {
  return `CaptchaFleet/${prefix}`;
}

/** The fleet's completion-event `source`: its bus policy admits only this source, from the consumer. */
export function fleetEventSource(prefix: string): string {
  return `captcha-fleet.${prefix}`;
}

/** Hosts a solver may be reached on over plain HTTP: loopback only (the local simulator). */
export function isLoopbackHost(hostname: string): boolean {
  const host = hostname.toLowerCase();
  return host === 'localhost' || host === '[::1]' || /^127(?:\.\d{1,3}){3}$/.test(host);
}

/** Seconds a handler keeps for claiming and recording around a solve. */
export const RECORD_MARGIN_SECONDS = 20;

/** A configuration problem with what to do about it. */
export interface ConfigProblem {
  field: string;
  problem: string;
  fix: string;
}

/** Thrown when a configuration cannot be used; lists every problem at once. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  /**
   * @param where whose configuration, where more than one may be built (a construct's path in
   *   a CDK app of two fleets); said in the message
   */
  constructor(
    readonly problems: ConfigProblem[],
    readonly where?: string,
  ) {
    super(
      `Invalid captcha-fleet configuration${where !== undefined ? ` of ${where}` : ''} (${problems.length} problem${problems.length === 1 ? '' : 's'}):\n` +
        problems.map((p) => `  - ${p.field}: ${p.problem}. Fix: ${p.fix}`).join('\n'),
    );
  }
}

/** Derived values a caller may set instead; the cross-checks still apply. */
export interface SettingsOverrides {
  visibilityTimeoutSeconds?: number;
  /**
   * The local runtime compresses time (a demo's function timeout is seconds, not minutes);
   * the consumer caps each solve by the time its invocation has left, so a shorter timeout
   * than `solveDeadlineSeconds + RECORD_MARGIN_SECONDS` only shortens the deadline.
   */
  functionTimeoutSeconds?: number;
  /**
   * The lanes whose mappings must each run at least the mapping floor: 2 for the deployed stack
   * (normal and high, each its own mapping), whose size check then gives a fix that works
   * (sized for one lane, "raise planThreads to at least 2" was refused next for 4). Waiting
   * design only (`solveMode: wait`): parked, the thread leases hold the threads whatever the
   * invocations, and the plan needs the floor once. @default 1
   */
  lanes?: number;
}

/**
 * Parse and cross-check a configuration; derive the settings.
 * @throws ConfigError listing every problem found.
 */
export function resolveSettings(input: FleetConfig = {}, overrides: SettingsOverrides = {}): FleetSettings {
  const parsed = FleetConfigSchema.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => ({
      field: issue.path.join('.') || '(config)',
      problem: issue.message,
      fix:
        issue.code === 'unrecognized_keys'
          ? unknownKeysFix(issue.path.join('.'), issue.keys)
          : fixFor(issue.path.join('.')),
    }));
    // Every problem at once: a URL that parses but would carry a key in the clear is one too.
    const flagged = new Set(problems.map((p) => p.field));
    for (const [field, url] of urlsOf(input))
      if (!flagged.has(field) && URL.canParse(url)) problems.push(...solverUrlProblems(url, field));
    throw new ConfigError(problems);
  }
  const config = parsed.data;
  const problems: ConfigProblem[] = [];
  const effectiveCap = config.planThreads - config.reservedThreads;
  if (effectiveCap < 1) {
    problems.push({
      field: 'reservedThreads',
      problem: `reserves ${config.reservedThreads} of ${config.planThreads} plan threads, leaving none for the fleet`,
      fix: 'lower reservedThreads below planThreads or buy more threads',
    });
  }
  const capCeiling = Math.floor(effectiveCap / config.tasksPerInvocation);
  problems.push(...mappingFloorProblems(config, effectiveCap, capCeiling, overrides.lanes));
  // A mapping runs at most MAPPING_MAX_CONCURRENCY invocations: past that × the batch, paid
  // threads could never be used (parked, each invocation's tasks open as many thread leases).
  if (effectiveCap > MAPPING_MAX_CONCURRENCY * config.tasksPerInvocation) {
    const batch = Math.ceil(effectiveCap / MAPPING_MAX_CONCURRENCY);
    problems.push({
      field: 'tasksPerInvocation',
      problem: `${effectiveCap} usable plan threads at ${config.tasksPerInvocation} task(s) per invocation need more than the ${MAPPING_MAX_CONCURRENCY} invocations an event source mapping runs at most: ${effectiveCap - MAPPING_MAX_CONCURRENCY * config.tasksPerInvocation} paid threads would never be used`,
      // planThreads ≤ 10 000: a batch of at most 10 always reaches it.
      fix: `set tasksPerInvocation to ${batch} (or raise reservedThreads to ${config.planThreads - MAPPING_MAX_CONCURRENCY * config.tasksPerInvocation} to leave the rest to other users of the key)`,
    });
  }
  const maxConcurrency =
    config.maxConcurrency ?? Math.max(MAPPING_MIN_CONCURRENCY, Math.min(MAPPING_MAX_CONCURRENCY, capCeiling));
  if (config.maxConcurrency !== undefined && config.maxConcurrency * config.tasksPerInvocation > effectiveCap) {
    problems.push({
      field: 'maxConcurrency',
      problem: `${config.maxConcurrency} invocations × ${config.tasksPerInvocation} task(s) each exceeds the ${effectiveCap} usable plan threads`,
      fix: `set maxConcurrency ≤ ${capCeiling} or omit it to follow the plan`,
    });
  }
  const highestCeiling = Math.min(maxConcurrency, capCeiling);
  // With no room for even the mapping floor, the problems above name the cause; a minConcurrency
  // "fix" would point at a consequence.
  if (capCeiling >= MAPPING_MIN_CONCURRENCY && config.minConcurrency > highestCeiling) {
    problems.push({
      field: 'minConcurrency',
      problem: `minConcurrency ${config.minConcurrency} is above the highest ceiling the plan and maxConcurrency allow (${highestCeiling})`,
      fix: `set minConcurrency ≤ ${Math.max(MAPPING_MIN_CONCURRENCY, highestCeiling)}`,
    });
  }
  problems.push(...solverUrlProblems(config.solverBaseUrl));
  problems.push(...protocolProblems(config.dialect, config.solverProtocol, config.solverSoftId, ''));
  const overflow = resolveOverflow(config, maxConcurrency, problems);
  if (config.pauseBalance > config.haltBalance) {
    problems.push({
      field: 'pauseBalance',
      problem: `pauseBalance ${config.pauseBalance} is above haltBalance ${config.haltBalance}: the fleet would pause before it halts scaling`,
      fix: 'set pauseBalance ≤ haltBalance',
    });
  }
  const functionTimeoutSeconds =
    overrides.functionTimeoutSeconds ?? Math.min(900, config.solveDeadlineSeconds + RECORD_MARGIN_SECONDS);
  if (!Number.isInteger(functionTimeoutSeconds) || functionTimeoutSeconds < 1 || functionTimeoutSeconds > 900) {
    problems.push({
      field: 'functionTimeoutSeconds',
      problem: `${functionTimeoutSeconds} is not a whole number of seconds from 1 to 900`,
      fix: 'use a Lambda timeout between 1 and 900 seconds',
    });
  }
  const visibilityTimeoutSeconds = overrides.visibilityTimeoutSeconds ?? Math.min(43_200, 6 * functionTimeoutSeconds);
  if (visibilityTimeoutSeconds < functionTimeoutSeconds) {
    problems.push({
      field: 'visibilityTimeoutSeconds',
      problem: `visibility timeout ${visibilityTimeoutSeconds}s is shorter than the function timeout ${functionTimeoutSeconds}s, so a message in work would be delivered twice`,
      fix: `use at least ${functionTimeoutSeconds}s`,
    });
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return {
    ...config,
    overflow,
    effectiveCap,
    maxConcurrency,
    functionTimeoutSeconds,
    visibilityTimeoutSeconds,
    leaseSeconds: functionTimeoutSeconds + 10,
    queueNames: {
      normal: `${config.prefix}-tasks`,
      high: `${config.prefix}-tasks-high`,
      dlq: `${config.prefix}-tasks-dlq`,
      reports: `${config.prefix}-reports`,
      reportsDlq: `${config.prefix}-reports-dlq`,
    },
    tableNames: {
      results: `${config.prefix}-results`,
      governor: `${config.prefix}-governor`,
      leases: `${config.prefix}-leases`,
    },
    metricsNamespace: fleetMetricsNamespace(config.prefix),
    eventSource: fleetEventSource(config.prefix),
  };
}

/**
 * The plan against the mappings' floor: at least `MAPPING_MIN_CONCURRENCY` invocations per lane
 * that must each run one (`requiredLanes`, waiting only), each invocation's threads counted;
 * `capCeiling` is the invocations the usable threads allow at the batch size.
 */
function mappingFloorProblems(
  config: ParsedFleetConfig,
  effectiveCap: number,
  capCeiling: number,
  requiredLanes: number | undefined,
): ConfigProblem[] {
  // Waiting, an invocation holds its threads, so each lane's mapping floor is threads the plan
  // must have. Parked, the thread leases hold the plan's threads whatever the invocations (one
  // over the slots waits for one), and under twice the floor the governor lets the lanes take
  // turns (splitOverLanes): the plan needs the floor once, as `npm start` ran it.
  const lanes = config.solveMode === 'park' ? 1 : Math.max(1, requiredLanes ?? 1);
  const floor = MAPPING_MIN_CONCURRENCY * lanes;
  if (effectiveCap < 1 || capCeiling >= floor) return [];
  const enough = floor * config.tasksPerInvocation + config.reservedThreads;
  const parkable = lanes > 1 && capCeiling >= MAPPING_MIN_CONCURRENCY;
  const below =
    lanes === 1
      ? `below the event source mapping floor of ${MAPPING_MIN_CONCURRENCY} (Lambda's SQS mapping runs at least ${MAPPING_MIN_CONCURRENCY} invocations at once)`
      : `below the ${floor} its ${lanes} lanes need while each invocation waits through its solve (solveMode wait: each lane's SQS mapping runs at least ${MAPPING_MIN_CONCURRENCY} invocations at once)`;
  // Waiting, a plan the parked design could run says so (its leases hold the threads).
  const orPark = parkable ? ", or solveMode 'park' (the default: thread leases hold the plan's threads)" : '';
  return [
    // At one task per invocation the batch cannot shrink: the plan is what is too small.
    config.tasksPerInvocation === 1
      ? {
          field: config.reservedThreads > 0 ? 'reservedThreads' : 'planThreads',
          problem: `${effectiveCap} usable thread(s) allow a ceiling of ${capCeiling}, ${below}`,
          fix: `${
            config.reservedThreads > 0 && config.planThreads >= floor
              ? `lower reservedThreads to ${config.planThreads - floor} or raise planThreads to at least ${enough}`
              : `raise planThreads to at least ${enough}`
          }${orPark}`,
        }
      : {
          field: 'tasksPerInvocation',
          problem: `${effectiveCap} usable thread(s) at ${config.tasksPerInvocation} task(s) per invocation allow a ceiling of ${capCeiling}, ${below}`,
          fix: `${
            effectiveCap >= floor
              ? `lower tasksPerInvocation to ${Math.floor(effectiveCap / floor)} or raise planThreads to at least ${enough}`
              : `raise planThreads to at least ${enough}`
          }${orPark}`,
        },
  ];
}

/** The overflow block resolved against the fleet (its default width is the fleet's), its cross-checks added to `problems`. */
function resolveOverflow(
  config: ParsedFleetConfig,
  fleetMaxConcurrency: number,
  problems: ConfigProblem[],
): OverflowSettings | undefined {
  const overflow = config.overflow;
  if (overflow === undefined) return undefined;
  problems.push(...solverUrlProblems(overflow.baseUrl, 'overflow.baseUrl'));
  problems.push(...protocolProblems(overflow.dialect, overflow.solverProtocol, overflow.softId, 'overflow.'));
  if (overflow.pauseBalance > overflow.haltBalance) {
    problems.push({
      field: 'overflow.pauseBalance',
      problem: `pauseBalance ${overflow.pauseBalance} is above haltBalance ${overflow.haltBalance}: the lane would close before it stops growing`,
      fix: 'set overflow.pauseBalance ≤ overflow.haltBalance',
    });
  }
  if (overflow.capUsdPerHour > overflow.capUsdPerDay) {
    problems.push({
      field: 'overflow.capUsdPerHour',
      problem: `the hourly cap $${overflow.capUsdPerHour} is above the daily cap $${overflow.capUsdPerDay}, so it never binds`,
      fix: 'set overflow.capUsdPerHour ≤ overflow.capUsdPerDay',
    });
  }
  const maxConcurrency = overflow.maxConcurrency ?? fleetMaxConcurrency;
  if (overflow.probeCeiling > maxConcurrency) {
    problems.push({
      field: 'overflow.probeCeiling',
      problem: `probeCeiling ${overflow.probeCeiling} is above the lane's maxConcurrency ${maxConcurrency}`,
      fix: `set overflow.probeCeiling ≤ ${maxConcurrency}`,
    });
  }
  return { ...overflow, maxConcurrency, functionName: `${config.prefix}-consumer-overflow` };
}

/** The solver URLs an input gives, by field, before it is parsed. */
function urlsOf(input: FleetConfig): [string, string][] {
  const overflow = (input as { overflow?: { baseUrl?: unknown } }).overflow;
  const urls: [string, unknown][] = [
    ['solverBaseUrl', input.solverBaseUrl],
    ['overflow.baseUrl', typeof overflow === 'object' && overflow !== null ? overflow.baseUrl : undefined],
  ];
  return urls.filter((entry): entry is [string, string] => typeof entry[1] === 'string');
}

/**
 * A dialect's service must speak the protocol asked for, and a developer id must have the
 * dialect's form (digits; CapSolver's appId a UUID). `prefix` is `` or `overflow.`.
 */
function protocolProblems(
  dialect: Dialect,
  protocol: (typeof SOLVER_PROTOCOLS)[number],
  id: string | undefined,
  prefix: string,
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  if (!speaks(dialect, protocol)) {
    const others = dialectsSpeaking(protocol);
    problems.push({
      field: `${prefix}solverProtocol`,
      problem: `${dialect} speaks ${DIALECT_PROTOCOLS[dialect].join(' and ')} only, not ${protocol}`,
      fix: `set ${prefix}solverProtocol to ${DIALECT_PROTOCOLS[dialect].join(' or ')}, or ${prefix}dialect to one of ${others.join(', ')} (with ${prefix === '' ? 'solverBaseUrl' : 'overflow.baseUrl'} pointing at that provider's API)`,
    });
  }
  const idField = prefix === '' ? 'solverSoftId' : 'overflow.softId';
  if (
    id !== undefined &&
    dialect === 'capsolver' &&
    !/^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$/.test(id)
  )
    problems.push({
      field: idField,
      problem: `"${id}" is not a CapSolver appId (a UUID)`,
      fix: "give the appId from CapSolver's developer page, or leave it out",
    });
  if (id !== undefined && dialect !== 'capsolver' && !/^\d{1,10}$/.test(id))
    problems.push({
      field: idField,
      problem: `"${id}" is not a ${dialect} soft_id (digits)`,
      fix: `give the numeric software id from ${dialect}'s developer page, or leave it out`,
    });
  return problems;
}

/** The key travels in res.php's query string (or the JSON API's body): only TLS may carry it off the machine. */
function solverUrlProblems(solverBaseUrl: string, field = 'solverBaseUrl'): ConfigProblem[] {
  const url = new URL(solverBaseUrl);
  if (url.username !== '' || url.password !== '')
    return [
      {
        field,
        problem: `${solverBaseUrl.replace(/\/\/[^@/]*@/, '//***@')} carries credentials, which would be stored in plain text in the stack's template and the functions' environment`,
        fix: 'give the URL without user and password; the solver key travels apart, from Secrets Manager',
      },
    ];
  if (url.protocol === 'https:' || (url.protocol === 'http:' && isLoopbackHost(url.hostname))) return [];
  const example = field === 'solverBaseUrl' ? 'https://ocr.captchaai.com' : 'https://2captcha.com';
  const suggestion = `https://${url.host}${url.pathname === '/' ? '' : url.pathname}`;
  return [
    {
      field,
      problem: `${solverBaseUrl} is not https:// (the solver key would travel in the clear, in res.php's query string or the JSON API's body); plain http:// is accepted only on loopback (127.0.0.0/8, ::1, localhost) for the local simulator`,
      fix: suggestion === example ? `use ${suggestion}` : `use ${suggestion}, e.g. ${example}`,
    },
  ];
}

/** A strict block (the overflow block) refuses keys it does not know: name them and the ones it takes. */
function unknownKeysFix(field: string, keys: readonly string[]): string {
  const known =
    field === 'overflow' ? `; the overflow block takes ${Object.keys(OverflowConfigSchema.shape).join(', ')}` : '';
  return `remove ${keys.map((key) => `"${key}"`).join(', ')} (a misspelt name?)${known}`;
}

function fixFor(field: string): string {
  switch (field) {
    case 'planThreads':
      return 'give the number of concurrent threads your solver plan includes (e.g. 50)';
    case 'solverBaseUrl':
      return 'give an absolute URL such as https://ocr.captchaai.com';
    case 'overflow.baseUrl':
      return "give the overflow provider's absolute URL, such as https://2captcha.com";
    case 'overflow.capUsdPerHour':
    case 'overflow.capUsdPerDay':
      return 'give the most the overflow provider may cost, in USD, per UTC hour and per UTC day (both are required)';
    case 'overflow.keySecretName':
      return 'give the name (not the ARN) of an existing Secrets Manager secret holding the overflow key, or leave it out and the stack creates <prefix>/overflow-key';
    case 'overflow.priceHintUsd':
      return "give the provider's list price per solve for the dearest method you send, in USD (e.g. 0.003)";
    case 'overflow':
      return 'give an object with baseUrl, capUsdPerHour, capUsdPerDay and priceHintUsd (see docs/governor.md, "Overflow"), or leave it out';
    case 'dialect':
    case 'overflow.dialect':
      return `use one of ${DIALECTS.join(', ')}`;
    case 'solverProtocol':
    case 'overflow.solverProtocol':
      return `use one of ${SOLVER_PROTOCOLS.join(', ')}`;
    default:
      return 'see the configuration reference in the README';
  }
}
