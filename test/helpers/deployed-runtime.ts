/**
 * The deployed consumer run the way Lambda would run it, where nothing can run a function (moto
 * has no Docker here): its synthesized bundle in warm child processes on the Lambda's Node.js,
 * with the deployed function's own environment, fed by the local runtime's pollers — one per
 * deployed event source mapping — each reading its mapping's MaximumConcurrency and State from the
 * deployed control plane, so what the governor writes there is what throttles them.
 */
import { type ChildProcess, fork } from 'node:child_process';
import { cpSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  GetEventSourceMappingCommand,
  type LambdaClient,
  ListEventSourceMappingsCommand,
} from '@aws-sdk/client-lambda';
import { GetQueueUrlCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { createPoller, type Poller } from '../../local/poller.js';

const WARM_BOOTSTRAP = `// A warm execution environment: load the handler once, then one invocation at a time.
const mod = await import(process.argv[2]);
process.on('message', async ({ id, event, timeoutMs }) => {
  const endsAt = Date.now() + timeoutMs;
  const name = process.env.AWS_LAMBDA_FUNCTION_NAME;
  const context = {
    callbackWaitsForEmptyEventLoop: false, functionName: name, functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:aws:lambda:' + process.env.AWS_REGION + ':123456789012:function:' + name,
    memoryLimitInMB: '256', awsRequestId: 'warm-' + id, logGroupName: '/aws/lambda/' + name, logStreamName: 'warm',
    getRemainingTimeInMillis: () => Math.max(0, endsAt - Date.now()),
  };
  try {
    process.send({ id, response: await mod.handler(event, context) });
  } catch (error) {
    process.send({ id, error: String(error && error.stack ? error.stack : error) });
  }
});
process.send({ ready: true });
`;

/** One function's warm environments: a child per invocation running at once, reused when idle. */
export class WarmFunction {
  readonly #idle: ChildProcess[] = [];
  readonly #all: ChildProcess[] = [];
  readonly #task: string;
  #next = 0;
  /** What the environments printed (the handler's logs), for a failure's message. */
  output = '';

  constructor(
    private readonly options: {
      dir: string;
      assetDir: string;
      node: string;
      env: NodeJS.ProcessEnv;
      timeoutMs: number;
    },
  ) {
    this.#task = join(options.dir, 'task');
    mkdirSync(this.#task, { recursive: true });
    cpSync(options.assetDir, this.#task, { recursive: true });
    writeFileSync(join(options.dir, 'warm.mjs'), WARM_BOOTSTRAP);
  }

  async #environment(): Promise<ChildProcess> {
    const idle = this.#idle.pop();
    if (idle !== undefined) return idle;
    const child = fork(join(this.options.dir, 'warm.mjs'), [join(this.#task, 'index.mjs')], {
      execPath: this.options.node,
      cwd: this.#task,
      env: this.options.env,
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    child.stdout?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (this.output += chunk.toString()));
    this.#all.push(child);
    await new Promise<void>((resolve, reject) => {
      child.once('message', () => resolve());
      child.once('exit', (code) => reject(new Error(`the bundle's environment exited (${code}):\n${this.output}`)));
    });
    return child;
  }

  /** Invoke the handler once with `event`, in an idle environment or a new one. */
  async invoke(event: SQSEvent): Promise<SQSBatchResponse | undefined> {
    const child = await this.#environment();
    const id = this.#next++;
    try {
      return await new Promise((resolve, reject) => {
        const onMessage = (message: { id?: number; response?: SQSBatchResponse; error?: string }) => {
          if (message.id !== id) return;
          child.off('message', onMessage);
          if (message.error !== undefined) reject(new Error(message.error));
          else resolve(message.response);
        };
        child.on('message', onMessage);
        child.send({ id, event, timeoutMs: this.options.timeoutMs });
      });
    } finally {
      this.#idle.push(child);
    }
  }

  close(): void {
    for (const child of this.#all) child.kill('SIGKILL');
  }
}

/** The pollers of a deployed function's mappings, kept in step with the control plane. */
export interface DeployedPollers {
  /** By queue name. */
  pollers: Record<string, Poller>;
  stop(): Promise<void>;
}

/** Start a poller for each of `functionName`'s deployed mappings, and follow each mapping's state every `everyMs`. */
export async function startDeployedPollers(options: {
  lambda: LambdaClient;
  sqs: SQSClient;
  region: string;
  functionName: string;
  invoke: (event: SQSEvent) => Promise<SQSBatchResponse | undefined>;
  functionTimeoutMs: number;
  everyMs?: number;
}): Promise<DeployedPollers> {
  const { lambda, sqs } = options;
  const listed = await lambda.send(new ListEventSourceMappingsCommand({ FunctionName: options.functionName }));
  const pollers: Record<string, Poller> = {};
  const byUuid = new Map<string, Poller>();
  for (const mapping of listed.EventSourceMappings ?? []) {
    const queueName = mapping.EventSourceArn?.split(':').pop() ?? '';
    const queueUrl = (await sqs.send(new GetQueueUrlCommand({ QueueName: queueName }))).QueueUrl ?? '';
    const poller = createPoller({
      sqs,
      queueUrl,
      queueArn: mapping.EventSourceArn,
      region: options.region,
      handler: (event) => options.invoke(event),
      batchSize: mapping.BatchSize ?? 1,
      maxConcurrency: mapping.ScalingConfig?.MaximumConcurrency ?? 2,
      enabled: mapping.State === 'Enabled',
      functionTimeoutMs: options.functionTimeoutMs,
      functionName: options.functionName,
    });
    await poller.start();
    pollers[queueName] = poller;
    byUuid.set(mapping.UUID ?? '', poller);
  }
  let following = true;
  const follow = (async () => {
    while (following) {
      for (const [uuid, poller] of byUuid) {
        const mapping = await lambda.send(new GetEventSourceMappingCommand({ UUID: uuid }));
        const max = mapping.ScalingConfig?.MaximumConcurrency;
        if (max !== undefined && max !== poller.maxConcurrency) poller.setMaxConcurrency(max);
        const enabled = mapping.State === 'Enabled' || mapping.State === 'Enabling';
        if (enabled !== poller.enabled) poller.setEnabled(enabled);
      }
      await new Promise((resolve) => setTimeout(resolve, options.everyMs ?? 300));
    }
  })();
  return {
    pollers,
    async stop() {
      following = false;
      await follow;
      await Promise.all(Object.values(pollers).map((poller) => poller.stop({ graceMs: 5_000 })));
    },
  };
}
