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
 *
 * With `keepSeconds`, a refused task is kept (ConsumerEvent.probeKeepSeconds): the consumer hides
 * its message that long instead of handing it back, and the next probe carries the same message
 * again while the keep lasts, with no new receive, so a starved spell's probes walk no task
 * toward the DLQ (near it, a task went back as a fresh copy at the end of the queue: the task
 * that had waited longest went behind every other every few probes). `release` hands a kept task
 * back at once: the governor calls it when the fleet is no longer starved and at the end of its
 * invocation (a crashed governor's kept task comes back when its keep ends); a probe still out when
 * it is called hands its refused task back when it answers instead of keeping it.
 */
import {
  ChangeMessageVisibilityCommand,
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
/** A kept task is carried again only with this long of its keep left (the consumer's invocation then hides it anew), ms. */
const KEEP_MARGIN_MS = 5_000;

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
  /**
   * Keep a refused task hidden this long for the next probe (probeKeepSeconds(tickMs)); absent:
   * a refused task goes back at once and each probe receives anew.
   */
  keepSeconds?: number;
}

/** The probe's task carrier: neither call throws. */
export interface ProbeCarrier {
  carry(): Promise<CarriedProbe>;
  /** Hand a kept task back at once (visible again); nothing when none is kept. */
  release(): Promise<void>;
}

/** A refused task kept for the next probe: its message as received, and when its keep ends (epoch ms). */
interface KeptTask {
  message: Message;
  queueUrl: string;
  until: number;
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

  const keepSeconds = options.keepSeconds;
  let kept: KeptTask | undefined;
  /** Releases so far: a carry a release overtook hands its refused task back instead of keeping it. */
  let releases = 0;

  const handBack = async (task: Pick<KeptTask, 'message' | 'queueUrl'>): Promise<void> => {
    try {
      await options.sqs.send(
        new ChangeMessageVisibilityCommand({
          QueueUrl: task.queueUrl,
          ReceiptHandle: task.message.ReceiptHandle,
          VisibilityTimeout: 0,
        }),
      );
    } catch (error) {
      // It comes back by itself when its keep ends.
      options.warn?.('probe task kept but not handed back; it is visible again when its keep ends', {
        error: describeError(error),
      });
    }
  };

  const carry = async (message: Message, queueUrl: string): Promise<CarriedProbe> => {
    const startedAt = clock();
    const releasesBefore = releases;
    const record = lambdaRecordOf(message, { queueArn: await arnOf(queueUrl), region: options.region, now: startedAt });
    const event: ConsumerEvent = {
      Records: [record],
      probe: true,
      ...(keepSeconds !== undefined ? { probeKeepSeconds: keepSeconds } : {}),
    };
    let response: unknown;
    try {
      response = await options.invoke(event);
    } catch (error) {
      return { answer: 'failed', error: `the consumer's invocation failed: ${describeError(error)}` };
    }
    const failed = readFailures(response, event);
    // Malformed, as the mapping reads it: nothing deleted (the message comes back after its visibility timeout).
    if (failed === undefined) return { answer: 'failed', error: "the consumer's response is not a batch response" };
    const answer = probeAnswerOf(response) ?? 'none';
    // Refused and not handed back (the consumer hid it for the keep): the next probe carries it
    // again, unless the governor released while this probe was out (no longer starved): then back at once.
    if (keepSeconds !== undefined && answer === 'refused' && failed.has(record.messageId)) {
      if (releases === releasesBefore) kept = { message, queueUrl, until: startedAt + keepSeconds * 1000 };
      else await handBack({ message, queueUrl });
    }
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
    return { answer };
  };

  /** The kept task while its keep has `KEEP_MARGIN_MS` left, taken (a probe at once beside it receives anew). */
  const takeKept = (): KeptTask | undefined => {
    const task = kept;
    kept = undefined;
    return task !== undefined && clock() + KEEP_MARGIN_MS < task.until ? task : undefined;
  };

  return {
    async carry() {
      let received: Awaited<ReturnType<typeof receive>>;
      try {
        received = takeKept() ?? (await receive());
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
    async release() {
      releases++;
      const task = kept;
      kept = undefined;
      if (task === undefined || clock() >= task.until) return;
      await handBack(task);
    },
  };
}
