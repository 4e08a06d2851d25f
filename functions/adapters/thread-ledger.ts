/**
 * The thread ledger on the governor table: one item (`id` = THREAD_LEDGER_ID), written by the
 * consumer with single-item updates (ADD and SET, no condition, no transaction), read by the
 * governor with one consistent GetItem per tick.
 *
 * Held threads are counted in lease buckets: an accepted submission ADDs 1 to the bucket of its
 * acceptance time (`h<bucket>`), its release ADDs −1 to the same bucket (a leftover's count moves
 * to the bucket of the moment its delivery gave up on it). The fleet holds the sum
 * of the current and the previous bucket, and the next: a writer whose clock runs seconds ahead
 * counts there near a boundary. A thread is never held longer than one lease (the solve
 * deadline), so a count a crashed invocation never took back falls out of the sum within two
 * leases, with no TTL and no reconciliation. Each acceptance REMOVEs the two buckets before the
 * previous one of its own clock's, so the item stays small: not the one just before (a writer
 * ahead would remove the bucket the others still count as their previous, with live threads).
 *
 * Each answer is recorded with the threads held at that moment, copied inside the same update
 * (`SET refusedHeld = h<k> + h<k−1>`: operands read the item as it was before the update). A
 * refusal also ADDs 1 to `refusalRun`, an acceptance SETs it to 0: the refusals since the newest
 * acceptance (a run of them halves the fleet's room, `roomLimit`).
 *
 * A release whose answer was read as solved also ADDs 1 to `solved` in the same update: the
 * governor's price per solve is the provider's balance drop over the rise of that count.
 *
 * Every acceptance and refusal also ADDs 1 to its minute's counter (`ma<minute>`, `mr<minute>`) and
 * REMOVEs the counters of minutes the parked fleet's metric window no longer reads
 * (functions/core/solve-window.ts): submissions counted without a write of their own.
 *
 * The governor writes three things here: its spend grant (`grantLimit`, `grantUntil`), set each tick
 * the money above the pause level is nearly spent and removed when it is not; in the parked
 * design, the answers its watch recorded, ADDed to `solved` in batches (`countSolved`); and the
 * time up to which it lifted the refusals' hold (`liftedAt`, `liftHold`: its test of one thread
 * more while a refusal holds the fleet).
 */
import { GetCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type {
  LedgerEvent,
  RefusalHoldLifter,
  SolvedCounter,
  SpendGrant,
  SpendGrantWriter,
  ThreadLease,
  ThreadLedgerReader,
  ThreadLedgerReading,
  ThreadLedgerRecorder,
} from '../core/thread-ledger.js';

import { THREAD_LEDGER_ID } from '../core/deployment.js';
import { minuteOf, WINDOW_MINUTES } from '../core/solve-window.js';

/** Prefixes of the ledger's per-minute counters of accepted and refused submissions. */
export const LEDGER_ACCEPTED_MINUTE = 'ma';
export const LEDGER_REFUSED_MINUTE = 'mr';

export { THREAD_LEDGER_ID };

export interface DynamoThreadLedgerOptions {
  documents: DynamoDBDocumentClient;
  tableName: string;
  /** Longest a thread is held, ms: the solve deadline plus the record margin. */
  leaseMs: number;
  /** @default THREAD_LEDGER_ID */
  id?: string;
  /** @default Date.now (the governor's read sums the buckets of its own now) */
  clock?: () => number;
}

/**
 * Lease of a held thread, ms: the consumer's function timeout. A delivery cannot hold a solver
 * thread longer than its invocation lives, so a count left by a crash leaves the sum within two.
 */
export function threadLeaseMs(settings: { functionTimeoutSeconds: number }): number {
  return settings.functionTimeoutSeconds * 1000;
}

/**
 * The ledger of a deployment whose environment names a governor table (both handlers share it:
 * the consumer records, the governor reads); undefined without one. `id` picks the item: the
 * primary consumer's or the overflow consumer's (`threadLedgerIdOf`).
 */
export function threadLedgerFor(
  environment: { settings: { functionTimeoutSeconds: number }; tables: { governor: string | undefined } },
  documents: DynamoDBDocumentClient,
  clock?: () => number,
  id: string = THREAD_LEDGER_ID,
): ThreadLedger | undefined {
  const tableName = environment.tables.governor;
  if (tableName === undefined) return undefined;
  return createDynamoThreadLedger({
    documents,
    tableName,
    leaseMs: threadLeaseMs(environment.settings),
    id,
    ...(clock ? { clock } : {}),
  });
}

/** Why a ledger write or read failed; the cause carries the SDK error. */
export class ThreadLedgerError extends Error {
  override readonly name = 'ThreadLedgerError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
  }
}

