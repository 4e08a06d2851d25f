/**
 * The generators of the docs' generated blocks (scripts/doc-blocks.ts). Each is a deterministic
 * run: the same code gives the same text. Add one per figure or output a page shows.
 *
 * - `help [command]`: `captcha-fleet <command> --help`.
 * - `bench ARGS…`, `bench:overflow ARGS…`: the policy lab's stdout for those arguments (seeded
 *   simulations: deterministic; timings go to stderr and are not shown).
 * - `status-example text|json`: what `status` prints for a fixed fleet state (its renderer).
 * - `event-source`: the completion events' source and detail-type, from the code.
 * - `node-floor`: the Node.js versions the package supports (`engines`) and the Lambdas run.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import type { Command } from 'commander';
import { renderStatus } from '../bin/commands/status.js';
import { buildProgram } from '../bin/program.js';
import type { FleetStatus } from '../clients/fleet-status.js';
import { COMPLETION_EVENT_DETAIL_TYPE } from '../functions/core/events.js';
import { fleetEventSource, resolveSettings } from '../functions/core/settings.js';
import type { DocGenerator } from './doc-blocks.js';

const ROOT = new URL('..', import.meta.url);

/** `captcha-fleet <command> --help`, as printed 100 columns wide, in a fenced block. */
function help([name]: string[]): string {
  const program = buildProgram();
  const command: Command | undefined = name === undefined ? program : program.commands.find((c) => c.name() === name);
  if (command === undefined) throw new Error(`help: no command "${name}"`);
  command.configureHelp({ helpWidth: 100 });
  return [
    '```text',
    `$ captcha-fleet${name === undefined ? '' : ` ${name}`} --help`,
    command.helpInformation().trimEnd(),
    '```',
  ].join('\n');
}

/** The lab's scripts a block may show, by npm script name. */
const LAB_SCRIPTS: Readonly<Record<string, string>> = {
  bench: 'lab/cli.ts',
  'bench:overflow': 'lab/overflow-bench.ts',
};

/** A lab script's stdout for `args` (`--no-report` added for `bench`: a block writes no files), in a fenced block. */
function lab(script: string): DocGenerator {
  return async (args) => {
    const file = LAB_SCRIPTS[script];
    if (file === undefined) throw new Error(`no lab script ${script}`);
    const argv = script === 'bench' && !args.includes('--no-report') ? [...args, '--no-report'] : args;
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', file, ...argv], {
      cwd: ROOT,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, NO_COLOR: '1' },
    });
    const shown = args.filter((arg) => arg !== '--no-report').join(' ');
    return ['```text', `$ npm run ${script}${shown ? ` -- ${shown}` : ''}`, stdout.trimEnd(), '```'].join('\n');
  };
}

/** A fleet's state as a local `npm start -- --serve` leaves it after a demo: fixed, so its rendering is deterministic. */
export const STATUS_EXAMPLE: FleetStatus = {
  at: Date.UTC(2026, 10, 30, 9, 1, 41, 444),
  lanes: {
    normal: { backlog: 0, inFlight: 0, delayed: 0, oldestAgeSeconds: undefined, ceiling: 20, enabled: true },
    high: { backlog: 0, inFlight: 0, delayed: 0, oldestAgeSeconds: undefined, ceiling: 15, enabled: false },
  },
  dlqDepth: 3,
  governor: {
    at: Date.UTC(2026, 10, 30, 9, 1, 40, 502),
    code: 'IDLE',
    message: 'No work queued; ceiling stays at the free threads (20) so a burst starts at once.',
    paused: false,
    pausedReason: undefined,
    freeThreads: 20,
    neededThreads: 0,
    shortfall: 0,
  },
  balance: 9.943,
  overflow: undefined,
  solvesByProvider: { primary: undefined, overflow: undefined },
  recent: { windowMinutes: 5, solved: 57, failed: 0, rejected: 2, p95SolveMs: 688, source: 'results-table' },
};

/** `status --local` (text) or `status --local --json` for `STATUS_EXAMPLE`, in a fenced block. */
function statusExample([form]: string[]): string {
  const fleet = 'local stack (pid 18911)';
  if (form === 'json') return ['```json', JSON.stringify({ fleet, ...STATUS_EXAMPLE }), '```'].join('\n');
  if (form !== 'text') throw new Error('status-example: text or json');
  return ['```', '$ npx captcha-fleet status --local', renderStatus(STATUS_EXAMPLE, fleet), '```'].join('\n');
}

/** The completion events' source and detail-type sentence. */
function eventSource(): string {
  const prefix = resolveSettings({}).prefix;
  return (
    `Source \`${fleetEventSource('<prefix>')}\` (\`${fleetEventSource(prefix)}\` with the default prefix), ` +
    `detail-type \`${COMPLETION_EVENT_DETAIL_TYPE}\`.`
  );
}

/** The Node.js floor of the package (`engines.node`). */
export function nodeFloor(): string {
  const manifest = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')) as { engines: { node: string } };
  const floor = /^>=\s*(\d+(?:\.\d+)*)$/.exec(manifest.engines.node)?.[1];
  if (floor === undefined) throw new Error(`engines.node is not ">=X": ${manifest.engines.node}`);
  return floor;
}

export const DOC_GENERATORS: Readonly<Record<string, DocGenerator>> = {
  help,
  bench: lab('bench'),
  'bench:overflow': lab('bench:overflow'),
  'status-example': statusExample,
  'event-source': eventSource,
};
