/**
 * One snapshot of how a fleet stands, for `captcha-fleet status`: queues per lane, the DLQ,
 * the governor's last decision (its state item) with the overflow lane's, the split of solves
 * between the plan and the overflow provider (the two consumers' ledger counters), and solved /
 * failed / p95 over the last minutes — from CloudWatch in AWS, from the results table on a local
 * or emulated stack (where no CloudWatch runs). Unknown values stay undefined; nothing missing
 * is shown as 0.
 */
import { GetQueueAttributesCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { GetCommand, ScanCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { solvedOf } from '../functions/adapters/thread-ledger.js';
import { failureText } from '../functions/core/helpers/printable.js';
import { percentileOfSorted } from '../functions/core/helpers/stats.js';
import { GOVERNOR_STATE_ID, OVERFLOW_LEDGER_ID, THREAD_LEDGER_ID } from '../functions/core/deployment.js';
import type { Lane, OverflowStatus } from '../functions/core/governor/types.js';
import type { TaskResult } from '../functions/core/results.js';

export interface LaneStatus {
  backlog: number | undefined;
  inFlight: number | undefined;
  delayed: number | undefined;
  oldestAgeSeconds: number | undefined;
  ceiling: number | undefined;
  enabled: boolean | undefined;
}

/** A read `status` could not make: what, and the error's name and message (AWS's words, never the key). */
export interface UnreadPart {
  what: 'normal queue' | 'high queue' | 'DLQ' | 'governor state' | 'thread ledger' | 'overflow ledger';
  error: string;
}

const UNREAD_ORDER: readonly UnreadPart['what'][] = [
  'normal queue',
  'high queue',
  'DLQ',
  'governor state',
  'thread ledger',
  'overflow ledger',
];

export interface FleetStatus {
  at: number;
  /**
   * The reads that failed (unreachable endpoint, no such queue or table, no permission): their
   * parts show as unknown ("—"), which alone read as a quiet fleet. Empty when all were read.
   */
  unread: UnreadPart[];
  lanes: Partial<Record<Lane, LaneStatus>>;
  dlqDepth: number | undefined;
  governor:
    | {
        at: number | undefined;
        code: string | undefined;
        message: string | undefined;
        paused: boolean | undefined;
        pausedReason: string | undefined;
        freeThreads: number | undefined;
        neededThreads: number | undefined;
        shortfall: number | undefined;
      }
    | undefined;
  balance: number | undefined;
  /** The overflow lane as the governor's last decision left it; undefined without an overflow provider (or before its first tick). */
  overflow: (OverflowStatus & { at: number | undefined }) | undefined;
  /**
   * Solves counted by each consumer's thread ledger since it was created (the plan's and the
   * overflow provider's): undefined when the ledger cannot be read or has counted none yet.
   */
  solvesByProvider: { primary: number | undefined; overflow: number | undefined };
  /**
   * What the solves of the last hour cost, USD (each record's `costUsd`, or the consumers'
   * `SpendUsd` metric): in total, per provider and per method. Undefined values are unknown (the
   * source could not be read), never 0; a solve whose cost is not known counts in `unpriced`.
   */
  spend: SpendStatus;
  recent: {
    windowMinutes: number;
    /** Solved by either provider. */
    solved: number | undefined;
    /** Of those, solved by the overflow provider (absent without one). */
    overflowSolved?: number | undefined;
    failed: number | undefined;
    rejected: number | undefined;
    p95SolveMs: number | undefined;
    source: 'cloudwatch' | 'results-table';
  };
}

/** Fields of the governor's state item this reader relies on (all optional: older items lack some). */
interface StoredGovernorState {
  ceilings?: Partial<Record<Lane, number>>;
  pause?: { reason?: string };
  /** Items written before the state was grouped by concern. */
  pausedReason?: string;
  lastDecision?: {
    at?: number;
    code?: string;
    message?: string;
    ceilings?: Partial<Record<Lane, number>>;
    enabled?: Partial<Record<Lane, boolean>>;
    paused?: boolean;
    freeThreads?: number;
    neededThreads?: number;
    shortfall?: number;
    balance?: number;
    oldestAgeSeconds?: Partial<Record<Lane, number>>;
    overflow?: OverflowStatus;
  };
}

export interface SpendStatus {
  windowMinutes: number;
  totalUsd: number | undefined;
  byProvider: Partial<Record<'primary' | 'overflow', number>>;
  byMethod: Record<string, number>;
  /** Solves in the window with no known cost (results table only). */
  unpriced?: number;
  /** …by the provider that solved them: the plan's are priced by `solverPricesUsd`, the overflow provider's by `overflow.pricesUsd`. */
  unpricedByProvider?: Partial<Record<'primary' | 'overflow', number>>;
  source: 'cloudwatch' | 'results-table';
}

/** The spend window `status` shows: the last hour. */
export const SPEND_WINDOW_MINUTES = 60;

export interface RecentMetrics {
  solved: number | undefined;
  /** Of `solved`, the overflow provider's (left out without an overflow provider). */
  overflowSolved?: number | undefined;
  failed: number | undefined;
  rejected?: number | undefined;
  p95SolveMs: number | undefined;
  oldestAgeSeconds?: Partial<Record<Lane, number | undefined>>;
}

export interface FleetStatusSources {
  sqs: Pick<SQSClient, 'send'>;
  documents: Pick<DynamoDBDocumentClient, 'send'>;
  queueUrls: { normal: string; high?: string | undefined; dlq: string };
  tables: { results: string; governor: string };
  /**
   * AWS: CloudWatch-backed; absent → computed from the results table. `overflow` says whether the
   * fleet has an overflow provider (its consumer's window is read too).
   */
  recentMetrics?: (windowMinutes: number, overflow: boolean) => Promise<RecentMetrics>;
  /** AWS: the last hour's spend from CloudWatch; absent → summed from the results table. */
  recentSpend?: (windowMinutes: number) => Promise<Omit<SpendStatus, 'source' | 'windowMinutes'>>;
  clock?: () => number;
}

export async function readFleetStatus(
  sources: FleetStatusSources,
  options: { windowMinutes?: number } = {},
): Promise<FleetStatus> {
  const clock = sources.clock ?? Date.now;
  const windowMinutes = options.windowMinutes ?? 5;
  const unread: UnreadPart[] = [];
  const noted =
    (what: UnreadPart['what']) =>
    (error: unknown): undefined => {
      unread.push({ what, error: failureText(error) });
      return undefined;
    };
  const [normal, high, dlq, governorItem, primarySolves, overflowSolves] = await Promise.all([
    queueAttributes(sources.sqs, sources.queueUrls.normal).catch(noted('normal queue')),
    sources.queueUrls.high
      ? queueAttributes(sources.sqs, sources.queueUrls.high).catch(noted('high queue'))
      : Promise.resolve(undefined),
    queueAttributes(sources.sqs, sources.queueUrls.dlq).catch(noted('DLQ')),
    readGovernorItem(sources.documents, sources.tables.governor).catch(noted('governor state')),
    ledgerSolves(sources.documents, sources.tables.governor, THREAD_LEDGER_ID).catch(noted('thread ledger')),
    ledgerSolves(sources.documents, sources.tables.governor, OVERFLOW_LEDGER_ID).catch(noted('overflow ledger')),
  ]);
  // In the order of the reads, whichever failed first.
  unread.sort((a, b) => UNREAD_ORDER.indexOf(a.what) - UNREAD_ORDER.indexOf(b.what));
  // The CLI knows a fleet by its prefix only: whether it has an overflow provider, the governor's
  // state says (its last decision has an overflow lane, or the overflow ledger counted solves).
  const overflow = governorItem?.lastDecision?.overflow !== undefined || overflowSolves !== undefined;
  const recent = sources.recentMetrics
    ? {
        ...(await sources.recentMetrics(windowMinutes, overflow).catch(
          (): RecentMetrics => ({
            solved: undefined,
            ...(overflow ? { overflowSolved: undefined } : {}),
            failed: undefined,
            p95SolveMs: undefined,
          }),
        )),
        source: 'cloudwatch' as const,
      }
    : {
        ...(await recentFromResults(
          sources.documents,
          sources.tables.results,
          clock() - windowMinutes * 60_000,
          overflow,
        )),
        source: 'results-table' as const,
      };
  const spend: SpendStatus = sources.recentSpend
    ? {
        windowMinutes: SPEND_WINDOW_MINUTES,
        ...(await sources
          .recentSpend(SPEND_WINDOW_MINUTES)
          .catch(() => ({ totalUsd: undefined, byProvider: {}, byMethod: {} }))),
        source: 'cloudwatch',
      }
    : {
        windowMinutes: SPEND_WINDOW_MINUTES,
        ...(await spendFromResults(sources.documents, sources.tables.results, clock() - SPEND_WINDOW_MINUTES * 60_000)),
        source: 'results-table',
      };
  const decision = governorItem?.lastDecision;
  const lane = (name: Lane, attributes: Record<string, string> | undefined): LaneStatus => ({
    backlog: numberOf(attributes?.ApproximateNumberOfMessages),
    inFlight: numberOf(attributes?.ApproximateNumberOfMessagesNotVisible),
    delayed: numberOf(attributes?.ApproximateNumberOfMessagesDelayed),
    oldestAgeSeconds: recent.oldestAgeSeconds?.[name] ?? decision?.oldestAgeSeconds?.[name],
    ceiling: decision?.ceilings?.[name] ?? governorItem?.ceilings?.[name],
    enabled: decision?.enabled?.[name],
  });
  return {
    at: clock(),
    unread,
    // A high lane that could not be read is shown unknown, not left out.
    lanes: { normal: lane('normal', normal), ...(sources.queueUrls.high ? { high: lane('high', high) } : {}) },
    dlqDepth: numberOf(dlq?.ApproximateNumberOfMessages),
    governor: governorItem
      ? {
          at: decision?.at,
          code: decision?.code,
          message: decision?.message,
          paused: decision?.paused,
          pausedReason: governorItem.pause?.reason ?? governorItem.pausedReason,
          freeThreads: decision?.freeThreads,
          neededThreads: decision?.neededThreads,
          shortfall: decision?.shortfall,
        }
      : undefined,
    balance: decision?.balance,
    overflow: decision?.overflow ? { ...decision.overflow, at: decision.at } : undefined,
    solvesByProvider: { primary: primarySolves, overflow: overflowSolves },
    spend,
    recent: {
      windowMinutes,
      solved: recent.solved,
      ...('overflowSolved' in recent ? { overflowSolved: recent.overflowSolved } : {}),
      failed: recent.failed,
      rejected: recent.rejected,
      p95SolveMs: recent.p95SolveMs,
      source: recent.source,
    },
  };
}

/** The queue's depth attributes; throws when they cannot be read (the caller notes it). */
async function queueAttributes(sqs: Pick<SQSClient, 'send'>, url: string): Promise<Record<string, string> | undefined> {
  const out = await sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: [
        'ApproximateNumberOfMessages',
        'ApproximateNumberOfMessagesNotVisible',
        'ApproximateNumberOfMessagesDelayed',
      ],
    }),
  );
  return out.Attributes;
}

