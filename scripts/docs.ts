/**
 * `npm run docs`: rewrite every generated block in README.md and docs/ (scripts/doc-blocks.ts).
 * `npm run docs -- --check`: change nothing; list the stale blocks and exit 1 if there are any.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { renderBlocks } from './doc-blocks.js';
import { DOC_GENERATORS } from './doc-generators.js';

const root = fileURLToPath(new URL('..', import.meta.url));

/** The Markdown files whose blocks are generated: the README, the top-level pages and docs/. */
export function markdownFiles(): string[] {
  const top = readdirSync(root).filter((name) => name.endsWith('.md'));
  const docs = readdirSync(join(root, 'docs')).filter((name) => name.endsWith('.md'));
  return [...top.map((name) => join(root, name)), ...docs.map((name) => join(root, 'docs', name))];
}

/** Each file whose generated blocks are not what their generators print now, with its fresh text. */
export async function staleFiles(): Promise<{ file: string; fresh: string }[]> {
  const stale: { file: string; fresh: string }[] = [];
  for (const file of markdownFiles()) {
    const text = readFileSync(file, 'utf8');
    const fresh = await renderBlocks(text, DOC_GENERATORS, relative(root, file));
    if (fresh !== text) stale.push({ file: relative(root, file), fresh });
  }
  return stale;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const check = process.argv.includes('--check');
  const stale = await staleFiles();
  for (const { file, fresh } of stale) {
    if (check) console.error(`stale generated block(s) in ${file}: run \`npm run docs\``);
    else {
      writeFileSync(join(root, file), fresh);
      console.log(`rewrote ${file}`);
    }
  }
  process.exitCode = check && stale.length > 0 ? 1 : 0;
}
