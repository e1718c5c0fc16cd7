import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writableKinds } from '../../../src/kinds/index.js';
import { newId } from '../../../src/service/ids.js';
import { ApiError, DataPlatformClient, type ClientEvent, type ConnectorCreate } from '../../../src/client/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { EXAMPLES, SECRETS, type Deps } from '../resources/fixtures.js';
import { clientFor } from './helpers.js';

let svc: TestService;
let t: TestTenant;
let client: DataPlatformClient;
let projectId: string;
let deps: Deps;
const events: ClientEvent[] = [];

/** The resources other kinds reference, created through the client. */
async function createDeps(c: DataPlatformClient, pid: string): Promise<Deps> {
  const connector = await c
    .resources('connector', { projectId: pid })
    .create({ name: 'dep-conn', connector_type: 'mysql', credentials: { username: 'u', password: 'dep-password' } });
  const channel = await c
    .resources('notification_channel', { projectId: pid })
    .create({ name: 'dep-chan', type: 'email', config: { email_addresses: ['ops@example.com'] } });
  const classification = await c.resources('classification', { projectId: pid }).create({ name: 'dep-cls', sensitivity: 'internal' });
  const dbt = await c
    .resources('dbt_project', { projectId: pid })
    .create({ name: 'dep-dbt', repository: 'https://git.example.com/dep.git' });
  const escalation = await c
    .resources('escalation_policy', { projectId: pid })
    .create({ name: 'dep-esc', steps: [{ delay_minutes: 5, channel_ids: [channel.id] }] });
  return {
    projectId: pid,
    connectorId: connector.id,
    channelId: channel.id,
    classificationId: classification.id,
    dbtProjectId: dbt.id,
    escalationPolicyId: escalation.id,
  };
}

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  client = clientFor(svc, t, { onEvent: (e) => events.push(e) });
  projectId = (await client.projects.create({ name: 'client-crud' })).id;
  deps = await createDeps(client, projectId);
});
afterAll(async () => {
  await client?.close();
  await svc?.close();
});

describe('CRUD of every writable kind through the client', () => {
  for (const d of writableKinds()) {
    it(`${d.kind}: create, get, list, ${d.operations.includes('update') ? 'update, ' : ''}delete`, async () => {
      const example = EXAMPLES[d.kind](deps, `c-${d.kind}`);
      const api = client.resourcesOf(d.kind, { projectId });
      const created = await api.create(example.create);
      expect(created.id).toEqual(expect.any(String));
      expect(created[d.identity]).toBe(example.create[d.identity]);
      // Write-only secrets never come back.
      expect(JSON.stringify(created)).not.toContain(SECRETS.connectorPassword);
      expect(JSON.stringify(created)).not.toContain(SECRETS.userPassword);

      expect(await api.get(created.id)).toMatchObject({ id: created.id, [d.identity]: example.create[d.identity] });
      const listed = await api.listAll();
      expect(listed.map((r) => r.id)).toContain(created.id);
      expect((await api.findByName(String(example.create[d.identity])))?.id).toBe(created.id);

      if (d.operations.includes('update') && example.patch) {
        const updated = await api.update(created.id, example.patch);
        expect(updated).toMatchObject(example.expectAfterPatch!);
      }
      await api.delete(created.id);
      const gone = await api.get(created.id).catch((e: unknown) => e);
      expect(gone).toBeInstanceOf(ApiError);
      expect(gone).toMatchObject({ status: 404, code: 'resource_not_found' });
    });
  }

  it('the typed API: kind names, bodies and results are typed from the descriptors', async () => {
    const connectors = client.resources('connector', { projectId });
    const body: ConnectorCreate = { name: 'typed-conn', connector_type: 'postgresql', config: { host: 'db', port: 5432 } };
    const created = await connectors.create(body);
    // `status` is typed as the schema's enum; the create response carries it.
    const status: 'created' | 'active' | 'syncing' | 'error' | 'paused' = created.status;
    expect(status).toBe('created');
    const updated = await connectors.update(created.id, { schedule: '*/5  * * * *' });
    expect(updated.schedule).toBe('*/5 * * * *');
    // @ts-expect-error api_key has no update operation, so the typed client has no update method.
    expect(client.apiKeys(projectId).update).toBeTypeOf('function');
    // @ts-expect-error a project-scoped kind needs a projectId.
    expect(() => client.resources('connector')).toThrow(/projectId/);
    // @ts-expect-error read-only kinds have no resource API.
    expect(() => client.resources('alert', { projectId })).toThrow(/read-only/);
    await connectors.delete(created.id);
  });

  it('users are found by email case-insensitively; API key create answers the key once', async () => {
    const user = await client.users.create({ email: 'Case.Person@Example.com', role: 'read-only' });
    expect(user.invitation_token).toEqual(expect.any(String));
    expect((await client.users.findByName('CASE.person@example.COM'))?.id).toBe(user.id);
    const key = await client.apiKeys(projectId).create({ name: 'once', permission_level: 'read-only' });
    expect(key.key).toMatch(/^dpk_/);
    expect((await client.apiKeys(projectId).get(key.id)).key).toBeUndefined();
    await client.apiKeys(projectId).delete(key.id);
    await client.users.delete(user.id);
  });
});

