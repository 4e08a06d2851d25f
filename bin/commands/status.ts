/** `captcha-fleet status [--json] [--watch [S]]`: how the fleet stands, at a glance. */
import type { Command } from 'commander';
import { CloudWatchClient, GetMetricDataCommand } from '@aws-sdk/client-cloudwatch';
import { baseClientConfig } from '../../functions/adapters/aws-clients.js';
import { createCloudWatchSignals } from '../../functions/adapters/cloudwatch-signals.js';
import { METRICS, SERVICES } from '../../functions/core/metric-names.js';
import { readFleetStatus, type FleetStatus, type RecentMetrics, type SpendStatus } from '../../clients/fleet-status.js';
import { decimal, integer } from '../../local/cli-values.js';
import { resolveTarget, withTargetOptions, type FleetTarget, type TargetOptions } from './target.js';

interface StatusOptions extends TargetOptions {
  json?: boolean;
  watch?: number | boolean;
  window: number;
}

export function register(program: Command): void {
  // Its flags are checked by their parsers, so a bad one is the command's usage error (`error: …`
  // and a pointer to `status --help`): before, the program's, without the prefix.
  withTargetOptions(
    program
      .command('status')
      .description(
        'backlog and in flight per lane, DLQ, oldest task, ceilings, the last governor decision, balance, and recent solves',
      )
      .option('--json', 'one JSON object per refresh')
      .option('--watch [seconds]', 'refresh every N seconds (default 5) until Ctrl-C', decimal(1, 86_400, 'seconds'))
      .option('--window <minutes>', 'minutes of recent solves to summarise', integer(1, 1440), 5),
  ).action(async (options: StatusOptions) => {
    const windowMinutes = options.window;
    const every =
      options.watch === undefined || options.watch === false ? undefined : options.watch === true ? 5 : options.watch;
    const target = await resolveTarget(options);
    const read = () => readFleetStatus(sourcesFor(target), { windowMinutes });
    const show = (status: FleetStatus) => {
      if (options.json) console.log(JSON.stringify({ fleet: target.description, ...status }));
      else {
        if (every !== undefined && process.stdout.isTTY) process.stdout.write('\x1b[2J\x1b[H');
        console.log(renderStatus(status, target.description, targetFlags(options)));
      }
    };
    const first = await read();
    show(first);
    if (every === undefined) {
      // A fleet that could not be read is not a quiet one: scripts and alarms read the exit code.
      if (first.unread.length > 0) process.exitCode = 1;
      return;
    }
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        read().then(show, (error: Error) => console.error(`status: ${error.message}`));
      }, every * 1000);
      process.once('SIGINT', () => {
        clearInterval(timer);
        resolve();
      });
    });
  });
}

/** The primary consumer's window from CloudWatch, and the overflow consumer's when the fleet has one. */
async function cloudWatchRecent(target: FleetTarget, windowMinutes: number, overflow: boolean): Promise<RecentMetrics> {
  const cloudwatch = new CloudWatchClient(baseClientConfig(undefined, target.clients.region));
  const reader = (service: string) =>
    createCloudWatchSignals({
      cloudwatch,
      namespace: target.settings.metricsNamespace,
      service,
      windowMs: windowMinutes * 60_000,
      queueNames: {
        normal: target.settings.queueNames.normal,
        high: target.queueUrls.high ? target.settings.queueNames.high : undefined,
      },
    });
  const primary = reader(SERVICES.consumer);
  const [window, queues, overflowWindow] = await Promise.all([
    primary.read(),
    primary.readQueues(),
    overflow ? reader(SERVICES.overflowConsumer).read() : Promise.resolve(undefined),
  ]);
  const failedOf = (w: typeof window) => (w === undefined ? undefined : (w.failed ?? w.taskErrors));
  // Both consumers' solves when there are two; unknown when either window is (never a partial count).
  const both = (a: number | undefined, b: number | undefined) =>
    !overflow ? a : a === undefined || b === undefined ? undefined : a + b;
  return {
    solved: both(window?.solved, overflowWindow?.solved),
    ...(overflow ? { overflowSolved: overflowWindow?.solved } : {}),
    failed: both(failedOf(window), failedOf(overflowWindow)),
    p95SolveMs: window?.p95SolveMs,
    oldestAgeSeconds: { normal: queues.normal.oldestAgeSeconds, high: queues.high?.oldestAgeSeconds },
  };
}

/**
 * The last hour's spend from the consumers' `SpendUsd` metric: one sum per provider (service
 * dimension) and one per method and provider (SEARCH over the `service, Method` dimension set).
 */
