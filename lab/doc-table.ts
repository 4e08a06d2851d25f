/**
 * `npm run bench:doc-table -- --before A.json[,B.json] --after C.json[,D.json] [--extra E.json,…
 * --extra-label TEXT] [--block NAME]`: the per-class table of docs/lab.md ("Generated figures"), written from the
 * generated.json documents that `npm run bench -- --generate N --seed S` leaves in its output
 * folder, never typed. Each file is one seed's run; the traces above 1.5 × the floor are counted
 * for each pair of before and after files in order. The table replaces the text between `<!-- generated-table -->` and
 * `<!-- /generated-table -->` in the file given by --doc (default docs/lab.md); with --block NAME,
 * the text between `<!-- generated-table NAME -->` and `<!-- /generated-table NAME -->`.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { Command } from 'commander';
import type { ClassFigures } from './classes.js';

/** The part of a generated.json document the table reads. */
export interface GeneratedDocument {
  seed: number;
  classes: ClassFigures[];
}

/** The markers of a table block: `<!-- generated-table -->`, or `<!-- generated-table NAME -->` for a named one. */
export function markers(block?: string): { open: string; close: string } {
  const name = block ? ` ${block}` : '';
  return { open: `<!-- generated-table${name} -->`, close: `<!-- /generated-table${name} -->` };
}

function share(f: ClassFigures | undefined): string {
  if (f === undefined || f.traces === 0) return '–';
  return `${Math.round((100 * f.passed) / f.traces)} % (${f.passed}/${f.traces})`;
}

function label(doc: GeneratedDocument): string {
  const all = doc.classes.find((c) => c.traceClass === 'all');
  return `seed ${doc.seed} (${all?.traces ?? 0})`;
}

/** A further group of runs beside before and after (e.g. after, under the floor's earlier rules). */
export interface ExtraRuns {
  label: string;
  docs: readonly GeneratedDocument[];
}

/**
 * The Markdown table: per class, the pass share on every seed before and after (and in an extra
 * group, when given), then the traces above 1.5 × their floor, before → after, seed by seed.
 */
export function docTable(
  before: readonly GeneratedDocument[],
  after: readonly GeneratedDocument[],
  extra?: ExtraRuns,
): string {
  const classes: string[] = [
    ...new Set(
      [...before, ...after, ...(extra?.docs ?? [])]
        .flatMap((d) => d.classes.map((c) => c.traceClass))
        .filter((c) => c !== 'all'),
    ),
  ].sort();
  classes.push('all');
  const find = (d: GeneratedDocument | undefined, c: string) => d?.classes.find((f) => f.traceClass === c);
  const cells = (docs: readonly GeneratedDocument[], c: string) => docs.map((d) => share(find(d, c))).join(' · ');
  const hard = (d: GeneratedDocument | undefined, c: string) => String(find(d, c)?.hardMisses ?? '–');
  const pairs = Array.from({ length: Math.max(before.length, after.length) }, (_, i) => i);
  const hardCells = (c: string) => pairs.map((i) => `${hard(before[i], c)} → ${hard(after[i], c)}`).join(' · ');
  const seeds = pairs.map((i) => `seed ${before[i]?.seed ?? after[i]?.seed ?? '–'}`).join(' · ');
  const extraHead = extra ? ` ${extra.label}: ${extra.docs.map(label).join(' · ')} |` : '';
  const lines = [
    `| class | before: ${before.map(label).join(' · ')} | after: ${after.map(label).join(' · ')} |${extraHead} traces > 1.5 × floor, before → after (${seeds}) |`,
    `|---|---|---|${extra ? '---|' : ''}---|`,
    ...classes.map(
      (c) =>
        `| ${c} | ${cells(before, c)} | ${cells(after, c)} |${extra ? ` ${cells(extra.docs, c)} |` : ''} ${hardCells(c)} |`,
    ),
  ];
  return lines.join('\n');
}

/**
 * The document's text with the table between the markers of `block` (the unnamed block when
 * omitted) replaced. @throws Error when the markers are missing.
 */
export function replaceTable(text: string, table: string, block?: string): string {
  const { open, close } = markers(block);
  const start = text.indexOf(open);
  const end = text.indexOf(close);
  if (start < 0 || end < start) throw new Error(`no ${open} … ${close} block to replace`);
  return `${text.slice(0, start + open.length)}\n${table}\n${text.slice(end)}`;
}

function load(list: string): GeneratedDocument[] {
  return list
    .split(',')
    .filter((f) => f.length > 0)
    .map((file) => JSON.parse(readFileSync(file, 'utf8')) as GeneratedDocument);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const program = new Command()
    .name('bench:doc-table')
    .description("Write docs/lab.md's generated per-class table from generated.json runs.")
    .requiredOption(
      '--before <files>',
      'generated.json files of the runs before, comma-separated (first: its hard misses)',
    )
    .requiredOption('--after <files>', 'generated.json files of the runs after, comma-separated')
    .option('--extra <files>', 'generated.json files of a further group of runs, comma-separated')
    .option('--extra-label <text>', 'the heading of the --extra group', 'also')
    .option('--doc <file>', 'the Markdown file with the table block', 'docs/lab.md')
    .option('--block <name>', 'the named block to write (<!-- generated-table NAME -->); the unnamed one when omitted')
    .action(
      (options: { before: string; after: string; extra?: string; extraLabel: string; doc: string; block?: string }) => {
        const extra = options.extra ? { label: options.extraLabel, docs: load(options.extra) } : undefined;
        const table = docTable(load(options.before), load(options.after), extra);
        writeFileSync(options.doc, replaceTable(readFileSync(options.doc, 'utf8'), table, options.block));
        process.stdout.write(`${table}\n`);
      },
    );
  program.parse();
}
