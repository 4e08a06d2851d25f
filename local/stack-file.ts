/**
 * Where a running local stack (`npm start -- --serve`) can be found by other processes: the
 * `captcha-fleet status | redrive | governor` commands read this file with `--local` (and
 * `--prefix` for a fleet other than the default). One file per fleet prefix, and a stack never
 * overwrites the file of another live stack of the same fleet, so two stacks are never confused.
 * It holds endpoints and names only: never the solver key.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

/** Directory of the stack files, relative to the working directory. */
export const STACK_FILE_DIR = '.captcha-fleet';
/** The prefix of a fleet started without one. */
export const DEFAULT_LOCAL_PREFIX = 'captcha-fleet';

/** The stack file of one fleet: `.captcha-fleet/local-stack.<prefix>.json`, or CAPTCHA_FLEET_STACK_FILE when set. */
export function stackFilePath(prefix: string = DEFAULT_LOCAL_PREFIX): string {
  return resolve(process.env.CAPTCHA_FLEET_STACK_FILE ?? `${STACK_FILE_DIR}/local-stack.${prefix}.json`);
}

/** @throws Error when a live stack of the same fleet already recorded itself there. */
export function writeLocalStackFile(info: LocalStackInfo, path = stackFilePath(info.prefix)): string {
  const running = existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as LocalStackInfo) : undefined;
  if (running !== undefined && running.pid !== info.pid && isAlive(running.pid)) {
    throw new Error(
      `a local stack of fleet "${running.prefix}" is already serving (pid ${running.pid}, ${path}). Stop it first, or point this one elsewhere with CAPTCHA_FLEET_STACK_FILE.`,
    );
  }
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
  return path;
}

export function removeLocalStackFile(path = stackFilePath()): void {
  rmSync(path, { force: true });
}

/**
 * Read the file of a running local stack: the one of `prefix` (default: the default fleet's), or
 * the file at `path`. When a prefix is given, the file must record that fleet.
 * @throws Error naming the file and the fix when no local stack of that fleet is running.
 */
export function readLocalStackFile(options: { prefix?: string; path?: string } = {}): LocalStackInfo {
  const { prefix } = options;
  const path = options.path !== undefined ? resolve(options.path) : stackFilePath(prefix);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new Error(
      `no local stack found (${path} is missing). Start one with \`npm start -- --serve\` in another terminal, or point at AWS with --prefix/--region.`,
    );
  }
  const info = JSON.parse(text) as LocalStackInfo;
  if (prefix !== undefined && info.prefix !== prefix) {
    throw new Error(
      `${path} records fleet "${info.prefix}", not "${prefix}". Give --prefix ${info.prefix}, or unset CAPTCHA_FLEET_STACK_FILE.`,
    );
  }
  if (!isAlive(info.pid)) {
    throw new Error(
      `the local stack recorded in ${path} (pid ${info.pid}) is no longer running. Start one with \`npm start -- --serve\`.`,
    );
  }
  return info;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
