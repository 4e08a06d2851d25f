/**
 * The results table in DynamoDB (lib-dynamodb). Every write is one single-item conditional
 * write: dynalite, the local emulator, has no transactions, and none are needed because one
 * record per task id carries the whole claim.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { ClaimResult, ResultsRepository } from '../core/ports.js';
import type { TaskResult } from '../core/results.js';
import type { Task } from '../core/task.js';

/** A results-table call failed for a reason other than a lost condition. */
export class ResultsRepositoryError extends Error {
  override readonly name = 'ResultsRepositoryError';
  constructor(
    message: string,
    readonly taskId: string,
    options: { cause?: unknown } = {},
  ) {
    super(message, options);
  }
}

export interface DynamoResultsRepositoryOptions {
  documents: DynamoDBDocumentClient;
  tableName: string;
  /** Lifetime of a record, seconds (`settings.resultTtlSeconds`). */
  ttlSeconds: number;
  /** Epoch ms; used for `expiresAt`. */
  clock?: () => number;
}

/** Fields `complete()` may not overwrite: the key, the claim bookkeeping and the TTL. */
const CLAIM_FIELDS = new Set(['taskId', 'attempts', 'expiresAt', 'claimToken', 'leaseUntil']);

/** Claim conflicts re-read and retried at most this often (a lease expiring between write and read). */
const CLAIM_ROUNDS = 3;

/** DynamoDB implementation of {@link ResultsRepository}. */
export class DynamoResultsRepository implements ResultsRepository {
  private readonly documents: DynamoDBDocumentClient;
  private readonly tableName: string;
  private readonly ttlSeconds: number;
  private readonly clock: () => number;

  constructor(options: DynamoResultsRepositoryOptions) {
    this.documents = options.documents;
    this.tableName = options.tableName;
    this.ttlSeconds = options.ttlSeconds;
    this.clock = options.clock ?? Date.now;
  }

  async claim(input: { task: Task; claimToken: string; now: number; leaseMs: number }): Promise<ClaimResult> {
    const { task, claimToken, now, leaseMs } = input;
    for (let round = 0; round < CLAIM_ROUNDS; round++) {
      try {
        const written = await this.documents.send(
          new UpdateCommand({
            TableName: this.tableName,
            Key: { taskId: task.id },
            // solverId is deliberately left alone: a takeover resumes the previous submission.
            UpdateExpression:
              'SET #status = :solving, claimToken = :token, leaseUntil = :leaseUntil, #method = :method, priority = :priority, ' +
              'submittedAt = :submittedAt, startedAt = :now, expiresAt = :expiresAt ADD attempts :one',
            ConditionExpression: 'attribute_not_exists(taskId) OR (#status = :solving AND leaseUntil < :now)',
            ExpressionAttributeNames: { '#status': 'status', '#method': 'method' },
            ExpressionAttributeValues: {
              ':solving': 'solving',
              ':token': claimToken,
              ':leaseUntil': now + leaseMs,
              ':method': task.method,
              ':priority': task.priority,
              ':submittedAt': task.submittedAt,
              ':now': now,
              ':expiresAt': this.expiresAt(now),
              ':one': 1,
            },
            ReturnValues: 'ALL_NEW',
          }),
        );
        const record = written.Attributes as TaskResult;
        const takenOver = record.attempts > 1;
        return {
          outcome: 'claimed',
          record,
          takenOver,
          ...(takenOver && record.solverId !== undefined ? { previousSolverId: record.solverId } : {}),
        };
      } catch (error) {
        if (!(error instanceof ConditionalCheckFailedException)) {
          throw new ResultsRepositoryError(`claim of task ${task.id} failed`, task.id, { cause: error });
        }
      }
      const existing = await this.get(task.id, { consistent: true });
      if (existing === undefined) continue; // expired by TTL between the write and the read
      if (existing.status !== 'solving') return { outcome: 'terminal', record: existing };
      const leaseUntil = existing.leaseUntil ?? 0;
      if (leaseUntil >= now) return { outcome: 'held', leaseUntil };
      // The lease ran out between the write and the read (or was released): try again.
    }
    throw new ResultsRepositoryError(`claim of task ${task.id} kept conflicting after ${CLAIM_ROUNDS} rounds`, task.id);
  }

