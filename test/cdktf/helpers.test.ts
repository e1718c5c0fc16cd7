import { describe, expect, it } from 'vitest';
import { TerraformStack, Testing } from '../../src/cdktf/cdk.js';
import { Classification, MaskingPolicy, Platform, Project, secret, secretVariable, step, stepTargetTypes } from '../../src/cdktf/index.js';
import { PlatformStack } from '../../examples/cdktf/platform-stack.js';
import { testOutdir } from '../support/cdktf-outdir.js';

const outdir = testOutdir();

const synth = (s: TerraformStack) => JSON.parse(Testing.synth(s));
const values = (json: any, type: string) => Object.values((json.resource[type] ?? {}) as Record<string, any>);
const byName = (json: any, type: string, name: string) => values(json, type).find((r) => r.name === name);

describe('helpers above the bindings', () => {
  it('fill projectId with a reference to the project and name from the first argument', () => {
    const s = new TerraformStack(Testing.app({ outdir }), 's');
    const platform = new Platform(s, 'platform', { provider: { endpoint: 'https://acme.localhost:8443' } });
    const sales = platform.addProject('sales', { description: 'd' });
    sales.addConnector('crm', { connectorType: 'salesforce' });
    sales.add(MaskingPolicy, 'redact', {
      classificationId: sales.add(Classification, 'pii', { sensitivity: 'confidential' }).id,
      method: 'redact',
    });
    // Two kinds may share a name: the construct ids differ by kind.
    sales.addNotificationChannel('crm', { type: 'email', config: { emailAddresses: ['a@example.com'] } });
    platform.addUser('dana@example.com', { role: 'read-only' });
    const json = synth(s);
    const project = values(json, 'dataplatform_project')[0];
    expect(project).toMatchObject({ name: 'sales', description: 'd' });
    const projectRef = expect.stringMatching(/^\$\{dataplatform_project\.platform_sales_project_[0-9A-F]+\.id\}$/);
    expect(byName(json, 'dataplatform_connector', 'crm')).toMatchObject({ project_id: projectRef, connector_type: 'salesforce' });
    expect(byName(json, 'dataplatform_notification_channel', 'crm')).toMatchObject({ project_id: projectRef, type: 'email' });
    expect(byName(json, 'dataplatform_masking_policy', 'redact').classification_id).toMatch(/^\$\{dataplatform_classification\..*\.id\}$/);
    expect(values(json, 'dataplatform_user')[0]).toEqual(expect.objectContaining({ email: 'dana@example.com', role: 'read-only' }));
    expect(json.provider.dataplatform).toEqual([{ endpoint: 'https://acme.localhost:8443' }]);
  });

  it('builds pipeline steps from constructs: type and id field from the pipeline schema, depends_on from after', () => {
    expect(stepTargetTypes().sort()).toEqual(['dataplatform_connector', 'dataplatform_dbt_project', 'dataplatform_notification_channel']);
    const json = synth(new PlatformStack(Testing.app({ outdir }), 'platform'));
    const pipeline = byName(json, 'dataplatform_pipeline', 'nightly-revenue');
    const ref = (type: string, name: string) => {
      const [key] = Object.entries(json.resource[type]).find(([, r]: [string, any]) => r.name === name)!;
      return `\${${type}.${key}.id}`;
    };
    expect(pipeline.steps).toEqual([
      { name: 'sync-orders', type: 'connector_sync', connector_id: ref('dataplatform_connector', 'orders-db') },
      { name: 'sync-billing', type: 'connector_sync', connector_id: ref('dataplatform_connector', 'billing-db') },
      {
        name: 'build-models',
        type: 'dbt_run',
        dbt_project_id: ref('dataplatform_dbt_project', 'warehouse-models'),
        depends_on: ['sync-orders', 'sync-billing'],
      },
      {
        name: 'announce',
        type: 'notification',
        channel_id: ref('dataplatform_notification_channel', 'data-team-slack'),
        depends_on: ['build-models'],
      },
    ]);
    expect(byName(json, 'dataplatform_alert_rule', 'revenue-pipeline-failed').target).toEqual({
      pipeline_id: ref('dataplatform_pipeline', 'nightly-revenue'),
    });
  });

  it('refuses bad steps at synth time with a clear message', () => {
    const s = new TerraformStack(Testing.app({ outdir }), 's');
    const p = new Platform(s, 'p').addProject('x');
    const c = p.addConnector('c', { connectorType: 'mysql' });
    expect(() => step('bad', p.project)).toThrow(
      'step "bad": a pipeline step cannot run a dataplatform_project (it runs dataplatform_connector, dataplatform_dbt_project, dataplatform_notification_channel)',
    );
    const elsewhere = step('sync', c);
    expect(() => p.addPipeline('pl', { steps: [step('after', c, { after: [elsewhere] })] })).toThrow(
      'step "after" runs after "sync", which is not a step of this pipeline',
    );
    expect(() => p.addPipeline('p2', { steps: [step('same', c), step('same', c)] })).toThrow('two steps are named "same"');
  });

  it('reads secrets from sensitive variables: only ${var.X} in the JSON, one variable per name, at the stack top', () => {
    const json = synth(new PlatformStack(Testing.app({ outdir }), 'platform'));
    expect(json.variable.ORDERS_DB_PASSWORD).toEqual({
      type: 'string',
      sensitive: true,
      nullable: false,
      description: 'Password of the orders database replica user.',
    });
    expect(Object.keys(json.variable).sort()).toEqual(['BILLING_DB_PASSWORD', 'ORDERS_DB_PASSWORD', 'SLACK_WEBHOOK_URL']);
    expect(byName(json, 'dataplatform_connector', 'orders-db').credentials).toEqual({
      username: 'replicator',
      password: '${var.ORDERS_DB_PASSWORD}',
    });
    expect(byName(json, 'dataplatform_notification_channel', 'data-team-slack').config.slack_webhook_url).toBe('${var.SLACK_WEBHOOK_URL}');

    const s = new TerraformStack(Testing.app({ outdir }), 's');
    new Project(s, 'TAKEN', { name: 'x' });
    expect(secretVariable(s, 'A')).toBe(secretVariable(new Platform(s, 'deep'), 'A'));
    expect(secretVariable(s, 'A').node.scope).toBe(s);
    expect(secret(s, 'A')).toMatch(/^\$\{TfToken/);
    expect(() => secret(s, 'TAKEN')).toThrow('"TAKEN" is already the id of another construct');
  });

  it('can be tested on their own with Testing.synthScope and the cdktf matchers', () => {
    const synthesized = Testing.synthScope((scope) => {
      const sales = new Platform(scope, 'platform').addProject('sales');
      const crm = sales.addConnector('crm', { connectorType: 'salesforce', schedule: '0 * * * *' });
      sales.addPipeline('hourly', { steps: [step('sync-crm', crm)] });
    });
    expect(Testing.toHaveProvider(synthesized, 'dataplatform')).toBe(true);
    expect(Testing.toHaveResourceWithProperties(synthesized, 'dataplatform_project', { name: 'sales' })).toBe(true);
    expect(
      Testing.toHaveResourceWithProperties(synthesized, 'dataplatform_connector', {
        name: 'crm',
        connector_type: 'salesforce',
        schedule: '0 * * * *',
      }),
    ).toBe(true);
    // The matchers do fail: another value of the same resource is not found.
    expect(Testing.toHaveResourceWithProperties(synthesized, 'dataplatform_connector', { name: 'crm', connector_type: 'mysql' })).toBe(
      false,
    );
    expect(
      Testing.toHaveResourceWithProperties(synthesized, 'dataplatform_pipeline', {
        name: 'hourly',
        steps: [{ name: 'sync-crm', type: 'connector_sync' }],
      }),
    ).toBe(true);
    expect(Testing.toHaveResource(synthesized, 'dataplatform_alert_rule')).toBe(false);
  });
});
