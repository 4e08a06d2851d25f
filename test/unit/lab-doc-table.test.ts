/**
 * docs/lab.md's generated table (lab/doc-table.ts): written from the runs' generated.json
 * documents, the pass share per class on every seed, an extra group when given, and the traces
 * above 1.5 × their floor before → after for every seed.
 */
import { describe, expect, it } from 'vitest';
import type { ClassFigures } from '../../lab/classes.js';
import { docTable, type GeneratedDocument, replaceTable } from '../../lab/doc-table.js';

function figures(traceClass: string, traces: number, passed: number, hardMisses: number): ClassFigures {
  return {
    traceClass: traceClass as ClassFigures['traceClass'],
    traces,
    passed,
    byTarget: { p95: passed, 'over-cap': traces, dlq: traces, unfinished: passed },
    worstRatio: null,
    hardMisses,
  };
}

function doc(seed: number, money: [number, number, number], all: [number, number, number]): GeneratedDocument {
  return { seed, classes: [figures('money-out', ...money), figures('all', ...all)] };
}

describe('the generated table', () => {
  const before = [doc(1, [10, 4, 1], [100, 70, 3]), doc(2, [10, 5, 0], [100, 72, 2])];
  const after = [doc(1, [10, 9, 0], [100, 90, 1]), doc(2, [10, 10, 0], [100, 95, 0])];

  it('gives every seed’s share per class, and the traces above 1.5 × their floor seed by seed', () => {
    const table = docTable(before, after).split('\n');
    expect(table[0]).toBe(
      '| class | before: seed 1 (100) · seed 2 (100) | after: seed 1 (100) · seed 2 (100) | traces > 1.5 × floor, before → after (seed 1 · seed 2) |',
    );
    expect(table[2]).toBe('| money-out | 40 % (4/10) · 50 % (5/10) | 90 % (9/10) · 100 % (10/10) | 1 → 0 · 0 → 0 |');
    expect(table[3]).toBe('| all | 70 % (70/100) · 72 % (72/100) | 90 % (90/100) · 95 % (95/100) | 3 → 1 · 2 → 0 |');
  });

  it('adds an extra group of runs under its label', () => {
    const table = docTable(before, after, { label: 'after, earlier floor', docs: [doc(1, [10, 8, 0], [100, 85, 1])] });
    expect(table.split('\n')[0]).toContain('| after, earlier floor: seed 1 (100) |');
    expect(table.split('\n')[2]).toContain('| 80 % (8/10) |');
  });

  it('replaces only the text between the markers', () => {
    const text = 'a\n<!-- generated-table -->\nold\n<!-- /generated-table -->\nb';
    expect(replaceTable(text, 'new')).toBe('a\n<!-- generated-table -->\nnew\n<!-- /generated-table -->\nb');
    expect(() => replaceTable('no markers', 'x')).toThrow(/generated-table/);
  });

  it('writes a named block and leaves the unnamed one (and other named ones) as they are', () => {
    const text = [
      '<!-- generated-table -->',
      'first',
      '<!-- /generated-table -->',
      '<!-- generated-table old-axis -->',
      'second',
      '<!-- /generated-table old-axis -->',
      '<!-- generated-table new-axis -->',
      'third',
      '<!-- /generated-table new-axis -->',
    ].join('\n');
    const out = replaceTable(text, 'NEW', 'new-axis');
    expect(out).toContain('<!-- generated-table -->\nfirst\n');
    expect(out).toContain('<!-- generated-table old-axis -->\nsecond\n');
    expect(out).toContain('<!-- generated-table new-axis -->\nNEW\n<!-- /generated-table new-axis -->');
    expect(replaceTable(text, 'X')).toContain('<!-- generated-table -->\nX\n<!-- /generated-table -->');
    expect(() => replaceTable(text, 'x', 'missing')).toThrow(/generated-table missing/);
  });
});
