import { describe, expect, it } from 'vitest';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigParseCache, formatConfigError, loadConfig, sortErrors, type ConfigError } from '../../../src/config/index.js';
import { documentKey } from '../../../src/config/errors.js';
import { closest, editDistance } from '../../../src/config/suggest.js';
import { FIXTURES, lines } from './helpers.js';

const INVALID = join(FIXTURES, 'invalid');

/** A directory with these files. */
function repo(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'dp-root-cause-'));
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  return dir;
}

const PROJECT = 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: shop\n';
const pipeline = (name: string, connector: string) =>
  `apiVersion: dataplatform/v1\nkind: Pipeline\nmetadata:\n  name: ${name}\n  project: shop\nspec:\n  schedule: "0 2 * * *"\n  steps:\n    - { name: s, type: connector_sync, connector: ${connector} }\n`;

describe('errors: root causes first, what follows from them collapsed under them', () => {
  it('lists the syntax error first and a reference to the broken document under it (the tab of issue 20)', () => {
    const { errors } = loadConfig('.', { cwd: join(INVALID, 'root-cause-tab') });
    const out = lines(errors);
    expect(out[0]).toBe(
      'sources/connectors.yaml:11:1: YAML syntax: Tabs are not allowed as indentation (and 3 errors that follow from it)',
    );
    expect(out.slice(1)).toEqual([
      '  ↳ sources/connectors.yaml:11:8: YAML syntax: Nested mappings are not allowed in compact mappings',
      '  ↳ sources/connectors.yaml:11:8: YAML syntax: Implicit keys need to be on a single line',
      '  ↳ pipelines.yaml:9:61: Pipeline/nightly: spec.steps[0].connector: no Connector named "orders-db" in project "shop"',
    ]);
    // References to the documents after the tab that did parse (crm, data-team) are fine.
    expect(out.join('\n')).not.toMatch(/crm|data-team/);
  });

  it('puts every dangling reference to a Connector without a name under the dedented key (3 files)', () => {
    const { errors } = loadConfig('.', { cwd: join(INVALID, 'root-cause-dedent') });
    expect(errors.filter((e) => !e.follows)).toHaveLength(1);
    expect(errors[0]).toMatchObject({ file: 'sources/connectors.yaml', line: 6, field: 'name', followers: 6 });
    expect(formatConfigError(errors[0])).toContain('did you mean metadata.name, indented under metadata?');
    expect(new Set(errors.slice(1).map((e) => e.file))).toEqual(
      new Set(['sources/connectors.yaml', 'dbt.yaml', 'pipelines.yaml', 'quality.yaml']),
    );
  });

  it('collapses the "no Project document" errors of every document under a Project that failed to parse', () => {
    const dir = repo({
      'p.yaml': 'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: shop\n  labels: { a: [ }\n',
      'a.yaml': pipeline('one', 'x'),
    });
    const out = lines(loadConfig('.', { cwd: dir }).errors);
    expect(out[0]).toMatch(/^p\.yaml:5:\d+: YAML syntax: .*\(and \d+ errors? that follows? from it\)$/);
    expect(out.filter((l) => !l.startsWith('  ↳ '))).toHaveLength(2); // the syntax error, and the connector x that is missing on its own
    expect(out.find((l) => l.includes('metadata.project'))).toMatch(
      /^ {2}↳ a\.yaml:5:12: Pipeline\/one: metadata\.project: no Project document named "shop"/,
    );
    expect(out.find((l) => l.includes('no Connector named "x"'))).toMatch(/^a\.yaml:/);
  });

  it('does not collapse a dangling reference to a name that no broken document meant', () => {
    const dir = repo({
      'a.yaml': PROJECT,
      'b.yaml': 'apiVersion: dataplatform/v1\nkind: Conector\nmetadata:\n  name: orders\n  project: shop\nspec: {}\n',
      'c.yaml': pipeline('one', 'orders') + '---\n' + pipeline('two', 'other'),
    });
    const out = lines(loadConfig('.', { cwd: dir }).errors);
    expect(out).toEqual([
      'b.yaml:2:7: Conector/orders: kind: unknown kind "Conector" (did you mean Connector?) (and 1 error that follows from it)',
      '  ↳ c.yaml:9:51: Pipeline/one: spec.steps[0].connector: no Connector named "orders" in project "shop"',
      'c.yaml:19:51: Pipeline/two: spec.steps[0].connector: no Connector named "other" in project "shop"',
    ]);
  });

  it('collapses "is required" under the misspelt key meant for it, and suggests only close names', () => {
    const dir = repo({
      'a.yaml': PROJECT,
      'b.yaml':
        'apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: c\n  project: shop\nspec:\n  connectorType: postgresql\n  config: { host: h, port: 1, database: d }\n  completely_unrelated: 1\n',
    });
    expect(lines(loadConfig('.', { cwd: dir }).errors)).toEqual([
      'b.yaml:7:3: Connector/c: spec.connectorType: is not a known field (did you mean connector_type?) (and 1 error that follows from it)',
      '  ↳ b.yaml:7:3: Connector/c: spec.connector_type: is required',
      'b.yaml:9:3: Connector/c: spec.completely_unrelated: is not a known field',
    ]);
  });

  it('gives the same lines from a memory cache, load after load (cached errors are never changed)', () => {
    const cache = new ConfigParseCache({ memory: true });
    const dir = join(INVALID, 'root-cause-dedent');
    const first = lines(loadConfig('.', { cwd: dir, cache }).errors);
    expect(lines(loadConfig('.', { cwd: dir, cache }).errors)).toEqual(first);
    expect(lines(loadConfig('.', { cwd: dir, cache }).errors)).toEqual(first);
  });
});

