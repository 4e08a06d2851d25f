/** `captcha-fleet redrive [--dry-run] [--include-rejected]`: replay the DLQ safely. */
import type { Command } from 'commander';
import { describeRedrive, redrive } from '../../clients/dlq-redrive.js';
import { resolveTarget, withTargetOptions, type TargetOptions } from './target.js';
import { printable } from '../../functions/core/helpers/printable.js';

interface RedriveOptions extends TargetOptions {
  dryRun?: boolean;
  includeRejected?: boolean;
  json?: boolean;
}

export function register(program: Command): void {
  withTargetOptions(
    program
      .command('redrive')
      .description('list the dead-letter queue grouped by reason and move retryable messages back to their lane')
      .option('--dry-run', 'only list what is there and what would move')
      .option(
        '--include-rejected',
        'also move messages the consumer refused (malformed, schema, unknown method, too large): they will fail again unless fixed',
      )
      .option('--json', 'print the report as JSON'),
  ).action(async (options: RedriveOptions) => {
    const target = await resolveTarget(options);
    const report = await redrive(
      {
        sqs: target.clients.sqs,
        dlqUrl: target.queueUrls.dlq,
        dlqArn: target.queueArns.dlq,
        queueUrls: target.queueUrls,
        native: target.kind === 'aws',
      },
      { dryRun: options.dryRun ?? false, includeRejected: options.includeRejected ?? false },
    );
    if (options.json) {
      // A letter's attributes are a producer's text: C1 controls and separators, which JSON leaves
      // raw, escaped (`\uXXXX`, the same JSON), so a terminal acts on no CSI.
      console.log(printable(JSON.stringify(report), Number.POSITIVE_INFINITY));
      return;
    }
    const { depth, hidden } = report.inventory;
    // Letters a listing or redrive of the last minute holds are there, not gone.
    console.log(
      `DLQ of ${target.description}: ${depth} message(s)${hidden > 0 ? `, and ${hidden} held by another reader for up to a minute (a listing or redrive cut short, or running beside this one): not listed` : ''}`,
    );
    const rows = Object.entries(report.inventory.byReason);
    if (rows.length === 0) console.log('  (empty)');
    for (const [reason, group] of rows) {
      const what = group.movable
        ? 'retryable'
        : options.includeRejected
          ? 'refused, moving as asked'
          : 'refused, stays (use --include-rejected)';
      // The letters' attributes are a producer's words: printable, so a CR LF cannot forge a row.
      console.log(
        `  ${String(group.count).padStart(6)}  ${printable(reason, 64).padEnd(20)} ${what}${group.example ? ` — e.g. ${printable(group.example, 200)}` : ''}`,
      );
    }
    for (const line of describeRedrive(report)) console.log(line);
  });
}
