import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { AmbiguousCreateError, DataPlatformClient, type DynamicResourceClient } from '../../../src/client/index.js';
import {
  detectDrift,
  MANAGED_BY_LABEL,
  planJson,
  preparePlan,
  reconcile,
  renderPlan,
  renderPlanMarkdown,
  SECRETS_SHA_LABEL,
  type EngineOptions,
} from '../../../src/engine/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { clientFor, copyExample, edit, SECRET_ENV } from './helpers.js';

let svc: TestService;
beforeAll(async () => {
  svc = await startTestService();
});
afterAll(async () => {
  await svc?.close();
});

const opts = (extra: Partial<EngineOptions> = {}): EngineOptions => ({ sourceId: 'platform', env: SECRET_ENV, ...extra });
const active = <T extends { action: string }>(plan: { changes: T[] }): T[] => plan.changes.filter((c) => c.action !== 'no-op');

async function projectId(client: DataPlatformClient, name: string) {
  return (await client.projects.findByName(name))!.id;
}

describe('reconciler engine on examples/platform', () => {
  let t: TestTenant;
  let client: DataPlatformClient;
  const dir = copyExample();

  beforeAll(async () => {
    t = await svc.tenant();
    client = clientFor(svc, t);
  });
  afterAll(async () => {
    await client.close();
  });

  test('apply creates everything, with ownership labels, observing with list calls only', async () => {
    const r = await reconcile(client, [dir], opts());
    expect(r.plan.errors).toEqual([]);
    expect(r.plan.summary.create).toBe(25);
    expect(r.result!.converged).toBe(true);
    const analytics = await projectId(client, 'analytics');
    const connectors = await client.resources('connector', { projectId: analytics }).listAll();
    expect(connectors.map((c) => c.name).sort()).toEqual(['billing-db', 'orders-db']);
    const orders = connectors.find((c) => c.name === 'orders-db')!;
    expect(orders.labels).toMatchObject({ tier: 'critical', [MANAGED_BY_LABEL]: 'platform' });
    expect(orders.labels![SECRETS_SHA_LABEL]).toMatch(/^[0-9a-f]{16}$/);
    expect(orders.schedule).toBe('0 * * * *');
    const users = await client.users.listAll();
    expect(users.map((u) => u.email)).toEqual(expect.arrayContaining(['dana.analyst@example.com', 'ops-bot@example.com']));
    // Observation used list calls only: no GET of a single resource.
    client.resetStats();
    await preparePlan(client, [dir], opts({ prune: true, allKinds: true }));
    const gets = Object.keys(client.stats().byEndpoint).filter((e) => e.startsWith('GET '));
    expect(gets.every((e) => !e.endsWith('{resourceId}'))).toBe(true);
  });

  test('a second plan has zero changes', async () => {
    const { plan } = await preparePlan(client, [dir], opts({ prune: true }));
    expect(active(plan)).toEqual([]);
    expect(plan.summary['no-op']).toBe(25);
    expect(plan.managedCount).toBe(23); // users have no labels
  });

  test('an edited copy plans exactly those updates, and apply converges', async () => {
    edit(dir, 'analytics/sources.yaml', '    - public.customers\n', '    - public.customers\n    - public.refunds\n');
    edit(dir, 'analytics/transform.yaml', 'schedule: "0 2 * * *"', 'schedule: "30  3 * * *"');
    const { plan } = await preparePlan(client, [dir], opts());
    const changes = active(plan);
    expect(changes.map((c) => [c.action, c.name, c.changes.map((f) => f.field)])).toEqual([
      ['update', 'orders-db', ['selected_tables']],
      ['update', 'nightly-revenue', ['schedule']],
    ]);
    expect(changes[1].changes[0]).toMatchObject({ before: '0 2 * * *', after: '30 3 * * *' });
    const r = await reconcile(client, [dir], opts());
    expect(r.result!.converged).toBe(true);
    expect(active((await preparePlan(client, [dir], opts())).plan)).toEqual([]);
  });

  test('a field removed from the config is cleared on resources this source owns', async () => {
    edit(dir, 'analytics/transform.yaml', 'schedule: "30  3 * * *"', '');
    const { plan } = await preparePlan(client, [dir], opts());
    const changes = active(plan);
    expect(changes.map((c) => [c.action, c.name, c.changes.map((f) => f.field)])).toEqual([['update', 'nightly-revenue', ['schedule']]]);
    expect(changes[0].changes[0]).toMatchObject({ before: '30 3 * * *', after: null });
    expect((await reconcile(client, [dir], opts())).result!.converged).toBe(true);
    const analytics = await projectId(client, 'analytics');
    const nightly = (await client.resources('pipeline', { projectId: analytics }).findByName('nightly-revenue'))!;
    expect(nightly).not.toHaveProperty('schedule');
    expect(active((await preparePlan(client, [dir], opts())).plan)).toEqual([]);
  });

  test('drift by hand is reported, and apply corrects it', async () => {
    const analytics = await projectId(client, 'analytics');
    const pipelines = client.resources('pipeline', { projectId: analytics });
    const nightly = (await pipelines.findByName('nightly-revenue'))!;
    await pipelines.update(nightly.id, { description: 'changed by hand' });
    const rules = client.resources('alert_rule', { projectId: analytics });
    await rules.delete((await rules.findByName('orders-stale'))!.id);
    await client.resources('connector', { projectId: analytics }).create({ name: 'hand-made', connector_type: 'mysql' });

    const { drift } = await detectDrift(client, [dir], opts());
    expect(drift.map((e) => [e.type, e.name]).sort()).toEqual([
      ['changed', 'nightly-revenue'],
      ['deleted', 'orders-stale'],
      ['unmanaged', 'hand-made'],
    ]);
    expect(drift.find((e) => e.type === 'changed')!.changes).toEqual([
      { field: 'description', before: 'changed by hand', after: 'Sync the sources, rebuild the models, tell the team.' },
    ]);

    const r = await reconcile(client, [dir], opts());
    expect(r.result!.converged).toBe(true);
    const after = await detectDrift(client, [dir], opts());
    expect(after.drift.map((e) => [e.type, e.name])).toEqual([['unmanaged', 'hand-made']]);
  });

  test('a changed secret (another env value) is an update shown as (sensitive)', async () => {
    const env = { ...SECRET_ENV, ORDERS_DB_PASSWORD: 'orders-pw-2' };
    const { plan } = await preparePlan(client, [dir], opts({ env }));
    const changes = active(plan);
    expect(changes.map((c) => c.name)).toEqual(['orders-db']);
    expect(changes[0].changes).toEqual([{ field: 'credentials.password', before: '(sensitive)', after: '(sensitive)', sensitive: true }]);
    expect(JSON.stringify(plan.changes.map((c) => c.changes))).not.toContain('orders-pw');
    expect((await reconcile(client, [dir], opts({ env }))).result!.converged).toBe(true);
    expect(active((await preparePlan(client, [dir], opts({ env }))).plan)).toEqual([]);
    // Back to the first value: an update again.
    const back = await reconcile(client, [dir], opts());
    expect(active(back.plan).map((c) => c.name)).toEqual(['orders-db']);
  });

  test('an immutable change replaces the resource and what depends on it', async () => {
    edit(dir, 'analytics/sources.yaml', 'connector_type: mysql', 'connector_type: sqlserver');
    const analytics = await projectId(client, 'analytics');
    const before = (await client.resources('connector', { projectId: analytics }).findByName('billing-db'))!;
    const { plan } = await preparePlan(client, [dir], opts());
    const replaced = Object.fromEntries(active(plan).map((c) => [c.name, c.action]));
    expect(replaced).toEqual({
      'billing-db': 'replace',
      'warehouse-models': 'replace',
      'nightly-revenue': 'replace',
      'revenue-pipeline-failed': 'replace',
    });
    expect(plan.changes.find((c) => c.name === 'billing-db')!.reasons[0]).toContain('connector_type');
    const r = await reconcile(client, [dir], opts());
    expect(r.result!.converged).toBe(true);
    const now = (await client.resources('connector', { projectId: analytics }).listAll()).filter((c) => c.name === 'billing-db');
    expect(now).toHaveLength(1);
    expect(now[0].id).not.toBe(before.id);
    expect(now[0].connector_type).toBe('sqlserver');
    expect(active((await preparePlan(client, [dir], opts())).plan)).toEqual([]);
  });

  test('--prune deletes a managed resource that left the config, never a hand-made one', async () => {
    edit(dir, 'marketing/marketing.yaml', /---\napiVersion: dataplatform\/v1\nkind: AlertRule[\s\S]*?growth-email\]\n/, '');
    const without = await preparePlan(client, [dir], opts());
    expect(active(without.plan)).toEqual([]); // without --prune nothing is deleted
    const { plan } = await preparePlan(client, [dir], opts({ prune: true }));
    expect(active(plan).map((c) => [c.action, c.project, c.name])).toEqual([['delete', 'marketing', 'crm-sync-failed']]);
    const r = await reconcile(client, [dir], opts({ prune: true }));
    expect(r.result!.converged).toBe(true);
    const analytics = await projectId(client, 'analytics');
    expect(await client.resources('connector', { projectId: analytics }).findByName('hand-made')).toBeDefined();
    const marketing = await projectId(client, 'marketing');
    expect(await client.resources('alert_rule', { projectId: marketing }).findByName('crm-sync-failed')).toBeUndefined();
    // Another source id owns nothing here: it would prune nothing, and refuses to touch our resources.
    const other = await preparePlan(client, [dir], opts({ prune: true, sourceId: 'someone-else' }));
    expect(other.plan.summary.delete).toBe(0);
    expect(other.plan.errors[0]).toMatchObject({
      code: 'ownership_conflict',
      message: expect.stringContaining('managed by another source "platform"'),
    });
  });

  test('the mass-delete guard refuses to prune more than max(5, 20%) of the managed resources', async () => {
    rmSync(join(dir, 'analytics'), { recursive: true });
    edit(dir, 'projects.yaml', /^[\s\S]*?---\n/, '');
    // Now only the marketing project, its resources and the users are declared.
    const { plan } = await preparePlan(client, [dir], opts({ prune: true }));
    // The analytics project holds the connector made by hand (the test before): it is kept, and its
    // managed resources are pruned one by one instead of going with it.
    const deletes = plan.changes.filter((c) => c.action === 'delete');
    expect(deletes.length).toBeGreaterThan(10);
    expect(deletes.every((c) => c.project === 'analytics' && c.kind !== 'project')).toBe(true);
    expect(plan.warnings).toContainEqual(
      expect.stringMatching(/^Project analytics is not pruned: it holds 1 resource this source does not manage \(Connector hand-made\)/),
    );
    expect(plan.errors).toEqual([
      { code: 'mass_delete', message: expect.stringMatching(/^refusing to delete 1[0-9] of 22 managed resources/) },
    ]);
    const refused = await reconcile(client, [dir], opts({ prune: true }));
    expect(refused.result).toBeUndefined();
    expect(await client.projects.findByName('analytics')).toBeDefined();
    const allowed = await preparePlan(client, [dir], opts({ prune: true, allowMassDelete: true }));
    expect(allowed.plan.errors).toEqual([]);
  });
});

