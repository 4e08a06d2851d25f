/**
 * Two fleets in one account and region (issue 10, item 4): synthesize a `prod` and a `staging`
 * stack and check that nothing one reads or writes is the other's: metrics (alarms, dashboard,
 * SEARCH expressions, the governor's GetMetricData queries, the namespace the functions emit to),
 * named resources, and the completion events' source.
 */
import type { MetricDataQuery } from '@aws-sdk/client-cloudwatch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { createCloudWatchSignals } from '../../functions/adapters/cloudwatch-signals.js';
import { ENV } from '../../functions/core/environment.js';
import { resolveSettings, type FleetConfig } from '../../functions/core/settings.js';
import { removeOutdir, synthesizeFleet, type Synthesized } from './synth-helpers.js';

type Resource = { Type: string; Properties?: Record<string, any> };
type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** What one fleet's template says it emits and reads, with CloudFormation references resolved to names. */
interface FleetFootprint {
  /** Namespace of the functions' EMF (from their configuration). */
  emfNamespace: string;
  /** `namespace|metric|dim=value,…` of every metric an alarm or a dashboard graph reads. */
  metrics: Set<string>;
  /** SEARCH expressions on the dashboard. */
  searches: string[];
  /** `namespace|metric|dim=value,…` of every metric the governor's GetMetricData queries read. */
  governorQueries: Set<string>;
  /** Every physical name the template gives a resource. */
  names: Set<string>;
  /** `events:source` values in the consumer's policy and the bus policy. */
  eventSources: Set<string>;
}

const NAME_PROPERTIES = [
  'FunctionName',
  'QueueName',
  'TableName',
  'Name',
  'TopicName',
  'AlarmName',
  'DashboardName',
  'ManagedPolicyName',
  'EventBusName',
];

function footprint(s: Synthesized): FleetFootprint {
  const resources = s.template.toJSON().Resources as Record<string, Resource>;
  const nameOf = (id: string): string => {
    const properties = resources[id]?.Properties ?? {};
    const name = NAME_PROPERTIES.map((key) => properties[key]).find((value) => typeof value === 'string');
    // An unnamed resource resolves to its logical id, which both templates share: a collision the
    // assertions below would report rather than hide.
    return name ?? `logical:${id}`;
  };
  const resolve = (value: Json): Json => {
    if (Array.isArray(value)) return value.map(resolve);
    if (value === null || typeof value !== 'object') return value;
    if ('Ref' in value) {
      const ref = value.Ref as string;
      return ref.startsWith('AWS::') ? `<${ref}>` : nameOf(ref);
    }
    if ('Fn::GetAtt' in value) {
      const [id, attribute] = value['Fn::GetAtt'] as [string, string];
      return `${nameOf(id)}.${attribute}`;
    }
    if ('Fn::Join' in value) {
      const [separator, parts] = value['Fn::Join'] as [string, Json[]];
      return parts.map((part) => String(resolve(part))).join(separator);
    }
    return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, resolve(inner)]));
  };
  const identity = (namespace: string, name: string, dimensions: Array<[string, string]>) =>
    `${namespace}|${name}|${dimensions
      .map(([key, value]) => `${key}=${value}`)
      .sort()
      .join(',')}`;

  const metrics = new Set<string>();
  const searches: string[] = [];
  const names = new Set<string>();
  const eventSources = new Set<string>();
  let emfNamespace: string | undefined;
  let config: FleetConfig | undefined;
  const alarmMetric = (m: { Namespace: string; MetricName: string; Dimensions?: { Name: string; Value: string }[] }) =>
    metrics.add(
      identity(
        m.Namespace,
        m.MetricName,
        (m.Dimensions ?? []).map((d) => [d.Name, d.Value]),
      ),
    );

  for (const [id, resource] of Object.entries(resources)) {
    const properties = resolve((resource.Properties ?? {}) as Json) as Record<string, any>;
    const name = nameOf(id);
    if (!name.startsWith('logical:')) names.add(name);
    if (resource.Type === 'AWS::CloudWatch::Alarm') {
      if (properties.MetricName !== undefined) alarmMetric(properties as never);
      for (const query of properties.Metrics ?? []) if (query.MetricStat) alarmMetric(query.MetricStat.Metric);
    }
    if (resource.Type === 'AWS::CloudWatch::Dashboard') {
      const body = JSON.parse(properties.DashboardBody as string) as {
        widgets: { properties: { metrics?: Json[][] } }[];
      };
      for (const row of body.widgets.flatMap((w) => w.properties.metrics ?? [])) {
        const first = row[0];
        if (typeof first === 'object' && first !== null && 'expression' in first) {
          const expression = String(first.expression);
          if (expression.startsWith('SEARCH(')) searches.push(expression);
          continue;
        }
        const [namespace, metricName, ...rest] = row as string[];
        const dimensions: Array<[string, string]> = [];
        for (let i = 0; i + 1 < rest.length && typeof rest[i] === 'string'; i += 2)
          dimensions.push([rest[i] as string, rest[i + 1] as string]);
        metrics.add(identity(namespace as string, metricName as string, dimensions));
      }
    }
    if (resource.Type === 'AWS::Lambda::Function') {
      const env = properties.Environment.Variables as Record<string, string>;
      config = JSON.parse(env[ENV.config] as string) as FleetConfig;
      emfNamespace = resolveSettings(config).metricsNamespace;
      expect(env.POWERTOOLS_METRICS_NAMESPACE).toBe(emfNamespace);
    }
    const statements = [
      ...(resource.Type === 'AWS::IAM::Policy' ? properties.PolicyDocument.Statement : []),
      ...(resource.Type === 'AWS::Events::EventBusPolicy' ? [properties.Statement] : []),
    ] as { Condition?: Record<string, Record<string, string>> }[];
    for (const statement of statements)
      for (const condition of Object.values(statement.Condition ?? {}))
        if (condition['events:source'] !== undefined) eventSources.add(condition['events:source']);
  }
  if (emfNamespace === undefined || config === undefined) throw new Error('no fleet function in the template');

  // The queries the deployed governor sends, built from the configuration the stack gives it.
  const settings = resolveSettings(config);
  const signals = createCloudWatchSignals({
    cloudwatch: {} as CloudWatchClient,
    namespace: settings.metricsNamespace,
    queueNames: settings.queueNames,
  });
  const governorQueries = new Set(
    [...signals.consumerQueries(), ...signals.percentileQueries()].map((q: MetricDataQuery) => {
      const m = q.MetricStat?.Metric;
      return identity(
        m?.Namespace ?? '',
        m?.MetricName ?? '',
        (m?.Dimensions ?? []).map((d) => [d.Name ?? '', d.Value ?? '']),
      );
    }),
  );
  return { emfNamespace, metrics, searches, governorQueries, names, eventSources };
}

