/**
 * The fleet as one construct, to add to any stack: the queues, tables, key, events, consumer, the
 * overflow lane when configured, governor, operator access, alarms and dashboard, each its own
 * construct (one concern each), composed here. CaptchaFleetStack is this construct alone in a
 * stack, plus outputs.
 *
 * ```ts
 * import { CaptchaFleet } from 'captcha-fleet/cdk';
 * const fleet = new CaptchaFleet(this, 'Captcha', { planThreads: 50, alarmEmail: 'ops@example.com' });
 * fleet.grantProduce(myWorker.role);
 * ```
 */
import { Annotations, Stack, Token } from 'aws-cdk-lib';
import type * as iam from 'aws-cdk-lib/aws-iam';
import { Construct, type IConstruct } from 'constructs';
import { ConfigError, type FleetSettings } from '../functions/core/settings.js';
import { type CaptchaFleetProps, type ResolvedFleetStackConfig, resolveFleetStackConfig } from './config.js';
import { CompletionEvents } from './completion-events.js';
import { Consumer } from './consumer.js';
import { FleetAlarms } from './fleet-alarms.js';
import { FleetDashboard } from './fleet-dashboard.js';
import { FleetTables } from './fleet-tables.js';
import { Governor } from './governor.js';
import { OperatorAccess } from './operator-access.js';
import { OverflowConsumer } from './overflow-consumer.js';
import { Reports } from './reports.js';
import { givenSecretRegionProblems, SolverKeySecret } from './solver-key-secret.js';
import { TaskQueues } from './task-queues.js';

/** Lambda's default concurrency limit of an account, and what it keeps unreserved. */
const DEFAULT_ACCOUNT_CONCURRENCY = 1_000;
const UNRESERVED_MINIMUM = 100;

/** A captcha-fleet: SQS lanes, Lambda consumers capped by the solver plan's threads, and the governor that moves the cap. */
export class CaptchaFleet extends Construct {
  /** The validated configuration the constructs were built from. */
  public readonly config: ResolvedFleetStackConfig;
  /** The fleet's settings (names, limits, timings), as the handlers see them. */
  public readonly settings: FleetSettings;
  /** The normal and high-priority lanes and their dead-letter queue. */
  public readonly queues: TaskQueues;
  /** The results table (key `taskId`) and the governor's state table. */
  public readonly tables: FleetTables;
  /** The solver key's secret (created, imported by `solverKeySecretName`, or the app's `solverKeySecret`). */
  public readonly solverKey: SolverKeySecret;
  /** The completion-event bus (`<prefix>-events`). */
  public readonly events: CompletionEvents;
  /** The consumer function and its two event source mappings. */
  public readonly consumer: Consumer;
  /** The overflow lane; undefined unless `overflow` is set (nothing of it is created then). */
  public readonly overflow: OverflowConsumer | undefined;
  /** The reports queue, its DLQ and the report function (a refund for a wrong answer). */
  public readonly reports: Reports;
  /** The governor function and its schedule. */
  public readonly governor: Governor;
  /** The operators' managed policy (status, DLQ inspection, redrive). */
  public readonly operators: OperatorAccess;
  /** The alarms and their SNS topic. */
  public readonly alarms: FleetAlarms;
  /** The CloudWatch dashboard. */
  public readonly dashboard: FleetDashboard;

  /** @throws ConfigError listing every configuration problem, before any resource is created. */
  constructor(scope: Construct, id: string, props: CaptchaFleetProps = {}) {
    const path = [scope.node.path, id].filter((part) => part !== '').join('/');
    const config = checkedAt(path, () => {
      // `null` from JavaScript is no props, as `undefined` is (it threw a TypeError).
      const resolved = resolveFleetStackConfig(props ?? {});
      const far = givenSecretRegionProblems(scope, resolved);
      if (far.length > 0) throw new ConfigError(far);
      claimPrefix(scope, path, resolved.settings.prefix);
      return resolved;
    });
    super(scope, id);
    this.config = config;
    const { settings, fleetConfig } = config;
    this.settings = settings;

    this.queues = new TaskQueues(this, 'Queues', { settings });
    this.tables = new FleetTables(this, 'Tables', { settings, resultsRemoval: config.resultsRemoval });
    this.solverKey = new SolverKeySecret(this, 'SolverKey', {
      settings,
      existingSecretName: config.solverKeySecretName,
      ...(config.solverKeySecret !== undefined ? { existingSecret: config.solverKeySecret } : {}),
    });
    this.events = new CompletionEvents(this, 'CompletionEvents', { settings });
    const shared = {
      settings,
      fleetConfig,
      queues: this.queues,
      resultsTable: this.tables.results,
      governorTable: this.tables.governor,
      solverKey: this.solverKey,
      bus: this.events.bus,
    };
    this.consumer = new Consumer(this, 'Consumer', {
      ...shared,
      initialCeilings: config.initialCeilings,
      reserveConcurrency: config.reserveConsumerConcurrency,
      ...(this.tables.leases ? { leasesTable: this.tables.leases } : {}),
    });
    this.overflow =
      settings.overflow === undefined
        ? undefined
        : new OverflowConsumer(this, 'Overflow', {
            ...shared,
            overflow: settings.overflow,
            reserveConcurrency: config.reserveConsumerConcurrency,
            ...(config.overflowKeySecret !== undefined ? { keySecret: config.overflowKeySecret } : {}),
          });
    if (this.overflow !== undefined) this.consumer.resumeAtOverflow(this.overflow.key);

    this.reports = new Reports(this, 'Reports', {
      ...shared,
      ...(this.overflow !== undefined ? { overflowKey: this.overflow.key } : {}),
    });
    this.governor = new Governor(this, 'Governor', {
      ...shared,
      consumer: this.consumer,
      reserveConcurrency: config.reserveConsumerConcurrency,
      ...(this.overflow !== undefined ? { overflow: this.overflow } : {}),
      ...(this.tables.leases ? { leasesTable: this.tables.leases } : {}),
    });
    this.#warnOnReservations(config.reserveConsumerConcurrency);
    // Who may put completion events on the bus: the consumers, and the governor when its watch
    // records parked tasks' answers (solveMode `park`).
    this.events.admitOnly(
      this.consumer.fleetFunction.role,
      ...(this.overflow !== undefined ? [this.overflow.fleetFunction.role] : []),
      ...(this.tables.leases !== undefined ? [this.governor.fleetFunction.role] : []),
    );
    this.operators = new OperatorAccess(this, 'Operators', {
      settings,
      queues: this.queues,
      reportsQueue: this.reports.queue,
      resultsTable: this.tables.results,
      governorTable: this.tables.governor,
    });
    const overflowConsumer = this.overflow !== undefined ? { overflowConsumer: this.overflow.function } : {};
    this.alarms = new FleetAlarms(this, 'Alarms', {
      settings,
      queues: this.queues,
      reportsDlq: this.reports.deadLetterQueue,
      consumer: this.consumer.function,
      governor: this.governor.function,
      ...overflowConsumer,
      ...(config.alarmEmail !== undefined ? { alarmEmail: config.alarmEmail } : {}),
    });
    this.dashboard = new FleetDashboard(this, 'Dashboard', {
      settings,
      queues: this.queues,
      consumer: this.consumer.function,
      governor: this.governor.function,
      reportsDlq: this.reports.deadLetterQueue,
      ...overflowConsumer,
      alarms: [...Object.values(this.alarms.alarms), ...Object.values(this.alarms.overflowAlarms ?? {})],
    });
  }

