/**
 * The governor's probe carries a waiting task end to end on the emulators (docs/governor.md,
 * "Neighbours"): a neighbour takes a parked fleet's whole plan, the governor pauses the mappings
 * and probes once a tick with a task from the queue (refused: back at once), and when the
 * neighbour hands the threads back the accepted probe is a producer's task, solved and recorded
 * once — the solver accepted no submission that was not a task's. The local runtime runs the
 * Lambda's loop, probe, carrier (the consumer handler in process) and watch.
 */
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TickRecord } from '../../functions/governor/loop.js';
import { startLocalStack, type LocalStack } from '../../local/runtime.js';
import { until } from '../helpers/until.js';

const PLAN = 6;
const TASKS = 60;
const TICK_MS = 500;

let stack: LocalStack;
const reasons: string[] = [];
const announced = new Set<string>();
let outcome: { refusedWhileHeld: number; acceptedAfter: number; published: number; dlq: string | undefined };

beforeAll(async () => {
  // Prepare: a parked 6-thread plan, 1-s solves, ticks of half a second; a neighbour holds it all from the start.
  stack = await startLocalStack({
    config: { planThreads: PLAN, maxReceiveCount: 5 },
    visibilityTimeoutSeconds: 8,
    receiveWaitSeconds: 1,
    governor: { tickMs: TICK_MS, onDecision: (record: TickRecord) => reasons.push(record.decision.reason.code) },
    solver: { seed: 23, medianMs: 1_000, transientErrorRate: 0, unsolvableRate: 0, foreignThreads: PLAN },
  });
  stack.events.subscribe((event) => announced.add(event.id));
  await stack.producer.submit(
    Array.from({ length: TASKS }, (_, i) => ({
      method: 'turnstile' as const,
      params: { sitekey: `0x4AAAAAAAprobe${String(i).padStart(8, '0')}`, pageurl: `https://probe.example.com/${i}` },
    })),
  );
  const probes = () => stack.governor?.stats().threadProbes ?? { made: 0, accepted: 0, refused: 0 };
  // Act 1: the fleet is starved; its probes carry tasks, each refused (more than a task's receives allow).
  await until(() => probes().refused >= 8, 30_000);
  const refusedWhileHeld = probes().refused;
  // Act 2: the neighbour hands every thread back; the next probe is accepted, and the fleet runs on.
  stack.simulator.update({ foreignThreads: 0 });
  await until(() => announced.size >= TASKS, 60_000);
  const dlq = await stack.clients.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: stack.resources.queueUrls.dlq,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'],
    }),
  );
  outcome = {
    refusedWhileHeld,
    acceptedAfter: probes().accepted,
    published: stack.events.published,
    dlq: dlq.Attributes?.ApproximateNumberOfMessages,
  };
}, 120_000);

afterAll(async () => {
  await stack?.stop({ graceMs: 500 });
});

describe('the governor’s probe carries a waiting task, on the emulators', () => {
  it('probed the starved fleet with tasks, refused without walking any to the DLQ, then was accepted on the threads handed back', () => {
    expect(reasons).toContain('WAIT_FOR_THREADS');
    expect(outcome.refusedWhileHeld).toBeGreaterThanOrEqual(8);
    expect(outcome.acceptedAfter).toBeGreaterThanOrEqual(1);
    expect(outcome.dlq).toBe('0');
    // each carried probe was a consumer invocation, counted for the run's bill beside the mappings'
    const invocations = stack.probeInvocations();
    expect(invocations.invocations).toBeGreaterThanOrEqual(outcome.refusedWhileHeld + outcome.acceptedAfter);
    expect(invocations.invocationMs).toBeGreaterThan(0);
  });

  it('solved every task once, and the solver accepted no submission that was not a task’s (no synthetic probe paid for)', () => {
    const sim = stack.simulator.stats();
    expect(announced.size).toBe(TASKS);
    expect(outcome.published).toBe(TASKS);
    expect(sim.accepted).toBe(TASKS);
    expect(stack.probeSolverIds().size).toBe(0);
  });
});
