/**
 * Report function Lambda entry: parse the environment at cold start, build the adapters once,
 * delegate each batch of report messages to the shared handler.
 */
import type { Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { parseEnvironment } from '../core/environment.js';
import { createReporterFromEnvironment } from './wiring.js';

const handle = createReporterFromEnvironment({ environment: parseEnvironment() });

export const handler = async (event: SQSEvent, context: Context): Promise<SQSBatchResponse> => handle(event, context);
