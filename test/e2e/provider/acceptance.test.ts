import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deleteAt, valuesAt, type KindDescriptor } from '../../../src/kinds/index.js';
import { apiField, resourceSpecs } from '../../../src/provider/schema.js';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { haveTerraform, PROVIDER_BLOCK, TerraformWorkspace } from './harness.js';

/**
 * The acceptance lifecycle for every writable kind, table-driven from the descriptors, under
 * the real `terraform`: create; plan after apply is empty; update in place; replace on an
 * immutable change; import (by id, then by name) then plan is empty; drift made through the API
 * shows in the plan and apply restores it; deleted outside Terraform is recreated; destroy
 * leaves nothing. All kinds go through each step together in one configuration (a Terraform run
 * costs seconds). Projects are the scope every other sample lives in, so they are not a row:
 * the configuration's two projects go through the same steps beside the samples (updated in
 * place, imported, drifted, one deleted outside Terraform, destroyed). No sample value may appear
 * in Terraform's output when it is a secret (connector password, webhook signing secret).
 */

/** An HCL expression instead of a literal, given the project the sample lives in ('a' or 'b'). */
class Ref {
  constructor(readonly expr: (project: 'a' | 'b') => string) {}
}
type Value = string | number | boolean | Ref | Value[] | { [key: string]: Value };
type Fields = Record<string, Value>;

interface Sample {
  /** The resource's attributes (API field names), without project_id. */
  create: Fields;
  /** Mutable fields changed in place (kinds the API can update). */
  update?: Fields;
  /**
   * Fields changed to force a replacement: at least one x-immutable field, plus any mutable field
   * the new value needs (a webhook channel's url); omitted, a project-scoped sample moves to the
   * second project instead.
   */
  replace?: Fields;
  /** A PATCH made through the API behind Terraform's back; default: a changed label. */
  drift?: Record<string, unknown>;
}

const channel = new Ref((p) => `dataplatform_notification_channel.support_${p}.id`);
/**
 * Another kind's sample. The API takes references within one project only, so a referrer must
 * move with what it refers to: kinds without a `replace` sample all move to the second project
 * in the replace step, together.
 */
const sampleOf = (kind: string) => new Ref(() => `dataplatform_${kind}.sample.id`);

