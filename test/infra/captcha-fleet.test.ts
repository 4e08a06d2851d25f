/**
 * The CaptchaFleet construct: its props cannot drift from the settings (one documented prop per
 * setting, whose `@default` is the schema's default), it validates as the stack does, it embeds in
 * any stack, and CaptchaFleetStack built on it keeps the logical ids deployed fleets already have
 * (a renamed stateful resource would be replaced, and a table's data lost, on the next deploy).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { App, Stack } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ConfigError, FleetConfigSchema, OverflowConfigSchema } from '../../functions/core/settings.js';
import { consumerSizing, FUNCTION_SIZING } from '../../functions/core/function-sizing.js';
import { parkedGovernorSizing } from '../../functions/core/watch-sizing.js';
import { CaptchaFleet } from '../../lib/captcha-fleet.js';
import { DEPLOYMENT_PROP_KEYS } from '../../lib/config.js';
import { ROOT, removeOutdir, synthesizeFleet } from './synth-helpers.js';

/** Each member of `interfaceName` in lib/config.ts with its `@default` text (undefined when it has none). */
function documentedProps(interfaceName: string): Map<string, string | undefined> {
  const file = join(ROOT, 'lib/config.ts');
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const props = new Map<string, string | undefined>();
  source.forEachChild((node) => {
    if (!ts.isInterfaceDeclaration(node) || node.name.text !== interfaceName) return;
    for (const member of node.members) {
      if (!ts.isPropertySignature(member)) continue;
      const tag = ts.getJSDocTags(member).find((t) => t.tagName.text === 'default');
      const text = tag === undefined ? undefined : (ts.getTextOfJSDocComment(tag.comment) ?? '').trim();
      props.set(member.name.getText(source), text);
    }
  });
  return props;
}

/** How a default is written in TSDoc: strings quoted, numbers and booleans as they are. */
const written = (value: unknown) => (typeof value === 'string' ? `'${value}'` : String(value));

/** Every setting with a documented prop whose `@default` is the schema's: the problems found. */
function driftOf(props: Map<string, string | undefined>, keys: string[], defaults: Record<string, unknown>): string[] {
  const problems: string[] = [];
  for (const key of keys) {
    if (!props.has(key)) {
      problems.push(`${key}: no prop (add it with TSDoc and @default)`);
      continue;
    }
    const tag = props.get(key);
    const expected = defaults[key];
    if (tag === undefined) problems.push(`${key}: no @default`);
    else if (expected !== undefined && tag !== written(expected))
      problems.push(`${key}: @default ${tag}, but the schema's default is ${written(expected)}`);
    else if (expected === undefined && !tag.startsWith('-') && !/^\w+ /.test(tag))
      problems.push(`${key}: @default ${tag}, but the schema has no default (say what happens, "- …")`);
  }
  return problems;
}

/** The synth warnings of a fleet built with `props` whose text matches `pattern`. */
function synthWarnings(props: Record<string, unknown>, pattern: string): string[] {
  const stack = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Shop');
  new CaptchaFleet(stack, 'Captcha', { prefix: 'shop', ...props });
  return Annotations.fromStack(stack)
    .findWarning('*', Match.stringLikeRegexp(pattern))
    .map((w) => String(w.entry.data));
}

describe('CaptchaFleet props', () => {
  it('have one documented prop per fleet setting, its @default the schema’s', () => {
    const props = documentedProps('FleetSettingsProps');
    expect(driftOf(props, Object.keys(FleetConfigSchema.shape), FleetConfigSchema.parse({}))).toEqual([]);
    expect([...props.keys()].sort()).toEqual(Object.keys(FleetConfigSchema.shape).sort());
  });

  it('have one documented prop per overflow setting, its @default the schema’s', () => {
    const required = { baseUrl: 'https://2captcha.com', capUsdPerHour: 1, capUsdPerDay: 2, priceHintUsd: 0.003 };
    const defaults = Object.fromEntries(
      Object.entries(OverflowConfigSchema.parse(required)).filter(([key]) => !(key in required)),
    );
    const props = documentedProps('OverflowProps');
    const optional = Object.keys(OverflowConfigSchema.shape).filter((key) => !(key in required));
    expect(driftOf(props, optional, defaults)).toEqual([]);
    expect([...props.keys()].sort()).toEqual(Object.keys(OverflowConfigSchema.shape).sort());
  });

  it('have the deployment’s own props documented', () => {
    const props = documentedProps('CaptchaFleetProps');
    expect([...props.keys()].sort()).toEqual([...DEPLOYMENT_PROP_KEYS].sort());
    for (const key of DEPLOYMENT_PROP_KEYS) expect(props.get(key), key).toBeDefined();
  });
});