describe('pagination', () => {
  it('iterates 250 items at limit=100 in 3 counted calls, each item once', async () => {
    const pid = (await client.projects.create({ name: 'paging' })).id;
    const connectors = client.resources('connector', { projectId: pid });
    const names = Array.from({ length: 250 }, (_, i) => `c${String(i).padStart(3, '0')}`);
    for (let i = 0; i < names.length; i += 25)
      await Promise.all(names.slice(i, i + 25).map((name) => connectors.create({ name, connector_type: 'postgresql' })));

    client.resetStats();
    events.length = 0;
    const seen: string[] = [];
    for await (const c of connectors.iterate()) seen.push(c.name);
    // Created 25 at a time, so creation order within a batch is the server's: no repeats, none missing.
    expect(seen).toHaveLength(250);
    expect([...seen].sort()).toEqual(names);
    const endpoint = 'GET /projects/{id}/connectors';
    expect(client.stats().byEndpoint[endpoint].calls).toBe(3);
    expect(client.stats().calls).toBe(3);
    const urls = events.filter((e): e is Extract<ClientEvent, { type: 'response' }> => e.type === 'response').map((e) => new URL(e.url));
    expect(urls.map((u) => u.searchParams.get('limit'))).toEqual(['100', '100', '100']);
    expect(urls[0].searchParams.has('cursor')).toBe(false);
    expect(urls[1].searchParams.get('cursor')).toEqual(expect.any(String));

    expect((await connectors.listAll()).map((c) => c.name)).toEqual(seen);
    expect(client.stats().byEndpoint[endpoint].calls).toBe(6);
    const first = await connectors.list();
    expect(first.data).toHaveLength(100);
    expect(first.has_more).toBe(true);
    const next = await connectors.list({ cursor: first.next_cursor, limit: 10 });
    expect(next.data.map((c) => c.name)).toEqual(seen.slice(100, 110));
    await client.projects.delete(pid);
  });
});

