/**
 * `captcha-fleet/cdk`: the fleet as a CDK construct for your own stacks, and the whole-fleet stack.
 *
 * ```ts
 * import { CaptchaFleet } from 'captcha-fleet/cdk';
 * const fleet = new CaptchaFleet(this, 'Captcha', { planThreads: 50, alarmEmail: 'ops@example.com' });
 * fleet.grantProduce(worker); // SendMessage on the lanes and the reports queue; GetItem, BatchGetItem on the results
 * ```
 *
 * aws-cdk-lib (2.276 or later) and constructs are peer dependencies: the app's own copies are used.
 * The Lambda handlers ship prebuilt in the package, so a synth needs neither esbuild nor Docker.
 */
export { CaptchaFleet } from './captcha-fleet.js';
export type {
  CaptchaFleetProps,
  FleetSettingsProps,
  OverflowProps,
  ResolvedFleetStackConfig,
  TableRemoval,
} from './config.js';
export { CaptchaFleetStack, type CaptchaFleetStackProps } from './fleet-stack.js';
export type { CompletionEvents } from './completion-events.js';
export type { Consumer } from './consumer.js';
export type { FleetAlarms } from './fleet-alarms.js';
export type { FleetDashboard } from './fleet-dashboard.js';
export type { FleetFunction } from './fleet-function.js';
export type { FleetTables } from './fleet-tables.js';
export type { Governor } from './governor.js';
export type { OperatorAccess } from './operator-access.js';
export type { OverflowConsumer } from './overflow-consumer.js';
export type { Reports } from './reports.js';
export type { SolverKeySecret } from './solver-key-secret.js';
export type { TaskQueues } from './task-queues.js';
export { ConfigError, type ConfigProblem, type FleetSettings, PLAN_THREADS } from '../functions/core/settings.js';
