import type { FastifyInstance, FastifyRequest } from 'fastify';
import { KINDS, formatPath, valuesAt, deleteAt, setAt, type KindDescriptor, type JsonSchema, type Operation } from '../../kinds/index.js';
import { normalizeCron } from '../../kinds/cron.js';
import { dagProblems } from '../../kinds/dag.js';
import { createAjv, toFieldErrors } from '../../kinds/validator.js';
import type { ServiceContext, RouteSettings, KeyReach } from '../context.js';
import { ApiError, conflict, forbidden, notFound, unprocessable, unauthorized } from '../errors.js';
import { newId, nowIso } from '../ids.js';
import { toJsonPage, DEFAULT_LIMIT, MAX_LIMIT } from '../pagination.js';
import type { StoredResource } from '../store/resources.js';
import type { Queryable } from '../store/db.js';
import { auditDiff } from '../audit.js';
import { BEHAVIOURS, type Draft } from '../behaviours/index.js';
import { assertProjectExists, projectInReach, resolveProject } from './scope.js';

export const ERROR_REF = { $ref: 'ErrorEnvelope#' };
export const errorResponses = { '4xx': ERROR_REF, '5xx': ERROR_REF };

export const pageQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: `Items per page (1-${MAX_LIMIT}).` },
    cursor: { type: 'string', description: 'next_cursor of the previous page.' },
  },
};

export const pageSchema = (items: JsonSchema) => ({
  type: 'object',
  description: `A page of ${items.title ?? 'item'} resources, in creation order`,
  required: ['data', 'has_more'],
  properties: { data: { type: 'array', items }, next_cursor: { type: 'string' }, has_more: { type: 'boolean' } },
});

const isUniqueViolation = (err: unknown) => {
  const e = err as { code?: string };
  return e.code === 'SQLITE_CONSTRAINT_UNIQUE' || e.code === '23505';
};

/** Validates a whole object after a PATCH merge, so rules between fields (if/then) still hold. */
const mergedAjv = createAjv();

/** Kinds stored under the resource that made them (runs, discovered schemas): deleted with it. */
const OWNED_KINDS = [...KINDS.values()].filter((d) => d.deletedWithParent).map((d) => d.kind);

/** Kinds that reference `target`, with where: the places that block its deletion. */
function referrersOf(target: string) {
  return [...KINDS.values()].flatMap((d) => d.references.filter((r) => r.kind === target).map((r) => ({ kind: d, path: r.path })));
}

function applyNormalizers(d: KindDescriptor, data: Record<string, unknown>) {
  for (const n of d.normalizers) {
    for (const { path, value } of valuesAt(data, n.path)) {
      if (typeof value !== 'string') continue;
      setAt(data, path, n.rule === 'lowercase' ? value.trim().toLowerCase() : normalizeCron(value));
    }
  }
}

/** Moves write-only values out of the body; they are stored apart and never returned. */
function splitSecrets(d: KindDescriptor, body: Record<string, unknown>): Draft {
  let secrets: Record<string, unknown> | null = null;
  for (const path of d.secretPaths) {
    for (const found of valuesAt(body, path)) {
      if (found.value === undefined) continue;
      secrets ??= {};
      setAt(secrets, found.path, found.value);
    }
    deleteAt(body, path);
  }
  return { data: body, secrets };
}

function mergeSecrets(
  old: Record<string, unknown> | null,
  next: Record<string, unknown> | null,
): { merged: Record<string, unknown> | null; changed: string[] } {
  const changed: string[] = [];
  const merged = structuredClone(old ?? {});
  const walk = (src: Record<string, unknown>, dst: Record<string, unknown>, prefix: string[]) => {
    for (const [key, value] of Object.entries(src)) {
      if (value && typeof value === 'object' && !Array.isArray(value)) {
        dst[key] ??= {};
        walk(value as Record<string, unknown>, dst[key] as Record<string, unknown>, [...prefix, key]);
      } else {
        if (dst[key] !== value) changed.push(formatPath([...prefix, key]));
        dst[key] = value;
      }
    }
  };
  walk(next ?? {}, merged, []);
  return { merged: Object.keys(merged).length ? merged : null, changed };
}

/** Pipeline steps and dbt models (x-dag) must form a DAG; the first problem is named. */
function checkDags(d: KindDescriptor, data: Record<string, unknown>) {
  const [problem] = dagProblems(d.dags, data);
  if (problem) throw unprocessable(`${problem.field}: ${problem.message}`, [problem]);
}

