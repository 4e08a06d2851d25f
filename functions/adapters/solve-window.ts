/**
 * The parked fleet's metric window on the governor table (functions/core/solve-window.ts): four
 * slot items (`<ledger id>#window#<minute mod 4>`), each the counts of one minute, and the thread
 * ledger's per-minute submission counters.
 *
 * A write ADDs to its minute's slot on condition that the slot holds that minute (or nothing); a
 * slot still holding an older minute is reset by a conditional put (only over an older minute), and
 * a writer that lost that race ADDs again. Counts from a writer whose clock is a whole rotation
 * (four minutes) behind are dropped: the window no longer reads their minute.
 *
 * The read takes the window's two slots and the ledger, strongly consistent (three read units),
 * and removes ledger minute counters an idle spell left behind (the ledger's own updates
 * remove the rest). A failed read is an unknown window, never an empty one.
 */
import { GetCommand, PutCommand, UpdateCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { MetricsReader } from '../core/governor/ports.js';
import type { Clock } from '../core/ports.js';
import {
  histogramOf,
  type LedgerMinutes,
  type MinuteCounts,
  minuteOf,
  WINDOW_COUNTERS,
  WINDOW_MINUTES,
  WINDOW_SLOTS,
  type SolveWindowWriter,
  solveWindowSlotIds,
  type WindowCounter,
  type WindowCounts,
  windowMinutes,
  windowOf,
} from '../core/solve-window.js';
import { LEDGER_ACCEPTED_MINUTE, LEDGER_REFUSED_MINUTE, THREAD_LEDGER_ID } from './thread-ledger.js';

/** The window's two sides: the writers' and the governor's (whose failed read throws: wrap it in solveWindowReader). */
export type SolveWindow = SolveWindowWriter & MetricsReader;

export interface DynamoSolveWindowOptions {
  documents: DynamoDBDocumentClient;
  tableName: string;
  /** The thread ledger's item id (its per-minute counters are read; the slots are named after it). */
  ledgerId: string;
  clock?: Clock;
}

/** Why a window write or read failed; the cause carries the SDK error. */
export class SolveWindowError extends Error {
  override readonly name = 'SolveWindowError';
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, options);
  }
}

function isConditionFailure(error: unknown): boolean {
  return (error as Error | undefined)?.name === 'ConditionalCheckFailedException';
}

/** The counters of `counts` as attribute → amount, the histogram's buckets as `b<k>`. */
function amountsOf(counts: WindowCounts): Map<string, number> {
  const amounts = new Map<string, number>();
  for (const name of WINDOW_COUNTERS) {
    const n = counts[name] ?? 0;
    if (n > 0) amounts.set(name, n);
  }
  const times = (counts.solveMs ?? []).filter((ms) => Number.isFinite(ms) && ms >= 0);
  if (times.length > 0) {
    amounts.set('solveCount', times.length);
    amounts.set('solveMsSum', Math.round(times.reduce((a, b) => a + b, 0)));
    for (const [k, n] of histogramOf(times)) amounts.set(`b${k}`, n);
  }
  return amounts;
}

/** A slot item as the window reads it; undefined when it holds no minute. */
export function minuteCountsOf(item: Record<string, unknown> | undefined): MinuteCounts | undefined {
  const minute = item?.minute;
  if (typeof minute !== 'number') return undefined;
  const num = (name: string) => {
    const v = item?.[name];
    return typeof v === 'number' && Number.isFinite(v) && v > 0 ? v : 0;
  };
  const counters = Object.fromEntries(WINDOW_COUNTERS.map((name) => [name, num(name)])) as Record<
    WindowCounter,
    number
  >;
  const buckets = new Map<number, number>();
  for (const name of Object.keys(item ?? {})) {
    const match = /^b(\d+)$/.exec(name);
    if (match) buckets.set(Number(match[1]), num(name));
  }
  return { minute, counters, solveCount: num('solveCount'), solveMsSum: num('solveMsSum'), buckets };
}

/** The ledger item's per-minute counters, and the names of those older than the window's slots. */
export function ledgerMinutesOf(
  item: Record<string, unknown> | undefined,
  now: number,
): LedgerMinutes & { stale: string[] } {
  const acceptances = new Map<number, number>();
  const refusals = new Map<number, number>();
  const stale: string[] = [];
  const oldest = minuteOf(now) - WINDOW_SLOTS;
  const pattern = new RegExp(`^(${LEDGER_ACCEPTED_MINUTE}|${LEDGER_REFUSED_MINUTE})(\\d+)$`);
  for (const [name, value] of Object.entries(item ?? {})) {
    const match = pattern.exec(name);
    if (!match || typeof value !== 'number') continue;
    const minute = Number(match[2]);
    if (minute < oldest) stale.push(name);
    else (match[1] === LEDGER_ACCEPTED_MINUTE ? acceptances : refusals).set(minute, value);
  }
  return { acceptances, refusals, stale };
}

