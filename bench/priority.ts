/**
 * Priority-lane benchmark (not a test): with the normal lane saturated (a backlog far larger
 * than the threads), bursts of high-priority tasks are sent; how long does each wait before a
 * delivery claims it (claim time − sent time)? The bound is one governor tick plus one
 * solve: the next tick gives the high lane its share, and the normal invocations already running
 * finish their solve before their slots pass to the high lane.
 *
 *   npm run bench:priority -- [--plan-threads 8] [--normal 600] [--high 10] [--bursts 3]
 *                              [--tick-ms 1000] [--solver-latency-ms 400] [--seed 1] [--json]
 *
 * Runs the real local stack: emulators, simulator, consumer behind both pollers, the governor.
 */
import { availableParallelism, cpus } from 'node:os';
import { Command } from 'commander';
import { BatchGetCommand } from '@aws-sdk/lib-dynamodb';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { TaskResult } from '../functions/core/results.js';
import type { TaskMessage } from '../functions/core/task.js';
import { percentile } from '../functions/core/helpers/stats.js';
import { sleep } from '../functions/core/helpers/time.js';
import { startLocalStack, type LocalStack } from '../local/runtime.js';
import { stream } from '../local/solver-sim/prng.js';
import { integer } from '../local/cli-values.js';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const program = new Command('bench:priority')
  .description('high-priority wait before start while the normal lane is saturated')
  .option('--plan-threads <n>', 'solver plan threads (the fleet uses all of them)', integer(2, 200), 8)
  .option('--normal <n>', 'normal-lane backlog sent first', integer(10, 100_000), 600)
  .option('--high <n>', 'high-priority tasks per burst', integer(1, 1_000), 10)
  .option('--bursts <n>', 'bursts, one after the other', integer(1, 100), 3)
  .option('--tick-ms <ms>', 'governor tick', integer(100, 60_000), 1_000)
  .option('--solver-latency-ms <ms>', 'median solve time of the simulator', integer(1, 600_000), 400)
  .option('--seed <s>', 'seed of the simulator', integer(0, 2 ** 31 - 1), 1)
  .option('--json', 'also print the figures as one JSON line');

interface Options {
  planThreads: number;
  normal: number;
  high: number;
  bursts: number;
  tickMs: number;
  solverLatencyMs: number;
  seed: number;
  json?: boolean;
}

let serial = 0;
/** A token task with its own page, so the simulator never sees a duplicate. */
function task(priority: 'normal' | 'high'): TaskMessage {
  serial++;
  return {
    id: `bench-${priority}-${process.pid}-${serial}`,
    ...(priority === 'high' ? { priority } : {}),
    method: 'turnstile',
    params: {
      sitekey: `0x4AAAAAAABench${String(serial).padStart(8, '0')}`,
      pageurl: `https://bench.example.com/${priority}/${serial}`,
    },
  } as TaskMessage;
}

async function records(stack: LocalStack, ids: readonly string[]): Promise<Map<string, TaskResult>> {
  const found = new Map<string, TaskResult>();
  const table = stack.resources.tables.results;
  for (let i = 0; i < ids.length; i += 100) {
    const answer = await stack.clients.documents.send(
      new BatchGetCommand({
        RequestItems: { [table]: { Keys: ids.slice(i, i + 100).map((taskId) => ({ taskId })), ConsistentRead: true } },
      }),
    );
    for (const item of answer.Responses?.[table] ?? []) found.set(item.taskId as string, item as TaskResult);
  }
  return found;
}

async function visible(stack: LocalStack, lane: 'normal' | 'high'): Promise<number> {
  const answer = await stack.clients.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: stack.resources.queueUrls[lane],
      AttributeNames: ['ApproximateNumberOfMessages'],
    }),
  );
  return Number(answer.Attributes?.ApproximateNumberOfMessages ?? 0);
}

