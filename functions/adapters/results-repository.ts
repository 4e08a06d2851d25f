/**
 * The results table in DynamoDB (lib-dynamodb). Every write is one single-item conditional
 * write: dynalite, the local emulator, has no transactions, and none are needed because one
 * record per task id carries the whole claim.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import {
  type ClaimInput,
  type ClaimResult,
  type RejectOutcome,
  type ResultsRepository,
  StoreError,
  type StoreFailureKind,
} from '../core/ports.js';
import type { SolverProvider } from '../core/provider.js';
import { isTerminal, type TaskResult } from '../core/results.js';
import { sameContent, taskFingerprint } from '../core/task-identity.js';
import { ITEM_TOO_LARGE, storeFailureKind } from './store-failure.js';

/**
 * A results-table call failed for a reason other than a lost condition. The message names the
 * DynamoDB error behind it (its name and what it means: throttled, item too large, access
 * denied, table missing), so a log line says why, not only that it failed; `kind` says what the
 * caller can do about it (the port's words).
 */
export class ResultsRepositoryError extends StoreError {
  override name = 'ResultsRepositoryError';
  constructor(message: string, taskId: string, options: { cause?: unknown; kind?: StoreFailureKind } = {}) {
    super(
      options.cause === undefined ? message : `${message}: ${dynamoFailureCause(options.cause)}`,
      'dynamodb',
      options.kind ?? (options.cause === undefined ? 'unavailable' : storeFailureKind(options.cause)),
      taskId,
      options.cause === undefined ? {} : { cause: options.cause },
    );
  }
}

/** DynamoDB's limit on one item, bytes: attribute names and values, UTF-8. */
export const DYNAMODB_ITEM_LIMIT_BYTES = 400 * 1024;

/**
 * Room kept for the attributes of the record that `complete()` does not send but the item
 * already holds (attempts, startedAt, solverId, priority, …: a few hundred bytes at most).
 */
const CLAIM_ATTRIBUTES_ALLOWANCE_BYTES = 1024;

/** A terminal record would not fit in one DynamoDB item; nothing was written. */
export class RecordTooLargeError extends ResultsRepositoryError {
  override name = 'RecordTooLargeError';
  constructor(
    taskId: string,
    /** Estimated size of the record, bytes. */
    readonly recordBytes: number,
    /** Size of its answer alone, bytes. */
    readonly answerBytes: number,
    options: { cause?: unknown } = {},
  ) {
    super(
      `record of task ${taskId} would be ${recordBytes} bytes (its answer ${answerBytes}), over DynamoDB's item limit of ${DYNAMODB_ITEM_LIMIT_BYTES} bytes`,
      taskId,
      { ...options, kind: 'too_large' },
    );
  }
}

/** What a DynamoDB error means, by its name: `ThrottlingException (throttled): …`. */
export function dynamoFailureCause(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const meaning = DYNAMO_FAILURE_MEANINGS.find(([pattern]) => pattern.test(error.name))?.[1];
  const tooLarge = error.name === 'ValidationException' && ITEM_TOO_LARGE.test(error.message);
  const label = tooLarge ? 'item too large' : meaning;
  const detail = error.message.length > 200 ? `${error.message.slice(0, 200)}…` : error.message;
  return `${error.name}${label ? ` (${label})` : ''}: ${detail}`;
}

const DYNAMO_FAILURE_MEANINGS: ReadonlyArray<readonly [RegExp, string]> = [
  [/^(ProvisionedThroughputExceeded|Throttling|RequestLimitExceeded)/, 'throttled'],
  [/^(AccessDenied|UnrecognizedClient|InvalidSignature|ExpiredToken)/, 'access denied'],
  [/^ResourceNotFound/, 'table missing'],
  [/^(ItemCollectionSizeLimitExceeded)/, 'item too large'],
];

/**
 * Size of an item as DynamoDB counts it: names and strings in UTF-8, numbers at most 21 bytes,
 * 3 bytes per list or map plus 1 per element. An estimate from above, as the check needs.
 */
export function dynamoItemBytes(item: Record<string, unknown>): number {
  let total = 0;
  for (const [name, value] of Object.entries(item)) {
    if (value !== undefined) total += Buffer.byteLength(name) + dynamoValueBytes(value);
  }
  return total;
}

