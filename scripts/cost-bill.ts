/**
 * The worked monthly bills of docs/deploy.md: a 50-thread plan at 20 %, 60 % and 100 % use, in
 * the waiting design (solveMode `wait`: each invocation waits through its solve) and in the
 * parked design as built (solveMode `park`, the default), priced by the cost model
 * (functions/core/cost/). A generated block (`<!-- generated: monthly-bill -->`, `npm run docs`): never typed.
 */
import { join } from 'node:path';
import {
  describeBill,
  type FleetUsage,
  fleetBill,
  governorShardQueries,
  shardReadsAt,
} from '../functions/core/cost/fleet-bill.js';
import { AWS_PRICES } from '../functions/core/cost/prices.js';
import { consumerSizing, FUNCTION_SIZING } from '../functions/core/function-sizing.js';
import { parkedInvocationSeconds } from '../lab/model.js';
import { shardKeys } from '../functions/core/thread-leases.js';
import { TRACES_DIR } from '../lab/bench.js';
import { textAnswerShareOf } from '../lab/cost.js';
import { loadTraceFile } from '../lab/trace.js';

const PLAN_THREADS = 50;
const USES = [0.2, 0.6, 1] as const;

/** Mean solve time of the shipped mix (lab/traces/steady.json), seconds: a busy thread solves 3600 / this an hour. */
export function meanSolveSeconds(): number {
  const trace = loadTraceFile(join(TRACES_DIR, 'steady.json'));
  return trace.methods.reduce((sum, m) => {
    if (m.distribution === 'exponential') return sum + m.share * m.meanSeconds;
    const sigma = Math.log(m.p95Seconds / m.medianSeconds) / 1.6448536269514722;
    return sum + m.share * m.medianSeconds * Math.exp((sigma * sigma) / 2);
  }, 0);
}

/** A month of the plan at `use` (share of its thread-hours busy) in the waiting design (solveMode `wait`). */
export function monthWaiting(use: number): FleetUsage {
  const hours = AWS_PRICES.hoursPerMonth;
  const solve = meanSolveSeconds();
  const solves = (PLAN_THREADS * use * hours * 3600) / solve;
  return {
    hours,
    tasks: solves,
    solved: solves,
    deliveries: solves,
    invocations: solves,
    // The invocation holds the solve, plus the time before its submission (lab/model.ts: 50 ms).
    invocationSeconds: solves * (solve + 0.05),
    acceptedSubmissions: solves,
    submissions: solves,
    overCapAnswers: 0,
    handBacks: 0,
    copiesSent: 0,
    consumerSizing: FUNCTION_SIZING.consumer,
    // The same mix's image captchas answer text: their records take one write unit, not three.
    textAnswerShare: textAnswerShareOf(loadTraceFile(join(TRACES_DIR, 'steady.json'))),
  };
}

/**
 * The same month in the parked design as built (solveMode `park`, the default): each task one
 * invocation that takes a lease, submits and parks (`parkedInvocationSeconds`), the governor's watch
 * records its answer. The leases held are the busy threads; the governor reads every shard at
 * each of its watch's reads of the leases (one a second) and its ticks (`governorShardQueries`).
 * A month without backlog: no invocation waits for a slot.
 */
const PARKED_CONSUMER = consumerSizing({ solveMode: 'park', tasksPerInvocation: 1 });

export function monthParked(use: number): FleetUsage {
  const waiting = monthWaiting(use);
  const solves = waiting.solved;
  const shards = shardKeys('primary', PLAN_THREADS).length;
  // Each Query reads one shard: its share of the live slots (the whole plan's on one shard).
  const live = Math.ceil(Math.round(PLAN_THREADS * use) / shards);
  return {
    ...waiting,
    // Each invocation's CPU at the parked consumer's memory (lab/model.ts).
    invocationSeconds: solves * parkedInvocationSeconds(PARKED_CONSUMER.memoryMb),
    consumerSizing: PARKED_CONSUMER,
    parked: {
      leaseTakes: solves,
      leaseReleases: solves,
      consumerShardReads: shardReadsAt(live, solves),
      governorShardReads: shardReadsAt(live, governorShardQueries(waiting.hours, shards)),
      recordReads: solves,
      recordedByWatch: solves,
      metaWrites: 0,
    },
  };
}

/** The generated block: one table per design, a row per use. */
export function monthlyBillMarkdown(): string {
  const head = '| use | solves / month | plan $ | AWS $ | AWS ÷ plan | by service |';
  const rule = '|---|---|---|---|---|---|';
  const out: string[] = [
    `Prices: ${AWS_PRICES.region}, read ${AWS_PRICES.asOf} (functions/core/cost/prices.ts); ${AWS_PRICES.hoursPerMonth} h a month; ${PLAN_THREADS}-thread plan at $0.0025 per thread-hour; mean solve ${meanSolveSeconds().toFixed(1)} s (the shipped mix).`,
  ];
  const table = (title: string, month: (use: number) => FleetUsage) => {
    out.push('', `**${title}**`, '', head, rule);
    for (const use of USES) {
      const usage = month(use);
      const bill = fleetBill(usage, { planThreads: PLAN_THREADS });
      out.push(
        `| ${(use * 100).toFixed(0)} % | ${Math.round(usage.solved).toLocaleString('en-US')} | ${bill.planUsd.toFixed(2)} | ${bill.usd.toFixed(2)} | × ${(bill.usd / bill.planUsd).toFixed(2)} | ${describeBill(bill, 2)} |`,
      );
    }
  };
  const sized = (usage: FleetUsage) => `${usage.consumerSizing?.memoryMb} MB ${usage.consumerSizing?.architecture}`;
  table(
    `Before — solveMode wait: each invocation waits through its solve (consumer ${sized(monthWaiting(1))})`,
    monthWaiting,
  );
  table(
    `After — solveMode park, the default: thread leases, the governor watches and records (consumer ${sized(monthParked(1))})`,
    monthParked,
  );
  return out.join('\n');
}
