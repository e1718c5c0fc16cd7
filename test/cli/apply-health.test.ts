import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { runDpctl } from '../support/cli.js';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';
import { cliEnvFor } from '../integration/engine/helpers.js';
import { closedPort, createSourceDb } from '../integration/runtime/helpers.js';

/**
 * dpctl apply does not stop at "the API accepted it": it provisions infrastructure through the
 * platform's plan and apply and waits, tests connections on request, and waits for health.
 * The built binary against a real service over HTTPS, simulated work at 20x.
 */

let svc: TestService;
let t: TestTenant;
let env: Record<string, string>;
beforeAll(async () => {
  svc = await startTestService({ timeScale: 20 });
  t = await svc.tenant();
  env = cliEnvFor(svc, t);
});
afterAll(() => svc?.close());

const doc = (kind: string, name: string, project: string | undefined, spec: string) =>
  `apiVersion: dataplatform/v1\nkind: ${kind}\nmetadata:\n  name: ${name}\n${project ? `  project: ${project}\n` : ''}spec:\n${spec.replace(/^/gm, '  ')}\n`;
const projectDoc = (p: string) => doc('Project', p, undefined, 'description: health tests');
const infra = (p: string, name: string, type: string, provider: string, region: string) =>
  doc('InfrastructureResource', name, p, `resource_type: ${type}\nprovider: ${provider}\nregion: ${region}`);

/** A config directory (its name is the source id) holding one file of documents. */
function config(name: string, docs: string[]): string {
  const dir = join(mkdtempSync(join(tmpdir(), 'dp-health-')), name);
  mkdirSync(dir);
  writeFileSync(join(dir, 'platform.yaml'), docs.join('---\n'));
  return dir;
}

async function live(project: string, collection: string, name: string): Promise<Record<string, unknown>> {
  const p = (await svc.ok(t, 'GET', '/projects', { query: { limit: 100 } })).data.find((x: { name: string }) => x.name === project);
  const items = (await svc.ok(t, 'GET', `/projects/${p.id}/${collection}`, { query: { limit: 100 } })).data;
  return items.find((x: { name: string }) => x.name === name);
}

