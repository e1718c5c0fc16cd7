/**
 * What the generic routes of a kind do (registration, with the schemas, is crud.ts): one handler
 * per operation, built from shared steps — find the resource in the caller's reach, check an API
 * key may write it, lock and write in one transaction, check references.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { KINDS, formatPath, valuesAt, type FieldPath, type KindDescriptor } from '../../kinds/index.js';
import { MAX_FIELD_ERRORS } from '../../kinds/validator.js';
import type { ServiceContext, KeyReach } from '../context.js';
import { alreadyExists, conflict, forbidden, notFound, unprocessable, unauthorized } from '../errors.js';
import { newId, nowIso } from '../ids.js';
import { PAGE_BYTES, toJsonPage } from '../pagination.js';
import type { JsonPage, StoredResource } from '../store/resources.js';
import type { Queryable } from '../store/db.js';
import { auditDiff } from '../audit.js';
import { BEHAVIOURS } from '../behaviours/index.js';
import type { Draft, KindBehaviour, WriteContext } from '../behaviours/types.js';
import { articled, capitalised, createDraft, mergeSecrets, applyNormalizers, patchDraft } from '../drafts.js';
import { assertRoomInScope, assertStorageRoom, initialComputed, isUniqueViolation, lockRow, lockTenant, ordered } from '../writes.js';
import { assertProjectExists, projectInReach, resolveProject } from './scope.js';
import { largePage, tenantLimits } from '../tenant-limits.js';

/** One kind as its handlers see it. */
export interface KindRoutes {
  ctx: ServiceContext;
  d: KindDescriptor;
  behaviour: KindBehaviour;
  /** "a connector", for summaries and messages. */
  a: string;
  /**
   * A key reaches what is in its project, and of the tenant-level kinds only what visibleToKey
   * shows it (its own project); the rest of the tenant (users, SSO providers) is not for keys.
   */
  keys: KeyReach;
}

export function kindRoutes(ctx: ServiceContext, d: KindDescriptor): KindRoutes {
  const behaviour = BEHAVIOURS[d.kind] ?? {};
  return { ctx, d, behaviour, a: articled(d), keys: d.scope === 'project' || behaviour.visibleToKey ? 'own-project' : 'never' };
}

/** Kinds stored under the resource that made them (runs, discovered schemas): deleted with it. */
const OWNED_KINDS = [...KINDS.values()].filter((d) => d.deletedWithParent).map((d) => d.kind);

/** Kinds some other kind references: only their deletes look for a referrer. */
const REFERENCED_KINDS = new Set([...KINDS.values()].flatMap((d) => d.references.map((r) => r.kind)));

// --- Shared steps -------------------------------------------------------------------------------

/** The request's body, as a copy the write may change. */
const bodyOf = (req: FastifyRequest) => structuredClone(req.body as Record<string, unknown>);

const scopeOf = (k: KindRoutes, req: FastifyRequest) => (k.d.scope === 'project' ? resolveProject(k.ctx, req) : Promise.resolve(''));

const visible = (k: KindRoutes, req: FastifyRequest, r: StoredResource) =>
  !(req.actor?.type === 'api_key' && k.behaviour.visibleToKey && !k.behaviour.visibleToKey(req.actor, r));

/** The resource named by the path, if the caller may see it; else 404. */
async function load(k: KindRoutes, req: FastifyRequest, projectId: string) {
  const { resourceId } = req.params as { resourceId: string };
  const found = await k.ctx.resources.get(req.tenant!.id, projectId, k.d.kind, resourceId);
  if (!found || !visible(k, req, found)) throw notFound(k.d.title);
  return found;
}

/**
 * API keys are bound to one project, so tenant-level kinds (projects, users) are not
 * theirs to change, except what visibleToKey grants on update (their own project's settings).
 */
function assertKeyMayWrite(k: KindRoutes, req: FastifyRequest, existing: StoredResource | null) {
  const actor = req.actor;
  if (actor?.type !== 'api_key' || k.d.scope !== 'tenant') return;
  if (req.method === 'PATCH' && existing && k.behaviour.visibleToKey?.(actor, existing)) return;
  const verb = req.method === 'POST' ? 'creating' : req.method === 'PATCH' ? 'changing' : 'deleting';
  throw forbidden(`API keys are limited to their project; ${verb} ${k.d.title.toLowerCase()}s needs a user token`);
}

