import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { startTestService, type TestService, type TestTenant } from '../../support/service.js';
import { expectError, expectTokenResponse } from './helpers.js';

let svc: TestService;
let t: TestTenant;
beforeAll(async () => {
  svc = await startTestService();
  t = await svc.tenant();
});
afterAll(() => svc?.close());

const uniq = () => randomBytes(4).toString('hex');
const email = (who: string) => `${who}-${uniq()}@${t.slug}.test`;
const login = (tenant: TestTenant, address: string, password: string) =>
  svc.call(tenant, 'POST', '/auth/login', { token: '', body: { email: address, password } });
const adminIdOf = async (tenant: TestTenant) =>
  (await svc.ok(tenant, 'GET', '/users')).data.find((u: { email: string }) => u.email === tenant.adminEmail).id as string;

describe('creating users', () => {
  it('with a password: status active, no invitation token, and the user can log in', async () => {
    const address = email('active');
    const res = await svc.call(t, 'POST', '/users', { body: { email: address, role: 'read-write', password: 'a-good-password' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ email: address, role: 'read-write', status: 'active' });
    expect(res.body).not.toHaveProperty('invitation_token');
    expect(res.body).not.toHaveProperty('password');
    expect(res.text).not.toContain('a-good-password');
    const tokens = await login(t, address, 'a-good-password');
    expect(tokens.status, tokens.text).toBe(200);
    expectTokenResponse(tokens.body);
    const got = await svc.ok(t, 'GET', `/users/${res.body.id}`, { token: tokens.body.access_token });
    expect(got).toMatchObject({ id: res.body.id, status: 'active' });
    expect(got).not.toHaveProperty('password');
  });

  it('the password is stored only as a hash', async () => {
    const address = email('hashed');
    const created = await svc.ok(t, 'POST', '/users', { body: { email: address, role: 'read-only', password: 'stored-as-hash-9' } });
    const db = svc.service.ctx.db;
    const dump = JSON.stringify([
      await db.all('SELECT * FROM resources'),
      await db.all('SELECT * FROM user_credentials'),
      await db.all('SELECT * FROM audit_logs'),
    ]);
    expect(dump).not.toContain('stored-as-hash-9');
    const cred = await db.get<{ password_hash: string }>('SELECT password_hash FROM user_credentials WHERE user_id = ?', [created.id]);
    expect(cred?.password_hash).toBeTruthy();
  });

  it('without a password: status invited, a one-time invitation_token in the create response only', async () => {
    const address = email('invited');
    const res = await svc.call(t, 'POST', '/users', { body: { email: address, role: 'read-only' } });
    expect(res.status, res.text).toBe(201);
    expect(res.body.status).toBe('invited');
    const token = res.body.invitation_token;
    expect(typeof token).toBe('string');
    expect(token.length).toBeGreaterThanOrEqual(32);

    // Not shown again, and not stored in clear.
    const got = await svc.ok(t, 'GET', `/users/${res.body.id}`);
    expect(got).not.toHaveProperty('invitation_token');
    expect(got.status).toBe('invited');
    const list = await svc.ok(t, 'GET', '/users', { query: { limit: 100 } });
    expect(JSON.stringify(list)).not.toContain(token);
    const db = svc.service.ctx.db;
    expect(
      JSON.stringify([
        await db.all('SELECT * FROM resources'),
        await db.all('SELECT * FROM user_credentials'),
        await db.all('SELECT * FROM audit_logs'),
      ]),
    ).not.toContain(token);

    // An invited user has no password to log in with, and the invitation is not a bearer token.
    expectError(await login(t, address, 'anything-at-all'), 401, 'unauthorized');
    expectError(await svc.call(t, 'GET', '/projects', { token }), 401, 'unauthorized');

    const accepted = await svc.call(t, 'POST', '/auth/invitations/accept', {
      token: '',
      body: { invitation_token: token, password: 'chosen-password' },
    });
    expect(accepted.status, accepted.text).toBe(200);
    expectTokenResponse(accepted.body);
    const me = await svc.call(t, 'GET', `/users/${res.body.id}`, { token: accepted.body.access_token });
    expect(me.status, me.text).toBe(200);
    expect(me.body.status).toBe('active');
    expect((await login(t, address, 'chosen-password')).status).toBe(200);

    // Single use.
    const again = await svc.call(t, 'POST', '/auth/invitations/accept', {
      token: '',
      body: { invitation_token: token, password: 'hijacked-password' },
    });
    expectError(again, 401, 'unauthorized');
    expectError(await login(t, address, 'hijacked-password'), 401, 'unauthorized');
    expect((await login(t, address, 'chosen-password')).status).toBe(200);
  });

  it('an unknown invitation token is 401; an invitation from another tenant is 401 there', async () => {
    expectError(
      await svc.call(t, 'POST', '/auth/invitations/accept', {
        token: '',
        body: { invitation_token: 'dpinv_unknown', password: 'whatever-password' },
      }),
      401,
      'unauthorized',
    );
    const other = await svc.tenant();
    const invited = await svc.ok(other, 'POST', '/users', { body: { email: `inv-${uniq()}@${other.slug}.test`, role: 'read-only' } });
    expectError(
      await svc.call(t, 'POST', '/auth/invitations/accept', {
        token: '',
        body: { invitation_token: invited.invitation_token, password: 'whatever-password' },
      }),
      401,
      'unauthorized',
    );
    // Still redeemable on its own tenant.
    expect(
      (
        await svc.call(other, 'POST', '/auth/invitations/accept', {
          token: '',
          body: { invitation_token: invited.invitation_token, password: 'whatever-password' },
        })
      ).status,
    ).toBe(200);
  });
});

describe('invitations', () => {
  it('an invitation dies with its user, and when an admin sets the password instead', async () => {
    const gone = await svc.ok(t, 'POST', '/users', { body: { email: email('gone'), role: 'read-only' } });
    await svc.ok(t, 'DELETE', `/users/${gone.id}`);
    expectError(
      await svc.call(t, 'POST', '/auth/invitations/accept', {
        token: '',
        body: { invitation_token: gone.invitation_token, password: 'late-password' },
      }),
      401,
      'unauthorized',
    );
    expectError(await svc.call(t, 'GET', `/users/${gone.id}`), 404, 'resource_not_found');

    const address = email('preset');
    const preset = await svc.ok(t, 'POST', '/users', { body: { email: address, role: 'read-only' } });
    const patched = await svc.ok(t, 'PATCH', `/users/${preset.id}`, { body: { password: 'admin-set-password' } });
    expect(patched.status).toBe('active');
    expectError(
      await svc.call(t, 'POST', '/auth/invitations/accept', {
        token: '',
        body: { invitation_token: preset.invitation_token, password: 'takeover-password' },
      }),
      401,
      'unauthorized',
    );
    expect((await login(t, address, 'admin-set-password')).status).toBe(200);
  });

  it('an invitation accepted twice at the same time is accepted once, and only that password works', async () => {
    for (let round = 0; round < 3; round++) {
      const address = email('race');
      const invited = await svc.ok(t, 'POST', '/users', { body: { email: address, role: 'read-only' } });
      const passwords = ['racer-one-password', 'racer-two-password', 'racer-three-password'];
      const results = await Promise.all(
        passwords.map((password) =>
          svc.call(t, 'POST', '/auth/invitations/accept', { token: '', body: { invitation_token: invited.invitation_token, password } }),
        ),
      );
      const winners = results.map((r, i) => (r.status === 200 ? i : -1)).filter((i) => i >= 0);
      expect(winners.length, results.map((r) => `${r.status} ${r.text}`).join(' | ')).toBe(1);
      for (const r of results.filter((x) => x.status !== 200)) expectError(r, 401, 'unauthorized');
      for (const [i, password] of passwords.entries()) {
        expect((await login(t, address, password)).status, password).toBe(i === winners[0] ? 200 : 401);
      }
    }
  });

  it('an invited user created disabled is still invited (not active) once enabled, and does not count as an active admin', async () => {
    const tenant = await svc.tenant();
    const adminId = await adminIdOf(tenant);
    const address = `dormant-${uniq()}@${tenant.slug}.test`;
    const created = await svc.ok(tenant, 'POST', '/users', { body: { email: address, role: 'admin', disabled: true } });
    expect(created.status).toBe('disabled');
    expect(typeof created.invitation_token).toBe('string');
    const enabled = await svc.ok(tenant, 'PATCH', `/users/${created.id}`, { body: { disabled: false } });
    expect(enabled.status).toBe('invited');
    // It has no password, so the real admin is still the last active one.
    expectError(await svc.call(tenant, 'PATCH', `/users/${adminId}`, { body: { role: 'read-only' } }), 409, 'conflict');
    expectError(await svc.call(tenant, 'DELETE', `/users/${adminId}`), 409, 'conflict');
    // Accepting the invitation makes it active.
    const accepted = await svc.call(tenant, 'POST', '/auth/invitations/accept', {
      token: '',
      body: { invitation_token: created.invitation_token, password: 'dormant-password' },
    });
    expect(accepted.status, accepted.text).toBe(200);
    expect((await svc.ok(tenant, 'GET', `/users/${created.id}`)).status).toBe('active');
  });
});

describe('disabling and deleting users', () => {
  it('disabled:true revokes existing tokens and blocks login and refresh; re-enabling allows login again', async () => {
    const u = await svc.user(t, 'read-write');
    expect((await svc.call(t, 'GET', '/projects', { token: u.token })).status).toBe(200);
    const patched = await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { disabled: true } });
    expect(patched).toMatchObject({ disabled: true, status: 'disabled' });
    expectError(await svc.call(t, 'GET', '/projects', { token: u.token }), 401, 'unauthorized');
    expectError(await login(t, u.email, u.password), 401, 'unauthorized');
    expectError(await svc.call(t, 'POST', '/auth/refresh', { token: '', body: { refresh_token: u.refreshToken } }), 401, 'unauthorized');

    const enabled = await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { disabled: false } });
    expect(enabled.status).toBe('active');
    // The old token stays dead; a new login works.
    expectError(await svc.call(t, 'GET', '/projects', { token: u.token }), 401, 'unauthorized');
    const again = await login(t, u.email, u.password);
    expect(again.status, again.text).toBe(200);
    expect((await svc.call(t, 'GET', '/projects', { token: again.body.access_token })).status).toBe(200);
  });

  it('a deleted user: tokens 401, login 401, and the email can be created again', async () => {
    const u = await svc.user(t, 'read-only');
    await svc.ok(t, 'DELETE', `/users/${u.id}`);
    expectError(await svc.call(t, 'GET', '/projects', { token: u.token }), 401, 'unauthorized');
    expectError(await login(t, u.email, u.password), 401, 'unauthorized');
    expectError(await svc.call(t, 'POST', '/auth/refresh', { token: '', body: { refresh_token: u.refreshToken } }), 401, 'unauthorized');
    expectError(await svc.call(t, 'GET', `/users/${u.id}`), 404, 'resource_not_found');
    const recreated = await svc.ok(t, 'POST', '/users', { body: { email: u.email, role: 'read-only', password: 'a-new-password' } });
    expect(recreated.id).not.toBe(u.id);
    // The old password does not carry over to the new user.
    expectError(await login(t, u.email, u.password), 401, 'unauthorized');
    expect((await login(t, u.email, 'a-new-password')).status).toBe(200);
  });

  it('changing the password by PATCH: the new password logs in, the old one does not', async () => {
    const u = await svc.user(t, 'read-only');
    await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { password: 'replacement-password' } });
    expectError(await login(t, u.email, u.password), 401, 'unauthorized');
    expect((await login(t, u.email, 'replacement-password')).status).toBe(200);
  });

  it('a password reset by PATCH ends every session the user had open', async () => {
    const u = await svc.user(t, 'read-only');
    expect((await svc.call(t, 'GET', '/users', { token: u.token })).status).toBe(200);
    await svc.ok(t, 'PATCH', `/users/${u.id}`, { body: { password: 'reset-by-admin-1' } });
    expectError(await svc.call(t, 'GET', '/users', { token: u.token }), 401, 'unauthorized');
    expectError(await svc.call(t, 'POST', '/auth/refresh', { token: '', body: { refresh_token: u.refreshToken } }), 401, 'unauthorized');
    // A PATCH that leaves the password alone keeps sessions.
    const v = await svc.user(t, 'read-only');
    await svc.ok(t, 'PATCH', `/users/${v.id}`, { body: { name: 'Renamed' } });
    expect((await svc.call(t, 'GET', '/users', { token: v.token })).status).toBe(200);
  });
});

