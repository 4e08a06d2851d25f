/**
 * The overflow lane in the template (issue 12): off unless configured, and then a second consumer
 * with a mapping on each queue (the high one opened only while the primary is paused), both
 * disabled at the mapping floor, with its own key and least-privilege role; the governor allowed
 * to move that lane only; outputs, alarms and dashboard rows for it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  OVERFLOW_LEDGER_ID,
  SOLVER_KEY_PLACEHOLDER,
  STACK_OUTPUTS,
  THREAD_LEDGER_ID,
} from '../../functions/core/deployment.js';
import { ENV } from '../../functions/core/environment.js';
import { COMPLETION_EVENT_DETAIL_TYPE } from '../../functions/core/events.js';
import { GOVERNOR_METRICS, METRICS, SERVICES } from '../../functions/core/metric-names.js';
import { MAPPING_MIN_CONCURRENCY, type OverflowConfigInput, resolveSettings } from '../../functions/core/settings.js';
import { OVERFLOW_ALARM_IDS, OVERFLOW_CAP_ALARM_MINUTES } from '../../lib/fleet-alarms.js';
import { removeOutdir, synthesizeFleet, type Synthesized } from './synth-helpers.js';
import {
  asArray,
  byType,
  functionNamed,
  only,
  type Resource,
  reportedViolations,
  type Statement,
  policyOfRole,
  roleOf,
} from './template-helpers.js';

const BLOCK: OverflowConfigInput = {
  baseUrl: 'https://2captcha.com',
  capUsdPerHour: 2,
  capUsdPerDay: 20,
  priceHintUsd: 0.003,
  maxConcurrency: 12,
};
const settings = resolveSettings({ overflow: BLOCK });
const overflow = settings.overflow ?? (undefined as never);

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function resources(s: Synthesized): Record<string, Resource> {
  return s.template.toJSON().Resources as Record<string, Resource>;
}

function idOfType(s: Synthesized, type: string, where: (r: Resource) => boolean): string {
  return only(byType(s, type).filter(([, r]) => where(r)))[0];
}

/** The dashboard body with every CloudFormation token written as `<Ref:Id>` / `<GetAtt:Id>`, parsed. */
function dashboardBody(s: Synthesized): { widgets: { type: string; properties: Record<string, any> }[] } {
  const [, dashboard] = only(byType(s, 'AWS::CloudWatch::Dashboard'));
  const [, parts] = (dashboard.Properties.DashboardBody as { 'Fn::Join': [string, Json[]] })['Fn::Join'];
  const text = parts
    .map((part) => {
      if (typeof part === 'string') return part;
      const token = part as Record<string, Json>;
      if ('Ref' in token) return `<Ref:${String(token.Ref)}>`;
      return `<GetAtt:${String((token['Fn::GetAtt'] as Json[])[0])}>`;
    })
    .join('');
  return JSON.parse(text);
}

function graphTitled(s: Synthesized, title: string): Record<string, any> {
  return only(dashboardBody(s).widgets.filter((w) => w.properties.title === title)).properties;
}

/** `metricName@service` of every plain metric row of a graph (left and right axes). */
function metricRows(graph: Record<string, any>): { name: string; service?: string; stat?: string; axis?: string }[] {
  return (graph.metrics as Json[][])
    .filter((row) => typeof row[0] === 'string')
    .map((row) => {
      const options = row.find((cell) => typeof cell === 'object' && cell !== null) as
        | Record<string, string>
        | undefined;
      const serviceAt = row.indexOf('service');
      return {
        name: String(row[1]),
        ...(serviceAt >= 0 ? { service: String(row[serviceAt + 1]) } : {}),
        ...(options?.stat ? { stat: options.stat } : {}),
        ...(options?.yAxis ? { axis: options.yAxis } : {}),
      };
    });
}

