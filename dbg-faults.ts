import { buildWorkload, newRunId, runDemo } from './local/demo.js';
import { drawFaultMix } from './local/faults/plan.js';
import { startLocalStack } from './local/runtime.js';
const seed = Number(process.argv[2] ?? 1);
const plan = drawFaultMix(seed, { horizonMs: 60_000, windows: 5 });
const stack = await startLocalStack({
  seed,
  faults: plan,
  logLevel: 'info',
  config: { planThreads: 20 },
  solver: { seed, planThreads: 20, medianMs: 400, transientErrorRate: 0.005, unsolvableRate: 0.01 },
});
const items = buildWorkload({ tasks: 200, malformed: 10, seed, runId: newRunId() });
const s = await runDemo(stack, items, { rate: 10, maxDurationMs: 400_000 });
await stack.stop({ graceMs: 2000 });
process.stderr.write(
  JSON.stringify({
    paidTwice: s.paidTwice,
    validInDlq: s.validInDlq,
    lost: s.lost,
    unsent: s.unsent,
    na: s.solvedNotAnnounced,
  }) + '\n',
);
process.exit(0);