function dynamoValueBytes(value: unknown): number {
  if (typeof value === 'string') return Buffer.byteLength(value);
  if (typeof value === 'number' || typeof value === 'bigint') return 21;
  if (typeof value === 'boolean' || value === null || value === undefined) return 1;
  if (Array.isArray(value)) return 3 + value.reduce((sum: number, element) => sum + 1 + dynamoValueBytes(element), 0);
  if (value instanceof Uint8Array) return value.byteLength;
  if (typeof value === 'object')
    return 3 + Object.keys(value).length + dynamoItemBytes(value as Record<string, unknown>);
  return Buffer.byteLength(String(value));
}

export interface DynamoResultsRepositoryOptions {
  documents: DynamoDBDocumentClient;
  tableName: string;
  /** Lifetime of a record, seconds (`settings.resultTtlSeconds`). */
  ttlSeconds: number;
  /** Epoch ms; used for `expiresAt`. */
  clock?: () => number;
}

/** Fields `complete()` may not overwrite: the key, the claim bookkeeping, the fingerprint and the TTL. */
const CLAIM_FIELDS = new Set([
  'taskId',
  'attempts',
  'expiresAt',
  'claimToken',
  'leaseUntil',
  'fingerprint',
  'completedBy',
  'announcedAt',
  'announcingUntil',
  'orphanWaitAt',
  // The reporter's: a terminal write never touches a producer's report.
  'report',
]);

/** Claim conflicts re-read and retried at most this often (a lease expiring between write and read). */
const CLAIM_ROUNDS = 3;

/** True once the record's TTL has passed: DynamoDB may still return it, but it holds nothing. */
function isExpired(record: TaskResult, now: number): boolean {
  return record.expiresAt < Math.floor(now / 1000);
}

