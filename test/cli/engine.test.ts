import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { DPCTL, runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { clientFor, copyExample, edit, cliEnvFor } from '../integration/engine/helpers.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => {
  await svc?.close();
});

const envFor = (t: TestTenant) => cliEnvFor(svc, t);

describe('dpctl plan / apply / drift', () => {
  let t: TestTenant;
  let env: Record<string, string>;
  const dir = copyExample();
  beforeAll(async () => {
    t = await svc.tenant();
    env = envFor(t);
  });

  test('plan of an empty tenant: everything to create, exit 2, no colour when not a TTY', async () => {
    const r = await runDpctl(['plan', dir], { env });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(2);
    expect(r.stdout).toContain('  + Project analytics: create');
    expect(r.stdout).toContain('      credentials = {"username":"replicator","password":"(sensitive)"}');
    expect(r.stdout).not.toContain('orders-pw-1');
    expect(r.stdout).not.toContain('\x1b[');
    expect(r.stdout).toMatch(/Plan: 25 to create, 0 to update, 0 to replace, 0 to delete, 0 unchanged\.\n$/);
  });

  test('apply creates everything (exit 0); a second apply and plan change nothing (exit 0)', async () => {
    const r = await runDpctl(['apply', dir, '--concurrency', '3'], { env });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^\+ Connector analytics\/orders-db: created \(con_/m);
    expect(r.stdout).toContain('Apply complete: 25 done, 0 failed, 0 skipped, 0 not supported.');
    const again = await runDpctl(['apply', dir], { env });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('No changes: 25 resources in sync.');
    const plan = await runDpctl(['plan', dir, '--prune'], { env });
    expect(plan.code).toBe(0);
  });

  test('plan --output json', async () => {
    edit(dir, 'analytics/transform.yaml', 'schedule: "0 2 * * *"', 'schedule: "0 4 * * *"');
    const r = await runDpctl(['plan', dir, '--output', 'json'], { env });
    expect(r.code).toBe(2);
    const json = JSON.parse(r.stdout);
    expect(json).toMatchObject({
      source_id: 'platform',
      summary: { create: 0, update: 1, replace: 0, delete: 0, no_op: 24, unsupported: 0 },
      errors: [],
      managed_count: 23,
    });
    const change = json.changes.find((c: any) => c.action === 'update');
    expect(change).toEqual({
      action: 'update',
      kind: 'pipeline',
      yaml_kind: 'Pipeline',
      project: 'analytics',
      name: 'nightly-revenue',
      id: expect.stringMatching(/^pip_/),
      ownership: 'owned',
      fields: [{ field: 'schedule', before: '0 2 * * *', after: '0 4 * * *' }],
      reasons: [],
      notes: [],
      unsupported: null,
      observe_only: false,
      health: 'healthy',
      health_reason: null,
    });
    const applied = await runDpctl(['apply', dir, '--output', 'json'], { env });
    expect(applied.code).toBe(0);
    expect(JSON.parse(applied.stdout)).toMatchObject({
      converged: true,
      results: [{ action: 'update', name: 'nightly-revenue', status: 'done' }],
    });
  });

  test('drift: changed and deleted by hand and an unmanaged extra (exit 2, table and JSON); apply corrects it', async () => {
    const projects = await svc.ok(t, 'GET', '/projects');
    const analytics = projects.data.find((p: any) => p.name === 'analytics').id;
    const connectors = await svc.ok(t, 'GET', `/projects/${analytics}/connectors`);
    const orders = connectors.data.find((c: any) => c.name === 'orders-db');
    await svc.ok(t, 'PATCH', `/projects/${analytics}/connectors/${orders.id}`, { body: { schedule: '5 * * * *' } });
    const infra = await svc.ok(t, 'GET', `/projects/${analytics}/infrastructure`);
    await svc.ok(t, 'DELETE', `/projects/${analytics}/infrastructure/${infra.data[0].id}`);
    await svc.ok(t, 'POST', `/projects/${analytics}/classifications`, { body: { name: 'by-hand', sensitivity: 'internal' } });

    const table = await runDpctl(['drift', dir], { env });
    expect(table.code).toBe(2);
    expect(table.stdout).toMatch(/^DRIFT\s+KIND\s+PROJECT\s+NAME\s+DETAIL$/m);
    expect(table.stdout).toMatch(/^changed\s+Connector\s+analytics\s+orders-db\s+schedule$/m);
    expect(table.stdout).toMatch(/^deleted\s+InfrastructureResource\s+analytics\s+analytics-warehouse\s+declared but not on the server/m);
    expect(table.stdout).toMatch(/^unmanaged\s+Classification\s+analytics\s+by-hand\s+not declared/m);
    expect(table.stdout).toContain('orders-db: schedule: "0 * * * *" in config, "5 * * * *" on the server');

    const json = JSON.parse((await runDpctl(['drift', dir, '--output', 'json'], { env })).stdout);
    expect(json.summary).toEqual({ changed: 1, deleted: 1, orphaned: 0, unmanaged: 1 });
    expect(json.drift[0]).toEqual({
      type: 'changed',
      kind: 'connector',
      yaml_kind: 'Connector',
      project: 'analytics',
      name: 'orders-db',
      id: orders.id,
      fields: [{ field: 'schedule', before: '5 * * * *', after: '0 * * * *' }],
      detail: 'schedule',
    });

    const apply = await runDpctl(['apply', dir], { env });
    expect(apply.code).toBe(0);
    const after = await runDpctl(['drift', dir, '--output', 'json'], { env });
    expect(after.code).toBe(2);
    expect(JSON.parse(after.stdout).summary).toEqual({ changed: 0, deleted: 0, orphaned: 0, unmanaged: 1 });
  });

  test('errors exit 1: an invalid config, an unset secret, missing credentials', async () => {
    const bad = copyExample();
    edit(bad, 'analytics/sources.yaml', 'port: 5432', 'port: "x"');
    const invalid = await runDpctl(['plan', bad], { env });
    expect(invalid.code).toBe(1);
    expect(invalid.stderr).toContain('spec.config.port: must be integer');
    const noSecret = await runDpctl(['plan', dir], { env: { ...env, ORDERS_DB_PASSWORD: '' } });
    expect(noSecret.code).toBe(1);
    expect(noSecret.stderr).toContain('environment variable ORDERS_DB_PASSWORD is not set');
    const noCreds = await runDpctl(['drift', dir], { env: { ...env, DATAPLATFORM_EMAIL: '', DATAPLATFORM_PASSWORD: '' } });
    expect(noCreds.code).toBe(1);
    expect(noCreds.stderr).toContain('no credentials');
  });
});