/** A request body's size in bytes, from its Content-Length (Fastify has read and capped the body by then). */
function bodyBytes(req: FastifyRequest): number {
  const n = Number(req.headers['content-length']);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/**
 * The write transaction: `existing` is the resource an update or delete is about; a tenant-level
 * one is locked itself, a project-level write locks its project. A create of a kind without
 * references shares the project lock (see lockRow). A create (`grows`) must fit in the tenant's
 * storage (assertStorageRoom); an update is checked on what it adds, a delete always may.
 */
async function writeTx<T>(
  k: KindRoutes,
  req: FastifyRequest,
  projectId: string,
  existing: StoredResource | null,
  fn: (w: WriteContext) => Promise<T>,
  /** A create: must fit in the tenant's storage (an update checks what it adds itself, patchStored). */
  grows = true,
): Promise<T> {
  const { ctx, d } = k;
  // A capped kind's create counts its scope (assertRoomInScope): it needs the lock to itself.
  const createLock = d.references.length === 0 && d.maxPerScope === undefined ? 'share' : 'update';
  // At most WRITE_TX_PER_TENANT of the tenant's write transactions hold a connection at once; the
  // rest wait here, before taking one (tenant-limits.ts). Nothing inside takes this gate again.
  const result = await tenantLimits(ctx).writes.run(req.tenant!.id, () =>
    ctx.db.tx(async (q) => {
      // A key revoked or a session ended while this request was in flight must not write. The two
      // checks are independent reads, issued together (one round trip on PostgreSQL, pipelined),
      // and answered in the same order as before: revoked first, then the missing row.
      const lock =
        d.scope === 'project'
          ? lockRow(ctx, q, req.tenant!.id, projectId, existing ? 'update' : createLock)
          : existing
            ? lockRow(ctx, q, req.tenant!.id, existing.id)
            : d.maxPerScope !== undefined
              ? lockTenant(ctx, q, req.tenant!.id).then(() => true)
              : Promise.resolve(true);
      const room = grows ? assertStorageRoom(ctx, q, req.tenant!.id, bodyBytes(req)) : undefined;
      const [valid, locked, roomy] = await Promise.allSettled([ctx.auth.stillValid(req.actor!, q), lock, room]);
      if (valid.status === 'rejected') throw valid.reason;
      if (!valid.value) throw unauthorized('Credential was revoked during the request');
      if (locked.status === 'rejected') throw locked.reason;
      if (!locked.value) throw d.scope === 'project' ? notFound('Project') : notFound(d.title);
      if (roomy.status === 'rejected') throw roomy.reason;
      return fn({ ctx, req, tenantId: req.tenant!.id, projectId, actor: req.actor!, q });
    }),
  );
  k.behaviour.afterWrite?.({ ctx, tenantId: req.tenant!.id, projectId, resourceId: existing?.id, deleted: req.method === 'DELETE' });
  return result;
}

/**
 * 422 naming every reference to a missing resource. Each distinct id is looked up once, by key only:
 * a dbt project's models can name one connector 20,000 times, and reading (parsing, unsealing) the
 * connector for each was minutes of work in the write transaction.
 */
async function checkReferences(k: KindRoutes, tenantId: string, projectId: string, data: Record<string, unknown>, q: Queryable) {
  // Every referenced id of a kind in one look-up (a statement per 1,024 ids), not one query per
  // reference: a dbt project can name 100,000 sources.
  const missing: { field: string; message: string }[] = [];
  for (const ref of k.d.references) {
    const found = valuesAt(data, ref.path).filter((v): v is { path: FieldPath; value: string } => typeof v.value === 'string');
    if (!found.length) continue;
    const existing = await k.ctx.resources.existingIds(tenantId, projectId, ref.kind, [...new Set(found.map((v) => v.value))], q);
    const title = KINDS.get(ref.kind)?.title.toLowerCase() ?? ref.kind;
    for (const { path, value } of found)
      if (!existing.has(value)) missing.push({ field: formatPath(path), message: `no ${title} with id "${value}" in this project` });
  }
  if (!missing.length) return;
  // At most MAX_FIELD_ERRORS details, as for validation errors (validator.ts).
  const details = missing.slice(0, MAX_FIELD_ERRORS);
  const more = missing.length - details.length;
  throw unprocessable(
    `References to missing resources: ${details.map((x) => x.field).join(', ')}${more ? `; and ${more.toLocaleString('en-US')} more` : ''}`,
    details,
  );
}

async function checkNotReferenced(k: KindRoutes, existing: StoredResource, q: Queryable) {
  const { ctx, d } = k;
  if (!REFERENCED_KINDS.has(d.kind) || d.scope !== 'project') return;
  // One lookup on resource_refs (store/refs.ts), whatever the size of the project.
  const ref = await ctx.resources.referrerOf(existing, q);
  if (!ref) return;
  const referrer = KINDS.get(ref.kind);
  const other = await ctx.resources.get(existing.tenantId, existing.projectId, ref.kind, ref.id, q);
  throw conflict(
    `${d.title} "${existing.name}" is used by ${referrer?.title.toLowerCase() ?? ref.kind} "${other?.name ?? ref.id}" (${ref.path}); change or delete that first`,
  );
}

/** 409: the kind already has one with this identity (a create says where: "in this project"). */
const taken = (k: KindRoutes, identity: string, where = '') => alreadyExists(capitalised(k.a), k.d.identity, identity, where);

/** The audit log's project of a write: a project's own writes are in that project. */
const auditProject = (k: KindRoutes, projectId: string, id: string) => projectId || (k.d.scopeContainer ? id : null);

// --- Reads --------------------------------------------------------------------------------------

export async function handleList(k: KindRoutes, req: FastifyRequest, reply: FastifyReply) {
  const { ctx, d } = k;
  // Rows of the project prove it exists: only an empty page asks the store (one round trip fewer per list).
  const projectId = d.scope === 'project' ? projectInReach(req) : '';
  const tenantId = req.tenant!.id;
  const { limit, cursor } = req.query as { limit: number; cursor?: string };
  const scope = `${tenantId}:${projectId}:${d.kind}`;
  const afterSeq = ctx.cursors.decode(scope, cursor);
  const keyOnly = req.actor?.type === 'api_key' && k.behaviour.visibleToKey;
  const page = async () => {
    const bounded = keyOnly
      ? { page: ownPage(await ctx.resources.get(tenantId, projectId, d.kind, req.actor!.projectId!), afterSeq), limit }
      : await ctx.resources.listPage({ tenantId, projectId, kind: d.kind, afterSeq }, limit, PAGE_BYTES);
    if (d.scope === 'project' && bounded.page.count === 0) await assertProjectExists(ctx, req, projectId);
    return toJsonPage(bounded.page, bounded.limit, scope, ctx.cursors);
  };
  reply.type('application/json');
  // A page of a scope holding large resources (up to PAGE_BYTES) waits for the tenant's turn; other pages go straight on.
  // The store's own marks: a map lookup (a primary-key probe when not known yet, which listPage then finds known).
  return !keyOnly && (await ctx.resources.isLargeScope({ tenantId, projectId, kind: d.kind })) ? largePage(ctx, tenantId, page) : page();
}

/** The one item a project key sees of its own kind (its project), as a page. */
function ownPage(own: StoredResource | undefined, afterSeq: number): JsonPage {
  return own && own.seq > afterSeq ? { count: 1, lastSeq: own.seq, items: JSON.stringify(own.data) } : { count: 0, lastSeq: 0, items: '' };
}

export async function handleGet(k: KindRoutes, req: FastifyRequest) {
  const projectId = await scopeOf(k, req);
  return (await load(k, req, projectId)).data;
}

// --- Create -------------------------------------------------------------------------------------

/** In the write transaction: references, the name, the kind's own work, then the insert. Returns what is shown once. */
async function insertDraft(k: KindRoutes, w: WriteContext, id: string, identity: string, draft: Draft) {
  const { ctx, d, behaviour } = k;
  const { tenantId, projectId } = w;
  const where = d.scope === 'project' ? 'in this project' : '';
  await checkReferences(k, tenantId, projectId, draft.data, w.q);
  await assertRoomInScope(ctx, w.q, d, tenantId, projectId);
  // A kind whose beforeCreate writes (a key's hash, a password) checks the name first, so a
  // duplicate does no work; the others let the insert itself say the name is taken.
  if (behaviour.beforeCreate && (await ctx.resources.getByName(tenantId, projectId, d.kind, identity, w.q)))
    throw taken(k, identity, where);
  const shownOnce = await behaviour.beforeCreate?.(draft, w);
  draft.data = ordered(d, draft.data);
  let created: boolean;
  try {
    created = await ctx.resources.create(
      { id, tenantId, projectId, kind: d.kind, parentId: '', name: identity, data: draft.data, secrets: draft.secrets },
      w.q,
    );
  } catch (err) {
    if (isUniqueViolation(err)) throw taken(k, identity, where);
    throw err;
  }
  if (!created) throw taken(k, identity, where);
  return shownOnce ?? {};
}

export async function handleCreate(k: KindRoutes, req: FastifyRequest, reply: FastifyReply) {
  const { ctx, d, behaviour } = k;
  const projectId = await scopeOf(k, req);
  assertKeyMayWrite(k, req, null);
  const tenantId = req.tenant!.id;
  const draft = createDraft(d, bodyOf(req));
  await behaviour.validate?.(draft, { ctx, tenantId, projectId });
  const now = nowIso(ctx.options.clock);
  const id = newId(d.kind);
  draft.data = { ...initialComputed(d, id, projectId, now), ...draft.data };
  const identity = String(draft.data[d.identity]);
  req.auditDetails = { projectId: projectId || null, resourceName: identity };
  const extras = await writeTx(k, req, projectId, null, (w) => insertDraft(k, w, id, identity, draft));
  req.auditDetails = {
    projectId: auditProject(k, projectId, id),
    resourceId: id,
    resourceName: identity,
    diff: auditDiff(null, draft.data, draft.secrets ? mergeSecrets(null, draft.secrets).changed : []),
  };
  reply.code(201);
  return ordered(d, { ...draft.data, ...extras });
}

// --- Update -------------------------------------------------------------------------------------

/**
 * In the write transaction: the PATCH merged into what is stored now, checked, and written.
 * The merge is made under the write lock, on what is stored then, so concurrent PATCHes of
 * different fields all land instead of the last one writing back a stale copy.
 */
async function patchStored(k: KindRoutes, w: WriteContext, id: string, body: Record<string, unknown>) {
  const { ctx, d, behaviour } = k;
  const { tenantId, projectId } = w;
  const existing = await ctx.resources.get(tenantId, projectId, d.kind, id, w.q);
  if (!existing) throw notFound(d.title);
  const { draft, changed } = patchDraft(d, existing, body);
  await behaviour.validate?.(draft, { ctx, tenantId, projectId });
  const identity = String(draft.data[d.identity]);
  await checkReferences(k, tenantId, projectId, draft.data, w.q);
  if (identity !== existing.name && (await ctx.resources.getByName(tenantId, projectId, d.kind, identity, w.q))) {
    throw taken(k, identity);
  }
  await behaviour.beforeUpdate?.(draft, existing, w);
  if (d.computedFields.includes('updated_at')) draft.data.updated_at = nowIso(ctx.options.clock);
  draft.data = ordered(d, draft.data);
  // What the update adds, measured only near the limit: an update that does not grow always passes.
  await assertStorageRoom(
    ctx,
    w.q,
    tenantId,
    bodyBytes(w.req),
    () => JSON.stringify(draft.data).length - JSON.stringify(existing.data).length,
  );
  try {
    await ctx.resources.update({ ...existing, name: identity, data: draft.data, secrets: draft.secrets }, w.q);
  } catch (err) {
    if (isUniqueViolation(err)) throw taken(k, identity);
    throw err;
  }
  return { existing, draft, changed, identity };
}

export async function handleUpdate(k: KindRoutes, req: FastifyRequest) {
  const projectId = await scopeOf(k, req);
  const found = await load(k, req, projectId);
  assertKeyMayWrite(k, req, found);
  req.auditDetails = { projectId: auditProject(k, projectId, found.id), resourceId: found.id, resourceName: found.name };
  const body = bodyOf(req);
  applyNormalizers(k.d, body);
  const { existing, draft, changed, identity } = await writeTx(k, req, projectId, found, (w) => patchStored(k, w, found.id, body), false);
  req.auditDetails.resourceName = identity;
  req.auditDetails.diff = auditDiff(existing.data, draft.data, changed);
  return draft.data;
}

// --- Delete -------------------------------------------------------------------------------------

export async function handleDelete(k: KindRoutes, req: FastifyRequest, reply: FastifyReply) {
  const { ctx } = k;
  const projectId = await scopeOf(k, req);
  const existing = await load(k, req, projectId);
  assertKeyMayWrite(k, req, existing);
  req.auditDetails = {
    projectId: auditProject(k, projectId, existing.id),
    resourceId: existing.id,
    resourceName: existing.name,
    diff: auditDiff(existing.data, null),
  };
  await k.behaviour.emptyBeforeDelete?.(existing, { ctx, tenantId: req.tenant!.id });
  await writeTx(
    k,
    req,
    projectId,
    existing,
    async (w) => {
      await checkNotReferenced(k, existing, w.q);
      await k.behaviour.beforeDelete?.(existing, w);
      await ctx.resources.delete(existing, w.q);
      await ctx.resources.deleteChildren(
        { tenantId: existing.tenantId, projectId: existing.projectId, parentId: existing.id },
        OWNED_KINDS,
        w.q,
      );
    },
    false,
  );
  reply.code(204);
  return null;
}
