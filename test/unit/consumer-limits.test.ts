/**
 * Limits the consumer keeps: dead letters fit SQS's message limit with their reason, whatever the
 * body; completion events carry one id per terminal record; the consumer reads failures through
 * the ports' words, never an adapter's classes.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { deadLetterAttributes, messageBytes } from '../../functions/adapters/task-queue.js';
import { eventIdOf, toCompletionEvent } from '../../functions/core/events.js';
import type { TaskResult } from '../../functions/core/results.js';
import { MAX_TASK_BYTES, SQS_MESSAGE_LIMIT_BYTES, TASK_QUEUE_MESSAGE_LIMIT_BYTES } from '../../functions/core/task.js';

describe('task and dead-letter sizes', () => {
  it('follow SQS’s 1 MiB: the lanes keep room for the reason attributes, the schema room for a redelivery', () => {
    expect(SQS_MESSAGE_LIMIT_BYTES).toBe(1_048_576);
    expect(TASK_QUEUE_MESSAGE_LIMIT_BYTES).toBeLessThan(SQS_MESSAGE_LIMIT_BYTES);
    expect(MAX_TASK_BYTES).toBeGreaterThan(900 * 1024);
    expect(MAX_TASK_BYTES).toBeLessThan(TASK_QUEUE_MESSAGE_LIMIT_BYTES);
  });

  it('fits every attribute with the largest body a lane accepts, a long detail cut to fit', () => {
    const letter = {
      body: 'x'.repeat(TASK_QUEUE_MESSAGE_LIMIT_BYTES),
      reason: 'TOO_LARGE',
      reasonDetail: 'é'.repeat(5_000),
      taskId: 'a'.repeat(80),
      sourceQueue: 'q'.repeat(80),
      sourceMessageId: '7b8c9d0e-1f2a-3b4c-5d6e-7f8091a2b3c4',
    };
    const attributes = deadLetterAttributes(letter);
    expect(Object.keys(attributes).sort()).toEqual([
      'reason',
      'reasonDetail',
      'sourceMessageId',
      'sourceQueue',
      'taskId',
    ]);
    expect(messageBytes(letter.body, attributes)).toBeLessThanOrEqual(SQS_MESSAGE_LIMIT_BYTES);
    expect(attributes.reasonDetail?.StringValue).not.toContain('\uFFFD');
  });

  it('keeps the reason as long as anything fits, for a body at SQS’s very limit', () => {
    const letter = {
      body: 'x'.repeat(SQS_MESSAGE_LIMIT_BYTES - 40),
      reason: 'TOO_LARGE',
      reasonDetail: 'message is 1048536 bytes',
      taskId: 'big-1',
      sourceQueue: 'captcha-fleet-tasks',
    };
    const attributes = deadLetterAttributes(letter);
    expect(attributes.reason?.StringValue).toBe('TOO_LARGE');
    expect(messageBytes(letter.body, attributes)).toBeLessThanOrEqual(SQS_MESSAGE_LIMIT_BYTES);
  });
});

describe('completion event ids', () => {
  const record: TaskResult = { taskId: 'task-1', status: 'solved', attempts: 1, completedAt: 1_000, expiresAt: 9 };

  it('are the same on every publish of one terminal record, and differ for another record under the same id', () => {
    const first = toCompletionEvent(record, { includeAnswer: false });
    const again = toCompletionEvent({ ...record, attempts: 2, announcedAt: 5 }, { includeAnswer: false });
    expect(first.eventId).toBe(again.eventId);
    expect(first.eventId).toBe(eventIdOf(record));
    expect(eventIdOf({ ...record, completedAt: 2_000 })).not.toBe(first.eventId);
    expect(eventIdOf({ ...record, status: 'failed' })).not.toBe(first.eventId);
  });
});

describe('the consumer’s imports', () => {
  it('take no error class from an adapter: failures are read through the ports’ kinds', () => {
    const dir = 'functions/consumer';
    const offending = readdirSync(dir)
      .filter((name) => name.endsWith('.ts'))
      .flatMap((name) => {
        const text = readFileSync(`${dir}/${name}`, 'utf8');
        return [...text.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+'\.\.\/adapters\/[^']+'/g)]
          .flatMap((match) => (match[1] ?? '').split(','))
          .map((name) => name.trim())
          .filter((imported) => /Error$/.test(imported))
          .map((imported) => `${name}: ${imported}`);
      });
    expect(offending).toEqual([]);
  });
});