/** A client whose creates of one named resource fail, or are applied and then reported as ambiguous. */
class FaultyClient extends DataPlatformClient {
  faults = new Map<string, 'fail' | 'ambiguous'>();
  override resourcesOf(kind: string, scope: { projectId?: string } = {}): DynamicResourceClient {
    const inner = super.resourcesOf(kind, scope);
    const faults = this.faults;
    return Object.assign(Object.create(inner) as DynamicResourceClient, {
      async create(body: Record<string, unknown>) {
        const fault = faults.get(String(body.name ?? body.email));
        if (fault === 'fail') throw new Error('injected failure');
        const created = await inner.create(body);
        if (fault === 'ambiguous') {
          faults.delete(String(body.name));
          throw new AmbiguousCreateError({
            method: 'POST',
            route: 'x',
            url: 'x',
            cause: new Error('socket hang up') as never,
            create: {
              kind,
              scope: inner.descriptor.scope,
              projectId: scope.projectId,
              identity: { field: 'name', value: String(body.name) },
            },
          });
        }
        return created;
      },
    });
  }
}

describe('secrets fingerprints (dpctl.dev/secrets-sha)', () => {
  let t: TestTenant;
  let client: DataPlatformClient;
  const dir = copyExample();
  const KEY = { DPCTL_FINGERPRINT_KEY: 'team-wide fingerprint key' };
  const labelOfOrders = async () =>
    (await client.resources('connector', { projectId: await projectId(client, 'analytics') }).listAll()).find(
      (c) => c.name === 'orders-db',
    )!.labels![SECRETS_SHA_LABEL];

  beforeAll(async () => {
    t = await svc.tenant();
    client = clientFor(svc, t);
  });
  afterAll(async () => {
    await client.close();
  });

  test('unkeyed: the plan shows no fingerprint value and warns once that whoever reads the resources can test guesses', async () => {
    const { plan } = await preparePlan(client, [dir], opts());
    const orders = plan.changes.find((c) => c.name === 'orders-db')!;
    expect(orders.changes.find((c) => c.field === 'labels')!.after).toMatchObject({ [SECRETS_SHA_LABEL]: '(sensitive)' });
    const shown = [JSON.stringify(planJson(plan)), renderPlan(plan, { colour: false, verbose: true }), renderPlanMarkdown(plan)].join('\n');
    expect(shown).toContain(SECRETS_SHA_LABEL);
    expect(shown).not.toMatch(/[0-9a-f]{16}/);
    expect(plan.warnings.filter((w) => w.includes('unkeyed fingerprint'))).toEqual([
      expect.stringMatching(/^\d+ resources get an unkeyed fingerprint of their secrets .*Set DPCTL_FINGERPRINT_KEY/),
    ]);
    expect((await reconcile(client, [dir], opts())).result!.converged).toBe(true);
    expect(await labelOfOrders()).toMatch(/^[0-9a-f]{16}$/);
  });

  test('with DPCTL_FINGERPRINT_KEY the fingerprints become keyed once; runs without the key compare nothing and change nothing', async () => {
    const keyed = opts({ env: { ...SECRET_ENV, ...KEY } });
    const rekey = await preparePlan(client, [dir], keyed);
    const orders = rekey.plan.changes.find((c) => c.name === 'orders-db')!;
    expect(orders.action).toBe('update');
    expect(orders.notes).toContain('the fingerprint becomes keyed (DPCTL_FINGERPRINT_KEY): the secrets are set again once');
    expect(rekey.plan.warnings.join('\n')).not.toContain('unkeyed');
    expect((await reconcile(client, [dir], keyed)).result!.converged).toBe(true);
    expect(await labelOfOrders()).toMatch(/^hmac:[0-9a-f]{32}$/);
    expect(active((await preparePlan(client, [dir], keyed)).plan)).toEqual([]);

    // Without the key: nothing to compare with, so nothing is planned, and it says why. Even
    // another secret value is not written, so a run without the key never undoes one with it.
    const changed = { ...SECRET_ENV, ORDERS_DB_PASSWORD: 'orders-pw-2' };
    const { plan } = await preparePlan(client, [dir], opts({ env: changed }));
    expect(active(plan)).toEqual([]);
    expect(plan.changes.find((c) => c.name === 'orders-db')!.notes).toContain(
      'secrets not compared: their fingerprint was written with DPCTL_FINGERPRINT_KEY, which this run does not have (set it to compare them)',
    );
    // With the key, the changed secret is an update.
    const withKey = await preparePlan(client, [dir], opts({ env: { ...changed, ...KEY } }));
    expect(active(withKey.plan).map((c) => c.name)).toEqual(['orders-db']);
    expect(active(withKey.plan)[0].changes).toEqual([
      { field: 'credentials.password', before: '(sensitive)', after: '(sensitive)', sensitive: true },
    ]);
  });
});

