/**
 * `captcha-fleet governor --once [--dry-run] [--json]`: one governor tick from this machine,
 * with the configuration the Lambda gets (the same environment variables: CAPTCHA_FLEET_CONFIG,
 * TASKS_QUEUE_URL, HIGH_QUEUE_URL, GOVERNOR_TABLE, LEASES_TABLE (solveMode park, the default),
 * EVENT_SOURCE_MAPPING_IDS, CONSUMER_FUNCTION_NAME, SOLVER_KEY_SECRET_ARN or SOLVER_KEY, AWS_ENDPOINT_URL for any
 * AWS-compatible endpoint; with an overflow block also OVERFLOW_MAPPING_ID, OVERFLOW_FUNCTION_NAME
 * and OVERFLOW_KEY_SECRET_ARN or OVERFLOW_KEY). Prints the decision and why (the overflow lane's
 * too); applies it unless --dry-run.
 */
import { type Command, InvalidArgumentError } from 'commander';
import { failureText } from '../../functions/core/helpers/printable.js';
import { createRedactor, type Redactor } from '../../functions/core/redaction.js';
import { ConfigError } from '../../functions/core/settings.js';
import { type FleetEnvironment, parseEnvironment } from '../../functions/core/environment.js';
import { createGovernorFromEnvironment } from '../../functions/governor/wiring.js';
import { decisionLogFields, type GovernorLog, type TickRecord } from '../../functions/governor/loop.js';
import type { ParkedWatch } from '../../functions/governor/parked-watch.js';
import { GOVERNOR_TICK_PATH, tickReviver } from '../../local/control-server.js';
import { readLocalStackFile } from '../../local/stack-file.js';

interface GovernorOptions {
  once?: boolean;
  dryRun?: boolean;
  json?: boolean;
  local?: boolean;
  watch?: number;
}

/**
 * One tick of the governor inside a served local stack (`npm start -- --serve`): the lanes it
 * moves live in that process, so the tick runs there, through the control URL in the stack file.
 * A dry run returns that governor's latest decision and applies nothing.
 */
async function localTick(dryRun: boolean): Promise<TickRecord> {
  const { controlUrl, pid } = readLocalStackFile({
    hints: {
      otherwise: "or drop --local to tick a deployed fleet's governor (in the governor Lambda's environment)",
      choosePrefix: (prefix) => `Point CAPTCHA_FLEET_STACK_FILE at fleet "${prefix}"'s file`,
    },
  });
  if (controlUrl === undefined)
    throw new Error(`the local stack (pid ${pid}) serves no control URL; restart it with \`npm start -- --serve\``);
  const response = await fetch(`${controlUrl}${GOVERNOR_TICK_PATH}${dryRun ? '?dryRun=1' : ''}`, { method: 'POST' });
  const text = await response.text();
  if (!response.ok) {
    const { error } = JSON.parse(text) as { error?: string };
    throw new Error(`the local stack (pid ${pid}) could not run a governor tick: ${error ?? response.statusText}`);
  }
  return JSON.parse(text, tickReviver) as TickRecord;
}

/**
 * The governor Lambda's environment from this shell, or a usage error that says what is missing
 * and the two ways to run a tick: `--local` for a served local stack, or the deployed governor's
 * variables for a fleet in AWS.
 */
function governorEnvironment(command: Command, options: GovernorOptions): FleetEnvironment {
  let environment: FleetEnvironment;
  try {
    environment = parseEnvironment(process.env);
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    const missing = error.problems.map((p) => `  - ${p.field}: ${p.problem}`).join('\n');
    return command.error(
      `error: \`governor --once\` ticks with the governor Lambda's environment, and this shell does not have it:\n${missing}\n` +
        'For the local stack started with `npm start -- --serve`, add --local. For a deployed fleet, export the ' +
        "governor function's variables (aws lambda get-function-configuration --function-name <prefix>-governor " +
        '--query Environment.Variables), and AWS_ENDPOINT_URL for an AWS-compatible endpoint.',
      { exitCode: 2 },
    );
  }
  // The parked design's leases are half of what a tick moves: without the table it paused the
  // mappings and left the slots open, and watched nothing, without a word.
  if (environment.settings.solveMode === 'park' && environment.tables.leases === undefined)
    return command.error(
      "error: this fleet parks its tasks (solveMode park, the default): `governor --once` needs LEASES_TABLE (the governor function's variable, <prefix>-leases) to open the thread leases and watch the parked tasks; export it with the others",
      { exitCode: 2 },
    );
  if (options.watch !== undefined && environment.settings.solveMode !== 'park')
    return command.error(
      'error: --watch records parked tasks, and this fleet waits through its solves (solveMode wait): there is nothing to watch',
      { exitCode: 2 },
    );
  return environment;
}

