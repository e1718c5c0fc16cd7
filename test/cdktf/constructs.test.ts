import { describe, expect, it } from 'vitest';
import { TerraformStack, Testing } from '../../src/cdktf/cdk.js';
import {
  AlertRule,
  Connector,
  DATA_SOURCE_CONSTRUCTS,
  DataConnector,
  DataLatestRun,
  DataplatformProvider,
  InfrastructureResource,
  NotificationChannel,
  Pipeline,
  Project,
  User,
} from '../../src/cdktf/index.js';
import { testOutdir } from '../support/cdktf-outdir.js';

const outdir = testOutdir();

/** A stack with the provider, as `cdktf synth` sees it. */
function stack() {
  const s = new TerraformStack(Testing.app({ outdir }), 'test');
  new DataplatformProvider(s, 'dp', {});
  return s;
}
const synth = (s: TerraformStack) => JSON.parse(Testing.synth(s));
const only = (json: any, type: string) => Object.values(json.resource[type] as Record<string, any>)[0];

describe('generated constructs', () => {
  it('write required_providers with our source and version, and the provider block', () => {
    const s = new TerraformStack(Testing.app({ outdir }), 'p');
    new DataplatformProvider(s, 'dp', { endpoint: 'https://acme.localhost:8443', caFile: '/tmp/ca.pem', insecure: false });
    const json = synth(s);
    expect(json.terraform.required_providers).toEqual({ dataplatform: { source: 'dataplatform/dataplatform', version: '0.1.0' } });
    expect(json.provider.dataplatform).toEqual([{ endpoint: 'https://acme.localhost:8443', ca_file: '/tmp/ca.pem', insecure: false }]);
  });

  it('synthesize snake_case attributes, nested objects and references as ${...}', () => {
    const s = stack();
    const project = new Project(s, 'analytics', { name: 'analytics', labels: { 'cost-center': '4100' } });
    const orders = new Connector(s, 'orders', {
      projectId: project.id,
      name: 'orders-db',
      connectorType: 'postgresql',
      config: { host: 'db', port: 5432, sslMode: 'require', extra: { app_name: 'cdktf' } },
      credentials: { username: 'reader', passwordWo: 'x', passwordWoVersion: 1 },
      selectedTables: ['public.orders'],
    });
    new Pipeline(s, 'nightly', {
      projectId: project.id,
      name: 'nightly',
      steps: [
        { name: 'sync', type: 'connector_sync', connectorId: orders.id },
        { name: 'after', type: 'connector_sync', connectorId: orders.id, dependsOn: ['sync'] },
      ],
      description: orders.config.host,
    });
    const json = synth(s);
    expect(only(json, 'dataplatform_project').labels).toEqual({ 'cost-center': '4100' });
    expect(only(json, 'dataplatform_connector')).toMatchObject({
      project_id: '${dataplatform_project.analytics.id}',
      connector_type: 'postgresql',
      config: { host: 'db', port: 5432, ssl_mode: 'require', extra: { app_name: 'cdktf' } },
      credentials: { username: 'reader', password_wo: 'x', password_wo_version: 1 },
      selected_tables: ['public.orders'],
    });
    const pipeline = only(json, 'dataplatform_pipeline');
    expect(pipeline.steps).toEqual([
      { name: 'sync', type: 'connector_sync', connector_id: '${dataplatform_connector.orders.id}' },
      { name: 'after', type: 'connector_sync', connector_id: '${dataplatform_connector.orders.id}', depends_on: ['sync'] },
    ]);
    // A token getter of a nested attribute.
    expect(pipeline.description).toBe('${dataplatform_connector.orders.config.host}');
  });

  it('have token getters for every attribute, nested ones and list items included', () => {
    const s = stack();
    const p = new Pipeline(s, 'p', { projectId: 'x', name: 'p', steps: [{ name: 'a', type: 'notification', channelId: 'c' }] });
    const c = new Connector(s, 'c', { projectId: 'x', name: 'c', connectorType: 'mysql' });
    new Project(s, 'out', {
      name: 'n',
      labels: {
        status: c.status,
        created: c.createdAt,
        step: p.steps.get(0).name,
        user: c.credentials.username,
        enabled: p.enabled as unknown as string,
      },
    });
    expect(only(synth(s), 'dataplatform_project').labels).toEqual({
      status: '${dataplatform_connector.c.status}',
      created: '${dataplatform_connector.c.created_at}',
      step: '${dataplatform_pipeline.p.steps[0].name}',
      user: '${dataplatform_connector.c.credentials.username}',
      enabled: '${dataplatform_pipeline.p.enabled}',
    });
  });

  it('pass the meta-arguments through: provider alias, dependsOn, count, lifecycle', () => {
    const s = stack();
    const other = new DataplatformProvider(s, 'second', { alias: 'second', apiKey: 'k' });
    const channel = new NotificationChannel(s, 'ch', {
      projectId: 'p',
      name: 'oncall',
      type: 'email',
      config: { emailAddresses: ['a@example.com'] },
      provider: other,
    });
    const rule = new AlertRule(s, 'rule', {
      projectId: 'p',
      name: 'r',
      severity: 'warning',
      condition: { metric: 'run_failed', operator: 'gt', threshold: 0 },
      channelIds: [channel.id],
      dependsOn: [channel],
      count: 2,
      lifecycle: { replaceTriggeredBy: [channel], preventDestroy: true },
    });
    expect(rule.channelIdsInput).toHaveLength(1);
    const json = synth(s);
    expect(only(json, 'dataplatform_notification_channel').provider).toBe('dataplatform.second');
    expect(json.provider.dataplatform).toEqual([{}, { alias: 'second', api_key: 'k' }]);
    expect(only(json, 'dataplatform_alert_rule')).toMatchObject({
      count: 2,
      depends_on: ['dataplatform_notification_channel.ch'],
      lifecycle: { replace_triggered_by: ['${dataplatform_notification_channel.ch}'], prevent_destroy: true },
      channel_ids: ['${dataplatform_notification_channel.ch.id}'],
    });
  });

  it('name attributes in camelCase from the provider schema (provider_name: the API field `provider` is a meta-argument)', () => {
    const s = stack();
    const wh = new InfrastructureResource(s, 'wh', {
      projectId: 'p',
      name: 'wh',
      resourceType: 'warehouse',
      providerName: 'snowflake',
      region: 'eu-west-1',
    });
    expect(wh.providerNameInput).toBe('snowflake');
    expect(only(synth(s), 'dataplatform_infrastructure_resource')).toEqual({
      project_id: 'p',
      name: 'wh',
      resource_type: 'warehouse',
      provider_name: 'snowflake',
      region: 'eu-west-1',
    });
  });

  it('import: importFrom writes an import block, generateConfigForImport an importable resource', () => {
    const s = stack();
    new Project(s, 'existing', { name: 'legacy' }).importFrom('legacy');
    User.generateConfigForImport(s, 'dana', 'dana@example.com');
    const json = synth(s);
    expect(json.import).toEqual(
      expect.arrayContaining([
        { id: 'legacy', to: 'dataplatform_project.existing' },
        { id: 'dana@example.com', to: 'dataplatform_user.dana' },
      ]),
    );
  });

  it('setters and reset* change what is synthesized', () => {
    const s = stack();
    const c = new Connector(s, 'c', { projectId: 'p', name: 'c', connectorType: 'mysql', schedule: '0 * * * *' });
    c.resetSchedule();
    c.putCredentials({ username: 'u' });
    c.name = 'renamed';
    expect(only(synth(s), 'dataplatform_connector')).toEqual({
      project_id: 'p',
      name: 'renamed',
      connector_type: 'mysql',
      credentials: { username: 'u' },
    });
  });

  it('data sources: a lookup per listable kind and the views, as data blocks with token getters', () => {
    expect(Object.keys(DATA_SOURCE_CONSTRUCTS)).toEqual(
      expect.arrayContaining([
        'dataplatform_connector',
        'dataplatform_project',
        'dataplatform_latest_run',
        'dataplatform_connector_schema',
        'dataplatform_dbt_lineage',
      ]),
    );
    const s = stack();
    const existing = new DataConnector(s, 'orders', { projectId: 'p1', name: 'orders-db' });
    const run = new DataLatestRun(s, 'last', { projectId: 'p1', connectorId: existing.id });
    new Project(s, 'uses', { name: 'x', labels: { host: existing.config.host, status: run.status } });
    const json = synth(s);
    expect(json.data.dataplatform_connector.orders).toEqual({ project_id: 'p1', name: 'orders-db' });
    expect(json.data.dataplatform_latest_run.last).toEqual({ project_id: 'p1', connector_id: '${data.dataplatform_connector.orders.id}' });
    expect(only(json, 'dataplatform_project').labels).toEqual({
      host: '${data.dataplatform_connector.orders.config.host}',
      status: '${data.dataplatform_latest_run.last.status}',
    });
  });
});
