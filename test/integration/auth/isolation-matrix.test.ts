import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { connectorBody, expectError, LEVELS } from './helpers.js';

/**
 * Tenancy and project isolation: credentials of one tenant are unknown on another tenant's
 * host, and a project-bound API key sees other projects as absent (404, never 403).
 */
let svc: TestService;
let a: TestTenant;
let b: TestTenant;
let p1: { id: string };
let p2: { id: string };
let c1: { id: string };
let c2: { id: string };
let keys: Record<string, { id: string; key: string }>;
let keyOfP2: { id: string; key: string };
let userA: { id: string; token: string; refreshToken: string };
let adminIdA: string;
let bProject: { id: string };

beforeAll(async () => {
  svc = await startTestService();
  [a, b] = await Promise.all([svc.tenant(), svc.tenant()]);
  [p1, p2, bProject] = await Promise.all([svc.project(a, 'iso-p1'), svc.project(a, 'iso-p2'), svc.project(b, 'iso-b')]);
  // The third is tenant B's own connector: it exists so that B's lists are not empty.
  [c1, c2] = await Promise.all([
    svc.ok(a, 'POST', `/projects/${p1.id}/connectors`, { body: connectorBody('c1') }),
    svc.ok(a, 'POST', `/projects/${p2.id}/connectors`, { body: connectorBody('c2') }),
    svc.ok(b, 'POST', `/projects/${bProject.id}/connectors`, { body: connectorBody('cb') }),
  ]);
  keys = {};
  for (const level of LEVELS) keys[level] = await svc.apiKey(a, p1.id, level);
  keyOfP2 = await svc.apiKey(a, p2.id, 'read-only');
  userA = await svc.user(a, 'admin');
  const users = await svc.ok(a, 'GET', '/users');
  adminIdA = users.data.find((u: { email: string }) => u.email === a.adminEmail).id;
});
afterAll(() => svc?.close());

describe('credentials of tenant A on tenant B', () => {
  it("A's admin access token is 401 on B's host, and still works on A's", async () => {
    for (const path of ['/projects', `/projects/${bProject.id}`, '/users']) {
      expectError(await svc.call(b, 'GET', path, { token: a.adminToken }), 401, 'unauthorized');
    }
    expectError(await svc.call(b, 'POST', '/projects', { token: a.adminToken, body: { name: 'from-a' } }), 401, 'unauthorized');
    expect((await svc.call(a, 'GET', '/projects')).status).toBe(200);
  });

  it("A's API keys (every level) are 401 on B's host", async () => {
    for (const level of LEVELS) {
      const token = keys[level].key;
      expectError(await svc.call(b, 'GET', '/projects', { token }), 401, 'unauthorized');
      expectError(await svc.call(b, 'GET', `/projects/${bProject.id}/connectors`, { token }), 401, 'unauthorized');
      expectError(await svc.call(b, 'GET', '/connectors', { token }), 401, 'unauthorized');
      expect((await svc.call(a, 'GET', '/connectors', { token })).status).toBe(200);
    }
  });

  it("A's refresh token is 401 on B's host and is not spent by that attempt", async () => {
    expectError(
      await svc.call(b, 'POST', '/auth/refresh', { token: '', body: { refresh_token: userA.refreshToken } }),
      401,
      'unauthorized',
    );
    const onA = await svc.call(a, 'POST', '/auth/refresh', { token: '', body: { refresh_token: userA.refreshToken } });
    expect(onA.status, onA.text).toBe(200);
  });

  it("A's admin password does not log in on B", async () => {
    expectError(
      await svc.call(b, 'POST', '/auth/login', { token: '', body: { email: a.adminEmail, password: a.adminPassword } }),
      401,
      'unauthorized',
    );
  });
});

