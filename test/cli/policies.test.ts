import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { cliEnvFor } from '../integration/engine/helpers.js';

/**
 * Per-resource policies in metadata.annotations (dpctl.dev/reconcile, ignore-fields,
 * prevent-destroy), through the built binary against a real service.
 */
let svc: TestService;
let t: TestTenant;
let env: Record<string, string>;
beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  env = cliEnvFor(svc, t);
});
afterAll(() => svc?.close());

const project = (p: string) => `apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: ${p}\nspec:\n  description: policies\n`;
function connector(
  p: string,
  name: string,
  o: { annotations?: Record<string, string>; schedule?: string; type?: string; port?: number; labels?: Record<string, string> } = {},
) {
  const ann = o.annotations
    ? `  annotations:\n${Object.entries(o.annotations)
        .map(([k, v]) => `    ${k}: "${v}"\n`)
        .join('')}`
    : '';
  const labels = o.labels
    ? `  labels:\n${Object.entries(o.labels)
        .map(([k, v]) => `    ${k}: ${v}\n`)
        .join('')}`
    : '';
  return `apiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: ${name}\n  project: ${p}\n${labels}${ann}spec:\n  connector_type: ${o.type ?? 'mysql'}\n  config:\n    host: db.internal\n    port: ${o.port ?? 3306}\n    database: shop\n  schedule: "${o.schedule ?? '0 * * * *'}"\n`;
}

function write(dir: string, docs: string[]) {
  writeFileSync(join(dir, 'platform.yaml'), docs.join('---\n'));
}
function config(name: string, docs: string[]): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'dp-policies-')), name);
  mkdirSync(dir);
  write(dir, docs);
  return dir;
}

async function live(p: string, name: string): Promise<Record<string, any> | undefined> {
  const proj = (await svc.ok(t, 'GET', '/projects', { query: { limit: 100 } })).data.find((x: { name: string }) => x.name === p);
  return (await svc.ok(t, 'GET', `/projects/${proj.id}/connectors`, { query: { limit: 100 } })).data.find(
    (x: { name: string }) => x.name === name,
  );
}

describe('dpctl.dev/reconcile', () => {
  test('observe: the difference is planned and reported as drift, never applied; disabled: not planned, and not pruned', async () => {
    const dir = config('observe', [project('observe'), connector('observe', 'watched'), connector('observe', 'off')]);
    expect((await runDpctl(['apply', dir], { env })).code).toBe(0);
    write(dir, [
      project('observe'),
      connector('observe', 'watched', { schedule: '5 * * * *', annotations: { 'dpctl.dev/reconcile': 'observe' } }),
      connector('observe', 'off', { schedule: '9 * * * *', annotations: { 'dpctl.dev/reconcile': 'disabled' } }),
    ]);
    const plan = await runDpctl(['plan', dir, '--prune'], { env });
    expect(plan.code, plan.stdout).toBe(0);
    expect(plan.stdout).toContain('~ Connector observe/watched');
    expect(plan.stdout).toMatch(
      /: update \(observe only\)\n {6}schedule: "0 \* \* \* \*" -> "5 \* \* \* \*"\n {6}# note: observe only \(dpctl.dev\/reconcile: observe\): reported, never applied/,
    );
    expect(plan.stdout).not.toContain('observe/off');
    const apply = await runDpctl(['apply', dir, '--prune'], { env });
    expect(apply.code, apply.stdout).toBe(0);
    expect((await live('observe', 'watched'))!.schedule).toBe('0 * * * *');
    expect((await live('observe', 'off'))!.schedule).toBe('0 * * * *');
    const drift = await runDpctl(['drift', dir, '--output', 'json'], { env });
    expect(drift.code).toBe(2);
    expect(JSON.parse(drift.stdout).drift).toEqual([
      expect.objectContaining({
        type: 'changed',
        name: 'watched',
        fields: [{ field: 'schedule', before: '0 * * * *', after: '5 * * * *' }],
      }),
    ]);
  });
});

