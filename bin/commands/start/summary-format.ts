/**
 * The summary table `start` prints after a run: one row a line, `label  value   note`, values
 * right-aligned to the widest. Other tests parse these lines: a row's label and value format
 * are its contract.
 *
 * Rows come from sections (`SUMMARY_SECTIONS`), in print order. A new line is a row in the
 * section it belongs to, or a new section in that list: money lines (what the run cost) go in
 * `costRows`, after the solver's balance.
 */
import { awsCostRow } from '../../../local/aws-cost.js';
import type { DemoSummary } from '../../../local/demo.js';
import { handedBack } from '../../../local/demo/summary.js';
import { faultRows } from '../start-faults.js';
import { rowsOf } from './verdict.js';

/** One line of the summary: its label, its value (right-aligned) and a note after it. */
export type SummaryRow = [label: string, value: string | number, note?: string];

/** How sections write durations and counts by code, so every row reads alike. */
export interface SummaryFormat {
  /** `412 ms`, `12.3 s`, or `–` when there is none. */
  ms(value: number | null): string;
  /** `CODE n, CODE n` in the record's order. */
  codes(record: Record<string, number>): string;
}

/** A section of the summary: its rows for this run (none when it has nothing to say). */
export type SummarySection = (s: DemoSummary, format: SummaryFormat) => SummaryRow[];