describe("tenant A's ids on tenant B, with B's admin token", () => {
  it('are 404 resource_not_found for reads, updates and deletes, and nothing of A changes', async () => {
    const cases: [string, string, unknown?][] = [
      ['GET', `/projects/${p1.id}`],
      ['PATCH', `/projects/${p1.id}`, { description: 'hijacked' }],
      ['DELETE', `/projects/${p1.id}`],
      ['GET', `/projects/${p1.id}/connectors`],
      ['GET', `/projects/${p1.id}/connectors/${c1.id}`],
      ['GET', `/projects/${p1.id}/connectors/${c1.id}/runs`],
      ['GET', `/projects/${p1.id}/audit-logs`],
      ['POST', `/projects/${p1.id}/connectors`, connectorBody('planted')],
      ['GET', `/projects/${p1.id}/api-keys`],
      ['POST', `/projects/${p1.id}/api-keys`, { name: 'planted', permission_level: 'admin' }],
      ['GET', `/projects/${p1.id}/api-keys/${keys.admin.id}`],
      ['DELETE', `/projects/${p1.id}/api-keys/${keys.admin.id}`],
      // A's connector id under B's own project.
      ['GET', `/projects/${bProject.id}/connectors/${c1.id}`],
      ['PATCH', `/projects/${bProject.id}/connectors/${c1.id}`, { selected_tables: ['x'] }],
      ['DELETE', `/projects/${bProject.id}/connectors/${c1.id}`],
      ['GET', `/users/${adminIdA}`],
      ['PATCH', `/users/${adminIdA}`, { role: 'read-only' }],
      ['DELETE', `/users/${userA.id}`],
    ];
    for (const [method, path, body] of cases) {
      const res = await svc.call(b, method, path, body === undefined ? {} : { body });
      expect(res.status, `${method} ${path}: ${res.text}`).toBe(404);
      expectError(res, 404, 'resource_not_found');
    }
    // A is intact.
    const project = await svc.ok(a, 'GET', `/projects/${p1.id}`);
    expect(project.description).not.toBe('hijacked');
    await svc.ok(a, 'GET', `/projects/${p1.id}/connectors/${c1.id}`);
    expect((await svc.ok(a, 'GET', `/projects/${p1.id}/connectors`)).data.map((c: { name: string }) => c.name)).toEqual(['c1']);
    expect((await svc.ok(a, 'GET', `/users/${adminIdA}`)).role).toBe('admin');
    expect((await svc.call(a, 'GET', '/connectors', { token: keys.admin.key })).status).toBe(200);
    expect((await svc.call(a, 'GET', '/projects', { token: userA.token })).status).toBe(200);
  });

  it("B's lists never include A's resources", async () => {
    const projects = await svc.ok(b, 'GET', '/projects');
    expect(projects.data.map((p: { id: string }) => p.id)).toEqual([bProject.id]);
    const users = await svc.ok(b, 'GET', '/users');
    expect(users.data.map((u: { email: string }) => u.email)).toEqual([b.adminEmail]);
  });
});

