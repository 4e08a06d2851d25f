/**
 * The bill's standing charges (functions/core/cost/stack-charges.ts) are the stack's own
 * resources: each count below is read from the synthesized template, with and without an overflow
 * provider, so a new alarm, dashboard, secret, key or always-on mapping that the bill does not
 * price fails here.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FLEET_STACK,
  LOG_RETENTION_DAYS,
  type StackResources,
  stackResources,
} from '../../functions/core/cost/stack-charges.js';
import type { OverflowConfigInput } from '../../functions/core/settings.js';
import { removeOutdir, synthesizeFleet, type Synthesized } from './synth-helpers.js';
import { byType } from './template-helpers.js';

const OVERFLOW: OverflowConfigInput = {
  baseUrl: 'https://2captcha.com',
  capUsdPerHour: 2,
  capUsdPerDay: 20,
  priceHintUsd: 0.003,
  maxConcurrency: 12,
};

interface MetricQuery {
  MetricStat?: { Period: number };
}

/** What the template holds of each resource the bill prices by the month. */
function counted(s: Synthesized): StackResources {
  const alarms = byType(s, 'AWS::CloudWatch::Alarm');
  const alarmMetrics = alarms.reduce((sum, [, alarm]) => {
    const queries = alarm.Properties.Metrics as MetricQuery[] | undefined;
    return sum + (queries === undefined ? 1 : queries.filter((q) => q.MetricStat !== undefined).length);
  }, 0);
  // The lanes' mappings (the consumer's, billed with the usage's polling mappings; the overflow
  // consumer's, deployed disabled until the governor opens its lane) are the governor's to
  // enable; every other mapping polls all the time.
  const laneFunctions = new Set(
    byType(s, 'AWS::Lambda::Function')
      .filter(([, fn]) => /-consumer(-overflow)?$/.test(String(fn.Properties.FunctionName)))
      .map(([id]) => id),
  );
  const alwaysPolling = byType(s, 'AWS::Lambda::EventSourceMapping').filter(
    ([, mapping]) => !laneFunctions.has(mapping.Properties.FunctionName.Ref),
  );
  return {
    alarmMetrics,
    dashboards: byType(s, 'AWS::CloudWatch::Dashboard').length,
    secrets: byType(s, 'AWS::SecretsManager::Secret').length,
    kmsKeys: byType(s, 'AWS::KMS::Key').length,
    alwaysPollingMappings: alwaysPolling.length,
  };
}

describe.each([
  { name: 'without an overflow provider', context: {}, overflow: false },
  { name: 'with an overflow provider', context: { overflow: JSON.stringify(OVERFLOW) }, overflow: true },
])('the standing charges $name', ({ context, overflow }) => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthesizeFleet({ context });
  });
  afterAll(() => removeOutdir(s.outdir));

  it('price every alarm metric, dashboard, secret, KMS key and always-on mapping the stack has', () => {
    expect(counted(s)).toEqual(stackResources({ overflow }));
  });

  it("deploy the overflow consumer's mappings disabled (the governor opens its lane): none of them polls idle", () => {
    const overflowFunctions = byType(s, 'AWS::Lambda::Function')
      .filter(([, fn]) => String(fn.Properties.FunctionName).endsWith('-consumer-overflow'))
      .map(([id]) => id);
    expect(overflowFunctions).toHaveLength(overflow ? 1 : 0);
    const mappings = byType(s, 'AWS::Lambda::EventSourceMapping').filter(([, m]) =>
      overflowFunctions.includes(m.Properties.FunctionName.Ref),
    );
    expect(mappings).toHaveLength(overflow ? 2 : 0);
    for (const [, mapping] of mappings) expect(mapping.Properties.Enabled).toBe(false);
  });

  it('price standard-resolution alarms: every metric an alarm reads has a period of a minute or more', () => {
    for (const [, alarm] of byType(s, 'AWS::CloudWatch::Alarm')) {
      const queries = alarm.Properties.Metrics as MetricQuery[] | undefined;
      const periods =
        queries === undefined
          ? [alarm.Properties.Period as number]
          : queries.flatMap((q) => (q.MetricStat ? [q.MetricStat.Period] : []));
      for (const period of periods) expect(period).toBeGreaterThanOrEqual(60);
    }
  });

  it('keep logs as long as the bill keeps them, and the results table has the TTL and point-in-time recovery it prices', () => {
    const groups = byType(s, 'AWS::Logs::LogGroup');
    expect(groups.length).toBeGreaterThan(0);
    for (const [, group] of groups) expect(group.Properties.RetentionInDays).toBe(LOG_RETENTION_DAYS);
    const results = byType(s, 'AWS::DynamoDB::Table').filter(
      ([, table]) => table.Properties.TimeToLiveSpecification?.Enabled === true,
    );
    expect(results).toHaveLength(1);
    expect(results[0]?.[1].Properties.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
  });
});

it('the stack without overflow is FLEET_STACK', () => {
  expect(stackResources({ overflow: false })).toEqual(FLEET_STACK);
});
