/**
 * Second DLQ copies against what SQS allows: a letter whose SendMessage committed while its answer
 * was lost (local/faults/letters.ts) is sent again by a sender that cannot know, so the demo's
 * accounting (local/demo/dlq.ts) counts the copies beyond those as the defect.
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

describe('letters whose send lost its answer', () => {
  it('are counted per source message, for SendMessage to the DLQ only', () => {
    const watch = createLetterWatch();
    watch.onInjected({ service: 'sqs', operation: 'SendMessage', kind: 'lost_commit', body: sendBody(DLQ, 'm1') });
    watch.onInjected({ service: 'sqs', operation: 'SendMessage', kind: 'lost_commit', body: sendBody(DLQ, 'm1') });
    // A fresh copy to a lane, a throttled letter (never committed), a DynamoDB write: none count.
    watch.onInjected({ service: 'sqs', operation: 'SendMessage', kind: 'lost_commit', body: sendBody('lane', 'm2') });
    watch.onInjected({ service: 'sqs', operation: 'SendMessage', kind: 'throttle', body: sendBody(DLQ, 'm3') });
    watch.onInjected({ service: 'dynamodb', operation: 'PutItem', kind: 'lost_commit', body: '{}' });
    expect([...watch.lostAnswers(DLQ)]).toEqual([['m1', 2]]);
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
    expect(found).toMatchObject({ duplicates: 1, duplicatesBeyondLostAnswers: 1 });
  });

  it('are explained one for one by the sends of that message whose answer was lost', () => {
    const lost = new Map([['m1', 1]]);
    expect(accountDlq([letter('m1'), letter('m1'), letter('m2')], items, sent, lost)).toMatchObject({
      duplicates: 1,
      duplicatesBeyondLostAnswers: 0,
    });
    // A third copy needs a second lost answer.
    expect(accountDlq([letter('m1'), letter('m1'), letter('m1')], items, sent, lost)).toMatchObject({
      duplicates: 2,
      duplicatesBeyondLostAnswers: 1,
    });
    // Another message's lost answer explains nothing here.
    expect(accountDlq([letter('m2'), letter('m2')], items, sent, lost)).toMatchObject({
      duplicatesBeyondLostAnswers: 1,
    });
  });
});
