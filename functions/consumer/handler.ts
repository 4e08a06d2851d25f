/**
 * Consumer Lambda entry: parse the environment at cold start, build the adapters once (the
 * solver key lazily, on the first invocation), delegate each batch to the shared handler.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { parseEnvironment } from '../core/environment.js';
import { onceUntilFailure } from '../core/once.js';
import { createConsumerFromEnvironment } from './wiring.js';

const environment = parseEnvironment();
const consumer = onceUntilFailure(() => createConsumerFromEnvironment({ environment }));

export const handler = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> =>
  (await consumer())(event, context);
