import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../support/service.js';

let svc: TestService;
let t: TestTenant;
beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
});
afterAll(() => svc?.close());

describe('connector CRUD over HTTPS', () => {
  it('creates, reads, lists, updates and deletes a connector without ever returning the password', async () => {
    const project = await svc.project(t);
    const created = await svc.ok(t, 'POST', `/projects/${project.id}/connectors`, {
      body: {
        name: 'orders',
        connector_type: 'postgresql',
        config: { host: 'db', port: 5432 },
        credentials: { username: 'u', password: 'hunter22' },
        schedule: '*/5  * * * *',
      },
    });
    expect(created).toMatchObject({
      name: 'orders',
      connector_type: 'postgresql',
      status: 'created',
      schedule: '*/5 * * * *',
      credentials: { username: 'u' },
    });
    expect(JSON.stringify(created)).not.toContain('hunter22');
    const list = await svc.ok(t, 'GET', `/projects/${project.id}/connectors`);
    expect(list).toMatchObject({ has_more: false, data: [{ id: created.id }] });
    const patched = await svc.ok(t, 'PATCH', `/projects/${project.id}/connectors/${created.id}`, {
      body: { selected_tables: ['public.orders'] },
    });
    expect(patched.selected_tables).toEqual(['public.orders']);
    await svc.ok(t, 'DELETE', `/projects/${project.id}/connectors/${created.id}`);
    const gone = await svc.call(t, 'GET', `/projects/${project.id}/connectors/${created.id}`);
    expect(gone.status).toBe(404);
    expect(gone.body.error.code).toBe('resource_not_found');
  });
});