/** PATCH with null: the field goes back to its schema default, or away; secrets under it go too. */
function clearField(d: KindDescriptor, draft: Draft, field: string) {
  const fallback = d.schema.properties?.[field]?.default;
  if (fallback !== undefined) draft.data[field] = structuredClone(fallback);
  else delete draft.data[field];
  if (draft.secrets && field in draft.secrets) {
    delete draft.secrets[field];
    if (!Object.keys(draft.secrets).length) draft.secrets = null;
  }
}

/** The full object, secrets included, that rules across fields are checked against. */
function withSecrets(draft: Draft): Record<string, unknown> {
  const out = structuredClone(draft.data);
  const walk = (src: Record<string, unknown>, prefix: string[]) => {
    for (const [key, value] of Object.entries(src)) {
      if (value && typeof value === 'object' && !Array.isArray(value)) walk(value as Record<string, unknown>, [...prefix, key]);
      else setAt(out, [...prefix, key], value);
    }
  };
  walk(draft.secrets ?? {}, []);
  return out;
}

async function checkReferences(
  ctx: ServiceContext,
  d: KindDescriptor,
  tenantId: string,
  projectId: string,
  data: Record<string, unknown>,
  q: Queryable,
) {
  const details: { field: string; message: string }[] = [];
  for (const ref of d.references) {
    for (const { path, value } of valuesAt(data, ref.path)) {
      if (typeof value !== 'string') continue;
      if (!(await ctx.resources.get(tenantId, projectId, ref.kind, value, q))) {
        details.push({
          field: formatPath(path),
          message: `no ${KINDS.get(ref.kind)?.title.toLowerCase() ?? ref.kind} with id "${value}" in this project`,
        });
      }
    }
  }
  if (details.length) throw unprocessable(`References to missing resources: ${details.map((x) => x.field).join(', ')}`, details);
}

async function checkNotReferenced(ctx: ServiceContext, d: KindDescriptor, existing: StoredResource, q: Queryable) {
  const referrers = referrersOf(d.kind);
  if (!referrers.length || d.scope !== 'project') return;
  const candidates = await ctx.resources.allOfKinds(
    existing.tenantId,
    existing.projectId,
    [...new Set(referrers.map((r) => r.kind.kind))],
    q,
  );
  for (const other of candidates) {
    for (const r of referrers.filter((x) => x.kind.kind === other.kind)) {
      const hit = valuesAt(other.data, r.path).find((v) => v.value === existing.id);
      if (hit)
        throw conflict(
          `${d.title} "${existing.name}" is used by ${r.kind.title.toLowerCase()} "${other.name}" (${formatPath(hit.path)}); change or delete that first`,
        );
    }
  }
}

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
  ctx: ServiceContext,
  q: Queryable,
  tenantId: string,
  id: string,
  mode: 'update' | 'share' = 'update',
): Promise<boolean> {
  const sql = 'SELECT 1 AS ok FROM resources WHERE id = ? AND tenant_id = ?';
  return !!(await q.get(ctx.db.dialect === 'postgres' ? `${sql} ${mode === 'share' ? 'FOR SHARE' : 'FOR UPDATE'}` : sql, [id, tenantId]));
}

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