describe('views: alerts, audit logs, dbt models and lineage, run history', () => {
  it('lists and filters alerts, acknowledges and resolves them; a wrong transition is a typed 409', async () => {
    const tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
    const fire = async (severity: 'warning' | 'critical') => {
      const id = newId('alert');
      const data = {
        id,
        project_id: projectId,
        alert_rule_id: 'arl_x',
        severity,
        status: 'firing',
        message: `${severity} fired`,
        resource_id: deps.connectorId,
        fired_at: new Date().toISOString(),
        acknowledged_at: null,
        acknowledged_by: null,
        resolved_at: null,
        resolved_by: null,
      };
      await svc.service.ctx.resources.insert({ id, tenantId, projectId, kind: 'alert', parentId: '', name: id, data, secrets: null });
      return id;
    };
    const warning = await fire('warning');
    const critical = await fire('critical');
    const alerts = client.alerts(projectId);
    expect((await alerts.listAll()).map((a) => a.id)).toEqual([warning, critical]);
    expect((await alerts.listAll({ severity: 'critical' })).map((a) => a.id)).toEqual([critical]);
    const acked = await alerts.acknowledge(critical);
    expect(acked).toMatchObject({ id: critical, status: 'acknowledged', acknowledged_by: t.adminEmail });
    expect((await alerts.listAll({ status: 'acknowledged' })).map((a) => a.id)).toEqual([critical]);
    expect((await alerts.resolve(critical)).status).toBe('resolved');
    const again = await alerts.acknowledge(critical).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ApiError);
    expect(again).toMatchObject({ status: 409, code: 'conflict', requestId: expect.any(String) });
    expect((await alerts.resolve(warning)).status).toBe('resolved');
  });

  it('queries the audit log with filters', async () => {
    const entries = await client.auditLogs(projectId).listAll({ action: 'connector.create', outcome: 'success' });
    expect(entries.length).toBeGreaterThanOrEqual(1);
    for (const e of entries) expect(e).toMatchObject({ action: 'connector.create', outcome: 'success', project_id: projectId });
    expect(entries.some((e) => e.resource_name === 'dep-conn')).toBe(true);
  });

  it('lists dbt models in build order and reads the lineage graph', async () => {
    const dbt = await client.resources('dbt_project', { projectId }).create({
      name: 'lineage',
      repository: 'https://git.example.com/a.git',
      models: [
        { name: 'fct', materialization: 'table', depends_on: ['stg'] },
        { name: 'stg', materialization: 'view', sources: [{ connector_id: deps.connectorId, table: 'public.orders' }] },
      ],
    });
    const models = await client.dbtModels(projectId, dbt.id).listAll();
    expect(models.map((m) => m.name)).toEqual(['stg', 'fct']);
    const graph = await client.lineage(projectId, dbt.id);
    expect(graph.dbt_project_id).toBe(dbt.id);
    expect(graph.edges).toContainEqual({ from: 'model.stg', to: 'model.fct' });
  });

  it('reads run history, a pipeline run and a discovered schema', async () => {
    const pipeline = await client
      .resources('pipeline', { projectId })
      .create({ name: 'runs', steps: [{ name: 'sync', type: 'connector_sync', connector_id: deps.connectorId }] });
    const tenantId = (await svc.service.ctx.tenants.bySlug(t.slug))!.id;
    const runId = newId('run');
    const run = {
      id: runId,
      project_id: projectId,
      run_type: 'pipeline',
      resource_id: pipeline.id,
      status: 'succeeded',
      trigger: 'manual',
      started_at: new Date().toISOString(),
      finished_at: null,
      duration_seconds: null,
      error: null,
      tables: [],
      steps: [],
      models: [],
    };
    await svc.service.ctx.resources.insert({
      id: runId,
      tenantId,
      projectId,
      kind: 'run',
      parentId: pipeline.id,
      name: runId,
      data: run,
      secrets: null,
    });
    expect((await client.runs(projectId, { pipelineId: pipeline.id }).listAll()).map((r) => r.id)).toEqual([runId]);
    expect(await client.pipelineRun(projectId, pipeline.id, runId)).toMatchObject({ id: runId, status: 'succeeded' });
    expect(await client.runs(projectId, { connectorId: deps.connectorId }).listAll()).toEqual([]);
    expect(await client.runs(projectId, { dbtProjectId: deps.dbtProjectId }).listAll()).toEqual([]);
    expect(await client.discoveredSchema(projectId, deps.connectorId)).toMatchObject({ connector_id: deps.connectorId, tables: [] });
  });
});

