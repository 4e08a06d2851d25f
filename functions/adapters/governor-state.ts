/**
 * Governor state in DynamoDB: one item (`id` = GOVERNOR_STATE_ID) in the governor table, so
 * ticks in different invocations form one control loop. Each save is a conditional put on the
 * version it read: a second governor (an overlapping invocation, the CLI) cannot overwrite a
 * newer state, it gets a GovernorStateConflictError and does not act. An item in the older flat
 * shape is migrated on load (migrateGovernorState), so an upgrade keeps the control loop's memory.
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { GetCommand, PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { GOVERNOR_STATE_ID } from '../core/deployment.js';
import { GovernorStateConflictError, type GovernorStateStore } from '../core/governor/ports.js';
import { type LegacyGovernorState, migrateGovernorState } from '../core/governor/state.js';
import type { GovernorState, GovernorStatus } from '../core/governor/types.js';

export interface DynamoGovernorStateOptions {
  documents: DynamoDBDocumentClient;
  tableName: string;
  /** @default GOVERNOR_STATE_ID (the stack's IAM allows only that key) */
  id?: string;
}

/** Build the DynamoDB state store. */
export function createDynamoGovernorState(options: DynamoGovernorStateOptions): GovernorStateStore {
  const id = options.id ?? GOVERNOR_STATE_ID;
  return {
    async load() {
      const out = await options.documents.send(
        new GetCommand({ TableName: options.tableName, Key: { id }, ConsistentRead: true }),
      );
      const item = out.Item as { state?: GovernorState | LegacyGovernorState; version?: number } | undefined;
      if (item?.state === undefined || typeof item.version !== 'number') return undefined;
      // An item written by a release before the state was grouped is migrated here; the next
      // save (conditional on this version) writes the grouped shape.
      return { state: migrateGovernorState(item.state), version: item.version };
    },
    async save(state, expectedVersion) {
      const version = (expectedVersion ?? 0) + 1;
      try {
        await options.documents.send(
          new PutCommand({
            TableName: options.tableName,
            Item: { id, version, state, updatedAt: new Date().toISOString() },
            ...(expectedVersion === undefined
              ? { ConditionExpression: 'attribute_not_exists(id)' }
              : {
                  ConditionExpression: 'version = :expected',
                  ExpressionAttributeValues: { ':expected': expectedVersion },
                }),
          }),
        );
      } catch (error) {
        if (
          error instanceof ConditionalCheckFailedException ||
          (error as Error).name === 'ConditionalCheckFailedException'
        ) {
          throw new GovernorStateConflictError(expectedVersion, { cause: error });
        }
        throw error;
      }
      return version;
    },
  };
}

/** In-memory state store (local runtime, tests): same contract, same conflict rule. */
export function createMemoryGovernorState(): GovernorStateStore {
  let stored: { state: GovernorState; version: number } | undefined;
  return {
    async load() {
      return stored === undefined ? undefined : { state: structuredClone(stored.state), version: stored.version };
    },
    async save(state, expectedVersion) {
      if ((stored?.version ?? undefined) !== expectedVersion) throw new GovernorStateConflictError(expectedVersion);
      stored = { state: structuredClone(state), version: (expectedVersion ?? 0) + 1 };
      return stored.version;
    },
  };
}

/**
 * The last decision the governor saved (for `captcha-fleet status`), or undefined when no tick
 * has run yet or the state predates the summary. Reads only; never takes part in the control loop.
 */
export async function readGovernorStatus(store: Pick<GovernorStateStore, 'load'>): Promise<GovernorStatus | undefined> {
  return (await store.load())?.state.lastDecision;
}