describe('stack with an overflow provider (-c overflow=JSON)', () => {
  let s: Synthesized;
  let fnId: string;
  let fn: Resource;
  let secretId: string;
  let mappingId: string;
  let highMappingId: string;
  let normalQueueId: string;
  let highQueueId: string;
  beforeAll(() => {
    s = synthesizeFleet({ context: { overflow: JSON.stringify(BLOCK) } });
    [fnId, fn] = functionNamed(s, `${settings.prefix}-consumer-overflow`);
    secretId = idOfType(
      s,
      'AWS::SecretsManager::Secret',
      (r) => r.Properties.Name === `${settings.prefix}/overflow-key`,
    );
    normalQueueId = idOfType(s, 'AWS::SQS::Queue', (r) => r.Properties.QueueName === settings.queueNames.normal);
    highQueueId = idOfType(s, 'AWS::SQS::Queue', (r) => r.Properties.QueueName === settings.queueNames.high);
    const mappingOn = (queueId: string) =>
      idOfType(
        s,
        'AWS::Lambda::EventSourceMapping',
        (r) =>
          r.Properties.FunctionName.Ref === fnId &&
          JSON.stringify(r.Properties.EventSourceArn) === JSON.stringify({ 'Fn::GetAtt': [queueId, 'Arn'] }),
      );
    mappingId = mappingOn(normalQueueId);
    highMappingId = mappingOn(highQueueId);
  });
  afterAll(() => removeOutdir(s.outdir));

  it('has no unsuppressed cdk-nag or CloudFormation validation finding, and no error or warning annotation', () => {
    expect(reportedViolations(s)).toEqual([]);
    expect(s.messages).toEqual([]);
  });

  it('creates <prefix>/overflow-key holding the placeholder the handlers recognise', () => {
    const secret = resources(s)[secretId];
    expect(secret?.Properties.SecretString).toBe(SOLVER_KEY_PLACEHOLDER);
    expect(byType(s, 'AWS::SecretsManager::Secret')).toHaveLength(2);
  });

  it('runs the consumer’s code as <prefix>-consumer-overflow, on the overflow provider, with no way to the primary key', () => {
    const [, primary] = functionNamed(s, `${settings.prefix}-consumer`);
    const [, governor] = functionNamed(s, `${settings.prefix}-governor`);
    // Same bundle entry: the same asset as the primary consumer's, not the governor's.
    expect(fn.Properties.Code).toEqual(primary.Properties.Code);
    expect(fn.Properties.Code).not.toEqual(governor.Properties.Code);
    expect(fn.Properties).toMatchObject({
      Handler: primary.Properties.Handler,
      Runtime: 'nodejs24.x',
      Architectures: ['arm64'],
      Timeout: settings.functionTimeoutSeconds,
    });
    const env = fn.Properties.Environment.Variables as Record<string, unknown>;
    expect(env[ENV.solverProvider]).toBe('overflow');
    expect(env[ENV.overflowKeySecretArn]).toEqual({ Ref: secretId });
    expect(env[ENV.solverKeySecretArn]).toBeUndefined();
    expect(env[ENV.solverKey]).toBeUndefined();
    expect(env.POWERTOOLS_SERVICE_NAME).toBe(SERVICES.overflowConsumer);
    expect(env.POWERTOOLS_METRICS_NAMESPACE).toBe(settings.metricsNamespace);
    for (const name of [ENV.normalQueueUrl, ENV.dlqUrl, ENV.resultsTable, ENV.governorTable, ENV.eventBusName])
      expect(env[name], name).toEqual(primary.Properties.Environment.Variables[name]);
    expect(JSON.parse(env[ENV.config] as string).overflow).toMatchObject(BLOCK);
  });

  it('reserves overflow.maxConcurrency for it: the widest the governor may open the lane', () => {
    expect(fn.Properties.ReservedConcurrentExecutions).toBe(overflow.maxConcurrency);
  });

  it('feeds it from the normal and the high queue, each mapping created disabled at the mapping floor, with the batch size and partial batch responses', () => {
    const mappings = Object.fromEntries(
      byType(s, 'AWS::Lambda::EventSourceMapping').filter(([, m]) => m.Properties.FunctionName.Ref === fnId),
    );
    expect(Object.keys(mappings).sort()).toEqual([mappingId, highMappingId].sort());
    expect(highMappingId).not.toBe(mappingId);
    for (const [id, queueId] of [
      [mappingId, normalQueueId],
      [highMappingId, highQueueId],
    ] as const)
      expect(mappings[id]?.Properties, id).toEqual({
        FunctionName: { Ref: fnId },
        EventSourceArn: { 'Fn::GetAtt': [queueId, 'Arn'] },
        BatchSize: settings.tasksPerInvocation,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
        Enabled: false,
        ScalingConfig: { MaximumConcurrency: MAPPING_MIN_CONCURRENCY },
      });
    // The primary keeps both of its lanes, enabled.
    const [primaryId] = functionNamed(s, `${settings.prefix}-consumer`);
    const primaryMappings = byType(s, 'AWS::Lambda::EventSourceMapping').filter(
      ([, m]) => m.Properties.FunctionName.Ref === primaryId,
    );
    expect(primaryMappings).toHaveLength(2);
    for (const [, m] of primaryMappings) expect(m.Properties.Enabled).toBeUndefined();
    // With the report function's own, on the reports queue.
    expect(byType(s, 'AWS::Lambda::EventSourceMapping')).toHaveLength(5);
  });

  it('grants its role exactly: its logs, the normal and high queues, DLQ send, result records, its own ledger item, its key, completion events', () => {
    // Prepare
    const ids = Object.fromEntries(
      ['AWS::Events::EventBus', 'AWS::Logs::LogGroup'].map((type) => [type, byType(s, type).map(([id]) => id)]),
    );
    const dlqId = idOfType(s, 'AWS::SQS::Queue', (r) => r.Properties.QueueName === settings.queueNames.dlq);
    const resultsId = idOfType(
      s,
      'AWS::DynamoDB::Table',
      (r) => r.Properties.TableName === settings.tableNames.results,
    );
    const governorTableId = idOfType(
      s,
      'AWS::DynamoDB::Table',
      (r) => r.Properties.TableName === settings.tableNames.governor,
    );
    const logsId = (fn.Properties.LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref;
    expect(ids['AWS::Logs::LogGroup']).toContain(logsId);
    const consumeFrom = (queueId: string) => ({
      Effect: 'Allow',
      Action: [
        'sqs:ReceiveMessage',
        'sqs:ChangeMessageVisibility',
        'sqs:GetQueueUrl',
        'sqs:DeleteMessage',
        'sqs:GetQueueAttributes',
      ],
      Resource: { 'Fn::GetAtt': [queueId, 'Arn'] },
    });
    // Act
    const statements = policyOfRole(s, roleOf(fn));
    // Assess
    expect(statements).toEqual([
      {
        Effect: 'Allow',
        Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        Resource: { 'Fn::GetAtt': [logsId, 'Arn'] },
      },
      consumeFrom(normalQueueId),
      consumeFrom(highQueueId),
      {
        Effect: 'Allow',
        Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'],
        Resource: { 'Fn::GetAtt': [dlqId, 'Arn'] },
      },
      // A task near the DLQ, or carrying a paid submission, goes back to its lane as a fresh copy.
      {
        Effect: 'Allow',
        Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'],
        Resource: { 'Fn::GetAtt': [normalQueueId, 'Arn'] },
      },
      {
        Effect: 'Allow',
        Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'],
        Resource: { 'Fn::GetAtt': [highQueueId, 'Arn'] },
      },
      {
        Sid: 'ResultRecords',
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem'],
        Resource: { 'Fn::GetAtt': [resultsId, 'Arn'] },
      },
      {
        Sid: 'ThreadLedger',
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        Resource: { 'Fn::GetAtt': [governorTableId, 'Arn'] },
        Condition: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [OVERFLOW_LEDGER_ID] } },
      },
      {
        Effect: 'Allow',
        Action: ['secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret'],
        Resource: { Ref: secretId },
      },
      {
        Sid: 'CompletionEvents',
        Effect: 'Allow',
        Action: 'events:PutEvents',
        Resource: { 'Fn::GetAtt': [only(ids['AWS::Events::EventBus'] ?? []), 'Arn'] },
        Condition: {
          StringEquals: { 'events:source': settings.eventSource, 'events:detail-type': COMPLETION_EVENT_DETAIL_TYPE },
        },
      },
    ]);
  });

  it('keeps the plan’s key from the overflow consumer; the primary reads the overflow key, to finish what that lane paid for', () => {
    const primarySecretId = idOfType(
      s,
      'AWS::SecretsManager::Secret',
      (r) => r.Properties.Name === `${settings.prefix}/solver-key`,
    );
    const [, primary] = functionNamed(s, `${settings.prefix}-consumer`);
    expect(JSON.stringify(policyOfRole(s, roleOf(fn)))).not.toContain(primarySecretId);
    expect(JSON.stringify(fn.Properties.Environment)).not.toContain(primarySecretId);
    // The primary polls (never submits at) the overflow provider for a submission the overflow lane left.
    expect(JSON.stringify(policyOfRole(s, roleOf(primary)))).toContain(secretId);
    expect(primary.Properties.Environment.Variables[ENV.overflowKeySecretArn]).toEqual({ Ref: secretId });
    // The primary still writes only its own ledger item.
    const primaryLedger = only(policyOfRole(s, roleOf(primary)).filter((st) => st.Sid === 'ThreadLedger'));
    expect(primaryLedger.Condition).toEqual({
      'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [THREAD_LEDGER_ID] },
    });
  });

  it('admits both consumers’ roles and the governor’s (its watch records parked answers), and no one else, to publish on the bus', () => {
    const [, primary] = functionNamed(s, `${settings.prefix}-consumer`);
    const [, governor] = functionNamed(s, `${settings.prefix}-governor`);
    const statements = byType(s, 'AWS::Events::EventBusPolicy').map(([, p]) => p.Properties.Statement as Statement);
    const onlyConsumers = only(statements.filter((st) => JSON.stringify(st.Condition).includes('aws:PrincipalArn')));
    expect(onlyConsumers).toMatchObject({ Effect: 'Deny', Principal: { AWS: '*' }, Action: 'events:PutEvents' });
    expect(onlyConsumers.Condition).toEqual({
      ArnNotEquals: { 'aws:PrincipalArn': [primary.Properties.Role, fn.Properties.Role, governor.Properties.Role] },
    });
  });

  it('gives the governor the lane’s two mapping ids, function name and key, and lets it move that lane only', () => {
    // Prepare
    const [governorId, governor] = functionNamed(s, `${settings.prefix}-governor`);
    const env = governor.Properties.Environment.Variables as Record<string, unknown>;
    const statements = policyOfRole(s, roleOf(governor));
    const bySid = (sid: string) => only(statements.filter((st) => st.Sid === sid));
    const governorTableId = idOfType(
      s,
      'AWS::DynamoDB::Table',
      (r) => r.Properties.TableName === settings.tableNames.governor,
    );
    // Assess
    expect(governorId).toBeDefined();
    expect(env[ENV.overflowMappingId]).toEqual({ Ref: mappingId });
    expect(env[ENV.overflowHighMappingId]).toEqual({ Ref: highMappingId });
    expect(env[ENV.overflowFunctionName]).toEqual({ Ref: fnId });
    expect(env[ENV.overflowKeySecretArn]).toEqual({ Ref: secretId });
    const mappingArn = (id: string) => ({
      'Fn::Join': [
        '',
        [
          'arn:',
          { Ref: 'AWS::Partition' },
          ':lambda:',
          { Ref: 'AWS::Region' },
          ':',
          { Ref: 'AWS::AccountId' },
          ':event-source-mapping:',
          { Ref: id },
        ],
      ],
    });
    expect(bySid('OverflowMapping')).toEqual({
      Sid: 'OverflowMapping',
      Effect: 'Allow',
      Action: ['lambda:GetEventSourceMapping', 'lambda:UpdateEventSourceMapping'],
      Resource: [mappingArn(mappingId), mappingArn(highMappingId)],
    });
    expect(bySid('OverflowConcurrency')).toEqual({
      Sid: 'OverflowConcurrency',
      Effect: 'Allow',
      Action: ['lambda:GetFunctionConcurrency', 'lambda:PutFunctionConcurrency'],
      Resource: { 'Fn::GetAtt': [fnId, 'Arn'] },
    });
    expect(bySid('OverflowThreadLedger')).toEqual({
      Sid: 'OverflowThreadLedger',
      Effect: 'Allow',
      Action: 'dynamodb:GetItem',
      Resource: { 'Fn::GetAtt': [governorTableId, 'Arn'] },
      Condition: { 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [OVERFLOW_LEDGER_ID] } },
    });
    expect(statements).toContainEqual({
      Effect: 'Allow',
      Action: ['secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret'],
      Resource: { Ref: secretId },
    });
    // The primary's mapping statement still names the primary's two mappings only.
    const primaryMappings = bySid('ConsumerMappings');
    expect(asArray(primaryMappings.Resource)).toHaveLength(2);
    expect(JSON.stringify(primaryMappings.Resource)).not.toContain(mappingId);
    expect(JSON.stringify(primaryMappings.Resource)).not.toContain(highMappingId);
    // No one else may move the overflow mappings or the overflow function's concurrency.
    const allStatements = byType(s, 'AWS::IAM::Policy').flatMap(
      ([, p]) => p.Properties.PolicyDocument.Statement as Statement[],
    );
    const moving = allStatements.filter(
      (st) =>
        JSON.stringify(st.Resource).includes(`"${mappingId}"`) ||
        JSON.stringify(st.Resource).includes(`"${highMappingId}"`) ||
        JSON.stringify(st.Action).includes('Concurrency'),
    );
    expect(moving.map((st) => st.Sid).sort()).toEqual([
      'ConsumerConcurrency',
      'OverflowConcurrency',
      'OverflowMapping',
    ]);
  });

  it('prints the overflow key’s secret and the overflow function', () => {
    const outputs = s.template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs[STACK_OUTPUTS.overflowKeySecretArn]?.Value).toEqual({ Ref: secretId });
    expect(outputs[STACK_OUTPUTS.overflowFunctionName]?.Value).toEqual({ Ref: fnId });
  });

  it('alarms when the cap holds the lane narrower than the backlog needs for five minutes in a row', () => {
    // Prepare
    const [topicId] = only(byType(s, 'AWS::SNS::Topic'));
    const alarm = (id: string) =>
      only(
        byType(s, 'AWS::CloudWatch::Alarm').filter(([, a]) => a.Properties.AlarmName === `${settings.prefix}-${id}`),
      )[1].Properties;
    // Assess
    expect(OVERFLOW_CAP_ALARM_MINUTES).toBe(5);
    expect(alarm('OverflowCapReached')).toMatchObject({
      Namespace: settings.metricsNamespace,
      MetricName: GOVERNOR_METRICS.overflowCapReached,
      Dimensions: [{ Name: 'service', Value: SERVICES.governor }],
      Statistic: 'Maximum',
      Period: 60,
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: OVERFLOW_CAP_ALARM_MINUTES,
      DatapointsToAlarm: OVERFLOW_CAP_ALARM_MINUTES,
      TreatMissingData: 'notBreaching',
      AlarmActions: [{ Ref: topicId }],
      OKActions: [{ Ref: topicId }],
    });
    expect(alarm('OverflowCapReached').AlarmDescription).toContain('Runbook: docs/deploy.md, "OverflowCapReached"');
    expect(alarm('OverflowConsumerThrottled')).toMatchObject({
      Namespace: 'AWS/Lambda',
      MetricName: 'Throttles',
      Dimensions: [{ Name: 'FunctionName', Value: { Ref: fnId } }],
      AlarmActions: [{ Ref: topicId }],
    });
    const names = byType(s, 'AWS::CloudWatch::Alarm').map(([, a]) => a.Properties.AlarmName as string);
    for (const id of OVERFLOW_ALARM_IDS) expect(names).toContain(`${settings.prefix}-${id}`);
  });

  it('counts the overflow lane’s solves as progress: TasksStalled reads both consumers', () => {
    const stalled = only(
      byType(s, 'AWS::CloudWatch::Alarm').filter(
        ([, a]) => a.Properties.AlarmName === `${settings.prefix}-TasksStalled`,
      ),
    )[1].Properties;
    const queries = stalled.Metrics as { Id: string; Expression?: string; MetricStat?: { Metric: Json } }[];
    expect(queries.find((q) => q.Expression)?.Expression).toContain('FILL(overflowSolved, 0)');
    expect(queries.find((q) => q.Id === 'overflowSolved')?.MetricStat?.Metric).toMatchObject({
      MetricName: METRICS.solved,
      Dimensions: [{ Name: 'service', Value: SERVICES.overflowConsumer }],
    });
  });

  it('shows both overflow alarms in the dashboard’s alarm widget', () => {
    const widget = only(dashboardBody(s).widgets.filter((w) => w.type === 'alarm'));
    const alarms = JSON.stringify(widget.properties.alarms);
    for (const id of OVERFLOW_ALARM_IDS) {
      const alarmId = idOfType(
        s,
        'AWS::CloudWatch::Alarm',
        (r) => r.Properties.AlarmName === `${settings.prefix}-${id}`,
      );
      expect(alarms).toContain(`<GetAtt:${alarmId}>`);
    }
  });

  it('draws the lane: ceiling and excess (governor) against the function’s actual concurrency', () => {
    const rows = metricRows(graphTitled(s, 'Overflow lane: ceiling vs excess vs actual'));
    expect(rows).toEqual([
      { name: GOVERNOR_METRICS.overflowCeiling, service: SERVICES.governor, stat: 'Maximum' },
      { name: GOVERNOR_METRICS.overflowExcess, service: SERVICES.governor, stat: 'Maximum' },
      { name: 'ConcurrentExecutions', stat: 'Maximum' },
    ]);
    expect(JSON.stringify(graphTitled(s, 'Overflow lane: ceiling vs excess vs actual').metrics)).toContain(
      `<Ref:${fnId}>`,
    );
  });

  it('draws spend this hour and today against the caps', () => {
    const graph = graphTitled(s, 'Overflow spend (USD) vs caps');
    expect(metricRows(graph)).toEqual([
      { name: GOVERNOR_METRICS.overflowSpendHour, service: SERVICES.governor, stat: 'Maximum' },
      { name: GOVERNOR_METRICS.overflowSpendDay, service: SERVICES.governor, stat: 'Maximum', axis: 'right' },
    ]);
    expect(graph.annotations.horizontal).toEqual([
      expect.objectContaining({ value: overflow.capUsdPerHour, yAxis: 'left' }),
      expect.objectContaining({ value: overflow.capUsdPerDay, yAxis: 'right' }),
    ]);
  });

  it('draws the provider’s balance against its halt and pause levels', () => {
    const graph = graphTitled(s, 'Overflow balance (USD)');
    expect(metricRows(graph)[0]).toEqual({
      name: GOVERNOR_METRICS.overflowBalance,
      service: SERVICES.governor,
      stat: 'Minimum',
    });
    expect(graph.annotations.horizontal.map((a: { value: number }) => a.value)).toEqual([
      overflow.haltBalance,
      overflow.pauseBalance,
    ]);
  });

  it('draws solves and p95 solve time per provider (service consumer vs consumer-overflow)', () => {
    expect(metricRows(graphTitled(s, 'Solved per minute, by provider'))).toEqual([
      { name: METRICS.solved, service: SERVICES.consumer, stat: 'Sum' },
      { name: METRICS.solved, service: SERVICES.overflowConsumer, stat: 'Sum' },
    ]);
    expect(metricRows(graphTitled(s, 'p95 solve time (ms), by provider'))).toEqual([
      { name: METRICS.solveDuration, service: SERVICES.consumer, stat: 'p95' },
      { name: METRICS.solveDuration, service: SERVICES.overflowConsumer, stat: 'p95' },
    ]);
  });

  it('draws the overflow decisions by reason in the fleet’s own namespace', () => {
    const graph = graphTitled(s, 'Overflow decisions by reason');
    const search = (graph.metrics as Json[][]).map((row) => row[0]).find((cell) => typeof cell === 'object');
    expect((search as { expression: string }).expression).toBe(
      `SEARCH('{"${settings.metricsNamespace}",service,Reason} MetricName="${GOVERNOR_METRICS.overflowDecision}"', 'Sum', 60)`,
    );
  });
});