describe('dpctl.dev/secrets-version: secrets sent again on demand', () => {
  test('a secret changed by hand cannot be seen (write-only); a new secrets-version sends the configured values again, once', async () => {
    const t = await svc.tenant();
    const client = clientFor(svc, t);
    const dir = copyExample();
    expect((await reconcile(client, [dir], opts())).result!.converged).toBe(true);
    const connectors = client.resources('connector', { projectId: await projectId(client, 'analytics') });
    const orders = (await connectors.listAll()).find((c) => c.name === 'orders-db')!;
    // Changed on the platform by hand: the value is write-only, the fingerprint label is unchanged.
    await connectors.update(orders.id, { credentials: { username: 'replicator', password: 'changed-by-hand' } });
    expect(active((await preparePlan(client, [dir], opts())).plan)).toEqual([]);

    edit(
      dir,
      'analytics/sources.yaml',
      '  labels:\n    tier: critical\n',
      '  labels:\n    tier: critical\n  annotations:\n    dpctl.dev/secrets-version: "2"\n',
    );
    const { plan } = await preparePlan(client, [dir], opts());
    const change = active(plan).find((c) => c.name === 'orders-db')!;
    expect(active(plan).map((c) => c.name)).toEqual(['orders-db']);
    expect(change.changes).toContainEqual({ field: 'credentials.password', before: '(sensitive)', after: '(sensitive)', sensitive: true });
    expect(change.patchFields).toContain('credentials');
    expect(change.notes).toContain('a secret value or dpctl.dev/secrets-version changed (fingerprint differs)');
    expect((await reconcile(client, [dir], opts())).result!.converged).toBe(true);
    expect(active((await preparePlan(client, [dir], opts())).plan)).toEqual([]);
    await client.close();
  });
});

