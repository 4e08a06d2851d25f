/**
 * The cost model: every figure is the price table times a counted call, checked here against a
 * bill worked by hand; the governor's GetMetricData count is the adapters' own queries; the lab
 * bills a pool as the VMs that host it and a Lambda policy at the stack's memory.
 */
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { parkedGovernorSizing } from '../../functions/core/watch-sizing.js';
import { describe, expect, it } from 'vitest';
import { createCloudWatchSignals } from '../../functions/adapters/cloudwatch-signals.js';
import {
  consumerStoreCallQueries,
  DEFAULT_STORE_CALLS_EVERY_MS,
} from '../../functions/adapters/store-health-signals.js';
import { SERVICES } from '../../functions/core/metric-names.js';
import { pricer, sqsChunks, writeUnits } from '../../functions/core/cost/bill.js';
import {
  describeBill,
  fleetBill,
  GOVERNOR_CALLS,
  governorShardQueries,
  type ParkedUsage,
  WATCH_CALLS,
  watchDeleteRequests,
  watchSolvedWrites,
} from '../../functions/core/cost/fleet-bill.js';
import { WATCH_POLL_MS, WATCH_VIEW_MS } from '../../functions/core/thread-leases.js';
import { AWS_PRICES } from '../../functions/core/cost/prices.js';
import { consumerSizing, FUNCTION_SIZING } from '../../functions/core/function-sizing.js';
import { shippedTraces } from '../../lab/bench.js';
import { costOfRun, textAnswerShareOf } from '../../lab/cost.js';
import { createPolicy } from '../../lab/policies.js';
import { simulate } from '../../lab/sim.js';
import { type Trace, withSolveMode } from '../../lab/trace.js';
import { awsCostRow, costDigits, usageOfSummary } from '../../local/aws-cost.js';
import type { DemoSummary } from '../../local/demo.js';

// One hour, 1 000 tasks solved at 15 s each, one task per invocation, nothing handed back.
const HOUR = {
  hours: 1,
  tasks: 1000,
  solved: 1000,
  deliveries: 1000,
  invocations: 1000,
  invocationSeconds: 15_000,
  acceptedSubmissions: 1000,
  submissions: 1000,
  overCapAnswers: 0,
  handBacks: 0,
  copiesSent: 0,
  consumerSizing: { memoryMb: 256, architecture: 'arm64' as const },
};

