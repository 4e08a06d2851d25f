/**
 * Thread leases on DynamoDB (functions/core/thread-leases.ts): the leases table, partition key
 * `shard` (string), sort key `slot` (number). A taken slot is one item; the shard's meta is the
 * item at slot {@link META_SLOT}. Taking a slot is one conditional PutItem (free: never taken,
 * released, or past its `until`); freeing it one conditional DeleteItem (only its holder's); a
 * consumer reads a shard with one eventually consistent Query, the governor with a consistent
 * one. No transactions, no TTL: an expired lease is free by its `until`, whatever is left in the
 * table, and the next taker overwrites it.
 */
import {
  DeleteCommand,
  type DynamoDBDocumentClient,
  PutCommand,
  QueryCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import { StoreError } from '../core/ports.js';
import type { DeliveredMessage } from '../core/ports.js';
import type { FleetEnvironment } from '../core/environment.js';
import {
  type LeaseKeeper,
  type LeaseLane,
  type LeaseSlot,
  type LeaseTaker,
  type ShardMeta,
  type ShardView,
  leaseLengthMs,
  shardKeys,
} from '../core/thread-leases.js';
import { storeFailureKind } from './store-failure.js';

/** Sort key of a shard's meta item (slots are 0 and up). */
export const META_SLOT = -1;

export interface DynamoThreadLeasesOptions {
  documents: DynamoDBDocumentClient;
  tableName: string;
  /** @default Date.now (a take's condition compares `until` with it) */
  clock?: () => number;
}

/** How long a lease lasts (the solve's deadline and the margin to record it), ms: re-exported for the wiring. */
export { leaseLengthMs };

/** The primary lane's name in the leases table (shards `primary#0`, `primary#1`, …). */
export const PRIMARY_LEASE_LANE = 'primary';

/**
 * The primary consumer's lease lane when the fleet parks (solveMode `park`) and its environment
 * names the leases table; undefined otherwise (every invocation then waits through its solve).
 */
export function leaseLaneFor(
  environment: Pick<FleetEnvironment, 'settings' | 'tables' | 'provider'>,
  documents: DynamoDBDocumentClient,
  clock?: () => number,
): LeaseLane | undefined {
  const { settings, tables } = environment;
  if (settings.solveMode !== 'park' || tables.leases === undefined) return undefined;
  if ((environment.provider ?? 'primary') !== 'primary') return undefined;
  return {
    leases: createDynamoThreadLeases({ documents, tableName: tables.leases, ...(clock ? { clock } : {}) }),
    shards: shardKeys(PRIMARY_LEASE_LANE, settings.effectiveCap),
    planCap: settings.effectiveCap,
    leaseMs: leaseLengthMs(settings),
  };
}

/** A failed call to the leases table, classed as the ports word it. */
export class ThreadLeasesError extends StoreError {
  override name = 'ThreadLeasesError';
}

function failed(what: string, error: unknown): ThreadLeasesError {
  const e = error as Error;
  return new ThreadLeasesError(
    `thread leases ${what} failed: ${e?.name}: ${e?.message}`,
    'dynamodb',
    storeFailureKind(error),
    undefined,
    { cause: error },
  );
}

function isConditionFailure(error: unknown): boolean {
  return (error as Error)?.name === 'ConditionalCheckFailedException';
}

/** The leases table for a consumer (take, release, refusals) and the governor (views, limits, release). */
export function createDynamoThreadLeases(options: DynamoThreadLeasesOptions): LeaseTaker & LeaseKeeper {
  const { documents, tableName } = options;
  const clock = options.clock ?? Date.now;

  const query = async (shard: string, consistent: boolean): Promise<ShardView> => {
    const items: Record<string, unknown>[] = [];
    let start: Record<string, unknown> | undefined;
    do {
      const out = await documents.send(
        new QueryCommand({
          TableName: tableName,
          KeyConditionExpression: '#shard = :shard',
          ExpressionAttributeNames: { '#shard': 'shard' },
          ExpressionAttributeValues: { ':shard': shard },
          ConsistentRead: consistent,
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      items.push(...((out.Items ?? []) as Record<string, unknown>[]));
      start = out.LastEvaluatedKey as Record<string, unknown> | undefined;
    } while (start !== undefined);
    return viewOf(shard, items);
  };

  /**
   * One write on a condition about the slot: true when it held, false when it did not (the slot
   * is not as the caller thinks: taken, freed, or someone else's); any other failure is thrown.
   */
  const conditional = async (what: string, write: () => Promise<unknown>): Promise<boolean> => {
    try {
      await write();
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw failed(what, error);
    }
  };

  const release = async (lease: Pick<LeaseSlot, 'shard' | 'slot' | 'taskId'>): Promise<void> => {
    // Already free, or taken over after it expired (false): the lease is not this holder's to free.
    await conditional('release', () =>
      documents.send(
        new DeleteCommand({
          TableName: tableName,
          Key: { shard: lease.shard, slot: lease.slot },
          ConditionExpression: 'taskId = :taskId',
          ExpressionAttributeValues: { ':taskId': lease.taskId },
        }),
      ),
    );
  };

  return {
    async view(shard) {
      try {
        return await query(shard, false);
      } catch (error) {
        throw failed('read', error);
      }
    },

    async views(shards) {
      try {
        return await Promise.all(shards.map((shard) => query(shard, true)));
      } catch (error) {
        throw failed('read', error);
      }
    },

    take: (lease) =>
      conditional('take', () =>
        documents.send(
          new PutCommand({
            TableName: tableName,
            Item: itemOf(lease),
            ConditionExpression: 'attribute_not_exists(taskId) OR #until < :now',
            ExpressionAttributeNames: { '#until': 'until' },
            ExpressionAttributeValues: { ':now': clock() },
          }),
        ),
      ),

    release,

    renew: (lease, until) =>
      conditional('renew', () =>
        documents.send(
          new UpdateCommand({
            TableName: tableName,
            Key: { shard: lease.shard, slot: lease.slot },
            UpdateExpression: 'SET #until = :until',
            ConditionExpression: 'taskId = :taskId AND takenAt = :takenAt',
            ExpressionAttributeNames: { '#until': 'until' },
            ExpressionAttributeValues: { ':until': until, ':taskId': lease.taskId, ':takenAt': lease.takenAt },
          }),
        ),
      ),

    async refused(shard, at, held) {
      try {
        await documents.send(
          new UpdateCommand({
            TableName: tableName,
            Key: { shard, slot: META_SLOT },
            UpdateExpression: 'SET refusedAt = :at, refusedHeld = :held ADD refusals :one',
            ExpressionAttributeValues: { ':at': at, ':held': Math.max(0, held), ':one': 1 },
          }),
        );
      } catch (error) {
        throw failed('refusal', error);
      }
    },

    async clearRefusal(shard, answeredAt) {
      try {
        await documents.send(
          new UpdateCommand({
            TableName: tableName,
            Key: { shard, slot: META_SLOT },
            UpdateExpression: 'REMOVE refusedAt, refusedHeld',
            ConditionExpression: 'refusedAt < :answeredAt',
            ExpressionAttributeValues: { ':answeredAt': answeredAt },
          }),
        );
      } catch (error) {
        // A newer refusal (or none left): it stands.
        if (!isConditionFailure(error)) throw failed('refusal clear', error);
      }
    },

    async setLimit(shard, limit, setOptions = {}) {
      try {
        await documents.send(
          new UpdateCommand({
            TableName: tableName,
            Key: { shard, slot: META_SLOT },
            UpdateExpression: `SET #limit = :limit${setOptions.lanes ? ', lanes = :lanes' : ''}${setOptions.clearRefusal ? ' REMOVE refusedAt, refusedHeld' : ''}`,
            ExpressionAttributeNames: { '#limit': 'limit' },
            ExpressionAttributeValues: {
              ':limit': Math.max(0, Math.floor(limit)),
              ...(setOptions.lanes ? { ':lanes': setOptions.lanes } : {}),
            },
          }),
        );
      } catch (error) {
        throw failed('limit', error);
      }
    },
  };
}

function itemOf(lease: LeaseSlot): Record<string, unknown> {
  return {
    shard: lease.shard,
    slot: lease.slot,
    taskId: lease.taskId,
    takenAt: lease.takenAt,
    until: lease.until,
    source: lease.delivery.eventSourceArn,
    handle: lease.delivery.receiptHandle,
    ...(lease.delivery.messageId !== undefined ? { messageId: lease.delivery.messageId } : {}),
  };
}

/** A shard's items as a view: its meta and its well-formed slots (anything else is ignored). */
export function viewOf(shard: string, items: readonly Record<string, unknown>[]): ShardView {
  let meta: ShardMeta | undefined;
  const slots: LeaseSlot[] = [];
  for (const item of items) {
    if (item.slot === META_SLOT) {
      meta = metaOf(item);
      continue;
    }
    const slot = slotOf(shard, item);
    if (slot !== undefined) slots.push(slot);
  }
  return { shard, meta, slots };
}

function num(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isFinite(value) ? value : undefined;
}

function lanesOf(value: unknown): ShardMeta['lanes'] {
  const lanes = value as { normal?: unknown; high?: unknown } | undefined;
  const normal = num(lanes?.normal);
  const high = num(lanes?.high);
  return normal === undefined || high === undefined ? undefined : { normal, high };
}

function metaOf(item: Record<string, unknown>): ShardMeta {
  const fields = {
    limit: num(item.limit),
    refusedAt: num(item.refusedAt),
    refusedHeld: num(item.refusedHeld),
    refusals: num(item.refusals),
    lanes: lanesOf(item.lanes),
  };
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined)) as ShardMeta;
}

function slotOf(shard: string, item: Record<string, unknown>): LeaseSlot | undefined {
  const slot = num(item.slot);
  const takenAt = num(item.takenAt);
  const until = num(item.until);
  if (slot === undefined || takenAt === undefined || until === undefined) return undefined;
  if (typeof item.taskId !== 'string' || typeof item.source !== 'string' || typeof item.handle !== 'string')
    return undefined;
  const delivery: DeliveredMessage = {
    eventSourceArn: item.source,
    receiptHandle: item.handle,
    ...(typeof item.messageId === 'string' ? { messageId: item.messageId } : {}),
  };
  return { shard, slot, taskId: item.taskId, takenAt, until, delivery };
}