/** The key of a letter's note (`noteLetter`): `:` is no task id's (TASK_ID_PATTERN), so it names no task. */
export function letterNoteKey(sourceMessageId: string): string {
  return `letter:${sourceMessageId}`;
}

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

  /**
   * Claim the task for one delivery. A task id is the producer's idempotency key: a record of
   * the same id and the same fingerprint (or one written before fingerprints) is this task
   * (held, taken over or finished); one with another fingerprint is a conflict, answered
   * without touching the record. A `rejected` record and one past its TTL (DynamoDB deletes
   * lazily, up to days later) hold nothing: a fresh claim replaces them.
   */
  async claim(input: ClaimInput): Promise<ClaimResult> {
    const { task, now } = input;
    const fingerprint = taskFingerprint(task);
    // The record a takeover was tried on: its write may have committed with its answer lost.
    let triedOn: TaskResult | undefined;
    for (let round = 0; round < CLAIM_ROUNDS; round++) {
      const fresh = await this.claimFresh(input, fingerprint);
      if (fresh !== undefined) return { outcome: 'claimed', record: fresh, takenOver: false };
      const existing = await this.get(task.id, { consistent: true });
      // Gone by TTL, expired, or rejected since the write: the next round's fresh claim takes it.
      if (existing === undefined || existing.status === 'rejected' || isExpired(existing, now)) continue;
      // Our own write, committed but its answer lost (the SDK's retry then failed the condition).
      // A takeover's is judged by the record it took over, as when its answer came back: else an
      // orphaned claim's lost answer skipped the wait for its holder's copy and paid again at once.
      if (existing.status === 'solving' && existing.claimToken === input.claimToken)
        return triedOn !== undefined && (existing.attempts ?? 1) > 1
          ? takenOverClaim(existing, triedOn, input)
          : ownClaim(existing, input);
      // Compared on every path that finds a record (Powertools' payload validation missed the
      // failed-conditional-write path once; see its issues #2058, #3781).
      if (!sameContent(existing.fingerprint, fingerprint)) return { outcome: 'conflict', record: existing };
      if (existing.status !== 'solving') return { outcome: 'terminal', record: existing };
      const leaseUntil = existing.leaseUntil ?? 0;
      if (leaseUntil >= now) return { outcome: 'held', leaseUntil };
      const holder = solverHolderOf(existing);
      // A submission accepted by a provider this consumer cannot poll: taking over would pay a
      // second provider for a task the first may have solved already (invariant 11).
      if (existing.solverId !== undefined && !resumableBy(input).includes(holder))
        return { outcome: 'held_elsewhere', solverProvider: holder, record: existing };
      triedOn = existing;
      const taken = await this.takeOver(input, fingerprint);
      if (taken !== undefined) return takenOverClaim(taken, existing, input);
      // The lease was renewed or the record changed between the read and the write: look again.
    }
    throw new ResultsRepositoryError(`claim of task ${task.id} kept conflicting after ${CLAIM_ROUNDS} rounds`, task.id);
  }

  /** A new record for a new id, or in place of a rejected or expired one; undefined when a live record holds the id. */
  private async claimFresh(input: ClaimInput, fingerprint: string): Promise<TaskResult | undefined> {
    const { task, claimToken, now, leaseMs, provider } = input;
    const record: TaskResult = {
      taskId: task.id,
      status: 'solving',
      claimToken,
      leaseUntil: now + leaseMs,
      method: task.method,
      priority: task.priority,
      submittedAt: task.submittedAt,
      startedAt: now,
      attempts: 1,
      ...(provider !== undefined ? { provider } : {}),
      fingerprint,
      expiresAt: this.expiresAt(now),
    };
    try {
      await this.documents.send(
        new PutCommand({
          TableName: this.tableName,
          Item: record,
          ConditionExpression: 'attribute_not_exists(taskId) OR #status = :rejected OR expiresAt < :nowSeconds',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: { ':rejected': 'rejected', ':nowSeconds': Math.floor(now / 1000) },
        }),
      );
      return record;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return undefined;
      throw new ResultsRepositoryError(`claim of task ${task.id} failed`, task.id, { cause: error });
    }
  }

  /** Take over a claim whose lease ran out, keeping its solver id; undefined when it is no longer takeable. */
  private async takeOver(input: ClaimInput, fingerprint: string): Promise<TaskResult | undefined> {
    const { task, claimToken, now, leaseMs, provider } = input;
    const resumableCondition = resumableHolderCondition(resumableBy(input));
    try {
      const written = await this.documents.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { taskId: task.id },
          // solverId is deliberately left alone: a takeover resumes the previous submission.
          // The provider becomes the taker's: a record says whose consumer holds (or solved) it.
          UpdateExpression:
            'SET claimToken = :token, leaseUntil = :leaseUntil, #method = :method, priority = :priority, ' +
            'submittedAt = :submittedAt, startedAt = :now, expiresAt = :expiresAt, fingerprint = :fingerprint' +
            (provider !== undefined ? ', #provider = :provider ' : ' ') +
            'ADD attempts :one',
          ConditionExpression:
            '#status = :solving AND leaseUntil < :now AND expiresAt >= :nowSeconds AND ' +
            '(attribute_not_exists(fingerprint) OR fingerprint = :fingerprint) AND ' +
            resumableCondition.expression,
          ExpressionAttributeNames: {
            '#status': 'status',
            '#method': 'method',
            '#provider': 'provider',
          },
          ExpressionAttributeValues: {
            ...resumableCondition.values,
            ...(provider !== undefined ? { ':provider': provider } : {}),
            ':solving': 'solving',
            ':token': claimToken,
            ':leaseUntil': now + leaseMs,
            ':method': task.method,
            ':priority': task.priority,
            ':submittedAt': task.submittedAt,
            ':now': now,
            ':nowSeconds': Math.floor(now / 1000),
            ':expiresAt': this.expiresAt(now),
            ':fingerprint': fingerprint,
            ':one': 1,
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return written.Attributes as TaskResult;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return undefined;
      throw new ResultsRepositoryError(`takeover of task ${task.id} failed`, task.id, { cause: error });
    }
  }

  async recordSolverId(
    taskId: string,
    claimToken: string,
    solverId: string,
    provider: SolverProvider = 'primary',
    acceptedAt?: number,
  ): Promise<boolean> {
    // With the time it was accepted, so a delivery that also holds an older submission in a
    // copy of its message resumes the newer one (task-run.ts, newerSubmission); without it (or
    // with none known, 0), any time an earlier submission left is removed.
    const known = acceptedAt !== undefined && acceptedAt > 0 ? acceptedAt : undefined;
    return this.ifClaimed(taskId, claimToken, {
      UpdateExpression:
        known === undefined
          ? 'SET solverId = :solverId, solverProvider = :solverProvider REMOVE solverAcceptedAt'
          : 'SET solverId = :solverId, solverProvider = :solverProvider, solverAcceptedAt = :acceptedAt',
      ExpressionAttributeValues: {
        ':solverId': solverId,
        ':solverProvider': provider,
        ...(known === undefined ? {} : { ':acceptedAt': known }),
      },
    });
  }

  async countUnsolvable(taskId: string, claimToken: string, solverId: string): Promise<number | undefined> {
    try {
      const out = await this.documents.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { taskId },
          UpdateExpression: 'SET unsolvableOf = :solverId ADD unsolvableAnswers :one',
          ConditionExpression:
            '#status = :solving AND claimToken = :claimToken AND (attribute_not_exists(unsolvableOf) OR unsolvableOf <> :solverId)',
          ExpressionAttributeNames: { '#status': 'status' },
          ExpressionAttributeValues: {
            ':solverId': solverId,
            ':one': 1,
            ':solving': 'solving',
            ':claimToken': claimToken,
          },
          ReturnValues: 'UPDATED_NEW',
        }),
      );
      const count = Number(out.Attributes?.unsolvableAnswers);
      return Number.isFinite(count) ? count : undefined;
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException)) return undefined;
      // Counted already (a retry whose first attempt committed, or a delivery before this one
      // that died before resubmitting): the count stands; not this claim's record: none.
      const current = await this.get(taskId, { consistent: true }).catch(() => undefined);
      const ours = current?.status === 'solving' && current.claimToken === claimToken;
      return ours && current?.unsolvableOf === solverId ? current.unsolvableAnswers : undefined;
    }
  }

  async park(
    taskId: string,
    claimToken: string,
    submission: { solverId: string; provider: SolverProvider; acceptedAt: number; queueWaitMs?: number },
  ): Promise<boolean> {
    // The first delivery's queue wait stays the record's: the watch's solved record carries it on.
    const queueWait = submission.queueWaitMs !== undefined;
    const written = await this.ifClaimed(taskId, claimToken, {
      UpdateExpression:
        'SET solverId = :solverId, solverProvider = :solverProvider, solverAcceptedAt = :acceptedAt, leaseUntil = :zero' +
        `${queueWait ? ', queueWaitMs = if_not_exists(queueWaitMs, :queueWait)' : ''} REMOVE claimToken`,
      ExpressionAttributeValues: {
        ':solverId': submission.solverId,
        ':solverProvider': submission.provider,
        ':acceptedAt': submission.acceptedAt,
        ':zero': 0,
        ...(queueWait ? { ':queueWait': submission.queueWaitMs } : {}),
      },
    });
    if (written) return true;
    // A retry whose first attempt committed (its answer lost) finds the claim gone: the record
    // holding this very submission, unclaimed, is that attempt's.
    const current = await this.get(taskId, { consistent: true });
    return (
      current?.status === 'solving' &&
      current.claimToken === undefined &&
      current.solverId === submission.solverId &&
      current.solverAcceptedAt === submission.acceptedAt
    );
  }

  async completeParked(
    taskId: string,
    solverId: string,
    result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>,
    writer: { token: string; now: number },
  ): Promise<boolean> {
    this.checkRecordSize(taskId, result);
    const update = terminalUpdate(result, writer.token, this.expiresAt(writer.now));
    try {
      await this.documents.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { taskId },
          UpdateExpression: `${update.expression} REMOVE claimToken, leaseUntil`,
          ConditionExpression:
            '#status = :solving AND solverId = :parkedId AND (attribute_not_exists(claimToken) OR leaseUntil < :now)',
          ExpressionAttributeNames: { ...update.names, '#status': 'status' },
          ExpressionAttributeValues: {
            ...update.values,
            ':solving': 'solving',
            ':parkedId': solverId,
            ':now': writer.now,
          },
        }),
      );
      return true;
    } catch (error) {
      if (!(error instanceof ConditionalCheckFailedException))
        throw new ResultsRepositoryError(`record of parked task ${taskId} failed`, taskId, { cause: error });
    }
    const current = await this.get(taskId, { consistent: true });
    return current !== undefined && isTerminal(current.status) && current.completedBy === writer.token;
  }

  async complete(
    taskId: string,
    claimToken: string,
    result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>,
  ): Promise<boolean> {
    this.checkRecordSize(taskId, result);
    const update = terminalUpdate(result, claimToken, this.expiresAt(this.clock()));
    const written = await this.ifClaimed(taskId, claimToken, {
      UpdateExpression: `${update.expression} REMOVE claimToken, leaseUntil`,
      ExpressionAttributeNames: update.names,
      ExpressionAttributeValues: update.values,
    });
    if (written) return true;
    const current = await this.get(taskId, { consistent: true });
    return current !== undefined && isTerminal(current.status) && current.completedBy === claimToken;
  }

  async noteLetter(sourceMessageId: string, at: number): Promise<void> {
    const key = letterNoteKey(sourceMessageId);
    try {
      await this.documents.send(
        new PutCommand({
          TableName: this.tableName,
          Item: { taskId: key, letteredAt: at, expiresAt: this.expiresAt(at) },
        }),
      );
    } catch (error) {
      throw new ResultsRepositoryError(`the letter of message ${sourceMessageId} could not be noted`, key, {
        cause: error,
      });
    }
  }

  async letterNoted(sourceMessageId: string): Promise<boolean> {
    const key = letterNoteKey(sourceMessageId);
    try {
      const out = await this.documents.send(
        new GetCommand({ TableName: this.tableName, Key: { taskId: key }, ConsistentRead: true }),
      );
      return out.Item !== undefined;
    } catch (error) {
      throw new ResultsRepositoryError(`the letter note of message ${sourceMessageId} could not be read`, key, {
        cause: error,
      });
    }
  }

  async markAnnounced(taskId: string, at: number): Promise<void> {
    try {
      await this.documents.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { taskId },
          UpdateExpression: 'SET announcedAt = :at',
          ConditionExpression: 'attribute_exists(taskId)',
          ExpressionAttributeValues: { ':at': at },
        }),
      );
    } catch (error) {
      // Gone (TTL) meanwhile: nothing left to mark.
      if (error instanceof ConditionalCheckFailedException) return;
      throw new ResultsRepositoryError(`announcement of task ${taskId} could not be noted`, taskId, { cause: error });
    }
  }

  async takeAnnouncement(taskId: string, now: number, until: number): Promise<boolean> {
    try {
      await this.documents.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: { taskId },
          UpdateExpression: 'SET announcingUntil = :until',
          ConditionExpression: [
            'attribute_exists(taskId) AND attribute_not_exists(announcedAt)',
            '(attribute_not_exists(announcingUntil) OR announcingUntil < :now)',
          ].join(' AND '),
          ExpressionAttributeValues: { ':until': until, ':now': now },
        }),
      );
      return true;
    } catch (error) {
      if (error instanceof ConditionalCheckFailedException) return false;
      throw new ResultsRepositoryError(`announcement of task ${taskId} could not be taken`, taskId, { cause: error });
    }
  }

  async release(taskId: string, claimToken: string, note?: { orphanWaitAt: number }): Promise<void> {
    // Lease 0 rather than a delete: attempts and the solver id survive, so the next delivery
    // takes over at once and resumes the submission instead of paying for a new one.
    await this.ifClaimed(taskId, claimToken, {
      UpdateExpression: `SET leaseUntil = :zero${note ? ', orphanWaitAt = :orphanWaitAt' : ''} REMOVE claimToken`,
      ExpressionAttributeValues: { ':zero': 0, ...(note ? { ':orphanWaitAt': note.orphanWaitAt } : {}) },
    });
  }

  /** `written` when this call (or an earlier attempt by `writer`) wrote the record, else the record found. */
  async reject(
    taskId: string,
    result: { errorCode: string; errorMessage: string; method?: string; submittedAt?: number; completedAt: number },
    writer: string,
  ): Promise<RejectOutcome> {
    const record: TaskResult = {
      taskId,
      status: 'rejected',
      attempts: 0,
      errorCode: result.errorCode,
      errorMessage: result.errorMessage,
      ...(result.method !== undefined ? { method: result.method } : {}),
      ...(result.submittedAt !== undefined ? { submittedAt: result.submittedAt } : {}),
      completedAt: result.completedAt,
      completedBy: writer,
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
      return { outcome: 'written', record };
    } catch (error) {
      // A record exists already: a valid task with the same id owns it (or an earlier rejection
      // does); leave it alone. A rejected record, for its part, never blocks a valid task: claim() replaces it.
      if (!(error instanceof ConditionalCheckFailedException))
        throw new ResultsRepositoryError(`rejected record of task ${taskId} could not be written`, taskId, {
          cause: error,
        });
    }
    const existing = await this.get(taskId, { consistent: true });
    // Deleted (TTL) between the write and the read: the next delivery writes it.
    if (existing === undefined)
      throw new ResultsRepositoryError(`rejected record of task ${taskId} vanished while written`, taskId);
    const ours = existing.status === 'rejected' && existing.completedBy === writer;
    return { outcome: ours ? 'written' : 'exists', record: existing };
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

  /**
   * Refuse a terminal record that no DynamoDB item can hold (an answer near 400 KB) before
   * sending it: DynamoDB would refuse it on every delivery and the task would cycle to the DLQ.
   */
  private checkRecordSize(taskId: string, result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>): void {
    const recordBytes =
      dynamoItemBytes({ taskId, ...result, expiresAt: 0, attempts: 0 }) + CLAIM_ATTRIBUTES_ALLOWANCE_BYTES;
    if (recordBytes > DYNAMODB_ITEM_LIMIT_BYTES) {
      throw new RecordTooLargeError(taskId, recordBytes, Buffer.byteLength(result.answer ?? ''));
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
      // The estimate was short (DynamoDB counts a little differently): the same answer as above.
      if (error instanceof Error && error.name === 'ValidationException' && ITEM_TOO_LARGE.test(error.message)) {
        const answer = update.ExpressionAttributeValues[':answer'];
        throw new RecordTooLargeError(
          taskId,
          dynamoItemBytes(update.ExpressionAttributeValues),
          typeof answer === 'string' ? Buffer.byteLength(answer) : 0,
          { cause: error },
        );
      }
      throw new ResultsRepositoryError(`results-table update of task ${taskId} failed`, taskId, { cause: error });
    }
  }
}