describe('the fleet bill', () => {
  it('prices an hour of the consumer as worked by hand', () => {
    // GIVEN the hour above, no governor WHEN billed
    const bill = fleetBill({ ...HOUR, governor: false }, { planThreads: 50 });
    // THEN each service is its counted calls × the table's price:
    // Lambda 15 000 s × 0.25 GB × $0.0000133334 + 1 000 × $0.0000002
    expect(bill.byService.lambda).toBeCloseTo(0.05000025 + 0.0002, 9);
    // SQS: 1 000 sends + 2 000 receives/deletes + 2 mappings × 5 pollers × 180 idle polls, × $0.0000004
    expect(bill.byService.sqs).toBeCloseTo((1000 + 2000 + 1800) * 4e-7, 9);
    // DynamoDB: claim + solver id (1 unit each), result + note (3 units each: a 2.8 KB item),
    // ledger accepted + released (1 unit each) = 10 000 write units; 1 000 ledger reads; the
    // 1 000 answered records kept a day (2.9 MB with DynamoDB's 100 B an item: 24 h of a 730 h
    // month) at $0.25 a GB-month, and point-in-time recovery on them at $0.20
    const recordsKept = 0.0029 * (24 / 730) * (0.25 + 0.2);
    expect(bill.byService.dynamodb).toBeCloseTo(10_000 * 6.25e-7 + 1000 * 1.25e-7 + recordsKept, 9);
    expect(bill.byService.eventbridge).toBeCloseTo(0.001, 9);
    // CloudWatch: 1.987 MB of logs (1 987 B an invocation) at $0.50/GB, kept 30 days (720 h of
    // 730) at $0.03 a GB-month + 7 metrics for 1 h of a 730 h month at $0.30
    const logsKept = 0.001987 * (720 / 730) * 0.03;
    expect(bill.byService.cloudwatch).toBeCloseTo(0.0009935 + logsKept + (7 / 730) * 0.3, 9);
    // No governor: not the fleet's stack, none of its standing charges.
    expect(bill.byService.secretsmanager).toBe(0);
    expect(bill.byService.kms).toBe(0);
    // Data out to the solver: 1 000 submissions at the task's 2 048 B, 2 000 result requests of
    // one id (140 + 16 B), each request 110 B more on the wire, at $0.09 a GB
    const dataOut = (1000 * (2048 + 110) + 2000 * (140 + 16 + 110)) * 1e-9 * 0.09;
    expect(bill.byService.datatransfer).toBeCloseTo(dataOut, 12);
    expect(bill.usd).toBeCloseTo(0.06377642 - 0.3 / 730 + recordsKept + logsKept + dataOut, 7);
    expect(bill.byService.ec2).toBe(0);
    // The plan: 50 threads × 1 h × $0.0025
    expect(bill.planUsd).toBeCloseTo(0.125, 9);
  });

  it('adds the governor: an invocation a minute ticking six times', () => {
    const without = fleetBill({ ...HOUR, governor: false }, { planThreads: 50 });
    const withGovernor = fleetBill({ ...HOUR, governor: true }, { planThreads: 50 });
    const withOverflowLane = fleetBill({ ...HOUR, governor: true, overflowLane: true }, { planThreads: 50 });
    // 60 × 51 s × 0.25 GB (six ticks, the last at 50 s); 60 requests; 720 GetQueueAttributes; 1 080 reads, 360 writes;
    // 724 GetMetricData metrics (12 a minute: 10 of the consumer's window, 2 store calls' errors;
    // the queues' 4 at the hour's cold start); 360 ticks × 2 500 log bytes, kept 30 days; 7
    // metrics for an hour (a waiting fleet's: no watch).
    const byHand =
      765 * 0.0000133334 +
      60 * 2e-7 +
      720 * 4e-7 +
      1080 * 1.25e-7 +
      360 * 6.25e-7 +
      724 * 1e-5 +
      0.00045 +
      0.0009 * (720 / 730) * 0.03 +
      (7 / 730) * 0.3;
    // The governed fleet is the stack: an hour of its 19 alarm metrics ($0.10 a month each), its
    // dashboard ($3), its secret ($0.40) and its alarm topic's key ($1), and the reports queue's
    // 5 pollers' idle long polls (180 each).
    const standing = (19 * 0.1 + 3 + 0.4 + 1) / 730 + 900 * 4e-7;
    // The governor reads the balance every tick: 360 requests of 140 + 110 B out.
    const balanceReads = 360 * (140 + 110) * 1e-9 * 0.09;
    expect(withGovernor.usd - without.usd).toBeCloseTo(byHand + standing + balanceReads, 9);
    // With an overflow lane, the overflow consumer's 2 store-call metrics a minute more, its
    // 2 alarms, its solves in the stall alarm's math and its key's secret.
    expect(withOverflowLane.usd - withGovernor.usd).toBeCloseTo(120 * 1e-5 + (3 * 0.1 + 0.4) / 730, 9);
  });

  it('bills the memory and architecture it is given, per GB-second', () => {
    const small = fleetBill(
      { ...HOUR, governor: false, consumerSizing: { memoryMb: 128, architecture: 'arm64' } },
      { planThreads: 50 },
    );
    const x86 = fleetBill(
      { ...HOUR, governor: false, consumerSizing: { memoryMb: 256, architecture: 'x86_64' } },
      { planThreads: 50 },
    );
    expect(small.byService.lambda).toBeCloseTo(15_000 * 0.125 * 0.0000133334 + 0.0002, 9);
    expect(x86.byService.lambda).toBeCloseTo(15_000 * 0.25 * 0.0000166667 + 0.0002, 9);
  });

  it('bills a pool as its VMs, not as Lambda-seconds', () => {
    const pool = fleetBill({ ...HOUR, governor: false, invocationSeconds: 0, poolVmHours: 1 }, { planThreads: 50 });
    expect(pool.byService.ec2).toBeCloseTo(0.0168, 9);
    expect(pool.byService.lambda).toBe(0);
    expect(pool.lines.some((l) => l.item.startsWith('consumer logs'))).toBe(false);
  });

  it('bills the bytes sent to the solver: a bulk poll per 100 parked submissions a round, its rounds as counted', () => {
    const parked: ParkedUsage = {
      leaseTakes: 0,
      leaseReleases: 0,
      consumerShardReads: [],
      // 250 live slots in each Query of the plan's four shards: 1 000 parked submissions a round
      governorShardReads: [...new Array<number>(250).fill(0), 100],
      recordReads: 0,
      recordedByWatch: 0,
      metaWrites: 0,
      watchRounds: 1000,
    };
    const usage = { ...HOUR, submissions: 0, solved: 0, governor: false, parked };
    const bill = fleetBill(usage, { planThreads: 256 });
    // 1 000 rounds of 10 requests (140 + 110 B) and 1 000 ids (16 B)
    expect(bill.byService.datatransfer).toBeCloseTo(1000 * (10 * 250 + 1000 * 16) * 1e-9 * 0.09, 12);
    // A pool's solves are polled by their own threads, as a waiting consumer's.
    const pool = fleetBill(
      { ...HOUR, governor: false, invocationSeconds: 0, poolVmHours: 1, submissions: 10, solved: 10 },
      { planThreads: 50 },
    );
    expect(pool.byService.datatransfer).toBeCloseTo((10 * 2158 + 20 * 266) * 1e-9 * 0.09, 12);
  });

  it('prorates the standing charges by the hour, and keeps each record for the retention it is given', () => {
    const day = fleetBill({ ...HOUR, hours: 24, governor: true }, { planThreads: 50 });
    const hour = fleetBill({ ...HOUR, governor: true }, { planThreads: 50 });
    const line = (bill: typeof day, item: string) => bill.lines.find((l) => l.item === item)?.usd ?? Number.NaN;
    expect(line(day, 'dashboard')).toBeCloseTo(24 * line(hour, 'dashboard'), 12);
    expect(line(hour, 'dashboard')).toBeCloseTo(3 / 730, 12);
    expect(day.byService.kms).toBeCloseTo(24 / 730, 12);
    expect(day.byService.secretsmanager).toBeCloseTo((24 * 0.4) / 730, 12);
    // Records kept two days cost twice a day's; their count, not the hours billed, sets it.
    const twoDays = fleetBill(
      { ...HOUR, governor: true },
      { planThreads: 50, assumptions: { resultRetentionHours: 48 } },
    );
    const kept = (bill: typeof day) =>
      line(bill, 'results kept (their TTL)') + line(bill, 'results: point-in-time recovery');
    expect(kept(twoDays)).toBeCloseTo(2 * kept(hour), 12);
    expect(kept(day)).toBeCloseTo(kept(hour), 12);
    // A usage may name its stack's resources (none: a fleet without them).
    const bare = fleetBill(
      {
        ...HOUR,
        governor: true,
        stack: { alarmMetrics: 0, dashboards: 0, secrets: 0, kmsKeys: 0, alwaysPollingMappings: 0 },
      },
      { planThreads: 50 },
    );
    expect(hour.usd - bare.usd).toBeCloseTo((19 * 0.1 + 3 + 0.4 + 1) / 730 + 900 * 4e-7, 9);
  });

  it('counts hand-backs, over-cap answers and copies', () => {
    const base = fleetBill({ ...HOUR, governor: false }, { planThreads: 50 });
    const more = fleetBill(
      { ...HOUR, governor: false, handBacks: 100, overCapAnswers: 50, copiesSent: 200 },
      { planThreads: 50 },
    );
    // 100 × (1 ChangeMessageVisibility) + 200 SendMessage; 100 × 2 writes + 50 ledger refusals
    expect(more.byService.sqs - base.byService.sqs).toBeCloseTo(300 * 4e-7, 9);
    expect(more.byService.dynamodb - base.byService.dynamodb).toBeCloseTo(250 * 6.25e-7, 9);
  });
});

