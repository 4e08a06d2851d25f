/**
 * The demo's accounting on the embedded emulators: a record read back without a status is
 * reported as "unknown", never counted as a result, and the rows still partition the tasks sent.
 */
import { PutCommand } from '@aws-sdk/lib-dynamodb';
import { describe, expect, it } from 'vitest';
import { buildWorkload, runDemo } from '../../local/demo.js';
import { startLocalStack } from '../../local/runtime.js';

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