/**
 * The ledger's sides: the consumer's recorder, the governor's reader, its spend grant and its
 * watch's count of the solves it recorded.
 */
export type ThreadLedger = ThreadLedgerRecorder &
  ThreadLedgerReader &
  SpendGrantWriter &
  SolvedCounter &
  RefusalHoldLifter;

/** Build the ledger on DynamoDB (or dynalite): the consumer's recorder and the governor's reader in one. */
export function createDynamoThreadLedger(
  options: DynamoThreadLedgerOptions,
): ThreadLedger & Required<Pick<ThreadLedger, 'takeGrant' | 'returnGrant'>> {
  if (!(options.leaseMs > 0)) throw new RangeError(`thread ledger lease must be positive (given ${options.leaseMs})`);
  const id = options.id ?? THREAD_LEDGER_ID;
  const clock = options.clock ?? Date.now;
  const bucketOf = (now: number) => Math.floor(now / options.leaseMs);
  const key = { TableName: options.tableName, Key: { id } };

  /**
   * `held` as an update operand: the current and previous buckets, 0 where absent. (Not the next
   * bucket a writer whose clock runs ahead may count in, as `readingOf` adds: an update expression
   * takes one arithmetic operator per value; the count recorded beside an answer may miss such
   * threads for the seconds of skew before a boundary.)
   */
  const heldOperand = (bucket: number) => ({
    expression: 'if_not_exists(#cur, :zero) + if_not_exists(#prev, :zero)',
    names: { '#cur': `h${bucket}`, '#prev': `h${bucket - 1}` },
  });

  const { send, sendIf } = ledgerSender(options.documents);

  return {
    async accepted(now) {
      const bucket = bucketOf(now);
      const held = heldOperand(bucket);
      const minute = minuteCount('acceptance', now);
      await send(
        'acceptance',
        new UpdateCommand({
          ...key,
          UpdateExpression: `SET acceptedHeld = ${held.expression}, acceptedAt = :now, refusalRun = :zero ADD #cur :one, acceptances :one, ${minute.add} REMOVE #old1, #old2, #oold1, #oold2, ${minute.remove}`,
          ExpressionAttributeNames: {
            ...held.names,
            '#old1': `h${bucket - 3}`,
            '#old2': `h${bucket - 4}`,
            '#oold1': `o${bucket - 3}`,
            '#oold2': `o${bucket - 4}`,
            ...minute.names,
          },
          ExpressionAttributeValues: { ':zero': 0, ':one': 1, ':now': now },
        }),
      );
      return { bucket };
    },

    async released(lease, outcome) {
      // A solve is counted in the release's own update: one write per freed thread, as before.
      const solved = outcome?.solved === true;
      await send(
        'release',
        new UpdateCommand({
          ...key,
          UpdateExpression: solved ? 'ADD #bucket :minusOne, solved :one' : 'ADD #bucket :minusOne',
          ExpressionAttributeNames: { '#bucket': `h${lease.bucket}` },
          ExpressionAttributeValues: solved ? { ':minusOne': -1, ':one': 1 } : { ':minusOne': -1 },
        }),
      );
    },

    async leftOver(lease, solverId) {
      await send('leftover', new UpdateCommand({ ...key, ...leftoverUpdate(lease, bucketOf(clock()), solverId) }));
    },

    async leftoverAnswered(solverId) {
      const out = await send('read', new GetCommand({ ...key, ConsistentRead: true }));
      const item = (out as { Item?: Record<string, unknown> }).Item;
      for (const entry of leftoverEntriesOf(item, solverId)) {
        // Only the delivery that removes the entry frees the thread (two resumers release it once).
        await sendIf(
          'leftover release',
          new UpdateCommand({
            ...key,
            UpdateExpression: 'ADD #h :minusOne, #o :minusOne DELETE leftoverIds :entry',
            ConditionExpression: 'contains(leftoverIds, :name)',
            ExpressionAttributeNames: { '#h': `h${entry.bucket}`, '#o': `o${entry.bucket}` },
            ExpressionAttributeValues: { ':minusOne': -1, ':entry': new Set([entry.name]), ':name': entry.name },
          }),
        );
      }
    },

    async refused(now) {
      const held = heldOperand(bucketOf(now));
      const minute = minuteCount('refusal', now);
      const out = await send(
        'refusal',
        new UpdateCommand({
          ...key,
          UpdateExpression: `SET refusedHeld = ${held.expression}, refusedAt = :now ADD refusals :one, refusalRun :one, ${minute.add} REMOVE ${minute.remove}`,
          ExpressionAttributeNames: { ...held.names, ...minute.names },
          ExpressionAttributeValues: { ':zero': 0, ':one': 1, ':now': now },
          ReturnValues: 'UPDATED_NEW',
        }),
      );
      const refusedHeld = (out as { Attributes?: Record<string, unknown> }).Attributes?.refusedHeld;
      return typeof refusedHeld === 'number' ? Math.max(0, refusedHeld) : 0;
    },

    async recordEvent(event, at, held) {
      // The refusal run moves as for `accepted` / `refused`: an acceptance ends it, a refusal extends it.
      const minute = minuteCount(event, at);
      const accepted = event === 'acceptance';
      const update = accepted
        ? `SET acceptedHeld = :held, acceptedAt = :at, refusalRun = :zero ADD acceptances :one, ${minute.add}`
        : `SET refusedHeld = :held, refusedAt = :at ADD refusals :one, refusalRun :one, ${minute.add}`;
      const values = { ':held': Math.max(0, held), ':at': at, ':one': 1, ...(accepted ? { ':zero': 0 } : {}) };
      await send(
        event,
        new UpdateCommand({
          ...key,
          UpdateExpression: `${update} REMOVE ${minute.remove}`,
          ExpressionAttributeNames: minute.names,
          ExpressionAttributeValues: values,
        }),
      );
    },

    async read() {
      const out = await send('read', new GetCommand({ ...key, ConsistentRead: true }));
      return readingOf((out as { Item?: Record<string, unknown> }).Item, bucketOf(clock()));
    },

    async setGrant(grant) {
      await send('grant', new UpdateCommand({ ...key, ...grantUpdate(grant) }));
    },

    async liftHold(refusedAt) {
      await sendIf('hold lift', new UpdateCommand({ ...key, ...liftUpdate(refusedAt) }));
    },

    ...grantReservations(key, sendIf),

    async countSolved(count) {
      if (!(count > 0)) return;
      await send(
        'solved count',
        new UpdateCommand({ ...key, UpdateExpression: 'ADD solved :n', ExpressionAttributeValues: { ':n': count } }),
      );
    },
  };
}

