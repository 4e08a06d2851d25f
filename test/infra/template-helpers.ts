/**
 * Reading a synthesized fleet template in the infra tests: resources by type, IAM statements,
 * and the violations cdk-nag and CloudFormation validation left in the report.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { Synthesized } from './synth-helpers.js';

export type Resource = { Type: string; Properties: Record<string, any>; DeletionPolicy?: string };
export type Statement = {
  Effect: string;
  Action: string | string[];
  Resource: unknown;
  Condition?: unknown;
  Sid?: string;
};

/** Actions IAM accepts only on "*"; each such statement carries its reason in lib/. */
export const REASONED_WILDCARD_ACTIONS = new Set(['cloudwatch:GetMetricData']);

export const byType = (s: Synthesized, type: string) =>
  Object.entries(s.template.findResources(type)) as [string, Resource][];
export const only = <T>(items: T[]): T => {
  expect(items).toHaveLength(1);
  return items[0] as T;
};
export const asArray = <T>(value: T | T[]): T[] => (Array.isArray(value) ? value : [value]);

export function functionNamed(s: Synthesized, name: string): [string, Resource] {
  return only(byType(s, 'AWS::Lambda::Function').filter(([, r]) => r.Properties.FunctionName === name));
}

export function statementsOf(s: Synthesized): Statement[] {
  return [...byType(s, 'AWS::IAM::Policy'), ...byType(s, 'AWS::IAM::ManagedPolicy')].flatMap(
    ([, r]) => r.Properties.PolicyDocument.Statement as Statement[],
  );
}

/** Violations left in the validation report (cdk-nag and CloudFormation Validate), any severity. */
export function reportedViolations(
  s: Synthesized,
): { plugin: string; rule: string; severity: string; paths: string[] }[] {
  const report = JSON.parse(readFileSync(join(s.outdir, 'validation-report.json'), 'utf8')) as {
    pluginReports: {
      pluginName: string;
      violations: { ruleName: string; severity: string; violatingConstructs: { constructPath: string }[] }[];
    }[];
  };
  return report.pluginReports.flatMap((plugin) =>
    plugin.violations.map((v) => ({
      plugin: plugin.pluginName,
      rule: v.ruleName,
      severity: v.severity,
      paths: v.violatingConstructs.map((c) => c.constructPath),
    })),
  );
}

/** The statements of the inline policy attached to one role. */
export function policyOfRole(s: Synthesized, roleId: string): Statement[] {
  const [, policy] = only(
    byType(s, 'AWS::IAM::Policy').filter(
      ([, p]) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]),
    ),
  );
  return policy.Properties.PolicyDocument.Statement as Statement[];
}

/** The logical id of a function's role. */
export const roleOf = (fn: Resource): string =>
  (fn.Properties.Role as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
