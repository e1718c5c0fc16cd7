import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { connectorBody, expectError } from './helpers.js';

/** API keys (extension): GET/POST /projects/{id}/api-keys, GET/DELETE /projects/{id}/api-keys/{keyId}. */
let svc: TestService;
let t: TestTenant;
let project: { id: string };
beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
  project = await svc.project(t, 'keys-home');
});
afterAll(() => svc?.close());

const keysPath = () => `/projects/${project.id}/api-keys`;

describe('creating and showing keys', () => {
  it('shows the value once, as `key`, in the create response only; list and get never carry it', async () => {
    const created = await svc.call(t, 'POST', keysPath(), { body: { name: 'ci deploy', permission_level: 'read-write' } });
    expect(created.status, created.text).toBe(201);
    const body = created.body;
    expect(body).toMatchObject({ name: 'ci deploy', permission_level: 'read-write', project_id: project.id });
    expect(typeof body.id).toBe('string');
    expect(typeof body.key).toBe('string');
    expect(body.key.length).toBeGreaterThanOrEqual(32);
    expect(typeof body.key_prefix).toBe('string');
    expect(body.key_prefix.length).toBeGreaterThan(0);
    expect(body.key_prefix.length).toBeLessThan(body.key.length / 2);
    expect(body.key.startsWith(body.key_prefix)).toBe(true);
    expect(typeof body.created_at).toBe('string');

    const got = await svc.ok(t, 'GET', `${keysPath()}/${body.id}`);
    expect(got).not.toHaveProperty('key');
    expect(got).toMatchObject({ id: body.id, name: 'ci deploy', permission_level: 'read-write', key_prefix: body.key_prefix });
    expect(JSON.stringify(got)).not.toContain(body.key);

    const list = await svc.ok(t, 'GET', keysPath());
    const listed = list.data.find((k: { id: string }) => k.id === body.id);
    expect(listed).toBeDefined();
    expect(listed).not.toHaveProperty('key');
    expect(listed.key_prefix).toBe(body.key_prefix);
    expect(JSON.stringify(list)).not.toContain(body.key);

    // Neither via the unprefixed form with an admin key of the project.
    const admin = await svc.apiKey(t, project.id, 'admin');
    const viaKey = await svc.call(t, 'GET', '/api-keys', { token: admin.key });
    expect(viaKey.status, viaKey.text).toBe(200);
    expect(viaKey.text).not.toContain(body.key);
    expect(viaKey.text).not.toContain(admin.key);
  });

  it('each key is distinct', async () => {
    const [k1, k2] = await Promise.all([svc.apiKey(t, project.id, 'read-only'), svc.apiKey(t, project.id, 'read-only')]);
    expect(k1.key).not.toBe(k2.key);
    expect(k1.id).not.toBe(k2.id);
  });

  it('a duplicate name in the same project is a conflict; bad levels are validation errors', async () => {
    await svc.ok(t, 'POST', keysPath(), { body: { name: 'dup-key', permission_level: 'read-only' } });
    expectError(await svc.call(t, 'POST', keysPath(), { body: { name: 'dup-key', permission_level: 'admin' } }), 409, 'conflict');
    expectError(
      await svc.call(t, 'POST', keysPath(), { body: { name: 'bad-level', permission_level: 'superuser' } }),
      400,
      'validation_error',
    );
    expectError(await svc.call(t, 'POST', keysPath(), { body: { name: 'no-level' } }), 400, 'validation_error');
    // A key value cannot be chosen by the client.
    expectError(
      await svc.call(t, 'POST', keysPath(), { body: { name: 'chosen', permission_level: 'admin', key: 'dpk_chosen-by-client' } }),
      400,
      'validation_error',
    );
  });
});

describe('using keys', () => {
  it('works as a Bearer token for its project, with its own permission level', async () => {
    const rw = await svc.apiKey(t, project.id, 'read-write');
    const made = await svc.call(t, 'POST', `/projects/${project.id}/connectors`, { token: rw.key, body: connectorBody('made-with-key') });
    expect(made.status, made.text).toBe(201);
    const list = await svc.call(t, 'GET', '/connectors', { token: rw.key });
    expect(list.status).toBe(200);
    expect(list.body.data.map((c: { id: string }) => c.id)).toContain(made.body.id);
    // The key records its use (written in the background, so allow it a moment).
    let shown = await svc.ok(t, 'GET', `${keysPath()}/${rw.id}`);
    for (let i = 0; i < 20 && shown.last_used_at === null; i++) {
      await new Promise((r) => setTimeout(r, 50));
      shown = await svc.ok(t, 'GET', `${keysPath()}/${rw.id}`);
    }
    expect(typeof shown.last_used_at).toBe('string');
  });

  it('is accepted whatever the case of the Bearer scheme, but not with extra words', async () => {
    const ro = await svc.apiKey(t, project.id, 'read-only');
    expect((await svc.call(t, 'GET', '/connectors', { token: '', headers: { authorization: `bearer ${ro.key}` } })).status).toBe(200);
    expectError(
      await svc.call(t, 'GET', '/connectors', { token: '', headers: { authorization: `Bearer ${ro.key} extra` } }),
      401,
      'unauthorized',
    );
    expectError(await svc.call(t, 'GET', '/connectors', { token: '', headers: { authorization: ro.key } }), 401, 'unauthorized');
  });

  it('a slightly altered key is rejected', async () => {
    const ro = await svc.apiKey(t, project.id, 'read-only');
    const last = ro.key.at(-1) === 'A' ? 'B' : 'A';
    expectError(await svc.call(t, 'GET', '/connectors', { token: ro.key.slice(0, -1) + last }), 401, 'unauthorized');
    expectError(await svc.call(t, 'GET', '/connectors', { token: ro.key.slice(0, -1) }), 401, 'unauthorized');
  });
});

