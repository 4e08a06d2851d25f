/**
 * Embedded AWS emulators for the local runtime and the tests: fauxqs (SQS) and dynalite
 * (DynamoDB), both in this process on 127.0.0.1 and an ephemeral port.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { type BuildAppOptions, buildApp } from 'fauxqs';
import dynalite from 'dynalite';

export interface Emulators {
  sqsEndpoint: string;
  dynamoEndpoint: string;
  stop(): Promise<void>;
}

/** How often fauxqs's message timers are run (see `fauxqsStores`), ms: well within SQS's own second. */
export const SQS_TIMER_TICK_MS = 100;

/** fauxqs's stores, built here rather than inside `buildApp` so the SQS store's timers can be run. */
interface FauxqsStores {
  sqsStore: { processAllTimers(): void };
  snsStore: unknown;
  s3Store: unknown;
}

/**
 * SQS makes a delayed message visible when its delay ends, and an in-flight one when its
 * visibility timeout ends, whether or not anyone receives from the queue. fauxqs does both only
 * when a receive comes to that queue (or while one long-polls it), and its GetQueueAttributes
 * counts what it has not moved yet. So on a queue whose mapping is disabled a delayed message
 * stayed "delayed" for good, out of the visible count the governor enables a lane on: a
 * high-priority task whose message went back as a delayed copy waited in the disabled high lane
 * until the run ended (bench:faults, 1–2 tasks "still queued" at the cut-off in about one run in
 * ten). The stores are built here (fauxqs does not export them, so they are loaded from beside its
 * entry point) and their timers run every `SQS_TIMER_TICK_MS`, as SQS's run on their own.
 */
async function fauxqsStores(): Promise<FauxqsStores> {
  const entry = import.meta.resolve('fauxqs');
  const load = async <T>(path: string, name: string): Promise<new () => T> =>
    ((await import(new URL(path, entry).href)) as Record<string, new () => T>)[name] as new () => T;
  const [SqsStore, SnsStore, S3Store] = await Promise.all([
    load<FauxqsStores['sqsStore']>('./sqs/sqsStore.js', 'SqsStore'),
    load<unknown>('./sns/snsStore.js', 'SnsStore'),
    load<unknown>('./s3/s3Store.js', 'S3Store'),
  ]);
  return { sqsStore: new SqsStore(), snsStore: new SnsStore(), s3Store: new S3Store() };
}

/** Start both emulators. Call `stop()` when done (tests: in afterAll). */
export async function startEmulators(options: { host?: string } = {}): Promise<Emulators> {
  const host = options.host ?? '127.0.0.1';
  const stores = await fauxqsStores();
  // buildApp + our own listen: fauxqs's start helper binds every interface.
  const sqsApp = buildApp({ logger: false, host, stores: stores as unknown as BuildAppOptions['stores'] });
  await sqsApp.listen({ port: 0, host });
  const sqsPort = (sqsApp.server.address() as AddressInfo).port;
  const timers = setInterval(() => stores.sqsStore.processAllTimers(), SQS_TIMER_TICK_MS);
  timers.unref();

  const dynamoServer = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 }) as Server;
  await new Promise<void>((resolve, reject) => {
    dynamoServer.once('error', reject);
    dynamoServer.listen(0, host, () => resolve());
  });
  const dynamoPort = (dynamoServer.address() as AddressInfo).port;

  return {
    sqsEndpoint: `http://${host}:${sqsPort}`,
    dynamoEndpoint: `http://${host}:${dynamoPort}`,
    async stop() {
      clearInterval(timers);
      await sqsApp.close();
      await new Promise<void>((resolve) => {
        dynamoServer.close(() => resolve());
        dynamoServer.closeAllConnections?.();
      });
    },
  };
}