  async recordSolverId(taskId: string, claimToken: string, solverId: string): Promise<boolean> {
    return this.ifClaimed(taskId, claimToken, {
      UpdateExpression: 'SET solverId = :solverId',
      ExpressionAttributeValues: { ':solverId': solverId },
    });
  }

  async complete(
    taskId: string,
    claimToken: string,
    result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>,
  ): Promise<boolean> {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = {};
    const sets: string[] = [];
    for (const [field, value] of Object.entries(result)) {
      if (value === undefined || CLAIM_FIELDS.has(field)) continue;
      names[`#${field}`] = field;
      values[`:${field}`] = value;
      sets.push(`#${field} = :${field}`);
    }
    values[':expiresAt'] = this.expiresAt(this.clock());
    sets.push('expiresAt = :expiresAt');
    return this.ifClaimed(taskId, claimToken, {
      UpdateExpression: `SET ${sets.join(', ')} REMOVE claimToken, leaseUntil`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
    });
  }

  async release(taskId: string, claimToken: string): Promise<void> {
    // Lease 0 rather than a delete: attempts and the solver id survive, so the next delivery
    // takes over at once and resumes the submission instead of paying for a new one.
    await this.ifClaimed(taskId, claimToken, {
      UpdateExpression: 'SET leaseUntil = :zero REMOVE claimToken',
      ExpressionAttributeValues: { ':zero': 0 },
    });
  }

  /** @returns true when this call wrote the record, false when one existed already. */
  async reject(
    taskId: string,
    result: { errorCode: string; errorMessage: string; method?: string; submittedAt?: number; completedAt: number },
  ): Promise<boolean> {
    const record: TaskResult = {
      taskId,
      status: 'rejected',
      attempts: 0,
      errorCode: result.errorCode,
      errorMessage: result.errorMessage,
      ...(result.method !== undefined ? { method: result.method } : {}),
      ...(result.submittedAt !== undefined ? { submittedAt: result.submittedAt } : {}),
      completedAt: result.completedAt,
      expiresAt: this.expiresAt(result.completedAt),
    };
    try {
      await this.documents.send(
        new PutCommand({
          TableName: this.tableName,
          Item: record,
          ConditionExpression: 'attribute_not_exists(taskId)',
        }),
      );
      return true;
    } catch (error) {
      // A record exists already: a valid task with the same id owns it; leave it alone.
      if (error instanceof ConditionalCheckFailedException) return false;
      throw new ResultsRepositoryError(`rejected record of task ${taskId} could not be written`, taskId, {
        cause: error,
      });
    }
  }

  async get(taskId: string, options: { consistent?: boolean } = {}): Promise<TaskResult | undefined> {
    try {
      const read = await this.documents.send(
        new GetCommand({ TableName: this.tableName, Key: { taskId }, ConsistentRead: options.consistent ?? false }),
      );
      return read.Item as TaskResult | undefined;
    } catch (error) {
      throw new ResultsRepositoryError(`result of task ${taskId} could not be read`, taskId, { cause: error });
    }
  }

  private expiresAt(nowMs: number): number {
    return Math.floor(nowMs / 1000) + this.ttlSeconds;
  }

  /** One update guarded by the claim token; false when the claim is no longer ours. */
  private async ifClaimed(
    taskId: string,
    claimToken: string,
    update: {
      UpdateExpression: string;
      ExpressionAttributeNames?: Record<string, string>;
      ExpressionAttributeValues: Record<string, unknown>;
    },
  ): Promise<boolean> {
    try {
      await this.documents.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { taskId },
          UpdateExpression: update.UpdateExpression,
          ConditionExpression: '#status = :solving AND claimToken = :claimToken',
          ExpressionAttributeNames: { ...update.ExpressionAttributeNames, '#status': 'status' },
          ExpressionAttributeValues: {
            ...update.ExpressionAttributeValues,
            ':solving': 'solving',
            ':claimToken': claimToken,
          },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw new ResultsRepositoryError(`results-table update of task ${taskId} failed`, taskId, { cause: error });
    }
  }
}