describe('the parked design’s bill', () => {
  it('counts the watch as the governor wires it: a bulk poll every WATCH_POLL_MS at most, the shards read every WATCH_VIEW_MS', () => {
    // The watch runs its rounds all minute but the relay's hand-over from one invocation to the next.
    const seconds = WATCH_CALLS.secondsPerMinute;
    expect(WATCH_CALLS.roundsPerMinute).toBe(Math.floor((seconds * 1000) / WATCH_POLL_MS));
    expect(WATCH_CALLS.viewsPerMinute).toBe(Math.floor((seconds * 1000) / WATCH_VIEW_MS));
    // an hour of one shard: a Query at each read of the leases (not each round) and two a tick (6 a minute)
    expect(governorShardQueries(1, 1, 6)).toBe(60 * (WATCH_CALLS.viewsPerMinute + 12));
  });

  // The same hour parked: each invocation half a second; a lease taken and freed per task, the
  // shards read at 10 live slots (150 B + 10 × 550 B: 2 read units a Query), 50 reads of the leases a
  // minute; the watch recorded every task.
  const PARKED: ParkedUsage = {
    leaseTakes: 1000,
    leaseReleases: 1000,
    consumerShardReads: [...new Array<number>(10).fill(0), 1000],
    governorShardReads: [...new Array<number>(10).fill(0), 3000],
    recordReads: 1000,
    recordedByWatch: 1000,
    metaWrites: 6,
  };

  it('prices an hour of the parked consumer and the watch as worked by hand', () => {
    const bill = fleetBill({ ...HOUR, invocationSeconds: 500, governor: false, parked: PARKED }, { planThreads: 50 });
    // Lambda: 500 s × 0.25 GB × $0.0000133334 + 1 000 requests
    expect(bill.byService.lambda).toBeCloseTo(500 * 0.25 * 0.0000133334 + 0.0002, 9);
    // SQS: 1 000 sends + 1 000 receives + 1 000 hides + 1 800 idle polls + the watch's deletes: 100
    // full batches of ten and at most 7 partial ones a minute (420), 520 DeleteMessageBatch
    expect(bill.byService.sqs).toBeCloseTo(5320 * 4e-7, 9);
    // DynamoDB writes: claim + id-and-release (1 each), ledger acceptance (1), slot taken + freed
    // (1 each), the answered record once (3: no announcement note), 6 meta writes; no ledger
    // `released`; the watch's solved count in batches: 7 a minute at most (60.3 s ÷ 10 s, and the
    // invocation's end), 420 in the hour; the relay's baton written three times a minute (the
    // ask, the hand-over, the newcomer's confirmation: 180).
    // Reads: 1 000 consumer Queries × 2 units ÷ 2 (eventual), 3 000 governor Queries × 2,
    // 1 000 record reads × 1 ÷ 2, 1 000 ledger reads (the spend grant) before a submission, the
    // relay's baton read 25 times a minute (1 500).
    // Kept: the 1 000 answered records a day (2.9 KB each with DynamoDB's overhead), with
    // point-in-time recovery, as in the waiting bill.
    const recordsKept = 0.0029 * (24 / 730) * (0.25 + 0.2);
    expect(bill.byService.dynamodb).toBeCloseTo(
      (1000 * 8 + 6 + 420 + 180) * 6.25e-7 + (1000 + 6000 + 500 + 1000 + 1500) * 1.25e-7 + recordsKept,
      9,
    );
    // CloudWatch: 1.756 MB consumer logs (a parked invocation's 1 756 B) + the watch's: 346 B a record (its line, its values in
    // the batch's EMF document, the line's event) and 426 B a document (frame and event), one per
    // solved batch (420) and one per 100 values (10): 529 180 B, all kept 30 days at $0.03 a
    // GB-month; 8 consumer metrics in an hour of no failed call (Parked and SqsRequests more,
    // ResultRequests fewer)
    const logsKept = (0.001756 + 0.00052918) * (720 / 730) * 0.03;
    expect(bill.byService.cloudwatch).toBeCloseTo(0.000878 + 0.00026459 + logsKept + (8 / 730) * 0.3, 9);
    expect(bill.usd).toBeCloseTo(
      500 * 0.25 * 0.0000133334 +
        0.0002 +
        5320 * 4e-7 +
        (1000 * 8 + 6 + 420 + 180) * 6.25e-7 +
        (1000 + 6000 + 500 + 1000 + 1500) * 1.25e-7 +
        0.000878 +
        0.00026459 +
        (8 / 730) * 0.3 +
        // the completion events: 1 000 × $1 per million
        0.001 +
        recordsKept +
        logsKept +
        // Data out: 1 000 submissions (2 048 + 110 B), 1 000 fetches of a ready answer (140 + 16 +
        // 110 B), and the watch's rounds at AWS pace (597 a minute, 35 820 in the hour), each one
        // bulk request (140 + 110 B) asking about the 10 parked submissions its reads saw (16 B each)
        (1000 * 2158 + 1000 * 266 + 35_820 * (250 + 10 * 16)) * 1e-9 * 0.09,
      7,
    );
  });

  it('bills the parked governor’s metric window instead of the consumer’s GetMetricData: 2 metrics a minute, not 12', () => {
    // An hour governed, parked: 990 accepted, 6 refused, 4 answered with an error; the watch
    // recorded 980 of the 1 000 solves (20 read by resuming deliveries).
    const usage = {
      ...HOUR,
      governor: true,
      submissions: 1000,
      acceptedSubmissions: 990,
      overCapAnswers: 6,
      parked: { ...PARKED, recordedByWatch: 980 },
    };
    const bill = fleetBill(usage, { planThreads: 50 });
    const line = (item: string) => bill.lines.find((l) => l.item === item);
    // The store calls' errors, 2 a minute (no call failed), and the queues' 4 at the hour's cold start.
    expect(line('governor GetMetricData')?.quantity).toBe(60 * 2 + 4);
    // The watch: its batches as its solved count (420 in the hour) and each minute's slot started afresh (60).
    expect(line('metric window: watch batches')?.quantity).toBe(watchSolvedWrites(980, 1) + 60);
    // The consumers: the 4 error answers and the 20 solves they read themselves; no write for the rest.
    expect(line('metric window: consumers')?.quantity).toBe(24);
    // The governor: the window's two slots and the ledger, once a minute.
    expect(line('metric window: governor reads')?.quantity).toBe(60 * 3);
    // A waiting fleet reads the consumer's metrics from CloudWatch, and has no window.
    const waiting = fleetBill({ ...HOUR, governor: true }, { planThreads: 50 });
    expect(waiting.lines.find((l) => l.item === 'governor GetMetricData')?.quantity).toBe(60 * 12 + 4);
    expect(waiting.lines.some((l) => l.item.startsWith('metric window'))).toBe(false);
  });

  it('writes a text answer’s record in one unit and a token’s in three, by the mix’s share of image and text captchas', () => {
    const results = (textAnswerShare: number | undefined) =>
      fleetBill(
        { ...HOUR, governor: false, parked: PARKED, ...(textAnswerShare !== undefined ? { textAnswerShare } : {}) },
        { planThreads: 50 },
      ).lines.find((l) => l.item === 'watch: results')?.quantity;
    // Every answer a token unless told: 1 000 records × 3 units (a 2.8 KB item)
    expect(results(undefined)).toBe(3000);
    // The shipped mix: 15 % base64 images, their records under 1 KB
    expect(textAnswerShareOf(shippedTraces().find((t) => t.name === 'steady') as Trace)).toBeCloseTo(0.15, 9);
    expect(results(0.15)).toBeCloseTo(1000 * (0.85 * 3 + 0.15 * 1), 9);
    expect(results(1)).toBe(1000);
  });

  it('bills a parked governor at the memory the stack gives it for the plan (its watch’s CPU), a waiting one at 256 MB', () => {
    const parked = (planThreads: number, governorSizing?: { memoryMb: number; architecture: 'arm64' }) =>
      fleetBill(
        { ...HOUR, governor: true, parked: PARKED },
        { planThreads, ...(governorSizing ? { governorSizing } : {}) },
      );
    const duration = (bill: ReturnType<typeof parked>) =>
      bill.lines.find((l) => l.item.startsWith('governor duration'));
    const sized = parkedGovernorSizing({ planThreads: 600, solverProtocol: 'res-php', dialect: 'captchaai' });
    // 60 invocations × 60.3 s at the sized memory
    expect(duration(parked(600))?.quantity).toBeCloseTo((60 * 60.3 * sized.memoryMb) / 1024, 6);
    expect(duration(parked(600))?.item).toBe(`governor duration (${sized.memoryMb} MB arm64)`);
    expect(duration(parked(50))?.item).toBe('governor duration (256 MB arm64)');
    expect(duration(parked(600, { memoryMb: 512, architecture: 'arm64' }))?.item).toBe(
      'governor duration (512 MB arm64)',
    );
    const waiting = fleetBill({ ...HOUR, governor: true }, { planThreads: 600 });
    expect(duration(waiting)?.item).toBe('governor duration (256 MB arm64)');
  });

  it('bills the watch’s deletes ten to a request, plus its partial batches, never more than one a task', () => {
    for (const [recorded, hours] of [
      [0, 1],
      [5, 1],
      [1_000, 1],
      [7_221, 2],
      [100_000, 1],
    ] as const) {
      const requests = watchDeleteRequests(recorded, hours);
      expect(requests).toBeLessThanOrEqual(recorded);
      expect(requests).toBeGreaterThanOrEqual(Math.ceil(recorded / 10));
      // the partial batches: at most 7 a minute (one every 10 s of a 60.3 s invocation, and its end)
      expect(requests).toBeLessThanOrEqual(Math.ceil(recorded / 10) + hours * 60 * 7);
    }
    expect(watchDeleteRequests(100_000, 1)).toBe(10_000 + 420);
  });

  it('bills a parked task fewer answered-record writes than a waiting one, and the same ledger read (the grant)', () => {
    const waiting = fleetBill({ ...HOUR, governor: false }, { planThreads: 50 });
    const parked = fleetBill({ ...HOUR, governor: false, parked: PARKED }, { planThreads: 50 });
    const line = (bill: typeof parked, item: string) => bill.lines.find((l) => l.item.startsWith(item))?.quantity;
    expect(line(waiting, 'results, announcement notes')).toBe(6000);
    expect(line(parked, 'results, announcement notes')).toBe(0);
    expect(line(parked, 'watch: results')).toBe(3000);
    expect(line(waiting, 'thread ledger reads')).toBe(1000);
    expect(line(parked, 'thread ledger reads')).toBe(1000);
    // The watch's solved count: one write per batch, never more than the answers it recorded.
    expect(line(parked, 'watch: solved count')).toBe(420);
    const few = fleetBill(
      { ...HOUR, governor: false, parked: { ...PARKED, recordedByWatch: 40 } },
      { planThreads: 50 },
    );
    expect(line(few, 'watch: solved count')).toBe(40);
  });

  it('bills each lease the watch renewed a slot write and a ChangeMessageVisibility', () => {
    const plain = fleetBill({ ...HOUR, governor: false, parked: PARKED }, { planThreads: 50 });
    const renewing = fleetBill(
      { ...HOUR, governor: false, parked: { ...PARKED, leaseRenewals: 200 } },
      { planThreads: 50 },
    );
    // a ~0.55 KB slot item: one write unit; one SQS request each
    expect(renewing.usd - plain.usd).toBeCloseTo(200 * 6.25e-7 + 200 * 4e-7, 12);
  });
});

