/**
 * The fault flag of `start` (`--faults`): the fault proxy between the fleet and SQS / DynamoDB
 * (local/faults/proxy.ts), following a written plan or one drawn from the run's seed, and the
 * summary's rows for what it did. The rows join `START_OPTIONS`.
 */
import { InvalidArgumentError, Option } from '@commander-js/extra-typings';
import type { DemoSummary } from '../../local/demo.js';
import { drawFaultMix, type FaultPlan, FaultSpecError, parseFaultSpec } from '../../local/faults/plan.js';

/** What `--faults` holds until the seed is known: a plan, or a mix to draw. */
export type FaultsFlag = { plan: FaultPlan } | { random: { seed?: number; horizonMs: number } };

/** Span a drawn mix's windows fall in when the flag does not say, ms. */
const DEFAULT_HORIZON_MS = 90_000;

const faultsFlag = (value: string): FaultsFlag => {
  const random = /^random(?::(\d+))?(?:@(\d+))?$/.exec(value.trim());
  if (random)
    return {
      random: {
        ...(random[1] !== undefined ? { seed: Number(random[1]) } : {}),
        horizonMs: random[2] !== undefined ? Number(random[2]) * 1000 : DEFAULT_HORIZON_MS,
      },
    };
  try {
    return { plan: parseFaultSpec(value) };
  } catch (error) {
    if (error instanceof FaultSpecError)
      throw new InvalidArgumentError(`${error.message}; or "random[:SEED][@SECONDS]" for a drawn mix.`);
    throw error;
  }
};

export const FAULT_START_OPTIONS = {
  faults: new Option(
    '--faults <spec>',
    'put a fault proxy between the fleet and SQS/DynamoDB: "random[:SEED][@SECONDS]" draws a mix (throttling, 5xx windows, resets, slow answers, writes whose answer is lost) within SECONDS (90) from the seed (default --seed), or a list SERVICE:KIND[:RATE]@START+DURATION, e.g. dynamodb:unavailable@20+60,sqs:throttle:0.5@10+30',
  ).argParser(faultsFlag),
} as const;

/** The plan `--faults` describes, drawn from the run's seed unless it names one. */
export function faultPlanOf(flag: FaultsFlag | undefined, seed: number): FaultPlan | undefined {
  if (flag === undefined) return undefined;
  if ('plan' in flag) return flag.plan;
  return drawFaultMix(flag.random.seed ?? seed, { horizonMs: flag.random.horizonMs });
}

/** The protocol window's share of the tasks paid twice: ids lost in crashes or cut in outages (said when there are some). */
function lostIdsOf(s: DemoSummary): string {
  const lost = s.consumer.idsLostInCrashes;
  const cut = s.idsCutInOutages;
  if (lost === 0 && cut === 0 && s.paidTwice === 0) return '';
  const explained = s.paidTwice - s.paidTwiceBeyondLostIds;
  if (cut === 0) return `, ${explained} of them an id lost in a crash (${lost} solver id(s) lost)`;
  return `, ${explained} of them an id lost in a crash (${lost} lost) or in an answer an outage held past its request (${cut} cut)`;
}

/** The summary's rows for the invariants a fault run is judged by, and for the proxy. */
export function faultRows(s: DemoSummary): [string, string, string][] {
  const rows: [string, string, string][] = [
    [
      'paid once',
      `${s.paidTwice} paid twice`,
      `tasks with more than one paid submission at the simulators (both providers)${lostIdsOf(s)}; duplicate solves ${s.duplicateSolves}`,
    ],
    [
      'announced',
      `${s.announced} of ${s.solved + s.failed + s.rejected + s.dlqWithRejectedRecord}`,
      `results (refusals with a record included) with a completion event heard; solved without one ${s.solvedNotAnnounced}${s.announcementsOwed > 0 ? `; still owed by a message in a lane ${s.announcementsOwed}` : ''}`,
    ],
    [
      'DLQ',
      `${s.validInDlq} valid`,
      `valid tasks in the DLQ; second copies of one letter ${s.dlqDuplicates}${s.dlqDuplicates > 0 ? `, ${s.dlqDuplicates - s.dlqDuplicatesUnexplained} of them SQS could not prevent (a lost answer, a delete cut off by a crash)` : ''}`,
    ],
  ];
  if (s.unsent > 0) rows.push(['unsent', String(s.unsent), 'SQS refused them after retries: never submitted']);
  if (s.faults) {
    const injected = (service: 'dynamodb' | 'sqs') => {
      const stats = s.faults?.stats[service];
      if (stats === undefined) return '';
      const hurt = Object.entries(stats.injected)
        .filter(([, n]) => n > 0)
        .map(([kind, n]) => `${kind} ${n}`)
        .join(', ');
      return `${service} ${stats.requests} requests${hurt ? ` (${hurt})` : ''}`;
    };
    rows.push(['faults', injected('dynamodb'), `${injected('sqs')}; plan ${s.faults.plan}`]);
    const outages = s.faults.storeOutages;
    rows.push([
      'store health',
      `${outages.length} outage(s)`,
      outages.length === 0
        ? 'the governor paused for no store outage'
        : `${outages
            .map(
              (o) =>
                `${o.store} ${((o.startMs ?? 0) / 1000).toFixed(0)}–${o.endMs === undefined ? 'end' : (o.endMs / 1000).toFixed(0)} s`,
            )
            .join(', ')} (the governor paused consumption); ${s.faults.storeResumes} probe(s) resumed it`,
    ]);
  }
  return rows;
}