  /**
   * A synth warning when the functions reserve more concurrency than a default account spares:
   * Lambda keeps 100 of the account's limit (1 000 by default) unreserved and refuses a deploy
   * that would leave less. The stack cannot read the account's limit, so it says what it needs.
   */
  #warnOnReservations(reserve: boolean): void {
    if (!reserve) return;
    const reserved =
      (this.consumer.reservedConcurrency ?? 0) +
      (this.overflow?.reservedConcurrency ?? 0) +
      (this.governor.reservedConcurrency ?? 0);
    if (reserved + UNRESERVED_MINIMUM <= DEFAULT_ACCOUNT_CONCURRENCY) return;
    Annotations.of(this).addWarningV2(
      'captcha-fleet:reserved-concurrency',
      `the fleet's functions reserve ${reserved} concurrent executions; Lambda keeps ${UNRESERVED_MINIMUM} of an account's limit unreserved, so the deploy needs a limit of at least ${reserved + UNRESERVED_MINIMUM} (the default is ${DEFAULT_ACCOUNT_CONCURRENCY}): ask for more in Service Quotas (Lambda, Concurrent executions), or set reserveConsumerConcurrency to false`,
    );
  }

  /**
   * Let a producer (a function's role, a user, a group) send tasks to both lanes, report answers
   * and read their results: `sqs:SendMessage` on the two lanes and the reports queue,
   * `dynamodb:GetItem` (results, reports) and `dynamodb:BatchGetItem` (the producer client's check
   * of the ids tasks bring, before it sends them) on the results table; CDK's send grant adds
   * `sqs:GetQueueAttributes` and `sqs:GetQueueUrl` on those three queues. Nothing else.
   */
  grantProduce(grantee: iam.IGrantable): void {
    this.queues.normal.grantSendMessages(grantee);
    this.queues.high.grantSendMessages(grantee);
    this.reports.grantSend(grantee);
    this.tables.results.grant(grantee, 'dynamodb:GetItem', 'dynamodb:BatchGetItem');
  }
}

/** The fleets of each app by prefix: where each is, and the account its stack names. */
const FLEETS_OF_APP = new WeakMap<IConstruct, Map<string, { path: string; account: string }[]>>();

/**
 * Refuse a prefix another fleet of the same app has in the same account (or where either
 * account is not known at synth: an environment-agnostic stack may deploy to the same one). Every
 * name follows the prefix, and the operator policy and the dashboard are named per account,
 * whatever the region: two such fleets synthesized silently and clashed at deploy.
 */
function claimPrefix(scope: Construct, path: string, prefix: string): void {
  const root = scope.node.root;
  const account = Stack.of(scope).account;
  const fleets = FLEETS_OF_APP.get(root) ?? new Map<string, { path: string; account: string }[]>();
  FLEETS_OF_APP.set(root, fleets);
  const same = (fleets.get(prefix) ?? []).find(
    (other) => Token.isUnresolved(other.account) || Token.isUnresolved(account) || other.account === account,
  );
  if (same !== undefined)
    throw new ConfigError([
      {
        field: 'prefix',
        problem: `"${prefix}" is already the prefix of the fleet at ${same.path} in this app and account: the two would share every queue, table and function name, and the operator policy and the dashboard, which are named per account whatever the region`,
        fix: 'give each fleet its own prefix (and, in a stack of its own, its own stackName)',
      },
    ]);
  fleets.set(prefix, [...(fleets.get(prefix) ?? []), { path, account }]);
}

/**
 * `check`'s result, its configuration problems said as the fleet's at `path`: an app of two
 * fleets (or a stage of several stacks) learns which one to mend.
 */
function checkedAt<T>(path: string, check: () => T): T {
  try {
    return check();
  } catch (error) {
    if (error instanceof ConfigError && error.where === undefined) throw new ConfigError(error.problems, path);
    throw error;
  }
}