describe('units', () => {
  it('splits SQS payloads into 64 KiB chunks and DynamoDB writes into 1 KB units', () => {
    expect(sqsChunks(AWS_PRICES, 10)).toBe(1);
    expect(sqsChunks(AWS_PRICES, 64 * 1024)).toBe(1);
    expect(sqsChunks(AWS_PRICES, 64 * 1024 + 1)).toBe(2);
    expect(sqsChunks(AWS_PRICES, 1024 * 1024)).toBe(16);
    expect(writeUnits(900)).toBe(1);
    expect(writeUnits(2800)).toBe(3);
  });

  it('counts the GetMetricData metrics the governor sends each minute from the adapters themselves', () => {
    const signals = createCloudWatchSignals({
      cloudwatch: new CloudWatchClient({ region: 'us-east-1' }),
      namespace: 'CaptchaFleet',
      queueNames: { normal: 'tasks', high: 'tasks-high' },
    });
    // The consumer's window, the percentile apart, and age + sent per lane (two lanes); the
    // consumers' store calls, read once a minute (DEFAULT_STORE_CALLS_EVERY_MS).
    const queueMetrics = 2 * 2;
    // (the overflow consumer's only with an overflow lane).
    // In an ordinary minute (no call failed, no store trial) the errors alone.
    const storeCalls = consumerStoreCallQueries('CaptchaFleet', [SERVICES.consumer], ['errors']);
    const overflowStoreCalls = consumerStoreCallQueries(
      'CaptchaFleet',
      [SERVICES.consumer, SERVICES.overflowConsumer],
      ['errors'],
    );
    expect(DEFAULT_STORE_CALLS_EVERY_MS).toBe(60_000);
    expect(GOVERNOR_CALLS.metricsPerMinute).toBe(
      signals.consumerQueries().length + signals.percentileQueries().length + storeCalls.length,
    );
    expect(GOVERNOR_CALLS.overflowMetricsPerMinute).toBe(overflowStoreCalls.length - storeCalls.length);
    // Parked, the consumer's window comes from the governor table (solve-window.ts): none of its queries.
    expect(GOVERNOR_CALLS.parkedMetricsPerMinute).toBe(storeCalls.length);
    // The queues' metrics only at a cold start (test/integration/solve-window.test.ts asks the wiring).
    expect(GOVERNOR_CALLS.queueMetricsPerColdStart).toBe(queueMetrics);
  });
});

