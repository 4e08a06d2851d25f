/**
 * The governor's probe invokes the consumer function (functions/adapters/consumer-invoker.ts).
 * Lambda's Invoke has no emulator here (moto serves it only with Docker): the client is a stand-in
 * and the test asserts on the request it gets and on what is made of each answer.
 */
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { describe, expect, it } from 'vitest';
import { lambdaConsumerInvoker } from '../../functions/adapters/consumer-invoker.js';
import type { ConsumerEvent } from '../../functions/core/probe-invocation.js';
import { fakeClient } from '../helpers/fake-client.js';

const event = { Records: [{ messageId: 'm-1', body: '{"id":"t-1"}' }], probe: true } as unknown as ConsumerEvent;
const encode = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));

describe('the consumer invoked with the probe’s task', () => {
  it('invokes the function synchronously with the event as its payload, and returns the parsed response', async () => {
    const response = { batchItemFailures: [{ itemIdentifier: 'm-1' }], probe: 'accepted' };
    const { client, sent } = fakeClient<LambdaClient>(() => ({ StatusCode: 200, Payload: encode(response) }));
    const invoke = lambdaConsumerInvoker(client, 'shop-consumer');

    await expect(invoke(event)).resolves.toEqual(response);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.command).toBe('InvokeCommand');
    expect(sent[0]?.input).toMatchObject({ FunctionName: 'shop-consumer', InvocationType: 'RequestResponse' });
    expect(JSON.parse(Buffer.from(sent[0]?.input.Payload).toString('utf8'))).toEqual(event);
  });

  it('rejects a function error with its kind only, never the payload’s message', async () => {
    const { client } = fakeClient<LambdaClient>(() => ({
      StatusCode: 200,
      FunctionError: 'Unhandled',
      Payload: encode({ errorMessage: 'key=0123456789abcdef0123456789abcdef', errorType: 'Error' }),
    }));
    const invoke = lambdaConsumerInvoker(client, 'shop-consumer');

    const error = await invoke(event).catch((e: Error) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toContain('Unhandled');
    expect((error as Error).message).not.toContain('0123456789abcdef');
  });

  it('reads an empty or null payload as no response (the mapping then deletes the record)', async () => {
    for (const Payload of [undefined, new Uint8Array(), encode(null)]) {
      const { client } = fakeClient<LambdaClient>(() => ({ StatusCode: 200, Payload }));
      await expect(lambdaConsumerInvoker(client, 'shop-consumer')(event)).resolves.toBeNull();
    }
  });
});
