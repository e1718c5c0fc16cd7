import { describe, expect, it } from 'vitest';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig } from '../../../src/config/index.js';
import { FIXTURES, golden, lines } from './helpers.js';

/**
 * Each directory under test/fixtures/config/invalid/ is one rule: loading it must report
 * exactly the lines of its expected.txt (file:line:column: Kind/name: field: message),
 * every error of every file at once: root causes (YAML syntax first), then by file and position,
 * each with the errors that follow from it indented below it (see sortErrors).
 */
const INVALID = join(FIXTURES, 'invalid');
const cases = readdirSync(INVALID, { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();

describe('invalid repositories report every error at once, with exact positions', () => {
  it('has the rule fixtures this suite promises', () => {
    expect(cases).toEqual([
      'dag',
      'did-you-mean',
      'duplicates',
      'envelope',
      'missing-reference',
      'root-cause-dedent',
      'root-cause-scalars',
      'root-cause-tab',
      'secret-inline',
      'syntax',
      'syntax-quote',
      'two-files',
      'undeclared-project',
    ]);
  });

  it.each(cases)('%s', (name) => {
    const dir = join(INVALID, name);
    const { errors, config } = loadConfig('.', { cwd: dir });
    const actual = lines(errors);
    expect(actual).toEqual(golden(join(dir, 'expected.txt'), actual));
    expect(actual.length).toBeGreaterThan(0);
    // A document that breaks the schema is not in the model (cross-document errors keep both in it).
    const schemaErrors = errors.filter((e) => e.subject && !/^(duplicate|no )|depends on|dependency cycle|used twice/.test(e.message));
    for (const e of schemaErrors) expect(config.documents.map((d) => `${d.yamlKind}/${d.name}`)).not.toContain(e.subject);
  });

  it('reports several errors of two files in one pass, in file then position order', () => {
    const { errors } = loadConfig('.', { cwd: join(INVALID, 'two-files') });
    expect(new Set(errors.map((e) => e.file))).toEqual(new Set(['a.yaml', 'b.yaml']));
    expect(lines(errors)).toContain('a.yaml:15:11: Connector/orders: spec.config.port: must be integer');
    // A missing required field points at its parent mapping.
    expect(lines(errors)).toContain('b.yaml:19:5: AlertRule/failures: spec.condition.threshold: is required');
  });

  it('names both places of a duplicate, across files and case-insensitively for user emails', () => {
    const { errors, config } = loadConfig('.', { cwd: join(INVALID, 'duplicates') });
    expect(config.files).toEqual(['connectors.yaml', 'nested/more.yml']);
    expect(lines(errors)).toEqual([
      'nested/more.yml:5:9: Connector/orders: metadata.name: duplicate Connector "orders" in project "shop": already defined at connectors.yaml:14:9',
      'nested/more.yml:14:9: User/ana@example.com: metadata.name: duplicate User "ana@example.com": already defined at connectors.yaml:30:9',
    ]);
  });

  it('points at YAML syntax errors and still validates the other documents', () => {
    const { errors } = loadConfig('.', { cwd: join(INVALID, 'syntax') });
    expect(lines(errors)).toEqual([
      // Syntax errors first, whatever the file order.
      'broken.yaml:14:3: YAML syntax: Flow sequence in block collection must be sufficiently indented and end with a ]',
      'tabs.yaml:5:3: YAML syntax: Map keys must be unique',
      'broken.yaml:24:11: Connector/payments: spec.config.port: must be integer',
    ]);
  });

  it('rejects an inline secret with a message that says to use secretRef', () => {
    const { errors } = loadConfig('.', { cwd: join(INVALID, 'secret-inline') });
    const inline = errors.filter((e) => e.message.includes('never written inline'));
    expect(inline.map((e) => `${e.line}:${e.column} ${e.field}`)).toEqual([
      '15:15 spec.credentials.password',
      '25:24 spec.config.slack_webhook_url',
    ]);
    expect(inline[0].message).toBe(
      'is a secret and is never written inline: use { secretRef: { env: NAME } } or { secretRef: { file: path } }',
    );
    // The value itself never appears in any message.
    expect(lines(errors).join('\n')).not.toMatch(/hunter2|T0\/B0/);
  });

  it('reports a reference by name to a missing connector, and each missing name of a list', () => {
    const { errors } = loadConfig('.', { cwd: join(INVALID, 'missing-reference') });
    expect(lines(errors)).toContain(
      'pipelines.yaml:38:18: Pipeline/nightly: spec.steps[0].connector: no Connector named "orders-db" in project "shop"',
    );
    expect(lines(errors)).toContain(
      'pipelines.yaml:52:26: AlertRule/failures: spec.channels[1]: no NotificationChannel named "pager" in project "shop"',
    );
    expect(lines(errors).some((l) => l.includes('team-email'))).toBe(false);
  });

  it('accepts references found by a lookup of live resources', () => {
    const live = new Map([
      ['connector/shop/orders-db', 'con_1'],
      ['notification_channel/shop/pager', 'nch_1'],
      ['escalation_policy/shop/nobody', 'esc_1'],
      ['classification/shop/pii', 'cls_1'],
    ]);
    const { errors } = loadConfig('.', { cwd: join(INVALID, 'missing-reference'), lookup: (k, p, n) => live.get(`${k}/${p}/${n}`) });
    expect(lines(errors)).toEqual([
      'pipelines.yaml:63:3: MaskingPolicy/hide: spec.classification_id: is not a known field: refer to the resource by name with "classification"',
    ]);
  });

  it('lets projects exist on the server only when asked to', () => {
    const dir = join(INVALID, 'undeclared-project');
    expect(lines(loadConfig('.', { cwd: dir }).errors)).toHaveLength(1);
    const allowed = loadConfig('.', { cwd: dir, allowUndeclaredProjects: true });
    expect(allowed.errors).toEqual([]);
    expect(allowed.config.documents.map((d) => [d.yamlKind, d.project, d.name])).toEqual([['Connector', 'live-only', 'orders']]);
  });

  it('reports paths that do not exist and directories without YAML', () => {
    const { errors } = loadConfig(['nope', 'valid/secrets'], { cwd: FIXTURES });
    expect(lines(errors)).toEqual(['nope: no such file or directory', 'valid/secrets: no *.yaml or *.yml files in this directory']);
  });
});
