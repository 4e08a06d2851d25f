/**
 * The README's task table lists every method the task schema takes, with exactly its required and
 * its optional parameters: a method or a parameter added to (or dropped from) the schema without
 * the table fails here.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TaskSchema } from '../../functions/core/task.js';
import { METHOD_PARAMS } from '../../functions/core/task-params.js';
import { ROOT } from '../infra/synth-helpers.js';

type ParamShape = Record<string, { safeParse(value: unknown): { success: boolean } }>;

/** Each method's required and optional params, read from the schema itself. */
function schemaParams(): Map<string, { required: string[]; optional: string[] }> {
  const methods = new Map<string, { required: string[]; optional: string[] }>();
  for (const option of TaskSchema.options) {
    const method = String(option.shape.method.value);
    const shape = (option.shape.params as unknown as { shape: ParamShape }).shape;
    const names = Object.keys(shape);
    const optional = names.filter((name) => shape[name]?.safeParse(undefined).success);
    methods.set(method, {
      required: names.filter((name) => !optional.includes(name)).sort(),
      optional: optional.sort(),
    });
  }
  return methods;
}

/** The README's table rows: method → required and optional names (the backticked ones). */
function readmeParams(): Map<string, { required: string[]; optional: string[] }> {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const rows = new Map<string, { required: string[]; optional: string[] }>();
  const names = (cell: string) => [...cell.matchAll(/`([^`]+)`/g)].map((m) => m[1] as string).sort();
  for (const line of readme.split('\n')) {
    const cells = line.split('|').map((cell) => cell.trim());
    // | `method` | what | required | optional |
    if (cells.length !== 6 || !/^`[a-z_0-9]+`$/.test(cells[1] ?? '')) continue;
    rows.set((cells[1] as string).slice(1, -1), { required: names(cells[3] ?? ''), optional: names(cells[4] ?? '') });
  }
  return rows;
}

describe("the README's task table", () => {
  it('lists every method of the schema, and no other', () => {
    expect([...readmeParams().keys()].sort()).toEqual([...schemaParams().keys()].sort());
    expect([...schemaParams().keys()].sort()).toEqual(Object.keys(METHOD_PARAMS).sort());
  });

  it('gives each method exactly its required and optional parameters', () => {
    const readme = readmeParams();
    for (const [method, params] of schemaParams()) expect(readme.get(method), method).toEqual(params);
  });
});
