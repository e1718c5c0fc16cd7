import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../context.js';
import { kind } from '../../kinds/index.js';
import { errorResponses, pageQuerySchema, pageSchema } from './crud.js';
import { resolveProject } from './scope.js';
import { PAGE_BYTES, SCAN_WINDOW, toPage } from '../pagination.js';
import { invalid } from '../errors.js';
import { toStoredTimestamp } from '../../kinds/timestamps.js';
import { planEachTime, type SqlValue } from '../store/db.js';
import { scanWindowEnd, scopeRange, type ScopeRange, type SeqPosition } from '../store/keyset.js';
import { byteBound, type SizedRows } from '../store/large-scopes.js';

interface AuditRow {
  seq: number;
  id: string;
  ts: string;
  project_id: string | null;
  actor_type: string;
  actor_id: string | null;
  actor_name: string | null;
  action: string;
  resource_type: string;
  resource_id: string | null;
  resource_name: string | null;
  request_id: string;
  outcome: string;
  status_code: number;
  diff: string | null;
  /** The `seq` of the entry after the page, if one follows (the same on every row). */
  next_seq: number | null;
}

const FILTERS = {
  action: { type: 'string', description: 'Exact action, e.g. connector.create' },
  actor: { type: 'string', description: 'Actor id (user or API key id) or name (email)' },
  resource_type: { type: 'string', description: 'e.g. connector' },
  resource_id: { type: 'string', description: 'One resource: its entries only, found through their own index' },
  outcome: { type: 'string', enum: ['success', 'failure'] },
  since: { type: 'string', format: 'date-time', description: 'Entries at or after this time' },
  until: { type: 'string', format: 'date-time', description: 'Entries before this time' },
};

/**
 * The filters a page's cursor is bound to, by position: those of the first release, then each one
 * added since, only when it is set. A cursor an older release issued (same database, same key)
 * still reads on this one, and the other way round, during a rolling upgrade behind one address;
 * naming every filter changed every cursor when `resource_id` came. Cursors of that one release
 * (every filter by position) are still read.
 */
const FIRST_FILTERS: readonly string[] = ['action', 'actor', 'resource_type', 'outcome', 'since', 'until'];
const ADDED_FILTERS = Object.keys(FILTERS).filter((k) => !FIRST_FILTERS.includes(k));
const cursorFilterKeys = (query: Record<string, string | undefined>) => ({
  current: JSON.stringify([
    ...FIRST_FILTERS.map((k) => query[k] ?? null),
    ...ADDED_FILTERS.filter((k) => query[k]).map((k) => `${k}=${query[k]}`),
  ]),
  everyByPosition: JSON.stringify(Object.keys(FILTERS).map((k) => query[k] ?? null)),
});

/**
 * What an audit page's bytes are counted on: an entry's diff, which holds whole before and after
 * values (a connector naming 10,000 tables: about 1 MB each side), so a page of 100 could be
 * 100 MB or more. The other columns are a few hundred bytes.
 */
const AUDIT_ROWS: SizedRows = { table: 'audit_logs', size: 'coalesce(octet_length(diff), 0)' };

/**
 * The project's audit log (spec), and the tenant's whole log for admin users (extension:
 * user and project changes belong to no project, so only this one shows them).
 */
export function registerAuditLogRoutes(app: FastifyInstance, ctx: ServiceContext) {
  registerAuditLogRoute(app, ctx, 'project');
  if (!ctx.options.strictSpec) registerAuditLogRoute(app, ctx, 'tenant');
}

