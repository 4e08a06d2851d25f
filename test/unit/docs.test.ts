/**
 * Docs that cannot drift: every generated block (scripts/doc-blocks.ts) is what its generator
 * prints now, the flags table of docs/local.md is `start`'s flags, and every command line the docs
 * show uses only flags its command has (as `--help` lists them).
 */
import { readFileSync } from 'node:fs';
import { demoSummaryFixture } from '../helpers/demo-summary.js';
import { relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram } from '../../bin/program.js';
import { findBlocks, renderBlocks } from '../../scripts/doc-blocks.js';
import { monthParked, monthWaiting } from '../../scripts/cost-bill.js';
import { labJson, nodeFloor } from '../../scripts/doc-generators.js';
import { DEFAULT_COST_ASSUMPTIONS, fleetBill } from '../../functions/core/cost/fleet-bill.js';
import { AWS_PRICES } from '../../functions/core/cost/prices.js';
import { stackResources, standingLines } from '../../functions/core/cost/stack-charges.js';
import { markdownFiles, staleFiles } from '../../scripts/docs.js';
import { FLEET_RUNTIME } from '../../lib/fleet-function.js';
import { ROOT } from '../infra/synth-helpers.js';

/** Each command's long flags, as its help lists them. */
function flagsByCommand(): Map<string, Set<string>> {
  const flags = new Map<string, Set<string>>();
  for (const command of buildProgram().commands)
    flags.set(command.name(), new Set([...command.options.map((o) => o.long ?? ''), '--help']));
  return flags;
}

/** `file:line: captcha-fleet <command> … --flag` for every flag a docs command line uses that its command lacks. */
function unknownFlags(): string[] {
  const flags = flagsByCommand();
  const problems: string[] = [];
  for (const file of markdownFiles()) {
    readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, index) => {
        // The command up to the end of its code span or shell comment.
        for (const match of line.matchAll(/(?:captcha-fleet|npm start --)(?:\s+([a-z]+))?([^`#|]*)/g)) {
          const named = match[0].startsWith('npm start') ? 'start' : match[1];
          if (named === undefined || !flags.has(named)) continue;
          const tail = match[0].startsWith('npm start') ? `${match[1] ?? ''}${match[2] ?? ''}` : (match[2] ?? '');
          for (const flag of tail.match(/(?<![\w-])--[a-z][a-z0-9-]*/g) ?? [])
            if (!flags.get(named)?.has(flag))
              problems.push(`${relative(ROOT, file)}:${index + 1}: ${named} has no ${flag}`);
        }
      });
  }
  return problems;
}

describe('generated blocks', () => {
  it('are what their generators print now (`npm run docs` rewrites them)', async () => {
    expect((await staleFiles()).map((s) => s.file)).toEqual([]);
  });

  it('are replaced whole, and a block with no generator or no end is an error naming its line', async () => {
    const text = 'a\n<!-- generated: twice 3 -->\nold\nlines\n<!-- /generated -->\nb';
    const fresh = await renderBlocks(text, { twice: ([n]) => `${Number(n) * 2}\n` });
    expect(fresh).toBe('a\n<!-- generated: twice 3 -->\n6\n<!-- /generated -->\nb');
    await expect(renderBlocks(text, {}, 'x.md')).rejects.toThrow('x.md:2: no generator "twice"');
    expect(() => findBlocks('<!-- generated: help -->\ntext', 'y.md')).toThrow(
      'y.md:1: generated block help is never closed',
    );
  });
});

describe('CLI docs against --help', () => {
  it('docs/local.md lists exactly the flags of `start`', () => {
    const text = readFileSync(`${ROOT}/docs/local.md`, 'utf8');
    const section = text.slice(text.indexOf('## Flags'), text.indexOf('\n## ', text.indexOf('## Flags') + 1));
    const documented = [...section.matchAll(/^\| `(--[a-z0-9-]+)/gm)].map((m) => m[1]);
    const actual = [...(flagsByCommand().get('start') ?? [])].filter((flag) => flag !== '--help');
    expect(documented.sort()).toEqual(actual.sort());
  });

  it('every command line in the docs uses only flags its command has', () => {
    expect(unknownFlags()).toEqual([]);
  });
});

/** Every Markdown file's text, by its path from the root. */
function docs(): [string, string][] {
  return markdownFiles().map((file) => [relative(ROOT, file), readFileSync(file, 'utf8')]);
}

