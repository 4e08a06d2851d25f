/**
 * Reports in the stack: the reports queue and its DLQ, the report function fed by it, the role
 * it gets (exactly what a report needs), the key of each provider it reports to, what producers
 * and operators are granted, the outputs, and the spend and refunds on the dashboard.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STACK_OUTPUTS } from '../../functions/core/deployment.js';
import { ENV } from '../../functions/core/environment.js';
import { METRICS, REPORT_METRICS } from '../../functions/core/metric-names.js';
import { MAPPING_MIN_CONCURRENCY, resolveSettings } from '../../functions/core/settings.js';
import { REPORT_MAX_RECEIVES, REPORTER_TIMEOUT } from '../../lib/reports.js';
import { removeOutdir, synthesizeFleet, type Synthesized } from './synth-helpers.js';
import {
  asArray,
  byType,
  functionNamed,
  only,
  type Resource,
  reportedViolations,
  type Statement,
} from './template-helpers.js';

const idOf = (s: Synthesized, type: string, where: (r: Resource) => boolean): string =>
  only(byType(s, type).filter(([, r]) => where(r)))[0];
const roleOf = (fn: Resource): string => (fn.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
function policyOfRole(s: Synthesized, roleId: string): Statement[] {
  const [, policy] = only(
    byType(s, 'AWS::IAM::Policy').filter(
      ([, p]) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]),
    ),
  );
  return policy.Properties.PolicyDocument.Statement as Statement[];
}

describe('reports in the default stack', () => {
  let s: Synthesized;
  const settings = resolveSettings({});
  let fnId: string;
  let fn: Resource;
  let queueId: string;
  let dlqId: string;
  beforeAll(() => {
    s = synthesizeFleet();
    [fnId, fn] = functionNamed(s, `${settings.prefix}-reporter`);
    queueId = idOf(s, 'AWS::SQS::Queue', (r) => r.Properties.QueueName === settings.queueNames.reports);
    dlqId = idOf(s, 'AWS::SQS::Queue', (r) => r.Properties.QueueName === settings.queueNames.reportsDlq);
  });
  afterAll(() => removeOutdir(s.outdir));

  it('stays free of cdk-nag findings', () => {
    expect(reportedViolations(s)).toEqual([]);
  });

  it('sends reports to their own DLQ after 5 receives; encrypted, 14 days, visibility 6× the function timeout', () => {
    const queues = Object.fromEntries(byType(s, 'AWS::SQS::Queue'));
    expect(queues[queueId]?.Properties).toMatchObject({
      RedrivePolicy: { deadLetterTargetArn: { 'Fn::GetAtt': [dlqId, 'Arn'] }, maxReceiveCount: REPORT_MAX_RECEIVES },
      VisibilityTimeout: 6 * REPORTER_TIMEOUT.toSeconds(),
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 14 * 86_400,
    });
    expect(REPORT_MAX_RECEIVES).toBeGreaterThanOrEqual(5);
    expect(queues[dlqId]?.Properties).toMatchObject({
      SqsManagedSseEnabled: true,
      MessageRetentionPeriod: 14 * 86_400,
    });
    expect(fn.Properties.Timeout).toBe(REPORTER_TIMEOUT.toSeconds());
  });

  it('feeds the report function from the reports queue only, two at a time, with partial batch responses', () => {
    const mapping = only(
      byType(s, 'AWS::Lambda::EventSourceMapping').filter(([, m]) => m.Properties.FunctionName.Ref === fnId),
    )[1];
    expect(mapping.Properties).toEqual({
      FunctionName: { Ref: fnId },
      EventSourceArn: { 'Fn::GetAtt': [queueId, 'Arn'] },
      BatchSize: 10,
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      ScalingConfig: { MaximumConcurrency: MAPPING_MIN_CONCURRENCY },
    });
    expect(fn.Properties.Handler).toBe('index.handler');
    const env = fn.Properties.Environment.Variables as Record<string, unknown>;
    expect(env[ENV.reportsQueueUrl]).toEqual({ Ref: queueId });
    expect(env[ENV.reportsDlqUrl]).toEqual({ Ref: dlqId });
    expect(env.POWERTOOLS_SERVICE_NAME).toBe('reporter');
    expect(env[ENV.solverKeySecretArn]).toBeDefined();
    expect(env[ENV.overflowKeySecretArn]).toBeUndefined();
  });

  it('grants its role exactly: its logs, its queue, send to its DLQ, read and update result records, the key', () => {
    const resultsId = idOf(s, 'AWS::DynamoDB::Table', (r) => r.Properties.TableName === settings.tableNames.results);
    const secretId = only(byType(s, 'AWS::SecretsManager::Secret'))[0];
    const logsId = (fn.Properties.LoggingConfig as { LogGroup: { Ref: string } }).LogGroup.Ref;
    expect(policyOfRole(s, roleOf(fn))).toEqual([
      {
        Effect: 'Allow',
        Action: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        Resource: { 'Fn::GetAtt': [logsId, 'Arn'] },
      },
      {
        Effect: 'Allow',
        Action: [
          'sqs:ReceiveMessage',
          'sqs:ChangeMessageVisibility',
          'sqs:GetQueueUrl',
          'sqs:DeleteMessage',
          'sqs:GetQueueAttributes',
        ],
        Resource: { 'Fn::GetAtt': [queueId, 'Arn'] },
      },
      {
        Effect: 'Allow',
        Action: ['sqs:SendMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'],
        Resource: { 'Fn::GetAtt': [dlqId, 'Arn'] },
      },
      {
        Sid: 'ReportOnRecords',
        Effect: 'Allow',
        Action: ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
        Resource: { 'Fn::GetAtt': [resultsId, 'Arn'] },
      },
      {
        Effect: 'Allow',
        Action: ['secretsmanager:GetSecretValue', 'secretsmanager:DescribeSecret'],
        Resource: { Ref: secretId },
      },
    ]);
  });

  it('lets operators send reports (captcha-fleet report) and prints the queue for producers', () => {
    const [, policy] = only(byType(s, 'AWS::IAM::ManagedPolicy'));
    const statements = policy.Properties.PolicyDocument.Statement as Statement[];
    const report = only(statements.filter((st) => st.Sid === 'ReportAnswers'));
    expect(asArray(report.Action).sort()).toEqual(['sqs:GetQueueUrl', 'sqs:SendMessage']);
    expect(report.Resource).toEqual({ 'Fn::GetAtt': [queueId, 'Arn'] });
    const outputs = s.template.toJSON().Outputs as Record<string, { Value: unknown }>;
    expect(outputs[STACK_OUTPUTS.reportsQueueUrl]?.Value).toEqual({ Ref: queueId });
    expect(outputs[STACK_OUTPUTS.reporterFunctionName]?.Value).toEqual({ Ref: fnId });
  });

  it('draws spend per provider and per method, and refunds, on the dashboard', () => {
    const [, dashboard] = only(byType(s, 'AWS::CloudWatch::Dashboard'));
    const body = JSON.stringify(dashboard.Properties.DashboardBody);
    expect(body).toContain('Spend (USD per minute), by method and provider');
    expect(body).toContain(
      `SEARCH('{\\\\\\"${settings.metricsNamespace}\\\\\\",service,Method} MetricName=\\\\\\"${METRICS.spendUsd}\\\\\\"'`,
    );
    expect(body).toContain(`\\"${REPORT_METRICS.refunds}\\",\\"service\\",\\"reporter\\"`);
    expect(body).toContain(`\\"${REPORT_METRICS.refundsUsd}\\"`);
    expect(body).toContain(`MetricName=\\\\\\"${REPORT_METRICS.reportsRefused}\\\\\\"`);
  });
});

describe('reports with an overflow provider', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthesizeFleet({
      overrides: {
        overflow: { baseUrl: 'https://api.2captcha.com', capUsdPerHour: 5, capUsdPerDay: 50, priceHintUsd: 0.003 },
      },
    });
  });
  afterAll(() => removeOutdir(s.outdir));

  it('gives the report function the overflow key too: a task that lane solved is reported there', () => {
    const settings = resolveSettings({});
    const [, fn] = functionNamed(s, `${settings.prefix}-reporter`);
    const overflowSecretId = idOf(
      s,
      'AWS::SecretsManager::Secret',
      (r) => r.Properties.Name === `${settings.prefix}/overflow-key`,
    );
    expect((fn.Properties.Environment.Variables as Record<string, unknown>)[ENV.overflowKeySecretArn]).toEqual({
      Ref: overflowSecretId,
    });
    const reads = policyOfRole(s, roleOf(fn)).filter((st) =>
      asArray(st.Action).includes('secretsmanager:GetSecretValue'),
    );
    expect(reads.map((st) => st.Resource)).toContainEqual({ Ref: overflowSecretId });
    expect(reportedViolations(s)).toEqual([]);
  });
});
