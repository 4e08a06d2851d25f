/**
 * The demo of `npm start`: the workload sent in a burst or at a rate, a watch until every task
 * has a result, and an honest account of where each one ended: a terminal record, the DLQ,
 * still queued — or lost. One concern a module, under local/demo/: the workload
 * (workload.ts), the sender (send.ts), the watch (watch.ts), the queues' counts (queues.ts), the
 * results' records (records.ts), DLQ inspection (dlq.ts), the accounting (accounting.ts) and
 * the summary's type (summary.ts).
 */
import type { LocalStack } from './runtime.js';
import { summarise } from './demo/accounting.js';
import type { DemoSummary } from './demo/summary.js';
import { type DemoOptions, watchDemo } from './demo/watch.js';
import type { DemoItem } from './demo/workload.js';

export { dlqTaskId } from './demo/dlq.js';
export type { DemoSummary, LaneSummary, OverflowSummary } from './demo/summary.js';
export type { DemoOptions, DemoProgress, LaneProgress } from './demo/watch.js';
export { buildWorkload, type DemoItem, newRunId, type WorkloadOptions } from './demo/workload.js';

/** Send the workload through the stack and watch it to the end: watch, then summarise. */
export async function runDemo(
  stack: LocalStack,
  items: readonly DemoItem[],
  options: DemoOptions,
): Promise<DemoSummary> {
  const watched = await watchDemo(stack, items, options);
  return summarise(stack, items, watched);
}
