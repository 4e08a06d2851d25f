/**
 * The package entry `captcha-fleet/producer` (imported by its name, through the exports map):
 * `localStack()` turns the stack file `npm start -- --serve` writes into a producer's target.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createProducer, localStack } from 'captcha-fleet/producer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeLocalStackFile } from '../../local/stack-file.js';
import { imageTask } from '../helpers/factories.js';
import { type EmulatorFixture, receive, startEmulatorFixture, type TestFleet } from '../helpers/fleet-fixture.js';

describe('localStack() from captcha-fleet/producer', () => {
  const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-entry-'));
  let fixture: EmulatorFixture;
  let fleet: TestFleet;

  beforeAll(async () => {
    fixture = await startEmulatorFixture();
    fleet = await fixture.createFleet();
  });

  afterAll(async () => {
    await fixture?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('says how to start a local stack when none is running', () => {
    expect(() => localStack({ stackFile: join(dir, 'missing.json') })).toThrow(/npm start -- --serve/);
  });

  it("sends each task to the stack file's queue for its priority", async () => {
    // Prepare
    const stackFile = writeLocalStackFile(
      {
        version: 1,
        pid: process.pid,
        startedAt: Date.now(),
        prefix: fleet.settings.prefix,
        sqsEndpoint: fixture.emulators.sqsEndpoint,
        dynamoEndpoint: fixture.emulators.dynamoEndpoint,
        solverUrl: undefined,
        controlUrl: undefined,
        queueUrls: fleet.resources.queueUrls,
        tables: fleet.resources.tables,
      },
      join(dir, 'local-stack.json'),
    );
    const producer = createProducer(localStack({ stackFile }));

    // Act
    const [normalId, highId] = await producer.submit([imageTask(), imageTask({ priority: 'high' })]);

    // Assess
    const onNormal = await receive(fleet.clients, fleet.resources.queueUrls.normal);
    const onHigh = await receive(fleet.clients, fleet.resources.queueUrls.high);
    expect(onNormal.map((m) => JSON.parse(m.Body ?? '{}').id)).toEqual([normalId]);
    expect(onHigh.map((m) => JSON.parse(m.Body ?? '{}').id)).toEqual([highId]);
  });
});
