import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kind } from '../../../src/kinds/index.js';
import { createAjv } from '../../../src/kinds/validator.js';
import { newId } from '../../../src/service/ids.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { connectorBody, createDeps, expectError, expectValidation, type Deps } from './fixtures.js';

let svc: TestService;
let t: TestTenant;
let tenantId: string;
let deps: Deps;
let p: string;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
  deps = await createDeps(svc, t, (await svc.project(t, 'monitoring')).id);
  p = `/projects/${deps.projectId}`;
});
afterAll(() => svc?.close());

const alertShape = createAjv().compile({
  ...kind('alert').responseSchema,
  additionalProperties: false,
  required: ['id', 'project_id', 'severity', 'status', 'message', 'fired_at'],
});

/** Inserts a firing alert straight into the store, as the rule evaluator would. */
async function fire(severity: 'info' | 'warning' | 'critical', message: string, projectId = deps.projectId): Promise<string> {
  const id = newId('alert');
  const data = {
    id,
    project_id: projectId,
    alert_rule_id: 'arl_test',
    severity,
    status: 'firing',
    message,
    resource_id: deps.connectorId,
    fired_at: new Date().toISOString(),
    acknowledged_at: null,
    acknowledged_by: null,
    resolved_at: null,
    resolved_by: null,
  };
  expect(alertShape(data), JSON.stringify(alertShape.errors)).toBe(true);
  await svc.service.ctx.resources.insert({ id, tenantId, projectId, kind: 'alert', parentId: '', name: id, data, secrets: null });
  return id;
}

describe('alerts', () => {
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    ids.info = await fire('info', 'rows low');
    ids.warning = await fire('warning', 'sync slow');
    ids.critical1 = await fire('critical', 'sync failed');
    ids.critical2 = await fire('critical', 'pipeline failed');
  });

  const listIds = async (query: Record<string, string | number> = {}) =>
    (await svc.ok(t, 'GET', `${p}/alerts`, { query })).data.map((a: { id: string }) => a.id);

  it('lists alerts with the alert shape, oldest first', async () => {
    const page = await svc.ok(t, 'GET', `${p}/alerts`);
    expect(page.has_more).toBe(false);
    expect(page.data.map((a: { id: string }) => a.id)).toEqual([ids.info, ids.warning, ids.critical1, ids.critical2]);
    for (const alert of page.data) expect(alertShape(alert), JSON.stringify(alertShape.errors)).toBe(true);
  });

  it('filters by severity and by status', async () => {
    expect(await listIds({ severity: 'critical' })).toEqual([ids.critical1, ids.critical2]);
    expect(await listIds({ severity: 'info' })).toEqual([ids.info]);
    expect(await listIds({ status: 'firing' })).toHaveLength(4);
    expect(await listIds({ status: 'resolved' })).toEqual([]);
    expectValidation(await svc.call(t, 'GET', `${p}/alerts`, { query: { status: 'sleeping' } }), ['status']);
    expectValidation(await svc.call(t, 'GET', `${p}/alerts`, { query: { severity: 'apocalyptic' } }), ['severity']);
  });

  it('acknowledges a firing alert, recording who and when', async () => {
    const before = Date.now();
    const res = await svc.call(t, 'POST', `${p}/alerts/${ids.critical1}/acknowledge`);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ id: ids.critical1, status: 'acknowledged', acknowledged_by: t.adminEmail, resolved_at: null });
    expect(Date.parse(res.body.acknowledged_at)).toBeGreaterThanOrEqual(before - 1000);
    expect(await svc.ok(t, 'GET', `${p}/alerts`, { query: { status: 'acknowledged' } })).toMatchObject({ data: [res.body] });
    expect(await listIds({ status: 'firing', severity: 'critical' })).toEqual([ids.critical2]);
    // Acknowledging twice is a conflict.
    expectError(await svc.call(t, 'POST', `${p}/alerts/${ids.critical1}/acknowledge`), 409, 'conflict');
  });

  it('resolves an acknowledged alert, and a firing one directly', async () => {
    const resolved = await svc.ok(t, 'POST', `${p}/alerts/${ids.critical1}/resolve`, {}, 200);
    expect(resolved).toMatchObject({ status: 'resolved', resolved_by: t.adminEmail, acknowledged_by: t.adminEmail });
    expect(resolved.resolved_at).toEqual(expect.any(String));
    const direct = await svc.ok(t, 'POST', `${p}/alerts/${ids.warning}/resolve`, {}, 200);
    expect(direct).toMatchObject({ status: 'resolved', acknowledged_at: null });
    expect(await listIds({ status: 'resolved' })).toEqual([ids.warning, ids.critical1]);
  });

  it('refuses to acknowledge or resolve a resolved alert with 409', async () => {
    const error = expectError(await svc.call(t, 'POST', `${p}/alerts/${ids.critical1}/acknowledge`), 409, 'conflict');
    expect(error.message).toMatch(/resolved/);
    expectError(await svc.call(t, 'POST', `${p}/alerts/${ids.critical1}/resolve`), 409, 'conflict');
    expect((await svc.ok(t, 'GET', `${p}/alerts`, { query: { status: 'resolved', severity: 'critical' } })).data[0].status).toBe(
      'resolved',
    );
  });

  it('answers 404 for an unknown alert or one of another project', async () => {
    expectError(await svc.call(t, 'POST', `${p}/alerts/alt_missing/acknowledge`), 404, 'resource_not_found');
    const other = await svc.project(t, 'other-monitoring');
    const foreign = await fire('info', 'elsewhere', other.id);
    expectError(await svc.call(t, 'POST', `${p}/alerts/${foreign}/acknowledge`), 404, 'resource_not_found');
    expect(await listIds()).not.toContain(foreign);
  });

  it('needs read-write permission to acknowledge; a read-only key can list', async () => {
    const ro = await svc.apiKey(t, deps.projectId, 'read-only');
    expect((await svc.call(t, 'GET', `${p}/alerts`, { token: ro.key })).status).toBe(200);
    expectError(await svc.call(t, 'POST', `${p}/alerts/${ids.info}/acknowledge`, { token: ro.key }), 403, 'forbidden');
    const rw = await svc.apiKey(t, deps.projectId, 'read-write');
    const res = await svc.call(t, 'POST', `${p}/alerts/${ids.info}/acknowledge`, { token: rw.key });
    expect(res.status).toBe(200);
    expect(res.body.acknowledged_by).toMatch(/^key-read-write/);
  });

  it('audits transitions', async () => {
    const log = await svc.ok(t, 'GET', `${p}/audit-logs`, { query: { resource_type: 'alert' } });
    const actions = log.data.map(
      (e: { action: string; resource_id: string; outcome: string }) => `${e.action}:${e.resource_id}:${e.outcome}`,
    );
    expect(actions).toContain(`alert.acknowledge:${ids.critical1}:success`);
    expect(actions).toContain(`alert.resolve:${ids.critical1}:success`);
    expect(actions).toContain(`alert.acknowledge:${ids.critical1}:failure`);
  });

  it('lets exactly one of several concurrent acknowledgements win', async () => {
    const id = await fire('warning', 'race');
    const results = await Promise.all(Array.from({ length: 6 }, () => svc.call(t, 'POST', `${p}/alerts/${id}/acknowledge`)));
    expect(results.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409, 409]);
  });

  it('paginates alerts within a filter', async () => {
    for (let i = 0; i < 5; i++) await fire('info', `bulk ${i}`);
    const first = await svc.ok(t, 'GET', `${p}/alerts`, { query: { severity: 'info', limit: 3 } });
    expect(first.has_more).toBe(true);
    const second = await svc.ok(t, 'GET', `${p}/alerts`, { query: { severity: 'info', limit: 3, cursor: first.next_cursor } });
    expect(second.has_more).toBe(false);
    expect([...first.data, ...second.data].every((a: { severity: string }) => a.severity === 'info')).toBe(true);
    expect(first.data.length + second.data.length).toBe(6);
    // The cursor belongs to the filtered list.
    expectValidation(await svc.call(t, 'GET', `${p}/alerts`, { query: { severity: 'critical', cursor: first.next_cursor } }), ['cursor']);
  });
});