async function main(options: Options): Promise<void> {
  // When each decision opened the high lane: splits a wait into "until the tick" and "until a slot".
  const highOpenedAt: number[] = [];
  const stack = await startLocalStack({
    config: { planThreads: options.planThreads },
    // Long enough that no healthy solve is mistaken for a dead invocation.
    visibilityTimeoutSeconds: 30,
    governor: {
      tickMs: options.tickMs,
      onDecision: (record) => {
        if (record.decision.enabled.high) highOpenedAt.push(Date.now());
      },
    },
    solver: {
      seed: options.seed,
      medianMs: options.solverLatencyMs,
      transientErrorRate: 0,
      unsolvableRate: 0,
      balance: 1_000,
    },
  });
  const phase = stream(options.seed, 'bench-priority-phase');
  const waits: number[] = [];
  const perBurst: {
    burst: number;
    normalBacklog: number;
    p50: number | null;
    max: number | null;
    laneOpenedAfterMs: number | null;
  }[] = [];
  const normalIds: string[] = [];
  try {
    const normal = Array.from({ length: options.normal }, () => task('normal'));
    normalIds.push(...(await stack.producer.submit(normal)));

    // Saturated: every slot of the pool busy with normal tasks, and a backlog far beyond it.
    const saturatedBy = Date.now() + 30_000;
    while (
      !(
        stack.pollers.normal.stats().inFlight >= stack.pool.limit &&
        (await visible(stack, 'normal')) > 5 * stack.pool.limit
      )
    ) {
      if (Date.now() > saturatedBy)
        throw new Error('the normal lane did not saturate within 30 s; send a larger --normal backlog');
      await sleep(50);
    }

    for (let burst = 1; burst <= options.bursts; burst++) {
      const normalBacklog = await visible(stack, 'normal');
      const sentAt = Date.now();
      const highIds = await stack.producer.submit(Array.from({ length: options.high }, () => task('high')));
      const deadline = Date.now() + 60_000 + options.tickMs;
      let started = new Map<string, TaskResult>();
      while (started.size < highIds.length) {
        if (Date.now() > deadline)
          throw new Error(`burst ${burst}: only ${started.size} of ${highIds.length} high tasks started within 60 s`);
        await sleep(25);
        started = new Map([...(await records(stack, highIds))].filter(([, record]) => record.startedAt !== undefined));
      }
      const burstWaits = [...started.values()].map(
        (record) => (record.startedAt as number) - (record.submittedAt as number),
      );
      waits.push(...burstWaits);
      const opened = highOpenedAt.find((at) => at >= sentAt);
      perBurst.push({
        burst,
        normalBacklog,
        p50: percentile(burstWaits, 0.5) ?? null,
        max: Math.max(...burstWaits),
        laneOpenedAfterMs: opened === undefined ? null : opened - sentAt,
      });
      if (burst < options.bursts) {
        // Let the high lane empty and the governor give its threads back to the normal lane.
        const settleBy = Date.now() + 30_000;
        while (
          stack.pollers.high.stats().inFlight > 0 ||
          (await visible(stack, 'high')) > 0 ||
          stack.pollers.normal.stats().inFlight < stack.pool.limit
        ) {
          if (Date.now() > settleBy) break;
          await sleep(50);
        }
        // A burst lands anywhere in the governor's tick, not always just after one.
        await sleep(options.tickMs + Math.floor(phase() * options.tickMs));
      }
    }

    const normalDone = [...(await records(stack, normalIds)).values()].filter((r) => r.status === 'solved');
    const solveMs = normalDone.map((r) => r.solveMs).filter((ms): ms is number => typeof ms === 'number');
    const medianSolveMs = percentile(solveMs, 0.5) ?? null;
    const p95SolveMs = percentile(solveMs, 0.95) ?? null;
    const normalWaits = normalDone.map((r) => (r.startedAt as number) - (r.submittedAt as number));
    const bound = medianSolveMs === null ? null : options.tickMs + medianSolveMs;
    const within = bound === null ? null : waits.filter((ms) => ms <= bound).length;
    const boundP95 = p95SolveMs === null ? null : options.tickMs + p95SolveMs;
    const withinP95 = boundP95 === null ? null : waits.filter((ms) => ms <= boundP95).length;
    const figures = {
      machine: { nproc: availableParallelism(), cpu: cpus()[0]?.model ?? 'unknown', node: process.version },
      setup: {
        planThreads: options.planThreads,
        normalBacklog: options.normal,
        highPerBurst: options.high,
        bursts: options.bursts,
        tickMs: options.tickMs,
        solverMedianMs: options.solverLatencyMs,
      },
      highWaitMs: {
        n: waits.length,
        p50: percentile(waits, 0.5) ?? null,
        p95: percentile(waits, 0.95) ?? null,
        max: Math.max(...waits),
      },
      medianSolveMs,
      p95SolveMs,
      boundMs: bound,
      withinBound: within,
      boundP95Ms: boundP95,
      withinBoundP95: withinP95,
      perBurst,
      normalWaitMs: {
        solvedDuringRun: normalWaits.length,
        p50: percentile(normalWaits, 0.5) ?? null,
        max: normalWaits.length ? Math.max(...normalWaits) : null,
      },
    };
    print(figures);
    if (options.json) console.log(JSON.stringify(figures));
  } finally {
    // Let running invocations finish: the emulators must not close under a write in flight.
    await stack.stop({ graceMs: 5_000 });
  }
}

