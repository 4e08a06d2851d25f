/**
 * A producer's view of the local stack that `npm start -- --serve` runs: its two queues, its
 * results table and clients for its emulators, read from the stack file it writes. One call, so
 * a producer written for AWS points at the local stack by changing one line.
 */
import { type AwsClients, createAwsClients } from '../functions/adapters/aws-clients.js';
import { type LocalStackHints, readLocalStackFile } from '../local/stack-file.js';
import type { ProducerOptions } from './producer-client.js';

/** What `createProducer` needs to reach the local stack (spread or pass it as the options). */
export interface LocalStackTarget extends Pick<ProducerOptions, 'queueUrls' | 'table'> {
  queueUrls: { normal: string; high: string; reports?: string };
  /** Clients for the stack's SQS and DynamoDB emulators (dummy credentials unless yours are set). */
  clients: AwsClients;
}

export interface LocalStackTargetOptions {
  /**
   * The stack file. @default `$CAPTCHA_FLEET_STACK_FILE`, else `.captcha-fleet/local-stack.<prefix>.json`
   * under the current directory (where `npm start -- --serve` writes it in a checkout)
   */
  stackFile?: string;
  /**
   * The fleet's prefix: picks its stack file, and the file must record that fleet.
   * @default - the default fleet's file (`captcha-fleet`), whatever fleet an explicit `stackFile` records
   */
  prefix?: string;
  /** @default `$AWS_REGION`, else us-east-1 (the emulators accept any) */
  region?: string;
}

/** A producer has options, not flags: the hints name them. */
const PRODUCER_HINTS: LocalStackHints = {
  otherwise: 'or pass localStack({ stackFile }) (or set CAPTCHA_FLEET_STACK_FILE) with the file it wrote',
  choosePrefix: (prefix) => `Pass localStack({ prefix: '${prefix}' })`,
};

/**
 * The local stack's queues, results table and clients.
 * @throws Error naming the file and the fix when no local stack is running there.
 * @example
 * const producer = createProducer(localStack());
 */
export function localStack(options: LocalStackTargetOptions = {}): LocalStackTarget {
  const info = readLocalStackFile({
    ...(options.stackFile !== undefined ? { path: options.stackFile } : {}),
    ...(options.prefix !== undefined ? { prefix: options.prefix } : {}),
    hints: PRODUCER_HINTS,
  });
  return {
    queueUrls: {
      normal: info.queueUrls.normal,
      high: info.queueUrls.high,
      ...(info.reportsQueueUrl !== undefined ? { reports: info.reportsQueueUrl } : {}),
    },
    table: info.tables.results,
    clients: createAwsClients({
      sqsEndpoint: info.sqsEndpoint,
      dynamoEndpoint: info.dynamoEndpoint,
      ...(options.region ? { region: options.region } : {}),
    }),
  };
}
