import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writableKinds } from '../../../src/kinds/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { EXAMPLES, SECRETS, collectionPath, connectorBody, createDeps, expectError, expectValidation, type Deps } from './fixtures.js';

const T0 = Date.parse('2031-03-01T10:00:00.000Z');
const MINUTE = 60_000;
let now = T0;

let svc: TestService;
let t: TestTenant;
let adminId: string;
let projectId: string;
let logs: string;

interface Entry {
  id: string;
  timestamp: string;
  project_id: string | null;
  actor: { type: string; id: string | null; name: string | null };
  action: string;
  resource_type: string;
  resource_id: string | null;
  resource_name: string | null;
  request_id: string;
  outcome: 'success' | 'failure';
  status_code: number;
  diff: Record<string, { before: unknown; after: unknown }> | null;
}

async function allEntries(query: Record<string, string | number | undefined> = {}, tenant = t, path = logs): Promise<Entry[]> {
  const out: Entry[] = [];
  let cursor: string | undefined;
  do {
    const page = await svc.ok(tenant, 'GET', path, { query: { limit: 100, ...query, cursor } });
    out.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor);
  return out;
}

const requestId = (res: { headers: Record<string, unknown> }) => {
  const id = res.headers['x-request-id'];
  expect(id).toMatch(/^req_/);
  return id as string;
};

beforeAll(async () => {
  svc = await startTestService({ clock: () => now });
  t = await svc.tenant();
  adminId = (await svc.ok(t, 'GET', '/users')).data.find((u: { email: string }) => u.email === t.adminEmail).id;
  projectId = (await svc.project(t, 'audited')).id;
  logs = `/projects/${projectId}/audit-logs`;
});
afterAll(() => svc?.close());

