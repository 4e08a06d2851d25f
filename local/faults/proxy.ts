/**
 * The fault proxy: a small HTTP server between the fleet and its AWS endpoints (the embedded
 * emulators, moto_server, LocalStack) that forwards every request and, inside the windows of a
 * fault plan (plan.ts), hurts some of them the way DynamoDB and SQS do on a bad day:
 * throttling errors, 5xx answers, reset connections, slow answers, and writes that commit while
 * their answer is lost. Both services speak JSON over POST with an `X-Amz-Target` header
 * (`DynamoDB_20120810.PutItem`, `AmazonSQS.SendMessage`), which tells the proxy the service, the
 * operation and where to forward. Written on node:http and undici: the project's own, so its
 * tests and the benchmark need nothing else.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Pool, type Dispatcher } from 'undici';
import { sleep } from '../../functions/core/helpers/time.js';
import { type Random, stream } from '../solver-sim/prng.js';
import type { FaultKind, FaultPlan, FaultService, FaultWindow } from './plan.js';

/** Where each service's requests go. */
export type FaultUpstreams = Record<FaultService, string>;

/** Counts of one service since the proxy started. */
export interface FaultServiceStats {
  requests: number;
  /** Requests hurt, by fault kind. */
  injected: Record<FaultKind, number>;
}

export type FaultStats = Record<FaultService, FaultServiceStats>;

export interface FaultProxyOptions {
  upstreams: FaultUpstreams;
  plan: FaultPlan;
  /** Seed of the per-request draws. @default plan.seed ?? 1 */
  seed?: number;
  clock?: () => number;
  host?: string;
  /** Told of each request hurt, with its body (the accounting reads which letters lost their answer). */
  onInjected?: (injected: { service: FaultService; operation: string; kind: FaultKind; body: string }) => void;
}

/** A running proxy. */
export interface FaultProxy {
  /** The proxy's URL: give it to the fleet's clients as their endpoint. */
  readonly url: string;
  /** Start the plan's clock: windows count from now. Until then every request passes untouched. */
  arm(): void;
  /** ms since `arm()`, or undefined before it. */
  elapsedMs(): number | undefined;
  stats(): FaultStats;
  readonly plan: FaultPlan;
  close(): Promise<void>;
}

/** Operations that change state (or, for ReceiveMessage, hide messages and count a receive). */
const COMMITTING = new Set([
  'PutItem',
  'UpdateItem',
  'DeleteItem',
  'BatchWriteItem',
  'TransactWriteItems',
  'SendMessage',
  'SendMessageBatch',
  'DeleteMessage',
  'DeleteMessageBatch',
  'ChangeMessageVisibility',
  'ChangeMessageVisibilityBatch',
  'ReceiveMessage',
]);

/** Headers that belong to one hop, not forwarded either way. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host', 'upgrade']);

const THROTTLE_BODY: Record<FaultService, { type: string; message: string }> = {
  dynamodb: {
    type: 'com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException',
    message: 'The level of configured provisioned throughput for the table was exceeded.',
  },
  sqs: { type: 'com.amazonaws.sqs#ThrottlingException', message: 'Rate exceeded' },
};

function emptyStats(): FaultServiceStats {
  return { requests: 0, injected: { throttle: 0, unavailable: 0, reset: 0, slow: 0, lost_commit: 0 } };
}

/** The service and operation of a request, from its `X-Amz-Target`. */
export function targetOf(request: Pick<IncomingMessage, 'headers'>): { service: FaultService; operation: string } {
  const target = String(request.headers['x-amz-target'] ?? '');
  const operation = target.slice(target.indexOf('.') + 1);
  return { service: target.startsWith('DynamoDB') ? 'dynamodb' : 'sqs', operation };
}

