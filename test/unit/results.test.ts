import { describe, expect, it } from 'vitest';
import { isTerminal } from '../../functions/core/results.js';

describe('isTerminal', () => {
  it('accepts the three terminal statuses', () => {
    // Prepare
    const statuses = ['solved', 'failed', 'rejected'];
    // Act
    const terminal = statuses.map((status) => isTerminal(status));
    // Assess
    expect(terminal).toEqual([true, true, true]);
  });

  it('refuses a record still solving', () => {
    expect(isTerminal('solving')).toBe(false);
  });

  it('refuses a record read back without a status, or with one it does not know', () => {
    // Prepare: what a store may hand back for a half-written item.
    const record = { taskId: 'a' } as { taskId: string; status?: string };
    // Act / Assess
    expect(isTerminal(record.status)).toBe(false);
    expect(isTerminal('SOLVED')).toBe(false);
    expect(isTerminal(null)).toBe(false);
  });
});
