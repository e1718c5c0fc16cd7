import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { connectorBody, expectError, LEVELS, type Level } from './helpers.js';

/**
 * Spec 5.7: read-only reads; read-write also creates, updates and deletes resources; admin also
 * manages users, API keys and project settings. The same table holds for API keys and users.
 */
let svc: TestService;
let t: TestTenant;
let project: { id: string };
let shared: { id: string };

interface Actor {
  kind: 'api key' | 'user';
  level: Level;
  token: string;
  /** The project this actor works in (the key's own project). */
  projectId: string;
  userId?: string;
}
const actors = new Map<string, Actor>();
const actorName = (kind: Actor['kind'], level: Level) => `${kind} ${level}`;

beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  project = await svc.project(t, 'perm-home');
  shared = await svc.ok(t, 'POST', `/projects/${project.id}/connectors`, { body: connectorBody('shared') });
  for (const level of LEVELS) {
    const key = await svc.apiKey(t, project.id, level);
    actors.set(actorName('api key', level), { kind: 'api key', level, token: key.key, projectId: project.id });
    const user = await svc.user(t, level);
    actors.set(actorName('user', level), { kind: 'user', level, token: user.token, projectId: project.id, userId: user.id });
  }
});
afterAll(() => svc?.close());

const uniq = () => randomBytes(4).toString('hex');

interface Operation {
  name: string;
  /** The lowest level allowed. */
  needs: Level;
  /** Only meaningful for user tokens. */
  usersOnly?: boolean;
  /** A tenant-level change: API keys are bound to one project, so every key level is refused (403). */
  tenantLevel?: boolean;
  /** Performs the operation as `actor`; returns the response and the status expected on success. */
  run(actor: Actor): Promise<{ status: number; text: string; body: any; headers: any; okStatus: number }>;
  /** Checks, with the admin token, that a refused operation changed nothing. */
  unchanged?(actor: Actor): Promise<void>;
}

const call = async (actor: Actor, method: string, path: string, body: unknown, okStatus: number) => ({
  ...(await svc.call(t, method, path, { token: actor.token, ...(body === undefined ? {} : { body }) })),
  okStatus,
});

/** A connector made by the admin for an operation to act upon. */
const freshConnector = async (name = `target-${uniq()}`) =>
  svc.ok(t, 'POST', `/projects/${project.id}/connectors`, { body: connectorBody(name) });

