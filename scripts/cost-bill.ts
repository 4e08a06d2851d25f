/**
 * The worked monthly bills of docs/deploy.md: a 50-thread plan at 20 %, 60 % and 100 % use, the
 * consumer as shipped (each invocation waits through its solve) and as design (f) of docs/cost.md
 * would run it (park; the governor bulk-polls), priced by the cost model (functions/core/cost/).
 * A generated block (`<!-- generated: monthly-bill -->`, `npm run docs`): never typed.
 */
import { join } from 'node:path';
import { describeBill, type FleetUsage, fleetBill } from '../functions/core/cost/fleet-bill.js';
import { AWS_PRICES } from '../functions/core/cost/prices.js';
import { FUNCTION_SIZING, type FunctionSizing } from '../functions/core/function-sizing.js';
import { TRACES_DIR } from '../lab/bench.js';
import { DESIGN_TIMING } from '../lab/designs.js';
import { loadTraceFile } from '../lab/trace.js';

const PLAN_THREADS = 50;
const USES = [0.2, 0.6, 1] as const;
const SMALL: FunctionSizing = { memoryMb: 128, architecture: 'arm64' };

/** Mean solve time of the shipped mix (lab/traces/steady.json), seconds: a busy thread solves 3600 / this an hour. */
export function meanSolveSeconds(): number {
  const trace = loadTraceFile(join(TRACES_DIR, 'steady.json'));
  return trace.methods.reduce((sum, m) => {
    if (m.distribution === 'exponential') return sum + m.share * m.meanSeconds;
    const sigma = Math.log(m.p95Seconds / m.medianSeconds) / 1.6448536269514722;
    return sum + m.share * m.medianSeconds * Math.exp((sigma * sigma) / 2);
  }, 0);
}

/** A month of the plan at `use` (share of its thread-hours busy), as the fleet runs it today. */
export function monthToday(use: number): FleetUsage {
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
  };
}

/** The same month as design (f) would run it: submit and park, the governor's bulk polls, the ready task recorded by a second short invocation. */
export function monthParked(use: number): FleetUsage {
  const today = monthToday(use);
  const perSecond = today.tasks / (today.hours * 3600);
  const fill = Math.min(DESIGN_TIMING.batchSize, 1 + 2 * perSecond * DESIGN_TIMING.batchWindowSeconds);
  const invocations = (2 * today.tasks) / fill;
  return {
    ...today,
    invocations,
    invocationSeconds: today.tasks * (DESIGN_TIMING.parkSubmitSeconds + DESIGN_TIMING.parkPollSeconds),
    copiesSent: today.tasks,
    consumerSizing: SMALL,
  };
}

/** The generated block: one table per design, a row per use. */
export function monthlyBillMarkdown(): string {
  const head = '| use | solves / month | plan $ | AWS $ | AWS ÷ plan | by service |';
  const rule = '|---|---|---|---|---|---|';
  const out: string[] = [
    `Prices: ${AWS_PRICES.region}, read ${AWS_PRICES.asOf} (functions/core/cost/prices.ts); ${AWS_PRICES.hoursPerMonth} h a month; ${PLAN_THREADS}-thread plan at $0.0025 per thread-hour; mean solve ${meanSolveSeconds().toFixed(1)} s (the shipped mix).`,
  ];
  const table = (title: string, month: (use: number) => FleetUsage, governorSizing?: FunctionSizing) => {
    out.push('', `**${title}**`, '', head, rule);
    for (const use of USES) {
      const usage = month(use);
      const bill = fleetBill(usage, { planThreads: PLAN_THREADS, governorSizing });
      out.push(
        `| ${(use * 100).toFixed(0)} % | ${Math.round(usage.solved).toLocaleString('en-US')} | ${bill.planUsd.toFixed(2)} | ${bill.usd.toFixed(2)} | × ${(bill.usd / bill.planUsd).toFixed(2)} | ${describeBill(bill, 2)} |`,
      );
    }
  };
  table('Before — as shipped: each invocation waits through its solve (256 MB arm64)', monthToday);
  table(
    'After — design (f) of docs/cost.md, modelled, not built yet: park, the governor bulk-polls (128 MB)',
    monthParked,
    SMALL,
  );
  return out.join('\n');
}