describe('dpctl.dev/ignore-fields', () => {
  test('ignored paths leave the diff and drift; an update of the same field keeps their live value', async () => {
    const ann = { 'dpctl.dev/ignore-fields': 'config.port, labels.team' };
    const dir = config('ignore', [project('ignore'), connector('ignore', 'orders', { annotations: ann })]);
    expect((await runDpctl(['apply', dir], { env })).code).toBe(0);
    const c = (await live('ignore', 'orders'))!;
    await svc.ok(t, 'PATCH', `/projects/${c.project_id}/connectors/${c.id}`, {
      body: { config: { ...c.config, port: 3307 }, labels: { ...c.labels, team: 'by-hand' } },
    });
    const plan = await runDpctl(['plan', dir], { env });
    expect(plan.code, plan.stdout).toBe(0);
    expect((await runDpctl(['drift', dir], { env })).code).toBe(0);
    // Another part of config changes: the PATCH sends config with the live port.
    write(dir, [project('ignore'), connector('ignore', 'orders', { annotations: ann }).replace('database: shop', 'database: shop2')]);
    const update = await runDpctl(['apply', dir], { env });
    expect(update.code, update.stdout).toBe(0);
    expect(update.stdout).toContain('# note: ignoring config.port, labels.team (dpctl.dev/ignore-fields)');
    expect((await live('ignore', 'orders'))!).toMatchObject({ config: { database: 'shop2', port: 3307 }, labels: { team: 'by-hand' } });
  });
});

describe('dpctl.dev/prevent-destroy', () => {
  test('a plan that would replace it fails naming it, and apply changes nothing', async () => {
    const guard = { 'dpctl.dev/prevent-destroy': 'true' };
    const dir = config('guarded', [project('guarded'), connector('guarded', 'orders', { annotations: guard })]);
    expect((await runDpctl(['apply', dir], { env })).code).toBe(0);
    const before = (await live('guarded', 'orders'))!.id;
    write(dir, [
      project('guarded'),
      connector('guarded', 'orders', { annotations: guard, type: 'postgresql', port: 5432 }).replace(
        'database: shop',
        'database: shop\n  credentials:\n    username: x',
      ),
    ]);
    const plan = await runDpctl(['plan', dir], { env });
    expect(plan.code).toBe(1);
    expect(plan.stdout).toMatch(
      // At the document (file:line:column), as the configuration's own errors are.
      /error: [\w/.-]+\.yaml:\d+:\d+: Connector guarded\/orders: dpctl.dev\/prevent-destroy is "true" and this plan would replace it \(connector_type cannot change in place\)/,
    );
    // -o json: the same problem formatted under `errors`, and as a value with its code under `problems`.
    const json = await runDpctl(['plan', '--output', 'json', dir], { env });
    expect(json.code).toBe(1);
    const out = JSON.parse(json.stdout);
    expect(out.problems).toEqual([
      {
        code: 'prevent_destroy',
        file: join(dir, 'platform.yaml'),
        line: 8,
        column: 1,
        subject: 'Connector guarded/orders',
        message: expect.stringMatching(/^dpctl.dev\/prevent-destroy is "true"/),
      },
    ]);
    expect(out.errors).toEqual([`${join(dir, 'platform.yaml')}:8:1: Connector guarded/orders: ${out.problems[0].message}`]);
    const apply = await runDpctl(['apply', dir], { env });
    expect(apply.code).toBe(1);
    expect(apply.stderr).toContain('nothing applied: the plan has errors');
    expect((await live('guarded', 'orders'))!.id).toBe(before);
  });

  test("an unknown dpctl.dev/ annotation is an error at its key; other annotations are the user's", async () => {
    const dir = config('typo', [
      project('typo'),
      connector('typo', 'orders', { annotations: { 'dpctl.dev/prevent-destory': 'true', 'team.example.com/owner': 'data' } }),
    ]);
    const r = await runDpctl(['validate', dir], { env });
    expect(r.code).toBe(1);
    expect(r.stdout + r.stderr).toMatch(
      /platform\.yaml:\d+:5: Connector\/orders: metadata\.annotations\.dpctl\.dev\/prevent-destory: unknown annotation dpctl\.dev\/prevent-destory: the dpctl\.dev\/ annotations are dpctl\.dev\/reconcile, dpctl\.dev\/ignore-fields, dpctl\.dev\/prevent-destroy/,
    );
  });
});