describe('dpctl plan and apply: provisioning', () => {
  test('plan shows what the platform will provision; apply provisions it, waits, and the next plan is empty', async () => {
    const dir = config('prov-ok', [
      projectDoc('prov-ok'),
      infra('prov-ok', 'wh', 'warehouse', 'snowflake', 'eu-west-1'),
      infra('prov-ok', 'raw', 'bucket', 'aws', 'us-east-1'),
    ]);
    const plan = await runDpctl(['plan', dir], { env });
    expect(plan.code).toBe(2);
    expect(plan.stdout).toContain(
      'Infrastructure the platform will provision in project prov-ok (after this apply):\n  + provision bucket raw\n  + provision warehouse wh\n',
    );
    const markdown = await runDpctl(['plan', dir, '--output', 'markdown'], { env });
    expect(markdown.stdout).toContain(
      '#### Infrastructure the platform will provision\n\n- + provision prov-ok/raw\n- + provision prov-ok/wh\n',
    );
    const apply = await runDpctl(['apply', dir], { env });
    expect(apply.stderr).toBe('');
    expect(apply.code).toBe(0);
    expect(apply.stdout).toMatch(/prov-ok: provisioning create (wh, create raw|raw, create wh) \(plan_[0-9a-f]+\)/);
    expect(apply.stdout).toContain('  prov-ok/wh: provisioned\n');
    expect(apply.stdout).toContain('Health: all 2 healthy.');
    expect(await live('prov-ok', 'infrastructure', 'wh')).toMatchObject({ status: 'provisioned', last_error: null });
    const again = await runDpctl(['plan', dir], { env });
    expect(again.code).toBe(0);
    expect(again.stdout).not.toContain('Infrastructure the platform will provision');
  });

  test('a change that reached the platform but no apply (an apply stopped after its PATCH, a label written by adopt): plan shows it pending, apply provisions it', async () => {
    const docs = (size: string) => [
      projectDoc('prov-pending'),
      doc(
        'InfrastructureResource',
        'wh',
        'prov-pending',
        `resource_type: warehouse\nprovider: snowflake\nregion: eu-west-1\nconfig:\n  size: ${size}`,
      ),
    ];
    const dir = config('prov-pending', docs('SMALL'));
    expect((await runDpctl(['apply', dir], { env })).code).toBe(0);
    // The config and the platform agree on LARGE, but only the PATCH happened: nothing provisioned it.
    writeFileSync(join(dir, 'platform.yaml'), docs('LARGE').join('---\n'));
    const wh = await live('prov-pending', 'infrastructure', 'wh');
    const project = (await svc.ok(t, 'GET', '/projects', { query: { limit: 100 } })).data.find(
      (x: { name: string }) => x.name === 'prov-pending',
    );
    await svc.ok(t, 'PATCH', `/projects/${project.id}/infrastructure/${wh.id}`, { body: { config: { size: 'LARGE' } } }, 200);
    expect(await live('prov-pending', 'infrastructure', 'wh')).toMatchObject({ status: 'pending' });

    const plan = await runDpctl(['plan', dir], { env });
    expect(plan.code, plan.stdout + plan.stderr).toBe(2);
    expect(plan.stdout).toContain('  ~ change warehouse wh (config) # already pending on the platform\n');
    expect(plan.stdout).toContain('No resource changes: 2 resources in sync; 1 infrastructure change to provision (above).');
    const apply = await runDpctl(['apply', dir], { env });
    expect(apply.code, apply.stdout + apply.stderr).toBe(0);
    expect(apply.stdout).toContain('  prov-pending/wh: provisioned\n');
    expect(await live('prov-pending', 'infrastructure', 'wh')).toMatchObject({ status: 'provisioned', config: { size: 'LARGE' } });
    expect((await runDpctl(['plan', dir], { env })).code).toBe(0);
  });

  test("a refused provisioning fails the apply naming the resource and the platform's message; a re-run fails the same way; the fix (a replace) converges", async () => {
    const docs = [
      projectDoc('prov-bad'),
      infra('prov-bad', 'net', 'network', 'azure', 'westeurope'),
      infra('prov-bad', 'lake', 'bucket', 'aws', 'mars-1'),
    ];
    const dir = config('prov-bad', docs);
    const first = await runDpctl(['apply', dir], { env });
    expect(first.code).toBe(1);
    expect(first.stdout).toContain('error: prov-bad/lake: provisioning failed: aws has no region "mars-1"');
    expect(first.stdout).toContain('Apply incomplete: 3 done, 0 failed, 0 skipped, 0 not supported; 1 problem after the writes (below).');
    expect(first.stdout).toContain('Not done: the writes are done, but 1 problem (above) remains; apply exits 1 until it is fixed.');
    expect(await live('prov-bad', 'infrastructure', 'net')).toMatchObject({ status: 'provisioned' });
    expect(await live('prov-bad', 'infrastructure', 'lake')).toMatchObject({
      status: 'failed',
      last_error: expect.stringContaining('mars-1'),
    });

    // Nothing of the config changed, but the platform provisions the failed bucket again: not "No changes".
    const text = await runDpctl(['plan', dir], { env });
    expect(text.code).toBe(2);
    expect(text.stdout).toContain('  + provision bucket lake # failed on the platform: the apply provisions it again\n');
    expect(text.stdout).toContain('No resource changes: 3 resources in sync; 1 infrastructure change to provision (above).');
    const markdown = await runDpctl(['plan', dir, '--output', 'markdown'], { env });
    expect(markdown.stdout).toContain('**No resource changes.** 3 resources in sync; 1 infrastructure change to provision (below)');
    expect(markdown.stdout).toContain('- + provision prov-bad/lake _(failed on the platform: the apply provisions it again)_');
    const plan = await runDpctl(['plan', dir, '--output', 'json'], { env });
    expect(plan.code).toBe(2);
    const json = JSON.parse(plan.stdout);
    expect(json.provisioning).toEqual([
      {
        project: 'prov-bad',
        kind: 'infrastructure_resource',
        changes: [{ action: 'create', name: 'lake', resource_type: 'bucket', changed_fields: expect.any(Array), origin: 'platform' }],
        note: null,
      },
    ]);
    expect(json.health).toContainEqual({
      kind: 'infrastructure_resource',
      project: 'prov-bad',
      name: 'lake',
      health: 'degraded',
      reason: expect.stringMatching(/^status is failed: aws has no region "mars-1"/),
      never_run: false,
    });

    // -o json: not converged, although every write was done (it said converged: true).
    const rerun = await runDpctl(['apply', dir, '--output', 'json'], { env });
    expect(rerun.code).toBe(1);
    expect(JSON.parse(rerun.stdout)).toMatchObject({
      writes_done: true,
      converged: false,
      failures: [expect.stringContaining('prov-bad/lake: provisioning failed: aws has no region "mars-1"')],
    });

    writeFileSync(join(dir, 'platform.yaml'), [...docs.slice(0, 2), infra('prov-bad', 'lake', 'bucket', 'aws', 'eu-west-1')].join('---\n'));
    const fixed = await runDpctl(['apply', dir, '--output', 'json'], { env });
    expect(fixed.code).toBe(0);
    const result = JSON.parse(fixed.stdout);
    expect(result).toMatchObject({ failures: [], writes_done: true, converged: true });
    expect(result.provisioning).toEqual([
      { project: 'prov-bad', run_id: expect.any(String), status: 'succeeded', changes: [{ action: 'create', name: 'lake' }], failures: [] },
    ]);
    expect(await live('prov-bad', 'infrastructure', 'lake')).toMatchObject({ status: 'provisioned', region: 'eu-west-1' });
  });

  test('--no-wait starts the provisioning and returns; --wait-timeout is validated before anything is contacted', async () => {
    const dir = config('prov-nowait', [projectDoc('prov-nowait'), infra('prov-nowait', 'big', 'cluster', 'gcp', 'europe-west1')]);
    const bad = await runDpctl(['apply', dir, '--wait-timeout', 'soon'], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('--wait-timeout must look like 500ms, 30s, 5m or 1h; got "soon"');
    const r = await runDpctl(['apply', dir, '--no-wait'], { env });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/prov-nowait: provisioning create big/);
    expect(r.stdout).not.toContain('Health:');
    // Submitted, not complete: nothing has checked what the platform does with it.
    expect(r.stdout).toContain('Apply submitted: 2 done, 0 failed, 0 skipped, 0 not supported; provisioning and health not checked.');
    expect(['provisioning', 'provisioned']).toContain((await live('prov-nowait', 'infrastructure', 'big')).status);
  });

  test('--no-wait beside a resource already failed on the platform: not converged in JSON (a CI step keyed on it counted it a success)', async () => {
    const dir = config('nowait-failed', [projectDoc('nowait-failed'), infra('nowait-failed', 'lake', 'bucket', 'aws', 'mars-1')]);
    expect((await runDpctl(['apply', dir], { env })).code).toBe(1);
    const r = await runDpctl(['apply', dir, '--no-wait', '--output', 'json'], { env });
    const json = JSON.parse(r.stdout);
    expect([json.writes_done, json.health_checked, json.converged]).toEqual([true, false, false]);
    const waited = JSON.parse((await runDpctl(['apply', dir, '--output', 'json'], { env })).stdout);
    expect([waited.writes_done, waited.health_checked, waited.converged]).toEqual([true, true, false]);
  });
});