const intersection = (a: Set<string>, b: Set<string>) => [...a].filter((x) => b.has(x));

describe('two fleets in one account and region', () => {
  let prod: Synthesized;
  let staging: Synthesized;
  let a: FleetFootprint;
  let b: FleetFootprint;
  beforeAll(() => {
    prod = synthesizeFleet({ context: { prefix: 'prod', stackName: 'CaptchaFleetProd' } });
    staging = synthesizeFleet({ context: { prefix: 'staging', stackName: 'CaptchaFleetStaging' } });
    a = footprint(prod);
    b = footprint(staging);
  }, 300_000);
  afterAll(() => {
    removeOutdir(prod.outdir);
    removeOutdir(staging.outdir);
  });

  it('emits each fleet’s metrics to its own namespace', () => {
    expect(a.emfNamespace).toBe('CaptchaFleet/prod');
    expect(b.emfNamespace).toBe('CaptchaFleet/staging');
  });

  it('reads in alarms and dashboard only metrics of its own: none of the other fleet’s', () => {
    expect(a.metrics.size).toBeGreaterThan(10);
    expect(intersection(a.metrics, b.metrics)).toEqual([]);
  });

  it('reads its custom metrics in the namespace its functions emit to', () => {
    for (const fleet of [a, b]) {
      const custom = [...fleet.metrics].filter((m) => !m.startsWith('AWS/'));
      expect(custom.length).toBeGreaterThan(5);
      for (const metric of custom) expect(metric.split('|')[0]).toBe(fleet.emfNamespace);
    }
  });

  it('searches (dashboard SEARCH) by an exact schema of its own namespace', () => {
    for (const [fleet, other] of [
      [a, b],
      [b, a],
    ] as const) {
      expect(fleet.searches.length).toBeGreaterThanOrEqual(3);
      for (const search of fleet.searches) {
        expect(search).toMatch(new RegExp(`^SEARCH\\('\\{"${fleet.emfNamespace}",service,\\w+\\} `));
        expect(search).not.toContain(other.emfNamespace);
      }
    }
  });

  it('has the governor query metrics of its own fleet only', () => {
    expect(a.governorQueries.size).toBeGreaterThan(5);
    expect(intersection(a.governorQueries, b.governorQueries)).toEqual([]);
    for (const query of a.governorQueries) expect(query.startsWith(`${a.emfNamespace}|`)).toBe(true);
  });

  it('shares no named resource: queues, tables (governor state included), functions, bus, rule, alarms, topic, dashboard, policy', () => {
    expect(a.names.size).toBeGreaterThan(15);
    expect(intersection(a.names, b.names)).toEqual([]);
  });

  it('gives each fleet’s completion events a source of their own, and each bus admits only that one', () => {
    expect([...a.eventSources]).toEqual(['captcha-fleet.prod']);
    expect([...b.eventSources]).toEqual(['captcha-fleet.staging']);
  });
});