describe('stack with an overflow key imported by name, a prefix, and no reservations', () => {
  let s: Synthesized;
  const prefixed = resolveSettings({ prefix: 'shop', overflow: { ...BLOCK, keySecretName: 'team/overflow-key' } });
  beforeAll(() => {
    s = synthesizeFleet({
      context: {
        prefix: 'shop',
        reserveConsumerConcurrency: 'false',
        overflow: { ...BLOCK, keySecretName: 'team/overflow-key' },
      },
    });
  });
  afterAll(() => removeOutdir(s.outdir));

  it('creates no overflow secret, reads the named one with its wildcard suffix only, and stays free of findings', () => {
    expect(reportedViolations(s)).toEqual([]);
    const names = byType(s, 'AWS::SecretsManager::Secret').map(([, r]) => r.Properties.Name);
    expect(names).toEqual(['shop/solver-key']);
    const reads = byType(s, 'AWS::IAM::Policy')
      .flatMap(([, p]) => p.Properties.PolicyDocument.Statement as Statement[])
      .filter((st) => JSON.stringify(st.Resource).includes(':secret:team/overflow-key-??????'));
    // The overflow consumer, the governor, the primary consumer (to resume what the lane paid for),
    // and the report function (to report what the lane solved).
    expect(reads).toHaveLength(4);
    for (const st of reads)
      expect(st.Action).toEqual(['secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret']);
  });

  it('names the function after the prefix and reserves nothing when asked not to', () => {
    const [, fn] = functionNamed(s, prefixed.overflow?.functionName ?? '');
    expect(fn.Properties.FunctionName).toBe('shop-consumer-overflow');
    expect(fn.Properties.ReservedConcurrentExecutions).toBeUndefined();
    // An account that cannot spare a reservation cannot spare the governor's 2 either (Lambda
    // refuses any reservation that leaves under 100 unreserved: the deploy would fail).
    for (const name of ['shop-consumer', 'shop-governor'])
      expect(functionNamed(s, name)[1].Properties.ReservedConcurrentExecutions).toBeUndefined();
    expect(JSON.stringify(fn.Properties.Environment.Variables[ENV.overflowKeySecretArn])).toContain(
      ':secret:team/overflow-key',
    );
  });
});

