import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TerraformStack, Testing } from '../../src/cdktf/cdk.js';
import { ConfigValidationError, Connector, DataplatformProvider, YamlPlatform, step } from '../../src/cdktf/index.js';
import { formatConfigError, loadConfig } from '../../src/config/index.js';
import { setAt } from '../../src/kinds/index.js';
import { resourceSpecs } from '../../src/provider/schema.js';
import { testOutdir } from '../support/cdktf-outdir.js';

const outdir = testOutdir();

const EXAMPLE = join(import.meta.dirname, '..', '..', 'examples', 'platform');
const tmp = mkdtempSync(join(tmpdir(), 'dp-cdktf-yaml-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function synthYaml(paths: string, cwd?: string) {
  const stack = new TerraformStack(Testing.app({ outdir }), 'yaml');
  new DataplatformProvider(stack, 'dp');
  const yaml = new YamlPlatform(stack, 'platform', { paths, cwd });
  return { stack, yaml, json: JSON.parse(Testing.synth(stack)) };
}

describe('YamlPlatform: the dpctl YAML format as constructs', () => {
  it('creates one construct per document of examples/platform, with the API body of the document', () => {
    const { yaml, json } = synthYaml(EXAMPLE);
    const { config } = loadConfig(EXAMPLE);
    expect(yaml.documents).toHaveLength(config.documents.length);
    const addressOf = (kind: string, project: string | undefined, name: string) => {
      const doc = config.documents.find((d) => d.descriptor.kind === kind && d.project === project && d.name === name)!;
      const r = yaml.resource(doc.yamlKind, doc.name, doc.project);
      return `\${${r.terraformResourceType}.${r.friendlyUniqueId}.id}`;
    };
    let count = 0;
    for (const doc of config.documents) {
      const r = yaml.resource(doc.yamlKind, doc.name, doc.project);
      const synthesized = json.resource[r.terraformResourceType][r.friendlyUniqueId];
      // What dpctl would send, with each reference a Terraform reference and each secret a variable.
      const expected: Record<string, unknown> = structuredClone(doc.body);
      for (const ref of doc.references) setAt(expected, ref.path, addressOf(ref.kind, doc.project, ref.name));
      for (const s of doc.secrets) setAt(expected, s.path, `\${var.${(s.ref as { env: string }).env}}`);
      if (doc.project) expected.project_id = addressOf('project', undefined, doc.project);
      const attrs = synthesized;
      // Attributes the provider renames (a meta-argument such as `provider`) carry the API field under their Terraform name.
      for (const a of resourceSpecs().get(r.terraformResourceType)!.attrs) {
        const apiName = (a as { apiName?: string }).apiName;
        if (apiName && apiName in expected) {
          expected[a.name] = expected[apiName];
          delete expected[apiName];
        }
      }
      expect(attrs, `${doc.yamlKind}/${doc.name}`).toEqual(expected);
      count++;
    }
    expect(count).toBe(config.documents.length);
    // The pipeline's steps point at the connectors and the dbt project as references.
    const pipeline = yaml.resource('Pipeline', 'nightly-revenue', 'analytics');
    expect(
      Object.values(json.resource.dataplatform_pipeline as Record<string, any>).find((p) => p.name === 'nightly-revenue').steps[2]
        .dbt_project_id,
    ).toBe(addressOf('dbt_project', 'analytics', 'warehouse-models'));
    expect(pipeline.terraformResourceType).toBe('dataplatform_pipeline');
  });

  it('turns each secretRef env into a sensitive variable of that name, never a value', () => {
    process.env.ORDERS_DB_PASSWORD = 'must-not-leak';
    try {
      const { json, stack } = synthYaml(EXAMPLE);
      expect(Object.keys(json.variable).sort()).toEqual([
        'ANALYTICS_SLACK_WEBHOOK_URL',
        'BILLING_DB_PASSWORD',
        'ONCALL_SIGNING_SECRET',
        'OPS_BOT_PASSWORD',
        'ORDERS_DB_PASSWORD',
        'SALESFORCE_PASSWORD',
      ]);
      for (const v of Object.values(json.variable as Record<string, any>))
        expect(v).toMatchObject({ type: 'string', sensitive: true, nullable: false });
      expect(Testing.synth(stack)).not.toContain('must-not-leak');
    } finally {
      delete process.env.ORDERS_DB_PASSWORD;
    }
  });

  it('turns a secretRef file into file("<absolute path>"), read by Terraform at plan time', () => {
    const dir = join(tmp, 'file-secret');
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
    writeFileSync(join(dir, 'db-password'), 'from-a-file\n');
    writeFileSync(
      join(dir, 'all.yaml'),
      'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: p\n---\napiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: db\n  project: p\nspec:\n  connector_type: mysql\n  credentials:\n    username: u\n    password:\n      secretRef:\n        file: db-password\n',
    );
    const { json } = synthYaml(dir);
    const connector = Object.values(json.resource.dataplatform_connector as Record<string, any>)[0];
    expect(connector.credentials.password).toBe(`\${file("${join(dir, 'db-password')}")}`);
    expect(JSON.stringify(json)).not.toContain('from-a-file');
  });

  it('reports invalid documents with the errors of dpctl validate (file:line:column), before creating anything', () => {
    const dir = join(tmp, 'bad');
    mkdirSync(dir, { recursive: true });
    writeFileSync(
      join(dir, 'bad.yaml'),
      'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: p\n---\napiVersion: dataplatform/v1\nkind: Connector\nmetadata:\n  name: db\n  project: p\nspec:\n  connector_type: oracle\n  config:\n    port: not-a-number\n---\napiVersion: dataplatform/v1\nkind: Pipeline\nmetadata:\n  name: pl\n  project: p\nspec:\n  steps:\n    - name: s\n      type: connector_sync\n      connector: missing\n',
    );
    const expected = loadConfig(dir, { cwd: tmp }).errors;
    expect(expected.length).toBeGreaterThanOrEqual(3);
    let thrown: unknown;
    try {
      synthYaml(dir, tmp);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigValidationError);
    const message = (thrown as Error).message;
    expect(message).toBe(expected.map(formatConfigError).join('\n'));
    expect(message).toMatch(/^bad\/bad\.yaml:12:19: Connector\/db: spec\.connector_type: /m);
    expect(message).toMatch(/^bad\/bad\.yaml:14:11: Connector\/db: spec\.config\.port: /m);
    expect(message).toContain('no Connector named "missing" in project "p"');
  });

  it('mixes with hand-written constructs: resource() gives the construct of a document', () => {
    const { stack, yaml } = synthYaml(EXAMPLE);
    const orders = yaml.resource<Connector>('Connector', 'orders-db', 'analytics');
    expect(orders).toBeInstanceOf(Connector);
    expect(step('sync', orders).type).toBe('connector_sync');
    expect(() => yaml.resource('Connector', 'orders-db', 'marketing')).toThrow('no Connector named "orders-db" in project "marketing"');
    expect(stack).toBeTruthy();
  });
});

describe('YamlPlatform: dpctl.dev/ policies', () => {
  it('prevent-destroy and ignore-fields become lifecycle arguments; observe is a data source; disabled is left out', () => {
    const dir = join(tmp, 'policies');
    mkdirSync(dir, { recursive: true });
    const connector = (name: string, annotations: string) => `apiVersion: dataplatform/v1
kind: Connector
metadata:
  name: ${name}
  project: p
  annotations:
${annotations}
spec:
  connector_type: mysql
  config: { host: db.internal, port: 3306, database: shop }
`;
    writeFileSync(
      join(dir, 'platform.yaml'),
      [
        'apiVersion: dataplatform/v1\nkind: Project\nmetadata:\n  name: p\nspec:\n  description: policies\n',
        connector('guarded', '    dpctl.dev/prevent-destroy: "true"\n    dpctl.dev/ignore-fields: "config.port, labels.team"'),
        connector('watched', '    dpctl.dev/reconcile: observe'),
        connector('off', '    dpctl.dev/reconcile: disabled'),
      ].join('---\n'),
    );
    const { yaml, json } = synthYaml(dir);
    const guarded = yaml.resource('Connector', 'guarded', 'p');
    expect(json.resource.dataplatform_connector[guarded.friendlyUniqueId].lifecycle).toEqual({
      prevent_destroy: true,
      ignore_changes: ['config.port', 'labels["team"]'],
    });
    const names = Object.values(json.resource.dataplatform_connector as Record<string, { name: string }>).map((c) => c.name);
    expect(names).toEqual(['guarded']);
    expect(Object.values(json.data.dataplatform_connector as Record<string, { name: string; project_id: string }>)).toEqual([
      { name: 'watched', project_id: expect.stringMatching(/^\$\{dataplatform_project\..*\.id\}$/) },
    ]);
  });
});
