import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { haveTerraform, PROVIDER_BLOCK, TerraformWorkspace } from './harness.js';

/**
 * Data sources under the real `terraform`: lookups by name (and by email, in any case) used as
 * references in a resource, and the read-only views (connector schema, dbt lineage, latest
 * run) compared with what the API answers for the same objects.
 */
describe.skipIf(testStore() === 'postgres' || !haveTerraform)('terraform data sources (real terraform)', () => {
  let svc: TestService;
  let t: TestTenant;
  let ws: TerraformWorkspace;
  let project: { id: string; name: string };
  let connector: any;
  let channel: any;
  let dbt: any;
  let pipeline: any;
  let user: any;
  const api = <T = any>(method: string, path: string, body?: unknown, expected?: number) =>
    svc.ok<T>(t, method, path, body === undefined ? {} : { body }, expected);
  const p = (path: string) => `/projects/${project.id}${path}`;

  async function lastRun(path: string): Promise<any> {
    for (let i = 0; i < 200; i++) {
      const runs = await api<{ data: any[] }>('GET', path);
      const last = runs.data.at(-1);
      if (last && last.status !== 'running') return last;
      await sleep(100);
    }
    throw new Error(`no finished run at ${path}`);
  }

  beforeAll(async () => {
    // Simulated runs 1000 times faster, so a sync and a pipeline run end within the test.
    svc = await startTestService({ timeScale: 1000 });
    t = await svc.tenant();
    project = await api('POST', '/projects', { name: 'ds-analytics', description: 'made through the API' });
    connector = await api('POST', p('/connectors'), {
      name: 'orders-db',
      connector_type: 'mysql',
      config: { host: 'db.internal', port: 3306, database: 'shop' },
      credentials: { username: 'reader', password: 'never-shown' },
      selected_tables: ['shop.orders', 'shop.customers'],
      labels: { team: 'data' },
    });
    channel = await api('POST', p('/notification-channels'), {
      name: 'oncall',
      type: 'email',
      config: { email_addresses: ['oncall@example.com'] },
    });
    dbt = await api('POST', p('/dbt-projects'), {
      name: 'marts',
      repository: 'https://git.example.com/marts.git',
      models: [
        { name: 'stg_orders', materialization: 'view', sources: [{ connector_id: connector.id, table: 'shop.orders' }] },
        { name: 'fct_orders', materialization: 'table', depends_on: ['stg_orders'] },
      ],
    });
    pipeline = await api('POST', p('/pipelines'), {
      name: 'nightly',
      steps: [{ name: 'sync', type: 'connector_sync', connector_id: connector.id }],
    });
    user = await api('POST', '/users', {
      email: `analyst@${t.slug}.test`,
      role: 'read-write',
      name: 'Ana Lyst',
      password: 'users-password-1',
    });
    // A manual sync, then the pipeline (whose step syncs the connector again), one after the other.
    await api('POST', p(`/connectors/${connector.id}/sync`), undefined, 201);
    await lastRun(p(`/connectors/${connector.id}/runs`));
    await api('POST', p(`/pipelines/${pipeline.id}/run`), undefined, 201);
    await lastRun(p(`/pipelines/${pipeline.id}/runs`));
    ws = await TerraformWorkspace.create(svc, t);
    ws.write('main.tf', PROVIDER_BLOCK);
    await ws.init();
  }, 60_000);

  afterAll(async () => {
    await svc?.close();
    ws?.close();
  });

  it('looks objects up by name and by email and uses them as references in a resource', { timeout: 60_000 }, async () => {
    ws.write(
      'lookups.tf',
      `data "dataplatform_project" "p" {\n  name = "ds-analytics"\n}\n\n` +
        `data "dataplatform_connector" "orders" {\n  project_id = data.dataplatform_project.p.id\n  name       = "orders-db"\n}\n\n` +
        `data "dataplatform_notification_channel" "oncall" {\n  project_id = data.dataplatform_project.p.id\n  name       = "oncall"\n}\n\n` +
        // Emails are compared as the service stores them (lowercase).
        `data "dataplatform_user" "analyst" {\n  email = "Analyst@${t.slug.toUpperCase()}.test"\n}\n\n` +
        `resource "dataplatform_alert_rule" "failures" {\n  project_id  = data.dataplatform_project.p.id\n  name        = "orders-failures"\n  severity    = "warning"\n  condition   = { metric = "run_failed", operator = "gt", threshold = 0 }\n  target      = { connector_id = data.dataplatform_connector.orders.id }\n  channel_ids = [data.dataplatform_notification_channel.oncall.id]\n}\n\n` +
        `output "connector" {\n  value = data.dataplatform_connector.orders\n}\n\noutput "user" {\n  value     = data.dataplatform_user.analyst\n  sensitive = true\n}\n\noutput "project" {\n  value = data.dataplatform_project.p\n}\n`,
    );
    const out = await ws.apply();
    expect(out).toContain('Apply complete! Resources: 1 added, 0 changed, 0 destroyed.');
    const rules = await api<{ data: any[] }>('GET', p('/alert-rules'));
    expect(rules.data.find((r) => r.name === 'orders-failures')).toMatchObject({
      target: { connector_id: connector.id },
      channel_ids: [channel.id],
    });

    const state = await ws.show();
    const outputs = state.values.outputs;
    // Every attribute the API returns, as it returns it; the write-only password is not an attribute at all.
    const liveConnector = await api('GET', p(`/connectors/${connector.id}`));
    const { project_id: _projectId, ...connectorFields } = liveConnector;
    expect(outputs.connector.value).toMatchObject({ ...connectorFields, project_id: project.id });
    expect(outputs.connector.value.credentials).toEqual({ username: 'reader' });
    expect(JSON.stringify(state)).not.toContain('never-shown');
    // Found whatever the case; an input keeps the configured spelling (Terraform requires it).
    expect(outputs.user.value).toMatchObject({
      id: user.id,
      email: `Analyst@${t.slug.toUpperCase()}.test`,
      role: 'read-write',
      name: 'Ana Lyst',
      status: 'active',
    });
    expect(outputs.user.value).not.toHaveProperty('password');
    expect(outputs.project.value).toMatchObject({ id: project.id, name: 'ds-analytics', description: 'made through the API' });
    expect((await ws.plan()).code).toBe(0);
  });

  it('serves the connector schema, the dbt lineage and the latest runs as the API does', { timeout: 60_000 }, async () => {
    const syncs = await api<{ data: any[] }>('GET', p(`/connectors/${connector.id}/runs`));
    const latestSync = syncs.data.at(-1);
    const pipelineRun = await lastRun(p(`/pipelines/${pipeline.id}/runs`));
    ws.write(
      'views.tf',
      `data "dataplatform_connector_schema" "orders" {\n  project_id   = "${project.id}"\n  connector_id = data.dataplatform_connector.orders.id\n}\n\n` +
        `data "dataplatform_dbt_lineage" "marts" {\n  project_id     = "${project.id}"\n  dbt_project_id = "${dbt.id}"\n}\n\n` +
        `data "dataplatform_latest_run" "sync" {\n  project_id   = "${project.id}"\n  connector_id = data.dataplatform_connector.orders.id\n}\n\n` +
        `data "dataplatform_latest_run" "nightly" {\n  project_id  = "${project.id}"\n  pipeline_id = "${pipeline.id}"\n}\n\n` +
        `output "schema" {\n  value = data.dataplatform_connector_schema.orders\n}\n\noutput "lineage" {\n  value = data.dataplatform_dbt_lineage.marts\n}\n\n` +
        `output "sync" {\n  value = data.dataplatform_latest_run.sync\n}\n\noutput "nightly" {\n  value = data.dataplatform_latest_run.nightly\n}\n`,
    );
    await ws.apply();
    const outputs = (await ws.show()).values.outputs;

    const schema = await api('GET', p(`/connectors/${connector.id}/schema`));
    expect(schema.tables.length).toBeGreaterThan(0);
    // Every GET discovers again, so discovered_at moves; the tables are what must match.
    expect(outputs.schema.value.tables).toEqual(fill(schema.tables, outputs.schema.value.tables));
    expect(outputs.schema.value).toMatchObject({ connector_id: connector.id, id: connector.id, error: schema.error });
    expect(Date.parse(outputs.schema.value.discovered_at)).not.toBeNaN();

    const lineage = await api('GET', p(`/dbt-projects/${dbt.id}/lineage`));
    expect(lineage.nodes.length).toBeGreaterThan(1);
    expect(outputs.lineage.value.nodes).toEqual(fill(lineage.nodes, outputs.lineage.value.nodes));
    expect(outputs.lineage.value.edges).toEqual(lineage.edges);

    // The pipeline's connector_sync step synced the connector after the manual sync: that run is the latest.
    expect(syncs.data.length).toBeGreaterThanOrEqual(2);
    expect(latestSync).toMatchObject({ status: 'succeeded', trigger: 'pipeline' });
    expect(outputs.sync.value).toEqual({
      ...fill(latestSync, outputs.sync.value),
      connector_id: connector.id,
      pipeline_id: null,
      dbt_project_id: null,
      project_id: project.id,
    });
    expect(outputs.nightly.value).toEqual({
      ...fill(pipelineRun, outputs.nightly.value),
      connector_id: null,
      pipeline_id: pipeline.id,
      dbt_project_id: null,
      project_id: project.id,
    });
    expect(pipelineRun).toMatchObject({ run_type: 'pipeline', status: 'succeeded' });
    expect(outputs.nightly.value.steps).toHaveLength(1);
  });

  it('says clearly what was not found, and checks the view inputs at validate time', { timeout: 60_000 }, async () => {
    ws.write(
      'missing.tf',
      `data "dataplatform_connector" "missing" {\n  project_id = "${project.id}"\n  name       = "no-such-connector"\n}\n`,
    );
    let plan = await ws.tf(['plan', '-input=false'], [1]);
    expect(plan.out).toContain(`dataplatform_connector: no connector with name "no-such-connector" in project ${project.id}`);
    ws.write(
      'missing.tf',
      `data "dataplatform_latest_run" "none" {\n  project_id     = "${project.id}"\n  dbt_project_id = "${dbt.id}"\n}\n`,
    );
    plan = await ws.tf(['plan', '-input=false'], [1]);
    expect(plan.out).toContain(`has not run yet`);
    ws.write(
      'missing.tf',
      `data "dataplatform_connector_schema" "none" {\n  project_id   = "${project.id}"\n  connector_id = "con_doesnotexist"\n}\n`,
    );
    plan = await ws.tf(['plan', '-input=false'], [1]);
    expect(plan.out).toMatch(/dataplatform_connector_schema: .*not found.*con_doesnotexist/i);
    ws.write(
      'missing.tf',
      `data "dataplatform_latest_run" "both" {\n  project_id   = "${project.id}"\n  connector_id = "a"\n  pipeline_id  = "b"\n}\n`,
    );
    const validate = await ws.tf(['validate'], [1]);
    expect(validate.out).toContain('give exactly one of connector_id, pipeline_id, dbt_project_id');
    ws.remove('missing.tf');
  });
});

/**
 * The API's value with the keys Terraform adds for absent optional attributes (null), so a
 * whole-object comparison checks every value the API returned and nothing invented.
 */
function fill(api: any, tf: any): any {
  if (Array.isArray(api)) return api.map((v, i) => fill(v, Array.isArray(tf) ? tf[i] : undefined));
  if (api && typeof api === 'object') {
    const out: Record<string, unknown> = {};
    for (const key of Object.keys(tf && typeof tf === 'object' ? tf : {})) if (!(key in api)) out[key] = null;
    for (const [k, v] of Object.entries(api)) out[k] = fill(v, tf?.[k]);
    return out;
  }
  return api;
}
