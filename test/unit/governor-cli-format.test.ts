/**
 * What `governor --once` prints of a parked fleet's decision: the thread ceilings open as leases,
 * the mappings take the submitters, and both are shown (before, the output said "normal 10
 * (enabled)" while the mapping was set to 2, and a dry run could not tell an operator what each
 * mapping would be set to).
 */
import { describe, expect, it } from 'vitest';
import { formatTick, onceLog, redactedError } from '../../bin/commands/governor.js';
import { createRedactor } from '../../functions/core/redaction.js';
import { decide, governorConfigFrom, initialState } from '../../functions/core/governor/policy.js';
import { decisionLogFields, type TickRecord } from '../../functions/governor/loop.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { governorSignals, laneSignals, T0 } from '../helpers/governor.js';

describe('governor --once output of a parked decision', () => {
  it('shows the mappings’ MaximumConcurrency (the submitters) beside the thread ceilings, in text and JSON', () => {
    const config = governorConfigFrom(resolveSettings({ planThreads: 10 }), { highLane: true });
    const base = governorSignals(T0, {}, { ceiling: 8, enabled: true, backlog: 60 });
    const signals = {
      ...base,
      lanes: { ...base.lanes, high: laneSignals({ ceiling: 2, enabled: false, backlog: 0 }) },
    };
    const decision = decide(signals, initialState(config, T0), config);
    const parked = { ...decision, submitters: { normal: 2, high: 2 } };
    const record = { signals, decision: parked, tick: undefined, applied: false, changes: [] } as unknown as TickRecord;
    expect(formatTick(record)).toMatch(
      /\n {2}mappings {3}MaximumConcurrency normal 2, high 2 \(the invocations that submit/,
    );
    expect(decisionLogFields(record)).toMatchObject({ submitters: { normal: 2, high: 2 } });
    // The waiting design has none: no such line, no such field.
    const waitingConfig = governorConfigFrom(resolveSettings({ planThreads: 10, solveMode: 'wait' }), {
      highLane: true,
    });
    const waiting = {
      ...record,
      decision: decide(signals, initialState(waitingConfig, T0), waitingConfig),
    } as TickRecord;
    expect(formatTick(waiting)).not.toContain('MaximumConcurrency');
    expect(decisionLogFields(waiting)).not.toHaveProperty('submitters');
  });
});

describe('governor --once prints nothing of the solver key', () => {
  it('redacts its warnings, errors and failure with the keys the governor read, and any key= parameter before one is read', () => {
    // GIVEN the CLI's log on the redactor the governor is wired with
    const redactor = createRedactor();
    const { log, warnings } = onceLog(redactor);
    // WHEN a read fails naming a request's key parameter, the key is read, and later lines name it
    log.warn('balance read failed', {
      error: 'GET https://solver.example/res.php?key=0123abcd4567&action=getbalance: 503',
    });
    redactor.add('f00dfeed0123456789abcdef01234567');
    log.warn('governor probe failed', { error: 'ERROR_KEY_DOES_NOT_EXIST for f00dfeed0123456789abcdef01234567' });
    log.error('tick failed: f00dfeed0123456789abcdef01234567 refused');
    const failure = redactedError(
      Object.assign(new Error('in.php answered f00dfeed0123456789abcdef01234567'), { name: 'SolverHttpError' }),
      redactor,
    );
    // THEN no line and no failure holds the key or the parameter's value; each keeps its message and the error its name
    const printed = [...warnings, failure.message].join('\n');
    expect(printed).not.toContain('f00dfeed0123456789abcdef01234567');
    expect(printed).not.toContain('0123abcd4567');
    expect(warnings).toHaveLength(3);
    expect(warnings[0]).toMatch(/^balance read failed \(GET https:\/\/solver\.example\/res\.php\?key=/);
    expect(warnings[1]).toMatch(/^governor probe failed \(ERROR_KEY_DOES_NOT_EXIST for /);
    expect(failure.name).toBe('SolverHttpError');
    expect(failure.message).toMatch(/^in\.php answered /);
  });
});