describe('revoking keys', () => {
  it('DELETE revokes immediately: the next request with the key is 401, other keys keep working', async () => {
    const doomed = await svc.apiKey(t, project.id, 'admin');
    const survivor = await svc.apiKey(t, project.id, 'read-only');
    expect((await svc.call(t, 'GET', '/connectors', { token: doomed.key })).status).toBe(200);
    await svc.ok(t, 'DELETE', `${keysPath()}/${doomed.id}`);
    expectError(await svc.call(t, 'GET', '/connectors', { token: doomed.key }), 401, 'unauthorized');
    expectError(
      await svc.call(t, 'POST', `/projects/${project.id}/connectors`, { token: doomed.key, body: connectorBody('after-revoke') }),
      401,
      'unauthorized',
    );
    expectError(await svc.call(t, 'GET', `${keysPath()}/${doomed.id}`), 404, 'resource_not_found');
    expect((await svc.ok(t, 'GET', keysPath())).data.map((k: { id: string }) => k.id)).not.toContain(doomed.id);
    expectError(await svc.call(t, 'DELETE', `${keysPath()}/${doomed.id}`), 404, 'resource_not_found');
    expect((await svc.call(t, 'GET', '/connectors', { token: survivor.key })).status).toBe(200);
    expect((await svc.ok(t, 'GET', `/projects/${project.id}/connectors`)).data.map((c: { name: string }) => c.name)).not.toContain(
      'after-revoke',
    );
  });

  it('an admin key can revoke itself, and is refused right after', async () => {
    const self = await svc.apiKey(t, project.id, 'admin');
    const res = await svc.call(t, 'DELETE', `/api-keys/${self.id}`, { token: self.key });
    expect(res.status, res.text).toBe(204);
    expectError(await svc.call(t, 'GET', '/connectors', { token: self.key }), 401, 'unauthorized');
  });

  it('deleting the project revokes its keys', async () => {
    const other = await svc.project(t, 'keys-doomed');
    const key = await svc.apiKey(t, other.id, 'read-write');
    expect((await svc.call(t, 'GET', '/connectors', { token: key.key })).status).toBe(200);
    await svc.ok(t, 'DELETE', `/projects/${other.id}`);
    expectError(await svc.call(t, 'GET', '/connectors', { token: key.key }), 401, 'unauthorized');
    const hashes = await svc.service.ctx.db.all<{ project_id: string }>('SELECT project_id FROM api_key_hashes WHERE project_id = ?', [
      other.id,
    ]);
    expect(hashes).toEqual([]);
  });

  it('keys are not tied to a user session: they survive the creating admin being disabled', async () => {
    const creator = await svc.user(t, 'admin');
    const key = await svc.ok(t, 'POST', keysPath(), {
      token: creator.token,
      body: { name: 'owned-by-creator', permission_level: 'read-only' },
    });
    await svc.ok(t, 'PATCH', `/users/${creator.id}`, { body: { disabled: true } });
    expectError(await svc.call(t, 'GET', '/projects', { token: creator.token }), 401, 'unauthorized');
    expect((await svc.call(t, 'GET', '/connectors', { token: key.key })).status).toBe(200);
  });
});

describe('storage', () => {
  it('stores keys hashed: the raw value is nowhere in resources, api_key_hashes or the audit log', async () => {
    const created = [await svc.apiKey(t, project.id, 'admin'), await svc.apiKey(t, project.id, 'read-only')];
    // Use one, so last_used_at and any audit entries are written.
    await svc.call(t, 'POST', `/projects/${project.id}/connectors`, { token: created[0].key, body: connectorBody('stored-check') });
    const db = svc.service.ctx.db;
    const hashes = await db.all<Record<string, unknown>>('SELECT * FROM api_key_hashes');
    const resources = await db.all<Record<string, unknown>>('SELECT * FROM resources');
    const audit = await db.all<Record<string, unknown>>('SELECT * FROM audit_logs');
    expect(hashes.length).toBeGreaterThanOrEqual(created.length);
    const dump = JSON.stringify([hashes, resources, audit]);
    for (const { id, key } of created) {
      expect(dump).not.toContain(key);
      // Not even the secret part without its prefix.
      expect(dump).not.toContain(key.slice(key.indexOf('_') + 1));
      const row = hashes.find((h) => h.api_key_id === id);
      expect(row).toBeDefined();
      expect(row!.hash).not.toBe(key);
    }
  });
});
