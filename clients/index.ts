/**
 * `captcha-fleet/producer`: what a producer program imports. Submit tasks to the fleet's queues,
 * read and wait for their results, report wrong answers (a refund) or right ones, against AWS or the local stack (`npm start -- --serve`).
 *
 * ```ts
 * import { createProducer, localStack } from 'captcha-fleet/producer';
 * const producer = createProducer(localStack()); // or { queueUrls, table, clients: createAwsClients() } for AWS
 * const result = await producer.solve({ method: 'turnstile', params: { sitekey: '0x4AAAAAAAC3DHQFLr1GavRN', pageurl: 'https://shop.example/login' } });
 * ```
 *
 * The package ships compiled JavaScript (ESM and CommonJS) with its type declarations.
 * docs/producer.md has the guide and a Python (boto3) producer.
 */
export {
  type CompletionEventSource,
  createProducer,
  IdCheckUnavailableError,
  type Producer,
  type ProducerCounters,
  type ProducerOptions,
  type ProducerResult,
  type ProducerWarning,
  type ReportOptions,
  ReportRefusedError,
  ReportWaitTimeoutError,
  type TaskIdConflict,
  TaskIdConflictError,
  type TaskProblem,
  TaskSubmitError,
  TaskValidationError,
  TaskWaitTimeoutError,
  type WaitOptions,
} from './producer-client.js';
export { type LocalStackTarget, type LocalStackTargetOptions, localStack } from './local-stack-target.js';
export { type AwsClients, type ClientOptions, createAwsClients } from '../functions/adapters/aws-clients.js';
export type { TaskMessage } from '../functions/core/task.js';
export type { CompletionEvent } from '../functions/core/events.js';
export type { ResultStatus, TaskResult } from '../functions/core/results.js';
export type { ReportMessage, ReportRefusal, SettledReport, TaskReport, Verdict } from '../functions/core/report.js';