describe('audit entries for mutations', () => {
  it('records create, update and delete with actor, action, resource, request id and outcome', async () => {
    const base = `/projects/${projectId}/connectors`;
    const create = await svc.call(t, 'POST', base, {
      body: connectorBody('audited', { credentials: { username: 'u', password: SECRETS.connectorPassword } }),
    });
    expect(create.status).toBe(201);
    const update = await svc.call(t, 'PATCH', `${base}/${create.body.id}`, {
      body: { selected_tables: ['t1'], credentials: { username: 'u', password: 'rotated-pw-42' } },
    });
    expect(update.status).toBe(200);
    const del = await svc.call(t, 'DELETE', `${base}/${create.body.id}`);
    expect(del.status).toBe(204);

    const entries = (await allEntries({ resource_type: 'connector' })).filter((e) => e.resource_id === create.body.id);
    const actor = { type: 'user', id: adminId, name: t.adminEmail };
    expect(entries).toEqual([
      expect.objectContaining({
        action: 'connector.create',
        actor,
        resource_type: 'connector',
        resource_name: 'audited',
        request_id: requestId(create),
        outcome: 'success',
        status_code: 201,
        project_id: projectId,
      }),
      expect.objectContaining({
        action: 'connector.update',
        actor,
        resource_type: 'connector',
        request_id: requestId(update),
        outcome: 'success',
        status_code: 200,
      }),
      expect.objectContaining({
        action: 'connector.delete',
        actor,
        resource_type: 'connector',
        request_id: requestId(del),
        outcome: 'success',
        status_code: 204,
      }),
    ]);
    for (const e of entries) {
      expect(e.id).toEqual(expect.any(String));
      expect(e.timestamp).toBe(new Date(now).toISOString());
    }
    const [c, u, d] = entries;
    expect(c.diff).toMatchObject({
      name: { before: null, after: 'audited' },
      connector_type: { before: null, after: 'postgresql' },
      credentials: { before: null, after: { username: 'u' } },
    });
    expect(u.diff).toEqual({
      selected_tables: { before: [], after: ['t1'] },
      'credentials.password': { before: '(redacted)', after: '(redacted)' },
    });
    expect(d.diff).toMatchObject({ name: { before: 'audited', after: null } });
    const text = JSON.stringify(entries);
    expect(text).not.toContain(SECRETS.connectorPassword);
    expect(text).not.toContain('rotated-pw-42');
  });

  it('records every project-scoped kind, and the project itself, in the project audit log', async () => {
    const deps: Deps = await createDeps(svc, t, projectId, 'audit');
    const expected: { action: string; id: string; requestId: string }[] = [];
    for (const d of writableKinds().filter((k) => k.scope === 'project')) {
      const example = EXAMPLES[d.kind](deps, `audit-${d.kind.replace(/_/g, '-')}`);
      const base = collectionPath(d, projectId);
      const created = await svc.call(t, 'POST', base, { body: example.create });
      expect(created.status, created.text).toBe(201);
      expected.push({ action: `${d.kind}.create`, id: created.body.id, requestId: requestId(created) });
      if (example.patch) {
        const patched = await svc.call(t, 'PATCH', `${base}/${created.body.id}`, { body: example.patch });
        expect(patched.status, patched.text).toBe(200);
        expected.push({ action: `${d.kind}.update`, id: created.body.id, requestId: requestId(patched) });
      }
      const deleted = await svc.call(t, 'DELETE', `${base}/${created.body.id}`);
      expect(deleted.status, deleted.text).toBe(204);
      expected.push({ action: `${d.kind}.delete`, id: created.body.id, requestId: requestId(deleted) });
    }
    const patchedProject = await svc.call(t, 'PATCH', `/projects/${projectId}`, { body: { description: 'audited project' } });
    expected.push({ action: 'project.update', id: projectId, requestId: requestId(patchedProject) });

    const entries = await allEntries();
    for (const want of expected) {
      const found = entries.find((e) => e.request_id === want.requestId);
      expect(found, want.action).toMatchObject({
        action: want.action,
        resource_id: want.id,
        resource_type: want.action.split('.')[0],
        outcome: 'success',
        project_id: projectId,
      });
    }
    expect(entries.find((e) => e.action === 'project.create')).toMatchObject({
      resource_id: projectId,
      resource_name: 'audited',
      outcome: 'success',
    });
    const text = JSON.stringify(entries);
    for (const secret of Object.values(SECRETS)) expect(text).not.toContain(secret);
  });

  it('records failed mutations with outcome failure', async () => {
    const base = `/projects/${projectId}/connectors`;
    await svc.ok(t, 'POST', base, { body: connectorBody('taken') });
    const dup = await svc.call(t, 'POST', base, { body: connectorBody('taken', { credentials: { password: 'dup-secret-pw' } }) });
    expectError(dup, 409, 'conflict');
    const c = await svc.ok(t, 'POST', base, { body: connectorBody('immutable') });
    const immutable = await svc.call(t, 'PATCH', `${base}/${c.id}`, { body: { connector_type: 'mysql' } });
    expectError(immutable, 422, 'unprocessable_entity');
    const missing = await svc.call(t, 'DELETE', `${base}/con_missing`);
    expectError(missing, 404, 'resource_not_found');
    const invalid = await svc.call(t, 'POST', base, { body: { name: 'x', connector_type: 'nope' } });
    expectError(invalid, 400, 'validation_error');

    const failures = await allEntries({ outcome: 'failure' });
    expect(failures.find((e) => e.request_id === requestId(dup))).toMatchObject({
      action: 'connector.create',
      outcome: 'failure',
      status_code: 409,
      resource_name: 'taken',
    });
    expect(failures.find((e) => e.request_id === requestId(immutable))).toMatchObject({
      action: 'connector.update',
      outcome: 'failure',
      status_code: 422,
      resource_id: c.id,
    });
    expect(failures.find((e) => e.request_id === requestId(missing))).toMatchObject({
      action: 'connector.delete',
      outcome: 'failure',
      status_code: 404,
    });
    expect(failures.find((e) => e.request_id === requestId(invalid))).toMatchObject({
      action: 'connector.create',
      outcome: 'failure',
      status_code: 400,
    });
    for (const e of failures) expect(e.outcome).toBe('failure');
    expect(JSON.stringify(failures)).not.toContain('dup-secret-pw');
  });

  it('redacts secret changes of other kinds too', async () => {
    const base = `/projects/${projectId}/notification-channels`;
    const ch = await svc.ok(t, 'POST', base, {
      body: { name: 'signed', type: 'webhook', config: { url: 'https://example.com/x', signing_secret: SECRETS.signingSecret } },
    });
    const rotate = await svc.call(t, 'PATCH', `${base}/${ch.id}`, {
      body: { config: { url: 'https://example.com/x', signing_secret: 'rotated-signing-1' } },
    });
    expect(rotate.status).toBe(200);
    const user = await svc.ok(t, 'POST', '/users', {
      body: { email: 'audited-user@example.com', role: 'read-only', password: SECRETS.userPassword },
    });
    await svc.ok(t, 'PATCH', `/users/${user.id}`, { body: { password: 'rotated-user-pw-1' } });

    const entry = (await allEntries({ action: 'notification_channel.update' })).find((e) => e.request_id === requestId(rotate));
    expect(entry!.diff).toEqual({ 'config.signing_secret': { before: '(redacted)', after: '(redacted)' } });
    const everything = await svc.service.ctx.db.all<{ diff: string | null }>('SELECT diff FROM audit_logs');
    const text = JSON.stringify(everything);
    for (const secret of [SECRETS.signingSecret, 'rotated-signing-1', SECRETS.userPassword, 'rotated-user-pw-1'])
      expect(text).not.toContain(secret);
  });
});

