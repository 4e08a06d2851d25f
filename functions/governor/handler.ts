/**
 * The governor Lambda: invoked once a minute by a schedule, ticks every `settings.tickMs`
 * until shortly before its timeout. One structured log line and one set of EMF metrics per
 * decision; a failed tick keeps the last ceilings and makes the invocation end in an error.
 */
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context } from 'aws-lambda';
import { createMetrics } from '../adapters/metrics.js';
import { parseEnvironment } from '../core/environment.js';
import { SERVICES } from '../core/metric-names.js';
import { createRedactor } from '../core/redaction.js';
import { governorLogFrom, runTicks } from './run.js';
import { onceUntilFailure } from '../core/once.js';
import { createGovernorFromEnvironment } from './wiring.js';
import { runRelayedWatch, tickWindowOf } from './relayed-watch.js';
import { createWatchRelay } from '../core/watch-relay.js';

/** The watch stops this long before the invocation's timeout, ms. */
const WATCH_MARGIN_MS = 1_000;

const logger = new Logger({ serviceName: SERVICES.governor });
// Learns the solver keys as the wiring reads them; every log line is redacted with it.
const redactor = createRedactor();
const log = governorLogFrom(logger, redactor);
// Built once per cold start; a failed build is retried by the next invocation.
const wired = onceUntilFailure(() => createGovernorFromEnvironment({ environment: parseEnvironment(), log, redactor }));

export const handler = async (_event: unknown, context: Pick<Context, 'getRemainingTimeInMillis' | 'awsRequestId'>) => {
  const started = Date.now();
  const governor = await wired();
  const metrics = createMetrics({
    namespace: governor.settings.metricsNamespace,
    serviceName: SERVICES.governor,
    logger,
  });
  const remainingMs = () => context.getRemainingTimeInMillis();
  const tickRemainingMs = tickWindowOf(started, remainingMs);
  // The parked design: between ticks the watch asks the solver about every parked task (a bulk
  // request every 100 ms or more, the leases read every second) and records the ready ones; it
  // takes over from the previous invocation's watch and runs past the ticks until the next
  // invocation's takes over from it (the relay), a second before the timeout at the latest.
  // Settled both: a failed tick fails the invocation only once its watch has handed over (it
  // answered at once before, and Lambda froze the environment mid-watch with the baton still
  // its own: no watch ran until the baton's hold ran out, ~25 s of a minute in AWS).
  const [ticks, watched] = await Promise.allSettled([
    runTicks({
      loop: governor.loop,
      tickMs: governor.settings.tickMs,
      remainingMs: tickRemainingMs,
      wake: governor.wake,
      solverRead: governor.solverRead,
      metrics,
      log,
      ...(governor.watch ? { watch: governor.watch } : {}),
    }),
    governor.watch
      ? runRelayedWatch({
          watch: governor.watch,
          ...(governor.baton ? { relay: createWatchRelay({ store: governor.baton, me: context.awsRequestId }) } : {}),
          remainingMs,
          marginMs: WATCH_MARGIN_MS,
          ticksOver: () => tickRemainingMs() <= 0,
          log,
        })
      : undefined,
  ]);
  if (ticks.status === 'rejected') throw ticks.reason;
  if (watched.status === 'rejected') throw watched.reason;
  const last = ticks.value.records.at(-1);
  return {
    ticks: ticks.value.ticks,
    lastReason: last?.decision.reason.code,
    ...(last?.overflow ? { lastOverflowReason: last.overflow.reason.code } : {}),
  };
};
