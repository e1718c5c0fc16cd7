import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';

let svc: TestService;
let t: TestTenant;
let projectId: string;
beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  projectId = (await svc.project(t)).id;
});
afterAll(() => svc?.close());

const connector = (name: string) => ({
  name,
  connector_type: 'postgresql',
  config: { host: 'db', port: 5432 },
  credentials: { username: 'u', password: 'pw-1' },
  schedule: '0 * * * *',
  labels: { team: 'data' },
  selected_tables: ['public.a'],
});

describe('PATCH with null clears an optional field', () => {
  it('removes a field without a default, resets one with a default, and keeps the rest', async () => {
    const c = await svc.ok(t, 'POST', `/projects/${projectId}/connectors`, { body: connector('clear-me') });
    const patched = await svc.ok(t, 'PATCH', `/projects/${projectId}/connectors/${c.id}`, { body: { schedule: null, labels: null } });
    expect(patched).not.toHaveProperty('schedule');
    expect(patched.labels).toEqual({});
    expect(patched.selected_tables).toEqual(['public.a']);
    const got = await svc.ok(t, 'GET', `/projects/${projectId}/connectors/${c.id}`);
    expect(got).not.toHaveProperty('schedule');
  });

  it('clearing an object clears the write-only secrets inside it', async () => {
    const c = await svc.ok(t, 'POST', `/projects/${projectId}/connectors`, { body: connector('clear-secrets') });
    await svc.ok(t, 'PATCH', `/projects/${projectId}/connectors/${c.id}`, { body: { credentials: null } });
    const row = await svc.service.ctx.db.get<{ secrets: string | null }>('SELECT secrets FROM resources WHERE id = ?', [c.id]);
    expect(row?.secrets ?? null).toBeNull();
  });

  it('null for a required field is a validation_error naming it; an alert rule escalation policy can be unset', async () => {
    const c = await svc.ok(t, 'POST', `/projects/${projectId}/connectors`, { body: connector('required-stays') });
    const res = await svc.call(t, 'PATCH', `/projects/${projectId}/connectors/${c.id}`, { body: { name: null } });
    expect(res.status).toBe(400);
    expect(res.body.error.details.map((d: { field: string }) => d.field)).toContain('name');

    const channel = await svc.ok(t, 'POST', `/projects/${projectId}/notification-channels`, {
      body: { name: 'ops', type: 'email', config: { email_addresses: ['ops@x.test'] } },
    });
    const policy = await svc.ok(t, 'POST', `/projects/${projectId}/escalation-policies`, {
      body: { name: 'pager', steps: [{ delay_minutes: 5, channel_ids: [channel.id] }] },
    });
    const rule = await svc.ok(t, 'POST', `/projects/${projectId}/alert-rules`, {
      body: {
        name: 'failures',
        severity: 'critical',
        condition: { metric: 'run_failed', operator: 'gte', threshold: 1 },
        escalation_policy_id: policy.id,
      },
    });
    const unset = await svc.ok(t, 'PATCH', `/projects/${projectId}/alert-rules/${rule.id}`, { body: { escalation_policy_id: null } });
    expect(unset).not.toHaveProperty('escalation_policy_id');
    // No longer referenced, so the policy can go.
    await svc.ok(t, 'DELETE', `/projects/${projectId}/escalation-policies/${policy.id}`);
  });
});

describe('tenant audit log (extension)', () => {
  it('shows user and project changes to admin users; API keys and non-admins are refused', async () => {
    const user = await svc.user(t, 'read-write');
    const project = await svc.project(t, 'audited-project');
    await svc.ok(t, 'PATCH', `/users/${user.id}`, { body: { name: 'Renamed' } });
    const log = await svc.ok(t, 'GET', '/audit-logs', { query: { limit: 100 } });
    const actions = log.data.map((e: { action: string }) => e.action);
    expect(actions).toEqual(expect.arrayContaining(['user.create', 'user.update', 'project.create']));
    const userUpdate = log.data.find(
      (e: { action: string; resource_id: string }) => e.action === 'user.update' && e.resource_id === user.id,
    );
    expect(userUpdate).toMatchObject({ project_id: null, outcome: 'success', diff: { name: { after: 'Renamed' } } });
    const onlyUsers = await svc.ok(t, 'GET', '/audit-logs', { query: { resource_type: 'user', limit: 100 } });
    expect(onlyUsers.data.every((e: { resource_type: string }) => e.resource_type === 'user')).toBe(true);

    expect((await svc.call(t, 'GET', '/audit-logs', { token: user.token })).status).toBe(403);
    const key = await svc.apiKey(t, project.id, 'admin');
    const byKey = await svc.call(t, 'GET', '/audit-logs', { token: key.key });
    expect(byKey.status).toBe(403);
    expect(byKey.body.error.code).toBe('forbidden');
  });
});
