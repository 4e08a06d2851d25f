/**
 * Generated blocks in Markdown: text between `<!-- generated: NAME ARGS -->` and
 * `<!-- /generated -->` is the output of generator NAME (scripts/doc-generators.ts) given ARGS,
 * written by `npm run docs` and checked by the suite (test/unit/docs.test.ts), so a figure or an
 * output shown in the docs is always what its deterministic run prints now.
 */

/** One generated block of a file. */
export interface DocBlock {
  /** The generator's name and its arguments, as the opening marker gives them. */
  generator: string;
  args: string[];
  /** The text between the markers (without the newlines that follow and precede them). */
  body: string;
  /** 1-based line of the opening marker. */
  line: number;
}

/** A generator: a deterministic run whose output a block shows. */
export type DocGenerator = (args: string[]) => string | Promise<string>;

const OPEN = /^<!-- generated: ([\w:-]+)((?: [^\s]+)*) -->$/;
const CLOSE = '<!-- /generated -->';

/** The generated blocks of a Markdown text. @throws Error on a marker left open or closed twice. */
export function findBlocks(text: string, file = 'the file'): DocBlock[] {
  const lines = text.split('\n');
  const blocks: DocBlock[] = [];
  let open: { generator: string; args: string[]; line: number; body: string[] } | undefined;
  lines.forEach((line, index) => {
    const opening = OPEN.exec(line);
    if (opening) {
      if (open) throw new Error(`${file}:${index + 1}: a generated block opens inside the one of line ${open.line}`);
      open = {
        generator: opening[1] ?? '',
        args: (opening[2] ?? '').trim().split(' ').filter(Boolean),
        line: index + 1,
        body: [],
      };
    } else if (line === CLOSE) {
      if (!open) throw new Error(`${file}:${index + 1}: ${CLOSE} closes no block`);
      blocks.push({ generator: open.generator, args: open.args, line: open.line, body: open.body.join('\n') });
      open = undefined;
    } else open?.body.push(line);
  });
  if (open) throw new Error(`${file}:${open.line}: generated block ${open.generator} is never closed (${CLOSE})`);
  return blocks;
}

/** The text with every block's body replaced by its generator's output. */
export async function renderBlocks(
  text: string,
  generators: Readonly<Record<string, DocGenerator>>,
  file = 'the file',
): Promise<string> {
  const blocks = findBlocks(text, file);
  const lines = text.split('\n');
  // From the last block up, so earlier line numbers stay right.
  for (const block of [...blocks].reverse()) {
    const generate = generators[block.generator];
    if (generate === undefined)
      throw new Error(
        `${file}:${block.line}: no generator "${block.generator}" (known: ${Object.keys(generators).join(', ')})`,
      );
    const output = (await generate(block.args)).replace(/\n+$/, '');
    const bodyLines = block.body === '' ? 0 : block.body.split('\n').length;
    lines.splice(block.line, bodyLines, ...(output === '' ? [] : output.split('\n')));
  }
  return lines.join('\n');
}
