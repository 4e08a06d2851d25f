/**
 * The stack's invariants, read from the synthesized template: what the design promises about
 * batches, ceilings, redrive, timeouts, concurrency, runtime, permissions, alarms and outputs,
 * plus cdk-nag and CloudFormation validation over the whole app.
 */
import { consumerSizing, FUNCTION_SIZING } from '../../functions/core/function-sizing.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import {
  GOVERNOR_STATE_ID,
  STORE_PROBE_KEY,
  SOLVER_KEY_PLACEHOLDER,
  STACK_OUTPUTS,
  THREAD_LEDGER_ID,
} from '../../functions/core/deployment.js';
import { ENV } from '../../functions/core/environment.js';
import { COMPLETION_EVENT_DETAIL_TYPE } from '../../functions/core/events.js';
import { MAPPING_MAX_CONCURRENCY, MAPPING_MIN_CONCURRENCY, resolveSettings } from '../../functions/core/settings.js';
import { ALARM_IDS, BLIND_ALARM_MINUTES, BLIND_TICK_SHARE, stalledMinutes } from '../../lib/fleet-alarms.js';
import { GOVERNOR_PARKED_TIMEOUT } from '../../lib/governor.js';
import { TICK_WINDOW_MS } from '../../functions/governor/relayed-watch.js';
import { removeOutdir, synthesizeFleet, type Synthesized } from './synth-helpers.js';
import {
  asArray,
  byType,
  functionNamed,
  only,
  REASONED_WILDCARD_ACTIONS,
  reportedViolations,
  type Statement,
  statementsOf,
} from './template-helpers.js';
import { SQS_MESSAGE_LIMIT_BYTES, TASK_QUEUE_MESSAGE_LIMIT_BYTES } from '../../functions/core/task.js';

/** The consumer's event source mappings (the report function has its own, on the reports queue). */
function consumerMappings(s: Synthesized, prefix: string) {
  const [consumerId] = functionNamed(s, `${prefix}-consumer`);
  return byType(s, 'AWS::Lambda::EventSourceMapping').filter(([, m]) => m.Properties.FunctionName?.Ref === consumerId);
}

/** The task lanes and their DLQ (the reports queue and its DLQ are tested in reports.test.ts). */
function taskQueues(s: Synthesized, names: { normal: string; high: string; dlq: string }) {
  return byType(s, 'AWS::SQS::Queue').filter(([, q]) =>
    [names.normal, names.high, names.dlq].includes(q.Properties.QueueName),
  );
}

