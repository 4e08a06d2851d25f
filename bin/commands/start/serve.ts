/**
 * `start --serve`: after the workload, keep the stack up, write its stack file (with the
 * control URL for `governor --once --local`), print how to use it, and report until a stop.
 */
import type { TickRecord } from '../../../functions/governor/loop.js';
import { METRICS } from '../../../functions/core/metric-names.js';
import { startControlServer } from '../../../local/control-server.js';
import { handedBack } from '../../../local/demo/summary.js';
import type { LocalStack } from '../../../local/runtime.js';
import { removeLocalStackFile, writeLocalStackFile } from '../../../local/stack-file.js';

/** Write the stack file (with the control URL for `governor --once --local`) and serve until a stop. */
export async function serveStack(
  stack: LocalStack,
  latestTick: () => TickRecord | undefined,
  signal: AbortSignal,
  io: { human: NodeJS.WriteStream; stderr: NodeJS.WriteStream },
): Promise<void> {
  const control = await startControlServer(stack.governor, latestTick);
  const file = writeLocalStackFile({
    version: 1,
    pid: process.pid,
    startedAt: Date.now(),
    prefix: stack.settings.prefix,
    sqsEndpoint: stack.endpoints.sqs,
    dynamoEndpoint: stack.endpoints.dynamo,
    solverUrl: stack.endpoints.solver,
    controlUrl: control.url,
    queueUrls: stack.resources.queueUrls,
    reportsQueueUrl: stack.resources.reportQueueUrls.reports,
    tables: stack.resources.tables,
  });
  io.human.write(serveInstructions(stack, file));
  try {
    await serveUntil(stack, signal, io.stderr);
  } finally {
    removeLocalStackFile(file);
    await control.close();
  }
}

function serveInstructions(stack: LocalStack, stackFile: string): string {
  const { queueUrls, tables } = stack.resources;
  // Any credentials do for an emulator; the AWS CLI needs some, and a region as a flag (v1 ignores AWS_REGION).
  const env = 'AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local';
  const region = `--region ${stack.clients.region}`;
  const task = '{"method":"turnstile","params":{"sitekey":"0x4AAAAAAAexample","pageurl":"https://example.com/login"}}';
  // The package's own producer entry, pointed at this stack by its stack file.
  // A checkout runs this file as TypeScript (tsx is there); the installed package runs compiled JS.
  const runner = import.meta.url.endsWith('.ts') ? 'npx tsx' : 'node --input-type=module';
  const node =
    `${runner} -e 'import { createProducer, localStack } from "captcha-fleet/producer"; ` +
    `createProducer(localStack({ stackFile: ${JSON.stringify(stackFile)} })).solve(${task}).then((r) => console.log(r.status, r.answer));'`;
  return (
    `\nServing until Ctrl-C (details for other commands in ${stackFile}).\n` +
    `  SQS        ${stack.endpoints.sqs}\n` +
    `  DynamoDB   ${stack.endpoints.dynamo}\n` +
    `  solver     ${stack.endpoints.solver} (simulator; GET /stats for its counters)\n` +
    (stack.overflow
      ? `  overflow   ${stack.overflow.settings.baseUrl} (the overflow provider's simulator; GET /stats)\n`
      : '') +
    `  queues     normal ${queueUrls.normal}\n             high   ${queueUrls.high}\n             DLQ    ${queueUrls.dlq}\n` +
    `  results    table ${tables.results}\n\n` +
    `Send a task with the AWS CLI:\n  ${env} aws sqs send-message ${region} --endpoint-url ${stack.endpoints.sqs} --queue-url ${queueUrls.normal} --message-body '{"id":"my-task-1",${task.slice(1)}'\n` +
    `Read its result:\n  ${env} aws dynamodb get-item ${region} --endpoint-url ${stack.endpoints.dynamo} --table-name ${tables.results} --consistent-read --key '{"taskId":{"S":"my-task-1"}}'\n` +
    `Or submit and wait from Node (here, or in a project that installed captcha-fleet):\n  ${node}\n\n`
  );
}

/** Keep serving; a status line when something changed, at most every 5 s. */
async function serveUntil(stack: LocalStack, signal: AbortSignal, stream: NodeJS.WriteStream): Promise<void> {
  let last = '';
  while (!signal.aborted) {
    await new Promise<void>((resolve) => {
      const onAbort = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      }, 5_000);
      signal.addEventListener('abort', onAbort, { once: true });
    });
    const p = stack.pollerStats();
    const sim = stack.simulator.stats();
    const spill = stack.overflow?.simulator.stats();
    // A parked message is a batch item failure too (its visibility set by the parking): handed
    // back are the others, as the summary counts them (it said "46 retried" where the summary said 0).
    const back = handedBack({ retriedItems: p.failedItems, parked: stack.metrics.total(METRICS.parked).sum });
    const line =
      `served: ${p.invocations} invocations · ${p.deleted} acknowledged · ${back} handed back · in flight ${p.inFlight} · solver solved ${sim.solved}, peak ${sim.peakThreads}/${sim.planThreads} threads` +
      (spill ? ` · overflow solved ${spill.solved}, $${(spill.balanceStart - spill.balance).toFixed(3)} spent` : '');
    if (line !== last) stream.write(`${line}\n`);
    last = line;
  }
  stream.write('stopping…\n');
}
