/**
 * The parked design in the template (solveMode `park`, the default): the leases table, who may do
 * what with it, and what the governor's watch may do besides; with solveMode `wait`, none of it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROBE_LEASE_SHARD, THREAD_LEDGER_ID, WATCH_RELAY_SHARD } from '../../functions/core/deployment.js';
import { solveWindowSlotIds } from '../../functions/core/solve-window.js';
import { PRIMARY_LEASE_LANE } from '../../functions/adapters/thread-leases.js';
import { shardKeys } from '../../functions/core/thread-leases.js';
import { ENV } from '../../functions/core/environment.js';
import { resolveSettings } from '../../functions/core/settings.js';
import { removeOutdir, synthesizeFleet, type Synthesized } from './synth-helpers.js';
import {
  asArray,
  byType,
  functionNamed,
  only,
  policyOfRole,
  reportedViolations,
  roleOf,
  type Statement,
} from './template-helpers.js';

const settings = resolveSettings({});
const bySid = (statements: Statement[], sid: string) => only(statements.filter((st) => st.Sid === sid));
const leasesTableId = (s: Synthesized) =>
  only(byType(s, 'AWS::DynamoDB::Table').filter(([, t]) => t.Properties.TableName === settings.tableNames.leases))[0];

describe('parked design (default)', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthesizeFleet();
  });
  afterAll(() => removeOutdir(s.outdir));

  it('keeps the leases on demand, keyed by shard and slot, with point-in-time recovery, gone with the stack', () => {
    const [, table] = only(
      byType(s, 'AWS::DynamoDB::Table').filter(([, t]) => t.Properties.TableName === settings.tableNames.leases),
    );
    expect(table.Properties.KeySchema).toEqual([
      { AttributeName: 'shard', KeyType: 'HASH' },
      { AttributeName: 'slot', KeyType: 'RANGE' },
    ]);
    expect(table.Properties.BillingMode).toBe('PAY_PER_REQUEST');
    expect(table.Properties.PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
    expect(table.DeletionPolicy).toBe('Delete');
    expect(reportedViolations(s)).toEqual([]);
  });

  it('names the leases table to the consumer and the governor only', () => {
    const leases = leasesTableId(s);
    for (const name of ['consumer', 'governor']) {
      const [, fn] = functionNamed(s, `${settings.prefix}-${name}`);
      expect(fn.Properties.Environment.Variables[ENV.leasesTable]).toEqual({ Ref: leases });
    }
    const [, reporter] = functionNamed(s, `${settings.prefix}-reporter`);
    expect(reporter.Properties.Environment.Variables[ENV.leasesTable]).toBeUndefined();
  });

  it('lets the consumer read a shard, take, free a slot and record a refusal on the leases table, nothing else there', () => {
    const [, consumer] = functionNamed(s, `${settings.prefix}-consumer`);
    const statement = bySid(policyOfRole(s, roleOf(consumer)), 'ThreadLeases');
    expect([...asArray(statement.Action)].sort()).toEqual([
      'dynamodb:DeleteItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
    ]);
    expect(statement.Resource).toEqual({ 'Fn::GetAtt': [leasesTableId(s), 'Arn'] });
  });

  it('lets the consumer and the governor keep the metric window on its four slot items of the governor table, nothing else there', () => {
    const slots = solveWindowSlotIds(THREAD_LEDGER_ID);
    expect(slots).toHaveLength(4);
    const [, consumer] = functionNamed(s, `${settings.prefix}-consumer`);
    const [, governor] = functionNamed(s, `${settings.prefix}-governor`);
    const expected = {
      consumer: ['dynamodb:PutItem', 'dynamodb:UpdateItem'],
      governor: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
    };
    for (const [name, fn] of [
      ['consumer', consumer],
      ['governor', governor],
    ] as const) {
      const statement = bySid(policyOfRole(s, roleOf(fn)), 'SolveWindow');
      expect([...asArray(statement.Action)].sort()).toEqual(expected[name]);
      expect(statement.Condition).toEqual({ 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': slots } });
      expect(JSON.stringify(statement.Resource)).toMatch(/GovernorState/);
    }
  });

  it('lets the governor watch parked tasks: the leases, the parked records, the lanes’ messages', () => {
    const [, governor] = functionNamed(s, `${settings.prefix}-governor`);
    const statements = policyOfRole(s, roleOf(governor));
    expect([...asArray(bySid(statements, 'ThreadLeases').Action)].sort()).toEqual([
      'dynamodb:DeleteItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
    ]);
    expect([...asArray(bySid(statements, 'ParkedRecords').Action)].sort()).toEqual([
      'dynamodb:GetItem',
      'dynamodb:UpdateItem',
    ]);
    // The watch relay's baton: one partition of the leases table, read and written whole.
    const relay = bySid(statements, 'WatchRelay');
    expect([...asArray(relay.Action)].sort()).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem']);
    expect(relay.Resource).toEqual({ 'Fn::GetAtt': [leasesTableId(s), 'Arn'] });
    expect(relay.Condition).toEqual({ 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [WATCH_RELAY_SHARD] } });
    // The probe's thread lease: a put in the lane's first shard only (the shard the probe's wiring takes).
    const probe = bySid(statements, 'ProbeLease');
    expect(asArray(probe.Action)).toEqual(['dynamodb:PutItem']);
    expect(probe.Resource).toEqual({ 'Fn::GetAtt': [leasesTableId(s), 'Arn'] });
    expect(probe.Condition).toEqual({ 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [PROBE_LEASE_SHARD] } });
    for (const plan of [1, 64, 65, 1000]) expect(shardKeys(PRIMARY_LEASE_LANE, plan)[0]).toBe(PROBE_LEASE_SHARD);
    const messages = bySid(statements, 'ParkedMessages');
    expect([...asArray(messages.Action)].sort()).toEqual(['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage']);
    expect(asArray(messages.Resource)).toHaveLength(2);
    // The probe's waiting task: received from the two lanes only, the consumer function only invoked.
    const tasks = bySid(statements, 'ProbeTasks');
    expect(asArray(tasks.Action)).toEqual(['sqs:ReceiveMessage']);
    expect(asArray(tasks.Resource)).toEqual(asArray(messages.Resource));
    const invocation = bySid(statements, 'ProbeInvocation');
    expect(asArray(invocation.Action)).toEqual(['lambda:InvokeFunction']);
    const [consumerId] = functionNamed(s, `${settings.prefix}-consumer`);
    expect(invocation.Resource).toEqual({ 'Fn::GetAtt': [consumerId, 'Arn'] });
    // No scan, no table-wide delete, no message sent: the watch works item by item.
    const actions = statements.flatMap((st) => asArray(st.Action));
    for (const forbidden of ['dynamodb:Scan', 'dynamodb:DeleteTable', 'sqs:SendMessage'])
      expect(actions).not.toContain(forbidden);
  });
});

describe('waiting design (solveMode wait)', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthesizeFleet({ context: { solveMode: 'wait' } });
  });
  afterAll(() => removeOutdir(s.outdir));

  it('has no leases table, no leases variable and none of the watch’s permissions', () => {
    const tables = byType(s, 'AWS::DynamoDB::Table').map(([, t]) => t.Properties.TableName);
    expect(tables).not.toContain(settings.tableNames.leases);
    for (const name of ['consumer', 'governor']) {
      const [, fn] = functionNamed(s, `${settings.prefix}-${name}`);
      expect(fn.Properties.Environment.Variables[ENV.leasesTable]).toBeUndefined();
      const sids = policyOfRole(s, roleOf(fn)).map((st) => st.Sid);
      for (const sid of [
        'ThreadLeases',
        'WatchRelay',
        'ProbeLease',
        'ProbeTasks',
        'ProbeInvocation',
        'ParkedRecords',
        'ParkedMessages',
        'ParkedCompletionEvents',
        'SolveWindow',
      ])
        expect(sids).not.toContain(sid);
    }
    // Without a watch to pass on, one governor at a time, each done within the minute.
    const [, governor] = functionNamed(s, `${settings.prefix}-governor`);
    expect(governor.Properties.ReservedConcurrentExecutions).toBe(1);
    expect(governor.Properties.Timeout).toBeLessThan(60);
    expect(reportedViolations(s)).toEqual([]);
  });
});

describe('a parked fleet of three usable threads (under the two lanes’ mapping floors)', () => {
  let s: Synthesized;
  beforeAll(() => {
    // Five threads, two of them left to other users of the key.
    s = synthesizeFleet({ context: { planThreads: 5, reservedThreads: 2 } });
  });
  afterAll(() => removeOutdir(s.outdir));

  it('runs each mapping at Lambda’s floor and reserves their sum, the leases holding the three threads', () => {
    const small = resolveSettings({ planThreads: 5, reservedThreads: 2 }, { lanes: 2 });
    const [consumerId, consumer] = functionNamed(s, `${small.prefix}-consumer`);
    const mappings = byType(s, 'AWS::Lambda::EventSourceMapping').filter(
      ([, m]) => m.Properties.FunctionName.Ref === consumerId,
    );
    const maxima = mappings.map(([, m]) => m.Properties.ScalingConfig.MaximumConcurrency as number);
    expect(maxima).toEqual([2, 2]);
    // A reservation below the mappings' sum throttles (messages back to the queue, toward the DLQ).
    expect(consumer.Properties.ReservedConcurrentExecutions).toBe(4);
    const config = JSON.parse(consumer.Properties.Environment.Variables[ENV.config] as string);
    expect(config).toMatchObject({ planThreads: 5, reservedThreads: 2, solveMode: 'park' });
    // The slots the leases open are the threads, never the invocations.
    expect(small.effectiveCap).toBe(3);
    expect(consumer.Properties.Environment.Variables[ENV.leasesTable]).toBeDefined();
    expect(reportedViolations(s)).toEqual([]);
  });
});