const FORMAT: SummaryFormat = {
  ms: (value) =>
    value === null ? '–' : value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${Math.round(value)} ms`,
  codes: (record) =>
    Object.entries(record)
      .map(([code, n]) => `${code} ${n}`)
      .join(', '),
};

/** Where the tasks ended: the rows from `solved` to `lost` partition the tasks sent, each task in exactly one. */
const partitionRows: SummarySection = (s, { codes }) => [
  ['submitted', s.submitted, `= the ${rowsOf(s)} below, each task in one row`],
  ['solved', s.solved],
  ['failed', s.failed, codes(s.failuresByCode)],
  ['rejected', s.rejected, s.rejected ? 'a `rejected` record, the message not (yet) in the DLQ' : ''],
  [
    'in DLQ',
    s.inDlq,
    `${s.dlqWithRejectedRecord} of them with a rejected record${s.inDlq ? `; ${codes(s.dlqByReason)}` : ''}` +
      (s.foreignDlqMessages ? `; ${s.foreignDlqMessages} more from earlier runs, not counted` : ''),
  ],
  ...(s.unknown ? [['unknown', s.unknown, 'a record without a known status: not finished'] as SummaryRow] : []),
  ['still queued', s.stillQueued],
  ['lost', s.lost],
];

/** End to end, overall and per lane. */
const latencyRows: SummarySection = (s, { ms }) => [
  ['latency', `p50 ${ms(s.p50Ms)} · p95 ${ms(s.p95Ms)}`, `submit → result; solver time p95 ${ms(s.solveP95Ms)}`],
  ...(['high', 'normal'] as const).map((name): SummaryRow => {
    const l = s.lanes[name];
    const ceiling = l.ceiling.start === null ? '–' : `${l.ceiling.start} → max ${l.ceiling.max}`;
    return [
      `${name} lane`,
      `${l.submitted} sent · ${l.solved} solved · p50 ${ms(l.p50Ms)} · p95 ${ms(l.p95Ms)}`,
      `start wait p50 ${ms(l.startWaitP50Ms)} · p95 ${ms(l.startWaitP95Ms)}; ceiling ${ceiling}; ${counted(l.invocations, 'invocation')}, peak ${l.peakInFlight} at once`,
    ];
  }),
];

/** What the solver saw. */
const solverRows: SummarySection = (s) => [
  [
    'solver',
    `${s.solver.submissions} submissions · ${s.solver.accepted} accepted · ${s.solver.solved} solved`,
    `peak ${s.solver.peakThreads}/${s.solver.planThreads} threads · over-cap ${s.solver.overCapRejections} · transient ${s.solver.transientErrors}`,
  ],
];

/** What the run cost: the solver account's balance. Further money lines (AWS cost, spend) join here. */
const costRows: SummarySection = (s) => [
  [
    'balance',
    `$${s.solver.balanceStart.toFixed(3)} → $${s.solver.balanceEnd.toFixed(3)}`,
    `duplicate solves ${s.duplicateSolves}`,
  ],
  awsCostRow(s),
];

/** What the consumer's invocations did. */
const consumerRows: SummarySection = (s) => [
  [
    'consumer',
    `${counted(s.consumer.invocations, 'invocation')} · peak ${s.consumer.peakConcurrency} at once`,
    `ceiling now ${s.consumer.ceiling} · ${parkedOf(s)}retried ${handedBack(s.consumer)} · timeouts ${s.consumer.timeouts} · crashes ${s.consumer.crashes} · errors ${s.consumer.errors}`,
  ],
];

/**
 * The parked design: tasks parked, and how the governor's watch finished them. A parked message
 * is a batch item failure to the poller (its visibility set by the parking), not a retry.
 */
function parkedOf(s: DemoSummary): string {
  const watch = s.governor?.watch;
  if (s.consumer.parked === 0 && watch === undefined) return '';
  return `parked ${s.consumer.parked}${watch ? ` (recorded by the watch ${watch.recorded})` : ''} · `;
}

/** Decisions by reason, most first: `OVERFLOW_CLOSED 5, OVERFLOW_OPEN 3`. */
function reasonsOf(reasons: Record<string, number>): string {
  return Object.entries(reasons)
    .sort((a, b) => b[1] - a[1])
    .map(([code, n]) => `${code} ${n}`)
    .join(', ');
}

/** The split between the plan and the overflow provider, and what overflow cost against its caps. */
const overflowRows: SummarySection = (s, { ms }) => {
  const o = s.overflow;
  if (o === undefined) return [];
  return [
    [
      'by provider',
      `plan ${o.solved.primary} · overflow ${o.solved.overflow} solved`,
      `p95 plan ${ms(o.p95Ms.primary)} · overflow ${ms(o.p95Ms.overflow)} (target: drain within ${ms(o.latencyTargetMs)}); solver time p95 plan ${ms(o.solveP95Ms.primary)} · overflow ${ms(o.solveP95Ms.overflow)}`,
    ],
    [
      'overflow',
      `$${o.provider.spentUsd.toFixed(3)} spent`,
      `${o.provider.solved} solves at $${o.provider.pricePerSolve}; caps $${o.capUsdPerHour}/hour, $${o.capUsdPerDay}/day; balance $${o.provider.balanceStart.toFixed(3)} → $${o.provider.balanceEnd.toFixed(3)}; lane ${counted(o.lane.invocations, 'invocation')}, ceiling max ${o.lane.maxCeiling}, peak ${o.lane.peakConcurrency} at once; ${reasonsOf(o.lane.reasons)}`,
    ],
  ];
};

/** When the governor paused, and what it decided over the run; nothing with a fixed ceiling. */
const governorRows: SummarySection = (s) => {
  const rows: SummaryRow[] = [];
  if (s.governor?.pause) {
    const { pausedMs, reason, probes, threadProbes } = s.governor.pause;
    const submitted =
      threadProbes.made > 0
        ? ` · ${threadProbes.made} probe submission(s), ${threadProbes.accepted} accepted, ${threadProbes.refused} refused`
        : '';
    rows.push([
      'paused',
      `${(pausedMs / 1000).toFixed(1)} s`,
      `${reason ? `${reason.code}: ${reason.message.replace(/\.$/, '')}` : 'reason not seen'} · ${probes} resume probe(s)${submitted}`,
    ]);
  }
  if (s.governor)
    rows.push([
      'governor',
      `${counted(s.governor.decisions, 'decision')} · ceiling ${s.governor.startCeiling ?? '–'} → max ${s.governor.maxCeiling ?? '–'}`,
      `${reasonsOf(s.governor.reasons)}${s.governor.pausedMs > 0 ? ` · paused ${(s.governor.pausedMs / 1000).toFixed(1)} s` : ''}${s.governor.failedTicks ? ` · failed ticks ${s.governor.failedTicks}` : ''}`,
    ]);
  return rows;
};

/** The summary's sections, in print order. */
export const SUMMARY_SECTIONS: readonly SummarySection[] = [
  partitionRows,
  latencyRows,
  solverRows,
  costRows,
  consumerRows,
  overflowRows,
  faultRows,
  governorRows,
];

/** The summary of a run as printed: a title with its duration, then every section's rows. */
export function formatSummary(s: DemoSummary, sections: readonly SummarySection[] = SUMMARY_SECTIONS): string {
  const rows = sections.flatMap((section) => section(s, FORMAT));
  const width = Math.max(...rows.map(([, value]) => String(value).length));
  return (
    `\nSummary (${(s.durationMs / 1000).toFixed(1)} s)\n` +
    rows
      .map(
        ([label, value, note]) => `  ${label.padEnd(13)} ${String(value).padStart(width)}${note ? `   ${note}` : ''}`,
      )
      .join('\n') +
    '\n'
  );
}

/** `n` and the word, singular for one (`1 invocation`, `3 invocations`). */
export function counted(n: number, word: string): string {
  return `${n} ${n === 1 ? word : `${word}s`}`;
}
