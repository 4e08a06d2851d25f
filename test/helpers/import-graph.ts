/**
 * The design map's arrows, checked from the source: every relative import of the TypeScript
 * files under a folder, the import circles among them (strongly connected components of more
 * than one file, or a file that imports itself) and the imports that point "upward" (against
 * the rooms' order in docs and /DESIGN: handlers → adapters → core; in lab/, the layers below).
 *
 * Run alone for figures: `npx tsx test/helpers/import-graph.ts functions lab`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

/** A file's relative imports, as repository paths. */
export type ImportGraph = Map<string, string[]>;

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules' && entry.name !== 'out') out.push(...tsFiles(path));
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) out.push(path);
  }
  return out;
}

/** The import graph of every .ts file under `dirs` (relative to `root`), including imports that leave them. */
export function importGraph(root: string, dirs: readonly string[]): ImportGraph {
  const graph: ImportGraph = new Map();
  for (const dir of dirs) {
    for (const file of tsFiles(join(root, dir))) {
      const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
      const targets = info.importedFiles
        .map((f) => f.fileName)
        .filter((name) => name.startsWith('.'))
        .map((name) => relative(root, resolve(dirname(file), name.replace(/\.js$/, '.ts'))));
      graph.set(relative(root, file), [...new Set(targets)]);
    }
  }
  return graph;
}

/** Import circles: each a list of files that reach one another (Tarjan's strongly connected components). */
export function importCircles(graph: ImportGraph): string[][] {
  let index = 0;
  const indices = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (file: string): void => {
    indices.set(file, index);
    low.set(file, index);
    index += 1;
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (!indices.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file) as number, low.get(next) as number));
      } else if (onStack.has(next)) low.set(file, Math.min(low.get(file) as number, indices.get(next) as number));
    }
    if (low.get(file) === indices.get(file)) {
      const component: string[] = [];
      for (;;) {
        const top = stack.pop() as string;
        onStack.delete(top);
        component.push(top);
        if (top === file) break;
      }
      if (component.length > 1 || (graph.get(file) ?? []).includes(file)) circles.push(component.sort());
    }
  };
  for (const file of [...graph.keys()].sort()) if (!indices.has(file)) visit(file);
  return circles;
}

/**
 * Rank of a file in the design map: an import may go to a file of the same or a lower rank only.
 * functions/: core (0) ← adapters (1) ← handlers (2). lab/: the simulator's parts (0) ← the
 * simulator (1) ← the policies (2) ← the benchmark and the generator (3) ← reports (4) ← the command lines (5).
 * Files outside these rooms (or not listed) are unranked and not checked.
 */
export function rankOf(file: string): number | undefined {
  if (file.startsWith('functions/core/')) return 0;
  if (file.startsWith('functions/adapters/')) return 1;
  if (file.startsWith('functions/consumer/') || file.startsWith('functions/governor/')) return 2;
  if (!file.startsWith('lab/')) return undefined;
  const name = file.slice('lab/'.length);
  if (name.startsWith('sim/') || ['arrays.ts', 'heap.ts', 'rng.ts', 'model.ts', 'trace.ts'].includes(name)) return 0;
  if (name === 'sim.ts') return 1;
  if (['policies.ts', 'overflow.ts', 'floor.ts'].includes(name)) return 2;
  if (['bench.ts', 'generate.ts', 'targets.ts'].includes(name)) return 3;
  if (['report.ts', 'charts.ts', 'classes.ts'].includes(name)) return 4;
  if (['cli.ts', 'overflow-bench.ts'].includes(name)) return 5;
  return undefined;
}

/** Imports from a ranked file to a file of a higher rank (or, from lab/, to anything outside functions/core). */
export function upwardArrows(graph: ImportGraph): string[] {
  const arrows: string[] = [];
  for (const [file, targets] of graph) {
    const from = rankOf(file);
    if (from === undefined) continue;
    for (const target of targets) {
      const labLeaves = file.startsWith('lab/') && !target.startsWith('lab/') && !target.startsWith('functions/core/');
      const to = rankOf(target);
      const coreLeaves = file.startsWith('functions/core/') && !target.startsWith('functions/core/');
      if (labLeaves || coreLeaves || (to !== undefined && to > from && sameRoom(file, target)))
        arrows.push(`${file} → ${target}`);
    }
  }
  return arrows.sort();
}

function sameRoom(a: string, b: string): boolean {
  return a.split('/')[0] === b.split('/')[0];
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(import.meta.filename ?? '')) {
  const root = resolve(dirname(import.meta.filename ?? ''), '..', '..');
  const dirs = process.argv.slice(2);
  const graph = importGraph(root, dirs.length > 0 ? dirs : ['functions', 'lab']);
  const circles = importCircles(graph);
  const arrows = upwardArrows(graph);
  process.stdout.write(`${graph.size} files; ${circles.length} import circle(s); ${arrows.length} upward arrow(s)\n`);
  for (const circle of circles) process.stdout.write(`  circle of ${circle.length}: ${circle.join(', ')}\n`);
  for (const arrow of arrows) process.stdout.write(`  upward: ${arrow}\n`);
}