/** Start a proxy on an ephemeral port. */
export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const clock = options.clock ?? Date.now;
  const random = stream(options.seed ?? options.plan.seed ?? 1, 'fault-proxy');
  const pools: Record<FaultService, Pool> = {
    dynamodb: new Pool(new URL(options.upstreams.dynamodb).origin, { connections: 64 }),
    sqs: new Pool(new URL(options.upstreams.sqs).origin, { connections: 64 }),
  };
  const stats: FaultStats = { dynamodb: emptyStats(), sqs: emptyStats() };
  let armedAt: number | undefined;
  const used = new Map<FaultWindow, number>();
  const applies = (w: FaultWindow, service: FaultService, operation: string, body: string, at: number) =>
    w.service === service &&
    at >= w.startMs &&
    at < w.startMs + w.durationMs &&
    (w.kind !== 'lost_commit' || COMMITTING.has(operation)) &&
    (w.operations === undefined || w.operations.includes(operation)) &&
    (w.bodyIncludes === undefined || body.includes(w.bodyIncludes)) &&
    (w.count === undefined || (used.get(w) ?? 0) < w.count);
  const active = (service: FaultService, operation: string, body: string): FaultWindow | undefined => {
    if (armedAt === undefined) return undefined;
    const at = clock() - armedAt;
    // Overlapping windows each get their own draw, visited in a fresh random order per request so
    // none shadows another (a 5xx window at rate 1 listed first would otherwise hide every window
    // under it): the first that hits wins.
    const open = options.plan.windows.filter((w) => applies(w, service, operation, body, at));
    for (let i = open.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [open[i], open[j]] = [open[j] as FaultWindow, open[i] as FaultWindow];
    }
    const hit = open.find((w) => random() < w.rate);
    if (hit !== undefined) used.set(hit, (used.get(hit) ?? 0) + 1);
    return hit;
  };
  const server: Server = createServer((request, response) => {
    void handle(request, response).catch(() => {
      if (!response.headersSent) response.writeHead(502).end();
      else response.destroy();
    });
  });
  const handle = async (request: IncomingMessage, response: ServerResponse) => {
    const body = await readBody(request);
    const { service, operation } = targetOf(request);
    stats[service].requests++;
    const text = body.toString('utf8');
    const fault = active(service, operation, text);
    if (fault !== undefined) {
      stats[service].injected[fault.kind]++;
      options.onInjected?.({ service, operation, kind: fault.kind, body: text });
    }
    if (fault?.kind === 'reset') return void request.socket.destroy();
    if (fault?.kind === 'throttle') return answerError(response, 400, service, THROTTLE_BODY[service]);
    if (fault?.kind === 'unavailable')
      return answerError(response, fault.status ?? 503, service, {
        type: fault.status === 500 ? 'InternalServerError' : 'ServiceUnavailable',
        message: 'injected by the fault proxy',
      });
    const answer = await forward(pools[service], request, body);
    if (fault?.kind === 'lost_commit') {
      // Done by the service; the caller never hears it (the SDK retries into a failed condition).
      await answer.body.dump();
      return void request.socket.destroy();
    }
    if (fault?.kind === 'slow') await sleep(drawDelay(random, fault));
    const payload = Buffer.from(await answer.body.arrayBuffer());
    const headers: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(answer.headers))
      if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = value;
    response.writeHead(answer.statusCode, { ...headers, 'content-length': String(payload.length) });
    response.end(payload);
  };
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  return {
    url: `http://${options.host ?? '127.0.0.1'}:${address.port}`,
    plan: options.plan,
    arm() {
      armedAt ??= clock();
    },
    elapsedMs: () => (armedAt === undefined ? undefined : clock() - armedAt),
    stats: () => structuredClone(stats),
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await Promise.all([pools.dynamodb.close(), pools.sqs.close()]);
    },
  };
}

async function readBody(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function forward(pool: Pool, request: IncomingMessage, body: Buffer): Promise<Dispatcher.ResponseData> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(request.headers))
    if (value !== undefined && !HOP_BY_HOP.has(name)) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  return pool.request({
    path: request.url ?? '/',
    method: (request.method ?? 'POST') as Dispatcher.HttpMethod,
    headers,
    body,
  });
}

/** An AWS JSON-protocol error, as both services answer it (SQS also names it in a header). */
function answerError(
  response: ServerResponse,
  status: number,
  service: FaultService,
  error: { type: string; message: string },
): void {
  const payload = JSON.stringify({ __type: error.type, message: error.message });
  const code = error.type.slice(error.type.indexOf('#') + 1);
  response.writeHead(status, {
    'content-type': 'application/x-amz-json-1.0',
    'content-length': String(Buffer.byteLength(payload)),
    'x-amzn-requestid': `fault-${Math.random().toString(36).slice(2)}`,
    ...(service === 'sqs' ? { 'x-amzn-query-error': `${code};${status >= 500 ? 'Receiver' : 'Sender'}` } : {}),
  });
  response.end(payload);
}

function drawDelay(random: Random, window: FaultWindow): number {
  const [low, high] = window.delayMs ?? [500, 2_000];
  return Math.round(low + random() * (high - low));
}
