/**
 * Where a running local stack (`npm start -- --serve`) can be found by other processes: the
 * `captcha-fleet status | redrive | governor` commands read this file with `--local`.
 * It holds endpoints and names only: never the solver key.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

export interface LocalStackInfo {
  version: 1;
  pid: number;
  startedAt: number;
  prefix: string;
  sqsEndpoint: string;
  dynamoEndpoint: string;
  solverUrl: string | undefined;
  /** The local runtime's HTTP control/status endpoint, when it serves one. */
  controlUrl: string | undefined;
  queueUrls: { normal: string; high: string; dlq: string };
  tables: { results: string; governor: string };
}

export const DEFAULT_STACK_FILE = '.captcha-fleet/local-stack.json';

export function stackFilePath(path = process.env.CAPTCHA_FLEET_STACK_FILE ?? DEFAULT_STACK_FILE): string {
  return resolve(path);
}

export function writeLocalStackFile(info: LocalStackInfo, path = stackFilePath()): string {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
  return path;
}

export function removeLocalStackFile(path = stackFilePath()): void {
  rmSync(path, { force: true });
}

/** @throws Error naming the file and the fix when no local stack is running. */
export function readLocalStackFile(path = stackFilePath()): LocalStackInfo {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new Error(
      `no local stack found (${path} is missing). Start one with \`npm start -- --serve\` in another terminal, or point at AWS with --prefix/--region.`,
    );
  }
  const info = JSON.parse(text) as LocalStackInfo;
  try {
    process.kill(info.pid, 0);
  } catch {
    throw new Error(
      `the local stack recorded in ${path} (pid ${info.pid}) is no longer running. Start one with \`npm start -- --serve\`.`,
    );
  }
  return info;
}
