/**
 * The watch relay's baton (functions/core/watch-relay.ts) on DynamoDB: one item of the leases
 * table, in a partition of its own (WATCH_RELAY_SHARD, slot 0) that no shard Query reads. Read
 * strongly consistent; written with one conditional PutItem on the version its writer read.
 */
import { GetCommand, type DynamoDBDocumentClient, PutCommand } from '@aws-sdk/lib-dynamodb';
import { WATCH_RELAY_SHARD } from '../core/deployment.js';
import { StoreError } from '../core/ports.js';
import type { WatchBaton, WatchBatonStore } from '../core/watch-relay.js';
import { storeFailureKind } from './store-failure.js';

/** The baton's key in the leases table: a partition of its own beside the primary lane's shards (`primary#0`, …). */
export const RELAY_KEY = { shard: WATCH_RELAY_SHARD, slot: 0 } as const;

/** A failed call for the baton, classed as the ports word it. */
export class WatchBatonError extends StoreError {
  override name = 'WatchBatonError';
}

export function createDynamoWatchBaton(options: {
  documents: DynamoDBDocumentClient;
  tableName: string;
}): WatchBatonStore {
  const { documents, tableName } = options;
  const key = RELAY_KEY;
  const failed = (what: string, error: unknown) => {
    const e = error as Error;
    return new WatchBatonError(
      `watch baton ${what} failed: ${e?.name}: ${e?.message}`,
      'dynamodb',
      storeFailureKind(error),
      undefined,
      { cause: error },
    );
  };
  return {
    async read() {
      try {
        const out = await documents.send(new GetCommand({ TableName: tableName, Key: key, ConsistentRead: true }));
        return out.Item === undefined ? undefined : batonOf(out.Item);
      } catch (error) {
        throw failed('read', error);
      }
    },
    async write(baton, expected) {
      const version = (expected?.version ?? 0) + 1;
      try {
        await documents.send(
          new PutCommand({
            TableName: tableName,
            Item: {
              ...key,
              owner: baton.owner,
              until: baton.until,
              version,
              ...(baton.next ? { nextOwner: baton.next.owner, nextUntil: baton.next.until } : {}),
            },
            ...(expected === undefined
              ? { ConditionExpression: 'attribute_not_exists(#version)' }
              : {
                  ConditionExpression: '#version = :expected',
                  ExpressionAttributeValues: { ':expected': expected.version },
                }),
            ExpressionAttributeNames: { '#version': 'version' },
          }),
        );
        return true;
      } catch (error) {
        if ((error as Error)?.name === 'ConditionalCheckFailedException') return false;
        throw failed('write', error);
      }
    },
  };
}

/** The stored item as a baton; a malformed one reads as a hold that has ended (the next write replaces it). */
function batonOf(item: Record<string, unknown>): WatchBaton | undefined {
  const { owner, until, version, nextOwner, nextUntil } = item;
  if (typeof version !== 'number') return undefined;
  if (typeof owner !== 'string' || typeof until !== 'number') return { owner: '', until: 0, version };
  return {
    owner,
    until,
    version,
    ...(typeof nextOwner === 'string' && typeof nextUntil === 'number'
      ? { next: { owner: nextOwner, until: nextUntil } }
      : {}),
  };
}
