/** The results table as the demo reads it: records by task, and figures drawn from them. */
import { BatchGetCommand } from '@aws-sdk/lib-dynamodb';
import { isTerminal, type TaskResult } from '../../functions/core/results.js';
import type { LocalStack } from '../runtime.js';
import type { WatchedRun } from './summary.js';

export async function refreshResults(
  stack: LocalStack,
  pending: Set<string>,
  { results, unknownIds }: Pick<WatchedRun, 'results' | 'unknownIds'>,
): Promise<void> {
  for (const result of await readRecords(stack, [...pending])) {
    if (isTerminal(result.status)) {
      results.set(result.taskId, result);
      pending.delete(result.taskId);
      unknownIds.delete(result.taskId);
    } else if (result.status !== 'solving') unknownIds.add(result.taskId);
    else unknownIds.delete(result.taskId);
  }
}

/** The solved tasks no completion event has been heard for yet (the run waits for them; the summary counts them). */
export function unheardSolved(run: Pick<WatchedRun, 'results' | 'announced'>): string[] {
  const ids: string[] = [];
  for (const [id, result] of run.results) if (result.status === 'solved' && !run.announced.has(id)) ids.push(id);
  return ids;
}

/** The records of these tasks (consistent reads, 100 keys a call; those without a record are absent). */
export async function readRecords(stack: LocalStack, ids: readonly string[]): Promise<TaskResult[]> {
  const records: TaskResult[] = [];
  for (let i = 0; i < ids.length; i += 100) {
    let keys: Record<string, unknown>[] = ids.slice(i, i + 100).map((taskId) => ({ taskId }));
    // Unprocessed keys are asked for again (DynamoDB may throttle part of a batch).
    for (let round = 0; keys.length > 0 && round < 5; round++) {
      const answer = await stack.observer.documents.send(
        new BatchGetCommand({
          RequestItems: { [stack.resources.tables.results]: { Keys: keys, ConsistentRead: true } },
        }),
      );
      for (const item of answer.Responses?.[stack.resources.tables.results] ?? []) records.push(item as TaskResult);
      keys =
        (answer.UnprocessedKeys?.[stack.resources.tables.results]?.Keys as Record<string, unknown>[] | undefined) ?? [];
    }
  }
  return records;
}

export function failuresByCode(results: Map<string, TaskResult>): Record<string, number> {
  const byCode: Record<string, number> = {};
  for (const result of results.values()) {
    if (result.status === 'failed')
      byCode[result.errorCode ?? 'unknown'] = (byCode[result.errorCode ?? 'unknown'] ?? 0) + 1;
  }
  return byCode;
}

export function solveTimes(results: Iterable<TaskResult>): number[] {
  return [...results]
    .filter((r) => r.status === 'solved' && typeof r.solveMs === 'number')
    .map((r) => r.solveMs as number);
}

export function count(results: Map<string, TaskResult>, status: TaskResult['status']): number {
  let n = 0;
  for (const result of results.values()) if (result.status === status) n++;
  return n;
}

export function endToEnd(results: Iterable<TaskResult>): number[] {
  const values: number[] = [];
  for (const result of results) {
    if (result.status === 'solved' && result.completedAt !== undefined && result.submittedAt !== undefined)
      values.push(result.completedAt - result.submittedAt);
  }
  return values;
}
