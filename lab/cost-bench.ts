/**
 * `npm run bench:cost` — the consumer designs side by side (lab/designs.ts): per trace, each
 * design's p95 beside the oracle's, its over-cap share and what it would cost on AWS beside the
 * plan it governs, by service. `--markdown FILE` writes the comparison as markdown tables (the
 * generated block of docs/cost.md is the same); `--json` prints the figures.
 */
import { writeFileSync } from 'node:fs';
import { Command } from 'commander';
import { shippedTraces } from './bench.js';
import { align, designsMarkdown, designsOn, HEAD, rows } from './designs-report.js';
import { parseSeed } from './flags.js';

interface Options {
  trace: string;
  seed: number;
  json?: boolean;
  markdown?: string;
}

function main(options: Options): void {
  const names = options.trace.split(',').map((n) => n.trim());
  const traces = shippedTraces().filter((t) => names.includes(t.name));
  const missing = names.filter((n) => !traces.some((t) => t.name === n));
  if (missing.length > 0) {
    process.stderr.write(
      `unknown trace(s): ${missing.join(', ')} (shipped: ${shippedTraces()
        .map((t) => t.name)
        .join(', ')})\n`,
    );
    process.exit(2);
  }
  const all = traces.map((trace) => designsOn(trace, options.seed));
  if (options.markdown) writeFileSync(options.markdown, designsMarkdown(all, options.seed));
  if (options.json) {
    process.stdout.write(
      `${JSON.stringify(
        all.map(({ trace, designs, pool }) => ({
          trace: trace.name,
          designs: [...designs, pool].map((d) => ({
            ...d,
            cost: { planUsd: d.cost.planUsd, awsUsd: d.cost.awsUsd, byService: d.cost.byService },
          })),
        })),
        null,
        2,
      )}\n`,
    );
    return;
  }
  for (const { trace, designs, pool } of all) {
    process.stdout.write(`${trace.name} — plan $${(designs[0]?.cost.planUsd ?? 0).toFixed(3)}\n`);
    for (const line of align([HEAD, ...rows([...designs, pool])])) process.stdout.write(`  ${line}\n`);
    process.stdout.write('\n');
  }
}

const program = new Command('bench:cost')
  .description('the consumer designs side by side: p95, over-cap and the AWS bill beside the plan')
  .option('--trace <names>', 'shipped traces, comma-separated', 'steady,sale-day-surge')
  .option('--seed <n>', 'random seed', parseSeed, 1)
  .option('--json', 'figures as JSON')
  .option('--markdown <file>', 'write the comparison as markdown tables');
program.parse();
main(program.opts<Options>());