describe('default stack', () => {
  let s: Synthesized;
  const settings = resolveSettings({});
  beforeAll(() => {
    s = synthesizeFleet();
  });
  afterAll(() => removeOutdir(s.outdir));

  it('has no unsuppressed cdk-nag or CloudFormation validation finding, and no error or warning annotation', () => {
    expect(reportedViolations(s)).toEqual([]);
    expect(s.messages).toEqual([]);
  });

  it('feeds the consumer from both lanes with the batch size and partial batch responses', () => {
    const mappings = consumerMappings(s, settings.prefix);
    expect(mappings).toHaveLength(2);
    const [consumerId] = functionNamed(s, `${settings.prefix}-consumer`);
    const queueIds = taskQueues(s, settings.queueNames)
      .filter(([, r]) => r.Properties.QueueName !== settings.queueNames.dlq)
      .map(([id]) => id);
    expect(mappings.map(([, m]) => m.Properties.EventSourceArn['Fn::GetAtt'][0]).sort()).toEqual(queueIds.sort());
    for (const [, mapping] of mappings) {
      expect(mapping.Properties.FunctionName).toEqual({ Ref: consumerId });
      expect(mapping.Properties.BatchSize).toBe(settings.tasksPerInvocation);
      expect(mapping.Properties.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
    }
  });

  it('caps both mappings: each within 2..1000, together within the usable plan threads', () => {
    const maxima = consumerMappings(s, settings.prefix).map(
      ([, m]) => m.Properties.ScalingConfig?.MaximumConcurrency as number,
    );
    for (const max of maxima) {
      expect(max).toBeGreaterThanOrEqual(MAPPING_MIN_CONCURRENCY);
      expect(max).toBeLessThanOrEqual(MAPPING_MAX_CONCURRENCY);
    }
    const sum = maxima.reduce((a, b) => a + b, 0);
    expect(sum * settings.tasksPerInvocation).toBeLessThanOrEqual(settings.effectiveCap);
  });

  it('reserves for the consumer at least the sum of its mappings’ maxima', () => {
    const [, consumer] = functionNamed(s, `${settings.prefix}-consumer`);
    const sum = consumerMappings(s, settings.prefix).reduce(
      (total, [, m]) => total + (m.Properties.ScalingConfig.MaximumConcurrency as number),
      0,
    );
    expect(consumer.Properties.ReservedConcurrentExecutions).toBeGreaterThanOrEqual(sum);
  });

  it('sends both lanes to one DLQ after maxReceiveCount (≥ 5) receives, encrypted, TLS only, 14 days', () => {
    const queues = taskQueues(s, settings.queueNames);
    expect(queues).toHaveLength(3);
    const [dlqId] = only(queues.filter(([, q]) => q.Properties.QueueName === settings.queueNames.dlq));
    for (const [, queue] of queues.filter(([id]) => id !== dlqId)) {
      expect(queue.Properties.RedrivePolicy).toEqual({
        deadLetterTargetArn: { 'Fn::GetAtt': [dlqId, 'Arn'] },
        maxReceiveCount: settings.maxReceiveCount,
      });
      expect(queue.Properties.RedrivePolicy.maxReceiveCount).toBeGreaterThanOrEqual(5);
    }
    for (const [, queue] of queues) {
      expect(queue.Properties.SqsManagedSseEnabled).toBe(true);
      expect(queue.Properties.MessageRetentionPeriod).toBe(14 * 86_400);
    }
    // The reports queue and its DLQ have theirs too (reports.test.ts).
    const policies = byType(s, 'AWS::SQS::QueuePolicy');
    expect(policies).toHaveLength(5);
    for (const [, policy] of policies) {
      expect(policy.Properties.PolicyDocument.Statement).toContainEqual(
        expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
      );
    }
  });

  it('takes SQS’s 1 MiB in the DLQ and keeps the lanes 4 KiB under it, for a dead letter’s reason attributes', () => {
    const queues = taskQueues(s, settings.queueNames);
    for (const [, queue] of queues)
      expect(queue.Properties.MaximumMessageSize).toBe(
        queue.Properties.QueueName === settings.queueNames.dlq
          ? SQS_MESSAGE_LIMIT_BYTES
          : TASK_QUEUE_MESSAGE_LIMIT_BYTES,
      );
    expect(SQS_MESSAGE_LIMIT_BYTES - TASK_QUEUE_MESSAGE_LIMIT_BYTES).toBe(4_096);
  });

  it('keeps each lane’s visibility timeout at least the consumer’s timeout (6× as AWS advises)', () => {
    const [, consumer] = functionNamed(s, `${settings.prefix}-consumer`);
    const timeout = consumer.Properties.Timeout as number;
    expect(timeout).toBe(settings.functionTimeoutSeconds);
    const lanes = taskQueues(s, settings.queueNames).filter(
      ([, q]) => q.Properties.QueueName !== settings.queueNames.dlq,
    );
    for (const [, queue] of lanes) {
      expect(queue.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(timeout);
      expect(queue.Properties.VisibilityTimeout).toBe(6 * timeout);
    }
  });

  it('runs the governor once a minute; parked, two may overlap while the watch passes from one to the next', () => {
    const [governorId, governor] = functionNamed(s, `${settings.prefix}-governor`);
    // The default design parks: the ticks end within TICK_WINDOW_MS (under the minute), the watch
    // runs on until the next invocation's takes over, so the next must be able to start.
    expect(governor.Properties.ReservedConcurrentExecutions).toBe(2);
    expect(TICK_WINDOW_MS).toBeLessThan(60_000);
    expect(governor.Properties.Timeout).toBe(GOVERNOR_PARKED_TIMEOUT.toSeconds());
    expect(governor.Properties.Timeout).toBeGreaterThan(60);
    const rule = only(byType(s, 'AWS::Events::Rule'))[1];
    expect(rule.Properties.ScheduleExpression).toBe('rate(1 minute)');
    expect(rule.Properties.Targets).toEqual([expect.objectContaining({ Arn: { 'Fn::GetAtt': [governorId, 'Arn'] } })]);
  });

  it('gives the governor the consumer’s name and both mapping ids', () => {
    const [consumerId] = functionNamed(s, `${settings.prefix}-consumer`);
    const [, governor] = functionNamed(s, `${settings.prefix}-governor`);
    const env = governor.Properties.Environment.Variables;
    expect(env[ENV.consumerFunctionName]).toEqual({ Ref: consumerId });
    const mappingIds = consumerMappings(s, settings.prefix).map(([id]) => id);
    const joined = JSON.stringify(env[ENV.mappingIds]);
    for (const id of mappingIds) expect(joined).toContain(`{"Ref":"${id}"}`);
    expect(joined).toMatch(/normal.*high/);
  });

  it('deploys each function at the memory and architecture the cost model bills (functions/core/function-sizing.ts)', () => {
    for (const [name, sizing] of [
      ['consumer', consumerSizing(settings)],
      ['governor', FUNCTION_SIZING.governor],
      ['reporter', FUNCTION_SIZING.reporter],
    ] as const) {
      const [, fn] = functionNamed(s, `${settings.prefix}-${name}`);
      expect(fn.Properties.MemorySize).toBe(sizing.memoryMb);
      expect(fn.Properties.Architectures).toEqual([sizing.architecture]);
    }
  });

  it('maps stack traces through the source maps where they can reach the logs, not in the consumer', () => {
    // The consumer logs errors by name and message and returns a batch's failures: the maps cost
    // its every cold start about 30 MB and some 300 ms of CPU for traces it never prints
    const nodeOptions = (name: string) =>
      (functionNamed(s, `${settings.prefix}-${name}`)[1].Properties.Environment.Variables as Record<string, unknown>)
        .NODE_OPTIONS;
    expect(nodeOptions('consumer')).toBeUndefined();
    expect(nodeOptions('governor')).toBe('--enable-source-maps');
    expect(nodeOptions('reporter')).toBe('--enable-source-maps');
  });

  it('runs every function on Node.js 24 / arm64 with the fleet environment and no key in it', () => {
    const functions = byType(s, 'AWS::Lambda::Function');
    expect(functions).toHaveLength(3);
    for (const [, fn] of functions) {
      expect(fn.Properties.Runtime).toBe('nodejs24.x');
      expect(fn.Properties.Architectures).toEqual(['arm64']);
      const env = fn.Properties.Environment.Variables as Record<string, unknown>;
      for (const name of [
        ENV.config,
        ENV.normalQueueUrl,
        ENV.highQueueUrl,
        ENV.dlqUrl,
        ENV.resultsTable,
        ENV.governorTable,
        ENV.solverKeySecretArn,
        ENV.eventBusName,
      ]) {
        expect(env[name], name).toBeDefined();
      }
      expect(env[ENV.solverKey]).toBeUndefined();
      expect(JSON.stringify(env)).not.toContain(SOLVER_KEY_PLACEHOLDER);
      expect(['consumer', 'governor', 'reporter']).toContain(env.POWERTOOLS_SERVICE_NAME);
      expect(env.POWERTOOLS_METRICS_NAMESPACE).toBe(settings.metricsNamespace);
      expect(JSON.parse(env[ENV.config] as string)).toMatchObject({ planThreads: settings.planThreads });
    }
  });

  it('grants no wildcard resource or action except the reasoned account-wide reads', () => {
    const statements = statementsOf(s);
    expect(statements.length).toBeGreaterThan(0);
    for (const statement of statements) {
      const actions = asArray(statement.Action);
      for (const action of actions) expect(action, JSON.stringify(statement)).not.toContain('*');
      const wildcard = asArray(statement.Resource).some((r) => JSON.stringify(r).includes('*'));
      if (wildcard) {
        expect(asArray(statement.Resource)).toEqual(['*']);
        for (const action of actions) expect(REASONED_WILDCARD_ACTIONS.has(action), `${action} on *`).toBe(true);
      }
    }
  });

  it('lets the governor move only the consumer’s mappings and concurrency, and touch only its state item', () => {
    const [consumerId] = functionNamed(s, `${settings.prefix}-consumer`);
    const statements = statementsOf(s);
    const mapping = only(statements.filter((st) => asArray(st.Action).includes('lambda:UpdateEventSourceMapping')));
    const mappingIds = consumerMappings(s, settings.prefix).map(([id]) => id);
    expect(asArray(mapping.Resource)).toHaveLength(2);
    for (const id of mappingIds) expect(JSON.stringify(mapping.Resource)).toContain(`{"Ref":"${id}"}`);
    const concurrency = only(statements.filter((st) => asArray(st.Action).includes('lambda:PutFunctionConcurrency')));
    expect(concurrency.Resource).toEqual({ 'Fn::GetAtt': [consumerId, 'Arn'] });
    const state = only(statements.filter((st) => st.Sid === 'StateItem'));
    expect(state.Condition).toEqual({ 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [GOVERNOR_STATE_ID] } });
  });

  it('lets the governor read only the store-probe key of the results table (its DynamoDB probe)', () => {
    const [tableId] = only(
      byType(s, 'AWS::DynamoDB::Table').filter(([, t]) => JSON.stringify(t.Properties.TableName).includes('results')),
    );
    const probe = only(statementsOf(s).filter((st) => st.Sid === 'StoreProbe'));
    expect(asArray(probe.Action)).toEqual(['dynamodb:GetItem']);
    expect(probe.Resource).toEqual({ 'Fn::GetAtt': [tableId, 'Arn'] });
    expect(probe.Condition).toEqual({ 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [STORE_PROBE_KEY] } });
  });

  it('lets the consumer and the governor (its probe’s answers, its spend grant) update the thread ledger item only', () => {
    const ledger = statementsOf(s).filter((st) => st.Sid === 'ThreadLedger');
    expect(ledger.map((st) => asArray(st.Action).sort())).toEqual([
      ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
      ['dynamodb:GetItem', 'dynamodb:UpdateItem'],
    ]);
    for (const st of ledger)
      expect(st.Condition).toEqual({ 'ForAllValues:StringEquals': { 'dynamodb:LeadingKeys': [THREAD_LEDGER_ID] } });
  });

  it('lets the consumer and the governor (its watch records parked answers) publish completion events on the fleet bus only', () => {
    const [busId] = only(byType(s, 'AWS::Events::EventBus'));
    const putEvents = statementsOf(s).filter((st) => asArray(st.Action).includes('events:PutEvents'));
    expect(putEvents.map((st) => st.Sid).sort()).toEqual(['CompletionEvents', 'ParkedCompletionEvents']);
    for (const statement of putEvents) {
      expect(statement.Resource).toEqual({ 'Fn::GetAtt': [busId, 'Arn'] });
      expect(statement.Condition).toEqual({
        StringEquals: { 'events:source': settings.eventSource, 'events:detail-type': COMPLETION_EVENT_DETAIL_TYPE },
      });
    }
  });

  it('denies PutEvents on the bus to every principal but the consumer’s and the governor’s roles, and any other source or type', () => {
    // Prepare
    const [busId] = only(byType(s, 'AWS::Events::EventBus'));
    const [, consumer] = functionNamed(s, `${settings.prefix}-consumer`);
    const [, governor] = functionNamed(s, `${settings.prefix}-governor`);
    const publishers = [consumer.Properties.Role, governor.Properties.Role];
    // Act
    const policies = byType(s, 'AWS::Events::EventBusPolicy');
    // Assess
    const statements = policies.flatMap(([, p]) => {
      expect(p.Properties.EventBusName).toEqual({ Ref: busId });
      return asArray(p.Properties.Statement as Statement | Statement[]);
    });
    const denyPut = (condition: unknown) =>
      expect(statements).toContainEqual(
        expect.objectContaining({
          Effect: 'Deny',
          Principal: { AWS: '*' },
          Action: 'events:PutEvents',
          Resource: { 'Fn::GetAtt': [busId, 'Arn'] },
          Condition: condition,
        }),
      );
    denyPut({ ArnNotEquals: { 'aws:PrincipalArn': publishers } });
    denyPut({ StringNotEquals: { 'events:source': settings.eventSource } });
    denyPut({ StringNotEquals: { 'events:detail-type': COMPLETION_EVENT_DETAIL_TYPE } });
    expect(statements.filter((st) => st.Effect === 'Allow')).toEqual([]);
  });

  it('gives operators StartMessageMoveTask on the DLQ and SendMessage on the lanes and the reports queue only', () => {
    const [dlqId] = only(
      byType(s, 'AWS::SQS::Queue').filter(([, q]) => q.Properties.QueueName === settings.queueNames.dlq),
    );
    const [, policy] = only(byType(s, 'AWS::IAM::ManagedPolicy'));
    const statements = policy.Properties.PolicyDocument.Statement as Statement[];
    const redrive = only(statements.filter((st) => asArray(st.Action).includes('sqs:StartMessageMoveTask')));
    expect(redrive.Resource).toEqual({ 'Fn::GetAtt': [dlqId, 'Arn'] });
    const sends = statements.filter((st) => asArray(st.Action).includes('sqs:SendMessage'));
    expect(sends.map((st) => st.Sid).sort()).toEqual(['RedriveToLanes', 'ReportAnswers']);
    for (const send of sends) expect(JSON.stringify(send.Resource)).not.toContain(dlqId);
  });

  it('keeps results on demand with TTL on expiresAt, point-in-time recovery, retained by default', () => {
    const [, results] = only(
      byType(s, 'AWS::DynamoDB::Table').filter(([, t]) => t.Properties.TableName === settings.tableNames.results),
    );
    expect(results.Properties).toMatchObject({
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [{ AttributeName: 'taskId', KeyType: 'HASH' }],
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
    });
    expect(results.DeletionPolicy).toBe('Retain');
    const [, governor] = only(
      byType(s, 'AWS::DynamoDB::Table').filter(([, t]) => t.Properties.TableName === settings.tableNames.governor),
    );
    expect(governor.Properties.KeySchema).toEqual([{ AttributeName: 'id', KeyType: 'HASH' }]);
  });

  it('creates every alarm, each notifying the encrypted, TLS-only topic', () => {
    const [topicId, topic] = only(byType(s, 'AWS::SNS::Topic'));
    expect(topic.Properties.KmsMasterKeyId).toBeDefined();
    const alarms = byType(s, 'AWS::CloudWatch::Alarm');
    expect(alarms.map(([, a]) => a.Properties.AlarmName).sort()).toEqual(
      ALARM_IDS.map((id) => `${settings.prefix}-${id}`).sort(),
    );
    for (const [, alarm] of alarms) {
      expect(alarm.Properties.AlarmActions).toEqual([{ Ref: topicId }]);
      expect(alarm.Properties.OKActions).toEqual([{ Ref: topicId }]);
    }
    expect(byType(s, 'AWS::SNS::Subscription')).toHaveLength(0);
  });

  it("lets the account's alarms publish to the topic its TLS-only policy guards", () => {
    // The topic policy (enforceSSL writes one) replaces SNS's default policy: without an allow for
    // CloudWatch, every alarm's action fails "not authorized to perform: SNS:Publish".
    const [topicId] = only(byType(s, 'AWS::SNS::Topic'));
    const [, policy] = only(byType(s, 'AWS::SNS::TopicPolicy'));
    expect(policy.Properties.Topics).toEqual([{ Ref: topicId }]);
    const statements = policy.Properties.PolicyDocument.Statement as Record<string, unknown>[];
    const allow = only(statements.filter((st) => st.Effect === 'Allow').map((st) => [st, st] as const))[1];
    expect(allow).toMatchObject({
      Principal: { Service: 'cloudwatch.amazonaws.com' },
      Action: 'sns:Publish',
      Resource: { Ref: topicId },
      Condition: { StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } } },
    });
    const arn = JSON.stringify((allow.Condition as { ArnLike: unknown }).ArnLike);
    expect(arn).toContain(`:alarm:${settings.prefix}-*`);
    // The TLS-only deny stays.
    expect(statements.some((st) => st.Effect === 'Deny' && st.Action === 'sns:Publish')).toBe(true);
  });

  it('alarms on a governor that holds on a missing signal at every tick, and on tasks waiting with none solved', () => {
    const alarm = (id: string) =>
      only(
        byType(s, 'AWS::CloudWatch::Alarm').filter(([, a]) => a.Properties.AlarmName === `${settings.prefix}-${id}`),
      )[1].Properties;
    // Its runs succeed, so neither GovernorErrors nor GovernorSilent fires. A share of the
    // minute's ticks: an invocation ticks 6 times at 10 s, 58 at 1 s (a count of 60 never came).
    const blind = alarm('GovernorBlind');
    expect(blind).toMatchObject({
      Threshold: BLIND_TICK_SHARE,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: BLIND_ALARM_MINUTES,
      DatapointsToAlarm: BLIND_ALARM_MINUTES,
      TreatMissingData: 'notBreaching',
    });
    const blindQueries = blind.Metrics as { Id: string; Expression?: string; MetricStat?: Record<string, unknown> }[];
    expect(blindQueries.find((q) => q.Expression)?.Expression).toBe(
      'IF(FILL(ticks, 0) > 0, FILL(blind, 0) / ticks, 0)',
    );
    expect(blindQueries.find((q) => q.Id === 'blind')?.MetricStat).toMatchObject({
      Metric: {
        Namespace: settings.metricsNamespace,
        MetricName: 'Decision',
        Dimensions: [
          { Name: 'Reason', Value: 'HOLD_MISSING_SIGNAL' },
          { Name: 'service', Value: 'governor' },
        ],
      },
      Stat: 'Sum',
      Period: 60,
    });
    expect(blindQueries.find((q) => q.Id === 'ticks')?.MetricStat).toMatchObject({
      Metric: { MetricName: 'Ceiling', Dimensions: [{ Name: 'service', Value: 'governor' }] },
      Stat: 'SampleCount',
    });
    const stalled = alarm('TasksStalled');
    expect(stalled).toMatchObject({
      Threshold: 1,
      EvaluationPeriods: stalledMinutes(settings),
      DatapointsToAlarm: stalledMinutes(settings),
      TreatMissingData: 'notBreaching',
    });
    const queries = stalled.Metrics as { Id: string; Expression?: string; MetricStat?: { Metric: unknown } }[];
    expect(queries.find((q) => q.Expression)?.Expression).toBe(
      'IF(FILL(normal, 0) + FILL(high, 0) > 0 AND FILL(solved, 0) == 0, 1, 0)',
    );
    expect(queries.find((q) => q.Id === 'solved')?.MetricStat?.Metric).toMatchObject({
      Namespace: settings.metricsNamespace,
      MetricName: 'Solved',
      Dimensions: [{ Name: 'service', Value: 'consumer' }],
    });
    expect(JSON.stringify(queries.find((q) => q.Id === 'normal')?.MetricStat?.Metric)).toContain(
      'ApproximateNumberOfMessagesVisible',
    );
    expect(stalledMinutes({ solveDeadlineSeconds: 180 })).toBe(10);
    expect(stalledMinutes({ solveDeadlineSeconds: 600 })).toBe(20);
  });

  it('sets the alarms’ thresholds from the settings', () => {
    const alarm = (id: string) =>
      only(
        byType(s, 'AWS::CloudWatch::Alarm').filter(([, a]) => a.Properties.AlarmName === `${settings.prefix}-${id}`),
      )[1].Properties;
    expect(alarm('BalanceBelowHalt')).toMatchObject({
      Threshold: settings.haltBalance,
      ComparisonOperator: 'LessThanThreshold',
      MetricName: 'Balance',
    });
    expect(alarm('DeadLetterQueueNotEmpty')).toMatchObject({
      Threshold: 1,
      MetricName: 'ApproximateNumberOfMessagesVisible',
    });
    // The reports DLQ has its own: a report that could not be settled is a refund nobody asked for yet.
    expect(alarm('ReportsDeadLetterQueueNotEmpty')).toMatchObject({
      Threshold: 1,
      MetricName: 'ApproximateNumberOfMessagesVisible',
      Dimensions: [
        {
          Name: 'QueueName',
          Value: { 'Fn::GetAtt': [expect.stringMatching(/^\w*ReportsDeadLetterQueue/), 'QueueName'] },
        },
      ],
    });
    expect(alarm('OldestTaskTooOld')).toMatchObject({
      Threshold: settings.oldestMessageAlarmSeconds,
      MetricName: 'ApproximateAgeOfOldestMessage',
    });
    expect(alarm('OldestHighPriorityTaskTooOld')).toMatchObject({ Threshold: settings.oldestMessageAlarmSeconds });
    expect(alarm('SolveTimeP95High')).toMatchObject({
      Threshold: 60_000,
      ExtendedStatistic: 'p95',
      Period: 60,
      EvaluationPeriods: 5,
      DatapointsToAlarm: 5,
      Dimensions: [{ Name: 'service', Value: 'consumer' }],
    });
    const errorRate = alarm('ErrorRateHigh');
    expect(errorRate.Threshold).toBe(5);
    // Per solver request: errors over submissions + result requests, as the governor reads it.
    const errorRateMetrics = JSON.stringify(errorRate.Metrics);
    for (const name of ['TransientErrors', 'TaskErrors', 'SolverSubmissions', 'ResultRequests'])
      expect(errorRateMetrics).toContain(name);
    const expression = (errorRate.Metrics as Array<{ Expression?: string }>).find(
      (m) => m.Expression !== undefined,
    )?.Expression;
    expect(expression).toBe(
      'IF(FILL(submissions, 0) + FILL(results, 0) > 0, 100 * (FILL(transient, 0) + FILL(task, 0)) / (FILL(submissions, 0) + FILL(results, 0)), 0)',
    );
    expect(alarm('GovernorSilent')).toMatchObject({
      TreatMissingData: 'breaching',
      EvaluationPeriods: 3,
      DatapointsToAlarm: 3,
    });
    expect(alarm('GovernorErrors')).toMatchObject({ MetricName: 'Errors', Namespace: 'AWS/Lambda' });
    expect(alarm('ConsumerThrottled')).toMatchObject({ MetricName: 'Throttles', Namespace: 'AWS/Lambda' });
  });

  it('draws the dashboard from the shared metric names', () => {
    const [, dashboard] = only(byType(s, 'AWS::CloudWatch::Dashboard'));
    const body = JSON.stringify(dashboard.Properties.DashboardBody);
    for (const name of [
      'SolveDuration',
      'Solved',
      'Failed',
      'Rejected',
      'ResultRequests',
      'Ceiling',
      'NeededThreads',
      'Balance',
      'Decision',
      'ApproximateAgeOfOldestMessage',
      'ConcurrentExecutions',
    ]) {
      expect(body).toContain(name);
    }
    // The shortfall is an expression of the needed and the free threads, not a metric of its own.
    expect(body).toContain('IF(needed > free, needed - free, 0)');
    expect(body).not.toContain('Shortfall');
  });

  it('prints what producers and operators need (the overflow outputs only with an overflow provider)', () => {
    const outputs = s.template.toJSON().Outputs as Record<string, { Value: unknown }>;
    const overflowOnly = new Set<string>([STACK_OUTPUTS.overflowKeySecretArn, STACK_OUTPUTS.overflowFunctionName]);
    for (const key of Object.values(STACK_OUTPUTS))
      if (overflowOnly.has(key)) expect(outputs[key], key).toBeUndefined();
      else expect(outputs[key], key).toBeDefined();
    expect(JSON.stringify(outputs[STACK_OUTPUTS.sendTaskCommand]?.Value)).toContain(
      'aws sqs send-message --queue-url ',
    );
  });
});

