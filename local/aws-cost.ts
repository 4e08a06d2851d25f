/**
 * What a local run would have cost on AWS: its counted work (invocations and their seconds,
 * submissions, over-cap answers, hand-backs, the governor's minutes; in the parked design the
 * leases and the watch's rounds and records) priced by the fleet's cost model
 * (functions/core/cost/), beside the plan over the same time. One row of `npm start`'s summary.
 */
import {
  describeBill,
  type FleetUsage,
  fleetBill,
  governorShardQueries,
  type ParkedUsage,
  shardReadsAt,
} from '../functions/core/cost/fleet-bill.js';
import { AWS_PRICES } from '../functions/core/cost/prices.js';
import { consumerSizing } from '../functions/core/function-sizing.js';
import { shardKeys } from '../functions/core/thread-leases.js';
import type { DemoSummary } from './demo.js';
import { handedBack } from './demo/summary.js';

/** Most decimals the row prints (a millionth of a cent): a run shorter than that costs nothing to show. */
const MAX_DIGITS = 8;

/**
 * Decimals that show the smaller of the bill and the plan with two significant figures, at least
 * four (a short run's plan is a few millionths of a dollar: `$0.0000` beside a ratio said nothing).
 */
export function costDigits(...amounts: number[]): number {
  const smallest = Math.min(...amounts.filter((usd) => usd > 0));
  if (!Number.isFinite(smallest)) return 4;
  return Math.min(MAX_DIGITS, Math.max(4, 1 - Math.floor(Math.log10(smallest))));
}

/** The summary's `aws cost` row: label, the bill, the plan beside it and the bill by service. */
export function awsCostRow(s: DemoSummary): [string, string, string] {
  const bill = fleetBill(usageOfSummary(s), { planThreads: s.solver.planThreads });
  const digits = costDigits(bill.usd, bill.planUsd);
  const times = bill.planUsd > 0 ? ` (× ${(bill.usd / bill.planUsd).toFixed(1)})` : '';
  // Per task, the figure a local run can be read by: the simulator solves in a fraction of a
  // second where a real solve takes seconds, so the plan's hours (and the ratio) shrink, its tasks' calls do not.
  const perThousand = s.submitted > 0 ? ` · $${((bill.usd / s.submitted) * 1000).toFixed(4)} per 1 000 tasks` : '';
  const parts = [
    `would have cost on AWS${perThousand}; plan $${bill.planUsd.toFixed(digits)}${times} over the run's ${(s.durationMs / 1000).toFixed(1)} s`,
    describeBill(bill, digits),
    `${AWS_PRICES.region} prices of ${AWS_PRICES.asOf} (docs/cost.md)`,
  ];
  return ['aws cost', `$${bill.usd.toFixed(digits)}`, parts.filter((part) => part !== '').join(' · ')];
}

/** A local run's counted work as the cost model takes it, in the design it ran (waiting or parked). */
export function usageOfSummary(s: DemoSummary): FleetUsage {
  const hours = s.durationMs / 3_600_000;
  const parked = parkedUsage(s, hours);
  return {
    hours,
    // The run's own mix: an image's or a text captcha's record is one write unit, a token's three.
    textAnswerShare: s.solved > 0 ? s.solvedText / s.solved : 0,
    tasks: s.submitted,
    solved: s.solved,
    // Each message delivered is claimed; an invocation carries a batch of them (--batch-size).
    deliveries: s.consumer.received,
    invocations: s.consumer.invocations,
    invocationSeconds: s.consumer.invocationSeconds,
    // The consumer at the memory the stack would give this run's settings, whether or not anything parked.
    consumerSizing: consumerSizing(s.consumer),
    // The simulator's own count: submissions answered in an outage, refused for money, the key or a
    // parameter, or failed transiently, took no task and wrote no solver id.
    acceptedSubmissions: s.solver.accepted,
    submissions: s.solver.submissions,
    overCapAnswers: s.solver.overCapRejections,
    handBacks: handedBack(s.consumer),
    copiesSent: s.consumer.requeued,
    governor: s.governor !== undefined,
    overflowLane: s.overflow !== undefined,
    ...(parked !== undefined ? { parked } : {}),
  };
}

/**
 * The parked design's calls in a local run, as AWS would have made them: a lease taken and
 * freed per parked task, the watch's reads of the leases and the ticks' at AWS's pace over the run's
 * hours, every Query at one shard's share of the live slots the local watch saw on average (the parked
 * tasks it polled per round, over the lane's shards). Undefined when the run did not park.
 */
function parkedUsage(s: DemoSummary, hours: number): ParkedUsage | undefined {
  const watch = s.governor?.watch;
  if (watch === undefined || s.consumer.parked === 0) return undefined;
  const shards = shardKeys('primary', s.solver.planThreads).length;
  // The parked tasks the watch polled a round are the lane's, spread over its shards: each Query
  // reads one shard's (counted whole, the plan's 1–64 slots read as 100 a Query on 640 threads).
  const live = watch.rounds > 0 ? Math.ceil(watch.polled / watch.rounds / shards) : 0;
  return {
    leaseTakes: s.consumer.parked,
    leaseReleases: watch.released + s.solver.overCapRejections,
    consumerShardReads: shardReadsAt(live, s.consumer.parked),
    governorShardReads: shardReadsAt(live, governorShardQueries(hours, shards)),
    recordReads: s.consumer.parked,
    recordedByWatch: watch.recorded,
    metaWrites: 0,
    leaseRenewals: watch.renewed,
  };
}
