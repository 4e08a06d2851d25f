/**
 * What the fleet sends the solver's API, billed as data transfer out to the internet: the one AWS
 * charge its solver calls carry (its calls to SQS, DynamoDB, EventBridge and CloudWatch stay in
 * the region, where transfer is free; what the solver sends back is transfer in, free). Pure.
 */
import { RES_PHP_IDS_PER_REQUEST } from '../solver-protocol.js';

/**
 * HTTP bytes of the solver client's requests (undici, res.php), as a local server receives them:
 * test/integration/solver-traffic.test.ts holds the client under each figure. A submission is
 * billed at the task's message size (`CostAssumptions.taskBytes`, 2 KB): a reCAPTCHA task's
 * measures 299 B; an image's carries its base64 body, which its message carries too.
 */
export const SOLVER_REQUEST_BYTES = {
  /** A res.php poll (`action=get`, one id or a bulk `ids=` list) without its ids: 129 B measured. */
  pollBase: 140,
  /** …each id it asks about (up to 13 digits and its URL-encoded comma): 14 B measured for 11 digits. */
  pollPerId: 16,
  /** A balance read (`action=getbalance`): under a one-id poll. */
  balance: 140,
  /**
   * What a request costs on the wire beside its HTTP bytes (an assumption, not measured): a TLS
   * record's header and tag (29 B), its TCP/IP headers (40 B) and the ACK of the answer (40 B).
   */
  overhead: 110,
} as const;

/** What the fleet asked the solver, counted. */
export interface SolverTraffic {
  /** Submissions (in.php), each carrying a task's params. */
  submissions: number;
  /** …at this many bytes each (the task's message). */
  submissionBytes: number;
  /** Polls of one submission (the waiting consumer's, the watch's fetch of a ready answer). */
  singlePolls: number;
  /** The watch's rounds, each a bulk poll of every parked submission… */
  watchRounds: number;
  /** …of this many on average. */
  parkedPerRound: number;
  /** Balance reads (the governor's, one a tick). */
  balanceReads: number;
}

/** Bytes the fleet sends the solver for `traffic`. */
export function solverBytesOut(traffic: SolverTraffic): number {
  const b = SOLVER_REQUEST_BYTES;
  const roundRequests = Math.ceil(traffic.parkedPerRound / RES_PHP_IDS_PER_REQUEST);
  return (
    traffic.submissions * (traffic.submissionBytes + b.overhead) +
    traffic.singlePolls * (b.pollBase + b.pollPerId + b.overhead) +
    traffic.watchRounds * (roundRequests * (b.pollBase + b.overhead) + traffic.parkedPerRound * b.pollPerId) +
    traffic.balanceReads * (b.balance + b.overhead)
  );
}
