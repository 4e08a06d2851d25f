/**
 * The trace generator and the generated benchmark on a small N: every class is drawn, every
 * drawn trace is a valid trace file that replays the same, the draws are deterministic, and a few
 * traces run end to end against their fair floor with every target judged.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { classFigures, runGenerated } from '../../lab/classes.js';
import { generateTraces, TRACE_CLASSES } from '../../lab/generate.js';
import { TARGET_KEYS } from '../../lab/targets.js';
import { expectedArrivals, parseTrace } from '../../lab/trace.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SLOTS = Object.values(TRACE_CLASSES).reduce((sum, n) => sum + n, 0);

describe('the trace generator', () => {
  const traces = generateTraces(SLOTS, 7);

  it('draws every class in one rotation, hard ones included', () => {
    expect(new Set(traces.map((t) => t.traceClass))).toEqual(new Set(Object.keys(TRACE_CLASSES)));
    const plans = traces.map((t) => t.trace.settings.planThreads);
    expect(Math.min(...plans)).toBeGreaterThanOrEqual(2);
    expect(Math.max(...plans)).toBeLessThanOrEqual(1000);
    const tiny = traces.filter((t) => t.traceClass === 'blips-tiny');
    const huge = traces.filter((t) => t.traceClass === 'blips-huge');
    expect(tiny.every((t) => t.trace.settings.planThreads <= 8 && t.trace.outages.length > 3)).toBe(true);
    expect(huge.every((t) => t.trace.settings.planThreads >= 500 && t.trace.outages.length > 3)).toBe(true);
    const takesAll = traces.filter((t) => t.traceClass === 'neighbour-takes-all');
    expect(takesAll.every((t) => t.trace.foreignThreads.value.includes(t.trace.settings.planThreads))).toBe(true);
  });

  it('writes each trace as a file --trace-file replays as the same trace, under the task bound', () => {
    for (const g of traces) {
      const replayed = parseTrace(JSON.parse(JSON.stringify(g.input)), 'replayed');
      expect(replayed).toEqual(g.trace);
      // The bound is on the drawn rates; rounding them to the file’s precision moves it by a few tasks.
      expect(expectedArrivals(g.trace)).toBeLessThanOrEqual(100_000 * 1.001);
    }
  });

  it('draws only valid traces on the benchmark’s seeds and beyond (a step rounded onto the end, a top-up of a near-idle trace)', () => {
    // gen-s3-908 had an arrivals step at 1199.7 s of a 1200 s trace; gen-s11-70 a top-up rounded to $0.
    expect(() => generateTraces(1000, 3)).not.toThrow();
    expect(() => generateTraces(300, 11)).not.toThrow();
  });

  it('draws loads as shares of the plan’s real capacity: at most 5× the plan, the mean solve as the file’s mix gives it', () => {
    // The file's shares are relative (normalized to sum 1); the capacity is the plan over the mix's mean solve.
    const meanOf = (trace: (typeof traces)[number]['trace']) =>
      trace.methods.reduce((sum, m) => {
        if (m.distribution === 'exponential') return sum + m.share * m.meanSeconds;
        const sigma = Math.log(m.p95Seconds / m.medianSeconds) / 1.6448536269514722;
        return sum + m.share * m.medianSeconds * Math.exp((sigma * sigma) / 2);
      }, 0);
    const drawn = generateTraces(300, 2);
    const peaks = drawn.map((g) => {
      const mean = meanOf(g.trace);
      const stated = Number(/mean solve ([\d.]+) s/.exec(g.input.description ?? '')?.[1]);
      expect(stated, g.input.name).toBeCloseTo(mean, 0);
      const peakRate = Math.max(...g.input.arrivals.map((a) => a.perSecond));
      return (peakRate * mean) / g.trace.settings.planThreads;
    });
    expect(Math.max(...peaks)).toBeLessThanOrEqual(5 * 1.001);
    // …and the overloaded ones reach past the plan.
    expect(peaks.filter((p) => p > 2).length).toBeGreaterThan(30);
  });

  it('draws the same traces for the same seed, whatever N', () => {
    const again = generateTraces(5, 7);
    expect(again.map((t) => t.input)).toEqual(traces.slice(0, 5).map((t) => t.input));
    expect(generateTraces(5, 8).map((t) => t.input.name)).not.toEqual(again.map((t) => t.input.name));
  });

  it('runs a small N against the fair floor and judges every target, per class', () => {
    // The four smallest traces of the rotation, so this stays quick.
    const small = [...traces].sort((a, b) => expectedArrivals(a.trace) - expectedArrivals(b.trace)).slice(0, 4);
    const runs = runGenerated(small, { seed: 7 });
    for (const run of runs) {
      expect(run.runs.map((r) => r.policy)).toEqual(['governor', 'oracle-ramp', 'oracle-park', 'lambda-fixed']);
      expect(run.verdict.targets.map((t) => t.key)).toEqual([...TARGET_KEYS]);
      for (const t of run.verdict.targets) if (!t.pass) expect(t.cause).toBeTruthy();
    }
    const all = classFigures(runs).at(-1);
    expect(all?.traces).toBe(4);
  });

  it('replays a written trace through --trace-file with the seed it ran with, judged by the same targets', () => {
    // Before: the file kept neither its seed (each trace runs with seed + its index; a replay used
    // 1) nor its judge (--trace-file read the shipped traces' targets), so a failing trace passed
    // on replay: gen-s3-2-combined missed "unfinished ≤ floor" and replayed as "4 of 4 met".
    const [smallest] = [...traces].sort((a, b) => expectedArrivals(a.trace) - expectedArrivals(b.trace));
    if (smallest === undefined) throw new Error('no trace drawn');
    const [run] = runGenerated([smallest], { seed: 40, offset: 3 });
    if (run === undefined) throw new Error('no run');
    expect(run.seed).toBe(43);
    const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-replay-'));
    try {
      const file = join(dir, 'written.json');
      writeFileSync(
        file,
        JSON.stringify({ ...smallest.input, generated: { class: smallest.traceClass, seed: run.seed } }),
      );
      const replay = spawnSync(
        process.execPath,
        ['--import', 'tsx', 'lab/cli.ts', '--trace-file', file, '--no-report', '--json'],
        {
          cwd: ROOT,
          encoding: 'utf8',
          timeout: 120_000,
        },
      );
      expect(replay.status, replay.stderr).toBe(0);
      const replayed = JSON.parse(replay.stdout) as { generated: { seed: number; verdict: typeof run.verdict }[] };
      expect(replayed.generated).toHaveLength(1);
      expect(replayed.generated[0]?.seed).toBe(43);
      const figures = (v: typeof run.verdict) => v.targets.map((t) => [t.key, t.pass, t.detail]);
      expect(figures(replayed.generated[0]?.verdict as typeof run.verdict)).toEqual(figures(run.verdict));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 150_000);
});

describe('the lab’s command line refuses what it would ignore or never finish', () => {
  const bench = (...args: string[]) =>
    spawnSync(process.execPath, ['--import', 'tsx', 'lab/cli.ts', ...args], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
    });

  it('names the flag, exits 2, and runs nothing', () => {
    // Before: `--classes ,` drew forever; these flags were ignored with exit 0; a pause of 0 s hung a
    // pool's retries; an unwritable --out ended the runs with a stack trace.
    const cases: [string[], RegExp][] = [
      [['--generate', '2', '--classes', ','], /^--classes names no class/],
      [
        ['--generate', '1', '--trace-file', '/nonexistent.json', '--policy', 'governor'],
        /^--trace-file, --policy do nothing with --generate/,
      ],
      [['--trace', 'steady', '--jobs', '2'], /^--jobs only works with --generate N/],
      [['--trace', 'steady', '--out', '/proc/version/x'], /^--out: cannot write to \/proc\/version\/x/],
    ];
    for (const [args, message] of cases) {
      const run = bench(...args);
      expect(run.status, args.join(' ')).toBe(2);
      expect(run.stderr, args.join(' ')).toMatch(message);
      expect(run.stdout).toBe('');
    }
    // Two traces of one name merged their targets ("6 of 6" for two traces of 3 checks).
    const twice = bench('--trace', 'steady', '--trace-file', join(ROOT, 'lab/traces/steady.json'));
    expect(twice.status).toBe(2);
    expect(twice.stderr).toMatch(/^Two traces are named "steady"/);
    // bench:overflow ran nothing for an unknown name and said no run breached its cap.
    const overflow = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'lab/overflow-bench.ts', '--trace', 'typo-trace'],
      {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 60_000,
      },
    );
    expect(overflow.status).toBe(2);
    expect(overflow.stderr).toMatch(/^Unknown trace typo-trace/);
    // --model twice adds up, as the comma form does (the first was dropped).
    const model = (...settings: string[]) =>
      bench('--trace', 'steady', '--policy', 'thread-pool', '--no-report', '--json', ...settings).stdout.replace(
        /"wallMs":\s*[\d.]+/g,
        '',
      );
    expect(model('--model', 'threadStartSeconds=9', '--model', 'backoffBaseSeconds=3')).toBe(
      model('--model', 'threadStartSeconds=9,backoffBaseSeconds=3'),
    );
    expect(model('--model', 'threadStartSeconds=9', '--model', 'backoffBaseSeconds=3')).not.toBe(
      model('--model', 'backoffBaseSeconds=3'),
    );
    const zero = bench('--trace', 'steady', '--model', 'backoffBaseSeconds=0');
    expect(zero.status).not.toBe(0);
    expect(zero.stderr).toMatch(/backoffBaseSeconds takes a number above 0/);
  }, 120_000);

  it('records in results.json and the report what the run was made with besides its traces', () => {
    // Before: runs of another --model, --solve-mode or --poll-loss wrote the same files but for their figures.
    const out = mkdtempSync(join(tmpdir(), 'captcha-fleet-lab-out-'));
    try {
      const run = bench(
        '--trace',
        'steady',
        '--policy',
        'governor',
        '--out',
        out,
        '--solve-mode',
        'wait',
        '--model',
        'backoffBaseSeconds=2',
        '--poll-loss',
      );
      expect(run.status, run.stderr).toBe(0);
      const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8')) as { run: unknown };
      expect(results.run).toEqual({ seed: 1, solveMode: 'wait', model: { backoffBaseSeconds: 2 }, pollLoss: true });
      expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain(
        'run with --solve-mode wait --model backoffBaseSeconds=2 --poll-loss',
      );
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 60_000);

  it('writes a failing trace with the --solve-mode and --model it ran with, and replays it so', () => {
    // Before: the file kept neither; a trace that missed under --solve-mode wait replayed parked and met every target.
    const out = mkdtempSync(join(tmpdir(), 'captcha-fleet-lab-failing-'));
    try {
      const drawn = bench(
        '--generate',
        '6',
        '--classes',
        'combined',
        '--seed',
        '11',
        '--jobs',
        '1',
        '--solve-mode',
        'wait',
        '--model',
        'backoffBaseSeconds=2',
        '--out',
        out,
        '--json',
      );
      expect(drawn.status, drawn.stderr).toBe(0);
      const failing = readdirSync(join(out, 'failing'));
      expect(failing.length).toBeGreaterThan(0);
      const name = failing.sort()[0] as string;
      const file = join(out, 'failing', name);
      const written = JSON.parse(readFileSync(file, 'utf8')) as {
        fleet: { solveMode?: string };
        generated: { model?: string };
      };
      expect(written.fleet.solveMode).toBe('wait');
      expect(written.generated.model).toBe('backoffBaseSeconds=2');
      type Verdict = { targets: { key: string; pass: boolean; detail: string }[] };
      const figures = (verdict: Verdict | undefined) => verdict?.targets.map((t) => [t.key, t.pass, t.detail]);
      const trace = name.replace(/\.json$/, '');
      const ran = (JSON.parse(drawn.stdout) as { traces: { name: string; verdict: Verdict }[] }).traces.find(
        (t) => t.name === trace,
      );
      const replay = bench('--trace-file', file, '--no-report', '--json');
      expect(replay.status, replay.stderr).toBe(0);
      const replayed = (JSON.parse(replay.stdout) as { generated: { trace: string; verdict: Verdict }[] }).generated;
      expect(ran?.verdict.targets.some((t) => !t.pass)).toBe(true);
      expect(figures(replayed.find((g) => g.trace === trace)?.verdict)).toEqual(figures(ran?.verdict));
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 300_000);

  it('judges a trace where nothing is solved by what can be compared (no p95 on either side is no miss)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'captcha-fleet-idle-'));
    try {
      const file = join(dir, 'idle.json');
      writeFileSync(
        file,
        JSON.stringify({
          name: 'idle-only',
          durationSeconds: 600,
          fleet: { planThreads: 10 },
          arrivals: [{ at: 0, perSecond: 0 }],
          methods: [{ method: 'turnstile', share: 1, medianSeconds: 8, p95Seconds: 18 }],
        }),
      );
      const run = bench('--trace-file', file, '--policy', 'governor,oracle', '--no-report');
      expect(run.status, run.stderr).toBe(0);
      expect(run.stdout).toMatch(/PASS {2}idle-only: p95 ≤ 1\.2 × oracle/);
      expect(run.stdout).not.toMatch(/MISS/);
      // The fixed maximum's target the same (it read "MISS p95 ≤ 1.05 × lambda-fixed — governor – s vs lambda-fixed – s").
      const fixed = bench('--trace-file', file, '--policy', 'governor,lambda-fixed', '--no-report');
      expect(fixed.status, fixed.stderr).toBe(0);
      expect(fixed.stdout).toMatch(/PASS {2}idle-only: p95 ≤ 1\.05 × lambda-fixed/);
      expect(fixed.stdout).not.toMatch(/MISS/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
