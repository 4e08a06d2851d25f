/** The summary's invariant rows: "announced" compares events heard with every result that is announced. */
import { describe, expect, it } from 'vitest';
import { faultRows } from '../../bin/commands/start-faults.js';
import type { DemoSummary } from '../../local/demo/summary.js';

const summary = (fields: Partial<DemoSummary>) =>
  ({
    paidTwice: 0,
    paidTwiceBeyondLostIds: 0,
    duplicateSolves: 0,
    announced: 0,
    solved: 0,
    failed: 0,
    rejected: 0,
    dlqWithRejectedRecord: 0,
    solvedNotAnnounced: 0,
    validInDlq: 0,
    dlqDuplicates: 0,
    dlqDuplicatesUnexplained: 0,
    unsent: 0,
    consumer: { idsLostInCrashes: 0 },
    ...fields,
  }) as DemoSummary;

describe('the announced row', () => {
  it('counts a refusal with a record (announced, then dead-lettered) among the results it compares with', () => {
    const rows = faultRows(summary({ announced: 20, solved: 18, failed: 1, dlqWithRejectedRecord: 1 }));
    expect(rows.find(([name]) => name === 'announced')?.[1]).toBe('20 of 20');
  });
});
