/**
 * moto_server for the optional integration tests: it is on PATH on the project's machines,
 * not on users'. Tests use `describe.skipIf(!HAS_MOTO)` so they skip cleanly without it.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import { CreateEventSourceMappingCommand, CreateFunctionCommand, LambdaClient } from '@aws-sdk/client-lambda';
import { CreateQueueCommand, GetQueueAttributesCommand, SQSClient } from '@aws-sdk/client-sqs';
import { baseClientConfig } from '../../functions/adapters/aws-clients.js';

export const HAS_MOTO = spawnSync('sh', ['-c', 'command -v moto_server'], { encoding: 'utf8' }).status === 0;

export interface MotoServer {
  endpoint: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * Start moto_server on a free loopback port and wait until it answers (30 s at most). The
 * endpoint names the host `127.0.0.1`, or `localhost` when asked (moto reads an S3 URL path-style,
 * as the CDK CLI's TemplateURL is, only when its host contains "localhost").
 */
export async function startMotoServer(
  options: { env?: Record<string, string>; hostName?: '127.0.0.1' | 'localhost' } = {},
): Promise<MotoServer> {
  const port = await freePort();
  const endpoint = `http://${options.hostName ?? '127.0.0.1'}:${port}`;
  const moto: ChildProcess = spawn('moto_server', ['-H', '127.0.0.1', '-p', String(port)], {
    stdio: 'ignore',
    env: { ...process.env, ...options.env },
  });
  const stop = async () => {
    if (moto.exitCode !== null || moto.signalCode !== null) return;
    const exited = new Promise((resolve) => moto.once('exit', resolve));
    moto.kill('SIGTERM');
    await exited;
  };
  const until = Date.now() + 30_000;
  for (;;) {
    try {
      if ((await fetch(`${endpoint}/moto-api/`)).status < 500) return { endpoint, stop };
    } catch {
      // not listening yet
    }
    if (Date.now() > until) {
      await stop();
      throw new Error('moto_server did not start within 30 s');
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * A consumer function on moto's Lambda with an event source mapping per lane (on moto's own SQS
 * queues, `tasks-normal` and `tasks-high`): what the governor's actuator reads and moves. moto
 * checks that the function's role exists in its IAM, so the role is made first (a plain Query
 * call); an empty zip archive is the code (nothing is invoked).
 */
export async function createMotoConsumer(
  endpoint: string,
  options: { functionName?: string; region?: string; enabled?: { normal: boolean; high: boolean } } = {},
): Promise<{
  functionName: string;
  mappingIds: { normal: string; high: string };
  queueUrls: { normal: string; high: string };
}> {
  const region = options.region ?? 'us-east-1';
  const functionName = options.functionName ?? 'consumer';
  const config = baseClientConfig(endpoint, region);
  const lambda = new LambdaClient(config);
  const sqs = new SQSClient(config);
  try {
    const body = new URLSearchParams({
      Action: 'CreateRole',
      Version: '2010-05-08',
      RoleName: 'consumer-role',
      AssumeRolePolicyDocument: JSON.stringify({
        Version: '2012-10-17',
        Statement: [{ Effect: 'Allow', Principal: { Service: 'lambda.amazonaws.com' }, Action: 'sts:AssumeRole' }],
      }),
    });
    const role = await fetch(endpoint, {
      method: 'POST',
      body,
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `AWS4-HMAC-SHA256 Credential=local/20250101/${region}/iam/aws4_request, SignedHeaders=host, Signature=0`,
      },
    });
    if (!role.ok) throw new Error(`moto would not create the consumer's role: HTTP ${role.status}`);
    const emptyZip = Buffer.from([0x50, 0x4b, 0x05, 0x06, ...new Array(18).fill(0)]);
    await lambda.send(
      new CreateFunctionCommand({
        FunctionName: functionName,
        Runtime: 'nodejs20.x',
        Role: 'arn:aws:iam::123456789012:role/consumer-role',
        Handler: 'index.handler',
        Code: { ZipFile: emptyZip },
      }),
    );
    const mappingIds = { normal: '', high: '' };
    const queueUrls = { normal: '', high: '' };
    for (const lane of ['normal', 'high'] as const) {
      const url = (await sqs.send(new CreateQueueCommand({ QueueName: `tasks-${lane}` }))).QueueUrl as string;
      queueUrls[lane] = url;
      const arn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] })))
        .Attributes?.QueueArn;
      const mapping = await lambda.send(
        new CreateEventSourceMappingCommand({
          FunctionName: functionName,
          EventSourceArn: arn,
          BatchSize: 1,
          ScalingConfig: { MaximumConcurrency: 2 },
          Enabled: options.enabled?.[lane] ?? lane === 'normal',
        }),
      );
      mappingIds[lane] = mapping.UUID as string;
    }
    return { functionName, mappingIds, queueUrls };
  } finally {
    lambda.destroy();
    sqs.destroy();
  }
}