describe('CaptchaFleet in a stack of your own', () => {
  it('builds the fleet under its id, beside the stack’s own resources, and grants a producer only what it needs', () => {
    // Prepare
    const stack = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Shop');
    const worker = new iam.Role(stack, 'Worker', { assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com') });

    // Act
    const fleet = new CaptchaFleet(stack, 'Captcha', { prefix: 'shop', planThreads: 20 });
    fleet.grantProduce(worker);

    // Assess
    const template = Template.fromStack(stack);
    // The two lanes and their DLQ, the reports queue and its DLQ.
    template.resourceCountIs('AWS::SQS::Queue', 5);
    template.hasResourceProperties('AWS::SQS::Queue', { QueueName: 'shop-reports' });
    template.hasResourceProperties('AWS::SQS::Queue', { QueueName: 'shop-tasks' });
    expect(
      Object.keys(template.findResources('AWS::DynamoDB::Table')).every((id) => id.startsWith('CaptchaTables')),
    ).toBe(true);
    const policies = JSON.stringify(template.findResources('AWS::IAM::Policy'));
    const workerPolicy = Object.values(template.findResources('AWS::IAM::Policy')).find((p) =>
      JSON.stringify(p.Properties.Roles).includes('Worker'),
    );
    const actions = JSON.stringify(
      workerPolicy?.Properties.PolicyDocument.Statement.map((s: { Action: unknown }) => s.Action),
    );
    expect(actions).toContain('sqs:SendMessage');
    expect(actions).toContain('dynamodb:GetItem');
    // The producer client checks the ids tasks bring with a BatchGetItem: without it every such
    // submit waited 1.5 s on a refused check and sent unchecked.
    expect(actions).toContain('dynamodb:BatchGetItem');
    expect(actions).not.toMatch(/Scan|Query|PutItem|ReceiveMessage|DeleteMessage/);
    expect(policies).toContain('shop');
  });

  it('refuses a prefix another fleet of the app has in the same account, whatever the region', () => {
    // Before, both synthesized (CloudFormation's validation warned at most) and clashed at deploy:
    // every name follows the prefix, and the operator policy and the dashboard are per account.
    const app = new App({ context: { 'aws:cdk:bundling-stacks': [] } });
    const shop = new Stack(app, 'Shop');
    new CaptchaFleet(shop, 'A', { planThreads: 20 });
    expect(() => new CaptchaFleet(shop, 'B', { planThreads: 20 })).toThrow(
      /prefix: "captcha-fleet" is already the prefix of the fleet at Shop\/A/,
    );
    expect(() => new CaptchaFleet(new Stack(app, 'Other'), 'C', { planThreads: 20 })).toThrow(ConfigError);
    const eu = new Stack(app, 'Eu', { env: { account: '111111111111', region: 'eu-west-1' } });
    const us = new Stack(app, 'Us', { env: { account: '111111111111', region: 'us-east-1' } });
    new CaptchaFleet(eu, 'Captcha', { prefix: 'shop', planThreads: 20 });
    expect(() => new CaptchaFleet(us, 'Captcha', { prefix: 'shop', planThreads: 20 })).toThrow(/named per account/);
    // Another account, or another prefix, is another fleet.
    const other = new Stack(app, 'Prod', { env: { account: '222222222222', region: 'eu-west-1' } });
    expect(() => new CaptchaFleet(other, 'Captcha', { prefix: 'shop', planThreads: 20 })).not.toThrow();
    expect(() => new CaptchaFleet(shop, 'Staging', { prefix: 'staging', planThreads: 20 })).not.toThrow();
  });

  it('refuses a configuration problem before creating anything, listing every one (misspelt props too)', () => {
    const stack = new Stack(new App(), 'Shop');
    const build = () =>
      new CaptchaFleet(stack, 'Captcha', { planThread: 20, alarmEmail: 'nobody' } as unknown as Record<string, never>);
    expect(build).toThrow(ConfigError);
    try {
      build();
    } catch (error) {
      const fields = (error as ConfigError).problems.map((p) => p.field);
      expect(fields).toEqual(['planThread', 'alarmEmail']);
      expect((error as ConfigError).problems[0]?.fix).toContain('planThreads');
    }
    expect(stack.node.tryFindChild('Captcha')).toBeUndefined();
  });
});

/** The MemorySize of the fleet's function `shop-<name>` in a stack built with `props`. */
function memoryOf(name: 'consumer' | 'governor', props: Record<string, unknown>): number {
  const stack = new Stack(new App({ context: { 'aws:cdk:bundling-stacks': [] } }), 'Shop');
  new CaptchaFleet(stack, 'Captcha', { prefix: 'shop', ...props });
  const functions = Template.fromStack(stack).findResources('AWS::Lambda::Function', {
    Properties: { FunctionName: `shop-${name}` },
  });
  const [found] = Object.values(functions) as Array<{ Properties: { MemorySize: number } }>;
  return found?.Properties.MemorySize as number;
}

describe('The consumer’s memory', () => {
  const consumerMemory = (props: Record<string, unknown>): number => memoryOf('consumer', props);

  it('is 192 MB parked, 256 MB waiting, and what consumerMemoryMb says when set, as the cost model bills it', () => {
    expect(consumerMemory({})).toBe(192);
    expect(consumerMemory({})).toBe(consumerSizing({ solveMode: 'park', tasksPerInvocation: 1 }).memoryMb);
    expect(consumerMemory({ solveMode: 'wait' })).toBe(256);
    expect(consumerMemory({ solveMode: 'wait' })).toBe(
      consumerSizing({ solveMode: 'wait', tasksPerInvocation: 1 }).memoryMb,
    );
    expect(consumerMemory({ consumerMemoryMb: 512 })).toBe(512);
    expect(consumerMemory({ solveMode: 'wait', consumerMemoryMb: 192 })).toBe(192);
  });

  it('refuses a memory Lambda cannot give, naming the field', () => {
    const stack = new Stack(new App(), 'Shop');
    try {
      new CaptchaFleet(stack, 'Captcha', { consumerMemoryMb: 100 });
      expect.unreachable('a 100 MB consumer was accepted');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.map((p) => p.field)).toEqual(['consumerMemoryMb']);
    }
  });
});

describe('The governor’s memory', () => {
  const governorMemory = (props: Record<string, unknown>): number => memoryOf('governor', props);

  it('grows with the plan in the parked design, as the cost model bills it; waiting, or set, it is what it says', () => {
    const parked600 = parkedGovernorSizing({ planThreads: 600, solverProtocol: 'res-php', dialect: 'captchaai' });
    expect(parked600.memoryMb).toBeGreaterThan(FUNCTION_SIZING.governor.memoryMb);
    expect(governorMemory({ planThreads: 600 })).toBe(parked600.memoryMb);
    expect(governorMemory({ planThreads: 50 })).toBe(FUNCTION_SIZING.governor.memoryMb);
    expect(governorMemory({ planThreads: 600, solveMode: 'wait' })).toBe(FUNCTION_SIZING.governor.memoryMb);
    expect(governorMemory({ planThreads: 600, governorMemoryMb: 1_024 })).toBe(1_024);
    expect(governorMemory({ planThreads: 600, solveMode: 'wait', governorMemoryMb: 512 })).toBe(512);
  });

  it('warns at synth when the memory leaves the watch short of CPU, and only then', () => {
    const warningsOf = (props: Record<string, unknown>) => synthWarnings(props, 'governor');
    expect(warningsOf({ planThreads: 600 })).toEqual([]);
    expect(warningsOf({ planThreads: 600, governorMemoryMb: 512 }).join(' ')).toMatch(/raise governorMemoryMb/);
    expect(warningsOf({ planThreads: 10_000, tasksPerInvocation: 10 }).join(' ')).toMatch(
      /10000 threads.*split the plan/,
    );
    expect(warningsOf({ planThreads: 10_000, tasksPerInvocation: 10, solveMode: 'wait' })).toEqual([]);
  });

  it('warns at synth when the reservations need more than a default account spares, and only then', () => {
    // A review: 1 000 threads with overflow reserved 2 002 with nothing said; the deploy fails.
    const warningsOf = (props: Record<string, unknown>) => synthWarnings(props, 'reserve');
    expect(warningsOf({ planThreads: 898 })).toEqual([]);
    expect(warningsOf({ planThreads: 899 }).join(' ')).toMatch(
      /reserve 901 concurrent executions.*a limit of at least 1001.*reserveConsumerConcurrency to false/,
    );
    expect(warningsOf({ planThreads: 1000, reserveConsumerConcurrency: false })).toEqual([]);
  });

  it('refuses a memory Lambda cannot give, naming the field', () => {
    const stack = new Stack(new App(), 'Shop');
    try {
      new CaptchaFleet(stack, 'Captcha', { governorMemoryMb: 64 });
      expect.unreachable('a 64 MB governor was accepted');
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as ConfigError).problems.map((p) => p.field)).toEqual(['governorMemoryMb']);
    }
  });
});