describe('typed errors', () => {
  const catchError = (p: Promise<unknown>) =>
    p.then(
      () => {
        throw new Error('expected a failure');
      },
      (e: unknown) => e as ApiError,
    );

  it('400 validation_error with details per field, and the request id', async () => {
    const err = await catchError(client.resourcesOf('connector', { projectId }).create({ name: 'bad', config: { port: 'x' } }));
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 400, code: 'validation_error', method: 'POST', route: '/projects/{id}/connectors' });
    expect(err.details.map((d) => d.field).sort()).toEqual(['config.port', 'connector_type']);
    for (const d of err.details) expect(d.message).toEqual(expect.any(String));
    expect(err.requestId).toMatch(/\S+/);
    expect(err.message).toContain(err.requestId!);
    expect(err.message).toContain('HTTP 400 validation_error');
    // The audit log names the same request id.
    const audit = await client.auditLogs(projectId).listAll({ action: 'connector.create', outcome: 'failure' });
    expect(audit.map((a) => a.request_id)).toContain(err.requestId);
  });

  it('404 resource_not_found', async () => {
    const err = await catchError(client.resources('connector', { projectId }).get('con_missing'));
    expect(err).toMatchObject({ status: 404, code: 'resource_not_found', details: [] });
    expect(err.serverMessage).toMatch(/not found/i);
    expect(err.url).toContain('/api/v1/projects/');
  });

  it('409 conflict on a duplicate name', async () => {
    const err = await catchError(client.resources('connector', { projectId }).create({ name: 'dep-conn', connector_type: 'mysql' }));
    expect(err).toMatchObject({ status: 409, code: 'conflict', requestId: expect.any(String) });
  });

  it('422 unprocessable_entity naming the immutable field; never retried', async () => {
    client.resetStats();
    const err = await catchError(client.resources('connector', { projectId }).update(deps.connectorId, { connector_type: 'postgresql' }));
    expect(err).toMatchObject({
      status: 422,
      code: 'unprocessable_entity',
      details: [{ field: 'connector_type', message: 'is immutable' }],
    });
    expect(client.stats().calls).toBe(1);
  });

  it('no token or password in any error message', async () => {
    const errors = [
      await catchError(client.resources('connector', { projectId }).get('con_missing')),
      await catchError(client.resourcesOf('connector', { projectId }).create({ name: 'x' })),
    ];
    for (const e of errors) {
      const text = `${e.message} ${e.stack} ${JSON.stringify(e)}`;
      expect(text).not.toContain(t.adminPassword);
      expect(text).not.toMatch(/dpat_|dprt_|Bearer/);
    }
  });
});

describe('API key auth', () => {
  it('works within its project, is 404 elsewhere and 403 above its level; a revoked key is 401 without any refresh', async () => {
    const other = await client.projects.create({ name: 'other-project' });
    const readOnly = await client.apiKeys(projectId).create({ name: 'ro', permission_level: 'read-only' });
    const keyClient = clientFor(svc, t, { apiKey: readOnly.key });
    try {
      const names = (await keyClient.resources('connector', { projectId }).listAll()).map((c) => c.name);
      expect(names).toContain('dep-conn');
      expect(
        await keyClient
          .resources('connector', { projectId: other.id })
          .list()
          .catch((e: unknown) => e),
      ).toMatchObject({ status: 404, code: 'resource_not_found' });
      const forbidden = (await keyClient
        .resources('connector', { projectId })
        .create({ name: 'nope', connector_type: 'mysql' })
        .catch((e: unknown) => e)) as ApiError;
      expect(forbidden).toMatchObject({ status: 403, code: 'forbidden' });
      expect(forbidden.message).not.toContain(readOnly.key!);

      await client.apiKeys(projectId).delete(readOnly.id);
      keyClient.resetStats();
      const revoked = (await keyClient
        .resources('connector', { projectId })
        .list()
        .catch((e: unknown) => e)) as ApiError;
      expect(revoked).toMatchObject({ status: 401, code: 'unauthorized' });
      expect(keyClient.stats()).toMatchObject({ calls: 1, refreshes: 0, logins: 0 });
      expect(`${revoked.message} ${revoked.stack}`).not.toContain(readOnly.key!);
    } finally {
      await keyClient.close();
    }
  });
});