describe('sortErrors', () => {
  const at = (file: string, line: number, message: string, relation?: ConfigError['relation']): ConfigError => ({
    code: 'invalid_field',
    file,
    line,
    column: 1,
    message,
    ...(relation && { relation }),
  });

  it('puts syntax errors of any file first, then the rest by file order and position', () => {
    const sorted = sortErrors(
      [at('b.yaml', 9, 'schema'), at('z.yaml', 3, 'YAML syntax: x', { syntax: true }), at('a.yaml', 1, 'schema')],
      ['a.yaml', 'b.yaml', 'z.yaml'],
    );
    expect(sorted.map((e) => `${e.file}:${e.line}`)).toEqual(['z.yaml:3', 'a.yaml:1', 'b.yaml:9']);
  });

  it('is stable when called again with more errors (as plan does with secret errors), and leaves its input alone', () => {
    const key = documentKey('Connector', 'shop', 'orders');
    const input = [
      at('b.yaml', 2, 'dangling', { follows: [key] }),
      at('a.yaml', 5, 'broken', { syntax: true, causes: [key] }),
      at('a.yaml', 7, 'later', { syntax: true }),
    ];
    const once = sortErrors(input, ['a.yaml', 'b.yaml']);
    expect(once.map(formatConfigError)).toEqual([
      'a.yaml:5:1: broken (and 2 errors that follow from it)',
      '  ↳ a.yaml:7:1: later',
      '  ↳ b.yaml:2:1: dangling',
    ]);
    const twice = sortErrors([...once, at('a.yaml', 1, 'secret')], ['a.yaml', 'b.yaml']);
    expect(twice.map(formatConfigError)).toEqual([...once.map(formatConfigError), 'a.yaml:1:1: secret']);
    expect(input.some((e) => e.followers !== undefined || e.follows !== undefined)).toBe(false);
  });

  it('matches document keys whatever the case of the name', () => {
    expect(documentKey('User', undefined, 'Ana@Example.com')).toBe(documentKey('User', undefined, 'ana@example.com'));
  });
});

describe('did you mean', () => {
  it('counts an adjacent transposition as one edit', () => {
    expect(editDistance('lables', 'labels')).toBe(1);
    expect(editDistance('conector', 'connector')).toBe(1);
    expect(editDistance('kitten', 'sitting')).toBe(3);
    expect(editDistance('', 'abc')).toBe(3);
  });

  it('suggests only a close and unambiguous name', () => {
    expect(closest('Conector', ['Connector', 'Project', 'Pipeline'])).toBe('Connector');
    expect(closest('connector', ['Connector', 'Project'])).toBe('Connector'); // case does not count
    expect(closest('connectorType', ['connector_type', 'config'])).toBe('connector_type');
    expect(closest('schedul', ['schedule', 'steps'])).toBe('schedule');
    expect(closest('zzzzzz', ['schedule', 'steps'])).toBeUndefined();
    expect(closest('abcd', ['abce', 'abcf'])).toBeUndefined(); // a tie
    expect(closest('x', ['y'])).toBeUndefined(); // everything is one edit from one character
  });
});