describe('stack without an overflow provider', () => {
  let off: Synthesized;
  let on: Synthesized;
  beforeAll(() => {
    off = synthesizeFleet();
    on = synthesizeFleet({ context: { overflow: BLOCK } });
  });
  afterAll(() => {
    removeOutdir(off.outdir);
    removeOutdir(on.outdir);
  });

  it('holds nothing of overflow: no resource, variable, permission, alarm, widget or output names it', () => {
    expect(JSON.stringify(off.template.toJSON())).not.toMatch(/overflow/i);
    expect(off.stack.fleet.overflow).toBeUndefined();
    expect(off.stack.fleet.alarms.overflowAlarms).toBeUndefined();
  });

  it('is the overflow stack less the overflow resources: same logical ids and types, the rest untouched', () => {
    // Prepare
    const offResources = resources(off);
    const onResources = resources(on);
    // Act
    const added = Object.keys(onResources).filter((id) => !(id in offResources));
    const common = Object.keys(offResources).filter((id) => id in onResources);
    const changed = common.filter((id) => JSON.stringify(offResources[id]) !== JSON.stringify(onResources[id]));
    // Assess
    expect(common).toEqual(Object.keys(offResources));
    for (const id of common) expect(onResources[id]?.Type, id).toBe(offResources[id]?.Type);
    expect(added.map((id) => `${onResources[id]?.Type}`).sort()).toEqual(
      [
        'AWS::CloudWatch::Alarm',
        'AWS::CloudWatch::Alarm',
        'AWS::IAM::Policy',
        'AWS::IAM::Role',
        'AWS::Lambda::EventSourceMapping',
        'AWS::Lambda::EventSourceMapping',
        'AWS::Lambda::Function',
        'AWS::Logs::LogGroup',
        'AWS::SecretsManager::Secret',
      ].sort(),
    );
    for (const id of added) expect(id).toMatch(/^(Overflow|AlarmsOverflow)/);
    // What overflow changes in existing resources: the configuration the functions run with, the
    // governor's variables and permissions, the primary consumer's read of the overflow key, the
    // bus's publisher list and the dashboard.
    const [primaryId] = functionNamed(off, `${settings.prefix}-consumer`);
    const primaryPolicyId = only(
      byType(off, 'AWS::IAM::Policy').filter(
        ([, p]) => p.Properties.Roles[0].Ref === roleOf(resources(off)[primaryId] as Resource),
      ),
    )[0];
    const [governorId] = functionNamed(off, `${settings.prefix}-governor`);
    const governorPolicyId = only(
      byType(off, 'AWS::IAM::Policy').filter(
        ([, p]) => p.Properties.Roles[0].Ref === roleOf(resources(off)[governorId] as Resource),
      ),
    )[0];
    // The report function: the configuration, the overflow key's ARN and its read (a task the lane solved is reported there).
    const [reporterId] = functionNamed(off, `${settings.prefix}-reporter`);
    const reporterPolicyId = only(
      byType(off, 'AWS::IAM::Policy').filter(
        ([, p]) => p.Properties.Roles[0].Ref === roleOf(resources(off)[reporterId] as Resource),
      ),
    )[0];
    const [dashboardId] = only(byType(off, 'AWS::CloudWatch::Dashboard'));
    const busPolicyId = idOfType(off, 'AWS::Events::EventBusPolicy', (r) =>
      JSON.stringify(r.Properties.Statement).includes('aws:PrincipalArn'),
    );
    // The stall alarm counts the overflow lane's solves as progress too.
    const stalledId = idOfType(
      off,
      'AWS::CloudWatch::Alarm',
      (r) => r.Properties.AlarmName === `${settings.prefix}-TasksStalled`,
    );
    expect(changed.sort()).toEqual(
      [
        primaryId,
        primaryPolicyId,
        governorId,
        governorPolicyId,
        reporterId,
        reporterPolicyId,
        dashboardId,
        busPolicyId,
        stalledId,
      ].sort(),
    );
    const withoutEnv = (r: Resource | undefined) => ({ ...r?.Properties, Environment: undefined });
    expect(withoutEnv(onResources[primaryId])).toEqual(withoutEnv(offResources[primaryId]));
  });

  it('prints no overflow output', () => {
    const outputs = off.template.toJSON().Outputs as Record<string, unknown>;
    expect(outputs[STACK_OUTPUTS.overflowKeySecretArn]).toBeUndefined();
    expect(outputs[STACK_OUTPUTS.overflowFunctionName]).toBeUndefined();
    const onOutputs = Object.keys(on.template.toJSON().Outputs as Record<string, unknown>);
    expect(onOutputs.filter((key) => !(key in outputs)).sort()).toEqual(
      [STACK_OUTPUTS.overflowKeySecretArn, STACK_OUTPUTS.overflowFunctionName].sort(),
    );
  });
});
