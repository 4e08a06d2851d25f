/**
 * Consumer Lambda entry: parse the environment at cold start, build the adapters once (the
 * solver key lazily, on the first invocation), delegate each batch to the shared handler.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { parseEnvironment } from '../core/environment.js';
import type { ConsumerHandler } from './create-handler.js';
import { createConsumerFromEnvironment } from './wiring.js';

const environment = parseEnvironment();
let consumer: Promise<ConsumerHandler> | undefined;

export const handler = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => {
  consumer ??= createConsumerFromEnvironment({ environment }).catch((error: unknown) => {
    // Not cached: the next invocation tries again (e.g. the secret was briefly unreadable).
    consumer = undefined;
    throw error;
  });
  return (await consumer)(event, context);
};