describe('figures the docs take from the code', () => {
  it('every Node.js floor the docs state is `engines.node`', () => {
    const floor = nodeFloor();
    const stated: string[] = [];
    for (const [file, text] of docs())
      for (const match of text.matchAll(
        /Node(?:\.js)?\s*(?:≥|>=)\s*(\d+(?:\.\d+)*)|Node(?:\.js)? (\d+(?:\.\d+)*) is the floor|engines[^.\n]{0,20}?(?:≥|>=)\s*(\d+(?:\.\d+)*)/g,
      ))
        stated.push(`${file}: ${match[1] ?? match[2] ?? match[3]}`);
    expect(stated.length).toBeGreaterThan(0);
    expect(stated.filter((claim) => !claim.endsWith(`: ${floor}`))).toEqual([]);
  });

  it('every Lambda runtime the docs state is the stack’s (FLEET_RUNTIME)', () => {
    const version = /^nodejs(\d+)\.x$/.exec(FLEET_RUNTIME.name)?.[1];
    expect(version).toBeDefined();
    const stated: string[] = [];
    for (const [file, text] of docs())
      for (const match of text.matchAll(
        /Node\.js (\d+)(?:,| \/) arm64|Lambdas? (?:runs? )?(?:on )?Node(?:\.js)? (\d+)|`nodejs(\d+)\.x`/g,
      ))
        stated.push(`${file}: ${match[1] ?? match[2] ?? match[3]}`);
    expect(stated.length).toBeGreaterThan(0);
    expect(stated.filter((claim) => !claim.endsWith(`: ${version}`))).toEqual([]);
  });

  it('the default column of docs/local.md’s flags table is each flag’s default', () => {
    const text = readFileSync(`${ROOT}/docs/local.md`, 'utf8');
    const section = text.slice(text.indexOf('## Flags'), text.indexOf('\n## ', text.indexOf('## Flags') + 1));
    const start = buildProgram().commands.find((command) => command.name() === 'start');
    const wrong: string[] = [];
    let compared = 0;
    for (const [, flag, column] of section.matchAll(/^\| `(--[a-z0-9-]+)[^`]*` \| ([^|]*) \|/gm)) {
      const option = start?.options.find((o) => o.long === flag);
      const value: unknown = option?.defaultValue;
      const shown = (column ?? '').trim().replace(/`/g, '');
      const expected =
        value === undefined
          ? undefined
          : value === false
            ? 'off'
            : Array.isArray(value) && value.length === 0
              ? 'none'
              : String(value);
      // A flag without a default says in words what stands in for it (`--solver-threads`, the governor, …).
      if (expected !== undefined) compared++;
      if (expected !== undefined && shown !== expected)
        wrong.push(`${flag}: docs say ${shown}, the flag's default is ${expected}`);
    }
    expect(wrong).toEqual([]);
    expect(compared).toBeGreaterThan(20);
  });

  it('the status and event examples are generated from the code', () => {
    const text = readFileSync(`${ROOT}/docs/lanes-events.md`, 'utf8');
    const generators = findBlocks(text).map((block) => `${block.generator} ${block.args.join(' ')}`.trim());
    expect(generators).toEqual(expect.arrayContaining(['event-source', 'status-example text', 'status-example json']));
  });
});

/**
 * Blocks a writer fills from a measured run (timing-dependent, so no generator can re-run it in
 * the suite): each is marked `<!-- NAME begin -->` … `<!-- NAME end -->`, and NAME is a writer here.
 */
const MEASURED_WRITERS: Readonly<Record<string, { command: string; firstLine: RegExp }>> = {
  'bench:faults': { command: 'npm run bench:faults -- --write-docs', firstLine: /^\d+ runs, seeds \d+–\d+, / },
};

describe('measured blocks', () => {
  it('each has a known writer, is closed, and holds what its writer prints (or nothing yet)', () => {
    const problems: string[] = [];
    for (const [file, text] of docs()) {
      for (const match of text.matchAll(/<!-- ([\w:-]+) begin -->\n([\s\S]*?)(<!-- \1 end -->|$)/g)) {
        const [, name = '', body = '', end] = match;
        const writer = MEASURED_WRITERS[name];
        if (writer === undefined) problems.push(`${file}: block ${name} has no known writer`);
        else if (!end) problems.push(`${file}: block ${name} is never closed`);
        else if (body.trim() !== '' && !writer.firstLine.test(body.trim()))
          problems.push(`${file}: block ${name} is not what \`${writer.command}\` writes`);
      }
    }
    expect(problems).toEqual([]);
  });
});