describe('the lab bill (lab/cost.ts)', () => {
  const trace = { ...shippedTraces().find((t) => t.name === 'steady'), durationSeconds: 900 } as Trace;
  const run = (name: 'governor' | 'thread-pool-plan' | 'lambda-fixed') =>
    simulate(trace, createPolicy(name, trace.settings), { seed: 3 });

  it('bills the idle long polls of the mappings that poll: one governed (no high-priority work), both at a fixed maximum', () => {
    // 900 s of 20 s long polls by 5 pollers a mapping: 225 a mapping.
    const idle = (name: 'governor' | 'lambda-fixed') =>
      costOfRun(trace, run(name)).bill.lines.find((l) => l.item === 'idle long polls (ReceiveMessage)')?.quantity;
    expect(idle('governor')).toBe(225);
    expect(idle('lambda-fixed')).toBe(450);
  });

  it('bills a Lambda policy at the stack consumer’s memory and architecture, per second it held a task', () => {
    // (the trace parks its tasks: the stack deploys that consumer at 192 MB, and the run timed its CPU there)
    const governor = run('governor');
    const cost = costOfRun(trace, governor);
    const duration = cost.bill.lines.find((l) => l.item.startsWith('consumer duration'));
    const memoryMb = consumerSizing(trace.settings).memoryMb;
    expect(memoryMb).toBe(FUNCTION_SIZING.parkedConsumer.memoryMb);
    expect(governor.consumerMemoryMb).toBe(memoryMb);
    expect(duration?.item).toBe('consumer duration (192 MB arm64)');
    expect(duration?.quantity).toBeCloseTo((governor.computeSeconds * memoryMb) / 1024, 6);
    expect(duration?.usd).toBeCloseTo(((governor.computeSeconds * 192) / 1024) * 0.0000133334, 9);
    expect(cost.planUsd).toBeCloseTo(50 * 0.25 * 0.0025, 9);
    expect(cost.bill.lines.some((l) => l.item.startsWith('governor duration'))).toBe(true);
  });

  it("times and bills a trace's own consumerMemoryMb, as the stack would deploy it", () => {
    // A review: the lab took the stack's default memory whatever the trace's fleet set.
    const big = { ...trace, settings: { ...trace.settings, consumerMemoryMb: 512 } } as Trace;
    const result = simulate(big, createPolicy('governor', big.settings), { seed: 3 });
    expect(result.consumerMemoryMb).toBe(512);
    const duration = costOfRun(big, result).bill.lines.find((l) => l.item.startsWith('consumer duration'));
    expect(duration?.item).toBe('consumer duration (512 MB arm64)');
    // More CPU: the invocations before a submission are shorter than at 192 MB.
    expect(result.latency.p95 ?? 0).toBeLessThanOrEqual(run('governor').latency.p95 ?? 0);
  });

  it('bills the parked design from its own counts: its short invocations, its leases and its watch', () => {
    const parked = run('governor');
    const waiting = simulate(
      withSolveMode(trace, 'wait'),
      createPolicy('governor', withSolveMode(trace, 'wait').settings),
      {
        seed: 3,
      },
    );
    const leases = costOfRun(trace, parked).bill.lines.find((l) => l.item.startsWith('leases: slots'));
    expect(leases?.quantity).toBe((parked.parked?.leaseTakes ?? 0) + (parked.parked?.leaseReleases ?? 0));
    expect(costOfRun(trace, waiting).bill.lines.some((l) => l.item.startsWith('leases'))).toBe(false);
    expect(costOfRun(trace, parked).byService.lambda).toBeLessThan(costOfRun(trace, waiting).byService.lambda / 3);
  });

  it('bills a plan-sized thread pool as one t4g.small over the trace, and no Lambda', () => {
    const cost = costOfRun(trace, run('thread-pool-plan'));
    expect(cost.byService.ec2).toBeCloseTo(0.25 * 0.0168, 9);
    expect(cost.byService.lambda).toBe(0);
    expect(cost.bill.lines.some((l) => l.item.startsWith('governor'))).toBe(false);
  });
});

