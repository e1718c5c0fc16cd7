/**
 * The generic layers learn what is special about a kind from its descriptor (schemas/kinds), never
 * by comparing its name: `if (kind === 'project')` means the descriptor is missing a property.
 * Per-kind code has its own places (the service's routes and runtime, cdktf/helpers, cli/run).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KINDS } from '../../../src/kinds/index.js';

const SRC = resolve(import.meta.dirname, '..', '..', '..', 'src');
const GENERIC = ['engine', 'controller', 'config', 'client', 'provider', 'cdktf/yaml.ts', 'cdktf/naming.ts', 'cdktf/policies.ts'];

function files(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path).flatMap((name) => files(join(path, name)));
}

/** `kind === 'name'`, `'name' !== d.kind`, `resourcesOf('name')` for a kind's name, with file:line. */
function kindNameChecks(text: string, file: string): string[] {
  const names = [...KINDS.keys()].join('|');
  const patterns = [
    new RegExp(`\\bkind\\s*[!=]==?\\s*'(${names})'`),
    new RegExp(`'(${names})'\\s*[!=]==?\\s*[\\w.?]*\\bkind\\b`),
    new RegExp(`\\b(?:resourcesOf|kindNamed|lookup)\\(\\s*'(${names})'`),
  ];
  return text.split('\n').flatMap((line, i) => (patterns.some((p) => p.test(line)) ? [`${file}:${i + 1}: ${line.trim()}`] : []));
}

describe('no kind names in the generic layers', () => {
  it('finds one when it is there (the check can fail)', () => {
    expect(kindNameChecks("if (d.kind === 'project') x();\nconst ok = d.scope === 'project';", 'a.ts')).toEqual([
      "a.ts:1: if (d.kind === 'project') x();",
    ]);
    expect(kindNameChecks("client.resourcesOf('connector')", 'b.ts')).toHaveLength(1);
  });

  it('engine, controller, config, client, provider and the YAML bridge have none', () => {
    const found = GENERIC.flatMap((top) =>
      files(join(SRC, top))
        .filter((f) => f.endsWith('.ts') && !f.includes('/generated/'))
        .flatMap((f) => kindNameChecks(readFileSync(f, 'utf8'), relative(SRC, f))),
    );
    expect(found).toEqual([]);
  });
});
