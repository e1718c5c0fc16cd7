/**
 * Write helpers shared by every writer of resources: the API's routes, the runtime, SSO sign-in
 * and bootstrap. Nothing here knows about HTTP; routes and runtime import it alike.
 */
import { scopeCapSentence, type KindDescriptor } from '../kinds/index.js';
import type { ServiceContext } from './context.js';
import { conflict } from './errors.js';
import type { Queryable } from './store/db.js';
import { tenantUsage } from './store/usage.js';

/** The insert or update broke a unique index (a name taken by a concurrent write), on either store. */
export const isUniqueViolation = (err: unknown) => {
  const e = err as { code?: string };
  return e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === '23505';
};

/**
 * Locks a resource row until the transaction ends (PostgreSQL; SQLite transactions are serial
 * already) and says whether it still exists. Every write inside a project locks the project, so
 * what a write checks in its transaction (references, "still in use", the project itself) cannot
 * be invalidated by a concurrent write before it commits.
 *
 * `share`: the create of a kind that references nothing takes a shared lock. It checks nothing
 * another write could invalidate except the project's existence (the shared lock still excludes a
 * project delete or change, which lock it exclusively) and its name (the unique index decides), and
 * nothing can reference it before it commits; so such creates in one project run side by side
 * instead of one at a time, and every other write still excludes them and each other.
 */
export async function lockRow(
  ctx: Pick<ServiceContext, 'db'>,
  q: Queryable,
  tenantId: string,
  id: string,
  mode: 'update' | 'share' = 'update',
): Promise<boolean> {
  const sql = 'SELECT 1 AS ok FROM resources WHERE id = ? AND tenant_id = ?';
  return !!(await q.get(ctx.db.dialect === 'postgres' ? `${sql} ${mode === 'share' ? 'FOR SHARE' : 'FOR UPDATE'}` : sql, [id, tenantId]));
}

/**
 * Locks the tenant row until the transaction ends (PostgreSQL): writes that check something of the
 * whole tenant (its last admin, a tenant-wide cap) then run one at a time, as SQLite runs them.
 */
export async function lockTenant(ctx: Pick<ServiceContext, 'db'>, q: Queryable, tenantId: string): Promise<void> {
  if (ctx.db.dialect === 'postgres') await q.get('SELECT id FROM tenants WHERE id = ? FOR UPDATE', [tenantId]);
}

/**
 * 409 when the scope (a project, or the tenant for a tenant-scoped kind) already holds the kind's
 * `x-max-per-scope`. The count stops at the cap: an index-only walk of at most that many entries.
 * Callers hold the scope's lock exclusively, so two creates cannot both take the last place.
 */
export async function assertRoomInScope(
  ctx: Pick<ServiceContext, 'resources'>,
  q: Queryable,
  d: KindDescriptor,
  tenantId: string,
  projectId: string,
): Promise<void> {
  const cap = scopeCapSentence(d);
  if (!cap) return;
  if ((await ctx.resources.scanWindowEnd({ tenantId, projectId, kind: d.kind }, d.maxPerScope!, q)) === undefined) return;
  throw conflict(`This ${d.scope} is full: ${cap}; delete one first`);
}

/**
 * 409 when a write would take the tenant past `--max-tenant-storage` (store/usage.ts counts what
 * it stores). `upTo`: what the write can add at most (a create: its body's size, give or take its
 * computed fields); `exact`, for an update: what it adds (new size - old size), computed only when
 * `upTo` would not fit, so an update that does not grow (trimming a connector's tables) always
 * passes. Writes in flight are not counted, so concurrent ones can pass the limit by at most their
 * bodies (1 MiB each). Deletes are never refused: they are the way out.
 */
export async function assertStorageRoom(
  ctx: Pick<ServiceContext, 'options'>,
  q: Queryable,
  tenantId: string,
  upTo: number,
  exact?: () => number,
): Promise<void> {
  const max = ctx.options.maxTenantStorage;
  if (!max) return;
  const used = await tenantUsage(q, tenantId);
  if (used + upTo <= max) return;
  const adds = exact ? exact() : upTo;
  if (adds <= 0 || used + adds <= max) return;
  throw conflict(
    `This write would take the tenant past its storage limit: ${formatBytes(used)} of ${formatBytes(max)} used (resources and audit log), and it adds ${exact ? '' : 'up to '}${formatBytes(adds)}; delete resources or make them smaller first`,
  );
}

export const formatBytes = (n: number) =>
  n >= 1024 ** 3
    ? `${(n / 1024 ** 3).toFixed(1)} GiB`
    : n >= 1024 ** 2
      ? `${(n / 1024 ** 2).toFixed(1)} MiB`
      : `${Math.ceil(n / 1024)} KiB`;

/** The computed fields a new resource starts with: its id, project, timestamps and declared initial values. */
export function initialComputed(d: KindDescriptor, id: string, projectId: string, now: string): Record<string, unknown> {
  const out: Record<string, unknown> = { id };
  for (const name of d.computedFields) {
    const prop = d.schema.properties![name];
    if ('x-initial' in prop) out[name] = prop['x-initial'];
    else if (Array.isArray(prop.type) && prop.type.includes('null') && !prop['x-once']) out[name] = null;
  }
  if (d.scope === 'project') out.project_id = projectId;
  if (d.computedFields.includes('created_at')) out.created_at = now;
  if (d.computedFields.includes('updated_at')) out.updated_at = now;
  return out;
}

/** Puts computed fields in the schema's declared order, so answers read the same for every resource. */
export function ordered(d: KindDescriptor, data: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(d.schema.properties ?? {})) if (key in data) out[key] = data[key];
  return out;
}
