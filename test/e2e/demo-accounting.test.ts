/**
 * The demo's accounting on the embedded emulators: a record read back without a status is
 * reported as "unknown", never counted as a result, and the rows still partition the tasks sent.
 */
import { DeleteMessageCommand, ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { buildWorkload, runDemo } from '../../local/demo.js';
import { summarise } from '../../local/demo/accounting.js';
import { watchDemo } from '../../local/demo/watch.js';
import { type LocalStack, startLocalStack } from '../../local/runtime.js';

/** A solved record for `taskId` written straight to the table, its completion event noted sent or not. */
function putSolved(stack: LocalStack, taskId: string, noted: boolean) {
  const now = Date.now();
  return stack.clients.documents.send(
    new PutCommand({
      TableName: stack.resources.tables.results,
      Item: {
        taskId,
        status: 'solved',
        method: 'base64',
        submittedAt: now,
        completedAt: now + 1,
        expiresAt: Math.floor(now / 1000) + 3600,
        ...(noted ? { announcedAt: now + 2 } : {}),
      },
    }),
  );
}

describe('demo accounting', () => {
  it('reports a record without a status as unknown, not finished, with every task in one row', async () => {
    // Prepare: no consumption (both lanes off), and one task's record forced to have no status.
    const stack = await startLocalStack({ concurrency: 2, solver: { medianMs: 20 } });
    try {
      stack.pollers.normal.setEnabled(false);
      stack.pollers.high.setEnabled(false);
      const items = buildWorkload({ tasks: 4, malformed: 0, seed: 1, runId: 'unknown' });
      const forced = items[0]?.id ?? '';
      await stack.clients.documents.send(
        new PutCommand({
          TableName: stack.resources.tables.results,
          Item: { taskId: forced, expiresAt: Math.floor(Date.now() / 1000) + 3600 },
        }),
      );

      // Act
      const summary = await runDemo(stack, items, { rate: 0, maxDurationMs: 2_000 });

      // Assess
      expect(summary).toMatchObject({
        submitted: 4,
        failed: 0,
        rejected: 0,
        inDlq: 0,
        unknown: 1,
        lost: 0,
        complete: false,
        endedBy: 'max_duration',
      });
      // A receive already waiting when the lanes were turned off may still solve one; each task is in one row.
      expect(summary.solved + summary.stillQueued).toBe(3);
      // Each unresolved task is named, with its record as the run's end found it (none: never claimed).
      const queued = new Set(items.slice(1).map((item) => item.id));
      expect(summary.unresolvedTasks).toHaveLength(summary.stillQueued);
      expect(summary.unresolvedTasks.every((t) => queued.has(t.id))).toBe(true);
      expect(summary.unresolvedTasks.every((t) => t.record === undefined)).toBe(true);
      // Their messages wait in the lane, visible (the lanes are off).
      expect(summary.unresolvedTasks.every((t) => t.message?.lane === 'normal' || t.message?.lane === 'high')).toBe(
        true,
      );
    } finally {
      await stack.stop({ graceMs: 0 });
    }
  });
});

describe('the demo’s accounting of completion events', () => {
  it('counts a solved task whose event its message still owes apart from one whose event went out unheard', async () => {
    // Prepare: no consumption, and two tasks solved before the run. The first record is not noted
    // announced and its message waits in the lane (a crash between the record and the event: the
    // next delivery publishes it); the second is noted announced, but no event was heard.
    const stack = await startLocalStack({ concurrency: 2, solver: { medianMs: 20 } });
    try {
      // Stopped, not only disabled: a disabled lane's long poll already waiting would take one.
      await stack.pollers.normal.stop({ graceMs: 0 });
      await stack.pollers.high.stop({ graceMs: 0 });
      const items = buildWorkload({ tasks: 4, malformed: 0, seed: 1, highShare: 0, runId: 'owed' });
      await putSolved(stack, items[0]?.id ?? '', false);
      await putSolved(stack, items[1]?.id ?? '', true);

      // Act
      const summary = await runDemo(stack, items, { rate: 0, maxDurationMs: 2_000 });

      // Assess: before, both counted as "never announced", an invariant broken
      expect(summary).toMatchObject({ solved: 2, stillQueued: 2, announcementsOwed: 1, solvedNotAnnounced: 1 });
    } finally {
      await stack.stop({ graceMs: 0 });
    }
  });
});

describe('the demo’s accounting of a run stopped early', () => {
  it('finds a task finished after the watch last read the records where it went, not lost', async () => {
    // Prepare: no consumption; the run stops (--max-duration) with its tasks in the lane. Then,
    // before the accounting, one of them is finished as the parked watch finishes it while a
    // stopped run is counted: its record written solved, its message deleted.
    const stack = await startLocalStack({ concurrency: 2, solver: { medianMs: 20 } });
    try {
      await stack.pollers.normal.stop({ graceMs: 0 });
      await stack.pollers.high.stop({ graceMs: 0 });
      const items = buildWorkload({ tasks: 3, malformed: 0, seed: 5, highShare: 0, runId: 'late' });
      const watched = await watchDemo(stack, items, { rate: 0, maxDurationMs: 1_000 });
      const late = items[0]?.id ?? '';
      await putSolved(stack, late, true);
      const queueUrl = stack.resources.queueUrls.normal;
      for (let tries = 0; tries < 10; tries += 1) {
        const { Messages = [] } = await stack.clients.sqs.send(
          new ReceiveMessageCommand({ QueueUrl: queueUrl, MaxNumberOfMessages: 10, VisibilityTimeout: 0 }),
        );
        const found = Messages.find((m) => m.Body?.includes(late));
        if (found) {
          await stack.clients.sqs.send(
            new DeleteMessageCommand({ QueueUrl: queueUrl, ReceiptHandle: found.ReceiptHandle }),
          );
          break;
        }
      }

      // Act
      const summary = await summarise(stack, items, watched);

      // Assess: before, its record unread since the watch's last look and its message gone, it was lost.
      expect(summary).toMatchObject({ submitted: 3, solved: 1, stillQueued: 2, lost: 0 });
    } finally {
      await stack.stop({ graceMs: 0 });
    }
  });
});

describe('the demo’s DLQ accounting', () => {
  it('matches dead-lettered messages to tasks by id: a valid task SQS moved after maxReceiveCount is in the DLQ, not lost', async () => {
    // Prepare: a rejected key (account errors, retried at once) and no fresh copies near the DLQ,
    // so SQS's own redrive moves the valid tasks after 5 receives. The producer adds
    // `submittedAt` to every body, so no DLQ body equals the body the workload wrote.
    const stack = await startLocalStack({
      concurrency: 2,
      config: { maxReceiveCount: 5 },
      solver: { medianMs: 20, badKey: true },
      timing: {
        accountRetryBaseSeconds: 0,
        accountRetryMaxSeconds: 0,
        requeue: { beforeReceives: -1, refreshBeforeReceives: -1, maxGenerations: 0, maxWaitCopies: 0 },
      },
    });
    try {
      const items = buildWorkload({ tasks: 4, malformed: 2, seed: 3, runId: 'dlq-by-id' });

      // Act
      const summary = await runDemo(stack, items, { rate: 0, maxDurationMs: 60_000 });

      // Assess: every task has its row; the two valid ones and the two malformed ones are in the DLQ.
      expect(summary).toMatchObject({ submitted: 4, inDlq: 4, lost: 0, stillQueued: 0, foreignDlqMessages: 0 });
      expect(summary.validInDlq).toBe(2);
      expect(summary.dlqByReason.maxReceiveCount).toBe(2);
    } finally {
      await stack.stop({ graceMs: 0 });
    }
  });
});

describe('the end of a demo run', () => {
  it('is not held by a delayed copy of a finished task: done once every task without a record is in the DLQ by id', async () => {
    // Prepare: a workload with a malformed message that has no id (it never gets a record), and a
    // copy of one task's message sent with a 60 s delay, as a lagging write's insurance copy is.
    const stack = await startLocalStack({ concurrency: 4, solver: { medianMs: 20 } });
    try {
      const items = buildWorkload({ tasks: 6, malformed: 3, seed: 4, runId: 'delayed-copy' });
      const valid = items.find((item) => item.malformed === undefined);
      await stack.clients.sqs.send(
        new SendMessageCommand({
          QueueUrl: stack.resources.queueUrls.normal,
          MessageBody: valid?.body ?? '',
          DelaySeconds: 60,
        }),
      );
      const started = Date.now();

      // Act
      const summary = await runDemo(stack, items, { rate: 0, maxDurationMs: 45_000 });

      // Assess: complete long before the copy shows, every task in one row.
      expect(summary).toMatchObject({ submitted: 6, lost: 0, unknown: 0, complete: true, endedBy: 'complete' });
      expect(summary.inDlq).toBeGreaterThan(0);
      expect(Date.now() - started).toBeLessThan(40_000);
    } finally {
      await stack.stop({ graceMs: 0 });
    }
  }, 90_000);
});
