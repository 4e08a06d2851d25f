/**
 * Embedded AWS emulators for the local runtime and the tests: fauxqs (SQS) and dynalite
 * (DynamoDB), both in this process on 127.0.0.1 and an ephemeral port.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { buildApp } from 'fauxqs';
import dynalite from 'dynalite';

export interface Emulators {
  sqsEndpoint: string;
  dynamoEndpoint: string;
  stop(): Promise<void>;
}

/** Start both emulators. Call `stop()` when done (tests: in afterAll). */
export async function startEmulators(options: { host?: string } = {}): Promise<Emulators> {
  const host = options.host ?? '127.0.0.1';
  // buildApp + our own listen: fauxqs's start helper binds every interface.
  const sqsApp = buildApp({ logger: false, host });
  await sqsApp.listen({ port: 0, host });
  const sqsPort = (sqsApp.server.address() as AddressInfo).port;

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
      await sqsApp.close();
      await new Promise<void>((resolve) => {
        dynamoServer.close(() => resolve());
        dynamoServer.closeAllConnections?.();
      });
    },
  };
}
