/**
 * The consumer function, invoked by the governor's probe with the waiting task it carries
 * (functions/governor/probe-carrier.ts): one synchronous Lambda Invoke, its response parsed.
 */
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import type { ConsumerEvent } from '../core/probe-invocation.js';

/**
 * Invoke `functionName` with the event and wait for its answer. A function error (the handler
 * threw, timed out, ran out of memory) rejects with its kind only: the payload's error message
 * stays in the consumer's own log.
 */
export function lambdaConsumerInvoker(lambda: LambdaClient, functionName: string) {
  return async (event: ConsumerEvent): Promise<unknown> => {
    const out = await lambda.send(
      new InvokeCommand({
        FunctionName: functionName,
        InvocationType: 'RequestResponse',
        Payload: Buffer.from(JSON.stringify(event)),
      }),
    );
    if (out.FunctionError !== undefined)
      throw new Error(`the consumer function ${functionName} failed (${out.FunctionError}); its log has why`);
    const text = out.Payload === undefined ? '' : Buffer.from(out.Payload).toString('utf8');
    return text === '' || text === 'null' ? null : JSON.parse(text);
  };
}
