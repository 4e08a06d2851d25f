/**
 * Reports on the results table: the `report` attribute of a task's record, written only by the
 * report function, each write one conditional update. A report is claimed (`pending`, with the
 * delivery's token and a lease) before the provider is called, and settled (`accepted` or
 * `refused`) under that claim: a repeated report finds it and never calls the provider again.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { TaskReport } from '../core/report.js';
import type { TaskResult } from '../core/results.js';
import { ResultsRepositoryError } from './results-repository.js';

/** What the report function needs of the results table. */
export interface ReportRepository {
  get(taskId: string): Promise<TaskResult | undefined>;
  /**
   * Claim the report for one delivery: the record is solved with this solver id and has no report,
   * or a pending one that is this delivery's or whose lease ran out. False when not (another
   * delivery holds it, or it settled meanwhile: read again).
   */
  claim(taskId: string, report: TaskReport & { token: string; leaseUntil: number }, now: number): Promise<boolean>;
  /** Settle the claimed report; false when the claim was lost. */
  settle(taskId: string, token: string, report: TaskReport): Promise<boolean>;
  /** Give a claimed report up (the provider could not be reached): the next delivery claims it again. */
  release(taskId: string, token: string): Promise<void>;
  /** Write a refusal on a finished, unreported record (failed, rejected, no solver id); false when it has a report. */
  refuse(taskId: string, report: TaskReport): Promise<boolean>;
}

export interface DynamoReportRepositoryOptions {
  documents: DynamoDBDocumentClient;
  tableName: string;
}

/** DynamoDB implementation of {@link ReportRepository}. */
export class DynamoReportRepository implements ReportRepository {
  private readonly documents: DynamoDBDocumentClient;
  private readonly tableName: string;

  constructor(options: DynamoReportRepositoryOptions) {
    this.documents = options.documents;
    this.tableName = options.tableName;
  }

  async get(taskId: string): Promise<TaskResult | undefined> {
    try {
      const read = await this.documents.send(
        new GetCommand({ TableName: this.tableName, Key: { taskId }, ConsistentRead: true }),
      );
      return read.Item as TaskResult | undefined;
    } catch (error) {
      throw new ResultsRepositoryError(`result of task ${taskId} could not be read`, taskId, { cause: error });
    }
  }

  claim(taskId: string, report: TaskReport & { token: string; leaseUntil: number }, now: number): Promise<boolean> {
    return this.update(taskId, 'report claim', {
      UpdateExpression: 'SET #report = :report',
      ConditionExpression:
        '#status = :solved AND solverId = :solverId AND (attribute_not_exists(#report) OR ' +
        '(#report.#state = :pending AND (#report.#token = :token OR #report.leaseUntil < :now)))',
      ExpressionAttributeNames: { '#report': 'report', '#status': 'status', '#state': 'state', '#token': 'token' },
      ExpressionAttributeValues: {
        ':report': report,
        ':solved': 'solved',
        ':solverId': report.solverId,
        ':pending': 'pending',
        ':token': report.token,
        ':now': now,
      },
    });
  }

  settle(taskId: string, token: string, report: TaskReport): Promise<boolean> {
    return this.update(taskId, 'report', {
      UpdateExpression: 'SET #report = :report',
      ConditionExpression: '#report.#state = :pending AND #report.#token = :token',
      ExpressionAttributeNames: { '#report': 'report', '#state': 'state', '#token': 'token' },
      ExpressionAttributeValues: { ':report': withoutClaim(report), ':pending': 'pending', ':token': token },
    });
  }

  async release(taskId: string, token: string): Promise<void> {
    await this.update(taskId, 'report release', {
      UpdateExpression: 'REMOVE #report',
      ConditionExpression: '#report.#state = :pending AND #report.#token = :token',
      ExpressionAttributeNames: { '#report': 'report', '#state': 'state', '#token': 'token' },
      ExpressionAttributeValues: { ':pending': 'pending', ':token': token },
    });
  }

  refuse(taskId: string, report: TaskReport): Promise<boolean> {
    return this.update(taskId, 'report refusal', {
      UpdateExpression: 'SET #report = :report',
      ConditionExpression: 'attribute_exists(taskId) AND #status <> :solving AND attribute_not_exists(#report)',
      ExpressionAttributeNames: { '#report': 'report', '#status': 'status' },
      ExpressionAttributeValues: { ':report': withoutClaim(report), ':solving': 'solving' },
    });
  }

  private async update(
    taskId: string,
    what: string,
    input: {
      UpdateExpression: string;
      ConditionExpression: string;
      ExpressionAttributeNames: Record<string, string>;
      ExpressionAttributeValues: Record<string, unknown>;
    },
  ): Promise<boolean> {
    try {
      await this.documents.send(new UpdateCommand({ TableName: this.tableName, Key: { taskId }, ...input }));
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw new ResultsRepositoryError(`${what} of task ${taskId} could not be written`, taskId, { cause: error });
    }
  }
}

function withoutClaim(report: TaskReport): TaskReport {
  const { token: _token, leaseUntil: _leaseUntil, ...settled } = report;
  return settled;
}
