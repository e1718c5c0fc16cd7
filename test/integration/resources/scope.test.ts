import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { EXAMPLES, connectorBody, createDeps, expectError, expectValidation } from './fixtures.js';

describe('unprefixed paths (extension)', () => {
  let svc: TestService;
  let t: TestTenant;
  let mine: string;
  let other: string;
  let key: string;
  let readOnlyKey: string;

  beforeAll(async () => {
    svc = await startTestService();
    t = await svc.tenant();
    mine = (await svc.project(t, 'key-home')).id;
    other = (await svc.project(t, 'not-the-key')).id;
    key = (await svc.apiKey(t, mine, 'read-write')).key;
    readOnlyKey = (await svc.apiKey(t, mine, 'read-only')).key;
  });
  afterAll(() => svc?.close());

  it('with an API key, GET and POST /connectors act on the key project', async () => {
    await svc.ok(t, 'POST', `/projects/${other}/connectors`, { body: connectorBody('elsewhere') });
    const viaPrefixed = await svc.ok(t, 'POST', `/projects/${mine}/connectors`, { body: connectorBody('prefixed') });

    const created = await svc.call(t, 'POST', '/connectors', { body: connectorBody('unprefixed'), token: key });
    expect(created.status, created.text).toBe(201);
    expect(created.body.project_id).toBe(mine);

    const list = await svc.call(t, 'GET', '/connectors', { token: key });
    expect(list.status).toBe(200);
    expect(list.body.data.map((c: { name: string }) => c.name).sort()).toEqual(['prefixed', 'unprefixed']);

    // The same resource under both forms.
    expect((await svc.call(t, 'GET', `/connectors/${viaPrefixed.id}`, { token: key })).body).toEqual(viaPrefixed);
    expect(await svc.ok(t, 'GET', `/projects/${mine}/connectors/${created.body.id}`)).toEqual(created.body);

    // PATCH and DELETE too.
    const patched = await svc.call(t, 'PATCH', `/connectors/${created.body.id}`, { body: { labels: { via: 'key' } }, token: key });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.labels).toEqual({ via: 'key' });
    expect((await svc.call(t, 'DELETE', `/connectors/${created.body.id}`, { token: key })).status).toBe(204);
  });

  it('works for every project-scoped kind the key may use', async () => {
    const deps = await createDeps(svc, t, mine, 'unprefixed');
    const list = await svc.call(t, 'GET', '/pipelines', { token: key });
    expect(list.status).toBe(200);
    const created = await svc.call(t, 'POST', '/pipelines', { body: EXAMPLES.pipeline(deps, 'via-key').create, token: key });
    expect(created.status, created.text).toBe(201);
    expect(created.body.project_id).toBe(mine);
    const alerts = await svc.call(t, 'GET', '/classifications', { token: key });
    expect(alerts.body.data.map((c: { id: string }) => c.id)).toContain(deps.classificationId);
  });

  it('never reaches another project from an unprefixed path', async () => {
    const foreign = await svc.ok(t, 'POST', `/projects/${other}/connectors`, { body: connectorBody('foreign') });
    expectError(await svc.call(t, 'GET', `/connectors/${foreign.id}`, { token: key }), 404, 'resource_not_found');
    expectError(await svc.call(t, 'DELETE', `/connectors/${foreign.id}`, { token: key }), 404, 'resource_not_found');
    expectError(await svc.call(t, 'GET', `/projects/${other}/connectors`, { token: key }), 404, 'resource_not_found');
    await svc.ok(t, 'GET', `/projects/${other}/connectors/${foreign.id}`);
  });

  it('keeps the key permission level', async () => {
    expect((await svc.call(t, 'GET', '/connectors', { token: readOnlyKey })).status).toBe(200);
    expectError(await svc.call(t, 'POST', '/connectors', { body: connectorBody('ro'), token: readOnlyKey }), 403, 'forbidden');
  });

  it('with a user token, is a validation_error saying a project is needed', async () => {
    for (const [method, path, body] of [
      ['GET', '/connectors', undefined],
      ['POST', '/connectors', connectorBody('user-token')],
      ['GET', '/pipelines', undefined],
      ['GET', '/connectors/con_anything', undefined],
    ] as const) {
      const error = expectValidation(await svc.call(t, method, path, { body }), ['project']);
      expect(error.message).toMatch(/project/i);
      expect(error.details![0].message).toMatch(/\/projects\/\{id\}/);
    }
    // Nothing was created anywhere.
    for (const p of [mine, other]) {
      const names = (await svc.ok(t, 'GET', `/projects/${p}/connectors`)).data.map((c: { name: string }) => c.name);
      expect(names).not.toContain('user-token');
    }
  });

  it('audits unprefixed writes under the key project', async () => {
    const created = await svc.call(t, 'POST', '/connectors', { body: connectorBody('audited-unprefixed'), token: key });
    const log = await svc.ok(t, 'GET', `/projects/${mine}/audit-logs`, { query: { action: 'connector.create', limit: 100 } });
    const entry = log.data.find((e: { resource_id: string }) => e.resource_id === created.body.id);
    expect(entry).toMatchObject({ actor: { type: 'api_key' }, outcome: 'success', request_id: created.headers['x-request-id'] });
  });
});

