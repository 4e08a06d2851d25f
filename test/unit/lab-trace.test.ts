/**
 * Trace files: a bad file is refused with its name and every problem, by JSON path; the shipped
 * traces are valid.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { shippedTraces } from '../../lab/bench.js';
import { loadTraceFile, TraceFileError, valueAt } from '../../lab/trace.js';

const dir = mkdtempSync(join(tmpdir(), 'lab-trace-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const good = {
  name: 'mine',
  durationSeconds: 600,
  arrivals: [{ at: 0, perSecond: 1 }],
  methods: [{ method: 'turnstile', share: 1, medianSeconds: 8, p95Seconds: 18 }],
};

function write(name: string, content: unknown): string {
  const file = join(dir, name);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

function problemsOf(file: string): string[] {
  try {
    loadTraceFile(file);
  } catch (error) {
    expect(error).toBeInstanceOf(TraceFileError);
    expect((error as Error).message).toContain(file);
    return (error as TraceFileError).problems;
  }
  throw new Error('expected the trace to be refused');
}

describe('trace files', () => {
  it('loads a valid file with defaults filled in', () => {
    const trace = loadTraceFile(write('good.json', good));
    expect(trace.settings.planThreads).toBe(50);
    expect(trace.balance.pricePerSolveUsd).toBe(0);
    expect(valueAt(trace.foreignThreads, 300)).toBe(0);
  });

  it('names a missing field and an unknown method by their path', () => {
    const { arrivals: _arrivals, ...noArrivals } = good;
    const problems = problemsOf(
      write('bad-fields.json', {
        ...noArrivals,
        methods: [{ method: 'recaptcha', share: 1, medianSeconds: 8, p95Seconds: 9 }],
      }),
    );
    expect(problems.some((p) => p.startsWith('arrivals:'))).toBe(true);
    expect(problems.some((p) => p.startsWith('methods[0].method:'))).toBe(true);
  });

  it('refuses pieces out of order or past the end, a p95 under the median, and unusable fleet settings, all at once', () => {
    const problems = problemsOf(
      write('bad-logic.json', {
        ...good,
        fleet: { planThreads: 4, reservedThreads: 4 },
        arrivals: [
          { at: 0, perSecond: 1 },
          { at: 300, perSecond: 2 },
          { at: 200, perSecond: 1 },
          { at: 900, perSecond: 1 },
        ],
        methods: [{ method: 'turnstile', share: 1, medianSeconds: 8, p95Seconds: 5 }],
      }),
    );
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^arrivals\[2\]\.at: 200 is not after/),
        expect.stringMatching(/^arrivals\[3\]\.at: 900 is not before durationSeconds 600/),
        expect.stringMatching(/^methods\[0\]\.p95Seconds: 5 is below medianSeconds 8/),
        expect.stringMatching(/^fleet\.reservedThreads:/),
      ]),
    );
  });

  it('refuses a fleet key that is not a setting, the overflow block it does not model, and a trace past its task bound', () => {
    // Before: `planThread` ran the default plan of 50 threads unsaid; the overflow block was
    // ignored; 10⁹ tasks a second ate memory until killed, with nothing printed.
    expect(problemsOf(write('fleet-keys.json', { ...good, fleet: { planThread: 10, overflow: {} } }))).toEqual([
      'fleet.planThread: not a fleet setting (did you mean planThreads?)',
      'fleet.overflow: the lab’s traces do not model the overflow lane (npm run bench:overflow does)',
    ]);
    expect(problemsOf(write('huge.json', { ...good, arrivals: [{ at: 0, perSecond: 1e9 }] }))).toEqual([
      expect.stringMatching(/^arrivals: about 600,000,000,000 tasks expected; the lab runs at most 5,000,000/),
    ]);
    expect(loadTraceFile(write('at-bound.json', { ...good, arrivals: [{ at: 0, perSecond: 8_000 }] })).name).toBe(
      'mine',
    );
  });

  it('refuses a plan past the 1 000 threads one task per invocation reaches, naming the fix the lab takes', () => {
    // The settings' own fix (a batch of 2 tasks) is one the lab refuses: it models one task per invocation.
    expect(problemsOf(write('big-plan.json', { ...good, fleet: { planThreads: 1500 } }))).toEqual([
      expect.stringMatching(
        /^fleet\.planThreads: .*500 paid threads would never be used; the lab models one task per invocation, so a fleet of at most 1000 usable threads: set fleet\.reservedThreads/,
      ),
    ]);
    expect(
      loadTraceFile(write('big-plan-reserved.json', { ...good, fleet: { planThreads: 1500, reservedThreads: 500 } }))
        .name,
    ).toBe('mine');
  });

  it('refuses a method twice in the mix and a distribution’s fields given to the other', () => {
    // Before: both taken, the median and p95 of an exponential (or the mean of a lognormal) dropped unsaid.
    const problems = problemsOf(
      write('mix.json', {
        ...good,
        methods: [
          { method: 'turnstile', share: 1, distribution: 'exponential', meanSeconds: 10, medianSeconds: 1000 },
          { method: 'turnstile', share: 1, medianSeconds: 8, p95Seconds: 18, meanSeconds: 5000 },
        ],
      }),
    );
    expect(problems).toEqual([
      'methods[0]: the exponential distribution takes meanSeconds only (not medianSeconds or p95Seconds)',
      'methods[1].method: turnstile is in the mix twice (give one entry its whole share)',
      'methods[1].meanSeconds: the lognormal distribution takes medianSeconds and p95Seconds, not a mean',
    ]);
  });

  it('carries a generated trace’s class and seed, and refuses other fields there', () => {
    const trace = loadTraceFile(write('generated.json', { ...good, generated: { class: 'combined', seed: 5 } }));
    expect(trace.generated).toEqual({ class: 'combined', seed: 5 });
    expect(problemsOf(write('generated-bad.json', { ...good, generated: { class: 'combined', seed: -1 } }))).toEqual([
      expect.stringMatching(/^generated\.seed:/),
    ]);
  });

  it('refuses an empty list of neighbour or slowdown pieces, a class the generator has not, a bad model, and outages out of order', () => {
    // Before: the empty lists ended the run in "RangeError: index 0 outside 0..-1", the class was judged as given.
    expect(problemsOf(write('empty-foreign.json', { ...good, foreignThreads: [] }))).toEqual([
      expect.stringMatching(/^foreignThreads: at least one piece/),
    ]);
    expect(problemsOf(write('empty-factor.json', { ...good, solveTimeFactor: [] }))).toEqual([
      expect.stringMatching(/^solveTimeFactor: at least one piece/),
    ]);
    expect(problemsOf(write('class.json', { ...good, generated: { class: 'nope', seed: 3 } }))).toEqual([
      expect.stringMatching(/^generated\.class:/),
    ]);
    expect(
      problemsOf(
        write('model.json', { ...good, generated: { class: 'combined', seed: 3, model: 'esmStepSeconds=0' } }),
      ),
    ).toEqual([expect.stringMatching(/^generated\.model: .*esmStepSeconds takes a number above 0/)]);
    const outages = [
      { at: 100, durationSeconds: 10 },
      { at: 50, durationSeconds: 10 },
    ];
    expect(problemsOf(write('outages.json', { ...good, outages }))).toEqual([
      "outages[1].at: 50 is before the previous outage's 100 (list them in order)",
    ]);
  });

  it('says when the file is not JSON or cannot be read', () => {
    expect(problemsOf(write('broken.json', '{ "name": '))[0]).toMatch(/^is not valid JSON/);
    expect(problemsOf(join(dir, 'absent.json'))[0]).toMatch(/^cannot be read/);
  });

  it('ships valid traces covering the scenarios of the benchmark', () => {
    const names = shippedTraces().map((t) => t.name);
    expect(names).toEqual(
      expect.arrayContaining([
        'steady',
        'sale-day-surge',
        'sawtooth',
        'spike-and-drop',
        'balance-halt',
        'foreign-threads',
        'solver-slowdown',
      ]),
    );
  });
});