describe('commands the docs name', () => {
  it('every `npm run X` is a script of package.json, every `npx captcha-fleet X` a command', () => {
    const scripts = Object.keys(
      (JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as { scripts: Record<string, string> }).scripts,
    );
    const commands = buildProgram().commands.map((command) => command.name());
    const unknown: string[] = [];
    let named = 0;
    for (const [file, text] of docs()) {
      for (const [, script] of text.matchAll(/npm run ([a-z][a-z:-]*[a-z])/g)) {
        named++;
        if (!scripts.includes(script ?? '')) unknown.push(`${file}: npm run ${script}`);
      }
      for (const [, command] of text.matchAll(/npx captcha-fleet ([a-z][a-z-]*)/g)) {
        named++;
        if (!commands.includes(command ?? '')) unknown.push(`${file}: npx captcha-fleet ${command}`);
      }
    }
    expect(unknown).toEqual([]);
    expect(named).toBeGreaterThan(50);
  });
});

describe('the demo summary the docs show', () => {
  /** Every fenced block of the docs that shows a `start` summary, with its file. */
  function summaryExamples(): { file: string; lines: string[] }[] {
    const found: { file: string; lines: string[] }[] = [];
    for (const [file, text] of docs())
      for (const [, body = ''] of text.matchAll(/```[a-z]*\n([\s\S]*?)```/g))
        if (/^Summary \(\d+(\.\d+)? s\)$/m.test(body)) found.push({ file, lines: body.split('\n') });
    return found;
  }

  it('has the rows `start` prints, in its order, and the default workload’s lanes (seed 1)', async () => {
    const { formatSummary } = await import('../../bin/commands/start/summary-format.js');
    const { buildWorkload } = await import('../../local/demo.js');
    const items = buildWorkload({ tasks: 200, malformed: 3, seed: 1, highShare: 0.1 });
    const high = items.filter((item) => item.priority === 'high').length;
    const examples = summaryExamples();
    expect(examples.length).toBeGreaterThan(0);
    for (const { file, lines } of examples) {
      const at = lines.findIndex((line) => line.startsWith('Summary ('));
      const rows = lines.slice(at + 1).filter((line) => line.startsWith('  '));
      const labels = rows.map((line) => line.slice(2, 15).trim());
      // The labels a governed run without overflow or faults prints, from the formatter itself.
      const printed = formatSummary(demoSummaryFixture(labels.includes('unknown')))
        .split('\n')
        .filter((line) => line.startsWith('  '))
        .map((line) => line.slice(2, 15).trim());
      expect(labels, file).toEqual(printed);
      const lane = (name: string) => Number(/(\d+) sent/.exec(rows.find((r) => r.includes(`${name} lane`)) ?? '')?.[1]);
      expect([lane('high'), lane('normal')], file).toEqual([high, items.length - high]);
    }
  });

  it('counts a parked message as parked, not as a retry, and says how many the watch recorded', async () => {
    const { formatSummary } = await import('../../bin/commands/start/summary-format.js');
    const base = demoSummaryFixture(false);
    const summary = {
      ...base,
      consumer: { ...base.consumer, parked: 5, retriedItems: 7 },
      governor: base.governor && {
        ...base.governor,
        watch: { rounds: 9, polled: 12, released: 5, recorded: 4, renewed: 0 },
      },
    };
    const row = formatSummary(summary)
      .split('\n')
      .find((line) => line.startsWith('  consumer'));
    expect(row).toContain('parked 5 (recorded by the watch 4) · retried 2 ·');
  });
});