/** Sample values per kind. A writable kind with neither a sample nor a SKIP entry fails the first test. */
const SAMPLES: Record<string, Sample> = {
  infrastructure_resource: {
    create: {
      name: 'acc-warehouse',
      resource_type: 'warehouse',
      provider: 'snowflake',
      region: 'eu-west-1',
      config: { size: 'small' },
      labels: { team: 'data' },
    },
    update: { config: { size: 'large' } },
    replace: { region: 'eu-central-1' },
  },
  dbt_project: {
    create: {
      name: 'acc-dbt',
      repository: 'https://git.example.com/acc/marts.git',
      models: [
        { name: 'stg_orders', materialization: 'view' },
        { name: 'fct_orders', materialization: 'table', depends_on: ['stg_orders'] },
      ],
    },
    update: { branch: 'develop', target: 'dev' },
  },
  pipeline: {
    create: { name: 'acc-pipeline', schedule: '0 3 * * *', steps: [{ name: 'notify', type: 'notification', channel_id: channel }] },
    update: { description: 'paused for the migration', enabled: false },
  },
  escalation_policy: {
    create: {
      name: 'acc-escalation',
      steps: [
        { delay_minutes: 0, channel_ids: [channel] },
        { delay_minutes: 15, channel_ids: [channel] },
      ],
    },
    update: { repeat: 2 },
  },
  classification: {
    create: { name: 'acc-pii', sensitivity: 'confidential', column_matchers: [{ column_pattern: '^email$' }] },
    update: { sensitivity: 'restricted', description: 'personal data' },
  },
  masking_policy: {
    create: { name: 'acc-mask-email', classification_id: sampleOf('classification'), method: 'hash' },
    update: { method: 'partial', partial_visible_chars: 2 },
  },
  api_key: {
    create: { name: 'acc-key', permission_level: 'read-only' },
    replace: { name: 'acc-key-rotated', permission_level: 'read-write' },
  },
  user: {
    create: { email: 'acc-user@example.com', role: 'read-only', name: 'Acc User' },
    update: { role: 'read-write' },
    replace: { email: 'acc-user-2@example.com' },
    drift: { name: 'Renamed Outside' },
  },
  sso_provider: {
    create: { name: 'acc-sso', protocol: 'oidc', issuer: 'https://idp.example.com', client_id: 'acc-client', scopes: ['openid', 'email'] },
    update: { allowed_domains: ['example.com'], auto_provision: true },
    replace: { protocol: 'google' },
  },
  connector: {
    create: {
      name: 'acc-connector',
      connector_type: 'postgresql',
      config: { host: 'db.internal', port: 5432, database: 'orders', ssl_mode: 'require' },
      credentials: { username: 'reader', password: 'acc-secret-first' },
      selected_tables: ['public.orders', 'public.customers'],
      schedule: '0 2 * * *',
      labels: { team: 'data' },
    },
    // A new password is an in-place change too.
    update: {
      credentials: { username: 'reader', password: 'acc-secret-second' },
      selected_tables: ['public.orders'],
      schedule: '30 4 * * *',
    },
    replace: { connector_type: 'mysql' },
    drift: { labels: { team: 'data', changed: 'outside' }, selected_tables: ['public.other'] },
  },
  notification_channel: {
    create: { name: 'acc-channel', type: 'email', config: { email_addresses: ['oncall@example.com'] }, labels: { team: 'data' } },
    update: { config: { email_addresses: ['oncall@example.com', 'data@example.com'] }, enabled: false },
    // A webhook needs a url (and takes a write-only signing secret).
    replace: { type: 'webhook', config: { url: 'https://hooks.example.com/acc', signing_secret: 'acc-signing-secret' } },
  },
  alert_rule: {
    create: {
      name: 'acc-alert',
      severity: 'warning',
      condition: { metric: 'run_failed', operator: 'gte', threshold: 3, window_minutes: 30 },
      target: { pipeline_id: sampleOf('pipeline') },
      channel_ids: [channel],
      escalation_policy_id: sampleOf('escalation_policy'),
      labels: { team: 'data' },
    },
    update: {
      severity: 'critical',
      description: 'paged',
      condition: { metric: 'run_failed', operator: 'gt', threshold: 5, window_minutes: 120 },
    },
    // No x-immutable field: replaced by a move to the second project, with its pipeline and policy.
  },
};

/** Kinds the table leaves out, and why. */
const SKIP: Record<string, string> = {
  project: 'not a row, every sample lives in one: the projects acc-a and acc-b of the configuration go through each step',
};

const specs = [...resourceSpecs().values()];
/** The attribute standing for an API field (fields named like a meta-argument are renamed, e.g. provider). */
const tfName = (d: KindDescriptor, field: string) => specs.find((s) => s.descriptor === d)!.attrs.find((a) => apiField(a) === field)!.name;
const kinds = specs.map((s) => s.descriptor).filter((d) => SAMPLES[d.kind]);
/** How deep a kind sits under referrers among the samples (0: nothing refers to it). */
const depth = (d: KindDescriptor): number =>
  Math.max(0, ...kinds.filter((k) => k !== d && k.references.some((r) => r.kind === d.kind)).map((k) => depth(k) + 1));
/** Referrers before what they refer to (alert rules before pipelines before channels), for deleting. */
const deleteOrder = [...kinds].sort((x, y) => depth(x) - depth(y));
/** The x-immutable fields of a replace sample (the others only go with them). */
const forcing = (d: KindDescriptor) => Object.keys(SAMPLES[d.kind].replace ?? {}).filter((f) => d.immutableFields.includes(f));