describe('dbt models and lineage', () => {
  let dbt: { id: string };
  let c2: { id: string };
  beforeAll(async () => {
    c2 = await svc.ok(t, 'POST', `${p}/connectors`, { body: connectorBody('crm', { connector_type: 'salesforce' }) });
    // Declared out of order on purpose: dependents before their dependencies.
    dbt = await svc.ok(t, 'POST', `${p}/dbt-projects`, {
      body: {
        name: 'warehouse',
        repository: 'https://git.example.com/warehouse.git',
        models: [
          { name: 'fct_revenue', materialization: 'table', depends_on: ['int_orders', 'dim_customers'] },
          { name: 'int_orders', materialization: 'ephemeral', depends_on: ['stg_orders'] },
          { name: 'dim_customers', depends_on: ['stg_customers', 'stg_accounts'] },
          { name: 'stg_orders', sources: [{ connector_id: deps.connectorId, table: 'public.orders' }] },
          { name: 'stg_customers', sources: [{ connector_id: deps.connectorId, table: 'public.customers' }] },
          {
            name: 'stg_accounts',
            sources: [
              { connector_id: c2.id, table: 'Account' },
              { connector_id: deps.connectorId, table: 'public.customers' },
            ],
          },
        ],
      },
    });
  });

  it('lists models dependencies first', async () => {
    const page = await svc.ok(t, 'GET', `${p}/dbt-projects/${dbt.id}/models`);
    expect(page.has_more).toBe(false);
    const names: string[] = page.data.map((m: { name: string }) => m.name);
    expect(names.sort()).toEqual(['dim_customers', 'fct_revenue', 'int_orders', 'stg_accounts', 'stg_customers', 'stg_orders']);
    const order: string[] = page.data.map((m: { name: string }) => m.name);
    for (const model of page.data as { name: string; depends_on: string[] }[]) {
      for (const dep of model.depends_on) expect(order.indexOf(dep), `${dep} before ${model.name}`).toBeLessThan(order.indexOf(model.name));
    }
    expect(order[order.length - 1]).toBe('fct_revenue');
    expect(page.data.find((m: { name: string }) => m.name === 'stg_orders')).toEqual({
      dbt_project_id: dbt.id,
      name: 'stg_orders',
      materialization: 'view',
      depends_on: [],
      sources: [{ connector_id: deps.connectorId, table: 'public.orders' }],
    });
  });

  it('paginates models in the same order', async () => {
    const all = (await svc.ok(t, 'GET', `${p}/dbt-projects/${dbt.id}/models`)).data.map((m: { name: string }) => m.name);
    const first = await svc.ok(t, 'GET', `${p}/dbt-projects/${dbt.id}/models`, { query: { limit: 4 } });
    const second = await svc.ok(t, 'GET', `${p}/dbt-projects/${dbt.id}/models`, { query: { limit: 4, cursor: first.next_cursor } });
    expect([...first.data, ...second.data].map((m: { name: string }) => m.name)).toEqual(all);
    expect(second.has_more).toBe(false);
  });

  it('returns the lineage graph with source and model nodes and edges', async () => {
    const graph = await svc.ok(t, 'GET', `${p}/dbt-projects/${dbt.id}/lineage`);
    expect(graph.dbt_project_id).toBe(dbt.id);
    const nodes = graph.nodes as { id: string; type: string; name: string; connector_id: string | null }[];
    const edges = graph.edges as { from: string; to: string }[];
    expect(
      nodes
        .filter((n) => n.type === 'model')
        .map((n) => n.name)
        .sort(),
    ).toEqual(['dim_customers', 'fct_revenue', 'int_orders', 'stg_accounts', 'stg_customers', 'stg_orders']);
    const sources = nodes.filter((n) => n.type === 'source');
    // public.customers is read by two models but is one node.
    expect(sources.map((s) => `${s.connector_id}:${s.name}`).sort()).toEqual(
      [`${deps.connectorId}:public.orders`, `${deps.connectorId}:public.customers`, `${c2.id}:Account`].sort(),
    );
    expect(new Set(nodes.map((n) => n.id)).size).toBe(nodes.length);
    const byId = new Map(nodes.map((n) => [n.id, n]));
    for (const e of edges) {
      expect(byId.has(e.from), `edge from ${e.from}`).toBe(true);
      expect(byId.has(e.to), `edge to ${e.to}`).toBe(true);
    }
    const named = edges.map((e) => `${byId.get(e.from)!.name}->${byId.get(e.to)!.name}`).sort();
    expect(named).toEqual(
      [
        'int_orders->fct_revenue',
        'dim_customers->fct_revenue',
        'stg_orders->int_orders',
        'stg_customers->dim_customers',
        'stg_accounts->dim_customers',
        'public.orders->stg_orders',
        'public.customers->stg_customers',
        'Account->stg_accounts',
        'public.customers->stg_accounts',
      ].sort(),
    );
  });

  it('rejects a model depending on a missing model with 422 naming it', async () => {
    const res = await svc.call(t, 'POST', `${p}/dbt-projects`, {
      body: {
        name: 'broken',
        repository: 'https://git.example.com/b.git',
        models: [{ name: 'a' }, { name: 'b', depends_on: ['a', 'ghost'] }],
      },
    });
    const error = expectError(res, 422, 'unprocessable_entity');
    expect(error.details).toEqual([{ field: 'models[1].depends_on', message: expect.stringMatching(/"b".*"ghost"/) }]);
    const names = (await svc.ok(t, 'GET', `${p}/dbt-projects`)).data.map((d: { name: string }) => d.name);
    expect(names).not.toContain('broken');
  });

  it('rejects a model cycle and a model source on a missing connector, also on PATCH', async () => {
    expectError(
      await svc.call(t, 'PATCH', `${p}/dbt-projects/${dbt.id}`, {
        body: {
          models: [
            { name: 'x', depends_on: ['y'] },
            { name: 'y', depends_on: ['x'] },
          ],
        },
      }),
      422,
      'unprocessable_entity',
    );
    const error = expectError(
      await svc.call(t, 'PATCH', `${p}/dbt-projects/${dbt.id}`, {
        body: { models: [{ name: 'x', sources: [{ connector_id: 'con_missing', table: 't' }] }] },
      }),
      422,
      'unprocessable_entity',
    );
    expect(error.details!.map((x) => x.field)).toEqual(['models[0].sources[0].connector_id']);
    // The declared models are unchanged.
    expect((await svc.ok(t, 'GET', `${p}/dbt-projects/${dbt.id}/models`)).data).toHaveLength(6);
  });

  it('answers 404 for models and lineage of an unknown dbt project', async () => {
    expectError(await svc.call(t, 'GET', `${p}/dbt-projects/dbt_missing/models`), 404, 'resource_not_found');
    expectError(await svc.call(t, 'GET', `${p}/dbt-projects/dbt_missing/lineage`), 404, 'resource_not_found');
    // A connector id is not a dbt project id.
    expectError(await svc.call(t, 'GET', `${p}/dbt-projects/${deps.connectorId}/lineage`), 404, 'resource_not_found');
  });
});
