import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createAjv, toFieldErrors } from '../../../src/kinds/validator.js';
import {
  ConfigValidationError,
  declarableKinds,
  declaredLookup,
  loadConfig,
  locationOf,
  resolveSecrets,
  toApiBody,
  type ReferenceLookup,
} from '../../../src/config/index.js';
import { FIXTURES, lines } from './helpers.js';

/**
 * test/fixtures/config/valid/platform.yaml holds one document of every declarable kind and
 * expected-bodies.json the exact API body of each: a new kind fails here until it has both.
 */
const VALID = join(FIXTURES, 'valid');
const expected = JSON.parse(readFileSync(join(VALID, 'expected-bodies.json'), 'utf8')) as Record<string, Record<string, unknown>>;
const { config, errors } = loadConfig('.', { cwd: VALID });
const env = { OPS_PASSWORD: 'ops-password-1', HOOK_SECRET: 'hook-secret' };
const { secrets, errors: secretErrors } = resolveSecrets(config.documents, { env });
/** Ids that show what they stand for. */
const ids: ReferenceLookup = (kind, project, name) => `${kind}:${project ?? ''}:${name}`;
const ajv = createAjv();

describe('a valid multi-document file', () => {
  it('loads without errors, every document in order', () => {
    expect(lines(errors)).toEqual([]);
    expect(lines(secretErrors)).toEqual([]);
    expect(config.files).toEqual(['platform.yaml']);
    expect(config.documents.map((d) => `${d.yamlKind}/${d.name}`)).toEqual(Object.keys(expected));
  });

  it.each(declarableKinds().map((d) => [d.yamlKind!, d] as const))('produces the exact API create body for %s', (yamlKind, descriptor) => {
    const docs = config.documents.filter((d) => d.descriptor === descriptor);
    expect(docs.length, `add a ${yamlKind} document to ${VALID}/platform.yaml and its body to expected-bodies.json`).toBeGreaterThan(0);
    for (const doc of docs) {
      const body = toApiBody(doc, ids, secrets);
      expect(body).toEqual(expected[`${yamlKind}/${doc.name}`]);
      // The body is what the service accepts: the kind's create schema, every field known.
      const check = ajv.compile(descriptor.createSchema);
      expect(check(body) ? [] : toFieldErrors(check.errors)).toEqual([]);
      // And the declared body itself was not changed.
      expect(JSON.stringify(doc.body)).not.toContain(':shop:');
    }
  });

  it('maps metadata: name to the identity field, project by name, labels to labels', () => {
    const byName = new Map(config.documents.map((d) => [`${d.yamlKind}/${d.name}`, d]));
    const user = byName.get('User/Ops@Example.com')!;
    expect(user.identity).toEqual({ field: 'email', value: 'Ops@Example.com' });
    expect(user.project).toBeUndefined();
    expect(user.body).not.toHaveProperty('labels');
    const connector = byName.get('Connector/orders-db')!;
    expect([connector.project, connector.labels, connector.body.labels]).toEqual(['shop', { tier: 'gold' }, { tier: 'gold' }]);
    expect(byName.get('Project/shop')!.body).toEqual({ name: 'shop', description: 'The shop.', labels: { team: 'data' } });
  });

  it('keeps references as names and secrets as refs in the declared body, with where each is written', () => {
    const rule = config.documents.find((d) => d.yamlKind === 'AlertRule')!;
    expect(rule.body.channel_ids).toEqual(['a', 'b']);
    expect(rule.references.map((r) => [r.field, r.yamlField, r.kind, r.name, `${r.location.line}:${r.location.column}`])).toEqual([
      ['target.pipeline_id', 'spec.target.pipeline', 'pipeline', 'nightly', '114:23'],
      ['channel_ids[0]', 'spec.channels[0]', 'notification_channel', 'a', '115:14'],
      ['channel_ids[1]', 'spec.channels[1]', 'notification_channel', 'b', '115:17'],
      ['escalation_policy_id', 'spec.escalation_policy', 'escalation_policy', 'escalate', '116:22'],
    ]);
    expect(toApiBody(rule, ids, secrets).channel_ids).toEqual(['notification_channel:shop:a', 'notification_channel:shop:b']);
    const connector = config.documents.find((d) => d.yamlKind === 'Connector')!;
    expect(connector.body.credentials).toEqual({ username: 'app', password: { secretRef: { file: 'secrets/db-password.txt' } } });
    expect(connector.secrets.map((s) => [s.field, s.yamlField, s.ref, `${s.location.line}:${s.location.column}`])).toEqual([
      ['credentials.password', 'spec.credentials.password', { file: 'secrets/db-password.txt' }, '34:15'],
    ]);
  });

  it('has a location for every API field, for plan output', () => {
    const pipeline = config.documents.find((d) => d.yamlKind === 'Pipeline')!;
    const at = (field: string) => {
      const l = locationOf(pipeline, field);
      return `${l.file}:${l.line}:${l.column}`;
    };
    expect(at('name')).toBe('platform.yaml:87:9');
    expect(at('steps[0].connector_id')).toBe('platform.yaml:92:54');
    expect(at('steps[1].depends_on[0]')).toBe('platform.yaml:93:71');
    expect(at('labels')).toBe('platform.yaml:84:1'); // not written: the document
  });

  it('resolves references against declared documents, or any lookup, and refuses to guess', () => {
    const pipeline = config.documents.find((d) => d.yamlKind === 'Pipeline')!;
    const declared = declaredLookup(config.documents);
    expect(toApiBody(pipeline, declared, secrets).steps).toMatchObject([
      { connector_id: 'Connector/shop/orders-db' },
      { dbt_project_id: 'DbtProject/shop/models' },
      { channel_id: 'NotificationChannel/shop/a' },
    ]);
    const partial: ReferenceLookup = (kind, _project, name) => (kind === 'connector' ? `con_${name}` : undefined);
    let thrown: unknown;
    try {
      toApiBody(pipeline, partial, secrets);
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ConfigValidationError);
    expect(lines((thrown as ConfigValidationError).errors)).toEqual([
      'platform.yaml:93:50: Pipeline/nightly: spec.steps[1].dbt_project: no DbtProject named "models" in project "shop"',
      'platform.yaml:94:50: Pipeline/nightly: spec.steps[2].channel: no NotificationChannel named "a" in project "shop"',
    ]);
  });

  it('refuses to build a body whose secrets were not resolved', () => {
    const user = config.documents.find((d) => d.yamlKind === 'User')!;
    const none = resolveSecrets([], {}).secrets;
    expect(() => toApiBody(user, ids, none)).toThrow(/platform\.yaml:19:12: User\/Ops@Example\.com: spec\.password: secret not resolved/);
  });
});
