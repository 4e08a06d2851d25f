/**
 * `npm run bench:watch-cpu` — what the governor's watch costs in CPU, not a test.
 *
 * In the parked design the governor's invocation polls every parked submission and records each
 * ready answer itself (functions/governor/parked-watch.ts): per recorded task the lease's
 * DeleteItem, one result request, the answered record's conditional write, the completion event
 * (PutEvents) and the message's DeleteMessage. Lambda gives a function CPU in proportion to its
 * memory (one vCPU at 1 769 MB), so the task rate a governor can record is bounded by its memory.
 * This measures the watch's own CPU with the real code and the real AWS SDK: the emulators, the
 * solver simulator and a stand-in EventBridge endpoint run in a child process, so only the
 * watch's side of every call (signing, serializing, parsing) is counted.
 *
 * Phases on N parked tasks (parked through the consumer's own handler): rounds that find nothing
 * ready (CPU per round and per parked submission asked about), then rounds until every task is
 * recorded (CPU per recorded task, the polling share taken out). The table turns them into the
 * tasks a second a governor at a given memory records before its CPU share runs out.
 */
import { Command } from 'commander';
import { integer } from '../local/cli-values.js';
import { pollRequestsFor } from '../functions/core/solver-protocol.js';
import { LAMBDA_MB_PER_VCPU } from '../functions/core/function-sizing.js';
import { parkedGovernorSizing, WATCH_CPU, watchCpuNeed } from '../functions/core/watch-sizing.js';
import { type Built, cpuMs, parkAll, parkedFleet, sleep, startHost } from './lib/parked-fleet.js';

interface Figures {
  tasks: number;
  medianSolveMs: number;
  pollRounds: number;
  pollCpuMsPerRound: number;
  /** CPU per poll request to the solver (res.php: up to 100 ids each), ms. */
  pollCpuMsPerRequest: number;
  recorded: number;
  recordCpuMsPerTask: number;
  /** Full plans of 10-second solves: the vCPU the watch needs at the measured figures, the memory the stack gives the governor, the share of its CPU used. */
  plans: { planThreads: number; vcpuNeeded: number; memoryMb: number; shareUsed: number }[];
}

const PLANS = [50, 100, 200, 600, 1000];

/** CPU of rounds, each followed by 100 ms of rest, while `more()` holds: total ms, rounds, submissions asked about. */
async function timedRounds(
  watch: Built['watch'],
  more: () => boolean,
): Promise<{ cpu: number; rounds: number; asked: number }> {
  let cpu = 0;
  let rounds = 0;
  let asked = 0;
  while (more()) {
    const before = cpuMs();
    const polled = watch.stats.polled;
    await watch.round();
    cpu += cpuMs() - before;
    asked += watch.stats.polled - polled;
    rounds++;
    await sleep(100);
  }
  return { cpu, rounds, asked };
}

async function measure(tasks: number, medianMs: number): Promise<Figures> {
  const { endpoints, stop } = await startHost(medianMs);
  const fleet = parkedFleet(endpoints, tasks);
  try {
    const built = await fleet.build();
    const parkStarted = Date.now();
    await parkAll(fleet, built, tasks);
    const { watch } = built;
    // Phase 1: rounds that find nothing ready (the solves take `medianMs`; parking took less).
    await watch.round();
    const readyFrom = parkStarted + medianMs * 0.4;
    let count = 0;
    const polling = await timedRounds(
      watch,
      () => Date.now() < readyFrom - 500 && count++ < 100 && watch.stats.recorded === 0,
    );
    // Phase 2: rounds until every task is recorded.
    const deadline = Date.now() + medianMs * 4 + 60_000;
    const recording = await timedRounds(watch, () => watch.stats.recorded < tasks && Date.now() < deadline);
    const before = cpuMs();
    await watch.flushSolved();
    const recordCpu = recording.cpu + cpuMs() - before;
    return figuresOf({
      tasks,
      medianMs,
      recorded: watch.stats.recorded,
      polling,
      recording: { ...recording, cpu: recordCpu },
    });
  } finally {
    await fleet.close();
    stop();
  }
}

