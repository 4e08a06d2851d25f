#!/usr/bin/env -S npx tsx
/**
 * The `captcha-fleet` CLI: its commands are bin/program.ts's; this file runs one. Exit codes: 0
 * success, 1 the command ran and reports a failure, 2 a usage error (unknown flag, bad value) —
 * printed with where the command's options are.
 */
import { CommanderError } from 'commander';
import { flagsNpmKept, npmKeptFlagsMessage } from './commands/npm-flags.js';
import { START_OPTIONS } from './commands/start.js';
import { buildProgram, USAGE_EXIT_CODE } from './program.js';

async function main(argv: string[]): Promise<number> {
  // The SDK's notice that its 2027 releases will need Node 22 is about future versions, not the
  // pinned ones this runs; printed at the first client it would only clutter the output.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const kept = argv[2] === 'start' ? flagsNpmKept(START_OPTIONS, 'start') : [];
  if (kept.length > 0) {
    process.stderr.write(`${npmKeptFlagsMessage(kept, 'start')}\n`);
    return USAGE_EXIT_CODE;
  }
  // A reader that closes the pipe early (`redrive --dry-run | head -1`) has read what it wanted:
  // the write's EPIPE ended the command with a stack trace after its work was done.
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw error;
  });
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version end through here with exit code 0.
      if (error.exitCode === 0) return 0;
      // `npm start --taks 5`: npm keeps a flag it does not know (misspelt) for itself and passes
      // its value on as an argument; commander's "too many arguments" named neither.
      const lifecycle = process.env.npm_lifecycle_event;
      if (error.code === 'commander.excessArguments' && lifecycle !== undefined && argv[2] === lifecycle)
        process.stderr.write(
          `(run from \`npm ${lifecycle}\`: npm passes flags on only after \`--\`, e.g. \`npm ${lifecycle} -- --tasks 5\`; a flag before it that npm does not know, a misspelt one, npm keeps and passes its value on as an argument: check the spelling with \`npm ${lifecycle} -- --help\`)\n`,
        );
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
