/**
 * The governor's own probe submission (docs/governor.md, "Neighbours"): while others hold all but
 * fewer of the plan's threads than the mapping's floor, the mappings are disabled and the tick's
 * decision asks for one probe. The probe is a small synthetic task submitted through the
 * solver client with over-cap retries off: a refusal is recorded in the thread ledger like a
 * consumer's (one over-cap answer, never more per tick), an acceptance takes a thread in the
 * ledger until the solver answers it (polled in the background), and the estimate climbs on it.
 * An accepted probe is a solve the provider charges (a text captcha: the cheapest method; an image
 * where the provider has no text type, learned from the client's refusal, which sends nothing); it
 * happens at most once per tick, only while the fleet is starved.
 *
 * In the parked design the fleet's threads are its thread leases, so the probe holds one too
 * (`leases`): taken before it submits, in the lane's first shard at an index no consumer takes
 * (PROBE_SLOT_BASE), freed once the solver refused it or answered it (or its deadline passed;
 * a crashed governor's ends by itself). Without it an accepted probe's thread counted nowhere:
 * the consumers resumed on it, the solver refused them, and the fleet starved again with its own
 * probe on the thread. A probe whose slot cannot be taken is not made.
 */
import type { SolverAnswer, SolverPort } from '../core/ports.js';
import { redactKey, SolverTaskError } from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';
import { TASK_NOT_SUPPORTED } from '../core/task-types.js';
import { type LeaseSlot, type LeaseTaker, PROBE_SLOTS, takeProbeSlot } from '../core/thread-leases.js';
import type { ThreadLease, ThreadLedgerRecorder } from '../core/thread-ledger.js';
import type { ThreadProbe } from './loop.js';
import type { ProbeCarrier } from './probe-carrier.js';

/** Probes in flight at most: one probe lease each (two accepted probes prove the mapping's floor free). */
const MAX_PROBES_IN_FLIGHT = PROBE_SLOTS;
/** How long an accepted probe is polled before it is given up, ms. */
const PROBE_DEADLINE_MS = 120_000;

/**
 * The image a probe submits where the provider's JSON task API has no text type (Anti-Captcha,
 * CapMonster, CapSolver): a 60 × 20 grey PNG of four bars, 136 bytes (solvers refuse images under
 * 100). Its answer is never read for anything; only the submission's acceptance or refusal is.
 */
const PROBE_IMAGE =
  'iVBORw0KGgoAAAANSUhEUgAAADwAAAAUCAAAAAD0aAH1AAAAJHRFWHRDb21tZW50AGNhcHRjaGEtZmxlZXQgZ292ZXJub3IgcHJvYmX8xtjLAAAAH0lEQVR42mP4TwFgGOmaGcCABPao5lHNJGkezZKEAQDoG7xu10GL/wAAAABJRU5ErkJggg==';

/** A probe's method: a text captcha (the cheapest), or an image where the provider has no text type. */
export type ProbeMethod = 'textcaptcha' | 'base64';

/** The synthetic task a probe submits. */
export function probeTask(now: number, method: ProbeMethod = 'textcaptcha'): Task {
  const params = method === 'textcaptcha' ? { textcaptcha: 'Type the word: probe' } : { body: PROBE_IMAGE };
  return { id: probeTaskId(now), method, params, priority: 'normal', submittedAt: now } as Task;
}

/** The probe's task id (its thread lease names it), whatever its method. */
function probeTaskId(now: number): string {
  return `governor-probe-${now}`;
}

export interface ThreadProbeOptions {
  /** A solver client built with `maxOverCapRetries: 0` (one refusal per probe). */
  solver: Pick<SolverPort, 'solve'>;
  ledger: ThreadLedgerRecorder;
  clock?: () => number;
  warn?: (message: string, fields?: Record<string, unknown>) => void;
  /** The parked design: the probe holds a thread lease while the solver may hold its thread. */
  leases?: ProbeLeases;
  /**
   * Called once the solver accepts a probe (its ledger write asked for): the governor's loop
   * ticks at once on it (tick-wake.ts) rather than up to a tick later.
   */
  onAccepted?: () => void;
  /**
   * The parked design: the probe carries a waiting task (probe-carrier.ts), the synthetic task
   * only when none was submitted (none waiting, a malformed one, no probe slot or money now).
   */
  carrier?: ProbeCarrier;
}

/** Where a probe's thread lease is taken (the parked design). */
export interface ProbeLeases {
  leases: Pick<LeaseTaker, 'take' | 'release'>;
  /** The lane's first shard. */
  shard: string;
}

/** The probe's leases on a lane: its store, in the lane's first shard (the one the governor's role may put in). */
export function probeLeasesOf(lane: { leases: ProbeLeases['leases']; shards: readonly string[] }): ProbeLeases {
  return { leases: lane.leases, shard: lane.shards[0] as string };
}

/** A delivery for the probe's lease: it has no message (the watch never frees a lease without a task record). */
const PROBE_DELIVERY = { eventSourceArn: 'governor-probe', receiptHandle: 'governor-probe' } as const;

