/**
 * The governor's own probe submission (docs/governor.md, "Neighbours"): while others hold all but
 * fewer of the plan's threads than the mapping's floor, the mappings are disabled and the tick's
 * decision asks for one probe. The probe is a small synthetic task submitted through the
 * solver client with over-cap retries off: a refusal is recorded in the thread ledger like a
 * consumer's (one over-cap answer, never more per tick), an acceptance takes a thread in the
 * ledger until the solver answers it (polled in the background), and the estimate climbs on it.
 * An accepted probe is a solve the provider charges (a text captcha: the cheapest method); it
 * happens at most once per tick, only while the fleet is starved.
 */
import type { SolverPort } from '../core/ports.js';
import { redactKey } from '../core/solver-protocol.js';
import type { Task } from '../core/task.js';
import type { ThreadLease, ThreadLedgerRecorder } from '../core/thread-ledger.js';
import type { ThreadProbe } from './loop.js';

/** Probes in flight at most: two accepted probes prove the mapping's floor free. */
const MAX_PROBES_IN_FLIGHT = 2;
/** How long an accepted probe is polled before it is given up, ms. */
const PROBE_DEADLINE_MS = 120_000;

/** The synthetic task a probe submits. */
export function probeTask(now: number): Task {
  return {
    id: `governor-probe-${now}`,
    method: 'textcaptcha',
    params: { textcaptcha: 'Type the word: probe' },
    priority: 'normal',
    submittedAt: now,
  } as Task;
}

export interface ThreadProbeOptions {
  /** A solver client built with `maxOverCapRetries: 0` (one refusal per probe). */
  solver: Pick<SolverPort, 'solve'>;
  ledger: ThreadLedgerRecorder;
  clock?: () => number;
  warn?: (message: string, fields?: Record<string, unknown>) => void;
}

/** The probe adapter; `submit` starts a probe in the background and never throws. */
export function createThreadProbe(options: ThreadProbeOptions): ThreadProbe & { inFlight(): number } {
  const clock = options.clock ?? Date.now;
  let inFlight = 0;
  const probe = async (now: number) => {
    let lease: Promise<ThreadLease> | undefined;
    try {
      await options.solver.solve(probeTask(now), {
        deadlineAt: now + PROBE_DEADLINE_MS,
        onSolverAnswer: (answer) => {
          if (answer.request !== 'submit') return;
          if (answer.outcome === 'over_cap') void options.ledger.refused(clock()).catch(() => undefined);
          else if (answer.outcome === 'accepted') lease = options.ledger.accepted(clock());
        },
      });
    } catch (error) {
      // Refused, failed or given up: the ledger has what the solver said.
      if (!/over.?cap|no.?slot/i.test((error as Error).name + (error as Error).message))
        options.warn?.('governor probe failed', { error: redactKey((error as Error).message) });
    } finally {
      if (lease !== undefined) await lease.then((taken) => options.ledger.released(taken)).catch(() => undefined);
      inFlight--;
    }
  };
  return {
    async submit(now) {
      if (inFlight >= MAX_PROBES_IN_FLIGHT) return;
      inFlight++;
      void probe(now);
    },
    inFlight: () => inFlight,
  };
}
