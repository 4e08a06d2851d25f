/**
 * The design map's arrows, checked on the source (test/helpers/import-graph.ts): no import
 * circle in functions/ or lab/, and no upward import (handlers → adapters → core; lab/'s layers;
 * lab/ imports nothing outside functions/core/).
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importCircles, importGraph, upwardArrows } from '../helpers/import-graph.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

describe('the design map', () => {
  const graph = importGraph(root, ['functions', 'lab']);

  it('has no import circle in functions/ or lab/', () => {
    expect(importCircles(graph)).toEqual([]);
  });

  it('has no upward import in functions/ or lab/', () => {
    expect(upwardArrows(graph)).toEqual([]);
  });

  it('finds a circle and an upward arrow when there is one (the checker can fail)', () => {
    const made = new Map([
      ['lab/sim.ts', ['lab/policies.ts']],
      ['lab/policies.ts', ['lab/sim.ts']],
    ]);
    expect(importCircles(made)).toEqual([['lab/policies.ts', 'lab/sim.ts']]);
    expect(upwardArrows(made)).toEqual(['lab/sim.ts → lab/policies.ts']);
  });
});