/** The measured figures, and what they need of the governor on full plans. */
function figuresOf(run: {
  tasks: number;
  medianMs: number;
  recorded: number;
  polling: { cpu: number; rounds: number; asked: number };
  recording: { cpu: number; rounds: number; asked: number };
}): Figures {
  const { polling, recording } = run;
  const perRound = polling.rounds > 0 ? polling.cpu / polling.rounds : 0;
  const perAsked = polling.asked > 0 ? polling.cpu / polling.asked : 0;
  const requests = polling.rounds > 0 ? pollRequestsFor('res-php', polling.asked / polling.rounds) : 0;
  // The polling share of phase 2, at phase 1's price per submission asked about.
  const recordOnly = Math.max(0, recording.cpu - recording.asked * perAsked);
  const perTask = run.recorded > 0 ? recordOnly / run.recorded : 0;
  const perRequest = requests > 0 ? perRound / requests : 0;
  const plans = PLANS.map((planThreads) => {
    const fleet = { planThreads, solverProtocol: 'res-php', dialect: 'captchaai' } as const;
    const vcpuNeeded = watchCpuNeed(fleet, {
      recordMs: perTask,
      requestMs: perRequest,
      solveSeconds: WATCH_CPU.solveSeconds,
    });
    const { memoryMb } = parkedGovernorSizing(fleet);
    return { planThreads, vcpuNeeded, memoryMb, shareUsed: vcpuNeeded / (memoryMb / LAMBDA_MB_PER_VCPU) };
  });
  return {
    tasks: run.tasks,
    medianSolveMs: run.medianMs,
    pollRounds: polling.rounds,
    pollCpuMsPerRound: perRound,
    pollCpuMsPerRequest: perRequest,
    recorded: run.recorded,
    recordCpuMsPerTask: perTask,
    plans,
  };
}

async function main(): Promise<void> {
  const program = new Command('bench:watch-cpu')
    .description(
      "The governor's watch: CPU per poll round and per recorded task, and the task rate a governor's memory carries",
    )
    .option('--tasks <n>', 'parked tasks', integer(1, 10_000), 400)
    .option(
      '--median-ms <ms>',
      "the simulator's median solve, ms (parking must finish well before it)",
      integer(1, 600_000),
      40_000,
    )
    .option('--json', 'print one JSON object');
  program.parse();
  const flags = program.opts<{ tasks: number; medianMs: number; json?: boolean }>();
  const figures = await measure(flags.tasks, flags.medianMs);
  if (flags.json) {
    process.stdout.write(`${JSON.stringify(figures, null, 2)}\n`);
    return;
  }
  const lines = [
    `${figures.recorded} of ${figures.tasks} parked tasks recorded by the watch`,
    `poll round, nothing ready: ${figures.pollCpuMsPerRound.toFixed(2)} ms CPU a round, ${figures.pollCpuMsPerRequest.toFixed(2)} ms per solver request (${figures.pollRounds} rounds; the sizing assumes ${WATCH_CPU.requestMs})`,
    `recording: ${figures.recordCpuMsPerTask.toFixed(2)} ms CPU per task: the lease, a result request, the record, the event, the delete (the sizing assumes ${WATCH_CPU.recordMs})`,
    '',
    `Full plans of ${WATCH_CPU.solveSeconds}-second solves, at the figures measured:`,
    '',
    '| plan threads | vCPU the watch needs | governor memory (stack) | share of its CPU used |',
    '|---|---|---|---|',
    ...figures.plans.map(
      (p) =>
        `| ${p.planThreads} | ${p.vcpuNeeded.toFixed(3)} | ${p.memoryMb} MB | ${(p.shareUsed * 100).toFixed(0)} % |`,
    ),
  ];
  process.stdout.write(`${lines.join('\n')}\n`);
}

await main();