const ops: Operation[] = [
  { name: 'list connectors', needs: 'read-only', run: (a) => call(a, 'GET', `/projects/${a.projectId}/connectors`, undefined, 200) },
  {
    name: 'get a connector',
    needs: 'read-only',
    run: (a) => call(a, 'GET', `/projects/${a.projectId}/connectors/${shared.id}`, undefined, 200),
  },
  { name: 'list projects', needs: 'read-only', run: (a) => call(a, 'GET', '/projects', undefined, 200) },
  { name: 'get a project', needs: 'read-only', run: (a) => call(a, 'GET', `/projects/${a.projectId}`, undefined, 200) },
  {
    name: 'list run history',
    needs: 'read-only',
    run: (a) => call(a, 'GET', `/projects/${a.projectId}/connectors/${shared.id}/runs`, undefined, 200),
  },
  { name: 'query audit logs', needs: 'read-only', run: (a) => call(a, 'GET', `/projects/${a.projectId}/audit-logs`, undefined, 200) },
  {
    name: 'create a connector',
    needs: 'read-write',
    run: (a) =>
      call(
        a,
        'POST',
        `/projects/${a.projectId}/connectors`,
        connectorBody(`made-by-${a.kind.replace(' ', '-')}-${a.level}-${uniq()}`),
        201,
      ),
    async unchanged(a) {
      const list = await svc.ok(t, 'GET', `/projects/${a.projectId}/connectors`, { query: { limit: 100 } });
      expect(list.data.filter((c: { name: string }) => c.name.startsWith(`made-by-${a.kind.replace(' ', '-')}-${a.level}-`))).toEqual([]);
    },
  },
  {
    name: 'update a connector',
    needs: 'read-write',
    run: (a) =>
      call(
        a,
        'PATCH',
        `/projects/${a.projectId}/connectors/${shared.id}`,
        { selected_tables: [`public.by_${a.level.replace('-', '_')}`] },
        200,
      ),
    async unchanged(a) {
      const c = await svc.ok(t, 'GET', `/projects/${a.projectId}/connectors/${shared.id}`);
      expect(c.selected_tables ?? []).not.toContain(`public.by_${a.level.replace('-', '_')}`);
    },
  },
  {
    name: 'delete a connector',
    needs: 'read-write',
    async run(a) {
      const target = await freshConnector();
      const res = await call(a, 'DELETE', `/projects/${a.projectId}/connectors/${target.id}`, undefined, 204);
      if (res.status === 204) expect((await svc.call(t, 'GET', `/projects/${a.projectId}/connectors/${target.id}`)).status).toBe(404);
      else expect((await svc.call(t, 'GET', `/projects/${a.projectId}/connectors/${target.id}`)).status).toBe(200);
      return res;
    },
  },
  {
    name: 'create a project',
    needs: 'admin',
    tenantLevel: true,
    run: (a) => call(a, 'POST', '/projects', { name: `proj-by-${a.kind.replace(' ', '-')}-${a.level}` }, 201),
    async unchanged(a) {
      const list = await svc.ok(t, 'GET', '/projects', { query: { limit: 100 } });
      expect(list.data.map((p: { name: string }) => p.name)).not.toContain(`proj-by-${a.kind.replace(' ', '-')}-${a.level}`);
    },
  },
  {
    name: 'update project settings',
    needs: 'admin',
    run: (a) => call(a, 'PATCH', `/projects/${a.projectId}`, { description: `set by ${a.kind} ${a.level}` }, 200),
    async unchanged(a) {
      expect((await svc.ok(t, 'GET', `/projects/${a.projectId}`)).description).not.toBe(`set by ${a.kind} ${a.level}`);
    },
  },
  {
    name: 'delete a project',
    needs: 'admin',
    tenantLevel: true,
    async run(a) {
      // A key can only reach its own project, so each attempt gets a throwaway project (and key).
      const doomed = await svc.project(t, `doomed-${uniq()}`);
      const token = a.kind === 'api key' ? (await svc.apiKey(t, doomed.id, a.level)).key : a.token;
      const res = await call({ ...a, token }, 'DELETE', `/projects/${doomed.id}`, undefined, 204);
      expect((await svc.call(t, 'GET', `/projects/${doomed.id}`)).status).toBe(res.status === 204 ? 404 : 200);
      return res;
    },
  },
  {
    name: 'create a user',
    needs: 'admin',
    tenantLevel: true,
    run: (a) =>
      call(
        a,
        'POST',
        '/users',
        { email: `made-by-${a.kind.replace(' ', '-')}-${a.level}@${t.slug}.test`, role: 'admin', password: 'escalated-password' },
        201,
      ),
    async unchanged(a) {
      const users = await svc.ok(t, 'GET', '/users', { query: { limit: 100 } });
      expect(users.data.map((u: { email: string }) => u.email)).not.toContain(
        `made-by-${a.kind.replace(' ', '-')}-${a.level}@${t.slug}.test`,
      );
    },
  },
  {
    name: 'update a user (role)',
    needs: 'admin',
    tenantLevel: true,
    async run(a) {
      const target = await svc.ok(t, 'POST', '/users', {
        body: { email: `target-${uniq()}@${t.slug}.test`, role: 'read-only', password: 'target-password' },
      });
      const res = await call(a, 'PATCH', `/users/${target.id}`, { role: 'admin' }, 200);
      expect((await svc.ok(t, 'GET', `/users/${target.id}`)).role).toBe(res.status === 200 ? 'admin' : 'read-only');
      return res;
    },
  },
  {
    name: 'promote oneself',
    needs: 'admin',
    usersOnly: true,
    async run(a) {
      const res = await call(a, 'PATCH', `/users/${a.userId!}`, { role: 'admin' }, 200);
      if (res.status !== 200) expect((await svc.ok(t, 'GET', `/users/${a.userId}`)).role).toBe(a.level);
      return res;
    },
  },
  {
    name: 'delete a user',
    needs: 'admin',
    tenantLevel: true,
    async run(a) {
      const target = await svc.ok(t, 'POST', '/users', {
        body: { email: `victim-${uniq()}@${t.slug}.test`, role: 'read-only', password: 'victim-password' },
      });
      const res = await call(a, 'DELETE', `/users/${target.id}`, undefined, 204);
      expect((await svc.call(t, 'GET', `/users/${target.id}`)).status).toBe(res.status === 204 ? 404 : 200);
      return res;
    },
  },
  {
    name: 'create an API key',
    needs: 'admin',
    run: (a) =>
      call(
        a,
        'POST',
        `/projects/${a.projectId}/api-keys`,
        { name: `key-by-${a.kind.replace(' ', '-')}-${a.level}`, permission_level: 'admin' },
        201,
      ),
    async unchanged(a) {
      const list = await svc.ok(t, 'GET', `/projects/${a.projectId}/api-keys`, { query: { limit: 100 } });
      expect(list.data.map((k: { name: string }) => k.name)).not.toContain(`key-by-${a.kind.replace(' ', '-')}-${a.level}`);
    },
  },
  { name: 'list API keys', needs: 'admin', run: (a) => call(a, 'GET', `/projects/${a.projectId}/api-keys`, undefined, 200) },
  {
    name: 'revoke an API key',
    needs: 'admin',
    async run(a) {
      const victim = await svc.apiKey(t, project.id, 'read-only');
      const res = await call(a, 'DELETE', `/projects/${a.projectId}/api-keys/${victim.id}`, undefined, 204);
      expect((await svc.call(t, 'GET', '/connectors', { token: victim.key })).status).toBe(res.status === 204 ? 401 : 200);
      return res;
    },
  },
];

