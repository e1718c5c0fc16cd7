import { conflict } from '../errors.js';
import { lockRow, lockTenant } from '../writes.js';
import type { KindBehaviour, Draft } from './types.js';
import { KINDS } from '../../kinds/index.js';
import { withItemCaps } from './item-caps.js';
import { ruleCacheOf } from '../runtime/rule-cache.js';
import { statusAfterChange } from '../runtime/infrastructure.js';
import { credentialsRevoked } from '../runtime/runtime.js';

const apiKey: KindBehaviour = {
  async beforeCreate(draft, w) {
    const key = await w.ctx.auth.createApiKey(w.q, {
      id: String(draft.data.id),
      tenantId: w.tenantId,
      projectId: w.projectId,
      level: draft.data.permission_level as 'read-only',
    });
    draft.data.key_prefix = key.slice(0, 10);
    draft.data.last_used_at = null;
    return { key };
  },
  async beforeDelete(existing, w) {
    await w.ctx.auth.revokeApiKey(w.q, existing.id);
  },
  afterWrite: ({ ctx, tenantId, resourceId, deleted }) => {
    if (deleted && resourceId) credentialsRevoked(ctx, tenantId, { actorId: resourceId });
  },
};

/** The password never lands in the resources table: it becomes a scrypt hash in user_credentials. */
function takePassword(draft: Draft): string | undefined {
  const password = draft.secrets?.password as string | undefined;
  draft.secrets = null;
  return password;
}

/** Whether the tenant has another active admin than the one a write is about to remove. */
async function hasOtherActiveAdmin(w: Parameters<NonNullable<KindBehaviour['beforeDelete']>>[1]): Promise<boolean> {
  // Serialise admin changes per tenant: on PostgreSQL (READ COMMITTED) two admins removing each other
  // concurrently would otherwise both see two admins and leave none. SQLite transactions are already serial.
  await lockTenant(w.ctx, w.q, w.tenantId);
  // The database filters and stops at the second admin: the tenant's users are not read (there may be 100,000).
  const admins = await w.ctx.resources.list(
    { tenantId: w.tenantId, projectId: '', kind: 'user', where: { role: 'admin', status: 'active' }, limit: 2 },
    w.q,
  );
  return admins.length > 1;
}

const user: KindBehaviour = {
  async beforeCreate(draft, w) {
    const password = takePassword(draft);
    const id = String(draft.data.id);
    if (password) {
      await w.ctx.auth.setPassword(w.q, w.tenantId, id, password);
      draft.data.status = draft.data.disabled ? 'disabled' : 'active';
      return;
    }
    draft.data.status = draft.data.disabled ? 'disabled' : 'invited';
    return { invitation_token: await w.ctx.auth.createInvitation(w.q, w.tenantId, id) };
  },
  async beforeUpdate(draft, existing, w) {
    const password = takePassword(draft);
    const canSignIn = !!password || (await w.ctx.auth.hasSignInMethod(w.q, existing.id));
    draft.data.status = draft.data.disabled ? 'disabled' : canSignIn ? 'active' : 'invited';
    // The last-admin check (and its lock) comes before any write, so concurrent admin changes cannot deadlock.
    const stillAdmin = draft.data.role === 'admin' && draft.data.status === 'active';
    if (!stillAdmin && existing.data.role === 'admin' && existing.data.status === 'active') {
      if (!(await hasOtherActiveAdmin(w))) throw conflict('This is the last active admin of the tenant; make another user admin first');
    }
    // Role, email or status may change: this replica stops answering for the user's tokens from memory.
    w.ctx.auth.userChanged(existing.id);
    if (password) await w.ctx.auth.setPassword(w.q, w.tenantId, existing.id, password);
    // A new password (a reset) or a user who can no longer log in ends every open session.
    if (password || draft.data.status !== 'active') await w.ctx.auth.revokeUserSessions(w.q, existing.id);
  },
  async beforeDelete(existing, w) {
    if (existing.data.role === 'admin' && existing.data.status === 'active' && !(await hasOtherActiveAdmin(w))) {
      throw conflict('This is the last active admin of the tenant; make another user admin first');
    }
    await w.ctx.auth.forgetUser(w.q, existing.id);
  },
  // A role, status or password change may end what the user's tokens may do: its streams are checked again.
  afterWrite: ({ ctx, tenantId, resourceId }) => {
    if (resourceId) credentialsRevoked(ctx, tenantId, { actorId: resourceId });
  },
};

const project: KindBehaviour = {
  // Nothing refuses a project's delete once the caller may make it (no kind references a project).
  emptyBeforeDelete: (existing, { ctx, tenantId }) =>
    ctx.resources.emptyProject(tenantId, existing.id, (q) => lockRow(ctx, q, tenantId, existing.id)),
  async beforeDelete(existing, w) {
    await w.ctx.resources.deleteProjectContents(w.tenantId, existing.id, w.q);
  },
  visibleToKey: (actor, resource) => resource.id === actor.projectId,
  afterWrite: ({ ctx, tenantId, resourceId, deleted }) => {
    if (deleted && resourceId) credentialsRevoked(ctx, tenantId, { projectId: resourceId });
  },
};

/** Run-end alert evaluation keeps a project's rules for a moment (runtime/rule-cache.ts): a written rule counts at once. */
const alertRule: KindBehaviour = {
  afterWrite: ({ ctx, tenantId, projectId }) => ruleCacheOf(ctx.db).forget(tenantId, projectId),
};

/** A changed infrastructure resource is pending until an apply provisions the change (runtime/infrastructure.ts). */
const infrastructureResource: KindBehaviour = { beforeUpdate: statusAfterChange };

const OWN: Record<string, KindBehaviour> = {
  api_key: apiKey,
  user,
  project,
  alert_rule: alertRule,
  infrastructure_resource: infrastructureResource,
};

/** What each kind does beyond generic CRUD: its own hooks, and the caps its schema sets on its lists (x-max-items). */
export const BEHAVIOURS: Record<string, KindBehaviour> = Object.fromEntries(
  [...KINDS.values()].flatMap((d) => {
    const behaviour = withItemCaps(d, OWN[d.kind]);
    return behaviour ? [[d.kind, behaviour]] : [];
  }),
);
export type { KindBehaviour, Draft, WriteContext } from './types.js';