/** Human summary of one tick. */
export function formatTick(record: TickRecord): string {
  const { decision: d, signals: s } = record;
  const lane = (name: 'normal' | 'high') => `${name} ${d.ceilings[name]} (${d.enabled[name] ? 'enabled' : 'disabled'})`;
  const known = (value: number | undefined, format: (v: number) => string = String) =>
    value === undefined ? 'unknown' : format(value);
  const lines = [
    `Governor decision${record.applied ? '' : ' (dry run: nothing applied)'}`,
    `  reason     ${d.reason.code}: ${d.reason.message}`,
    `  ceilings   ${lane('normal')}${s.lanes.high ? `, ${lane('high')}` : ''}${d.paused ? ' (paused)' : ''}`,
    // Parked: the ceilings open as thread leases; the mappings take the submitters (what an
    // operator reads back as MaximumConcurrency).
    ...(d.submitters !== undefined
      ? [
          `  mappings   MaximumConcurrency normal ${d.submitters.normal}${s.lanes.high ? `, high ${d.submitters.high}` : ''} (the invocations that submit; the ceilings above open as thread leases)`,
        ]
      : []),
    `  threads    free ${d.freeThreads}, needed ${known(d.neededThreads)}, shortfall ${d.shortfall}${d.shortfallWarning ? ' (WARNING: buy threads or expect delays)' : ''}, drain ${
      d.drainSeconds === undefined
        ? 'unknown'
        : d.drainSeconds === Number.POSITIVE_INFINITY
          ? 'never at this ceiling'
          : `${Math.round(d.drainSeconds)} s`
    }`,
    `  queues     backlog ${known(s.lanes.normal.backlog)}${s.lanes.high ? ` / high ${known(s.lanes.high.backlog)}` : ''}, in flight ${known(s.lanes.normal.inFlight)}${
      s.lanes.high ? ` / high ${known(s.lanes.high.inFlight)}` : ''
    }, oldest ${known(s.lanes.normal.oldestAgeSeconds, (v) => `${v} s`)}`,
    `  solver     balance ${known(s.balance, (v) => `$${v.toFixed(2)}`)}, p95 ${known(s.p95SolveMs, (v) => `${(v / 1000).toFixed(1)} s`)}, error rate ${known(s.errorRate, (v) => `${(v * 100).toFixed(1)} %`)}, over-cap answers ${known(s.overCapAnswers)}`,
  ];
  const o = record.overflow;
  if (o) {
    const spend = o.state.spend;
    const balance = record.overflowSignals?.provider.balance;
    lines.push(
      `  overflow   ${o.reason.code}: ${o.reason.message}`,
      `             ${o.enabled ? `open at ${o.ceiling}` : 'closed'}, excess ${o.excess}, affordable ${o.affordable}, spend $${spend.hourUsd.toFixed(2)} this hour / $${spend.dayUsd.toFixed(2)} today, price $${o.priceUsd.toFixed(5)}${o.priceLearned ? '' : ' (hint)'}, balance ${known(balance, (v) => `$${v.toFixed(2)}`)}`,
    );
  }
  if (record.applied)
    lines.push(`  applied    ${record.changes.length === 0 ? 'nothing to change' : record.changes.join('; ')}`);
  return lines.join('\n');
}

/** Run the watch over parked tasks for `seconds` (none without the parked design). */
async function watchFor(watch: ParkedWatch | undefined, seconds: number) {
  if (watch === undefined) return { rounds: 0, recorded: 0, shown: 0, parked: 0 };
  const until = Date.now() + seconds * 1000;
  // Done early once it has handed something on and nothing is leased any more.
  await watch.run(
    () => until - Date.now(),
    0,
    () => watch.stats.recorded + watch.stats.shown > 0 && watch.stats.live === 0,
  );
  const { rounds, recorded, shown, parked } = watch.stats;
  return { rounds, recorded, shown, parked };
}

type Watched = Awaited<ReturnType<typeof watchFor>>;

/**
 * The CLI's governor log: its warnings and errors kept for printing, each redacted of the solver
 * keys the governor has read (`redactor`, the one the governor is wired with, as the Lambda's
 * handler wires its log) and of any `key=` parameter; info is not printed.
 */