describe('dpctl apply: connection tests and health', () => {
  test('--test-connections tests created and changed connectors, and unchanged ones that have not shown they work; a failed test fails the apply after everything else is applied', async () => {
    const port = await closedPort();
    const pg = doc(
      'Connector',
      'orders-db',
      'conn-test',
      `connector_type: postgresql\nconfig:\n  host: 127.0.0.1\n  port: ${port}\n  database: shop\ncredentials:\n  username: loader`,
    );
    const crm = doc('Connector', 'crm', 'conn-test', 'connector_type: salesforce');
    const dir = config('conn-test', [projectDoc('conn-test'), crm, pg]);
    const r = await runDpctl(['apply', dir, '--test-connections'], { env });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/ {2}Connector conn-test\/crm: connection test passed: /);
    expect(r.stdout).toMatch(
      /error: Connector conn-test\/orders-db: connection test failed: Host unreachable: connection to 127\.0\.0\.1:\d+ refused/,
    );
    // The failed one is not counted healthy (it said "Health: all 2 healthy." beside the error).
    expect(r.stdout).toContain('Health: 1 healthy, 1 failing its connection test.');
    expect(await live('conn-test', 'connectors', 'orders-db')).toBeDefined();
    // Run again unchanged: nothing has shown that either connection works (neither has run), so
    // both are tested again, and the apply fails again (it passed before, with nothing fixed).
    const again = await runDpctl(['apply', dir, '--test-connections'], { env });
    expect(again.code).toBe(1);
    expect(again.stdout).toMatch(/error: Connector conn-test\/orders-db: connection test failed: Host unreachable/);
    expect(again.stdout).toMatch(/ {2}Connector conn-test\/crm: connection test passed: /);
    // A connector that has synced has shown that it works: an unchanged one is not tested again.
    const synced = await live('conn-test', 'connectors', 'crm');
    await svc.ok(t, 'POST', `/projects/${synced.project_id}/connectors/${synced.id}/sync`);
    for (let i = 0; i < 200 && (await live('conn-test', 'connectors', 'crm')).status !== 'active'; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect((await live('conn-test', 'connectors', 'crm')).status).toBe('active');
    const third = await runDpctl(['apply', dir, '--test-connections'], { env });
    expect(third.code).toBe(1);
    expect(third.stdout).not.toContain('conn-test/crm: connection test');
    // Without --test-connections nothing is tested: the connector itself is healthy (a failed test is
    // not a state), but it has never run, and the summary says so instead of "all healthy".
    const untested = await runDpctl(['apply', dir], { env });
    expect(untested.code).toBe(0);
    expect(untested.stdout).toContain('Health: 1 healthy, 1 never run (untested).\n  never run: nothing has shown yet that it works;');
  });

  test('a connector that synced and then changed is tested again on every --test-connections apply until it runs: a re-run does not pass with the host still dead', async () => {
    const source = await createSourceDb();
    const orders = (p: number) =>
      doc(
        'Connector',
        'orders-db',
        'changed',
        `connector_type: postgresql\nconfig:\n  host: ${source.host}\n  port: ${p}\n  database: ${source.database}\ncredentials:\n  username: ${source.admin.username}`,
      );
    const dir = config('changed', [projectDoc('changed'), orders(source.port)]);
    expect((await runDpctl(['apply', dir, '--test-connections'], { env })).code).toBe(0);
    const c = await live('changed', 'connectors', 'orders-db');
    await svc.ok(t, 'POST', `/projects/${c.project_id}/connectors/${c.id}/sync`);
    for (let i = 0; i < 200 && (await live('changed', 'connectors', 'orders-db')).status !== 'active'; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect((await live('changed', 'connectors', 'orders-db')).status).toBe('active');

    writeFileSync(join(dir, 'platform.yaml'), [projectDoc('changed'), orders(await closedPort())].join('---\n'));
    const broken = await runDpctl(['apply', dir, '--test-connections'], { env });
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(/error: Connector changed\/orders-db: connection test failed: Host unreachable/);
    // Again, nothing fixed: its sync proved the old settings only, so it is tested again and fails again.
    const again = await runDpctl(['apply', dir, '--test-connections'], { env });
    expect(again.stdout).toContain('No changes');
    expect(again.stdout).toMatch(/error: Connector changed\/orders-db: connection test failed: Host unreachable/);
    expect(again.code).toBe(1);
    // Fixed: tested, passes, and the apply succeeds.
    writeFileSync(join(dir, 'platform.yaml'), [projectDoc('changed'), orders(source.port)].join('---\n'));
    const fixed = await runDpctl(['apply', dir, '--test-connections'], { env });
    expect(fixed.stdout).toMatch(/ {2}Connector changed\/orders-db: connection test passed: /);
    expect(fixed.code).toBe(0);
  });

  test("a declared connector whose last sync failed fails the apply as degraded, with the platform's reason; plan shows it", async () => {
    const port = await closedPort();
    const dir = config('degraded', [
      projectDoc('degraded'),
      doc(
        'Connector',
        'orders-db',
        'degraded',
        `connector_type: postgresql\nconfig:\n  host: 127.0.0.1\n  port: ${port}\n  database: shop\ncredentials:\n  username: loader`,
      ),
    ]);
    expect((await runDpctl(['apply', dir], { env })).code).toBe(0);
    const c = await live('degraded', 'connectors', 'orders-db');
    const { run_id } = await svc.ok(t, 'POST', `/projects/${c.project_id}/connectors/${c.id}/sync`);
    for (let i = 0; i < 100 && (await live('degraded', 'connectors', 'orders-db')).status === 'syncing'; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(run_id).toBeTruthy();
    const plan = await runDpctl(['plan', dir], { env });
    expect(plan.code).toBe(0);
    expect(plan.stdout).toMatch(
      /Health \(as observed\): 1 degraded\n {2}! Connector degraded\/orders-db: degraded: status is error: Host unreachable/,
    );
    const drift = await runDpctl(['drift', dir], { env });
    expect(drift.stdout).toMatch(
      /Health \(as observed\): 1 degraded\n {2}! Connector degraded\/orders-db: degraded: status is error: Host unreachable/,
    );
    expect(JSON.parse((await runDpctl(['drift', dir, '--output', 'json'], { env })).stdout).health).toEqual([
      { kind: 'project', project: null, name: 'degraded', health: 'healthy', reason: null, never_run: false },
      {
        kind: 'connector',
        project: 'degraded',
        name: 'orders-db',
        health: 'degraded',
        reason: expect.stringMatching(/^status is error: Host unreachable/),
        never_run: false,
      },
    ]);
    const r = await runDpctl(['apply', dir], { env });
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(
      /error: Connector degraded\/orders-db: degraded: status is error: Host unreachable: connection to 127\.0\.0\.1:\d+ refused/,
    );
    expect(r.stdout).toContain('Health: 1 degraded.');
    const json = JSON.parse((await runDpctl(['apply', dir, '--output', 'json'], { env })).stdout);
    expect(json.health).toEqual([
      {
        kind: 'connector',
        project: 'degraded',
        name: 'orders-db',
        health: 'degraded',
        reason: expect.stringMatching(/^status is error: Host unreachable/),
        never_run: false,
      },
    ]);
    expect(json.changes[1]).toMatchObject({ name: 'orders-db', action: 'no-op', health: 'degraded' });
  });
});