describe('audit log queries', () => {
  let p: string;
  let q: string;
  let key: { id: string; key: string };
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    now = T0 + 20 * MINUTE;
    p = (await svc.project(t, 'audit-queries')).id;
    q = `/projects/${p}/audit-logs`;
    key = await svc.apiKey(t, p, 'read-write');
    // Phase A at T0+20m (tokens live an hour on this clock): two creates by the admin, one by the key.
    ids.a1 = (await svc.ok(t, 'POST', `/projects/${p}/connectors`, { body: connectorBody('a1') })).id;
    ids.a2 = (await svc.ok(t, 'POST', `/projects/${p}/classifications`, { body: { name: 'a2', sensitivity: 'public' } })).id;
    ids.k1 = (await svc.ok(t, 'POST', `/projects/${p}/connectors`, { body: connectorBody('k1'), token: key.key })).id;
    // Phase B at T0+30m: updates.
    now = T0 + 30 * MINUTE;
    await svc.ok(t, 'PATCH', `/projects/${p}/connectors/${ids.a1}`, { body: { labels: { b: '1' } } });
    await svc.ok(t, 'PATCH', `/projects/${p}/connectors/${ids.k1}`, { body: { labels: { b: '2' } }, token: key.key });
    // Phase C at T0+40m: deletes.
    now = T0 + 40 * MINUTE;
    await svc.ok(t, 'DELETE', `/projects/${p}/classifications/${ids.a2}`);
    await svc.ok(t, 'DELETE', `/projects/${p}/connectors/${ids.k1}`, { token: key.key });
  });

  const list = (query: Record<string, string | number | undefined>) => allEntries(query, t, q);
  const summary = (entries: Entry[]) => entries.map((e) => `${e.action}:${e.resource_name ?? e.resource_id}`);

  it('lists entries oldest first', async () => {
    const entries = await list({});
    expect(summary(entries)).toEqual([
      'project.create:audit-queries',
      expect.stringMatching(/^api_key\.create:/),
      'connector.create:a1',
      'classification.create:a2',
      'connector.create:k1',
      'connector.update:a1',
      'connector.update:k1',
      'classification.delete:a2',
      'connector.delete:k1',
    ]);
    expect(entries.map((e) => e.timestamp)).toEqual([...entries.map((e) => e.timestamp)].sort());
  });

  it('filters by action', async () => {
    expect(summary(await list({ action: 'connector.create' }))).toEqual(['connector.create:a1', 'connector.create:k1']);
    expect(await list({ action: 'connector.nothing' })).toEqual([]);
  });

  it('filters by actor id or name', async () => {
    const byKey = await list({ actor: key.id });
    expect(summary(byKey)).toEqual(['connector.create:k1', 'connector.update:k1', 'connector.delete:k1']);
    for (const e of byKey) expect(e.actor).toMatchObject({ type: 'api_key', id: key.id });
    const byName = await list({ actor: byKey[0].actor.name! });
    expect(byName.map((e) => e.id)).toEqual(byKey.map((e) => e.id));
    const byAdmin = await list({ actor: t.adminEmail });
    expect(byAdmin.length).toBe(6);
    for (const e of byAdmin) expect(e.actor).toEqual({ type: 'user', id: adminId, name: t.adminEmail });
    expect((await list({ actor: adminId })).map((e) => e.id)).toEqual(byAdmin.map((e) => e.id));
  });

  it('filters by resource_type', async () => {
    expect(summary(await list({ resource_type: 'classification' }))).toEqual(['classification.create:a2', 'classification.delete:a2']);
  });

  it('filters by since (inclusive) and until (exclusive)', async () => {
    const at = (m: number) => new Date(T0 + m * MINUTE).toISOString();
    expect(summary(await list({ since: at(30) }))).toEqual([
      'connector.update:a1',
      'connector.update:k1',
      'classification.delete:a2',
      'connector.delete:k1',
    ]);
    expect(summary(await list({ since: at(30), until: at(40) }))).toEqual(['connector.update:a1', 'connector.update:k1']);
    expect((await list({ until: at(30) })).length).toBe(5);
    expect(await list({ since: at(41) })).toEqual([]);
    // Other time zone offsets mean the same instant.
    expect(summary(await list({ since: '2031-03-01T11:30:00+01:00', until: '2031-03-01T11:40:00+01:00' }))).toEqual([
      'connector.update:a1',
      'connector.update:k1',
    ]);
    // since 10:30Z written with an offset, until 10:40Z: a valid window although the text of since sorts after until.
    expect(summary(await list({ since: '2031-03-01T11:30:00+01:00', until: '2031-03-01T10:40:00Z' }))).toEqual([
      'connector.update:a1',
      'connector.update:k1',
    ]);
  });

  it('combines filters', async () => {
    expect(summary(await list({ actor: key.id, action: 'connector.update', since: new Date(T0 + 30 * MINUTE).toISOString() }))).toEqual([
      'connector.update:k1',
    ]);
  });

  it('rejects bad filter values with validation_error', async () => {
    expectValidation(await svc.call(t, 'GET', q, { query: { since: 'yesterday' } }), ['since']);
    expectValidation(await svc.call(t, 'GET', q, { query: { outcome: 'maybe' } }), ['outcome']);
    expectValidation(
      await svc.call(t, 'GET', q, {
        query: { since: new Date(T0 + 40 * MINUTE).toISOString(), until: new Date(T0 + 30 * MINUTE).toISOString() },
      }),
      ['until'],
    );
    // until 10:30Z written with an offset is before since 10:35Z, although its text sorts after it.
    expectValidation(await svc.call(t, 'GET', q, { query: { since: '2031-03-01T10:35:00Z', until: '2031-03-01T11:30:00+01:00' } }), [
      'until',
    ]);
    expectValidation(await svc.call(t, 'GET', q, { query: { limit: 101 } }), ['limit']);
  });

  it('paginates with signed cursors bound to the filters', async () => {
    const all = await list({});
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await svc.ok(t, 'GET', q, { query: { limit: 2, cursor } });
      expect(page.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.data.map((e: Entry) => e.id));
      cursor = page.next_cursor;
      expect(page.has_more).toBe(cursor !== undefined);
      pages++;
    } while (cursor);
    expect(pages).toBe(5);
    expect(seen).toEqual(all.map((e) => e.id));

    const first = await svc.ok(t, 'GET', q, { query: { limit: 2 } });
    expectValidation(await svc.call(t, 'GET', q, { query: { limit: 2, cursor: first.next_cursor, action: 'connector.create' } }), [
      'cursor',
    ]);
    expectValidation(await svc.call(t, 'GET', logs, { query: { limit: 2, cursor: first.next_cursor } }), ['cursor']);
    expectValidation(await svc.call(t, 'GET', `/projects/${p}/connectors`, { query: { cursor: first.next_cursor } }), ['cursor']);
  });

  it('keeps projects apart', async () => {
    const mine = await list({});
    for (const e of mine) expect(e.project_id).toBe(p);
    const other = await allEntries({});
    expect(other.map((e) => e.id)).not.toEqual(expect.arrayContaining([mine[2].id]));
    // A key of this project cannot read another project's log.
    expectError(await svc.call(t, 'GET', logs, { token: key.key }), 404, 'resource_not_found');
    expect((await svc.call(t, 'GET', q, { token: key.key })).status).toBe(200);
  });
});
