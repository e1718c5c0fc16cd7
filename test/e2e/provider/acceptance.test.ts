import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KindDescriptor } from '../../../src/kinds/index.js';
import { apiField, resourceSpecs } from '../../../src/provider/schema.js';
import { startTestService, testStore, type TestService, type TestTenant } from '../../support/service.js';
import { haveTerraform, PROVIDER_BLOCK, TerraformWorkspace } from './harness.js';

/**
 * The acceptance lifecycle for every writable kind, table-driven from the descriptors, under
 * the real `terraform`: create; plan after apply is empty; update in place; replace on an
 * immutable change; import then plan is empty; drift made through the API shows in the plan
 * and apply restores it; deleted outside Terraform is recreated; destroy leaves nothing.
 * All kinds go through each step together in one configuration (a Terraform run costs seconds).
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
  /** x-immutable fields changed; omitted, a project-scoped sample moves to the second project instead. */
  replace?: Fields;
  /** A PATCH made through the API behind Terraform's back; default: a changed label. */
  drift?: Record<string, unknown>;
}

const channel = new Ref((p) => `dataplatform_notification_channel.support_${p}.id`);
const sampleOf = (kind: string) => new Ref(() => `dataplatform_${kind}.sample.id`);

/** Sample values per kind. A writable kind with neither a sample nor a SKIP entry fails the first test. */
const SAMPLES: Record<string, Sample> = {
  infrastructure_resource: {
    create: { name: 'acc-warehouse', resource_type: 'warehouse', provider: 'snowflake', region: 'eu-west-1', config: { size: 'small' }, labels: { team: 'data' } },
    update: { config: { size: 'large' } },
    replace: { region: 'eu-central-1' },
  },
  dbt_project: {
    create: {
      name: 'acc-dbt',
      repository: 'https://git.example.com/acc/marts.git',
      models: [{ name: 'stg_orders', materialization: 'view' }, { name: 'fct_orders', materialization: 'table', depends_on: ['stg_orders'] }],
    },
    update: { branch: 'develop', target: 'dev' },
  },
  pipeline: {
    create: { name: 'acc-pipeline', schedule: '0 3 * * *', steps: [{ name: 'notify', type: 'notification', channel_id: channel }] },
    update: { description: 'paused for the migration', enabled: false },
  },
  escalation_policy: {
    create: { name: 'acc-escalation', steps: [{ delay_minutes: 0, channel_ids: [channel] }, { delay_minutes: 15, channel_ids: [channel] }] },
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
};

/** Kinds this file leaves out, and why. */
const SKIP: Record<string, string> = {
  project: 'full lifecycle in terraform.test.ts (and every sample here lives in one)',
  connector: 'full lifecycle in terraform.test.ts, with its secret and write-only password',
  notification_channel: 'full lifecycle in terraform.test.ts (and the support channels here)',
  alert_rule: 'full lifecycle in terraform.test.ts',
};

const specs = [...resourceSpecs().values()];
/** The attribute standing for an API field (fields named like a meta-argument are renamed, e.g. provider). */
const tfName = (d: KindDescriptor, field: string) => specs.find((s) => s.descriptor === d)!.attrs.find((a) => apiField(a) === field)!.name;
const kinds = specs.map((s) => s.descriptor).filter((d) => SAMPLES[d.kind]);
/** Referrers before what they refer to (masking policies before classifications), for deleting. */
const referenced = (d: KindDescriptor) => kinds.some((k) => k.references.some((r) => r.kind === d.kind));
const deleteOrder = [...kinds].sort((x, y) => Number(referenced(x)) - Number(referenced(y)));

function hcl(v: Value, project: 'a' | 'b'): string {
  if (v instanceof Ref) return v.expr(project);
  if (typeof v === 'string') return JSON.stringify(v).replace(/\$\{/g, '$${').replace(/%\{/g, '%%{');
  if (typeof v !== 'object') return String(v);
  if (Array.isArray(v)) return `[${v.map((x) => hcl(x, project)).join(', ')}]`;
  return `{ ${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)} = ${hcl(x, project)}`).join(', ')} }`;
}

/** The fields as the API should hold them: references left out (their ids are checked by Terraform's plan). */
function expected(fields: Fields): Record<string, unknown> {
  const strip = (v: Value): unknown => (v instanceof Ref ? undefined : Array.isArray(v) ? v.map(strip) : typeof v === 'object' ? expected(v as Fields) : v);
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    const x = strip(v);
    if (x !== undefined && !(Array.isArray(x) && x.some((i) => i === undefined))) out[k] = x;
  }
  return out;
}

type Phase = 'create' | 'update' | 'replace';

/** A sample's fields and project at a phase (each phase builds on the one before). */
function fieldsAt(d: KindDescriptor, phase: Phase): { fields: Fields; project: 'a' | 'b' } {
  const s = SAMPLES[d.kind];
  const fields = { ...s.create, ...(phase !== 'create' ? (s.update ?? {}) : {}), ...(phase === 'replace' ? (s.replace ?? {}) : {}) };
  const project = phase === 'replace' && !s.replace && d.scope === 'project' ? 'b' : 'a';
  return { fields, project };
}

function config(phase: Phase): string {
  let out = `${PROVIDER_BLOCK}\n`;
  for (const p of ['a', 'b'] as const) {
    out += `resource "dataplatform_project" "${p}" {\n  name = "acc-${p}"\n}\n\n`;
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

  const api = <T = any>(method: string, path: string, body?: unknown, expectedStatus?: number) => svc.ok<T>(t, method, path, body === undefined ? {} : { body }, expectedStatus);
  const collection = (d: KindDescriptor, project: 'a' | 'b') => (d.scope === 'project' ? `/projects/${projects[project]}/${d.collection}` : `/${d.collection}`);

  /** The sample as the API holds it now, found by its identity (as the phase configures it). */
  async function live(d: KindDescriptor): Promise<any> {
    const { fields, project } = fieldsAt(d, phase);
    const identity = String(fields[d.identity]).toLowerCase();
    const items: any[] = [];
    for (let cursor: string | undefined, page; !page || page.has_more; cursor = page.next_cursor) {
      page = await api<{ data: any[]; has_more: boolean; next_cursor?: string }>('GET', `${collection(d, project)}?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
      items.push(...page.data);
    }
    return items.find((i) => String(i[d.identity]).toLowerCase() === identity);
  }

  /** Every sample is on the service as configured; returns the ids that changed since the last check. */
  async function expectConfigured(): Promise<string[]> {
    const changed: string[] = [];
    for (const d of kinds) {
      const found = await live(d);
      expect(found, `${d.kind} "${fieldsAt(d, phase).fields[d.identity]}" is not on the service`).toBeTruthy();
      expect(found, d.kind).toMatchObject(expected(fieldsAt(d, phase).fields));
      if (ids.get(d.kind) !== found.id) changed.push(d.kind);
      ids.set(d.kind, found.id);
    }
    return changed;
  }

  async function expectEmptyPlan() {
    const plan = await ws.plan();
    expect(plan.code, plan.out).toBe(0);
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
    expect(missing, `writable kinds without an acceptance sample in ${import.meta.filename}: add a SAMPLES entry (or a SKIP entry with the reason)`).toEqual([]);
    for (const d of kinds) {
      const s = SAMPLES[d.kind];
      for (const field of Object.keys(s.replace ?? {})) expect(d.immutableFields, `${d.kind}.${field} in replace is not x-immutable`).toContain(field);
      for (const field of Object.keys(s.update ?? {})) expect(d.immutableFields, `${d.kind}.${field} in update is x-immutable`).not.toContain(field);
      expect(!!s.update, `${d.kind}: update given iff the API can update it`).toBe(d.operations.includes('update'));
      if (!s.replace) expect(d.scope, `${d.kind} has no replace sample and is not project-scoped (cannot move)`).toBe('project');
    }
  });

  it('creates every kind, then plans nothing', { timeout: 90_000 }, async () => {
    const out = await ws.apply();
    expect(out).toContain(`Apply complete! Resources: ${kinds.length + 4} added, 0 changed, 0 destroyed.`);
    for (const p of ['a', 'b'] as const) projects[p] = (await api<{ data: any[] }>('GET', '/projects')).data.find((x) => x.name === `acc-${p}`).id;
    expect(await expectConfigured()).toEqual(kinds.map((d) => d.kind));
    await expectEmptyPlan();
  });

  it('updates in place', { timeout: 90_000 }, async () => {
    phase = 'update';
    ws.write('main.tf', config('update'));
    const updatable = kinds.filter((d) => SAMPLES[d.kind].update);
    const out = await ws.apply();
    for (const d of updatable) expect(out).toContain(`dataplatform_${d.kind}.sample will be updated in-place`);
    expect(out).toContain(`Resources: 0 added, ${updatable.length} changed, 0 destroyed.`);
    expect(await expectConfigured(), 'ids kept').toEqual([]);
    await expectEmptyPlan();
  });

  it('replaces on an immutable change (a moved project counts)', { timeout: 90_000 }, async () => {
    phase = 'replace';
    ws.write('main.tf', config('replace'));
    const before = new Map(ids);
    const out = await ws.apply();
    for (const d of kinds) {
      expect(out).toContain(`dataplatform_${d.kind}.sample must be replaced`);
      const forced = SAMPLES[d.kind].replace ? Object.keys(SAMPLES[d.kind].replace!) : ['project_id'];
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

  it('imports by <project_id>/<name> (tenant kinds by identity), then plans nothing', { timeout: 90_000 }, async () => {
    await ws.tf(['state', 'rm', ...kinds.map((d) => `dataplatform_${d.kind}.sample`)]);
    const blocks = kinds.map((d) => {
      const { fields, project } = fieldsAt(d, phase);
      const id = d.scope === 'project' ? `${projects[project]}/${fields[d.identity]}` : String(fields[d.identity]);
      return `import {\n  to = dataplatform_${d.kind}.sample\n  id = "${id}"\n}\n`;
    });
    ws.write('imports.tf', blocks.join('\n'));
    const out = await ws.apply();
    expect(out).toContain(`Resources: ${kinds.length} imported, 0 added, 0 changed, 0 destroyed.`);
    ws.remove('imports.tf');
    expect(await expectConfigured(), 'import adopted the same objects').toEqual([]);
    await expectEmptyPlan();
  });

  it('shows drift made through the API in the plan, and apply restores it', { timeout: 90_000 }, async () => {
    const drifted = kinds.filter((d) => d.operations.includes('update'));
    for (const d of drifted) {
      const patch = SAMPLES[d.kind].drift ?? { labels: { changed: 'outside' } };
      await api('PATCH', `${collection(d, fieldsAt(d, phase).project)}/${ids.get(d.kind)}`, patch, 200);
    }
    const plan = await ws.plan();
    expect(plan.code).toBe(2);
    for (const d of drifted) expect(plan.out).toContain(`dataplatform_${d.kind}.sample will be updated in-place`);
    expect(plan.out).toContain(`Plan: 0 to add, ${drifted.length} to change, 0 to destroy.`);
    await ws.apply();
    expect(await expectConfigured()).toEqual([]);
    for (const d of drifted) expect((await live(d)).labels ?? {}).not.toHaveProperty('changed');
    await expectEmptyPlan();
  });

  it('recreates what was deleted outside Terraform', { timeout: 90_000 }, async () => {
    for (const d of deleteOrder) await api('DELETE', `${collection(d, fieldsAt(d, phase).project)}/${ids.get(d.kind)}`, undefined, 204);
    const out = await ws.apply();
    for (const d of kinds) expect(out).toContain(`dataplatform_${d.kind}.sample will be created`);
    expect(out).toContain(`Resources: ${kinds.length} added, 0 changed, 0 destroyed.`);
    expect((await expectConfigured()).sort()).toEqual(kinds.map((d) => d.kind).sort());
    await expectEmptyPlan();
  });

  it('destroys everything and leaves nothing on the service', { timeout: 90_000 }, async () => {
    const out = (await ws.tf(['destroy', '-auto-approve', '-input=false'])).out;
    expect(out).toContain(`Destroy complete! Resources: ${kinds.length + 4} destroyed.`);
    for (const d of kinds.filter((k) => k.scope === 'tenant')) expect(await live(d), d.kind).toBeUndefined();
    for (const p of ['a', 'b'] as const) expect((await svc.call(t, 'GET', `/projects/${projects[p]}`)).status).toBe(404);
  });
});