/**
 * The answer's minute counter (`ma<minute>` for an acceptance, `mr<minute>` for a refusal, read
 * by the parked fleet's metric window, functions/core/solve-window.ts), and the REMOVE of the
 * minutes the window no longer reads, so the item stays small.
 */
function minuteCount(event: 'acceptance' | 'refusal', at: number) {
  const minute = minuteOf(at);
  const prefix = event === 'acceptance' ? LEDGER_ACCEPTED_MINUTE : LEDGER_REFUSED_MINUTE;
  return {
    add: '#minute :one',
    remove: '#stale1, #stale2',
    names: {
      '#minute': `${prefix}${minute}`,
      // The window reads back to minute − (WINDOW_MINUTES + 1) while the last minute settles.
      '#stale1': `${prefix}${minute - WINDOW_MINUTES - 2}`,
      '#stale2': `${prefix}${minute - WINDOW_MINUTES - 3}`,
    },
  };
}

/**
 * The update that leaves a thread over: it stays held and ages out with its bucket; o counts it
 * as held by no invocation, and the entry lets the delivery that resumes the id free it when it
 * answers. It moves to the current bucket first: the solver may work on it a lease more from now
 * (it pauses solves through an outage), so it ages out a lease after its delivery gave up on it at
 * the earliest, not after its acceptance.
 */