function registerAuditLogRoute(app: FastifyInstance, ctx: ServiceContext, level: 'project' | 'tenant') {
  const tenantWide = level === 'tenant';
  app.get(
    tenantWide ? '/api/v1/audit-logs' : '/api/v1/projects/:id/audit-logs',
    {
      // The tenant's log shows every project and user: not for a key bound to one project.
      config: { settings: { permission: tenantWide ? 'admin' : 'read-only', keys: tenantWide ? 'never' : 'own-project' } },
      schema: {
        tags: ['Governance'],
        summary: tenantWide ? 'Query the audit log of the whole tenant (admin users)' : 'Query the audit log of a project',
        operationId: tenantWide ? 'list_tenant_audit_logs' : 'list_audit_logs',
        ...(tenantWide ? { 'x-extension': true } : { params: { type: 'object', properties: { id: { type: 'string' } } } }),
        querystring: { ...pageQuerySchema, properties: { ...pageQuerySchema.properties, ...FILTERS } },
        response: { 200: pageSchema(kind('audit_log_entry').responseSchema), ...errorResponses },
      },
    },
    async (req) => {
      const projectId = tenantWide ? null : await resolveProject(ctx, req);
      const query = req.query as Record<string, string> & { limit: number; cursor?: string };
      // Compared as instants: the same time can be written with different offsets.
      const since = query.since ? toStoredTimestamp(query.since) : undefined;
      const until = query.until ? toStoredTimestamp(query.until) : undefined;
      if (since && until && since >= until) throw invalid('until', 'must be after since');
      const filterKeys = cursorFilterKeys(query);
      const scopeOf = (filterKey: string) => `${req.tenant!.id}:${projectId ?? '*'}:audit:${filterKey}`;
      const scope = scopeOf(filterKeys.current);
      const afterSeq = ctx.cursors.decode([scope, scopeOf(filterKeys.everyByPosition)], query.cursor);
      const filters: [clause: string, values: SqlValue[]][] = [];
      if (query.action) filters.push(['action = ?', [query.action]]);
      if (query.actor) filters.push(['(actor_id = ? OR actor_name = ?)', [query.actor, query.actor]]);
      if (query.resource_type) filters.push(['resource_type = ?', [query.resource_type]]);
      if (query.outcome) filters.push(['outcome = ?', [query.outcome]]);
      if (since) filters.push(['ts >= ?', [since]]);
      if (until) filters.push(['ts < ?', [until]]);
      // The tenant's (or project's) own index range, whatever the plan (store/keyset.ts). One resource's
      // entries have their own (migration 15): "what happened to connector X" in a tenant of 100,000
      // resources walked the whole log, 1,000 pages; the project, if any, is then a filter.
      const scopeColumns: [string, SqlValue][] = query.resource_id
        ? [
            ['tenant_id', req.tenant!.id],
            ['resource_id', query.resource_id],
          ]
        : tenantWide
          ? [['tenant_id', req.tenant!.id]]
          : [
              ['tenant_id', req.tenant!.id],
              ['project_id', projectId],
            ];
      if (query.resource_id && !tenantWide) filters.push(['project_id = ?', [projectId]]);
      const after = { value: afterSeq };
      // A filtered page examines at most SCAN_WINDOW entries; where they end bounds the page's index
      // scan (a filter on seq would not stop it).
      const windowEnd =
        filters.length > 0
          ? await scanWindowEnd(ctx.db, 'audit_logs', scopeRange(ctx.db, scopeColumns, { after }), SCAN_WINDOW)
          : undefined;
      const windowBefore = windowEnd === undefined ? undefined : { value: windowEnd + 1 };
      /** The entries of the tenant's (or project's) own index range between two positions that pass the filters. */
      const matching = (bounds: { after: SeqPosition; before?: SeqPosition }): ScopeRange => {
        const range = scopeRange(ctx.db, scopeColumns, bounds);
        return {
          ...range,
          sql: [range.sql, ...filters.map(([clause]) => clause)].join(' AND '),
          params: [...range.params, ...filters.flatMap(([, values]) => values)],
        };
      };
      // The page also ends at PAGE_BYTES of entries, with at least one, through the byte bound of lists
      // of large resources (store/large-scopes.ts): 100 entries of a connector naming 10,000 tables
      // were a 97 MB answer. `end` is just past the page's last entry; whether one follows is read in
      // the same statement, through the same index range, from there.
      const end = byteBound(matching({ after, before: windowBefore }), query.limit, PAGE_BYTES, AUDIT_ROWS);
      const range = matching({ after, before: end });
      const rest = matching({ after: { sql: `(${end.sql}) - 1`, params: end.params }, before: windowBefore });
      const next = `(SELECT seq FROM audit_logs WHERE ${rest.sql} ORDER BY ${rest.order} LIMIT 1)`;
      // Planned with its values: a project's page has two indexes that give its order, the project's and
      // the tenant's, and a generic plan (chosen without the values) took the tenant's, which reads the
      // tenant's other projects' entries too (store/keyset.ts overRange).
      const rows = await ctx.db.all<AuditRow>(
        planEachTime(`SELECT *, ${next} AS next_seq FROM audit_logs WHERE ${range.sql} ORDER BY ${range.order} LIMIT ?`),
        [...rest.params, ...range.params, query.limit],
      );
      // A page holds at most `limit` entries: when one more follows (past the limit, or past the bytes),
      // the cursor goes on from the last one returned, as toPage does with limit + 1 rows.
      const last = rows.at(-1);
      const cutAfter = last && last.next_seq !== null ? Number(last.seq) : undefined;
      return toPage(
        rows.map((r) => ({ ...r, seq: Number(r.seq) })),
        query.limit,
        scope,
        ctx.cursors,
        (r) => ({
          id: r.id,
          timestamp: r.ts,
          project_id: r.project_id,
          actor: { type: r.actor_type, id: r.actor_id, name: r.actor_name },
          action: r.action,
          resource_type: r.resource_type,
          resource_id: r.resource_id,
          resource_name: r.resource_name,
          request_id: r.request_id,
          outcome: r.outcome,
          status_code: Number(r.status_code),
          diff: r.diff ? JSON.parse(r.diff) : null,
        }),
        cutAfter ?? windowEnd,
      );
    },
  );
}
