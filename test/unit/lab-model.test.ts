/**
 * The lab's `--model` settings (lab/model.ts, parseModelSettings): a known numeric constant and a
 * number in its range, or an error naming the setting and what it takes, before any run starts
 * (a ramp step of 0 s once ended the run in a RangeError from the ramp's buffer).
 */
import { describe, expect, it } from 'vitest';
import { DEFAULT_MODEL, numericModelKeys, parseModelSettings } from '../../lab/model.js';

describe('--model settings', () => {
  it('reads name=value pairs of the numeric constants', () => {
    expect(parseModelSettings('watchSecondsPerMinute=60, leaseWaitPollSeconds=0.03')).toEqual({
      watchSecondsPerMinute: 60,
      leaseWaitPollSeconds: 0.03,
    });
    expect(parseModelSettings('probeWithWaitingTask=1')).toEqual({ probeWithWaitingTask: 1 });
  });

  it('offers every numeric constant and no other', () => {
    const keys = numericModelKeys();
    expect(keys).toContain('esmStepSeconds');
    expect(keys).not.toContain('consumerKeepsUnansweredLease');
    expect(keys.every((key) => typeof DEFAULT_MODEL[key] === 'number')).toBe(true);
  });

  const rejected: { value: string; message: string }[] = [
    { value: 'foo=1', message: '"foo=1": expected name=number, the name one of' },
    { value: 'consumerKeepsUnansweredLease=0', message: 'the name one of' },
    { value: 'watchPollSeconds', message: 'watchPollSeconds=: watchPollSeconds takes a number 0 or more' },
    { value: 'watchPollSeconds=', message: 'takes a number 0 or more' },
    { value: 'watchPollSeconds=abc', message: 'watchPollSeconds=abc: watchPollSeconds takes a number 0 or more' },
    { value: 'watchPollSeconds=1=2', message: 'takes a number 0 or more' },
    {
      value: 'watchPollSeconds=-1',
      message: 'watchPollSeconds=-1: watchPollSeconds takes a number 0 or more (its default: 0.1)',
    },
    { value: 'esmStepSeconds=0', message: 'esmStepSeconds=0: esmStepSeconds takes a number above 0' },
    // A pool's wait between tries is min(backoffMaxSeconds, …): 0 retried through an outage without the clock moving (hung).
    { value: 'backoffMaxSeconds=0', message: 'backoffMaxSeconds=0: backoffMaxSeconds takes a number above 0' },
    { value: 'watchSecondsPerMinute=61', message: 'takes a number 0 or more, at most 60' },
    { value: 'consumerMaxOverCapRetries=1.5', message: 'takes a number 0 or more, a whole number' },
    { value: 'probeWithWaitingTask=2', message: 'at most 1, a whole number' },
    { value: 'watchPollSeconds=Infinity', message: 'takes a number 0 or more' },
  ];

  it.each(rejected)('rejects $value, naming it and its range', ({ value, message }) => {
    expect(() => parseModelSettings(value)).toThrow(message);
  });
});
