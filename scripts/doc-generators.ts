/**
 * The generators of the docs' generated blocks (scripts/doc-blocks.ts). Each is a deterministic
 * run: the same code gives the same text. Add one per figure or output a page shows.
 */
import type { Command } from 'commander';
import { buildProgram } from '../bin/program.js';
import { designsMarkdownFor } from '../lab/designs-report.js';
import { monthlyBillMarkdown } from './cost-bill.js';
import type { DocGenerator } from './doc-blocks.js';

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

export const DOC_GENERATORS: Readonly<Record<string, DocGenerator>> = {
  help,
  'monthly-bill': () => monthlyBillMarkdown(),
  /** `cost-designs steady,sale-day-surge`: the design comparison of docs/cost.md (lab/designs.ts). */
  'cost-designs': ([names]) => designsMarkdownFor((names ?? 'steady,sale-day-surge').split(',')),
};
