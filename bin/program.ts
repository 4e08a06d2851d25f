/**
 * The `captcha-fleet` program: its commands and how usage errors print. Each subcommand lives in
 * `bin/commands/<name>.ts` and exports `register(program)`; adding one is one import and one line
 * in `COMMANDS`. Built apart from bin/captcha-fleet.ts (which runs it) so the docs check can read
 * every command's options and help.
 */
import { existsSync, readFileSync } from 'node:fs';
import { Command } from 'commander';
import { register as registerGovernor } from './commands/governor.js';
import { register as registerRedrive } from './commands/redrive.js';
import { register as registerReport } from './commands/report.js';
import { register as registerStart } from './commands/start.js';
import { register as registerStatus } from './commands/status.js';

/** Exit code of a usage error (as most CLIs use). */
export const USAGE_EXIT_CODE = 2;

const COMMANDS: ((program: Command) => void)[] = [
  registerStart,
  registerStatus,
  registerReport,
  registerRedrive,
  registerGovernor,
];

/** The package's version, from its package.json (one source): `../` from the source, `../../` from dist/bin/. */
function packageVersion(): string {
  for (const relative of ['../package.json', '../../package.json']) {
    const url = new URL(relative, import.meta.url);
    if (!existsSync(url)) continue;
    const manifest = JSON.parse(readFileSync(url, 'utf8')) as { name?: string; version: string };
    if (manifest.name === 'captcha-fleet') return manifest.version;
  }
  throw new Error('captcha-fleet: package.json not found beside the CLI');
}

/** How the reader asks for a command's help: through npm when npm started it (`npm start -- --help`). */
function helpCommand(name: string): string {
  return process.env.npm_lifecycle_event === name ? `\`npm ${name} -- --help\`` : `\`captcha-fleet ${name} --help\``;
}

/** The program with every command registered. */
export function buildProgram(): Command {
  const program = new Command('captcha-fleet')
    .description('CAPTCHA solving at volume on AWS, and the same pipeline locally')
    .version(packageVersion(), '-V, --version', 'print the version')
    .showHelpAfterError('(run `captcha-fleet --help` for the commands)')
    // Throw instead of exiting so usage errors get exit code 2 and the rest can clean up.
    .exitOverride()
    .configureOutput({ outputError: (text, write) => write(text) });
  // Settings above are inherited by the subcommands added below.
  for (const register of COMMANDS) register(program);
  // A usage error prints the error and where the options are, not the whole help.
  for (const command of program.commands)
    command.showHelpAfterError(`(run ${helpCommand(command.name())} for its options)`);
  return program;
}