function hcl(v: Value, project: 'a' | 'b'): string {
  if (v instanceof Ref) return v.expr(project);
  if (typeof v === 'string') return JSON.stringify(v).replace(/\$\{/g, '$${').replace(/%\{/g, '%%{');
  if (typeof v !== 'object') return String(v);
  if (Array.isArray(v)) return `[${v.map((x) => hcl(x, project)).join(', ')}]`;
  return `{ ${Object.entries(v)
    .map(([k, x]) => `${JSON.stringify(k)} = ${hcl(x, project)}`)
    .join(', ')} }`;
}

/** The fields without references (their ids are checked by Terraform's plan). */
function withoutRefs(fields: Fields): Record<string, unknown> {
  const strip = (v: Value): unknown =>
    v instanceof Ref ? undefined : Array.isArray(v) ? v.map(strip) : typeof v === 'object' ? withoutRefs(v as Fields) : v;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    const x = strip(v);
    if (x !== undefined && !(Array.isArray(x) && x.some((i) => i === undefined))) out[k] = x;
  }
  return out;
}

/** The fields as the API should return them: no references, no secrets (never returned). */
function expected(d: KindDescriptor, fields: Fields): Record<string, unknown> {
  const out = withoutRefs(fields);
  for (const path of d.secretPaths) deleteAt(out, path);
  return out;
}

/** The secret values the fields set. */
const secretsIn = (d: KindDescriptor, fields: Fields) =>
  d.secretPaths.flatMap((path) => valuesAt(fields, path).map((v) => String(v.value)));

type Phase = 'create' | 'update' | 'replace';

/** A sample's fields and project at a phase (each phase builds on the one before). */
function fieldsAt(d: KindDescriptor, phase: Phase): { fields: Fields; project: 'a' | 'b' } {
  const s = SAMPLES[d.kind];
  const fields = { ...s.create, ...(phase !== 'create' ? (s.update ?? {}) : {}), ...(phase === 'replace' ? (s.replace ?? {}) : {}) };
  const project = phase === 'replace' && !s.replace && d.scope === 'project' ? 'b' : 'a';
  return { fields, project };
}

/** Every secret value of every sample at every phase: none may show in Terraform's output. */
const SECRETS = kinds.flatMap((d) => (['create', 'update', 'replace'] as const).flatMap((p) => secretsIn(d, fieldsAt(d, p).fields)));

/** The description of the configuration's projects: changed in place by the update step. */
const projectDescription = (phase: Phase) => (phase === 'create' ? 'first' : 'second');

function config(phase: Phase): string {
  let out = `${PROVIDER_BLOCK}\n`;
  for (const p of ['a', 'b'] as const) {
    out += `resource "dataplatform_project" "${p}" {\n  name        = "acc-${p}"\n  description = "${projectDescription(phase)}"\n  labels      = { team = "data" }\n}\n\n`;
    out += `resource "dataplatform_notification_channel" "support_${p}" {\n  project_id = dataplatform_project.${p}.id\n  name       = "support"\n  type       = "email"\n  config     = { email_addresses = ["support@example.com"] }\n}\n\n`;
  }
  for (const d of kinds) {
    const { fields, project } = fieldsAt(d, phase);
    const lines = d.scope === 'project' ? [`  project_id = dataplatform_project.${project}.id`] : [];
    for (const [k, v] of Object.entries(fields)) lines.push(`  ${tfName(d, k)} = ${hcl(v, project)}`);
    out += `resource "dataplatform_${d.kind}" "sample" {\n${lines.join('\n')}\n}\n\n`;
  }
  return out;
}

describe.skipIf(testStore() === 'postgres' || !haveTerraform)('acceptance lifecycle of every writable kind (real terraform)', () => {
  let svc: TestService;
  let t: TestTenant;
  let ws: TerraformWorkspace;
  const projects: Record<'a' | 'b', string> = { a: '', b: '' };
  /** Each sample's id on the service after the last step. */
  const ids = new Map<string, string>();
  let phase: Phase = 'create';

  const api = <T = any>(method: string, path: string, body?: unknown, expectedStatus?: number) =>
    svc.ok<T>(t, method, path, body === undefined ? {} : { body }, expectedStatus);
  const collection = (d: KindDescriptor, project: 'a' | 'b') =>
    d.scope === 'project' ? `/projects/${projects[project]}/${d.collection}` : `/${d.collection}`;

  /** The sample as the API holds it now, found by its identity (as the phase configures it). */
  async function live(d: KindDescriptor): Promise<any> {
    const { fields, project } = fieldsAt(d, phase);
    const identity = String(fields[d.identity]).toLowerCase();
    const items: any[] = [];
    for (let cursor: string | undefined, page; !page || page.has_more; cursor = page.next_cursor) {
      page = await api<{ data: any[]; has_more: boolean; next_cursor?: string }>(
        'GET',
        `${collection(d, project)}?limit=100${cursor ? `&cursor=${cursor}` : ''}`,
      );
      items.push(...page.data);
    }
    return items.find((i) => String(i[d.identity]).toLowerCase() === identity);
  }

  /** Every sample (and both projects) is on the service as configured; returns the sample kinds whose ids changed since the last check. */
  async function expectConfigured(): Promise<string[]> {
    for (const p of ['a', 'b'] as const) {
      const project = await api('GET', `/projects/${projects[p]}`);
      expect(project, `project acc-${p}`).toMatchObject({ name: `acc-${p}`, description: projectDescription(phase) });
      expect(project.labels, `project acc-${p}`).toEqual({ team: 'data' });
    }
    const changed: string[] = [];
    for (const d of kinds) {
      const found = await live(d);
      expect(found, `${d.kind} "${fieldsAt(d, phase).fields[d.identity]}" is not on the service`).toBeTruthy();
      expect(found, d.kind).toMatchObject(expected(d, fieldsAt(d, phase).fields));
      if (ids.get(d.kind) !== found.id) changed.push(d.kind);
      ids.set(d.kind, found.id);
    }
    return changed;
  }

  /** Terraform's output, checked for secret values. */
  function noSecrets(out: string): string {
    for (const secret of SECRETS) expect(out, 'a secret value in the output of terraform').not.toContain(secret);
    return out;
  }
  const apply = async (extra: string[] = []) => noSecrets(await ws.apply(extra));
  const plan = async () => {
    const res = await ws.plan();
    noSecrets(res.out);
    return res;
  };

  async function expectEmptyPlan() {
    const res = await plan();
    expect(res.code, res.out).toBe(0);
  }

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    ws = await TerraformWorkspace.create(svc, t);
    ws.write('main.tf', config('create'));
    await ws.init();
  }, 60_000);

  afterAll(async () => {
    await svc?.close();
    ws?.close();
  });

  it('has a sample (or a reasoned skip) for every writable kind, and samples that test what they claim', () => {
    const missing = specs.map((s) => s.descriptor.kind).filter((k) => !SAMPLES[k] && !SKIP[k]);
    expect(
      missing,
      `writable kinds without an acceptance sample in ${import.meta.filename}: add a SAMPLES entry (or a SKIP entry with the reason)`,
    ).toEqual([]);
    for (const d of kinds) {
      const s = SAMPLES[d.kind];
      if (s.replace) expect(forcing(d), `${d.kind}: replace changes no x-immutable field`).not.toEqual([]);
      for (const field of Object.keys(s.update ?? {}))
        expect(d.immutableFields, `${d.kind}.${field} in update is x-immutable`).not.toContain(field);
      expect(!!s.update, `${d.kind}: update given iff the API can update it`).toBe(d.operations.includes('update'));
      if (!s.replace) expect(d.scope, `${d.kind} has no replace sample and is not project-scoped (cannot move)`).toBe('project');
    }
  });

  it('creates every kind, then plans nothing', { timeout: 90_000 }, async () => {
    const out = await apply();
    expect(out).toContain(`Apply complete! Resources: ${kinds.length + 4} added, 0 changed, 0 destroyed.`);
    for (const p of ['a', 'b'] as const)
      projects[p] = (await api<{ data: any[] }>('GET', '/projects')).data.find((x) => x.name === `acc-${p}`).id;
    expect(await expectConfigured()).toEqual(kinds.map((d) => d.kind));
    await expectEmptyPlan();
  });

  it('updates in place', { timeout: 90_000 }, async () => {
    phase = 'update';
    ws.write('main.tf', config('update'));
    const updatable = kinds.filter((d) => SAMPLES[d.kind].update);
    const out = await apply();
    for (const d of updatable) expect(out).toContain(`dataplatform_${d.kind}.sample will be updated in-place`);
    for (const p of ['a', 'b']) expect(out).toContain(`dataplatform_project.${p} will be updated in-place`);
    expect(out).toContain(`Resources: 0 added, ${updatable.length + 2} changed, 0 destroyed.`);
    // The projects are checked by their ids, so theirs are kept too.
    expect(await expectConfigured(), 'ids kept').toEqual([]);
    await expectEmptyPlan();
  });

  it('replaces on an immutable change (a moved project counts)', { timeout: 90_000 }, async () => {
    phase = 'replace';
    ws.write('main.tf', config('replace'));
    const before = new Map(ids);
    const out = await apply();
    for (const d of kinds) {
      expect(out).toContain(`dataplatform_${d.kind}.sample must be replaced`);
      const forced = SAMPLES[d.kind].replace ? forcing(d) : ['project_id'];
      for (const field of forced) expect(out).toMatch(new RegExp(`${tfName(d, field)}\\s+= .* # forces replacement`));
    }
    expect(out).toContain(`Resources: ${kinds.length} added, 0 changed, ${kinds.length} destroyed.`);
    expect((await expectConfigured()).sort()).toEqual(kinds.map((d) => d.kind).sort());
    // The replaced objects are gone from the service.
    for (const d of kinds) {
      const old = fieldsAt(d, 'update');
      const res = await svc.call(t, 'GET', `${collection(d, old.project)}/${before.get(d.kind)}`);
      expect(res.status, `${d.kind} ${before.get(d.kind)} still exists`).toBe(404);
    }
    await expectEmptyPlan();
  });

  /**
   * Forgets every sample and both projects and imports them again with `import` blocks: by
   * `<project_id>/<id>` (tenant-level kinds and projects by id) or by `<project_id>/<name>`
   * (tenant-level kinds and projects by identity). Secrets cannot be read back, so the same apply
   * sets them again on the samples whose config has one (an in-place update).
   */
  async function reimport(by: 'id' | 'name') {
    await ws.tf(['state', 'rm', 'dataplatform_project.a', 'dataplatform_project.b', ...kinds.map((d) => `dataplatform_${d.kind}.sample`)]);
    const block = (to: string, id: string) => `import {\n  to = ${to}\n  id = "${id}"\n}\n`;
    const blocks = (['a', 'b'] as const).map((p) => block(`dataplatform_project.${p}`, by === 'id' ? projects[p] : `acc-${p}`));
    for (const d of kinds) {
      const { fields, project } = fieldsAt(d, phase);
      const ref = by === 'id' ? ids.get(d.kind)! : String(fields[d.identity]);
      blocks.push(block(`dataplatform_${d.kind}.sample`, d.scope === 'project' ? `${projects[project]}/${ref}` : ref));
    }
    ws.write('imports.tf', blocks.join('\n'));
    const withSecrets = kinds.filter((d) => secretsIn(d, fieldsAt(d, phase).fields).length);
    expect(
      withSecrets.map((d) => d.kind),
      'the connector password is set again',
    ).toContain('connector');
    const out = await apply();
    for (const d of kinds) expect(out).toContain(`dataplatform_${d.kind}.sample: Import complete`);
    for (const p of ['a', 'b']) expect(out).toContain(`dataplatform_project.${p}: Import complete`);
    for (const d of withSecrets) expect(out).toContain(`dataplatform_${d.kind}.sample will be updated in-place`);
    expect(out).toContain(`Resources: ${kinds.length + 2} imported, 0 added, ${withSecrets.length} changed, 0 destroyed.`);
    ws.remove('imports.tf');
    expect(await expectConfigured(), 'import adopted the same objects').toEqual([]);
    await expectEmptyPlan();
  }

  it('imports by <project_id>/<id> (tenant kinds and projects by id), then plans nothing', { timeout: 90_000 }, async () => {
    await reimport('id');
  });

  it('imports by <project_id>/<name> (tenant kinds and projects by identity), then plans nothing', { timeout: 90_000 }, async () => {
    await reimport('name');
  });

  it('shows drift made through the API in the plan, and apply restores it', { timeout: 90_000 }, async () => {
    const drifted = kinds.filter((d) => d.operations.includes('update'));
    for (const d of drifted) {
      const patch = SAMPLES[d.kind].drift ?? { labels: { changed: 'outside' } };
      await api('PATCH', `${collection(d, fieldsAt(d, phase).project)}/${ids.get(d.kind)}`, patch, 200);
    }
    await api('PATCH', `/projects/${projects.a}`, { description: 'changed outside', labels: { team: 'data', changed: 'outside' } }, 200);
    const drift = await plan();
    expect(drift.code).toBe(2);
    for (const d of drifted) expect(drift.out).toContain(`dataplatform_${d.kind}.sample will be updated in-place`);
    expect(drift.out).toContain('dataplatform_project.a will be updated in-place');
    expect(drift.out).toMatch(new RegExp(`description\\s+= "changed outside" -> "${projectDescription(phase)}"`));
    expect(drift.out).toContain(`Plan: 0 to add, ${drifted.length + 1} to change, 0 to destroy.`);
    await apply();
    expect(await expectConfigured()).toEqual([]);
    for (const d of drifted) expect((await live(d)).labels ?? {}).not.toHaveProperty('changed');
    await expectEmptyPlan();
  });

  it('recreates what was deleted outside Terraform (a project too)', { timeout: 90_000 }, async () => {
    for (const d of deleteOrder) await api('DELETE', `${collection(d, fieldsAt(d, phase).project)}/${ids.get(d.kind)}`, undefined, 204);
    // Then the second project, with what is left in it (its support channel: the delete cascades).
    const oldB = projects.b;
    await api('DELETE', `/projects/${oldB}`, undefined, 204);
    const out = await apply();
    for (const d of kinds) expect(out).toContain(`dataplatform_${d.kind}.sample will be created`);
    expect(out).toContain('dataplatform_project.b will be created');
    expect(out).toContain('dataplatform_notification_channel.support_b will be created');
    expect(out).toContain(`Resources: ${kinds.length + 2} added, 0 changed, 0 destroyed.`);
    projects.b = (await api<{ data: any[] }>('GET', '/projects')).data.find((x) => x.name === 'acc-b').id;
    expect(projects.b, 'acc-b is a new project').not.toBe(oldB);
    expect((await svc.call(t, 'GET', `/projects/${oldB}`)).status).toBe(404);
    expect((await expectConfigured()).sort()).toEqual(kinds.map((d) => d.kind).sort());
    await expectEmptyPlan();
  });

  it('destroys everything and leaves nothing on the service', { timeout: 90_000 }, async () => {
    // Everything but the projects first (a project's delete cascades), so that each object is
    // seen gone through the API while its project still exists.
    const targets = [
      ...kinds.map((d) => `dataplatform_${d.kind}.sample`),
      'dataplatform_notification_channel.support_a',
      'dataplatform_notification_channel.support_b',
    ];
    const out = noSecrets((await ws.tf(['destroy', '-auto-approve', '-input=false', ...targets.map((x) => `-target=${x}`)])).out);
    expect(out).toContain(`Destroy complete! Resources: ${kinds.length + 2} destroyed.`);
    for (const d of kinds) {
      const res = await svc.call(t, 'GET', `${collection(d, fieldsAt(d, phase).project)}/${ids.get(d.kind)}`);
      expect(res.status, `${d.kind} ${ids.get(d.kind)} still exists`).toBe(404);
      if (d.scope === 'tenant') expect(await live(d), d.kind).toBeUndefined();
    }
    // Nothing of any sampled kind is left in either project (the support channels included).
    for (const p of ['a', 'b'] as const) {
      for (const d of kinds.filter((k) => k.scope === 'project')) {
        expect((await api<{ data: any[] }>('GET', collection(d, p))).data, `${d.kind} left in acc-${p}`).toEqual([]);
      }
    }
    const rest = (await ws.tf(['destroy', '-auto-approve', '-input=false'])).out;
    expect(rest).toContain('Destroy complete! Resources: 2 destroyed.');
    for (const p of ['a', 'b'] as const) expect((await svc.call(t, 'GET', `/projects/${projects[p]}`)).status).toBe(404);
    expect((await ws.show()).values?.root_module?.resources ?? [], 'state empty').toEqual([]);
  });
});
