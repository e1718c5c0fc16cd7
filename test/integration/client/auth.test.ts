import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ApiError,
  DataPlatformClient,
  FileTokenStore,
  MemoryTokenStore,
  type ClientEvent,
  type Tokens,
} from '../../../src/client/index.js';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { tenantUrl } from './helpers.js';

/**
 * Password auth against a service whose access tokens expire (after 60 s here, so a slow
 * machine never sees one expire by itself). The service's clock runs `skew` ms ahead of the
 * real one, so a test "lets tokens expire" by moving it forward instead of sleeping; the
 * client knows nothing of it and finds out from the 401s.
 */
let skew = 0;
let svc: TestService;
let t: TestTenant;
let projectId: string;
let dir: string;
const TTL = 60;
const expireTokens = () => {
  skew += (TTL + 1) * 1000;
};

beforeAll(async () => {
  svc = await startTestService({ accessTokenTtl: TTL, clock: () => Date.now() + skew });
  dir = mkdtempSync(join(tmpdir(), 'dp-client-auth-'));
  t = await svc.tenant();
  projectId = (await svc.project(t, 'auth')).id;
});
afterAll(async () => {
  await svc?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The tenant with a fresh admin token (the clock moves a lot here). */
async function admin(): Promise<TestTenant> {
  t.adminToken = (
    await svc.http.call('POST', svc.url(t.slug, '/auth/login'), { body: { email: t.adminEmail, password: t.adminPassword } })
  ).body.access_token;
  return t;
}

let userCounter = 0;
/** A user with a password and no session yet (created by the admin, never logged in). */
async function freshUser(role: 'read-write' | 'admin' = 'read-write') {
  const email = `client-${++userCounter}@${t.slug}.test`;
  const password = `pw-${userCounter}-Sec-8d2f91`;
  const user = await svc.ok(await admin(), 'POST', '/users', { body: { email, role, password } });
  return { id: user.id as string, email, password };
}

function userClient(user: { email: string; password: string }, extra: Partial<ConstructorParameters<typeof DataPlatformClient>[0]> = {}) {
  return new DataPlatformClient({
    url: tenantUrl(svc, t),
    caFile: svc.service.tls.certPath,
    email: user.email,
    password: user.password,
    ...extra,
  });
}

async function sessionsOf(userId: string) {
  const db = svc.service.ctx.db;
  const sessions = await db.all<{ id: string; revoked_at: string | null }>(
    'SELECT id, revoked_at FROM sessions WHERE user_id = ? ORDER BY created_at',
    [userId],
  );
  const out = [];
  for (const s of sessions) {
    const used = await db.all<{ used_at: string | null }>(
      'SELECT used_at FROM refresh_tokens WHERE session_id = ? AND used_at IS NOT NULL',
      [s.id],
    );
    out.push({ revoked: s.revoked_at !== null, refreshesSpent: used.length });
  }
  return out;
}

describe('password auth', () => {
  it('logs in once, lazily, however many first requests start together', async () => {
    const user = await freshUser();
    const client = userClient(user);
    try {
      const results = await Promise.all(Array.from({ length: 10 }, () => client.projects.list()));
      expect(results.every((r) => Array.isArray(r.data))).toBe(true);
      expect(client.stats()).toMatchObject({ logins: 1, refreshes: 0, calls: 11 });
      expect(await sessionsOf(user.id)).toEqual([{ revoked: false, refreshesSpent: 0 }]);
    } finally {
      await client.close();
    }
  });

  it('20 concurrent requests after expiry cause exactly one refresh, and all succeed', async () => {
    const user = await freshUser();
    const events: ClientEvent[] = [];
    const client = userClient(user, { onEvent: (e) => events.push(e) });
    try {
      await client.projects.list();
      expireTokens();
      client.resetStats();
      const calls = Array.from({ length: 20 }, (_, i) =>
        i % 2 ? client.resources('connector', { projectId }).list() : client.projects.get(projectId),
      );
      const results = await Promise.allSettled(calls);
      expect(results.filter((r) => r.status === 'rejected')).toEqual([]);
      const stats = client.stats();
      expect(stats.refreshes).toBe(1);
      expect(stats.logins).toBe(0);
      expect(stats.byEndpoint['POST /auth/refresh'].calls).toBe(1);
      // Each request: a 401, then one retry with the new token.
      expect(stats.byEndpoint['GET /projects/{resourceId}']).toMatchObject({ calls: 20, retries: 10 });
      expect(stats.byEndpoint['GET /projects/{id}/connectors']).toMatchObject({ calls: 20, retries: 10 });
      expect(events.filter((e) => e.type === 'response' && e.status === 401)).toHaveLength(20);
      // The server agrees: one session, one refresh token spent, nothing revoked.
      expect(await sessionsOf(user.id)).toEqual([{ revoked: false, refreshesSpent: 1 }]);
    } finally {
      await client.close();
    }
  });

  it('retries: 0 turns off 5xx/network retries, not the retry after a renewal', async () => {
    const user = await freshUser();
    const client = userClient(user, { retry: { retries: 0 } });
    try {
      await client.projects.list();
      expireTokens();
      await client.projects.list();
      expect(client.stats()).toMatchObject({ logins: 1, refreshes: 1, retries: 1 });
    } finally {
      await client.close();
    }
  });

  it('a restart with the file token store continues the session and never presents a spent refresh token', async () => {
    const user = await freshUser();
    const path = join(dir, 'nested', 'tokens.json');
    const first = userClient(user, { tokenStore: new FileTokenStore(path) });
    await first.projects.list(); // login
    const afterLogin = JSON.parse(readFileSync(path, 'utf8')) as Tokens;
    expireTokens();
    await first.projects.list(); // 401, refresh: the first refresh token is spent now
    const afterRefresh = JSON.parse(readFileSync(path, 'utf8')) as Tokens;
    expect(afterRefresh.refreshToken).not.toBe(afterLogin.refreshToken);
    expect(first.stats()).toMatchObject({ logins: 1, refreshes: 1 });
    await first.close();

    // The file: owner-only, in a directory the store created, no password in it.
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(dir, 'nested')).mode & 0o777).toBe(0o700);
    const text = readFileSync(path, 'utf8');
    expect(text).not.toContain(user.password);
    expect(afterRefresh.subject).toContain(user.email);

    // "Restart": a new client with the same file, after the access token expired again.
    expireTokens();
    const second = userClient(user, { tokenStore: new FileTokenStore(path) });
    try {
      expect((await second.resources('connector', { projectId }).list()).data).toEqual(expect.any(Array));
      expect(second.stats()).toMatchObject({ logins: 0, refreshes: 1 });
      // Still one session, never revoked: the spent refresh token was not presented again.
      expect(await sessionsOf(user.id)).toEqual([{ revoked: false, refreshesSpent: 2 }]);
      expect((JSON.parse(readFileSync(path, 'utf8')) as Tokens).refreshToken).not.toBe(afterRefresh.refreshToken);
    } finally {
      await second.close();
    }
  });

  it('when the refresh is refused (a spent token revokes the session) it logs in again with the password', async () => {
    const user = await freshUser();
    const store = new MemoryTokenStore();
    const first = userClient(user, { tokenStore: store });
    await first.projects.list();
    const stale = (await store.load())!;
    expireTokens();
    await first.projects.list(); // refresh: `stale.refreshToken` is spent
    await first.close();

    // A client handed the spent pair (a stale backup, say) presents it: the session is revoked...
    const events: ClientEvent[] = [];
    const second = userClient(user, { tokenStore: new MemoryTokenStore(stale), onEvent: (e) => events.push(e) });
    try {
      await second.projects.list();
      // ...and the client recovers by logging in with the password.
      expect(second.stats()).toMatchObject({ refreshes: 1, logins: 1 });
      expect(events.filter((e) => e.type === 'auth').map((e) => (e as { action: string }).action)).toEqual([
        'tokens_loaded',
        'refresh_failed',
        'login',
      ]);
      expect(await sessionsOf(user.id)).toEqual([
        { revoked: true, refreshesSpent: 1 },
        { revoked: false, refreshesSpent: 0 },
      ]);
    } finally {
      await second.close();
    }
  });

  it('tokens of another user in the store are ignored', async () => {
    const a = await freshUser();
    const b = await freshUser();
    const store = new MemoryTokenStore();
    const ca = userClient(a, { tokenStore: store });
    await ca.projects.list();
    await ca.close();
    const cb = userClient(b, { tokenStore: store });
    try {
      await cb.projects.list();
      expect(cb.stats().logins).toBe(1);
      expect((await store.load())!.subject).toContain(b.email);
    } finally {
      await cb.close();
    }
  });

  it('a wrong password is a typed 401 that does not contain the password', async () => {
    const user = await freshUser();
    const client = userClient({ email: user.email, password: 'wrong-Password-77' });
    try {
      const err = (await client.projects.list().catch((e: unknown) => e)) as ApiError;
      expect(err).toBeInstanceOf(ApiError);
      expect(err).toMatchObject({ status: 401, code: 'unauthorized', route: '/auth/login' });
      expect(`${err.message} ${err.stack}`).not.toContain('wrong-Password-77');
      expect(client.stats()).toMatchObject({ logins: 1, calls: 1 });
    } finally {
      await client.close();
    }
  });

  it('a disabled user: refresh and login are refused, the request fails with 401 once, without loops', async () => {
    const user = await freshUser();
    const client = userClient(user);
    try {
      await client.projects.list();
      await svc.ok(await admin(), 'PATCH', `/users/${user.id}`, { body: { disabled: true } }, 200);
      const err = (await client.projects.list().catch((e: unknown) => e)) as ApiError;
      expect(err).toMatchObject({ status: 401, code: 'unauthorized' });
      expect(client.stats()).toMatchObject({ logins: 2, refreshes: 1 });
    } finally {
      await client.close();
    }
  });
});