/** The governor's state item, undefined before its first tick; throws when the table cannot be read. */
async function readGovernorItem(
  documents: Pick<DynamoDBDocumentClient, 'send'>,
  table: string,
): Promise<StoredGovernorState | undefined> {
  const out = await documents.send(new GetCommand({ TableName: table, Key: { id: GOVERNOR_STATE_ID } }));
  return (out.Item as { state?: StoredGovernorState } | undefined)?.state;
}

/**
 * The `solved` counter of a consumer's thread ledger item (functions/adapters/thread-ledger.ts: a
 * release whose answer was read as solved ADDs 1 to it); undefined when never counted, thrown when unreadable.
 */
async function ledgerSolves(
  documents: Pick<DynamoDBDocumentClient, 'send'>,
  table: string,
  id: string,
): Promise<number | undefined> {
  const out = await documents.send(
    new GetCommand({
      TableName: table,
      Key: { id },
      ProjectionExpression: '#solved',
      ExpressionAttributeNames: { '#solved': 'solved' },
    }),
  );
  return solvedOf(out.Item);
}

/** Local and emulated stacks: count and time the records completed in the window. */
async function recentFromResults(
  documents: Pick<DynamoDBDocumentClient, 'send'>,
  table: string,
  since: number,
  overflow: boolean,
): Promise<RecentMetrics> {
  const records: TaskResult[] = [];
  try {
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await documents.send(
        new ScanCommand({
          TableName: table,
          FilterExpression: 'completedAt >= :since',
          ExpressionAttributeValues: { ':since': since },
          ProjectionExpression: '#s, solveMs, completedAt, #p',
          ExpressionAttributeNames: { '#s': 'status', '#p': 'provider' },
          ExclusiveStartKey: startKey,
        }),
      );
      records.push(...((out.Items ?? []) as TaskResult[]));
      startKey = out.LastEvaluatedKey;
    } while (startKey);
  } catch {
    return {
      solved: undefined,
      ...(overflow ? { overflowSolved: undefined } : {}),
      failed: undefined,
      rejected: undefined,
      p95SolveMs: undefined,
    };
  }
  const solveTimes = records
    .filter((r) => r.status === 'solved' && typeof r.solveMs === 'number')
    .map((r) => r.solveMs as number)
    .sort((a, b) => a - b);
  const solved = records.filter((r) => r.status === 'solved');
  return {
    solved: solved.length,
    // A record without a provider was written before providers were recorded: the plan's.
    ...(overflow ? { overflowSolved: solved.filter((r) => r.provider === 'overflow').length } : {}),
    failed: records.filter((r) => r.status === 'failed').length,
    rejected: records.filter((r) => r.status === 'rejected').length,
    p95SolveMs: percentileOfSorted(solveTimes, 0.95),
  };
}