describe("the README's prose on the lab", () => {
  it('states the figures `npm run bench` gives now (seed 1)', async () => {
    const lab = await labJson();
    const text = readFileSync(`${ROOT}/README.md`, 'utf8').replace(/\s+/g, ' ');
    const run = (trace: string, policy: string) => {
      const found = lab.traces.find((t) => t.name === trace)?.runs.find((r) => r.policy === policy);
      if (found === undefined) throw new Error(`lab: no ${trace} / ${policy}`);
      return found;
    };
    const p95 = (trace: string, policy = 'governor') => (run(trace, policy).latency.p95 ?? Number.NaN).toFixed(0);
    const share = (trace: string, policy = 'governor') => (run(trace, policy).overCapShare * 100).toFixed(2);
    const outage = run('solver-outage', 'lambda-fixed');
    const claims: [RegExp, string][] = [
      [
        /Against the targets, (\d+ of \d+) checks hold/,
        `${lab.targets.filter((c) => c.pass).length} of ${lab.targets.length}`,
      ],
      [/`solver-outage` (\d+) s, was/, p95('solver-outage')],
      [/`neighbours-come-and-go` (\d+) s, was/, p95('neighbours-come-and-go')],
      [/([\d.]+) % on `foreign-threads`/, share('foreign-threads')],
      [/and ([\d.]+) % on `neighbours-come-and-go`/, share('neighbours-come-and-go')],
      [
        /lambda-fixed ([\d.]+ % and [\d.]+ %)\)/,
        `${share('foreign-threads', 'lambda-fixed')} % and ${share('neighbours-come-and-go', 'lambda-fixed')} %`,
      ],
      [/maximum sends (\d+ of \d+)/, `${outage.deadLettered} of ${outage.arrivals}`],
      [
        /on `solver-outage`\* \((\d+ s vs \d+ s)\)/,
        `${p95('solver-outage')} s vs ${p95('solver-outage', 'lambda-fixed')} s`,
      ],
    ];
    const wrong = claims.flatMap(([pattern, expected]) => {
      const stated = pattern.exec(text)?.[1];
      return stated === expected ? [] : [`${pattern}: README says ${stated ?? 'nothing'}, the lab gives ${expected}`];
    });
    expect(wrong).toEqual([]);
  });
});

describe("the README's cost claims", () => {
  it('state what the cost model gives now: the sale day on the lab (seed 1) and the month on the model', async () => {
    const lab = await labJson();
    const text = readFileSync(`${ROOT}/README.md`, 'utf8').replace(/\s+/g, ' ');
    const cost = (trace: string, policy: string) => {
      const run = lab.traces.find((t) => t.name === trace)?.runs.find((r) => r.policy === policy) as
        | { cost?: { planUsd: number; awsUsd: number } }
        | undefined;
      if (run?.cost === undefined) throw new Error(`lab: no cost for ${trace} / ${policy}`);
      return run.cost;
    };
    const fleet = cost('sale-day-surge', 'governor');
    const pool = cost('sale-day-surge', 'thread-pool');
    const month = fleetBill(monthParked(0.6), { planThreads: 50 });
    const waiting = fleetBill(monthWaiting(0.6), { planThreads: 50 });
    const saleDay = lab.traces.find((t) => t.name === 'sale-day-surge')?.runs.find((r) => r.policy === 'governor');
    const claims: [RegExp, string][] = [
      [/Parked \(`solveMode: park`[^)]*\) it is (\d+) s there/, (saleDay?.latency.p95 ?? Number.NaN).toFixed(0)],
      [/the sale day costs the fleet \$([\d.]+)/, fleet.awsUsd.toFixed(2)],
      [/— ([\d.]+)× the \$[\d.]+ of the plan it governs/, (fleet.awsUsd / fleet.planUsd).toFixed(1)],
      [/× the \$([\d.]+) of the plan it governs/, fleet.planUsd.toFixed(2)],
      [/against \$([\d.]+) for either pool/, pool.awsUsd.toFixed(2)],
      [/60 % use: \$(\d+) of AWS/, month.usd.toFixed(0)],
      [/of AWS for a \$(\d+) plan/, month.planUsd.toFixed(0)],
      [/\(\$(\d+) waiting;/, waiting.usd.toFixed(0)],
      [/Of that, \$([\d.]+) a month is the stack's standing charges/, standingPerMonth().toFixed(2)],
    ];
    const wrong = claims.flatMap(([pattern, expected]) => {
      const stated = pattern.exec(text)?.[1];
      return stated === expected ? [] : [`${pattern}: README says ${stated ?? 'nothing'}, the model gives ${expected}`];
    });
    expect(wrong).toEqual([]);
  });
});

/** The stack's standing charges over a month (functions/core/cost/stack-charges.ts), without an overflow provider. */
function standingPerMonth(): number {
  const lines = standingLines(
    stackResources({ overflow: false }),
    AWS_PRICES.hoursPerMonth,
    DEFAULT_COST_ASSUMPTIONS,
    AWS_PRICES,
  );
  return lines.reduce((sum, line) => sum + line.usd, 0);
}