function print(f: {
  machine: { nproc: number; cpu: string; node: string };
  setup: Record<string, number>;
  highWaitMs: { n: number; p50: number | null; p95: number | null; max: number };
  medianSolveMs: number | null;
  p95SolveMs: number | null;
  boundMs: number | null;
  withinBound: number | null;
  boundP95Ms: number | null;
  withinBoundP95: number | null;
  perBurst: {
    burst: number;
    normalBacklog: number;
    p50: number | null;
    max: number | null;
    laneOpenedAfterMs: number | null;
  }[];
  normalWaitMs: { solvedDuringRun: number; p50: number | null; max: number | null };
}): void {
  const ms = (value: number | null) => (value === null ? '–' : `${Math.round(value)} ms`);
  const s = f.setup;
  const rows: [string, string][] = [
    ['machine', `${f.machine.nproc} CPU(s), ${f.machine.cpu}, Node ${f.machine.node}`],
    [
      'setup',
      `plan ${s.planThreads} threads · normal backlog ${s.normalBacklog} · ${s.bursts} burst(s) of ${s.highPerBurst} high · tick ${s.tickMs} ms · simulator median ${s.solverMedianMs} ms`,
    ],
    ['high wait p50', ms(f.highWaitMs.p50)],
    ['high wait p95', ms(f.highWaitMs.p95)],
    ['high wait max', ms(f.highWaitMs.max)],
    ['solve p50/p95', `${ms(f.medianSolveMs)} / ${ms(f.p95SolveMs)}`],
    [
      'tick + solve',
      `${ms(f.boundMs)} (median solve): ${f.withinBound ?? '–'} of ${f.highWaitMs.n} within · ${ms(f.boundP95Ms)} (p95 solve): ${f.withinBoundP95 ?? '–'} of ${f.highWaitMs.n} within`,
    ],
    ...f.perBurst.map((b): [string, string] => [
      `burst ${b.burst}`,
      `normal backlog ${b.normalBacklog} · high lane opened after ${ms(b.laneOpenedAfterMs)} · p50 ${ms(b.p50)} · max ${ms(b.max)}`,
    ]),
    [
      'normal wait',
      `p50 ${ms(f.normalWaitMs.p50)} · max ${ms(f.normalWaitMs.max)} (the ${f.normalWaitMs.solvedDuringRun} normal tasks solved during the run)`,
    ],
  ];
  console.log('\nHigh-priority wait before start (claim − sent), normal lane saturated');
  for (const [label, value] of rows) console.log(`  ${label.padEnd(14)} ${value}`);
}

program.action(async (options: Options) => {
  await main(options);
});
await program.parseAsync(process.argv);
