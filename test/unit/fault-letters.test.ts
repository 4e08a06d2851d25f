/**
 * Second DLQ copies against what SQS allows: a letter whose SendMessage committed while its answer
 * was lost, or whose source message's delete a crash cut off (local/faults/letters.ts), is sent
 * again by a sender that cannot know, so the demo's accounting (local/demo/dlq.ts) counts the
 * copies beyond those as the defect.
 */
import type { Message } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { accountDlq } from '../../local/demo/dlq.js';
import type { DemoItem } from '../../local/demo/workload.js';
import { createLetterWatch } from '../../local/faults/letters.js';

const DLQ = 'http://127.0.0.1:1/000000000000/captcha-fleet-dlq';

/** A SendMessage body as the SDK's JSON protocol sends a letter. */
function sendBody(queueUrl: string, source: string): string {
  return JSON.stringify({
    QueueUrl: queueUrl,
    MessageBody: 'not JSON at all',
    MessageAttributes: {
      reason: { DataType: 'String', StringValue: 'MALFORMED_JSON' },
      sourceMessageId: { DataType: 'String', StringValue: source },
    },
  });
}

function letter(source: string): Message {
  return {
    MessageId: `${source}-copy-${Math.random()}`,
    Body: 'not JSON at all',
    MessageAttributes: {
      reason: { DataType: 'String', StringValue: 'MALFORMED_JSON' },
      sourceMessageId: { DataType: 'String', StringValue: source },
    },
  };
}

describe('letters SQS cannot keep from repeating', () => {
  it('count the sends whose answer was lost per source message, for SendMessage to the DLQ only', () => {
    const watch = createLetterWatch();
    watch.onInjected({ service: 'sqs', operation: 'SendMessage', kind: 'lost_commit', body: sendBody(DLQ, 'm1') });
    watch.onInjected({ service: 'sqs', operation: 'SendMessage', kind: 'lost_commit', body: sendBody(DLQ, 'm1') });
    // A fresh copy to a lane, a throttled letter (never committed), a DynamoDB write: none count.
    watch.onInjected({ service: 'sqs', operation: 'SendMessage', kind: 'lost_commit', body: sendBody('lane', 'm2') });
    watch.onInjected({ service: 'sqs', operation: 'SendMessage', kind: 'throttle', body: sendBody(DLQ, 'm3') });
    watch.onInjected({ service: 'dynamodb', operation: 'PutItem', kind: 'lost_commit', body: '{}' });
    expect([...watch.repeatable(DLQ)]).toEqual([['m1', 2]]);
  });

  it('count a letter whose source message’s delete its invocation did not live to make', () => {
    const watch = createLetterWatch();
    const alive = { requestId: 'a', dead: false, kill: () => undefined };
    const died = { requestId: 'b', dead: true, kill: () => undefined };
    watch.sent('m1', died);
    watch.sent('m2', died);
    watch.deleted('m2');
    watch.sent('m3', alive);
    expect([...watch.repeatable(DLQ)]).toEqual([['m1', 1]]);
  });
});

describe('second DLQ copies in the accounting', () => {
  const items = [{ id: 'bad-1' }, { id: 'bad-2' }] as DemoItem[];
  const sent = new Map([
    ['m1', 'bad-1'],
    ['m2', 'bad-2'],
  ]);

  it('are all beyond SQS’s allowance when no send lost its answer', () => {
    const found = accountDlq([letter('m1'), letter('m1'), letter('m2')], items, sent);
    expect(found).toMatchObject({ duplicates: 1, duplicatesUnexplained: 1 });
  });

  it('are explained one for one by the repeatable letters of that message', () => {
    const lost = new Map([['m1', 1]]);
    expect(accountDlq([letter('m1'), letter('m1'), letter('m2')], items, sent, lost)).toMatchObject({
      duplicates: 1,
      duplicatesUnexplained: 0,
    });
    // A third copy needs a second lost answer.
    expect(accountDlq([letter('m1'), letter('m1'), letter('m1')], items, sent, lost)).toMatchObject({
      duplicates: 2,
      duplicatesUnexplained: 1,
    });
    // Another message's lost answer explains nothing here.
    expect(accountDlq([letter('m2'), letter('m2')], items, sent, lost)).toMatchObject({
      duplicatesUnexplained: 1,
    });
  });
});
