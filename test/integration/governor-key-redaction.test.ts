/**
 * The governor's side of "the solver key never appears in logs": a provider (or a proxy) whose
 * JSON task API error code echoes the key, upper-cased, passes the protocol's code shape. Before,
 * the governor's balance read logged it as `getBalance answered ERROR_<KEY>` and carried it into
 * the decision's reason; its log and its watch's redactor knew no key. Now the client keys such
 * a code out, and the governor's log is redacted with the keys its wiring reads.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import type { LambdaClient } from '@aws-sdk/client-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ENV, parseEnvironment } from '../../functions/core/environment.js';
import { createRedactor } from '../../functions/core/redaction.js';
import { governorLogFrom } from '../../functions/governor/run.js';
import { createGovernorFromEnvironment } from '../../functions/governor/wiring.js';
import { type EmulatorFixture, startEmulatorFixture, type TestFleet } from '../helpers/fleet-fixture.js';

const KEY = 'feedfacecafebeef0123456789abcdef';
const SECRET_ARN = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:captcha-fleet/solver-key-AbCdEf';
/** The key as a hostile answer may carry it: exact, upper-cased, reversed. */
const FORMS = [KEY, KEY.toUpperCase(), [...KEY].reverse().join(''), [...KEY.toUpperCase()].reverse().join('')];

let fixture: EmulatorFixture;
let server: Server;
let solverUrl: string;

beforeAll(async () => {
  fixture = await startEmulatorFixture();
  // Every JSON task API call answered with an error code that is the key, upper-cased.
  server = createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ errorId: 1, errorCode: `ERROR_${KEY.toUpperCase()}` }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  solverUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 60_000);

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  await fixture?.stop();
});

/** The governor Lambda's environment for `fleet`, its solver the echoing server, its key from `key`. */
function governorEnvironment(fleet: TestFleet, key: Record<string, string>) {
  return parseEnvironment({
    [ENV.config]: JSON.stringify({
      prefix: fleet.settings.prefix,
      planThreads: 10,
      tickMs: 10_000,
      solverBaseUrl: solverUrl,
      dialect: 'capmonster',
      solverProtocol: 'create-task',
    }),
    [ENV.normalQueueUrl]: fleet.resources.queueUrls.normal,
    [ENV.highQueueUrl]: fleet.resources.queueUrls.high,
    [ENV.dlqUrl]: fleet.resources.queueUrls.dlq,
    [ENV.resultsTable]: fleet.resources.tables.results,
    [ENV.governorTable]: fleet.resources.tables.governor,
    [ENV.consumerFunctionName]: `${fleet.settings.prefix}-consumer`,
    [ENV.mappingIds]: JSON.stringify({ normal: 'uuid-normal', high: 'uuid-high' }),
    ...key,
  });
}

/** The Lambda control plane and CloudWatch, which no emulator here serves. */
function mocks() {
  const lambda = {
    send: vi.fn(async (command: { constructor: { name: string } }) => {
      if (command.constructor.name === 'GetEventSourceMappingCommand')
        return { State: 'Enabled', ScalingConfig: { MaximumConcurrency: 2 } };
      if (command.constructor.name === 'GetFunctionConcurrencyCommand') return { ReservedConcurrentExecutions: 6 };
      return {};
    }),
  } as unknown as LambdaClient;
  const cloudwatch = {
    send: vi.fn(async (command: { input: { MetricDataQueries?: { Id: string }[] } }) => ({
      MetricDataResults: (command.input.MetricDataQueries ?? []).map((q) => ({ Id: q.Id, Values: [] })),
    })),
  } as unknown as CloudWatchClient;
  return { lambda, cloudwatch };
}

describe('the governor against a provider that echoes the key in its error codes', () => {
  it('logs the balance read as failed with no form of the key, and redacts the key it read from any line', async () => {
    const fleet = await fixture.createFleet({ planThreads: 10 });
    const environment = governorEnvironment(fleet, { [ENV.solverKey]: KEY });
    const lines: string[] = [];
    const sink = (message: unknown, ...attributes: unknown[]) => {
      lines.push(`${String(message)} ${JSON.stringify(attributes[0])}`);
    };
    const redactor = createRedactor();
    // As the handler composes them: the Powertools logger behind the redacting log.
    const log = governorLogFrom({ info: sink, warn: sink, error: sink }, redactor);
    const wired = await createGovernorFromEnvironment({
      environment,
      clients: fleet.clients,
      log,
      redactor,
      ...mocks(),
    });
    const record = await wired.loop.tick();

    const balanceLine = lines.find((line) => line.startsWith('balance read failed'));
    expect(balanceLine, lines.join('\n')).toContain('UNRECOGNIZED_CODE');
    expect(record.signals.balance).toBeUndefined();
    // The wiring taught the redactor the key it read: a line that carried it is redacted too.
    log.warn(`an answer quoting ${KEY.toUpperCase()}`, { nested: { text: [...KEY].reverse().join('') } });
    const everything = `${lines.join('\n')}\n${JSON.stringify(record.decision)}`;
    for (const form of FORMS) expect(everything).not.toContain(form);
    expect(lines.at(-1)).toBe('an answer quoting *** {"nested":{"text":"***"}}');
  }, 60_000);

  it('reads its key from Secrets Manager once per cold start, for its redactor and every solver it wires', async () => {
    // Before, the redactor's loader and each solver (the balance reader, the probe, the watch) read
    // the secret on their own: two reads by the first tick, four with a probe and parked answers.
    const fleet = await fixture.createFleet({ planThreads: 10 });
    const reads: string[] = [];
    const secrets = createServer((request, response) => {
      reads.push(String(request.headers['x-amz-target']));
      request.resume();
      response.writeHead(200, { 'content-type': 'application/x-amz-json-1.1' });
      response.end(JSON.stringify({ ARN: SECRET_ARN, Name: 'captcha-fleet/solver-key', SecretString: KEY }));
    });
    await new Promise<void>((resolve) => secrets.listen(0, '127.0.0.1', resolve));
    try {
      const environment = governorEnvironment(fleet, {
        [ENV.solverKeySecretArn]: SECRET_ARN,
        // Only the key's reads go here: the queues and tables are the fixture's clients.
        [ENV.endpoint]: `http://127.0.0.1:${(secrets.address() as AddressInfo).port}`,
      });
      const lines: string[] = [];
      const sink = (message: unknown, ...attributes: unknown[]) => {
        lines.push(`${String(message)} ${JSON.stringify(attributes[0])}`);
      };
      const redactor = createRedactor();
      const wired = await createGovernorFromEnvironment({
        environment,
        clients: fleet.clients,
        log: governorLogFrom({ info: sink, warn: sink, error: sink }, redactor),
        redactor,
        ...mocks(),
      });
      await wired.loop.tick();
      await wired.loop.tick();

      // The solver used the key (its balance read reached the provider, which echoed it).
      expect(lines.find((line) => line.startsWith('balance read failed'))).toContain('UNRECOGNIZED_CODE');
      expect(reads).toEqual(['secretsmanager.GetSecretValue']);
      // The redactor has the key the one read gave.
      expect(redactor.redact(`x ${KEY} y`)).toBe('x *** y');
    } finally {
      await new Promise((resolve) => secrets.close(resolve));
    }
  }, 60_000);
});
