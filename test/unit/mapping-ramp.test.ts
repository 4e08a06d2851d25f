import { describe, expect, it } from 'vitest';
import { MappingRamp, SQS_MAPPING_RAMP } from '../../functions/core/mapping-ramp.js';

const params = SQS_MAPPING_RAMP;

/** Step the ramp `n` times with `backlog` waiting and every allowed invocation busy. */
function stepBusy(ramp: MappingRamp, n: number, backlog = 100): void {
  for (let i = 0; i < n; i++) ramp.step(backlog, Math.floor(ramp.limit()));
}

describe('MappingRamp (Lambda SQS event source mapping scaling)', () => {
  it('starts at five invocations and adds 300 a minute while messages wait and all are busy', () => {
    const ramp = new MappingRamp(params, 600);
    expect(ramp.limit()).toBe(5);
    stepBusy(ramp, 1);
    expect(ramp.limit()).toBe(10);
    stepBusy(ramp, 59);
    expect(ramp.limit()).toBe(305);
    stepBusy(ramp, 120);
    expect(ramp.limit()).toBe(600);
  });

  it('does not grow while invocations are free or no message waits', () => {
    const ramp = new MappingRamp(params, 100);
    ramp.step(100, 3);
    expect(ramp.limit()).toBe(5);
    ramp.step(0, 5);
    expect(ramp.limit()).toBe(5);
  });

  it('never allows more than its ceiling, and a small ceiling holds from the start', () => {
    const ramp = new MappingRamp(params, 2);
    expect(ramp.limit()).toBe(2);
    stepBusy(ramp, 10);
    expect(ramp.limit()).toBe(2);
  });

  it('a raised ceiling is climbed to at the ramp, not at once (a lowered one binds at once)', () => {
    const ramp = new MappingRamp(params, 20);
    stepBusy(ramp, 5);
    expect(ramp.limit()).toBe(20);
    ramp.set(2, true);
    expect(ramp.limit()).toBe(2);
    ramp.set(20, true);
    expect(ramp.limit()).toBe(2);
    stepBusy(ramp, 1);
    expect(ramp.limit()).toBe(7);
    stepBusy(ramp, 3);
    expect(ramp.limit()).toBe(20);
  });

  it('a disabled mapping allows nothing and starts over from five when enabled again', () => {
    const ramp = new MappingRamp(params, 50);
    stepBusy(ramp, 10);
    expect(ramp.limit()).toBe(50);
    ramp.set(50, false);
    expect(ramp.limit()).toBe(0);
    stepBusy(ramp, 3);
    expect(ramp.limit()).toBe(0);
    ramp.set(50, true);
    expect(ramp.limit()).toBe(5);
  });

  it('a mapping created disabled allows nothing until enabled', () => {
    const ramp = new MappingRamp(params, 10, false);
    expect(ramp.limit()).toBe(0);
    ramp.set(10, true);
    expect(ramp.limit()).toBe(5);
  });

  it('with the queue empty, shrinks to the most used within the last minute, never under five', () => {
    const ramp = new MappingRamp(params, 100);
    stepBusy(ramp, 19);
    expect(ramp.limit()).toBe(100);
    // The queue drains: the most used in the last minute was 95 (the step before the last climb).
    for (let i = 0; i < 10; i++) ramp.step(0, 30);
    expect(ramp.limit()).toBe(95);
    // A minute on, the busiest step left in the window had 30.
    for (let i = 0; i < 51; i++) ramp.step(0, 0);
    expect(ramp.limit()).toBe(30);
    for (let i = 0; i < 60; i++) ramp.step(0, 0);
    expect(ramp.limit()).toBe(5);
  });

  it('an invocation observed between steps counts in the minute it ran', () => {
    const ramp = new MappingRamp(params, 100);
    stepBusy(ramp, 19);
    for (let i = 0; i < 61; i++) ramp.step(0, 0);
    expect(ramp.limit()).toBe(5);
    ramp.observe(40);
    ramp.step(0, 0);
    // 40 seen in that step, but the allowance does not rise on an empty queue.
    expect(ramp.limit()).toBe(5);
  });
});