/** Build the window on DynamoDB (or dynalite): the writers' side and the governor's reader in one. */
export function createDynamoSolveWindow(options: DynamoSolveWindowOptions): SolveWindow {
  const clock = options.clock ?? Date.now;
  const slotIds = solveWindowSlotIds(options.ledgerId);
  const slotKey = (minute: number) => ({ id: slotIds[minute % WINDOW_SLOTS] as string });
  const fail = (what: string, error: unknown) =>
    new SolveWindowError(`solve window ${what} failed: ${(error as Error).name}: ${(error as Error).message}`, {
      cause: error,
    });

  const addTo = async (minute: number, amounts: Map<string, number>): Promise<boolean> => {
    const names: Record<string, string> = { '#minute': 'minute' };
    const values: Record<string, number> = { ':m': minute };
    const adds: string[] = [];
    let i = 0;
    for (const [name, n] of amounts) {
      names[`#a${i}`] = name;
      values[`:a${i}`] = n;
      adds.push(`#a${i} :a${i}`);
      i += 1;
    }
    try {
      await options.documents.send(
        new UpdateCommand({
          TableName: options.tableName,
          Key: slotKey(minute),
          UpdateExpression: `SET #minute = :m ADD ${adds.join(', ')}`,
          ConditionExpression: 'attribute_not_exists(#minute) OR #minute = :m',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw fail('write', error);
    }
  };

  /** Start the slot afresh with this minute's first counts; false when it holds this minute or a later one. */
  const reset = async (minute: number, amounts: Map<string, number>): Promise<boolean> => {
    try {
      await options.documents.send(
        new PutCommand({
          TableName: options.tableName,
          Item: { ...slotKey(minute), minute, ...Object.fromEntries(amounts) },
          ConditionExpression: 'attribute_not_exists(#minute) OR #minute < :m',
          ExpressionAttributeNames: { '#minute': 'minute' },
          ExpressionAttributeValues: { ':m': minute },
        }),
      );
      return true;
    } catch (error) {
      if (isConditionFailure(error)) return false;
      throw fail('slot reset', error);
    }
  };

  const get = async (id: string): Promise<Record<string, unknown> | undefined> => {
    const out = await options.documents.send(
      new GetCommand({ TableName: options.tableName, Key: { id }, ConsistentRead: true }),
    );
    return out.Item as Record<string, unknown> | undefined;
  };

  return {
    async add(counts, at) {
      const amounts = amountsOf(counts);
      if (amounts.size === 0) return;
      const minute = minuteOf(at ?? clock());
      if (await addTo(minute, amounts)) return;
      if (await reset(minute, amounts)) return;
      // Another writer started this minute meanwhile: add to it. Refused again, the slot holds a
      // later minute (this clock is a rotation behind) and the counts fall outside every window.
      await addTo(minute, amounts);
    },

    async read() {
      const now = clock();
      const { last } = windowMinutes(now);
      const minutes = Array.from({ length: WINDOW_MINUTES }, (_, i) => last - i);
      let items: Array<Record<string, unknown> | undefined>;
      try {
        items = await Promise.all([...minutes.map((m) => get(slotKey(m).id)), get(options.ledgerId)]);
      } catch (error) {
        throw fail('read', error);
      }
      const ledgerItem = items.pop();
      const slots = items.map(minuteCountsOf).filter((slot): slot is MinuteCounts => slot !== undefined);
      const ledger = ledgerMinutesOf(ledgerItem, now);
      if (ledger.stale.length > 0) await removeStale(ledger.stale);
      return windowOf(now, slots, ledger);
    },
  };

  /** Counters an idle spell left on the ledger (its updates remove only the two minutes just out of reach). */
  async function removeStale(names: string[]): Promise<void> {
    const aliases = Object.fromEntries(names.map((name, i) => [`#s${i}`, name]));
    await options.documents
      .send(
        new UpdateCommand({
          TableName: options.tableName,
          Key: { id: options.ledgerId },
          UpdateExpression: `REMOVE ${Object.keys(aliases).join(', ')}`,
          ExpressionAttributeNames: aliases,
        }),
      )
      // Best effort: the next read tries again, and the window ignores them meanwhile.
      .catch(() => undefined);
  }
}

/**
 * The governor's reader over the window: a failed read is reported and read as unknown (as a
 * failed GetMetricData), never as a quiet minute.
 */
export function solveWindowReader(window: MetricsReader, onError: (error: unknown) => void): MetricsReader {
  return {
    async read() {
      try {
        return await window.read();
      } catch (error) {
        onError(error);
        return undefined;
      }
    },
  };
}

/**
 * The window of a parked fleet's primary lane (solveMode `park`, a leases table and a governor
 * table in the environment); undefined elsewhere: a waiting fleet, and the overflow consumer,
 * whose metrics the governor reads from CloudWatch.
 */
export function solveWindowFor(
  environment: {
    settings: { solveMode: string };
    tables: { governor: string | undefined; leases?: string | undefined };
    provider?: string | undefined;
  },
  documents: DynamoDBDocumentClient,
  clock?: Clock,
): SolveWindow | undefined {
  const { settings, tables } = environment;
  if (settings.solveMode !== 'park' || tables.leases === undefined || tables.governor === undefined) return undefined;
  if ((environment.provider ?? 'primary') !== 'primary') return undefined;
  return createDynamoSolveWindow({
    documents,
    tableName: tables.governor,
    ledgerId: THREAD_LEDGER_ID,
    ...(clock ? { clock } : {}),
  });
}