describe('an API key of project P1 and project P2 of the same tenant', () => {
  it('GET /projects with a key lists only its own project (a user token sees both)', async () => {
    for (const level of LEVELS) {
      const res = await svc.call(a, 'GET', '/projects', { token: keys[level].key });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.map((p: { id: string }) => p.id)).toEqual([p1.id]);
      expect(res.body.has_more).toBe(false);
    }
    const other = await svc.call(a, 'GET', '/projects', { token: keyOfP2.key });
    expect(other.body.data.map((p: { id: string }) => p.id)).toEqual([p2.id]);
    const all = await svc.ok(a, 'GET', '/projects');
    expect(all.data.map((p: { id: string }) => p.id).sort()).toEqual([p1.id, p2.id].sort());
  });

  it('reads of P2 and its resources are 404 resource_not_found (not 403) for every level', async () => {
    for (const level of LEVELS) {
      const token = keys[level].key;
      for (const path of [
        `/projects/${p2.id}`,
        `/projects/${p2.id}/connectors`,
        `/projects/${p2.id}/connectors/${c2.id}`,
        `/projects/${p2.id}/audit-logs`,
        `/projects/${p2.id}/connectors/${c2.id}/runs`,
      ]) {
        const res = await svc.call(a, 'GET', path, { token });
        expect(res.status, `${level} GET ${path}: ${res.text}`).toBe(404);
        expectError(res, 404, 'resource_not_found');
      }
      // The unprefixed form with P2's connector id is absent too.
      expectError(await svc.call(a, 'GET', `/connectors/${c2.id}`, { token }), 404, 'resource_not_found');
    }
  });

  it('the answer for an existing other project is the same as for a project that does not exist', async () => {
    const existing = await svc.call(a, 'GET', `/projects/${p2.id}/connectors`, { token: keys.admin.key });
    const missing = await svc.call(a, 'GET', '/projects/prj_nonexistent000000000/connectors', { token: keys.admin.key });
    expectError(existing, 404, 'resource_not_found');
    expectError(missing, 404, 'resource_not_found');
    expect(existing.body.error.message).toBe(missing.body.error.message);
  });

  it('writes to P2 with a key allowed to write are 404 (not 403), and change nothing', async () => {
    for (const level of ['read-write', 'admin'] as const) {
      const token = keys[level].key;
      const cases: [string, string, unknown?][] = [
        ['POST', `/projects/${p2.id}/connectors`, connectorBody(`planted-${level}`)],
        ['PATCH', `/projects/${p2.id}/connectors/${c2.id}`, { selected_tables: ['stolen'] }],
        ['DELETE', `/projects/${p2.id}/connectors/${c2.id}`],
        ['PATCH', `/connectors/${c2.id}`, { selected_tables: ['stolen'] }],
        ['DELETE', `/connectors/${c2.id}`],
      ];
      if (level === 'admin') {
        cases.push(
          ['PATCH', `/projects/${p2.id}`, { description: 'hijacked' }],
          ['DELETE', `/projects/${p2.id}`],
          ['GET', `/projects/${p2.id}/api-keys`],
          ['POST', `/projects/${p2.id}/api-keys`, { name: 'escalate', permission_level: 'admin' }],
          ['GET', `/projects/${p2.id}/api-keys/${keyOfP2.id}`],
          ['DELETE', `/projects/${p2.id}/api-keys/${keyOfP2.id}`],
        );
      }
      for (const [method, path, body] of cases) {
        const res = await svc.call(a, method, path, { token, ...(body === undefined ? {} : { body }) });
        expect(res.status, `${level} ${method} ${path}: ${res.text}`).toBe(404);
        expectError(res, 404, 'resource_not_found');
      }
    }
    const project = await svc.ok(a, 'GET', `/projects/${p2.id}`);
    expect(project.description).not.toBe('hijacked');
    const connectors = await svc.ok(a, 'GET', `/projects/${p2.id}/connectors`);
    expect(connectors.data.map((c: { id: string; selected_tables?: string[] }) => [c.id, c.selected_tables ?? []])).toEqual([[c2.id, []]]);
    const p2keys = await svc.ok(a, 'GET', `/projects/${p2.id}/api-keys`);
    expect(p2keys.data.map((k: { id: string }) => k.id)).toEqual([keyOfP2.id]);
    expect((await svc.call(a, 'GET', '/connectors', { token: keyOfP2.key })).status).toBe(200);
  });

  it("unprefixed paths mean the key's own project", async () => {
    const mine = await svc.call(a, 'GET', '/connectors', { token: keys['read-only'].key });
    expect(mine.body.data.map((c: { id: string }) => c.id)).toEqual([c1.id]);
    const theirs = await svc.call(a, 'GET', '/connectors', { token: keyOfP2.key });
    expect(theirs.body.data.map((c: { id: string }) => c.id)).toEqual([c2.id]);
    expect((await svc.call(a, 'GET', `/connectors/${c1.id}`, { token: keys['read-only'].key })).body.id).toBe(c1.id);
  });

  it('a key still reaches its own project', async () => {
    for (const level of LEVELS) {
      const res = await svc.call(a, 'GET', `/projects/${p1.id}/connectors/${c1.id}`, { token: keys[level].key });
      expect(res.status, res.text).toBe(200);
      expect((await svc.call(a, 'GET', `/projects/${p1.id}`, { token: keys[level].key })).body.id).toBe(p1.id);
    }
  });
});
