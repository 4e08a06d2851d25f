/**
 * The governor's probe carries a waiting task (the parked design; docs/governor.md, "Neighbours").
 * While others leave the fleet fewer threads than the mapping's floor, the tick's decision asks
 * for one probe submission. A synthetic task, accepted, is a solve the provider charges and whose
 * answer is thrown away: where the money runs out, each one is a task fewer solved. So the probe
 * receives one message waiting in the lanes' queues (the high lane's first; the last a 1-s long poll)
 * and invokes the consumer with it, flagged (functions/core/probe-invocation.ts): the consumer runs its own path
 * (claim, a probe slot whatever the limits, one submission with no wait, park under the slot, or
 * back at once when refused, no wait of its own counted), and answers what the solver said. Its
 * partial batch response is read as the event source mapping reads one: a record not listed as
 * failed is deleted. No message waiting, or none submitted (a malformed task, one already solved,
 * no probe slot or money now): the synthetic probe instead (thread-probe.ts).
 *
 * A failed invocation (throttled, crashed) leaves its message hidden until its visibility
 * timeout, as a crashed invocation of the mapping's would; its next delivery carries on (a claim
 * and a solver id on the record make a resumed task, never one paid twice).
 */
import {
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  type Message,
  ReceiveMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { lambdaRecordOf, readFailures } from '../adapters/sqs-record.js';
import { describeError } from '../adapters/solver-context.js';
import { type ConsumerEvent, type ProbeAnswer, probeAnswerOf } from '../core/probe-invocation.js';

/** The long poll of the last lane's queue for a task to carry, seconds (the probe runs beside the ticks). */
const RECEIVE_WAIT_SECONDS = 1;

/** What a carried probe came to: the solver's answer to the task's submission, or why there is none to read. */
export type CarriedProbe = { answer: ProbeAnswer } | { answer: 'failed'; error: string };

/** The consumer, invoked with the probe's event; resolves to its response (a rejection: the invocation failed). */
export type ConsumerInvoker = (event: ConsumerEvent) => Promise<unknown>;

export interface ProbeCarrierOptions {
  sqs: SQSClient;
  /** The lanes' queues: the high lane's (when it has one) is taken from first. */
  queueUrls: { normal: string; high?: string | undefined };
  region: string;
  invoke: ConsumerInvoker;
  clock?: () => number;
  warn?: (message: string, fields?: Record<string, unknown>) => void;
}

/** The probe's task carrier: `carry` never throws. */
export interface ProbeCarrier {
  carry(): Promise<CarriedProbe>;
}

/** The carrier of the governor's probe (see the module's comment). */
export function createProbeCarrier(options: ProbeCarrierOptions): ProbeCarrier {
  const clock = options.clock ?? Date.now;
  const arns = new Map<string, Promise<string>>();
  const arnOf = (queueUrl: string): Promise<string> => {
    let arn = arns.get(queueUrl);
    if (arn === undefined) {
      arn = options.sqs
        .send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['QueueArn'] }))
        .then((out) => out.Attributes?.QueueArn ?? '');
      // A failed read is read again next time.
      arn.catch(() => arns.delete(queueUrl));
      arns.set(queueUrl, arn);
    }
    return arn;
  };

  /** One waiting message and its queue, or undefined when none waits (or the queues cannot be read now). */
  const { normal, high } = options.queueUrls;
  const lanes = high !== undefined ? [high, normal] : [normal];
  const receive = async (): Promise<{ message: Message; queueUrl: string } | undefined> => {
    for (const [index, queueUrl] of lanes.entries()) {
      const last = index === lanes.length - 1;
      const out = await options.sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: queueUrl,
          MaxNumberOfMessages: 1,
          // A short poll samples some of SQS's servers and may answer none while a few messages
          // wait; a long one asks them all and answers as soon as one is there. The lanes before
          // the last are asked at once (an empty high lane costs no wait).
          WaitTimeSeconds: last ? RECEIVE_WAIT_SECONDS : 0,
          MessageSystemAttributeNames: ['All'],
          MessageAttributeNames: ['All'],
        }),
      );
      const message = out.Messages?.[0];
      if (message !== undefined) return { message, queueUrl };
    }
    return undefined;
  };

  const carry = async (message: Message, queueUrl: string): Promise<CarriedProbe> => {
    const record = lambdaRecordOf(message, { queueArn: await arnOf(queueUrl), region: options.region, now: clock() });
    const event: ConsumerEvent = { Records: [record], probe: true };
    let response: unknown;
    try {
      response = await options.invoke(event);
    } catch (error) {
      return { answer: 'failed', error: `the consumer's invocation failed: ${describeError(error)}` };
    }
    const failed = readFailures(response, event);
    // Malformed, as the mapping reads it: nothing deleted (the message comes back after its visibility timeout).
    if (failed === undefined) return { answer: 'failed', error: "the consumer's response is not a batch response" };
    if (!failed.has(record.messageId)) {
      try {
        await options.sqs.send(new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: message.ReceiptHandle }));
      } catch (error) {
        // Its next delivery finds the task done (or dead-lettered) and acknowledges it.
        options.warn?.('probe task finished but its message not deleted; its next delivery acknowledges it', {
          error: describeError(error),
        });
      }
    }
    return { answer: probeAnswerOf(response) ?? 'none' };
  };

  return {
    async carry() {
      let received: Awaited<ReturnType<typeof receive>>;
      try {
        received = await receive();
      } catch (error) {
        options.warn?.('probe found no task to carry: the queues could not be read', { error: describeError(error) });
        return { answer: 'none' };
      }
      if (received === undefined) return { answer: 'none' };
      try {
        return await carry(received.message, received.queueUrl);
      } catch (error) {
        return { answer: 'failed', error: describeError(error) };
      }
    },
  };
}