describe('the last active admin', () => {
  it('cannot be deleted, demoted or disabled (409 conflict) until another active admin exists', async () => {
    const tenant = await svc.tenant();
    const adminId = await adminIdOf(tenant);
    expectError(await svc.call(tenant, 'DELETE', `/users/${adminId}`), 409, 'conflict');
    expectError(await svc.call(tenant, 'PATCH', `/users/${adminId}`, { body: { role: 'read-write' } }), 409, 'conflict');
    expectError(await svc.call(tenant, 'PATCH', `/users/${adminId}`, { body: { disabled: true } }), 409, 'conflict');
    // Nothing changed, and the admin's token still works.
    const still = await svc.ok(tenant, 'GET', `/users/${adminId}`);
    expect(still).toMatchObject({ role: 'admin', status: 'active', disabled: false });
    expect((await svc.call(tenant, 'GET', '/users')).status).toBe(200);

    // An invited (not yet active) admin and a disabled admin do not count.
    await svc.ok(tenant, 'POST', '/users', { body: { email: `invited-admin@${tenant.slug}.test`, role: 'admin' } });
    await svc.ok(tenant, 'POST', '/users', {
      body: { email: `disabled-admin@${tenant.slug}.test`, role: 'admin', password: 'disabled-admin-pw', disabled: true },
    });
    expectError(await svc.call(tenant, 'DELETE', `/users/${adminId}`), 409, 'conflict');
    expectError(await svc.call(tenant, 'PATCH', `/users/${adminId}`, { body: { role: 'read-only' } }), 409, 'conflict');

    // With a second active admin, the first can be demoted; then the second is the last one.
    const second = await svc.ok(tenant, 'POST', '/users', {
      body: { email: `second-admin@${tenant.slug}.test`, role: 'admin', password: 'second-admin-pw' },
    });
    const secondLogin = await login(tenant, `second-admin@${tenant.slug}.test`, 'second-admin-pw');
    const demoted = await svc.call(tenant, 'PATCH', `/users/${adminId}`, { body: { role: 'read-write' } });
    expect(demoted.status, demoted.text).toBe(200);
    expect(demoted.body.role).toBe('read-write');
    const secondToken = secondLogin.body.access_token as string;
    expectError(await svc.call(tenant, 'DELETE', `/users/${second.id}`, { token: secondToken }), 409, 'conflict');
    expectError(
      await svc.call(tenant, 'PATCH', `/users/${second.id}`, { token: secondToken, body: { role: 'read-only' } }),
      409,
      'conflict',
    );
    // And a deletable non-admin is deleted.
    expect((await svc.call(tenant, 'DELETE', `/users/${adminId}`, { token: secondToken })).status).toBe(204);
  });

  /** A tenant with exactly two active admins, both logged in. */
  const twoAdmins = async () => {
    const tenant = await svc.tenant();
    const firstId = await adminIdOf(tenant);
    const second = await svc.ok(tenant, 'POST', '/users', {
      body: { email: `peer@${tenant.slug}.test`, role: 'admin', password: 'peer-admin-pw' },
    });
    const secondToken = (await login(tenant, `peer@${tenant.slug}.test`, 'peer-admin-pw')).body.access_token as string;
    return { tenant, firstId, secondId: second.id as string, secondToken };
  };
  const activeAdminsOf = async (tenant: TestTenant) => {
    const rows = await svc.service.ctx.db.all<{ data: string }>(
      "SELECT r.data FROM resources r JOIN tenants tn ON tn.id = r.tenant_id WHERE tn.slug = ? AND r.kind = 'user'",
      [tenant.slug],
    );
    return rows.map((r) => JSON.parse(r.data)).filter((u) => u.role === 'admin' && u.status === 'active');
  };

  it('two admins deleting each other at the same time leave one active admin', async () => {
    for (let round = 0; round < 3; round++) {
      const { tenant, firstId, secondId, secondToken } = await twoAdmins();
      const results = await Promise.all([
        svc.call(tenant, 'DELETE', `/users/${secondId}`),
        svc.call(tenant, 'DELETE', `/users/${firstId}`, { token: secondToken }),
      ]);
      // One wins; the other is refused: 409 (last admin), 401 (its user was deleted or disabled) or 403 (its user was demoted first).
      expect(results.filter((r) => r.status === 204).length, results.map((r) => `${r.status} ${r.text}`).join(' | ')).toBe(1);
      for (const r of results.filter((x) => x.status !== 204)) expect([401, 403, 409]).toContain(r.status);
      expect((await activeAdminsOf(tenant)).length).toBe(1);
    }
  });

  it('two admins demoting each other at the same time leave one active admin', async () => {
    for (let round = 0; round < 3; round++) {
      const { tenant, firstId, secondId, secondToken } = await twoAdmins();
      const results = await Promise.all([
        svc.call(tenant, 'PATCH', `/users/${secondId}`, { body: { role: 'read-only' } }),
        svc.call(tenant, 'PATCH', `/users/${firstId}`, { token: secondToken, body: { disabled: true } }),
      ]);
      expect(results.filter((r) => r.status === 200).length, results.map((r) => `${r.status} ${r.text}`).join(' | ')).toBe(1);
      for (const r of results.filter((x) => x.status !== 200)) expect([401, 403, 409]).toContain(r.status);
      expect((await activeAdminsOf(tenant)).length).toBe(1);
    }
  });
});