function leftoverUpdate(lease: ThreadLease, current: number, solverId: string | undefined) {
  const bucket = Math.max(current, lease.bucket);
  const moved = bucket !== lease.bucket;
  const entry = solverId === undefined ? undefined : leftoverEntry(solverId, bucket);
  const adds = [...(moved ? ['#from :minusOne', '#to :one'] : []), '#left :one'];
  if (entry !== undefined) adds.push('leftoverIds :entry');
  return {
    UpdateExpression: `ADD ${adds.join(', ')}`,
    ExpressionAttributeNames: {
      '#left': `o${bucket}`,
      ...(moved ? { '#from': `h${lease.bucket}`, '#to': `h${bucket}` } : {}),
    },
    ExpressionAttributeValues: {
      ':one': 1,
      ...(moved ? { ':minusOne': -1 } : {}),
      ...(entry !== undefined ? { ':entry': new Set([entry]) } : {}),
    },
  };
}

/** The ledger's requests: failures as ThreadLedgerError naming what failed; `sendIf` for a conditional update. */
function ledgerSender(documents: DynamoThreadLedgerOptions['documents']) {
  const send = async (what: string, command: UpdateCommand | GetCommand) => {
    try {
      return await documents.send(command as UpdateCommand);
    } catch (error) {
      throw new ThreadLedgerError(
        `thread ledger ${what} failed: ${(error as Error).name}: ${(error as Error).message}`,
        {
          cause: error,
        },
      );
    }
  };
  /** A conditional update: true when written, false when its condition did not hold. */
  const sendIf = (what: string, command: UpdateCommand): Promise<boolean> =>
    send(what, command).then(
      () => true,
      (error: ThreadLedgerError) => {
        if ((error.cause as Error | undefined)?.name === 'ConditionalCheckFailedException') return false;
        throw error;
      },
    );
  return { send, sendIf };
}

/**
 * The grant's reservations on the ledger item: `takeGrant` adds one to `grantTaken` while it is
 * under `grantLimit` (a conditional update, so invocations that read the same count cannot each
 * take the last one), `returnGrant` gives one back (never below 0: nothing to give back on a
 * ledger recreated since, nothing lost).
 */
function grantReservations(
  key: { TableName: string; Key: Record<string, unknown> },
  sendIf: (what: string, command: UpdateCommand) => Promise<boolean>,
): Required<Pick<ThreadLedger, 'takeGrant' | 'returnGrant'>> {
  return {
    takeGrant: () =>
      sendIf(
        'grant reservation',
        new UpdateCommand({
          ...key,
          UpdateExpression: 'ADD grantTaken :one',
          ConditionExpression: 'grantTaken < grantLimit',
          ExpressionAttributeValues: { ':one': 1 },
        }),
      ),
    async returnGrant() {
      await sendIf(
        'grant return',
        new UpdateCommand({
          ...key,
          UpdateExpression: 'ADD grantTaken :minusOne',
          ConditionExpression: 'grantTaken > :zero',
          ExpressionAttributeValues: { ':minusOne': -1, ':zero': 0 },
        }),
      );
    },
  };
}

