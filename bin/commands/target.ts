/**
 * Which fleet a command talks to: a running local stack (`--local`), any AWS-compatible
 * endpoint (`--endpoint` or AWS_ENDPOINT_URL), or AWS itself. Resource names follow the prefix,
 * exactly as the stack and the local runtime name them.
 */
import { failureText } from '../../functions/core/helpers/printable.js';
import { GetQueueAttributesCommand, GetQueueUrlCommand } from '@aws-sdk/client-sqs';
import { createAwsClients, type AwsClients } from '../../functions/adapters/aws-clients.js';
import { resolveSettings, type FleetSettings } from '../../functions/core/settings.js';
import { readLocalStackFile, type LocalStackInfo } from '../../local/stack-file.js';
import { type Command, Option } from 'commander';
import { httpUrl } from '../../local/cli-values.js';

export interface TargetOptions {
  local?: boolean;
  endpoint?: string;
  prefix?: string;
  region?: string;
}

export interface FleetTarget {
  kind: 'local' | 'endpoint' | 'aws';
  clients: AwsClients;
  settings: FleetSettings;
  queueUrls: { normal: string; high: string | undefined; dlq: string };
  /** The reports queue, when the fleet has one (`captcha-fleet report`). */
  reportsQueueUrl: string | undefined;
  queueArns: { dlq: string | undefined };
  tables: { results: string; governor: string };
  local: LocalStackInfo | undefined;
  /** Where the fleet lives, for people. */
  description: string;
}

/** Add the shared target flags to a command. */
export function withTargetOptions(command: Command): Command {
  // An endpoint is checked as `start` checks it, and refused beside --local, which it does not
  // reach (before, `--endpoint bogus` failed later as a missing queue, and beside --local was ignored).
  return command
    .option('--local', 'talk to the local stack started by `npm start -- --serve`')
    .addOption(
      new Option('--endpoint <url>', 'an AWS-compatible endpoint (default: AWS_ENDPOINT_URL, else AWS)')
        .argParser(httpUrl)
        .conflicts('local'),
    )
    .option('--prefix <prefix>', 'resource name prefix the fleet was deployed with', 'captcha-fleet')
    .option('--region <region>', 'AWS region (default: AWS_REGION)');
}

export async function resolveTarget(options: TargetOptions): Promise<FleetTarget> {
  if (options.local) {
    const local = readLocalStackFile({
      prefix: options.prefix,
      hints: {
        otherwise: 'or drop --local to reach a deployed fleet (--prefix, --region, --endpoint)',
        choosePrefix: (prefix) => `Give --prefix ${prefix}`,
      },
    });
    const clients = createAwsClients({
      sqsEndpoint: local.sqsEndpoint,
      dynamoEndpoint: local.dynamoEndpoint,
      region: options.region,
    });
    return {
      kind: 'local',
      clients,
      settings: resolveSettings({ prefix: local.prefix }),
      queueUrls: local.queueUrls,
      reportsQueueUrl: local.reportsQueueUrl,
      queueArns: { dlq: undefined },
      tables: local.tables,
      local,
      description: `local stack (pid ${local.pid})`,
    };
  }
  const endpoint = options.endpoint ?? process.env.AWS_ENDPOINT_URL;
  const settings = resolveSettings({ prefix: options.prefix ?? 'captcha-fleet' });
  const clients = createAwsClients({ endpoint, region: options.region });
  const url = async (name: string, required: boolean) => {
    try {
      return (await clients.sqs.send(new GetQueueUrlCommand({ QueueName: name }))).QueueUrl;
    } catch (error) {
      if (!required) return undefined;
      if ((error as Error).name === 'CredentialsProviderError') {
        throw new Error(
          `no AWS credentials found to reach the fleet in AWS ${clients.region}. Configure them (aws configure, AWS_PROFILE, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY), or use --local for a stack started with \`npm start -- --serve\`.`,
        );
      }
      // Only SQS's answer that the queue is not there means a wrong prefix or region: a refused or
      // failed connection said "not found" too and hid its cause (ECONNREFUSED).
      const where = endpoint ?? `AWS ${clients.region}`;
      const e = error as { name?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number } };
      const missing = /QueueDoesNotExist|NonExistentQueue/.test(`${e.name} ${e.code ?? ''}`);
      if (!missing)
        throw new Error(
          `could not reach SQS at ${where} to find queue ${name}: ${failureText(error)}. Check the endpoint and the network${endpoint === undefined ? ', and the credentials' : ''}, or use --local for a local stack.`,
        );
      throw new Error(
        `queue ${name} not found at ${where} (${e.name}). Check --prefix and --region, or use --local for a local stack.`,
      );
    }
  };
  const normal = (await url(settings.queueNames.normal, true)) as string;
  const dlq = (await url(settings.queueNames.dlq, true)) as string;
  const high = await url(settings.queueNames.high, false);
  const reports = await url(settings.queueNames.reports, false);
  const dlqArn = (
    await clients.sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlq, AttributeNames: ['QueueArn'] }))
  ).Attributes?.QueueArn;
  return {
    kind: endpoint ? 'endpoint' : 'aws',
    clients,
    settings,
    queueUrls: { normal, high, dlq },
    reportsQueueUrl: reports,
    queueArns: { dlq: dlqArn },
    tables: settings.tableNames,
    local: undefined,
    description: endpoint ? `endpoint ${endpoint}` : `AWS ${clients.region}`,
  };
}