async function cloudWatchSpend(
  target: FleetTarget,
  windowMinutes: number,
): Promise<Omit<SpendStatus, 'source' | 'windowMinutes'>> {
  const cloudwatch = new CloudWatchClient(baseClientConfig(undefined, target.clients.region));
  const namespace = target.settings.metricsNamespace;
  const period = windowMinutes * 60;
  const end = new Date();
  const perProvider = (id: string, service: string) => ({
    Id: id,
    MetricStat: {
      Metric: { Namespace: namespace, MetricName: METRICS.spendUsd, Dimensions: [{ Name: 'service', Value: service }] },
      Period: period,
      Stat: 'Sum',
    },
  });
  const out = await cloudwatch.send(
    new GetMetricDataCommand({
      StartTime: new Date(end.getTime() - period * 1000),
      EndTime: end,
      MetricDataQueries: [
        perProvider('primary', SERVICES.consumer),
        perProvider('overflow', SERVICES.overflowConsumer),
        {
          Id: 'methods',
          Expression: `SEARCH('{"${namespace}",service,Method} MetricName="${METRICS.spendUsd}"', 'Sum', ${period})`,
        },
      ],
    }),
  );
  const sum = (values: number[] | undefined) => (values ?? []).reduce((a, b) => a + b, 0);
  const results = out.MetricDataResults ?? [];
  const byProvider: SpendStatus['byProvider'] = {};
  for (const provider of ['primary', 'overflow'] as const) {
    const found = results.find((r) => r.Id === provider);
    if (found?.Values && found.Values.length > 0) byProvider[provider] = sum(found.Values);
  }
  const byMethod: Record<string, number> = {};
  for (const r of results.filter((r) => r.Id !== 'primary' && r.Id !== 'overflow')) {
    // A SEARCH series' label is its dimension values: "<service> <Method>".
    const method = (r.Label ?? '').split(' ').pop() ?? 'unknown';
    byMethod[method] = (byMethod[method] ?? 0) + sum(r.Values);
  }
  return { totalUsd: (byProvider.primary ?? 0) + (byProvider.overflow ?? 0), byProvider, byMethod };
}

function sourcesFor(target: FleetTarget) {
  return {
    sqs: target.clients.sqs,
    documents: target.clients.documents,
    queueUrls: target.queueUrls,
    tables: target.tables,
    ...(target.kind === 'aws'
      ? {
          recentMetrics: (windowMinutes: number, overflow: boolean) =>
            cloudWatchRecent(target, windowMinutes, overflow),
          recentSpend: (windowMinutes: number) => cloudWatchSpend(target, windowMinutes),
        }
      : {}),
  };
}

const show = (value: number | string | boolean | undefined, unit = '') =>
  value === undefined ? '—' : `${value}${unit}`;

/** The flags that chose this fleet, so a suggested command reaches the same one. */
function targetFlags(options: TargetOptions): string {
  const flags = [
    ...(options.local ? ['--local'] : []),
    ...(!options.local && options.endpoint ? [`--endpoint ${options.endpoint}`] : []),
    ...(!options.local && options.prefix && options.prefix !== 'captcha-fleet' ? [`--prefix ${options.prefix}`] : []),
    ...(!options.local && options.region ? [`--region ${options.region}`] : []),
  ];
  return flags.join(' ');
}

/**
 * The human view. Unknown values print as "—", never as 0. Words as in docs/local.md: backlog =
 * visible, in flight = received and not yet deleted, waiting = delayed. `flags` are the target
 * flags the command was given; suggested commands carry them.
 */
/** The reads that failed, grouped by their error: "—" below them is not knowable, not zero. */
function unreadLines(unread: FleetStatus['unread']): string[] {
  if (unread.length === 0) return [];
  const byError = new Map<string, string[]>();
  for (const part of unread) byError.set(part.error, [...(byError.get(part.error) ?? []), part.what]);
  return [
    ...[...byError].map(([error, parts]) => `COULD NOT READ ${parts.join(', ')}: ${error}`),
    '(what follows shows them as unknown, —; check the endpoint, --prefix, --region and the credentials)',
    '',
  ];
}

export function renderStatus(status: FleetStatus, fleet: string, flags = ''): string {
  const lines: string[] = [];
  lines.push(`captcha-fleet status — ${fleet} — ${new Date(status.at).toISOString()}`);
  lines.push('');
  for (const line of unreadLines(status.unread)) lines.push(line);
  lines.push('lane     backlog  in flight  waiting  oldest   ceiling  consuming');
  for (const [name, lane] of Object.entries(status.lanes)) {
    if (!lane) continue;
    lines.push(
      `${name.padEnd(8)} ${show(lane.backlog).padStart(7)}  ${show(lane.inFlight).padStart(9)}  ${show(lane.delayed).padStart(7)}  ${show(lane.oldestAgeSeconds, ' s').padStart(6)}  ${show(lane.ceiling).padStart(7)}  ${show(lane.enabled === undefined ? undefined : lane.enabled ? 'yes' : 'no').padStart(9)}`,
    );
  }
  lines.push(
    `DLQ      ${show(status.dlqDepth).padStart(7)}${status.dlqDepth ? `   → npx captcha-fleet redrive --dry-run${flags ? ` ${flags}` : ''}` : ''}`,
  );
  lines.push('');
  const g = status.governor;
  if (!g) lines.push('governor: no decision recorded yet');
  else {
    const age = g.at === undefined ? '' : ` (${Math.round((status.at - g.at) / 1000)} s ago)`;
    lines.push(
      `governor: ${show(g.code)}${age}${g.paused ? ` — PAUSED${g.pausedReason ? `: ${g.pausedReason}` : ''}` : ''}`,
    );
    if (g.message) lines.push(`          ${g.message}`);
    lines.push(
      `          free threads ${show(g.freeThreads)} · needed ${show(g.neededThreads)} · shortfall ${show(g.shortfall)}`,
    );
  }
  lines.push(`balance:  ${status.balance === undefined ? '— (not read yet)' : `$${status.balance.toFixed(2)}`}`);
  lines.push(...renderOverflow(status));
  lines.push(renderSpend(status.spend));
  const r = status.recent;
  lines.push(
    `last ${r.windowMinutes} min: solved ${show(r.solved)}${'overflowSolved' in r ? ` (overflow ${show(r.overflowSolved)})` : ''} · failed ${show(r.failed)}${r.rejected !== undefined ? ` · rejected ${r.rejected}` : ''} · p95 solve ${r.p95SolveMs === undefined ? '—' : `${(r.p95SolveMs / 1000).toFixed(1)} s`}  (${r.source})`,
  );
  return lines.join('\n');
}

