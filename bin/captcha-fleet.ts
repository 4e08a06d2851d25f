#!/usr/bin/env -S npx tsx
/**
 * The `captcha-fleet` CLI. Each subcommand lives in `bin/commands/<name>.ts` and exports
 * `register(program)`; adding one is one import and one line in `COMMANDS`.
 *
 * Exit codes: 0 success, 1 the command ran and reports a failure, 2 a usage error (unknown flag,
 * bad value) — printed with the command's usage.
 */
import { existsSync, readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { flagsNpmKept, npmKeptFlagsMessage } from './commands/npm-flags.js';
import { register as registerStart, START_OPTIONS } from './commands/start.js';
import { register as registerRedrive } from './commands/redrive.js';
import { register as registerGovernor } from './commands/governor.js';
import { register as registerStatus } from './commands/status.js';

/** Exit code of a usage error (as most CLIs use). */
export const USAGE_EXIT_CODE = 2;

const COMMANDS: ((program: Command) => void)[] = [registerStart, registerStatus, registerRedrive, registerGovernor];

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

function buildProgram(): Command {
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

/** How the reader asks for a command's help: through npm when npm started it (`npm start -- --help`). */
function helpCommand(name: string): string {
  return process.env.npm_lifecycle_event === name ? `\`npm ${name} -- --help\`` : `\`captcha-fleet ${name} --help\``;
}

async function main(argv: string[]): Promise<number> {
  // The SDK's notice that its 2027 releases will need Node 22 is about future versions, not this
  // one (engines: Node >= 20.19); printed at the first client it would only clutter the demo.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const kept = argv[2] === 'start' ? flagsNpmKept(START_OPTIONS, 'start') : [];
  if (kept.length > 0) {
    process.stderr.write(`${npmKeptFlagsMessage(kept, 'start')}\n`);
    return USAGE_EXIT_CODE;
  }
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through here with exit code 0.
      if (error.exitCode === 0) return 0;
      return USAGE_EXIT_CODE;
    }
    process.stderr.write(
      `captcha-fleet: ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}\n`,
    );
    return 1;
  }
}

const code = await main(process.argv);
process.exitCode = code;
// Everything is closed by now; should a stray handle (a socket in keep-alive) remain, do not
// let it keep a finished command alive.
setTimeout(() => process.exit(code), 1_000).unref();
