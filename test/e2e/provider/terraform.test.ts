import { copyFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { haveTerraform, TerraformWorkspace } from './harness.js';

/**
 * The provider under the real `terraform` binary, against a real service. The steps build on
 * each other (one Terraform working directory), so they run in order.
 */
const EXAMPLE = join(import.meta.dirname, '..', '..', '..', 'examples', 'terraform', 'main.tf');

describe.skipIf(testStore() === 'postgres' || !haveTerraform)('terraform provider (real terraform)', () => {
  let svc: TestService;
  let t: TestTenant;
  let ws: TerraformWorkspace;
  let work: string;
  let projectId: string;
  let vars: Record<string, string>;

  const tf = (args: string[], allowed: number[] = [0]) => ws.tf(args, allowed);
  const planExit = async () => (await ws.plan()).code;
  const apply = () => ws.apply();
  const api = <T = any>(method: string, path: string, body?: unknown, expected?: number) =>
    svc.ok<T>(t, method, path, body === undefined ? {} : { body }, expected);
  const byName = async (collection: string, name: string) => {
    const list = await api<{ data: any[] }>('GET', `/projects/${projectId}/${collection}`);
    return list.data.find((i) => i.name === name);
  };

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    ws = await TerraformWorkspace.create(svc, t);
    work = ws.work;
    vars = ws.vars;
    Object.assign(vars, { project_name: 'tf-analytics', db_password: 'first-secret' });
    copyFileSync(EXAMPLE, join(work, 'main.tf'));
    await ws.init();
  }, 60_000);

  afterAll(async () => {
    await svc?.close();
    ws?.close();
  });

  it('applies the example: project, connector with nested config and a secret, channel, alert rule', { timeout: 60_000 }, async () => {
    const out = await apply();
    expect(out).toContain('Apply complete! Resources: 4 added, 0 changed, 0 destroyed.');
    const projects = await api<{ data: any[] }>('GET', '/projects');
    const project = projects.data.find((p) => p.name === 'tf-analytics');
    expect(project).toBeTruthy();
    projectId = project.id;
    const connector = await byName('connectors', 'orders-db');
    expect(connector).toMatchObject({
      connector_type: 'postgresql',
      config: { host: 'db.internal', port: 5432, database: 'orders' },
      credentials: { username: 'reader' },
      schedule: '0 2 * * *',
    });
    expect(connector.credentials.password).toBeUndefined();
    const channel = await byName('notification-channels', 'oncall');
    const rule = await byName('alert-rules', 'orders-sync-failures');
    expect(rule).toMatchObject({
      severity: 'warning',
      target: { connector_id: connector.id },
      channel_ids: [channel.id],
      condition: { window_minutes: 60 },
    });
    // The password stays out of the CLI output.
    expect(out).not.toContain('first-secret');
    // Saved without run_setup_tests and never synced: the apply says that its connection is untested.
    expect(out).toContain('Warning: dataplatform_connector "orders-db" has never run: its connection is untested');
  });

  it('serves a schema Terraform accepts, one resource per writable kind', async () => {
    const { out } = await tf(['providers', 'schema', '-json']);
    const schema = JSON.parse(out.slice(0, out.lastIndexOf('}') + 1));
    const provider = schema.provider_schemas['registry.terraform.io/dataplatform/dataplatform'];
    expect(Object.keys(provider.resource_schemas)).toEqual(
      expect.arrayContaining([
        'dataplatform_project',
        'dataplatform_connector',
        'dataplatform_notification_channel',
        'dataplatform_alert_rule',
        'dataplatform_pipeline',
        'dataplatform_user',
      ]),
    );
    const connector = provider.resource_schemas.dataplatform_connector.block.attributes;
    expect(connector.credentials.nested_type.attributes.password.sensitive).toBe(true);
    expect(connector.project_id.required).toBe(true);
    expect(provider.provider.block.attributes.api_key.sensitive).toBe(true);
    // A lookup data source per resource type, and the read-only views.
    const dataSources = Object.keys(provider.data_source_schemas);
    expect(dataSources).toEqual(
      expect.arrayContaining([
        ...Object.keys(provider.resource_schemas),
        'dataplatform_connector_schema',
        'dataplatform_dbt_lineage',
        'dataplatform_latest_run',
      ]),
    );
    expect(provider.data_source_schemas.dataplatform_connector.block.attributes.name.required).toBe(true);
    expect(provider.data_source_schemas.dataplatform_connector.block.attributes.config.computed).toBe(true);
    expect(provider.data_source_schemas.dataplatform_latest_run.block.attributes.tables.nested_type.nesting_mode).toBe('list');
  });

  it('reports invalid values at validate time, before any API call', async () => {
    writeFileSync(
      join(work, 'bad.tf'),
      `resource "dataplatform_connector" "bad" {\n  project_id     = dataplatform_project.main.id\n  name           = "bad"\n  connector_type = "oracle"\n}\n`,
    );
    try {
      const { out } = await tf(['validate'], [1]);
      expect(out).toContain('Error: dataplatform_connector: connector_type must be one of');
      // Terraform places the diagnostic at the attribute: the resource, the file and line, the line itself.
      expect(out).toMatch(
        /with dataplatform_connector\.bad,\s*\n.*on bad\.tf line 4, in resource "dataplatform_connector" "bad":\s*\n.*4:\s+connector_type = "oracle"/,
      );
      expect(out.match(/Error: /g)).toHaveLength(1);
    } finally {
      rmSync(join(work, 'bad.tf'));
    }
  });

  it('plans nothing right after apply (normalised cron, defaults, secrets)', async () => {
    expect(await planExit()).toBe(0);
    // A different spelling of the same cron expression is no change either.
    vars.sync_schedule = '0 2  *  * *';
    const plan = await tf(['plan', '-detailed-exitcode', '-input=false'], [0, 2]);
    expect(plan.code, plan.out).toBe(0);
  });

  it('updates in place', { timeout: 60_000 }, async () => {
    const before = await byName('connectors', 'orders-db');
    vars.alert_severity = 'critical';
    vars.project_description = 'changed';
    vars.db_password = 'second-secret';
    // db_password is write-only: a new value is sent when its version changes.
    vars.db_password_version = '2';
    const out = await apply();
    expect(out).toContain('0 added, 3 changed, 0 destroyed');
    expect((await byName('alert-rules', 'orders-sync-failures')).severity).toBe('critical');
    expect((await api('GET', `/projects/${projectId}`)).description).toBe('changed');
    expect((await byName('connectors', 'orders-db')).id).toBe(before.id);
    expect(await planExit()).toBe(0);
  });

  it('replaces the connector when an immutable field changes', { timeout: 60_000 }, async () => {
    const before = await byName('connectors', 'orders-db');
    vars.connector_type = 'mysql';
    // (The plan an apply prints is the plan: no separate `terraform plan` before it.)
    const out = await apply();
    expect(out).toMatch(/dataplatform_connector\.orders must be replaced/);
    expect(out).toMatch(/connector_type\s+= "postgresql" -> "mysql" # forces replacement/);
    expect(out).toContain('2 added, 0 changed, 2 destroyed');
    const after = await byName('connectors', 'orders-db');
    expect(after.id).not.toBe(before.id);
    expect(after.connector_type).toBe('mysql');
    expect((await byName('alert-rules', 'orders-sync-failures')).target.connector_id).toBe(after.id);
    expect(await planExit()).toBe(0);
  });

  it('shows drift made through the API and restores it', { timeout: 60_000 }, async () => {
    const connector = await byName('connectors', 'orders-db');
    await api(
      'PATCH',
      `/projects/${projectId}/connectors/${connector.id}`,
      { labels: { team: 'someone-else' }, selected_tables: ['public.other'] },
      200,
    );
    const out = await apply();
    expect(out).toMatch(/dataplatform_connector\.orders will be updated in-place/);
    expect(out).toMatch(/"team"\s+= "someone-else" -> "data"/);
    expect(out).toContain('0 added, 1 changed, 0 destroyed');
    expect(await byName('connectors', 'orders-db')).toMatchObject({
      labels: { team: 'data' },
      selected_tables: ['public.orders', 'public.customers'],
    });
    expect(await planExit()).toBe(0);
  });

  it('recreates a resource deleted outside Terraform', { timeout: 60_000 }, async () => {
    const rule = await byName('alert-rules', 'orders-sync-failures');
    await api('DELETE', `/projects/${projectId}/alert-rules/${rule.id}`, undefined, 204);
    const out = await apply();
    expect(out).toContain('dataplatform_alert_rule.sync_failures will be created');
    expect(out).toContain('1 added, 0 changed, 0 destroyed');
    expect(await byName('alert-rules', 'orders-sync-failures')).toBeTruthy();
    expect(await planExit()).toBe(0);
  });

  it('imports by <project_id>/<name>, then plans nothing', { timeout: 60_000 }, async () => {
    await api('POST', `/projects/${projectId}/notification-channels`, {
      name: 'imported',
      type: 'email',
      config: { email_addresses: ['a@example.com'] },
      labels: { from: 'api' },
    });
    writeFileSync(
      join(work, 'imported.tf'),
      `resource "dataplatform_notification_channel" "imported" {\n  project_id = dataplatform_project.main.id\n  name       = "imported"\n  type       = "email"\n  config     = { email_addresses = ["a@example.com"] }\n  labels     = { from = "api" }\n}\n`,
    );
    const out = await tf(['import', '-input=false', 'dataplatform_notification_channel.imported', `${projectId}/imported`]);
    expect(out.out).toContain('Import successful!');
    expect(await planExit()).toBe(0);
  });

  it(
    'takes over what dpctl manages with -generate-config-out: the copied dpctl labels are refused until removed, then the apply removes them',
    { timeout: 90_000 },
    async () => {
      await api('POST', `/projects/${projectId}/notification-channels`, {
        name: 'handed-over',
        type: 'email',
        config: { email_addresses: ['a@example.com'] },
        labels: { team: 'data', 'dpctl.dev/managed-by': 'platform', 'dpctl.dev/secrets-sha': '0123456789abcdef' },
      });
      ws.write('handover.tf', `import {\n  to = dataplatform_notification_channel.handed_over\n  id = "${projectId}/handed-over"\n}\n`);
      // Terraform writes the configuration from the imported resource (dpctl's labels included) and
      // checks it: the plan stops at them instead of keeping the resource dpctl's to prune.
      const generated = await tf(['plan', '-input=false', '-generate-config-out=generated.tf'], [1]);
      expect(generated.out).toContain(
        'labels "dpctl.dev/managed-by" and "dpctl.dev/secrets-sha" belong to dpctl: remove them from the configuration',
      );
      const written = readFileSync(join(work, 'generated.tf'), 'utf8');
      expect(written).toContain('"dpctl.dev/managed-by"');
      ws.write(
        'generated.tf',
        written
          .split('\n')
          .filter((line) => !line.includes('"dpctl.dev/'))
          .join('\n'),
      );
      expect(await apply()).toContain('1 imported, 0 added, 1 changed, 0 destroyed');
      expect((await byName('notification-channels', 'handed-over')).labels).toEqual({ team: 'data' });
      expect(await planExit()).toBe(0);
      for (const f of ['handover.tf', 'generated.tf']) ws.remove(f);
      await tf(['state', 'rm', 'dataplatform_notification_channel.handed_over']);
    },
  );

  it('imports a tenant-level kind by name', { timeout: 60_000 }, async () => {
    const project = await api('POST', '/projects', { name: 'tf-imported-project', description: 'x' });
    writeFileSync(
      join(work, 'project2.tf'),
      `resource "dataplatform_project" "second" {\n  name        = "tf-imported-project"\n  description = "x"\n}\n`,
    );
    await tf(['import', '-input=false', 'dataplatform_project.second', 'tf-imported-project']);
    expect(await planExit()).toBe(0);
    const state = await tf(['state', 'show', 'dataplatform_project.second']);
    expect(state.out).toContain(project.id);
  });

  it('takes a write-only password (password_wo + password_wo_version), kept out of the state', { timeout: 60_000 }, async () => {
    const write = (secret: string, version: number) =>
      writeFileSync(
        join(work, 'wo.tf'),
        `resource "dataplatform_connector" "wo" {\n  project_id     = dataplatform_project.main.id\n  name           = "wo"\n  connector_type = "postgresql"\n  credentials = {\n    username            = "reader"\n    password_wo         = "${secret}"\n    password_wo_version = ${version}\n  }\n}\n`,
      );
    write('wo-secret-1', 1);
    expect(await apply()).toContain('1 added, 0 changed, 0 destroyed');
    const state = await tf(['state', 'pull']);
    expect(state.out).not.toContain('wo-secret-1');
    const before = await byName('connectors', 'wo');
    // A new secret with the same version is no change (so nothing else changed since the apply
    // either); a new version sends it.
    write('wo-secret-2', 1);
    expect(await planExit()).toBe(0);
    write('wo-secret-2', 2);
    expect(await apply()).toContain('0 added, 1 changed, 0 destroyed');
    expect((await byName('connectors', 'wo')).updated_at).not.toBe(before.updated_at);
    expect(await planExit()).toBe(0);
    expect((await tf(['state', 'pull'])).out).not.toContain('wo-secret-2');
  });

  it('destroys everything it manages', { timeout: 60_000 }, async () => {
    // The channel handed back with `state rm` is no longer this configuration's: with it in the
    // project, the project's destroy refuses (force_destroy, project-destroy.test.ts).
    await api('DELETE', `/projects/${projectId}/notification-channels/${(await byName('notification-channels', 'handed-over')).id}`);
    const out = (await tf(['destroy', '-auto-approve', '-input=false'])).out;
    expect(out).toContain('Destroy complete! Resources: 7 destroyed.');
    const projects = await api<{ data: any[] }>('GET', '/projects');
    expect(projects.data.filter((p) => p.name.startsWith('tf-'))).toEqual([]);
    await svc.call(t, 'GET', `/projects/${projectId}`).then((r) => expect(r.status).toBe(404));
  });
});