describe('strict spec mode', () => {
  let svc: TestService;
  let t: TestTenant;
  let projectId: string;

  beforeAll(async () => {
    svc = await startTestService({ strictSpec: true });
    t = await svc.tenant();
    projectId = (await svc.project(t, 'strict')).id;
  });
  afterAll(() => svc?.close());

  it('serves the spec routes', async () => {
    const p = `/projects/${projectId}`;
    const connector = await svc.ok(t, 'POST', `${p}/connectors`, {
      body: connectorBody('strict-conn', { credentials: { username: 'u', password: 'strict-pw-1' } }),
    });
    expect(connector.status).toBe('created');
    await svc.ok(t, 'GET', `${p}/connectors/${connector.id}`);
    await svc.ok(t, 'PATCH', `${p}/connectors/${connector.id}`, { body: { selected_tables: ['a'] } });
    expect((await svc.ok(t, 'GET', `${p}/connectors`)).data).toHaveLength(1);

    const channel = await svc.ok(t, 'POST', `${p}/notification-channels`, {
      body: { name: 'c', type: 'email', config: { email_addresses: ['x@example.com'] } },
    });
    await svc.ok(t, 'GET', `${p}/notification-channels`);
    const rule = await svc.ok(t, 'POST', `${p}/alert-rules`, {
      body: { name: 'r', severity: 'info', condition: { metric: 'run_failed', operator: 'gt', threshold: 0 }, channel_ids: [channel.id] },
    });
    expect((await svc.ok(t, 'GET', `${p}/alert-rules`)).data.map((r: { id: string }) => r.id)).toEqual([rule.id]);
    const pipeline = await svc.ok(t, 'POST', `${p}/pipelines`, {
      body: { name: 'pl', steps: [{ name: 's', type: 'connector_sync', connector_id: connector.id }] },
    });
    await svc.ok(t, 'GET', `${p}/pipelines/${pipeline.id}`);
    await svc.ok(t, 'DELETE', `${p}/pipelines/${pipeline.id}`);
    const dbt = await svc.ok(t, 'POST', `${p}/dbt-projects`, {
      body: { name: 'd', repository: 'https://git.example.com/d.git', models: [{ name: 'm' }] },
    });
    await svc.ok(t, 'GET', `${p}/dbt-projects/${dbt.id}`);
    await svc.ok(t, 'GET', `${p}/dbt-projects/${dbt.id}/models`);
    await svc.ok(t, 'GET', `${p}/dbt-projects/${dbt.id}/lineage`);
    await svc.ok(t, 'GET', `${p}/classifications`);
    await svc.ok(t, 'GET', `${p}/masking-policies`);
    await svc.ok(t, 'GET', `${p}/escalation-policies`);
    await svc.ok(t, 'GET', `${p}/infrastructure`);
    await svc.ok(t, 'GET', `${p}/alerts`);
    await svc.ok(t, 'GET', `${p}/audit-logs`);
    await svc.ok(t, 'GET', '/users');
    await svc.ok(t, 'PATCH', `/projects/${projectId}`, { body: { description: 'strict' } });
  });

  it('does not serve extension routes', async () => {
    const p = `/projects/${projectId}`;
    const channel = await svc.ok(t, 'POST', `${p}/notification-channels`, {
      body: { name: 'ext', type: 'email', config: { email_addresses: ['x@example.com'] } },
    });
    const rule = await svc.ok(t, 'POST', `${p}/alert-rules`, {
      body: { name: 'ext', severity: 'info', condition: { metric: 'run_failed', operator: 'gt', threshold: 0 }, channel_ids: [channel.id] },
    });
    const absent: [string, string, unknown?][] = [
      ['GET', `${p}/alert-rules/${rule.id}`],
      ['PATCH', `${p}/alert-rules/${rule.id}`, { severity: 'critical' }],
      ['DELETE', `${p}/alert-rules/${rule.id}`],
      ['GET', `${p}/notification-channels/${channel.id}`],
      ['DELETE', `${p}/notification-channels/${channel.id}`],
      ['GET', `${p}/api-keys`],
      ['POST', `${p}/api-keys`, { name: 'k', permission_level: 'admin' }],
      ['GET', '/connectors'],
      ['POST', '/connectors', connectorBody('unprefixed')],
      ['GET', '/pipelines'],
      ['PATCH', `${p}/dbt-projects/dbt_x`, { branch: 'x' }],
    ];
    for (const [method, path, body] of absent) {
      const res = await svc.call(t, method, path, { body });
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(404);
      expectError(res, 404, 'resource_not_found');
    }
    // The rule is untouched by the rejected PATCH and DELETE.
    expect((await svc.ok(t, 'GET', `${p}/alert-rules`)).data.find((r: { id: string }) => r.id === rule.id)).toEqual(rule);
  });
});