/**
 * Where the unpriced solves' prices are configured: the plan's in `solverPricesUsd`, the overflow
 * provider's in `overflow.pricesUsd` (the plan's setting named for all of them said nothing of
 * the overflow provider's solves).
 */
function priceFix(spend: SpendStatus): string {
  const by = spend.unpricedByProvider;
  if (by === undefined) return 'configure solverPricesUsd';
  const settings = [
    (by.primary ?? 0) > 0 ? `solverPricesUsd for the plan's ${by.primary}` : undefined,
    (by.overflow ?? 0) > 0 ? `overflow.pricesUsd for the overflow provider's ${by.overflow}` : undefined,
  ].filter((setting) => setting !== undefined);
  return `configure ${settings.join(', ')}`;
}

/** The last hour's spend: the total, per provider, per method (dearest first). */
export function renderSpend(spend: SpendStatus): string {
  const money = (value: number) => `$${value.toFixed(4)}`;
  if (spend.totalUsd === undefined)
    return spend.unpriced
      ? `spend:    — no price known for the ${spend.unpriced} solve(s) of the last ${spend.windowMinutes} min (${priceFix(spend)})  (${spend.source})`
      : `spend:    — (last ${spend.windowMinutes} min not read)  (${spend.source})`;
  const providers = Object.entries(spend.byProvider)
    .map(([provider, value]) => `${provider === 'primary' ? 'plan' : provider} ${money(value)}`)
    .join(' · ');
  const methods = Object.entries(spend.byMethod)
    .sort(([, a], [, b]) => b - a)
    .map(([method, value]) => `${method} ${money(value)}`)
    .join(', ');
  const unpriced = spend.unpriced ? ` · ${spend.unpriced} solve(s) without a known price (${priceFix(spend)})` : '';
  return `spend:    ${money(spend.totalUsd)} in the last ${spend.windowMinutes} min${providers ? ` (${providers})` : ''}${methods ? ` — ${methods}` : ''}${unpriced}  (${spend.source})`;
}

const usd = (value: number | undefined, digits = 2) => (value === undefined ? '—' : `$${value.toFixed(digits)}`);

/**
 * The overflow lane (from the governor's last decision) and the split of solves between the plan
 * and the overflow provider (the consumers' ledger counters). Nothing when no overflow provider
 * has left a trace.
 */
export function renderOverflow(status: FleetStatus): string[] {
  const o = status.overflow;
  const split = status.solvesByProvider;
  const lines: string[] = [];
  if (o) {
    lines.push(
      `overflow: ${o.enabled ? `OPEN at ${o.ceiling}` : `closed (ceiling ${o.ceiling} kept)`} — ${o.code}${o.excess > 0 ? ` · excess ${o.excess}` : ''}${o.inFlight !== undefined ? ` · in flight ${o.inFlight}` : ''}`,
    );
    lines.push(`          ${o.message}`);
    lines.push(
      `          spend ${usd(o.hourUsd)} this hour of ${usd(o.capUsdPerHour)} · ${usd(o.dayUsd)} today of ${usd(o.capUsdPerDay)} · price ${usd(o.priceUsd, 5)}/solve (${o.priceLearned ? 'learned' : 'hint'}) · balance ${o.balance === undefined ? '— (not read)' : usd(o.balance)}`,
    );
  }
  if (o || split.overflow !== undefined) {
    const total = (split.primary ?? 0) + (split.overflow ?? 0);
    const share =
      split.primary !== undefined && split.overflow !== undefined && total > 0
        ? ` (${((split.overflow / total) * 100).toFixed(1)} % overflow)`
        : '';
    lines.push(`solves:   plan ${show(split.primary)} · overflow ${show(split.overflow)}${share}  (ledger counters)`);
  }
  return lines;
}