/** What the probes of one adapter did: submissions made, and what the solver answered them. */
export interface ThreadProbeStats {
  /**
   * Probes sent to the solver (a probe whose thread lease could not be taken is not made), each
   * counted once the solver answered its submission (with its answer, in the same step) or it
   * failed: one the solver never answered (a transport failure) counts here and in neither answer,
   * one still waiting for its first answer not yet. So `made` is `accepted + refused` + the failed
   * at any moment: counted when sent, a snapshot taken while one was on its way read "6 made, 5
   * refused" (`npm start`'s summary, under load).
   */
  made: number;
  accepted: number;
  refused: number;
}

/** The probe adapter; `submit` starts a probe in the background and never throws. */
export function createThreadProbe(
  options: ThreadProbeOptions,
): ThreadProbe & { inFlight(): number; stats(): ThreadProbeStats } {
  const clock = options.clock ?? Date.now;
  let inFlight = 0;
  let method: ProbeMethod = 'textcaptcha';
  const counts: ThreadProbeStats = { made: 0, accepted: 0, refused: 0 };
  /**
   * The probe with a waiting task: true when it was made (or may have been: a failed invocation
   * is not followed by a synthetic probe). The consumer wrote the answer to the ledger itself.
   */
  const carried = async (carrier: ProbeCarrier): Promise<boolean> => {
    const result = await carrier.carry();
    if (result.answer === 'none') return false;
    counts.made++;
    if (result.answer === 'failed')
      options.warn?.('governor probe with a waiting task failed', { error: redactKey(result.error) });
    else if (result.answer === 'refused') counts.refused++;
    else {
      counts.accepted++;
      options.onAccepted?.();
    }
    return true;
  };
  const probe = async (now: number) => {
    try {
      if (options.carrier === undefined || !(await carried(options.carrier))) await synthetic(now);
    } finally {
      inFlight--;
    }
  };
  const synthetic = async (now: number) => {
    let lease: Promise<ThreadLease> | undefined;
    let slot: LeaseSlot | undefined;
    /** Sent, and counted in `made` (at its first answer, or at its end without one). */
    let sent = false;
    let counted = false;
    const count = () => {
      if (counted) return;
      counted = true;
      counts.made++;
    };
    try {
      if (options.leases !== undefined) {
        // One per probe in flight at most (PROBE_SLOTS), until the probe's deadline.
        slot = await takeProbeSlot(options.leases.leases, {
          shard: options.leases.shard,
          taskId: probeTaskId(now),
          takenAt: now,
          until: now + PROBE_DEADLINE_MS,
          delivery: PROBE_DELIVERY,
        });
        if (slot === undefined) {
          options.warn?.('governor probe not made: its thread lease could not be taken');
          return;
        }
      }
      sent = true;
      const onSolverAnswer = (answer: SolverAnswer) => {
        if (answer.request !== 'submit') return;
        if (answer.outcome === 'over_cap' || answer.outcome === 'accepted') count();
        if (answer.outcome === 'over_cap') {
          counts.refused++;
          void options.ledger.refused(clock()).catch(() => undefined);
        } else if (answer.outcome === 'accepted') {
          counts.accepted++;
          lease = options.ledger.accepted(clock());
          // The tick it wakes reads the ledger: it runs once the acceptance is written (or failed to be).
          void lease.then(
            () => options.onAccepted?.(),
            () => options.onAccepted?.(),
          );
        }
      };
      const solveOptions = { deadlineAt: now + PROBE_DEADLINE_MS, onSolverAnswer };
      try {
        await options.solver.solve(probeTask(now, method), solveOptions);
      } catch (error) {
        // The provider has no type for a text captcha (refused before anything was sent): the
        // image from now on. Without it, no probe ever reached Anti-Captcha, CapMonster or
        // CapSolver, and a fleet that others had starved never learned that threads came back.
        if (method !== 'textcaptcha' || !(error instanceof SolverTaskError) || error.code !== TASK_NOT_SUPPORTED)
          throw error;
        method = 'base64';
        await options.solver.solve(probeTask(now, method), solveOptions);
      }
    } catch (error) {
      // Refused, failed or given up: the ledger has what the solver said.
      if (!/over.?cap|no.?slot/i.test((error as Error).name + (error as Error).message))
        options.warn?.('governor probe failed', { error: redactKey((error as Error).message) });
    } finally {
      // Sent and never answered (a transport failure, given up): made, in neither answer.
      if (sent) count();
      if (lease !== undefined) await lease.then((taken) => options.ledger.released(taken)).catch(() => undefined);
      // Refused, answered or given up: the solver holds no thread for it any more (a failed
      // release leaves the lease to end at the probe's deadline).
      if (slot !== undefined) await options.leases?.leases.release(slot).catch(() => undefined);
    }
  };
  return {
    async submit(now) {
      if (inFlight >= MAX_PROBES_IN_FLIGHT) return;
      inFlight++;
      void probe(now);
    },
    // A task the carrier keeps for the next probe goes back at once (the fleet is no longer starved, or the invocation ends).
    release: () => options.carrier?.release() ?? Promise.resolve(),
    inFlight: () => inFlight,
    stats: () => ({ ...counts }),
  };
}