describe("the local run's bill (local/aws-cost.ts)", () => {
  const summary = (parked: number, watch?: NonNullable<DemoSummary['governor']>['watch']) =>
    ({
      durationMs: 60_000,
      submitted: 100,
      solved: 100,
      solvedText: 25,
      solver: { submissions: 100, accepted: 98, overCapRejections: 2, transientErrors: 0, planThreads: 10 },
      consumer: {
        invocations: 100,
        received: 100,
        requeued: 0,
        tasksPerInvocation: 1,
        parked,
        invocationSeconds: 50,
        retriedItems: parked + 3,
      },
      governor: { watch },
    }) as unknown as DemoSummary;

  it('bills a parked run its leases and the watch at AWS pace, at the live slots the watch saw', () => {
    // GIVEN a one-minute local run that parked 100 tasks; the watch polled 300 over 60 rounds (5 live on average)
    const usage = usageOfSummary(summary(100, { rounds: 60, polled: 300, released: 100, recorded: 98, renewed: 7 }));
    // THEN a slot taken per parked task, freed by the watch or a refusal, and the governor's Queries
    // a minute at AWS's pace: 59 reads of the leases by the watch (one a second, all minute but the
    // relay's hand-over; its bulk polls between cost nothing at AWS) and 6 ticks reading the one shard twice
    expect(usage.parked?.leaseTakes).toBe(100);
    expect(usage.parked?.leaseReleases).toBe(102);
    expect(usage.parked?.recordedByWatch).toBe(98);
    // leases the watch renewed while the solver had not answered for them
    expect(usage.parked?.leaseRenewals).toBe(7);
    expect(usage.parked?.governorShardReads[5]).toBeCloseTo(59 + 6 * 2, 9);
    // the pollers count a parked message as a batch item failure: only the 3 others are hand-backs
    expect(usage.handBacks).toBe(3);
  });

  it("reads each shard's share of the live slots on a plan of several shards, not all of them a Query", () => {
    // GIVEN a 640-thread plan (10 shards) whose watch polled 100 parked tasks a round
    const wide = summary(100, { rounds: 60, polled: 6000, released: 100, recorded: 98, renewed: 0 });
    const usage = usageOfSummary({ ...wide, solver: { ...wide.solver, planThreads: 640 } } as DemoSummary);
    // THEN each Query reads 10 slots: before, 100 a Query (and the data sent to the solver ten times over)
    expect(usage.parked?.governorShardReads).toHaveLength(11);
    expect(usage.parked?.consumerShardReads[10]).toBe(100);
  });

  it('prints a short run’s bill and plan with two significant figures, and no empty part', () => {
    // GIVEN a run of under two seconds: its plan a few millionths of a dollar
    const short = { ...summary(0), durationMs: 1_900, submitted: 10, solved: 10, solvedText: 0 } as DemoSummary;
    const [, usd, detail] = awsCostRow(short);
    // THEN enough decimals that neither shows as $0.0000, and no " ·  · " where no service reaches them
    expect(usd).not.toMatch(/^\$0\.0+$/);
    expect(detail).toMatch(/plan \$0\.0000\d+ \(× [\d.]+\)/);
    expect(detail).not.toContain(' ·  · ');
    // and the figure a local run compares by: its bill per 1 000 tasks
    const perThousand = Number(/\$(\d+\.\d{4}) per 1 000 tasks;/.exec(detail)?.[1]);
    expect(perThousand).toBeCloseTo((Number(usd.slice(1)) / 10) * 1000, 2);
    // a minute's run keeps four decimals
    expect(costDigits(0.25, 0.0123)).toBe(4);
    expect(costDigits(0.000_27, 0.000_062)).toBe(6);
    expect(costDigits(0, 0)).toBe(4);
    expect(costDigits(1e-12)).toBe(8);
  });

  it('bills the solver ids and ledger acceptances of the submissions the solver took on, not of those an outage answered', () => {
    // GIVEN a run whose solver was down a while: 357 submissions, 267 of them answered 503 by the
    // outage, 11 refused over the cap, 2 failed transiently, 77 taken on as tasks
    const run = {
      ...summary(0),
      solver: { submissions: 357, accepted: 77, overCapRejections: 11, transientErrors: 2, planThreads: 10 },
    } as DemoSummary;
    const usage = usageOfSummary(run);
    // THEN the bill writes a solver id and a ledger acceptance for the 77 (not 357 − 11 − 2 = 344)
    expect(usage.acceptedSubmissions).toBe(77);
    // and every submission still reads the ledger before it and sends its bytes
    expect(usage.submissions).toBe(357);
    // the same run with the 267 counted as accepted bills 267 solver ids and ledger writes more
    const billed = fleetBill(usage, { planThreads: 10 });
    const overcounted = fleetBill({ ...usage, acceptedSubmissions: 344 }, { planThreads: 10 });
    const line = (bill: typeof billed, item: string) => bill.lines.find((l) => l.item === item)?.usd ?? 0;
    expect(line(overcounted, 'claims, solver ids') - line(billed, 'claims, solver ids')).toBeCloseTo(
      267 * 1 * 6.25e-7,
      12,
    );
  });

  it('bills a claim per message delivered, a batch of them in one invocation', () => {
    // GIVEN a run of batches of 5: 20 invocations carried the 100 messages
    const batched = {
      ...summary(0),
      consumer: { ...summary(0).consumer, invocations: 20, received: 100 },
    } as DemoSummary;
    const usage = usageOfSummary(batched);
    // THEN 100 deliveries are claimed, in 20 invocations (their requests, receives and deletes)
    expect(usage.deliveries).toBe(100);
    expect(usage.invocations).toBe(20);
    const bill = fleetBill(usage, { planThreads: 10 });
    const claims = bill.lines.find((l) => l.item === 'claims, solver ids');
    // a claim (a record's write unit) per delivery and a solver id per accepted submission
    expect(claims?.quantity).toBe(100 + 98);
  });

  it('bills the fresh copies the consumer sent, one SendMessage each', () => {
    // GIVEN a run whose consumer put 6 messages back as fresh copies (near their DLQ, or carrying a submission)
    const run = { ...summary(0), consumer: { ...summary(0).consumer, requeued: 6 } } as DemoSummary;
    const usage = usageOfSummary(run);
    expect(usage.copiesSent).toBe(6);
    // THEN the bill has their SendMessage requests (one 64 KiB chunk each at the task's size)
    const copies = fleetBill(usage, { planThreads: 10 }).lines.find((l) => l.item === 'fresh copies (SendMessage)');
    expect(copies?.quantity).toBe(6);
  });

  it('bills a waiting run without leases', () => {
    expect(usageOfSummary(summary(0)).parked).toBeUndefined();
    // The consumer at the memory the stack gives the run's design, whether or not anything parked
    // (a review: a parked run that parked nothing was billed at the waiting consumer's 256 MB)
    const inDesign = (solveMode: 'park' | 'wait') =>
      usageOfSummary({ ...summary(0), consumer: { ...summary(0).consumer, solveMode } } as DemoSummary).consumerSizing
        ?.memoryMb;
    expect(inDesign('park')).toBe(FUNCTION_SIZING.parkedConsumer.memoryMb);
    expect(inDesign('wait')).toBe(FUNCTION_SIZING.consumer.memoryMb);
    expect(usageOfSummary(summary(0)).handBacks).toBe(3);
  });

  it('bills the run’s own mix: its text answers’ records at one write unit', () => {
    // GIVEN 25 of the 100 solved answered in text (image or text captchas)
    const usage = usageOfSummary(summary(0));
    expect(usage.textAnswerShare).toBe(0.25);
    // THEN the answered records cost 25 × 1 + 75 × 3 write units, not 100 × 3, and the table
    // keeps 25 × 1.8 KB less for a day (storage and point-in-time recovery)
    const tokens = fleetBill({ ...usage, textAnswerShare: 0 }, { planThreads: 10 });
    const mixed = fleetBill(usage, { planThreads: 10 });
    const keptLess = ((25 * 1800) / 1e9) * (24 / 730) * (0.25 + 0.2);
    expect(tokens.byService.dynamodb - mixed.byService.dynamodb).toBeCloseTo(25 * 2 * 2 * 6.25e-7 + keptLess, 12);
  });
});

