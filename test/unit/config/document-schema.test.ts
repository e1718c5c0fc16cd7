import { describe, expect, it } from 'vitest';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { SCHEMAS_DIR, valuesAt, type JsonSchema } from '../../../src/kinds/index.js';
import { createAjv } from '../../../src/kinds/validator.js';
import {
  buildDocumentSchema,
  declarableKinds,
  declarableLayouts,
  layoutOf,
  renderDocumentSchema,
  yamlReferenceName,
} from '../../../src/config/index.js';
import { REPO } from './helpers.js';

type Schema = JsonSchema & { $ref?: string; $defs?: Record<string, JsonSchema> };
const FILE = join(SCHEMAS_DIR, 'document.schema.json');
const schema = buildDocumentSchema() as Schema;

/** The node at an API-like path pattern of a spec schema. */
function at(node: Schema | undefined, path: string[]): Schema | undefined {
  for (const seg of path) node = seg === '*' ? node?.items : node?.properties?.[seg];
  return node;
}

describe('schemas/document.schema.json', () => {
  it('is up to date with schemas/kinds (run `npm run generate` after changing a kind)', () => {
    expect(readFileSync(FILE, 'utf8'), 'schemas/document.schema.json is stale: run `npm run generate`').toBe(renderDocumentSchema());
  });

  it('is draft 2020-12, an if/then per kind on `kind`, and ajv (with our formats) compiles it', () => {
    expect(schema.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
    const kinds = declarableKinds().map((d) => d.yamlKind);
    expect(schema.properties!.kind.enum).toEqual(kinds);
    expect(kinds).toEqual(
      expect.arrayContaining([
        'Project',
        'Connector',
        'InfrastructureResource',
        'DbtProject',
        'Pipeline',
        'AlertRule',
        'NotificationChannel',
        'EscalationPolicy',
        'Classification',
        'MaskingPolicy',
        'User',
        'SsoProvider',
      ]),
    );
    expect(kinds).toHaveLength(12);
    expect(kinds).not.toContain('ApiKey');
    expect(schema.allOf!.map((b) => b.if!.properties!.kind.const)).toEqual(kinds);
    expect(() => createAjv().compile(JSON.parse(readFileSync(FILE, 'utf8')))).not.toThrow();
  });

  it('validates the example repository as editors would, from the checked-in file', () => {
    const check = createAjv().compile(JSON.parse(readFileSync(FILE, 'utf8')));
    const root = join(REPO, 'examples', 'platform');
    const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.yaml'));
    expect(files.length).toBeGreaterThan(3);
    for (const file of files) {
      const text = readFileSync(join(root, file), 'utf8');
      expect(text.split('\n')[0]).toMatch(/^# yaml-language-server: \$schema=(\.\.\/)+schemas\/document\.schema\.json$/);
      for (const doc of parseAllDocuments(text)) expect(check(doc.toJS()), `${file}: ${JSON.stringify(check.errors)}`).toBe(true);
    }
  });

  it.each(declarableLayouts().map((l) => [l.yamlKind, l] as const))('derives %s from its kind schema', (yamlKind, layout) => {
    const d = layout.descriptor;
    const spec = schema.$defs![`${yamlKind}Spec`] as Schema;
    const metadata = schema.$defs![`${yamlKind}Metadata`] as Schema;
    // Descriptions come from the kind schemas.
    expect(spec.description).toContain(d.description);
    const branch = schema.allOf!.find((b) => b.if!.properties!.kind.const === yamlKind)!;
    expect(branch.then!.description).toContain(d.description);
    for (const [name, prop] of Object.entries(d.createSchema.properties ?? {})) {
      if (prop.description && !d.secretPaths.some((p) => p.length === 1 && p[0] === name) && spec.properties![name])
        expect(spec.properties![name].description).toContain(prop.description);
    }
    // metadata: name is the identity, project for project-scoped kinds, labels where the kind has them, annotations.
    expect(metadata.required).toEqual(d.scope === 'project' ? ['name', 'project'] : ['name']);
    expect(Object.keys(metadata.properties!).sort()).toEqual(
      ['annotations', 'name', ...(d.scope === 'project' ? ['project'] : []), ...(layout.hasLabels ? ['labels'] : [])].sort(),
    );
    // Every kind takes the dpctl.dev/ policies, described once in config/policies.ts.
    expect(Object.keys(metadata.properties!.annotations.properties!).sort()).toEqual([
      'dpctl.dev/ignore-fields',
      'dpctl.dev/prevent-destroy',
      'dpctl.dev/reconcile',
      'dpctl.dev/secrets-version',
    ]);
    expect(metadata.properties!.name.type).toBe(d.schema.properties![d.identity].type);
    expect(spec.properties).not.toHaveProperty(d.identity);
    expect(spec.properties).not.toHaveProperty('labels');
    // Computed fields are never accepted.
    for (const field of d.computedFields) if (field !== d.identity) expect(spec.properties).not.toHaveProperty(field);
    // Every secret is a secretRef.
    for (const path of d.secretPaths) expect(at(spec, path)!.$ref).toBe('#/$defs/secretRef');
    // Every reference is renamed where it is, and holds a name.
    for (const rename of layout.renames) {
      const parent = at(spec, rename.parent)!;
      expect(parent.properties).not.toHaveProperty(rename.api);
      const field = parent.properties![rename.yaml] as Schema;
      const value = rename.many ? field.items! : field;
      expect([value.type, value['x-ref']]).toEqual(['string', undefined]);
      expect(field.description).toContain(`API field ${rename.api}`);
      // Conditional rules that required the API name require the YAML name.
      for (const sub of valuesAt(parent, ['allOf', '*', 'then', 'required'])) expect(sub.value).not.toContain(rename.api);
    }
  });

  it('names references generically from their API field', () => {
    expect(
      ['connector_id', 'channel_ids', 'escalation_policy_id', 'dbt_project_id', 'escalation_policy_ids', 'box_ids', 'key_ids'].map(
        yamlReferenceName,
      ),
    ).toEqual(['connector', 'channels', 'escalation_policy', 'dbt_project', 'escalation_policies', 'boxes', 'keys']);
    const pipeline = layoutOf(declarableKinds().find((d) => d.kind === 'pipeline')!);
    expect(pipeline.renames.map((r) => `${[...r.parent, r.api].join('.')} -> ${r.yaml}`)).toEqual([
      'steps.*.connector_id -> connector',
      'steps.*.dbt_project_id -> dbt_project',
      'steps.*.channel_id -> channel',
    ]);
    const rule = layoutOf(declarableKinds().find((d) => d.kind === 'alert_rule')!);
    expect(rule.renames.find((r) => r.api === 'channel_ids')).toMatchObject({
      yaml: 'channels',
      many: true,
      refKind: 'notification_channel',
    });
  });
});
