import type { ServiceContext } from './context.js';
import { kind } from '../kinds/index.js';
import { requestValidator } from './schema-compilers.js';
import { initialComputed, ordered } from './writes.js';
import { newId, nowIso } from './ids.js';
import type { Tenant } from './tenants.js';

/**
 * Creates a tenant and its first admin if they do not exist yet (idempotent, so it can
 * run at every start). Returns whether anything was created.
 */
export async function ensureTenantWithAdmin(
  ctx: ServiceContext,
  slug: string,
  email: string,
  password: string,
): Promise<{ tenant: Tenant; created: boolean }> {
  if (password.length < 8) throw new Error('the admin password must have at least 8 characters');
  const user = kind('user');
  const normalizedEmail = email.trim().toLowerCase();
  const body: Record<string, unknown> = { email: normalizedEmail, role: 'admin' };
  // Checked, and defaults filled in, as the API's POST /users does (its generated validator: no Ajv
  // at start), before the tenant is made: an admin the API would refuse could never log in.
  const validate = requestValidator('body', user.createSchema);
  if (!validate(body)) {
    const problems = (validate.errors ?? []).map((e) => `${e.instancePath.replace(/^\//, '') || 'body'} ${e.message}`);
    throw new Error(`the admin ${problems.join('; ')} (given: ${JSON.stringify(email)})`);
  }
  let tenant = await ctx.tenants.bySlug(slug);
  let created = false;
  if (!tenant) {
    tenant = await ctx.tenants.create(slug);
    created = true;
  }
  if (await ctx.resources.getByName(tenant.id, '', 'user', normalizedEmail)) return { tenant, created };
  const id = newId('user');
  const data = ordered(user, { ...initialComputed(user, id, '', nowIso(ctx.options.clock)), ...body, status: 'active' });
  await ctx.db.tx(async (q) => {
    await ctx.resources.insert(
      { id, tenantId: tenant!.id, projectId: '', kind: 'user', parentId: '', name: normalizedEmail, data, secrets: null },
      q,
    );
    await ctx.auth.setPassword(q, tenant!.id, id, password);
  });
  return { tenant, created: true };
}