/** The update that lifts the hold of the refusals at or before `refusedAt`; never back (a later lift stands). */
function liftUpdate(refusedAt: number) {
  return {
    UpdateExpression: 'SET liftedAt = :at',
    ConditionExpression: 'attribute_not_exists(liftedAt) OR liftedAt < :at',
    ExpressionAttributeValues: { ':at': refusedAt },
  };
}

/** The update that sets the governor's spend grant, or removes it. */
function grantUpdate(grant: SpendGrant | undefined) {
  return grant === undefined
    ? { UpdateExpression: 'REMOVE grantLimit, grantUntil' }
    : {
        // The reservations count from wherever they stand (the grant's limit is in them).
        UpdateExpression: 'SET grantLimit = :limit, grantUntil = :until, grantTaken = if_not_exists(grantTaken, :zero)',
        ExpressionAttributeValues: { ':limit': grant.limit, ':until': grant.until, ':zero': 0 },
      };
}

/**
 * The reading an item gives at bucket `bucket` (an absent item: nothing recorded yet, all 0).
 * `solved` is left out until a release has counted one: a ledger never told of a solve (one
 * written before the counter, or by a consumer that read no answer yet) does not claim 0.
 * `grantTaken`: the grant's reservations (0 before any).
 */
export function readingOf(item: Record<string, unknown> | undefined, bucket: number): ThreadLedgerReading {
  const num = (name: string): number => {
    const value = item?.[name];
    return typeof value === 'number' && Number.isFinite(value) ? value : 0;
  };
  const event = (at: string, held: string): LedgerEvent | undefined =>
    typeof item?.[at] === 'number' && typeof item?.[held] === 'number'
      ? { at: item[at] as number, held: Math.max(0, item[held] as number) }
      : undefined;
  const lastRefusal = event('refusedAt', 'refusedHeld');
  const lastAcceptance = event('acceptedAt', 'acceptedHeld');
  const solved = solvedOf(item);
  // The next bucket too: a writer whose clock runs ahead counts there near a boundary.
  const leftover = Math.max(0, num(`o${bucket + 1}`) + num(`o${bucket}`) + num(`o${bucket - 1}`));
  const run = item?.refusalRun;
  const grant = grantOf(item);
  const lifted = item?.liftedAt;
  return {
    // A release can land before its acceptance's ADD (both are unordered writes): never below 0.
    held: Math.max(0, num(`h${bucket + 1}`) + num(`h${bucket}`) + num(`h${bucket - 1}`)),
    ...(leftover > 0 ? { leftover } : {}),
    refusals: num('refusals'),
    acceptances: num('acceptances'),
    // The grant counts in its reservations (0 before the first grant's).
    grantTaken: num('grantTaken'),
    ...(solved !== undefined ? { solved } : {}),
    ...(lastRefusal ? { lastRefusal } : {}),
    ...(lastAcceptance ? { lastAcceptance } : {}),
    ...(typeof run === 'number' && Number.isFinite(run) ? { refusalRun: Math.max(0, run) } : {}),
    ...(grant ? { grant } : {}),
    ...(typeof lifted === 'number' && Number.isFinite(lifted) ? { liftedAt: lifted } : {}),
  };
}

/** The governor's spend grant on a ledger item, when both of its fields are there. */
function grantOf(item: Record<string, unknown> | undefined): SpendGrant | undefined {
  const limit = item?.grantLimit;
  const until = item?.grantUntil;
  return typeof limit === 'number' && typeof until === 'number' ? { limit, until } : undefined;
}

/** A leftover's entry in the item's `leftoverIds` string set: `<solver id>@<lease bucket>`. */
function leftoverEntry(solverId: string, bucket: number): string {
  return `${solverId}@${bucket}`;
}

/** The leftover entries of `solverId` in an item, with their buckets. */
function leftoverEntriesOf(
  item: Record<string, unknown> | undefined,
  solverId: string,
): { name: string; bucket: number }[] {
  const ids = item?.leftoverIds;
  const names = ids instanceof Set ? [...ids] : Array.isArray(ids) ? ids : [];
  return names
    .filter((name): name is string => typeof name === 'string' && name.startsWith(`${solverId}@`))
    .map((name) => ({ name, bucket: Number(name.slice(solverId.length + 1)) }))
    .filter((entry) => Number.isInteger(entry.bucket));
}