/**
 * The SET of a terminal write: every field of the result but the claim's, its expiry, and its
 * writer (a retry whose first attempt committed, its answer lost, recognises the record as its own).
 */
function terminalUpdate(
  result: Omit<TaskResult, 'taskId' | 'attempts' | 'expiresAt'>,
  writer: string,
  expiresAt: number,
): { expression: string; names: Record<string, string>; values: Record<string, unknown> } {
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  const sets: string[] = [];
  for (const [field, value] of Object.entries(result)) {
    if (value === undefined || CLAIM_FIELDS.has(field)) continue;
    names[`#${field}`] = field;
    values[`:${field}`] = value;
    sets.push(`#${field} = :${field}`);
  }
  values[':expiresAt'] = expiresAt;
  sets.push('expiresAt = :expiresAt');
  values[':completedBy'] = writer;
  sets.push('completedBy = :completedBy');
  return { expression: `SET ${sets.join(', ')}`, names, values };
}

/** The providers a claim may resume the submissions of. */
function resumableBy(input: ClaimInput): readonly SolverProvider[] {
  return input.resumable ?? [input.provider ?? 'primary'];
}

/** Who accepted the record's submission: `solverProvider`, else (older records) its claimant, else the primary. */
function solverHolderOf(record: TaskResult): SolverProvider {
  return record.solverProvider ?? record.provider ?? 'primary';
}