test('an apply killed mid-way converges on re-run, with no duplicates', async () => {
  const t = await svc.tenant();
  const env = envFor(t);
  const dir = copyExample('interrupted');
  const child = spawn(process.execPath, [DPCTL, 'apply', dir, '--concurrency', '1'], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  await new Promise<void>((resolve) => {
    child.stdout.on('data', (d) => {
      out += d;
      if ((out.match(/: created \(/g) ?? []).length >= 6 && child.exitCode === null) child.kill('SIGKILL');
    });
    child.once('exit', () => resolve());
  });
  const created = (out.match(/: created \(/g) ?? []).length;
  expect(created).toBeGreaterThanOrEqual(6);
  expect(created).toBeLessThan(25);

  const rerun = await runDpctl(['apply', dir], { env });
  expect(rerun.code).toBe(0);
  // Everything printed as created was created; one more may have landed before the kill.
  const toCreate = Number(/Plan: (\d+) to create/.exec(rerun.stdout)![1]);
  expect(toCreate).toBeLessThanOrEqual(25 - created);
  expect(toCreate).toBeGreaterThanOrEqual(25 - created - 1);
  expect(rerun.stdout).toContain(`Apply complete: ${toCreate} done, 0 failed`);
  expect((await runDpctl(['plan', dir], { env })).code).toBe(0);
  const client = clientFor(svc, t);
  try {
    const projects = await client.projects.listAll();
    expect(projects.map((p) => p.name).sort()).toEqual(['analytics', 'marketing']);
    for (const p of projects) {
      for (const kind of ['connector', 'notification_channel', 'pipeline', 'alert_rule', 'classification', 'masking_policy'] as const) {
        const names = (await client.resourcesOf(kind, { projectId: p.id }).listAll()).map((r) => r.name);
        expect(new Set(names).size).toBe(names.length);
      }
    }
    const users = (await client.users.listAll()).map((u) => u.email);
    expect(new Set(users).size).toBe(users.length);
  } finally {
    await client.close();
  }
});

test('on a terminal, apply shows colour and a [done/total] status line; off a terminal, plain lines', async () => {
  const t = await svc.tenant();
  const env = envFor(t);
  const dir = copyExample('tty');
  // `script` runs dpctl with a pseudo-terminal as stdout, as a person at a shell would.
  const onTty = await new Promise<{ code: number | null; out: string }>((resolve) => {
    // --auto-approve: on a terminal apply asks first otherwise (saved-plan.test.ts answers it).
    const child = spawn(
      'script',
      ['-qec', `${JSON.stringify(process.execPath)} ${JSON.stringify(DPCTL)} apply --auto-approve ${JSON.stringify(dir)}`, '/dev/null'],
      {
        env: { ...process.env, ...env, COLUMNS: '160' },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.once('close', (code) => resolve({ code, out }));
  });
  expect(onTty.code, onTty.out).toBe(0);
  expect(onTty.out).toContain('\x1b['); // colour
  expect(onTty.out).toMatch(/\[25\/25\] applying/);
  expect(onTty.out).toMatch(/\[1\/25\] applying/);

  const plain = await runDpctl(['plan', dir], { env });
  expect(plain.code).toBe(0);
  expect(plain.stdout).not.toContain('\x1b[');
  expect(plain.stdout).not.toMatch(/applying\.\.\./);
});
