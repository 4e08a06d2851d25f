import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { readLocalStackFile, stackFilePath, writeLocalStackFile, type LocalStackInfo } from '../../local/stack-file.js';

const info = (prefix: string, pid = process.pid): LocalStackInfo => ({
  version: 1,
  pid,
  startedAt: 0,
  prefix,
  sqsEndpoint: 'http://127.0.0.1:1',
  dynamoEndpoint: 'http://127.0.0.1:2',
  solverUrl: undefined,
  controlUrl: undefined,
  queueUrls: { normal: `${prefix}-tasks`, high: `${prefix}-tasks-high`, dlq: `${prefix}-tasks-dlq` },
  tables: { results: `${prefix}-results`, governor: `${prefix}-governor` },
});

describe('local stack files', () => {
  let dir: string;
  const saved = process.env.CAPTCHA_FLEET_STACK_FILE;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'stack-file-'));
    delete process.env.CAPTCHA_FLEET_STACK_FILE;
  });
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    if (saved !== undefined) process.env.CAPTCHA_FLEET_STACK_FILE = saved;
  });

  it('keeps one file per fleet prefix', () => {
    expect(stackFilePath('prod')).not.toBe(stackFilePath('staging'));
    expect(stackFilePath('prod')).toMatch(/local-stack\.prod\.json$/);
  });

  it('refuses to overwrite the file of another live stack of the same fleet', () => {
    // Prepare: this test process plays the stack already serving.
    const path = join(dir, 'local-stack.prod.json');
    writeLocalStackFile(info('prod'), path);
    // Act
    const second = () => writeLocalStackFile(info('prod', process.pid + 100_000), path);
    // Assess
    expect(second).toThrow(/fleet "prod" is already serving \(pid \d+/);
    expect(readLocalStackFile({ prefix: 'prod', path }).pid).toBe(process.pid);
  });

  it('does not hand one fleet’s stack to a command asking for another', () => {
    // Prepare
    const path = join(dir, 'shared.json');
    writeLocalStackFile(info('prod'), path);
    // Act
    const read = () => readLocalStackFile({ prefix: 'staging', path });
    // Assess
    expect(read).toThrow(/records fleet "prod", not "staging"/);
  });
});
