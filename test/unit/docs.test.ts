/**
 * Docs that cannot drift: every generated block (scripts/doc-blocks.ts) is what its generator
 * prints now, the flags table of docs/local.md is `start`'s flags, and every command line the docs
 * show uses only flags its command has (as `--help` lists them).
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../bin/program.js';
import { findBlocks, renderBlocks } from '../../scripts/doc-blocks.js';
import { markdownFiles, staleFiles } from '../../scripts/docs.js';
import { ROOT } from '../infra/synth-helpers.js';

/** Each command's long flags, as its help lists them. */
function flagsByCommand(): Map<string, Set<string>> {
  const flags = new Map<string, Set<string>>();
  for (const command of buildProgram().commands)
    flags.set(command.name(), new Set([...command.options.map((o) => o.long ?? ''), '--help']));
  return flags;
}

/** `file:line: captcha-fleet <command> … --flag` for every flag a docs command line uses that its command lacks. */
function unknownFlags(): string[] {
  const flags = flagsByCommand();
  const problems: string[] = [];
  for (const file of markdownFiles()) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, index) => {
        // The command up to the end of its code span or shell comment.
        for (const match of line.matchAll(/(?:captcha-fleet|npm start --)(?:\s+([a-z]+))?([^`#|]*)/g)) {
          const named = match[0].startsWith('npm start') ? 'start' : match[1];
          if (named === undefined || !flags.has(named)) continue;
          const tail = match[0].startsWith('npm start') ? `${match[1] ?? ''}${match[2] ?? ''}` : (match[2] ?? '');
          for (const flag of tail.match(/(?<![\w-])--[a-z][a-z0-9-]*/g) ?? [])
            if (!flags.get(named)?.has(flag))
              problems.push(`${relative(ROOT, file)}:${index + 1}: ${named} has no ${flag}`);
        }
      });
  }
  return problems;
}

describe('generated blocks', () => {
  it('are what their generators print now (`npm run docs` rewrites them)', async () => {
    expect((await staleFiles()).map((s) => s.file)).toEqual([]);
  });

  it('are replaced whole, and a block with no generator or no end is an error naming its line', async () => {
    const text = 'a\n<!-- generated: twice 3 -->\nold\nlines\n<!-- /generated -->\nb';
    const fresh = await renderBlocks(text, { twice: ([n]) => `${Number(n) * 2}\n` });
    expect(fresh).toBe('a\n<!-- generated: twice 3 -->\n6\n<!-- /generated -->\nb');
    await expect(renderBlocks(text, {}, 'x.md')).rejects.toThrow('x.md:2: no generator "twice"');
    expect(() => findBlocks('<!-- generated: help -->\ntext', 'y.md')).toThrow(
      'y.md:1: generated block help is never closed',
    );
  });
});

describe('CLI docs against --help', () => {
  it('docs/local.md lists exactly the flags of `start`', () => {
    const text = readFileSync(`${ROOT}/docs/local.md`, 'utf8');
    const section = text.slice(text.indexOf('## Flags'), text.indexOf('\n## ', text.indexOf('## Flags') + 1));
    const documented = [...section.matchAll(/^\| `(--[a-z0-9-]+)/gm)].map((m) => m[1]);
    const actual = [...(flagsByCommand().get('start') ?? [])].filter((flag) => flag !== '--help');
    expect(documented.sort()).toEqual(actual.sort());
  });

  it('every command line in the docs uses only flags its command has', () => {
    expect(unknownFlags()).toEqual([]);
  });
});