export function registerKindRoutes(app: FastifyInstance, ctx: ServiceContext, d: KindDescriptor): void {
  const behaviour = BEHAVIOURS[d.kind] ?? {};
  const strict = ctx.options.strictSpec;
  const bases: { path: string; extension: boolean }[] =
    d.scope === 'project'
      ? [
          { path: `/api/v1/projects/:id/${d.collection}`, extension: false },
          { path: `/api/v1/${d.collection}`, extension: true },
        ]
      : [{ path: `/api/v1/${d.collection}`, extension: false }];
  const tag = d.title;
  const unprefixedTag = 'Unprefixed paths (API key project)';
  const a = `${/^[aeiou]/i.test(d.title) ? 'an' : 'a'} ${d.title.toLowerCase()}`;
  const idParam = { resourceId: { type: 'string', description: `${d.title} id` } };
  const projectParam = { id: { type: 'string', description: 'Project id' } };

  // A key reaches what is in its project, and of the tenant-level kinds only what visibleToKey
  // shows it (its own project); the rest of the tenant (users, SSO providers) is not for keys.
  const keys: KeyReach = d.scope === 'project' || behaviour.visibleToKey ? 'own-project' : 'never';
  const scopeOf = (req: FastifyRequest) => (d.scope === 'project' ? resolveProject(ctx, req) : Promise.resolve(''));
  const visible = (req: FastifyRequest, r: StoredResource) =>
    !(req.actor?.type === 'api_key' && behaviour.visibleToKey && !behaviour.visibleToKey(req.actor, r));
  const load = async (req: FastifyRequest, projectId: string) => {
    const { resourceId } = req.params as { resourceId: string };
    const found = await ctx.resources.get(req.tenant!.id, projectId, d.kind, resourceId);
    if (!found || !visible(req, found)) throw notFound(d.title);
    return found;
  };
  /**
   * API keys are bound to one project, so tenant-level kinds (projects, users) are not
   * theirs to change, except what visibleToKey grants on update (their own project's settings).
   */
  const assertKeyMayWrite = (req: FastifyRequest, existing: StoredResource | null) => {
    const actor = req.actor;
    if (actor?.type !== 'api_key' || d.scope !== 'tenant') return;
    if (req.method === 'PATCH' && existing && behaviour.visibleToKey?.(actor, existing)) return;
    const verb = req.method === 'POST' ? 'creating' : req.method === 'PATCH' ? 'changing' : 'deleting';
    throw forbidden(`API keys are limited to their project; ${verb} ${d.title.toLowerCase()}s needs a user token`);
  };
  /** `existing`: the resource an update or delete is about; a tenant-level one is locked itself. */
  // A create of a kind without references shares the project lock (see lockRow).
  const createLock = d.references.length === 0 ? 'share' : 'update';
  const writeTx = async <T>(
    req: FastifyRequest,
    projectId: string,
    existing: StoredResource | null,
    fn: (w: Parameters<NonNullable<typeof behaviour.beforeCreate>>[1]) => Promise<T>,
  ) =>
    ctx.db.tx(async (q) => {
      // A key revoked or a session ended while this request was in flight must not write. The two
      // checks are independent reads, issued together (one round trip on PostgreSQL, pipelined),
      // and answered in the same order as before: revoked first, then the missing row.
      const lock =
        d.scope === 'project'
          ? lockRow(ctx, q, req.tenant!.id, projectId, existing ? 'update' : createLock)
          : existing
            ? lockRow(ctx, q, req.tenant!.id, existing.id)
            : Promise.resolve(true);
      const [valid, locked] = await Promise.allSettled([ctx.auth.stillValid(req.actor!, q), lock]);
      if (valid.status === 'rejected') throw valid.reason;
      if (!valid.value) throw unauthorized('Credential was revoked during the request');
      if (locked.status === 'rejected') throw locked.reason;
      if (!locked.value) throw d.scope === 'project' ? notFound('Project') : notFound(d.title);
      return fn({ ctx, req, tenantId: req.tenant!.id, projectId, actor: req.actor!, q });
    });

  for (const base of bases) {
    const extensionBase = base.extension;
    if (strict && extensionBase) continue;
    const params = (withId: boolean) => ({
      type: 'object',
      properties: { ...(base.path.includes(':id') ? projectParam : {}), ...(withId ? idParam : {}) },
    });
    const route = (op: Operation, settings: RouteSettings) => {
      const extension = extensionBase || !d.specOperations.includes(op);
      if (strict && extension) return null;
      return {
        config: { settings },
        schema: {
          tags: [extensionBase ? unprefixedTag : tag],
          operationId: `${op}_${d.kind}${extensionBase ? '_unprefixed' : ''}`,
          ...(extension ? { 'x-extension': true } : {}),
        } as Record<string, unknown>,
      };
    };
    const readSettings: RouteSettings = { permission: d.readPermission, keys };
    const writeSettings = (op: string): RouteSettings => ({
      permission: d.writePermission,
      keys,
      audit: { resourceType: d.kind, action: `${d.kind}.${op}` },
    });

    if (d.operations.includes('list')) {
      const r = route('list', readSettings);
      if (r)
        app.get(
          base.path,
          {
            ...r,
            schema: {
              ...r.schema,
              summary: `List ${d.title.toLowerCase()}s`,
              params: params(false),
              querystring: pageQuerySchema,
              response: { 200: pageSchema(d.responseSchema), ...errorResponses },
            },
          },
          async (req, reply) => {
            // Rows of the project prove it exists: only an empty page asks the store (one round trip fewer per list).
            const projectId = d.scope === 'project' ? projectInReach(req) : '';
            const { limit, cursor } = req.query as { limit: number; cursor?: string };
            const scope = `${req.tenant!.id}:${projectId}:${d.kind}`;
            const afterSeq = ctx.cursors.decode(scope, cursor);
            const keyOnly = req.actor?.type === 'api_key' && behaviour.visibleToKey;
            const rows = keyOnly
              ? [await ctx.resources.get(req.tenant!.id, projectId, d.kind, req.actor!.projectId!)]
                  .filter((x): x is StoredResource => !!x && x.seq > afterSeq)
                  .map((x) => ({ seq: x.seq, data: JSON.stringify(x.data) }))
              : await ctx.resources.listJson({ tenantId: req.tenant!.id, projectId, kind: d.kind, afterSeq, limit: limit + 1 });
            if (d.scope === 'project' && rows.length === 0) await assertProjectExists(ctx, req, projectId);
            reply.type('application/json');
            return toJsonPage(rows, limit, scope, ctx.cursors);
          },
        );
    }

    if (d.operations.includes('create')) {
      const r = route('create', writeSettings('create'));
      if (r)
        app.post(
          base.path,
          {
            ...r,
            schema: {
              ...r.schema,
              summary: `Create ${a}`,
              params: params(false),
              body: d.createSchema,
              response: { 201: d.responseSchema, ...errorResponses },
            },
          },
          async (req, reply) => {
            const projectId = await scopeOf(req);
            assertKeyMayWrite(req, null);
            const tenantId = req.tenant!.id;
            const body = structuredClone(req.body as Record<string, unknown>);
            applyNormalizers(d, body);
            const draft = splitSecrets(d, body);
            checkDags(d, draft.data);
            await behaviour.validate?.(draft, { ctx, tenantId, projectId });
            const now = nowIso(ctx.options.clock);
            const id = newId(d.kind);
            draft.data = { ...initialComputed(d, id, projectId, now), ...draft.data };
            const identity = String(draft.data[d.identity]);
            req.auditDetails = { projectId: projectId || null, resourceName: identity };
            const taken = () =>
              conflict(
                `${a[0].toUpperCase()}${a.slice(1)} with ${d.identity} "${identity}" already exists${d.scope === 'project' ? ' in this project' : ''}`,
              );
            const extras = await writeTx(req, projectId, null, async (w) => {
              await checkReferences(ctx, d, tenantId, projectId, draft.data, w.q);
              // A kind whose beforeCreate writes (a key's hash, a password) checks the name first, so a
              // duplicate does no work; the others let the insert itself say the name is taken.
              if (behaviour.beforeCreate && (await ctx.resources.getByName(tenantId, projectId, d.kind, identity, w.q))) throw taken();
              const shownOnce = await behaviour.beforeCreate?.(draft, w);
              draft.data = ordered(d, draft.data);
              let created: boolean;
              try {
                created = await ctx.resources.create(
                  { id, tenantId, projectId, kind: d.kind, parentId: '', name: identity, data: draft.data, secrets: draft.secrets },
                  w.q,
                );
              } catch (err) {
                if (isUniqueViolation(err)) throw taken();
                throw err;
              }
              if (!created) throw taken();
              return shownOnce ?? {};
            });
            req.auditDetails = {
              projectId: projectId || (d.kind === 'project' ? id : null),
              resourceId: id,
              resourceName: identity,
              diff: auditDiff(null, draft.data, draft.secrets ? mergeSecrets(null, draft.secrets).changed : []),
            };
            reply.code(201);
            return ordered(d, { ...draft.data, ...extras });
          },
        );
    }

    if (d.operations.includes('get')) {
      const r = route('get', readSettings);
      if (r)
        app.get(
          `${base.path}/:resourceId`,
          {
            ...r,
            schema: { ...r.schema, summary: `Get ${a}`, params: params(true), response: { 200: d.responseSchema, ...errorResponses } },
          },
          async (req) => {
            const projectId = await scopeOf(req);
            return (await load(req, projectId)).data;
          },
        );
    }

    if (d.operations.includes('update')) {
      const r = route('update', writeSettings('update'));
      if (r)
        app.patch(
          `${base.path}/:resourceId`,
          {
            ...r,
            schema: {
              ...r.schema,
              summary: `Update ${a}`,
              description:
                'Fields given replace the stored ones; omitted fields are kept; null clears an optional field (back to its default). Write-only secrets omitted from a nested object keep their stored value.',
              params: params(true),
              body: d.updateSchema,
              response: { 200: d.responseSchema, ...errorResponses },
            },
          },
          async (req) => {
            const projectId = await scopeOf(req);
            const tenantId = req.tenant!.id;
            const found = await load(req, projectId);
            assertKeyMayWrite(req, found);
            req.auditDetails = {
              projectId: projectId || (d.kind === 'project' ? found.id : null),
              resourceId: found.id,
              resourceName: found.name,
            };
            const body = structuredClone(req.body as Record<string, unknown>);
            applyNormalizers(d, body);
            // The merge is made under the write lock, on what is stored then, so concurrent PATCHes of
            // different fields all land instead of the last one writing back a stale copy.
            const { existing, draft, changed, identity } = await writeTx(req, projectId, found, async (w) => {
              const existing = await ctx.resources.get(tenantId, projectId, d.kind, found.id, w.q);
              if (!existing) throw notFound(d.title);
              const immutable = d.immutableFields.filter((f) => f in body && JSON.stringify(body[f]) !== JSON.stringify(existing.data[f]));
              if (immutable.length) {
                throw unprocessable(
                  `${immutable.join(', ')} cannot change; delete and re-create the ${d.title.toLowerCase()} instead`,
                  immutable.map((field) => ({ field, message: 'is immutable' })),
                );
              }
              const incoming = splitSecrets(d, body);
              const { merged, changed } = mergeSecrets(existing.secrets, incoming.secrets);
              const draft: Draft = { data: { ...existing.data }, secrets: merged };
              for (const [field, value] of Object.entries(incoming.data)) {
                if (value !== null) draft.data[field] = value;
                else clearField(d, draft, field);
              }
              const check = mergedAjv.compile(d.createSchema);
              const full = withSecrets(draft);
              for (const f of d.computedFields) delete full[f];
              if (!check(full)) {
                const details = toFieldErrors(check.errors);
                throw new ApiError(
                  'validation_error',
                  `The updated ${d.title.toLowerCase()} is invalid: ${details.map((x) => `${x.field} ${x.message}`).join('; ')}`,
                  details,
                );
              }
              checkDags(d, draft.data);
              await behaviour.validate?.(draft, { ctx, tenantId, projectId });
              const identity = String(draft.data[d.identity]);
              await checkReferences(ctx, d, tenantId, projectId, draft.data, w.q);
              if (identity !== existing.name && (await ctx.resources.getByName(tenantId, projectId, d.kind, identity, w.q))) {
                throw conflict(`${a[0].toUpperCase()}${a.slice(1)} with ${d.identity} "${identity}" already exists`);
              }
              await behaviour.beforeUpdate?.(draft, existing, w);
              if (d.computedFields.includes('updated_at')) draft.data.updated_at = nowIso(ctx.options.clock);
              draft.data = ordered(d, draft.data);
              try {
                await ctx.resources.update({ ...existing, name: identity, data: draft.data, secrets: draft.secrets }, w.q);
              } catch (err) {
                if (isUniqueViolation(err))
                  throw conflict(`${a[0].toUpperCase()}${a.slice(1)} with ${d.identity} "${identity}" already exists`);
                throw err;
              }
              return { existing, draft, changed, identity };
            });
            req.auditDetails.resourceName = identity;
            req.auditDetails.diff = auditDiff(existing.data, draft.data, changed);
            return draft.data;
          },
        );
    }

    if (d.operations.includes('delete')) {
      const r = route('delete', writeSettings('delete'));
      if (r)
        app.delete(
          `${base.path}/:resourceId`,
          {
            ...r,
            schema: {
              ...r.schema,
              summary: `Delete ${a}`,
              params: params(true),
              response: { 204: { type: 'null', description: 'Deleted' }, ...errorResponses },
            },
          },
          async (req, reply) => {
            const projectId = await scopeOf(req);
            const existing = await load(req, projectId);
            assertKeyMayWrite(req, existing);
            req.auditDetails = {
              projectId: projectId || (d.kind === 'project' ? existing.id : null),
              resourceId: existing.id,
              resourceName: existing.name,
              diff: auditDiff(existing.data, null),
            };
            await writeTx(req, projectId, existing, async (w) => {
              await checkNotReferenced(ctx, d, existing, w.q);
              await behaviour.beforeDelete?.(existing, w);
              await ctx.resources.delete(existing.id, w.q);
              await ctx.resources.deleteChildren(existing.tenantId, existing.id, OWNED_KINDS, w.q);
            });
            reply.code(204);
            return null;
          },
        );
    }
  }
}