describe('failures and re-runs', () => {
  test('a failed create skips its dependents, the rest goes on, and a re-run converges with no duplicates', async () => {
    const t = await svc.tenant();
    const faulty = new FaultyClient({
      url: `https://${t.slug}.localhost:${svc.port}`,
      email: t.adminEmail,
      password: t.adminPassword,
      caFile: svc.service.tls.certPath,
    });
    const dir = copyExample();
    faulty.faults.set('orders-db', 'fail');
    faulty.faults.set('growth-email', 'ambiguous');
    const first = await reconcile(faulty, [dir], opts());
    const status = Object.fromEntries(first.result!.outcomes.map((o) => [`${o.change.project ?? ''}/${o.change.name}`, o.status]));
    expect(first.result!.converged).toBe(false);
    expect(status['analytics/orders-db']).toBe('failed');
    for (const dependent of [
      'analytics/warehouse-models',
      'analytics/nightly-revenue',
      'analytics/orders-stale',
      'analytics/revenue-pipeline-failed',
    ])
      expect(status[dependent]).toBe('skipped');
    expect(status['analytics/billing-db']).toBe('done');
    expect(status['marketing/growth-email']).toBe('done'); // found by name after the ambiguous create
    expect(status['marketing/crm-sync']).toBe('done');

    faulty.faults.clear();
    const second = await reconcile(faulty, [dir], opts());
    expect(second.result!.converged).toBe(true);
    expect(second.plan.summary.create).toBe(5);
    for (const project of ['analytics', 'marketing']) {
      const id = await projectId(faulty, project);
      for (const kind of ['connector', 'notification_channel', 'pipeline', 'alert_rule'] as const) {
        const names = (await faulty.resourcesOf(kind, { projectId: id }).listAll()).map((r) => r.name);
        expect(new Set(names).size).toBe(names.length);
      }
    }
    expect(active((await preparePlan(faulty, [dir], opts())).plan)).toEqual([]);
    await faulty.close();
  });
});

