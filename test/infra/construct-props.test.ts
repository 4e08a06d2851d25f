/**
 * Construct props in lib/ follow the CDK's and aws-solutions-constructs' convention: every prop
 * `readonly`, with TSDoc, and every optional one says its `@default`.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { ROOT } from './synth-helpers.js';

const PROPS = /Props$|^FleetStackOptions$|^FleetEnvironmentInput$/;

/** `file: Interface.prop — problem` for every prop that breaks the convention. */
function propProblems(): { checked: number; problems: string[] } {
  const problems: string[] = [];
  let checked = 0;
  const dir = join(ROOT, 'lib');
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.ts'))) {
    const source = ts.createSourceFile(file, readFileSync(join(dir, file), 'utf8'), ts.ScriptTarget.Latest, true);
    source.forEachChild((node) => {
      if (!ts.isInterfaceDeclaration(node) || !PROPS.test(node.name.text)) return;
      for (const member of node.members) {
        if (!ts.isPropertySignature(member)) continue;
        checked++;
        const where = `${file}: ${node.name.text}.${member.name.getText(source)}`;
        const docs = ts.getJSDocCommentsAndTags(member);
        if (!member.modifiers?.some((m) => m.kind === ts.SyntaxKind.ReadonlyKeyword))
          problems.push(`${where} — not readonly`);
        if (docs.length === 0) problems.push(`${where} — no TSDoc`);
        const hasDefault = ts.getJSDocTags(member).some((tag) => tag.tagName.text === 'default');
        if (member.questionToken && !hasDefault) problems.push(`${where} — optional without @default`);
      }
    });
  }
  return { checked, problems };
}

describe('construct props', () => {
  it('are readonly, documented, and say their @default when optional', () => {
    const { checked, problems } = propProblems();
    expect(checked).toBeGreaterThan(30);
    expect(problems).toEqual([]);
  });
});