/** The claimed outcome for a record this claim holds (just taken over, or found ours after a lost answer). */
/**
 * A claim taken over from `before`: orphaned when its holder died with no id on the record and
 * claimed after the last wait for a copy began (or none did): its copy is a new one to wait for.
 */
function takenOverClaim(taken: TaskResult, before: TaskResult, input: ClaimInput): ClaimResult {
  const waitedForThisHolder = before.orphanWaitAt !== undefined && before.orphanWaitAt >= (before.startedAt ?? 0);
  const orphaned = (before.leaseUntil ?? 0) > 0 && before.solverId === undefined && !waitedForThisHolder;
  return { ...ownClaim(taken, input, true), ...(orphaned ? { orphaned } : {}) };
}

function ownClaim(record: TaskResult, input: ClaimInput, takenOver = (record.attempts ?? 1) > 1): ClaimResult {
  const holder = solverHolderOf(record);
  const resumable = record.solverId !== undefined && resumableBy(input).includes(holder);
  return {
    outcome: 'claimed',
    record,
    takenOver,
    ...(resumable ? { previousSolverId: record.solverId as string, previousSolverProvider: holder } : {}),
    ...(resumable && typeof record.solverAcceptedAt === 'number'
      ? { previousSolverAcceptedAt: record.solverAcceptedAt }
      : {}),
  };
}

/**
 * The takeover's guard, in DynamoDB's words: no submission yet, or one a provider in `providers`
 * accepted (`solverProvider`, or on older records the claimant's `provider`, absent = primary).
 */
function resumableHolderCondition(providers: readonly SolverProvider[]): {
  expression: string;
  values: Record<string, string>;
} {
  const values: Record<string, string> = {};
  providers.forEach((provider, index) => {
    values[`:resumable${index}`] = provider;
  });
  const list = Object.keys(values).join(', ');
  if (list === '') return { expression: 'attribute_not_exists(solverId)', values };
  const legacy = providers.includes('primary') ? ' OR attribute_not_exists(#provider)' : '';
  return {
    expression:
      `(attribute_not_exists(solverId) OR solverProvider IN (${list}) OR ` +
      `(attribute_not_exists(solverProvider) AND (#provider IN (${list})${legacy})))`,
    values,
  };
}
