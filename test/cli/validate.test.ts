import { describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runDpctl } from '../support/cli.js';

const FIX = 'test/fixtures/config';

describe('dpctl validate', () => {
  it('exits 0 with a one-line summary for a valid repository', async () => {
    const r = await runDpctl(['validate', 'examples/platform']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.stdout).toMatch(/^valid: 25 documents in 7 files, 2 projects \(.*3 Connector.*2 Pipeline.*2 User\)\n$/);
  });

  it('exits 1 and prints every error of every file at once', async () => {
    const r = await runDpctl(['validate', `${FIX}/invalid/two-files`]);
    expect(r.code).toBe(1);
    const expected = readFileSync(`${FIX}/invalid/two-files/expected.txt`, 'utf8')
      .trim()
      .split('\n')
      .map((l) => `${FIX}/invalid/two-files/${l}`);
    expect(r.stderr.trim().split('\n')).toEqual([...expected, 'invalid: 9 errors in 2 files']);
    expect(r.stdout).toBe('');
  });

  it('prints the errors as structured values with their codes with -o json, grouped by code', async () => {
    const r = await runDpctl([
      'validate',
      '-o',
      'json',
      `${FIX}/invalid/two-files`,
      `${FIX}/invalid/undeclared-project`,
      `${FIX}/invalid/syntax`,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('');
    const out = JSON.parse(r.stdout);
    expect(out.valid).toBe(false);
    expect(out.by_code).toEqual({ yaml_syntax: 2, invalid_field: 10, duplicate_resource: 1, undeclared_project: 1 });
    expect(out.errors.length).toBe(Object.values(out.by_code as Record<string, number>).reduce((a, b) => a + b, 0));
    // Root causes first, as in text: the syntax error leads.
    expect(out.errors[0]).toMatchObject({ code: 'yaml_syntax', file: expect.stringContaining('invalid/syntax/') });
    expect(out.errors).toContainEqual({
      code: 'invalid_field',
      file: `${FIX}/invalid/two-files/a.yaml`,
      line: 15,
      column: 11,
      subject: 'Connector/orders',
      field: 'spec.config.port',
      message: 'must be integer',
    });
    const ok = await runDpctl(['validate', '-o', 'json', 'examples/platform']);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toEqual({ valid: true, documents: 25, files: 7, root_causes: 0, by_code: {}, errors: [] });
  });

  it('takes several paths, and lets projects exist on the server with --allow-undeclared-projects', async () => {
    const strict = await runDpctl(['validate', `${FIX}/invalid/undeclared-project`, `${FIX}/valid/platform.yaml`]);
    expect(strict.code).toBe(1);
    expect(strict.stderr).toContain(
      `${FIX}/invalid/undeclared-project/connector.yaml:5:12: Connector/orders: metadata.project: no Project document named "live-only"`,
    );
    const allowed = await runDpctl([
      'validate',
      '--allow-undeclared-projects',
      `${FIX}/invalid/undeclared-project`,
      `${FIX}/valid/platform.yaml`,
    ]);
    expect(allowed.code).toBe(0);
    expect(allowed.stdout).toMatch(/^valid: 14 documents in 2 files, 2 projects/);
  });

  it('reads every secretRef with --check-secrets', async () => {
    const env = { OPS_PASSWORD: 'ops-password-1', HOOK_SECRET: '' };
    const failed = await runDpctl(['validate', '--check-secrets', `${FIX}/valid`], { env });
    expect(failed.code).toBe(1);
    expect(failed.stderr).toContain(
      `${FIX}/valid/platform.yaml:82:41: NotificationChannel/b: spec.config.signing_secret: environment variable HOOK_SECRET is not set (it is empty)`,
    );
    const ok = await runDpctl(['validate', '--check-secrets', `${FIX}/valid`], { env: { ...env, HOOK_SECRET: 'hook-secret' } });
    expect(ok.code).toBe(0);
  });

  it('lists the root cause first and what follows from it under it (issue 20: a tab, a dedented key)', async () => {
    const tab = await runDpctl(['validate', `${FIX}/invalid/root-cause-tab`]);
    expect(tab.code).toBe(1);
    const tabLines = tab.stderr.trim().split('\n');
    // The syntax error comes first although its file sorts last; its 2 follow-up syntax errors and the reference to the broken Connector are under it.
    expect(tabLines[0]).toBe(
      `${FIX}/invalid/root-cause-tab/sources/connectors.yaml:11:1: YAML syntax: Tabs are not allowed as indentation (and 3 errors that follow from it)`,
    );
    expect(tabLines.slice(1, -1).every((l) => l.startsWith('  ↳ '))).toBe(true);
    expect(tabLines.at(-1)).toBe('invalid: 4 errors in 2 files (1 root cause)');

    const dedent = await runDpctl(['validate', `${FIX}/invalid/root-cause-dedent`]);
    expect(dedent.code).toBe(1);
    const dedentLines = dedent.stderr.trim().split('\n');
    expect(dedentLines[0]).toBe(
      `${FIX}/invalid/root-cause-dedent/sources/connectors.yaml:6:1: Connector/(unnamed): name: is not a known field (did you mean metadata.name, indented under metadata?) (and 6 errors that follow from it)`,
    );
    expect(dedentLines.filter((l) => l.includes('no Connector named "orders-db"'))).toHaveLength(5);
    expect(dedentLines.slice(1, -1).every((l) => l.startsWith('  ↳ '))).toBe(true);
    // The count line keeps its first part (scripts grep it) and counts the collapsed errors too.
    expect(dedentLines.at(-1)).toBe('invalid: 7 errors in 4 files (1 root cause)');
  });

  it('suggests the closest kind and field name', async () => {
    const r = await runDpctl(['validate', `${FIX}/invalid/did-you-mean`]);
    expect(r.code).toBe(1);
    const at = `${FIX}/invalid/did-you-mean/typos.yaml`;
    expect(r.stderr).toContain(
      `${at}:8:7: Conector/orders-db: kind: unknown kind "Conector" (did you mean Connector?) (and 1 error that follows from it)\n`,
    );
    expect(r.stderr).toContain(
      `${at}:23:3: Connector/crm: spec.conector_type: is not a known field (did you mean connector_type?) (and 1 error that follows from it)\n  ↳ ${at}:23:3: Connector/crm: spec.connector_type: is required\n`,
    );
    expect(r.stderr).toContain(`${at}:21:3: Connector/crm: metadata.lables: is not a known field (did you mean labels?)\n`);
    expect(r.stderr).toContain(`${at}:37:59: Pipeline/nightly: spec.steps[2].connector: no Connector named "zzzzzzzz" in project "shop"\n`);
    // An API reference field (connector_id) is the root cause of the missing connector; a misspelt enum value has its suggestion.
    expect(r.stderr).toContain(
      `${at}:38:44: Pipeline/nightly: spec.steps[3].connector_id: is not a known field: refer to the resource by name with "connector" (and 1 error that follows from it)\n  ↳ ${at}:38:7: Pipeline/nightly: spec.steps[3].connector: is required\n`,
    );
    expect(r.stderr).toContain(`${at}:46:19: Connector/misspelt-type: spec.connector_type: must be one of: `);
    expect(r.stderr).toContain(`"rest_api" (did you mean "mysql"?)\n`);
    expect(r.stderr).toMatch(/\ninvalid: 12 errors in 1 file \(8 root causes\)\n$/);
  });

  it('refuses more documents of a capped kind in one project than the service lets a project hold', async () => {
    // Classifications are capped at 1,000 per project (x-max-per-scope); another project has its own 1,000.
    const dir = mkdtempSync(join(tmpdir(), 'dpctl-validate-cap-'));
    const project = (name: string) => `apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${name}\n`;
    const classification = (project: string, i: number) =>
      `apiVersion: dataplatform/v1\nkind: Classification\nmetadata:\n  name: c${i}\n  project: ${project}\nspec:\n  sensitivity: internal\n  column_matchers:\n    - column_pattern: "c${i}"\n`;
    const many = (p: string, n: number) => Array.from({ length: n }, (_, i) => classification(p, i)).join('---\n');
    writeFileSync(join(dir, 'projects.yaml'), [project('gov'), project('other')].join('---\n'));
    writeFileSync(join(dir, 'gov.yaml'), many('gov', 1_002));
    writeFileSync(join(dir, 'other.yaml'), many('other', 1_000));
    const r = await runDpctl(['validate', dir]);
    expect(r.code).toBe(1);
    // Document 1,001 starts at line 1,000 x 10 + 1 (9 lines and a separator each); its name is on line 4 of it.
    expect(r.stderr).toBe(
      `${dir}/gov.yaml:10004:9: Classification/c1000: metadata.name: project "gov" declares more than 1,000 Classification documents, and a project holds at most 1,000 classifications; this is the first one past it\n` +
        'invalid: 1 error in 1 file\n',
    );
  });

  it('says so when a path does not exist', async () => {
    const r = await runDpctl(['validate', 'no/such/dir']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('no/such/dir: no such file or directory\ninvalid: 1 error in 1 file\n');
  });
});
