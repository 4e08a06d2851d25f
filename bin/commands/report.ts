/**
 * `captcha-fleet report <taskId> bad|good`: report a solved task's answer as wrong (the provider
 * is asked for a refund) or right, through the fleet's reports queue, and wait until the fleet has
 * called the provider and marked the record. Exit 0 when the report was accepted (now or before),
 * 1 when it was refused (the reason is printed), 2 on a usage error.
 */
import { Argument, type Command } from 'commander';
import { createProducer, ReportRefusedError, ReportWaitTimeoutError } from '../../clients/producer-client.js';
import { VERDICTS, type Verdict } from '../../functions/core/report.js';
import { TASK_ID_PATTERN } from '../../functions/core/task.js';
import { integer } from '../../local/cli-values.js';
import { resolveTarget, withTargetOptions, type TargetOptions } from './target.js';

interface ReportCommandOptions extends TargetOptions {
  json?: boolean;
  timeout: number;
}

export function register(program: Command): void {
  // Its usage errors are the command's own (`error: …`, and a pointer to `report --help`): before,
  // they were the program's, without the prefix and pointing at the list of commands.
  const command = program
    .command('report')
    .description("report a solved task's answer: bad (wrong: the provider is asked for a refund) or good")
    .argument('<taskId>', 'the task whose answer is reported')
    .addArgument(new Argument('<verdict>', 'whether the answer was wrong or right').choices(VERDICTS))
    .option('--json', 'print the report as JSON')
    .option('--timeout <seconds>', 'how long to wait for the fleet to settle the report', integer(1, 900), 60);
  withTargetOptions(command).action(async (taskId: string, verdict: string, options: ReportCommandOptions) => {
    if (!TASK_ID_PATTERN.test(taskId))
      command.error(`error: "${taskId}" is not a task id (1-80 of A-Z a-z 0-9 _ -)`, { exitCode: 2 });
    const seconds = options.timeout;
    const target = await resolveTarget(options);
    if (target.reportsQueueUrl === undefined)
      throw new Error(
        `${target.description} has no reports queue ${target.settings.queueNames.reports}: deploy (or start) a version of captcha-fleet with reports`,
      );
    const producer = createProducer({
      queueUrls: { normal: target.queueUrls.normal, reports: target.reportsQueueUrl },
      table: target.tables.results,
      clients: target.clients,
    });
    try {
      const report = await producer.report(taskId, verdict as Verdict, { timeoutMs: seconds * 1000 });
      if (options.json) console.log(JSON.stringify({ taskId, ...report }));
      else
        console.log(
          `report on ${taskId}: ${report.verdict} accepted by the ${report.provider ?? 'primary'} provider (solver id ${report.solverId ?? '—'})` +
            (report.refundUsd !== undefined ? `; refund asked for $${report.refundUsd.toFixed(5)}` : '') +
            (report.reportedAt !== undefined ? ` at ${new Date(report.reportedAt).toISOString()}` : ''),
        );
    } catch (error) {
      if (error instanceof ReportRefusedError) {
        if (options.json)
          console.log(
            JSON.stringify({
              taskId,
              state: 'refused',
              reason: error.reason,
              code: error.code,
              message: error.message,
            }),
          );
        else console.error(error.message);
        process.exitCode = 1;
        return;
      }
      if (error instanceof ReportWaitTimeoutError) {
        console.error(error.message);
        process.exitCode = 1;
        return;
      }
      throw error;
    }
  });
}
