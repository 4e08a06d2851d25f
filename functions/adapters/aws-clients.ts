/**
 * AWS SDK v3 clients, configured once. An endpoint (an emulator, or `AWS_ENDPOINT_URL`) gets
 * dummy credentials when none are set, so the local runtime needs no AWS account.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';

export interface ClientOptions {
  /** One endpoint for every service (e.g. moto_server, LocalStack). */
  endpoint?: string;
  /** Per-service endpoints (the embedded emulators listen on different ports). */
  sqsEndpoint?: string;
  dynamoEndpoint?: string;
  region?: string;
}

export interface AwsClients {
  sqs: SQSClient;
  dynamo: DynamoDBClient;
  documents: DynamoDBDocumentClient;
  region: string;
  endpoint: string | undefined;
}

export function baseClientConfig(endpoint: string | undefined, region: string) {
  const local = endpoint !== undefined;
  const hasCredentials = process.env.AWS_ACCESS_KEY_ID !== undefined || process.env.AWS_PROFILE !== undefined;
  return {
    region,
    ...(endpoint ? { endpoint } : {}),
    ...(local && !hasCredentials ? { credentials: { accessKeyId: 'local', secretAccessKey: 'local' } } : {}),
    maxAttempts: 3,
    // Bound every call: the consumer keeps 20 s to claim and record around a solve, and the
    // governor must finish its ticks before its timeout. Long polls of 20 s would need more;
    // this code polls for at most a few seconds.
    // `throwOnRequestTimeout`: without it this SDK only logs a warning past `requestTimeout` and
    // keeps waiting, so a store that stops answering would hold an invocation to its end.
    requestHandler: { requestTimeout: 10_000, connectionTimeout: 3_000, throwOnRequestTimeout: true },
  };
}

/** The SDK's switch for its notice that its releases after January 2027 will need Node.js 22. */
const NODE_VERSION_WARNING = 'AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED';

/**
 * Build clients without the SDK's Node.js-version notice. It is about SDK versions published
 * after January 2027; this package pins its SDK versions, which keep working where they run, so a
 * producer's output must not carry it. The variable is set only while these clients are built and
 * restored after. (The SDK prints the notice once per process, at the first client built with it
 * on: a client the program builds later does not print it either.)
 */
function withoutNodeVersionNotice<T>(build: () => T): T {
  const previous = process.env[NODE_VERSION_WARNING];
  process.env[NODE_VERSION_WARNING] = 'true';
  try {
    return build();
  } finally {
    if (previous === undefined) delete process.env[NODE_VERSION_WARNING];
    else process.env[NODE_VERSION_WARNING] = previous;
  }
}

/** SQS and DynamoDB clients for AWS, or for the endpoints given (dummy credentials when none are set). */
export function createAwsClients(options: ClientOptions = {}): AwsClients {
  const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
  const endpoint = options.endpoint;
  const [sqs, dynamo] = withoutNodeVersionNotice((): [SQSClient, DynamoDBClient] => [
    new SQSClient(baseClientConfig(options.sqsEndpoint ?? endpoint, region)),
    new DynamoDBClient(baseClientConfig(options.dynamoEndpoint ?? endpoint, region)),
  ]);
  const documents = DynamoDBDocumentClient.from(dynamo, { marshallOptions: { removeUndefinedValues: true } });
  return { sqs, dynamo, documents, region, endpoint };
}
