import { kind } from '../../kinds/index.js';
import type { ServiceContext } from '../context.js';
import type { TokenResponse } from '../auth/auth-service.js';
import type { Queryable } from '../store/db.js';
import type { StoredResource } from '../store/resources.js';
import { forbidden } from '../errors.js';
import { newId, nowIso } from '../ids.js';
import { auditDiff } from '../audit.js';
import { initialComputed, ordered } from '../writes.js';
import type { SsoProvider } from './provider.js';
import type { VerifiedIdentity } from './oidc.js';

export interface SignedIn {
  tokens: TokenResponse;
  user: StoredResource;
  provisioned: boolean;
}

const isUniqueViolation = (err: unknown) =>
  ['SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_CONSTRAINT_PRIMARYKEY', '23505'].includes((err as { code?: string }).code ?? '');

function newUser(tenantId: string, p: SsoProvider, email: string, now: string): StoredResource {
  const d = kind('user');
  const id = newId('user');
  const data = ordered(d, { ...initialComputed(d, id, '', now), email, name: '', role: p.default_role, status: 'active', disabled: false });
  return { id, seq: 0, tenantId, projectId: '', kind: 'user', parentId: '', name: email, data, secrets: null };
}

/**
 * The identity provider vouched for an email: find the tenant's user with it (case-insensitive),
 * or create one when the provider provisions users, then open a session like a password login.
 * An invited user who signs in this way becomes active: the IdP proved the address the invitation went to.
 */
export async function signInVerified(ctx: ServiceContext, tenantId: string, p: SsoProvider, identity: VerifiedIdentity): Promise<SignedIn> {
  const email = identity.email.trim().toLowerCase();
  const now = nowIso(ctx.options.clock);
  const attempt = (q: Queryable) => signInTx(ctx, q, tenantId, p, identity.subject, email, now);
  try {
    return await ctx.db.tx(attempt);
  } catch (err) {
    // Two first sign-ins of the same new user at once: the loser retries and finds the winner's user.
    if (isUniqueViolation(err)) return ctx.db.tx(attempt);
    throw err;
  }
}

async function signInTx(
  ctx: ServiceContext,
  q: Queryable,
  tenantId: string,
  p: SsoProvider,
  subject: string,
  email: string,
  now: string,
): Promise<SignedIn> {
  const domain = email.slice(email.lastIndexOf('@') + 1);
  const allowed = (p.allowed_domains ?? []).map((d) => d.toLowerCase());
  if (allowed.length && !allowed.includes(domain))
    throw forbidden(`SSO provider "${p.name}" accepts only emails in ${allowed.join(', ')}; ${email} is not`);
  let user = await ctx.resources.getByName(tenantId, '', 'user', email, q);
  let provisioned = false;
  if (!user) {
    if (!p.auto_provision)
      throw forbidden(
        `No user with email ${email} in this tenant, and SSO provider "${p.name}" does not create users; ask an admin to invite you`,
      );
    user = newUser(tenantId, p, email, now);
    await ctx.resources.insert(user, q);
    provisioned = true;
  } else if (user.data.disabled || user.data.status === 'disabled') {
    throw forbidden(`User ${email} is disabled`);
  } else if (user.data.status !== 'active') {
    user.data = { ...user.data, status: 'active', updated_at: now };
    await ctx.resources.update(user, q);
  }
  const linked = await q.run('UPDATE sso_identities SET user_id = ?, email = ?, last_login_at = ? WHERE provider_id = ? AND subject = ?', [
    user.id,
    email,
    now,
    p.id,
    subject,
  ]);
  if (linked.changes === 0) {
    await q.run('INSERT INTO sso_identities (provider_id, subject, tenant_id, user_id, email, last_login_at) VALUES (?, ?, ?, ?, ?, ?)', [
      p.id,
      subject,
      tenantId,
      user.id,
      email,
      now,
    ]);
  }
  const tokens = await ctx.auth.startSession(q, tenantId, user.id);
  return { tokens, user, provisioned };
}

/** A user created by sign-in is a user.create in the tenant's audit log, by the provider, like one an admin made. */
export async function auditProvisioning(
  ctx: ServiceContext,
  tenantId: string,
  p: SsoProvider,
  user: StoredResource,
  requestId: string,
): Promise<void> {
  await ctx.audit.record({
    tenantId,
    projectId: null,
    actor: { type: 'anonymous', id: null, name: `sso:${p.name}` },
    action: 'user.create',
    resourceType: 'user',
    resourceId: user.id,
    resourceName: user.name,
    requestId,
    statusCode: 201,
    diff: auditDiff(null, user.data),
    timestamp: nowIso(ctx.options.clock),
  });
}
