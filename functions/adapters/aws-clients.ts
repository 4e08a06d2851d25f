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

export function createAwsClients(options: ClientOptions = {}): AwsClients {
  const region = options.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
  const endpoint = options.endpoint;
  const sqs = new SQSClient(baseClientConfig(options.sqsEndpoint ?? endpoint, region));
  const dynamo = new DynamoDBClient(baseClientConfig(options.dynamoEndpoint ?? endpoint, region));
  const documents = DynamoDBDocumentClient.from(dynamo, { marshallOptions: { removeUndefinedValues: true } });
  return { sqs, dynamo, documents, region, endpoint };
}