/** The `solved` counter of a ledger item; undefined until a solve was counted (never read as 0). */
export function solvedOf(item: Record<string, unknown> | undefined): number | undefined {
  const solved = item?.solved;
  return typeof solved === 'number' && Number.isFinite(solved) ? solved : undefined;
}

/** The same ledger in memory (tests): same buckets, same arithmetic, the same reservations. */
export function createMemoryThreadLedger(options: { leaseMs: number; clock?: () => number }): ThreadLedger {
  const item: Record<string, number> = {};
  const leftovers = new Map<string, number>();
  const clock = options.clock ?? Date.now;
  const bucketOf = (now: number) => Math.floor(now / options.leaseMs);
  const heldAt = (bucket: number) => (item[`h${bucket}`] ?? 0) + (item[`h${bucket - 1}`] ?? 0);
  const add = (name: string, by: number) => {
    item[name] = (item[name] ?? 0) + by;
  };
  return {
    async accepted(now) {
      const bucket = bucketOf(now);
      item.acceptedHeld = heldAt(bucket);
      item.acceptedAt = now;
      item.refusalRun = 0;
      add(`h${bucket}`, 1);
      add('acceptances', 1);
      for (const old of [bucket - 3, bucket - 4]) {
        delete item[`h${old}`];
        delete item[`o${old}`];
      }
      return { bucket };
    },
    async leftOver(lease: ThreadLease, solverId?: string) {
      const bucket = Math.max(bucketOf(clock()), lease.bucket);
      if (bucket !== lease.bucket) {
        add(`h${lease.bucket}`, -1);
        add(`h${bucket}`, 1);
      }
      add(`o${bucket}`, 1);
      if (solverId !== undefined) leftovers.set(solverId, bucket);
    },
    async leftoverAnswered(solverId: string) {
      const bucket = leftovers.get(solverId);
      if (bucket === undefined) return;
      leftovers.delete(solverId);
      add(`h${bucket}`, -1);
      add(`o${bucket}`, -1);
    },
    async released(lease: ThreadLease, outcome?: { solved: boolean }) {
      add(`h${lease.bucket}`, -1);
      if (outcome?.solved === true) add('solved', 1);
    },
    async refused(now) {
      item.refusedHeld = heldAt(bucketOf(now));
      item.refusedAt = now;
      add('refusals', 1);
      add('refusalRun', 1);
      return Math.max(0, item.refusedHeld);
    },
    async recordEvent(event, at, held) {
      const prefix = event === 'acceptance' ? 'accepted' : 'refused';
      item[`${prefix}Held`] = Math.max(0, held);
      item[`${prefix}At`] = at;
      add(event === 'acceptance' ? 'acceptances' : 'refusals', 1);
      if (event === 'acceptance') item.refusalRun = 0;
      else add('refusalRun', 1);
    },
    async read() {
      return readingOf({ ...item }, bucketOf(clock()));
    },
    async countSolved(count) {
      if (count > 0) add('solved', count);
    },
    async liftHold(refusedAt) {
      item.liftedAt = Math.max(item.liftedAt ?? Number.NEGATIVE_INFINITY, refusedAt);
    },
    async setGrant(grant) {
      if (grant === undefined) {
        delete item.grantLimit;
        delete item.grantUntil;
      } else {
        item.grantLimit = grant.limit;
        item.grantUntil = grant.until;
        item.grantTaken ??= 0;
      }
    },
    // The reservations as DynamoDB's conditional updates keep them (grantReservations).
    async takeGrant() {
      const limit = item.grantLimit;
      const taken = item.grantTaken;
      if (limit === undefined || taken === undefined || taken >= limit) return false;
      item.grantTaken = taken + 1;
      return true;
    },
    async returnGrant() {
      if ((item.grantTaken ?? 0) > 0) add('grantTaken', -1);
    },
  };
}