describe('emails are case-insensitive', () => {
  it('stores the email lower-cased, logs in with any case, and refuses a duplicate differing only in case (409)', async () => {
    const local = `Mixed.Case-${uniq()}`;
    const mixed = `${local}@${t.slug.toUpperCase()}.Test`;
    const lower = mixed.toLowerCase();
    const created = await svc.ok(t, 'POST', '/users', { body: { email: mixed, role: 'read-only', password: 'mixed-case-pw' } });
    expect(created.email).toBe(lower);
    for (const variant of [lower, mixed, mixed.toUpperCase()]) {
      const res = await login(t, variant, 'mixed-case-pw');
      expect(res.status, `${variant}: ${res.text}`).toBe(200);
    }
    for (const dup of [lower, mixed.toUpperCase()]) {
      expectError(await svc.call(t, 'POST', '/users', { body: { email: dup, role: 'admin', password: 'dup-password' } }), 409, 'conflict');
    }
    // The duplicate attempt did not replace the password.
    expectError(await login(t, lower, 'dup-password'), 401, 'unauthorized');
    const users = await svc.ok(t, 'GET', '/users', { query: { limit: 100 } });
    expect(users.data.filter((u: { email: string }) => u.email === lower)).toHaveLength(1);
  });

  it('concurrent creates of one email in different cases: one 201, the rest 409', async () => {
    const base = `racer-${uniq()}@${t.slug}.test`;
    const variants = [base, base.toUpperCase(), `${base[0].toUpperCase()}${base.slice(1)}`];
    const results = await Promise.all(
      variants.map((e) => svc.call(t, 'POST', '/users', { body: { email: e, role: 'read-only', password: 'racer-password' } })),
    );
    expect(results.map((r) => r.status).sort(), results.map((r) => r.text).join(' | ')).toEqual([201, 409, 409]);
    for (const r of results.filter((x) => x.status === 409)) expectError(r, 409, 'conflict');
    const users = await svc.ok(t, 'GET', '/users', { query: { limit: 100 } });
    expect(users.data.filter((u: { email: string }) => u.email === base)).toHaveLength(1);
  });

  it('the bootstrap admin logs in with an upper-case email too', async () => {
    const res = await login(t, t.adminEmail.toUpperCase(), t.adminPassword);
    expect(res.status, res.text).toBe(200);
  });
});

describe('with --strict-spec', () => {
  it("an invited user can still accept the invitation: it completes the spec's 'Invite a user'", async () => {
    const strict = await startTestService({ strictSpec: true });
    try {
      const st = await strict.tenant();
      const invited = await strict.call(st, 'POST', '/users', {
        body: { email: `strict-${randomBytes(3).toString('hex')}@example.com`, role: 'read-only' },
      });
      expect(invited.status, invited.text).toBe(201);
      const accepted = await strict.call(st, 'POST', '/auth/invitations/accept', {
        token: '',
        body: { invitation_token: invited.body.invitation_token, password: 'chosen-password' },
      });
      expect(accepted.status, accepted.text).toBe(200);
      expectTokenResponse(accepted.body);
    } finally {
      await strict.close();
    }
  });
});
