/**
 * What a local run would have cost on AWS: its counted work (invocations and their seconds,
 * submissions, over-cap answers, hand-backs, the governor's minutes) priced by the fleet's cost
 * model (functions/core/cost/), beside the plan over the same time. One row of `npm start`'s summary.
 */
import { describeBill, fleetBill } from '../functions/core/cost/fleet-bill.js';
import { AWS_PRICES } from '../functions/core/cost/prices.js';
import type { DemoSummary } from './demo.js';

/** The summary's `aws cost` row: label, the bill, the plan beside it and the bill by service. */
export function awsCostRow(s: DemoSummary): [string, string, string] {
  const hours = s.durationMs / 3_600_000;
  const accepted = Math.max(0, s.solver.submissions - s.solver.overCapRejections - s.solver.transientErrors);
  const bill = fleetBill(
    {
      hours,
      tasks: s.submitted,
      solved: s.solved,
      deliveries: s.consumer.invocations,
      invocations: s.consumer.invocations,
      invocationSeconds: s.consumer.invocationSeconds,
      acceptedSubmissions: accepted,
      submissions: s.solver.submissions,
      overCapAnswers: s.solver.overCapRejections,
      handBacks: s.consumer.retriedItems,
      copiesSent: 0,
      governor: s.governor !== undefined,
    },
    { planThreads: s.solver.planThreads },
  );
  const times = bill.planUsd > 0 ? ` (× ${(bill.usd / bill.planUsd).toFixed(1)})` : '';
  return [
    'aws cost',
    `$${bill.usd.toFixed(4)}`,
    `would have cost on AWS; plan $${bill.planUsd.toFixed(4)}${times} · ${describeBill(bill)} · ${AWS_PRICES.region} prices of ${AWS_PRICES.asOf} (docs/cost.md)`,
  ];
}
