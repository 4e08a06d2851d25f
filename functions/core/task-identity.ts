/**
 * What a task id means: the producer's idempotency key. A task's identity is its id plus a
 * fingerprint of its content, so the same id with other content is told apart from a retry.
 * Pure: no I/O (hashing only).
 *
 * The shape follows Powertools' idempotency utility (payload validation): the record keeps a
 * hash of the payload, never the payload, and a later request with the same key but another
 * hash is refused rather than answered with the first result. As there, the hash is compared
 * on every path that finds an existing record, the failed conditional write included.
 */
import { createHash } from 'node:crypto';

/** DLQ reason of a task whose id is in use by a task with other content. */
export const ID_CONFLICT = 'ID_CONFLICT';

/** What the fingerprint covers; the id, priority and submittedAt are not content. */
export interface TaskContent {
  method: string;
  params: Readonly<Record<string, unknown>>;
}

/**
 * SHA-256 (hex) of the task's method and params in a canonical form: params sorted by name,
 * serialised as JSON. Two tasks with the same method and the same params, whatever the order
 * their producer wrote them in, have the same fingerprint. Params are flat (strings, numbers,
 * 0/1 flags), so a sort of the top-level names is the whole canonical form.
 */
export function taskFingerprint(task: TaskContent): string {
  const params = Object.keys(task.params)
    .filter((name) => task.params[name] !== undefined)
    .sort()
    .map((name) => [name, task.params[name]]);
  return createHash('sha256')
    .update(JSON.stringify({ method: task.method, params }))
    .digest('hex');
}

/**
 * Records written before fingerprints existed carry none: they are taken as the same content
 * (what the fleet assumed then), so a redelivery of such a task stays a duplicate and is never
 * solved twice; they age out with the result TTL.
 */
export function sameContent(recorded: string | undefined, fingerprint: string): boolean {
  return recorded === undefined || recorded === fingerprint;
}

/** The DLQ detail (and the producer's error text) for a conflicting id; names no params. */
export function describeIdConflict(
  taskId: string,
  existing: { status: string; method?: string | undefined; expiresAt?: number | undefined },
): string {
  const until = existing.expiresAt === undefined ? '' : ` until ${new Date(existing.expiresAt * 1000).toISOString()}`;
  return (
    `id "${taskId}" is in use${until} by a ${existing.method ?? 'task'} task with other content ` +
    `(status ${existing.status}); an id names one task for as long as its result lives: use a new id`
  );
}