describe('stack with an imported secret, an alarm e-mail, a named plan and a destroyable results table', () => {
  let s: Synthesized;
  beforeAll(() => {
    s = synthesizeFleet({
      context: {
        planThreads: 'standard',
        alarmEmail: 'ops@example.com',
        solverKeySecretName: 'team/captcha-key',
        resultsRemoval: 'destroy',
        tasksPerInvocation: '2',
      },
    });
  });
  afterAll(() => removeOutdir(s.outdir));

  it('stays free of unsuppressed findings with the imported secret’s wildcard suffix', () => {
    expect(reportedViolations(s)).toEqual([]);
    expect(byType(s, 'AWS::SecretsManager::Secret')).toHaveLength(0);
    const secretReads = statementsOf(s).filter((st) => asArray(st.Action).includes('secretsmanager:GetSecretValue'));
    // The consumer, the governor and the report function.
    expect(secretReads).toHaveLength(3);
    for (const st of secretReads) expect(JSON.stringify(st.Resource)).toContain(':secret:team/captcha-key-??????');
  });

  it('sizes the ceilings from the plan name and the batch size', () => {
    const settings = resolveSettings({ planThreads: 15, tasksPerInvocation: 2 });
    const mappings = consumerMappings(s, settings.prefix);
    const sum = mappings.reduce((total, [, m]) => total + (m.Properties.ScalingConfig.MaximumConcurrency as number), 0);
    expect(sum * 2).toBeLessThanOrEqual(15);
    expect(sum).toBe(settings.maxConcurrency);
    for (const [, m] of mappings) expect(m.Properties.BatchSize).toBe(2);
  });

  it('subscribes the e-mail and lets the table go with the stack', () => {
    s.template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
    const results = byType(s, 'AWS::DynamoDB::Table').filter(
      ([, t]) => t.Properties.KeySchema[0].AttributeName === 'taskId',
    );
    expect(only(results)[1].DeletionPolicy).toBe('Delete');
  });
});

describe('validation at synth', () => {
  it('fails the synth on an unacknowledged cdk-nag finding', () => {
    expect(() =>
      synthesizeFleet({
        extend: (stack) => new sqs.Queue(stack, 'Unencrypted', { encryption: sqs.QueueEncryption.UNENCRYPTED }),
      }),
    ).toThrow(/AwsSolutions-SQS2/);
  });

  it('fails the synth on a CloudFormation validation error', () => {
    expect(() =>
      synthesizeFleet({
        extend: (stack) =>
          (stack.fleet.queues.normal.node.defaultChild as sqs.CfnQueue).addPropertyOverride(
            'VisibilityTimeout',
            99_999,
          ),
      }),
    ).toThrow(/CloudFormation Validate[\s\S]*VisibilityTimeout|VisibilityTimeout[\s\S]*CloudFormation Validate/);
  });
});