describe('describeBill', () => {
  it('lists the services that show at its precision, the largest first, and leaves out those that would print as zero', () => {
    const bill = fleetBill({ ...HOUR, governor: true }, { planThreads: 50 });
    const line = describeBill(bill, 4);
    expect(line.startsWith('lambda $')).toBe(true);
    expect(line).toContain('kms $0.0014');
    expect(describeBill(bill, 2)).not.toContain('kms');
    expect(describeBill(bill, 2)).not.toContain('$0.00');
  });
});

describe('custom metrics and the month’s resources', () => {
  it('bill the share of the month for the hours given: a stretch of a fleet that publishes every hour', () => {
    const p = pricer(AWS_PRICES);
    const line = (hours: number) => p.customMetrics('streams', 16, hours).usd;
    expect(line(1)).toBeCloseTo((16 * AWS_PRICES.cloudwatch.usdPerMetricMonth) / 730, 10);
    expect(line(0.5)).toBeCloseTo(line(1) / 2, 12);
    expect(p.monthly('cloudwatch', 'dashboard', 'dashboard-months', 1, 0.5, 3).usd).toBeCloseTo(1.5 / 730, 10);
  });
});

describe('a bill of no quantities', () => {
  it('refuses a line whose quantity is NaN or negative, and a Lambda memory Lambda has not, naming the line', () => {
    // Before: a negative `hours` billed $-0.03, a NaN plan NaN, 64 MB was priced.
    const p = pricer(AWS_PRICES);
    expect(() => p.customMetrics('streams', 16, -1)).toThrow(/bill line "streams": .* is not a quantity/);
    expect(() => p.dynamoWrites('claims', Number.NaN)).toThrow(/bill line "claims": NaN write units/);
    const sizing = { ...FUNCTION_SIZING.consumer, memoryMb: 64 };
    expect(() => p.lambdaDuration('consumer duration', sizing, 10)).toThrow(/64 MB is no Lambda memory/);
    expect(p.dynamoWrites('claims', 0).usd).toBe(0);
  });
});
