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
    idsCutInOutages: 0,
    consumer: { idsLostInCrashes: 0 },
    ...fields,
  }) as DemoSummary;

describe('the announced row', () => {
  it('counts a refusal with a record (announced, then dead-lettered) among the results it compares with', () => {
    const rows = faultRows(summary({ announced: 20, solved: 18, failed: 1, dlqWithRejectedRecord: 1 }));
    expect(rows.find(([name]) => name === 'announced')?.[1]).toBe('20 of 20');
  });
});

describe('the paid once row', () => {
  it('says which of the tasks paid twice the protocol explains: ids lost in crashes, answers an outage held past their request', () => {
    const crashes = faultRows(summary({ paidTwice: 2, consumer: { idsLostInCrashes: 2 } as DemoSummary['consumer'] }));
    expect(crashes.find(([name]) => name === 'paid once')?.[2]).toContain(
      '2 of them an id lost in a crash (2 solver id(s) lost)',
    );
    const outage = faultRows(summary({ paidTwice: 3, idsCutInOutages: 2, paidTwiceBeyondLostIds: 1 }));
    expect(outage.find(([name]) => name === 'paid once')?.[2]).toContain(
      '2 of them an id lost in a crash (0 lost) or in an answer an outage held past its request (2 cut)',
    );
  });
});
