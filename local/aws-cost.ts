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
import { shardKeys } from '../functions/core/thread-leases.js';
import type { DemoSummary } from './demo.js';
import { handedBack } from './demo/summary.js';

/** The summary's `aws cost` row: label, the bill, the plan beside it and the bill by service. */
export function awsCostRow(s: DemoSummary): [string, string, string] {
  const bill = fleetBill(usageOfSummary(s), { planThreads: s.solver.planThreads });
  const times = bill.planUsd > 0 ? ` (× ${(bill.usd / bill.planUsd).toFixed(1)})` : '';
  return [
    'aws cost',
    `$${bill.usd.toFixed(4)}`,
    `would have cost on AWS; plan $${bill.planUsd.toFixed(4)}${times} · ${describeBill(bill)} · ${AWS_PRICES.region} prices of ${AWS_PRICES.asOf} (docs/cost.md)`,
  ];
}

/** A local run's counted work as the cost model takes it, in the design it ran (waiting or parked). */
export function usageOfSummary(s: DemoSummary): FleetUsage {
  const hours = s.durationMs / 3_600_000;
  const accepted = Math.max(0, s.solver.submissions - s.solver.overCapRejections - s.solver.transientErrors);
  const parked = parkedUsage(s, hours);
  return {
    hours,
    // The run's own mix: an image's or a text captcha's record is one write unit, a token's three.
    textAnswerShare: s.solved > 0 ? s.solvedText / s.solved : 0,
    tasks: s.submitted,
    solved: s.solved,
    deliveries: s.consumer.invocations,
    invocations: s.consumer.invocations,
    invocationSeconds: s.consumer.invocationSeconds,
    acceptedSubmissions: accepted,
    submissions: s.solver.submissions,
    overCapAnswers: s.solver.overCapRejections,
    handBacks: handedBack(s.consumer),
    copiesSent: 0,
    governor: s.governor !== undefined,
    overflowLane: s.overflow !== undefined,
    ...(parked !== undefined ? { parked } : {}),
  };
}

/**
 * The parked design's calls in a local run, as AWS would have made them: a lease taken and
 * freed per parked task, the watch's reads of the leases and the ticks' at AWS's pace over the run's
 * hours, every Query at the live slots the local watch saw on average (the parked tasks it polled
 * per round). Undefined when the run did not park.
 */
function parkedUsage(s: DemoSummary, hours: number): ParkedUsage | undefined {
  const watch = s.governor?.watch;
  if (watch === undefined || s.consumer.parked === 0) return undefined;
  const live = watch.rounds > 0 ? Math.round(watch.polled / watch.rounds) : 0;
  const shards = shardKeys('primary', s.solver.planThreads).length;
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