/** Local and emulated stacks: the cost of the records solved in the window, by provider and method. */
async function spendFromResults(
  documents: Pick<DynamoDBDocumentClient, 'send'>,
  table: string,
  since: number,
): Promise<Omit<SpendStatus, 'source' | 'windowMinutes'>> {
  const byProvider: SpendStatus['byProvider'] = {};
  const byMethod: Record<string, number> = {};
  let totalUsd = 0;
  let unpriced = 0;
  const unpricedByProvider: SpendStatus['byProvider'] = {};
  try {
    let startKey: Record<string, unknown> | undefined;
    do {
      const out = await documents.send(
        new ScanCommand({
          TableName: table,
          FilterExpression: 'completedAt >= :since AND #s = :solved',
          ExpressionAttributeValues: { ':since': since, ':solved': 'solved' },
          ProjectionExpression: 'costUsd, #m, #p',
          ExpressionAttributeNames: { '#s': 'status', '#m': 'method', '#p': 'provider' },
          ExclusiveStartKey: startKey,
        }),
      );
      for (const record of (out.Items ?? []) as TaskResult[]) {
        const provider = record.provider ?? 'primary';
        if (typeof record.costUsd !== 'number') {
          unpriced += 1;
          unpricedByProvider[provider] = (unpricedByProvider[provider] ?? 0) + 1;
          continue;
        }
        totalUsd += record.costUsd;
        byProvider[provider] = (byProvider[provider] ?? 0) + record.costUsd;
        const method = String(record.method ?? 'unknown');
        byMethod[method] = (byMethod[method] ?? 0) + record.costUsd;
      }
      startKey = out.LastEvaluatedKey;
    } while (startKey);
  } catch {
    return { totalUsd: undefined, byProvider: {}, byMethod: {} };
  }
  // Solves but none with a known price: the spend is unknown, not $0.
  const priced = Object.keys(byProvider).length > 0;
  return {
    totalUsd: priced || unpriced === 0 ? totalUsd : undefined,
    byProvider,
    byMethod,
    unpriced,
    ...(unpriced > 0 ? { unpricedByProvider } : {}),
  };
}

function numberOf(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  return Number.isFinite(n) ? n : undefined;
}