describe('operations the service lacks', () => {
  test('with --strict-spec, an alert rule cannot be updated: the plan says so and apply reports it', async () => {
    const strict = await startTestService({ strictSpec: true });
    try {
      const t = await strict.tenant();
      const client = clientFor(strict, t);
      const dir = copyExample();
      expect((await reconcile(client, [dir], opts())).result!.converged).toBe(true);
      edit(dir, 'marketing/marketing.yaml', 'severity: warning', 'severity: critical');
      const spec = await preparePlan(client, [dir], opts({ specOperations: true }));
      const change = active(spec.plan)[0];
      expect(change).toMatchObject({ action: 'update', name: 'crm-sync-failed', unsupported: 'the service has no update for alert_rule' });
      // Without knowing, the apply meets the 404 and reports it per resource.
      const r = await reconcile(client, [dir], opts());
      expect(r.result!.converged).toBe(false);
      expect(r.result!.outcomes.map((o) => [o.change.name, o.status])).toEqual([['crm-sync-failed', 'unsupported']]);
      await client.close();
    } finally {
      await strict.close();
    }
  });

  test('with --strict-spec, an alert rule cannot be deleted: prune plans it as unsupported, apply reports it and still does the other delete', async () => {
    const strict = await startTestService({ strictSpec: true });
    try {
      const t = await strict.tenant();
      const client = clientFor(strict, t);
      const dir = copyExample();
      expect((await reconcile(client, [dir], opts())).result!.converged).toBe(true);
      // Drop the alert rule (no delete in the spec) and the warehouse (deletable) from the config.
      const drop = (file: string, kind: string) => {
        const path = join(dir, file);
        writeFileSync(
          path,
          readFileSync(path, 'utf8')
            .split(/^---\n/m)
            .filter((d) => !new RegExp(`^kind: ${kind}$`, 'm').test(d))
            .join('---\n'),
        );
      };
      drop('marketing/marketing.yaml', 'AlertRule');
      drop('analytics/sources.yaml', 'InfrastructureResource');
      const spec = await preparePlan(client, [dir], opts({ specOperations: true, prune: true }));
      expect(
        active(spec.plan)
          .map((c) => [c.action, c.name, c.unsupported ?? null])
          .sort(),
      ).toEqual([
        ['delete', 'analytics-warehouse', null],
        ['delete', 'crm-sync-failed', 'the service has no delete for alert_rule'],
      ]);
      // Without knowing, the apply meets the missing route and reports that one resource; the other delete is done.
      const r = await reconcile(client, [dir], opts({ prune: true }));
      expect(r.result!.converged).toBe(false);
      expect(r.result!.outcomes.map((o) => [o.change.name, o.status]).sort()).toEqual([
        ['analytics-warehouse', 'done'],
        ['crm-sync-failed', 'unsupported'],
      ]);
      const byName = new Map((await client.projects.listAll()).map((p) => [p.name, p.id]));
      expect((await client.resources('alert_rule', { projectId: byName.get('marketing')! }).listAll()).map((a) => a.name)).toEqual([
        'crm-sync-failed',
      ]);
      expect(await client.resources('infrastructure_resource', { projectId: byName.get('analytics')! }).listAll()).toEqual([]);
      await client.close();
    } finally {
      await strict.close();
    }
  });
});