export function onceLog(redactor: Redactor): { log: GovernorLog; warnings: string[] } {
  const warnings: string[] = [];
  const log: GovernorLog = {
    info: () => undefined,
    warn: (message, fields) =>
      warnings.push(redactor.redact(`${message}${fields?.error ? ` (${String(fields.error)})` : ''}`)),
    error: (message) => warnings.push(redactor.redact(message)),
  };
  return { log, warnings };
}

/** `error` as the CLI prints it (its name and message), redacted of the keys `redactor` knows. */
export function redactedError(error: unknown, redactor: Redactor): Error {
  const safe = new Error(redactor.redact(error instanceof Error ? error.message : String(error)));
  if (error instanceof Error) safe.name = error.name;
  return safe;
}

/** One tick (the served local stack's, or the deployed fleet's from this shell's environment), then the watch if asked. */
async function tickOnce(
  environment: FleetEnvironment | undefined,
  options: GovernorOptions,
  log: GovernorLog,
  redactor: Redactor,
): Promise<{ record: TickRecord; watched: Watched | undefined }> {
  const governor =
    environment === undefined
      ? undefined
      : await createGovernorFromEnvironment({ environment, dryRun: options.dryRun ?? false, log, redactor });
  const record = governor === undefined ? await localTick(options.dryRun ?? false) : await governor.loop.tick();
  const watched = options.watch === undefined ? undefined : await watchFor(governor?.watch, options.watch);
  return { record, watched };
}

export function register(program: Command): void {
  program
    .command('governor')
    .description(
      'run one governor tick against the fleet the environment points at (AWS, AWS_ENDPOINT_URL) and print the decision',
    )
    .option('--once', 'run one tick and exit (the Lambda runs the loop)')
    .option('--dry-run', 'decide and print, change nothing (with --local: the served governor’s latest decision)')
    .option('--json', 'print the decision as JSON')
    .option('--local', 'tick the governor of the local stack started by `npm start -- --serve`')
    .option(
      '--watch <seconds>',
      'after the tick, watch the parked tasks (solveMode park) for up to this long, as the Lambda does between its ticks: each ready answer is recorded',
      (value) => {
        const seconds = Number(value);
        if (!Number.isFinite(seconds) || seconds < 0 || seconds > 840)
          throw new InvalidArgumentError('expected seconds from 0 to 840, e.g. --watch 30');
        return seconds;
      },
    )
    .action(async (options: GovernorOptions, command: Command) => {
      if (!options.once)
        command.error(
          'error: only `governor --once` runs from the CLI (add --once); the scheduled Lambda (or `npm start` locally) runs the loop',
          { exitCode: 2 },
        );
      // The solver keys the governor reads are redacted from what it prints, as from the Lambda's log.
      const redactor = createRedactor();
      const { log, warnings } = onceLog(redactor);
      if (options.watch !== undefined && (options.local || options.dryRun))
        command.error(
          `error: --watch records answers, so it runs only on a deployed fleet, not with ${options.local ? '--local' : '--dry-run'}`,
          {
            exitCode: 2,
          },
        );
      const environment = options.local ? undefined : governorEnvironment(command, options);
      let ticked: { record: TickRecord; watched: Watched | undefined };
      try {
        ticked = await tickOnce(environment, options, log, redactor);
      } catch (error) {
        // A script reading --json gets JSON whatever happens; the error goes to stderr as usual,
        // after what the tick's reads said on the way (often the cause: an endpoint refusing all).
        if (options.json) console.log(JSON.stringify({ failed: redactor.redact(failureText(error, 1000)), warnings }));
        else for (const warning of warnings) console.error(`warning: ${warning}`);
        throw redactedError(error, redactor);
      }
      const { record, watched } = ticked;
      if (options.json) {
        console.log(JSON.stringify({ ...decisionLogFields(record), warnings, ...(watched ? { watched } : {}) }));
        return;
      }
      for (const warning of warnings) console.error(`warning: ${warning}`);
      // A local stack's governor runs in the serving process: a dry run there reads its latest
      // decision (a tick would apply), which the help's "decide" would otherwise pass off as new.
      if (options.local && options.dryRun)
        console.log(
          `(the served governor's latest decision, ${Math.max(0, Math.round((Date.now() - record.signals.now) / 1000))} s old: its loop runs in the \`npm start -- --serve\` process; without --dry-run it ticks now)`,
        );
      console.log(formatTick(record));
      if (watched)
        console.log(
          `  parked     watched ${watched.rounds} round(s): ${watched.recorded} recorded, ${watched.shown} shown to the consumers, ${watched.parked} still parked`,
        );
    });
}