describe('CaptchaFleetStack', () => {
  it('keeps the logical ids of the stateful resources fleets already have deployed', () => {
    const s = synthesizeFleet();
    try {
      const ids = (type: string) => Object.keys(s.template.findResources(type)).sort();
      expect(ids('AWS::SQS::Queue')).toEqual([
        'QueuesDeadLetterQueue82AA3FB7',
        'QueuesHighPriorityQueueDF7F2C44',
        'QueuesTasksQueueECA677E4',
        'ReportsDeadLetterQueue411898AD',
        'ReportsQueue58F354F3',
      ]);
      // The leases table is new with the parked design (solveMode `park`, the default); the others keep their ids.
      expect(ids('AWS::DynamoDB::Table')).toEqual([
        'TablesGovernorState1C36604F',
        'TablesLeases8A459FA5',
        'TablesResultsD85FCDF1',
      ]);
      expect(ids('AWS::SecretsManager::Secret')).toEqual(['SolverKeySecret311132E2']);
      expect(ids('AWS::Events::EventBus')).toEqual(['CompletionEventsBusF19C6D83']);
      expect(ids('AWS::SNS::Topic')).toEqual(['AlarmsTopic3A2DFEBA']);
      expect(s.stack.fleet.node.id).toBe('Default');
    } finally {
      removeOutdir(s.outdir);
    }
  });
});
