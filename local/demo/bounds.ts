/**
 * What a run shows within the protocols' bounds: the one moment each leaves open, where a fault
 * makes the fleet pay or dead-letter twice and no code of the fleet can prevent it. A submission
 * accepted while its invocation dies, or whose answer (CapSolver's image, answered in its own
 * response) an outage held until after its request was given up: no idempotency key at in.php or
 * createTask, so its id is lost and the task paid again. A letter whose SendMessage committed while
 * its answer was lost, or whose source's delete a crash cut off: none at SQS, so it is sent again.
 * `npm start`'s verdict and the drawn runs' judge (bench/lib/judge.ts) say them in these words;
 * anything beyond them is an invariant broken, which each says on its own.
 */
import type { DemoSummary } from './summary.js';

/** Each bounded event the run shows, in words; empty when it shows none (or shows more than the bounds allow). */
export function withinProtocolBounds(summary: DemoSummary): string[] {
  const bounded: string[] = [];
  const lostIds = summary.consumer.idsLostInCrashes;
  const cut = summary.idsCutInOutages;
  if (summary.paidTwiceBeyondLostIds === 0 && summary.paidTwice > 0)
    bounded.push(
      cut > 0
        ? `${summary.paidTwice} paid twice, each an id lost in a crash (${lostIds} lost) or an answer an outage held past its request (${cut} cut)`
        : `${summary.paidTwice} paid twice, each an id lost in a crash (${lostIds} lost)`,
    );
  const repeatable = summary.dlqDuplicates - summary.dlqDuplicatesUnexplained;
  if (summary.dlqDuplicatesUnexplained === 0 && summary.dlqDuplicates > 0)
    bounded.push(
      `${repeatable} second DLQ copies, each of a letter SQS could not keep from repeating (its send's answer lost, or its source's delete cut off by a crash)`,
    );
  return bounded;
}