const RANK: Record<Level, number> = { 'read-only': 0, 'read-write': 1, admin: 2 };
const matrix = (['api key', 'user'] as const).flatMap((kind) =>
  LEVELS.flatMap((level) =>
    ops
      .filter((op) => kind === 'user' || !op.usersOnly)
      .map((op) => ({
        who: actorName(kind, level),
        level,
        op: op.name,
        allowed: RANK[level] >= RANK[op.needs] && !(kind === 'api key' && op.tenantLevel),
      })),
  ),
);

describe('permission matrix (API keys and users of each level)', () => {
  it.each(matrix)('$who: $op -> allowed=$allowed', async ({ who, op, allowed }) => {
    const actor = actors.get(who)!;
    const operation = ops.find((o) => o.name === op)!;
    const res = await operation.run(actor);
    if (allowed) {
      expect(res.status, `${who} ${op}: ${res.text}`).toBe(res.okStatus);
    } else {
      expectError(res, 403, 'forbidden');
      await operation.unchanged?.(actor);
    }
  });

  it('a forbidden answer names the permission needed', async () => {
    const res = await svc.call(t, 'POST', `/projects/${project.id}/connectors`, {
      token: actors.get('api key read-only')!.token,
      body: connectorBody(`x-${uniq()}`),
    });
    expectError(res, 403, 'forbidden', /read-write/);
  });

  it('the actors kept working through the whole matrix', async () => {
    for (const actor of actors.values()) {
      expect((await svc.call(t, 'GET', `/projects/${project.id}/connectors`, { token: actor.token })).status).toBe(200);
    }
  });
});

describe('a role change applies to tokens already issued', () => {
  it('a demoted user loses write access at once, and a promoted user gains it', async () => {
    const u = await svc.user(t, 'read-write');
    const path = `/projects/${project.id}/connectors`;
    expect((await svc.call(t, 'POST', path, { token: u.token, body: connectorBody(`before-${uniq()}`) })).status).toBe(201);
    await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { role: 'read-only' } });
    expectError(await svc.call(t, 'POST', path, { token: u.token, body: connectorBody(`after-${uniq()}`) }), 403, 'forbidden');
    expect((await svc.call(t, 'GET', path, { token: u.token })).status).toBe(200);
    await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { role: 'admin' } });
    expect((await svc.call(t, 'POST', '/projects', { token: u.token, body: { name: `promoted-${uniq()}` } })).status).toBe(201);
  });
});
