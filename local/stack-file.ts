/**
 * Where a running local stack (`npm start -- --serve`) can be found by other processes: the
 * `captcha-fleet status | redrive | governor` commands read this file with `--local` (and
 * `--prefix` for a fleet other than the default). One file per fleet prefix, and a stack never
 * overwrites the file of another live stack of the same fleet, so two stacks are never confused.
 * It holds endpoints and names only: never the solver key.
 */
import { accessSync, constants, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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
  /** The reports queue (`captcha-fleet report --local` sends there). Absent in files of older stacks. */
  reportsQueueUrl?: string;
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

/** How to start a local stack, wherever the reader runs captcha-fleet from. */
export const START_SERVE_HINT =
  'Start one with `npx captcha-fleet start --serve` (`npm start -- --serve` in a checkout) in another terminal';

/**
 * What a caller of {@link readLocalStackFile} tells its user to do when no stack is found: a CLI
 * names its own flags, a library its own options (it has no flags).
 */
export interface LocalStackHints {
  /** After "no local stack found": how else to reach a fleet (e.g. "or drop --local to reach AWS"). */
  readonly otherwise: string;
  /** When the file records another fleet: how to ask for that one. */
  readonly choosePrefix: (prefix: string) => string;
}

/** Thrown when two live stacks of one fleet would share a stack file. */
export class LocalStackConflictError extends Error {
  override readonly name = 'LocalStackConflictError';
  constructor(
    readonly running: LocalStackInfo,
    readonly path: string,
  ) {
    super(
      `a local stack of fleet "${running.prefix}" is already serving (pid ${running.pid}, started ${new Date(running.startedAt).toISOString()}, ${path}). Stop it first (Ctrl-C in its terminal, or kill ${running.pid}), or serve this one under another file with CAPTCHA_FLEET_STACK_FILE=<path>.`,
    );
  }
}

/** The live stack recorded at `path` by another process, if there is one. */
export function liveLocalStack(path: string, self = process.pid): LocalStackInfo | undefined {
  if (!existsSync(path)) return undefined;
  let running: LocalStackInfo;
  try {
    running = JSON.parse(readFileSync(path, 'utf8')) as LocalStackInfo;
  } catch {
    return undefined;
  }
  return running.pid !== self && isAlive(running.pid) ? running : undefined;
}

/** @throws LocalStackConflictError when a live stack of the same fleet already recorded itself there. */
export function writeLocalStackFile(info: LocalStackInfo, path = stackFilePath(info.prefix)): string {
  const running = liveLocalStack(path, info.pid);
  if (running !== undefined) throw new LocalStackConflictError(running, path);
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
  return path;
}

/** The file system's answers, in words. */
const STACK_FILE_REASONS: Readonly<Record<string, string>> = {
  EEXIST: 'EEXIST: a part of its folder is a file',
  ENOTDIR: 'ENOTDIR: a part of its folder is a file',
  EACCES: 'EACCES: no permission to write there',
  EPERM: 'EPERM: no permission to write there',
  EROFS: 'EROFS: a read-only file system',
  ENOENT: 'ENOENT: its folder cannot be made',
};

/**
 * Checks that a stack file can be written at `path` (its folder made if missing), before a
 * `--serve` run: it writes the file only once its demo is over, and an unwritable path (a
 * read-only checkout, a folder that is a file) ended the run there, after the whole demo, with
 * the file system's bare code (`EEXIST: … mkdir '/etc/passwd'`) and nothing served.
 * @throws Error naming the path, the reason and the fix
 */
export function assertStackFileWritable(path: string): void {
  try {
    mkdirSync(dirname(path), { recursive: true });
    accessSync(existsSync(path) ? path : dirname(path), constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).name;
    const why = STACK_FILE_REASONS[code] ?? code;
    throw new Error(
      `cannot write the local stack's file ${path} (${why}): --serve records there where its stack serves, for the other commands. Run from a writable folder, or point CAPTCHA_FLEET_STACK_FILE at a writable file (e.g. CAPTCHA_FLEET_STACK_FILE=/tmp/captcha-fleet-stack.json).`,
    );
  }
}

export function removeLocalStackFile(path = stackFilePath()): void {
  rmSync(path, { force: true });
}

/** A library's hints: it has options, not flags. */
const LIBRARY_HINTS: LocalStackHints = {
  otherwise: 'or give the file its stack wrote (CAPTCHA_FLEET_STACK_FILE)',
  choosePrefix: (prefix) => `Ask for fleet "${prefix}"`,
};

/**
 * Read the file of a running local stack: the one of `prefix` (default: the default fleet's), or
 * the file at `path`. When a prefix is given, the file must record that fleet.
 * @throws Error naming the file and the fix when no local stack of that fleet is running.
 */
export function readLocalStackFile(
  options: { prefix?: string; path?: string; hints?: LocalStackHints } = {},
): LocalStackInfo {
  const { prefix, hints = LIBRARY_HINTS } = options;
  const path = options.path !== undefined ? resolve(options.path) : stackFilePath(prefix);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    throw new Error(`no local stack found (${path} is missing). ${START_SERVE_HINT}, ${hints.otherwise}.`);
  }
  const info = JSON.parse(text) as LocalStackInfo;
  if (prefix !== undefined && info.prefix !== prefix) {
    throw new Error(
      `${path} records fleet "${info.prefix}", not "${prefix}". ${hints.choosePrefix(info.prefix)}, or unset CAPTCHA_FLEET_STACK_FILE.`,
    );
  }
  if (!isAlive(info.pid)) {
    throw new Error(`the local stack recorded in ${path} (pid ${info.pid}) is no longer running. ${START_SERVE_HINT}.`);
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
