import { padToBucket, paramList, planEachTime, valuesList, type Db, type Queryable, type SqlValue } from './db.js';
import type { SecretCipher } from '../secrets/cipher.js';
import { SCHEDULED_KINDS, putNewSchedules, putSchedule, removeSchedule, scheduleOf, scheduleRow } from './schedules.js';
import { overRange, scanWindowEnd, scopeRange, type ScopeRange, type SeqPosition } from './keyset.js';
import { LargeScopes, byteBound } from './large-scopes.js';
import { firstReferrer, hasReferences, removeRefs, syncRefs } from './refs.js';

/** A turn of the event loop (between the batches of a large delete). */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Resources of a project deleted per transaction (emptyProject). */
const DELETE_BATCH = 2_000;

/** What the store needs to keep the `schedules` table (store/schedules.ts): the service clock and time scale. */
export interface ScheduleClock {
  nowMs: () => number;
  timeScale: number;
}

/**
 * What the store tells whoever wired it (server.ts), so it never reaches up to them: each hook is
 * called synchronously, at the point of the write named, inside the caller's transaction.
 */
export interface StoreHooks {
  /**
   * A project's contents (its API keys among them) are about to be deleted: the API key cache
   * (auth/key-cache.ts) stops answering for them at once, before the rows go.
   */
  projectContentsDeleted?(tenantId: string, projectId: string): void;
}

const INSERT_RESOURCES =
  'INSERT INTO resources (id, tenant_id, project_id, kind, parent_id, name, data, secrets, created_at, updated_at) VALUES';
const ROW_COLUMNS = 10;
const ROW_PLACEHOLDERS = valuesList(1, ROW_COLUMNS);
/** Ids per statement of getMany. */
const GET_MANY_IDS = 1_024;
/** Rows per statement of insertMany: 10 parameters each, far under SQLite's 32,766 per statement. */
const INSERT_ROWS = 64;

/** One stored resource of any kind. `data` is exactly what the API returns; secrets live apart. */
export interface StoredResource {
  seq: number;
  id: string;
  tenantId: string;
  projectId: string;
  kind: string;
  parentId: string;
  name: string;
  data: Record<string, unknown>;
  secrets: Record<string, unknown> | null;
}

interface Row {
  seq: number;
  id: string;
  tenant_id: string;
  project_id: string;
  kind: string;
  parent_id: string;
  name: string;
  data: string;
  secrets: string | null;
}

/** A page of stored JSON: `items` is the page's `data` texts joined by commas (at most the limit asked for). */
export interface JsonPage {
  /** Items on the page, plus one when more follow. */
  count: number;
  /** The `seq` of the page's last item (0 when empty). */
  lastSeq: number;
  items: string;
}

/** A page that may hold fewer items than asked for (it ended at its bytes): `limit` is what to compare `page.count` with. */
export interface BoundedPage {
  page: JsonPage;
  limit: number;
}

/** The children of one kind under one parent. */
export interface ChildScope {
  tenantId: string;
  projectId: string;
  kind: string;
  parentId: string;
}

export interface ListQuery {
  tenantId: string;
  projectId: string;
  kind: string;
  parentId?: string;
  /** Keyset pagination: only rows inserted after this one. */
  afterSeq?: number;
  /** The end of a scan window (scanWindowEnd), inclusive: no rows inserted after this one. */
  throughSeq?: number;
  limit: number;
  /** Equality filters on top-level fields of `data`. */
  where?: Record<string, string>;
}

const COLUMNS = 'seq, id, tenant_id, project_id, kind, parent_id, name, data, secrets';

/** The columns and values that scope a list (its index's leading columns: store/keyset.ts). */
function scopeColumns(q: { tenantId: string; projectId: string; kind: string; parentId?: string }): [string, SqlValue][] {
  const scope: [string, SqlValue][] = [
    ['tenant_id', q.tenantId],
    ['project_id', q.projectId],
    ['kind', q.kind],
  ];
  if (q.parentId !== undefined) scope.push(['parent_id', q.parentId]);
  return scope;
}

/** SQL for a top-level field of a resource's stored `data`, as text, in the store's dialect. */
export function jsonField(db: Pick<Db, 'dialect'>, field: string): string {
  if (!/^[a-z_]+$/.test(field)) throw new Error(`bad filter field ${field}`);
  return db.dialect === 'sqlite' ? `json_extract(data, '$.${field}')` : `(data::jsonb ->> '${field}')`;
}

/**
 * Generic persistence for every kind: the service never has a table per kind. Write-only
 * values (`secrets`) are sealed by the cipher on every write and opened on read, so they are
 * never in clear in the database files.
 */
export class ResourceStore {
  /** Scopes whose list pages also end at a number of bytes (store/large-scopes.ts). */
  private readonly largeScopes = new LargeScopes();

  constructor(
    private readonly db: Db,
    readonly cipher: SecretCipher,
    private readonly clock: ScheduleClock = { nowMs: Date.now, timeScale: 1 },
    private readonly hooks: StoreHooks = {},
  ) {}

  /**
   * Keeps the resource's `schedules` row in step with its data: set when a schedule appears or
   * changes (the next tick after now), removed when it is cleared. A write that leaves the schedule
   * as it was (a sync updating the connector's status) touches nothing, so the next due time stands.
   */
  private async syncSchedule(
    r: Pick<StoredResource, 'id' | 'tenantId' | 'projectId' | 'kind' | 'data'>,
    q: Queryable,
    isNew: boolean,
  ): Promise<void> {
    if (!SCHEDULED_KINDS.has(r.kind)) return;
    const expression = scheduleOf(r.kind, r.data);
    if (!isNew) {
      const current = await q.get<{ expression: string }>('SELECT expression FROM schedules WHERE resource_id = ?', [r.id]);
      if ((current?.expression ?? null) === expression) return;
    }
    if (expression) await putSchedule(q, r, expression, this.clock.nowMs(), this.clock.timeScale);
    else if (!isNew) await removeSchedule(q, r.id);
  }

  private fromRow(r: Row): StoredResource {
    return {
      seq: Number(r.seq),
      id: r.id,
      tenantId: r.tenant_id,
      projectId: r.project_id,
      kind: r.kind,
      parentId: r.parent_id,
      name: r.name,
      data: JSON.parse(r.data),
      secrets: r.secrets ? this.cipher.open(r.secrets, r.tenant_id, r.id) : null,
    };
  }

  private sealed(r: Pick<StoredResource, 'tenantId' | 'id' | 'secrets'>): string | null {
    return r.secrets ? this.cipher.seal(r.secrets, r.tenantId, r.id) : null;
  }

  private jsonField(field: string): string {
    return jsonField(this.db, field);
  }

  /**
   * The conditions and order of a list: its scope (with the parent, when given: resources_listing;
   * without: resources_kind_seq) and `seq` after a position (store/keyset.ts says why it is a range).
   */
  private listWhere(query: Omit<ListQuery, 'limit' | 'afterSeq'>, after: SeqPosition, end?: SeqPosition): ScopeRange {
    const scope = scopeColumns(query);
    const before = end ?? (query.throughSeq === undefined ? undefined : { value: query.throughSeq + 1 });
    const where = scopeRange(this.db, scope, { after, before });
    for (const [field, value] of Object.entries(query.where ?? {})) {
      where.sql += ` AND ${this.jsonField(field)} = ?`;
      where.params.push(value);
    }
    return where;
  }

  /** A page's statement: `columns` of `query.limit` rows after `query.afterSeq`, before `end` when given. */
  private listSql(columns: string, query: ListQuery, end?: SeqPosition): { sql: string; params: SqlValue[] } {
    return this.selectRange(columns, this.listWhere(query, { value: query.afterSeq ?? 0 }, end), query.limit);
  }

  /** `columns` of the first `limit` rows of `range`. */
  private selectRange(columns: string, range: ScopeRange, limit: number): { sql: string; params: SqlValue[] } {
    return {
      sql: overRange(range, `SELECT ${columns} FROM resources WHERE ${range.sql} ORDER BY ${range.order} LIMIT ?`),
      params: [...range.params, limit],
    };
  }

  /** Where a filtered list's scan window of `window` rows ends (store/keyset.ts scanWindowEnd). */
  scanWindowEnd(query: Omit<ListQuery, 'limit' | 'where' | 'throughSeq'>, window: number, q: Queryable = this.db) {
    return scanWindowEnd(q, 'resources', this.listWhere(query, { value: query.afterSeq ?? 0 }), window);
  }

  async list(query: ListQuery, q: Queryable = this.db): Promise<StoredResource[]> {
    const { sql, params } = this.listSql(COLUMNS, query);
    return (await q.all<Row>(sql, params)).map((r) => this.fromRow(r));
  }

  /**
   * The stored JSON text of each row, unparsed: `data` is written ordered and without
   * secrets, so lists send it as is (no parse, no re-serialisation).
   */
  async listJson(query: ListQuery, q: Queryable = this.db): Promise<{ seq: number; data: string }[]> {
    const { sql, params } = this.listSql('seq, data', query);
    return (await q.all<{ seq: number; data: string }>(sql, params)).map((r) => ({ seq: Number(r.seq), data: r.data }));
  }

  /**
   * One page of a list as the JSON text of its items joined by commas, built by the database: the
   * service reads one value instead of a row and a string per item (about 100 per page), which
   * also spares the collector most of a list's garbage. `data` is written ordered and without
   * secrets, so it is sent as stored.
   * - The aggregate takes the rows in the order of the subquery: its ORDER BY stays because of the
   *   LIMIT, and nothing between a Limit and a plain aggregate reorders rows (in either database;
   *   a test pins it). An ORDER BY inside the aggregate would sort the page a second time, which
   *   cost SQLite more than the whole read.
   * - Whether more follow is the next row's `seq`, read through the index (ORDER BY ... LIMIT 1: an
   *   EXISTS let PostgreSQL plan a sequential scan, the whole table on a last page).
   * - In a scope that holds large resources the page also ends at `maxBytes` of items, with at
   *   least one (store/large-scopes.ts); the returned limit is then the page's own length.
   */
  async listPage(
    query: Omit<ListQuery, 'limit' | 'where' | 'throughSeq'>,
    limit: number,
    maxBytes: number,
    q: Queryable = this.db,
  ): Promise<BoundedPage> {
    const from = { value: query.afterSeq ?? 0 };
    const end = (await this.largeScopes.isMarked(q, query)) ? byteBound(this.listWhere(query, from), limit, maxBytes) : undefined;
    const range = this.listWhere(query, from, end);
    const page = this.selectRange('seq, data', range, limit);
    const next = this.listWhere(query, { sql: 'p.last_seq' });
    const concat = this.db.dialect === 'sqlite' ? 'group_concat' : 'string_agg';
    const sql = overRange(
      range,
      `SELECT p.items, p.n, p.last_seq, (SELECT seq FROM resources WHERE ${next.sql} ORDER BY ${next.order} LIMIT 1) AS next_seq FROM ` +
        `(SELECT ${concat}(data, ',') AS items, count(*) AS n, max(seq) AS last_seq FROM (${page.sql}) page) p`,
    );
    const [[items, n, lastSeq, nextSeq]] = await q.rows(sql, [...next.params, ...page.params]);
    const count = Number(n);
    return {
      page: { count: count + (nextSeq === null ? 0 : 1), lastSeq: Number(lastSeq ?? 0), items: (items as string | null) ?? '' },
      limit: nextSeq === null ? limit : Math.min(limit, count),
    };
  }

  /** `columns` of one resource by id, within its tenant, project and kind (the reads below share it). */
  private byId<T>(columns: string, tenantId: string, projectId: string, kind: string, id: string, q: Queryable) {
    return q.get<T>(`SELECT ${columns} FROM resources WHERE id = ? AND tenant_id = ? AND project_id = ? AND kind = ?`, [
      id,
      tenantId,
      projectId,
      kind,
    ]);
  }

  async exists(tenantId: string, projectId: string, kind: string, id: string, q: Queryable = this.db): Promise<boolean> {
    return !!(await this.byId('1 AS ok', tenantId, projectId, kind, id, q));
  }

  async get(tenantId: string, projectId: string, kind: string, id: string, q: Queryable = this.db) {
    const row = await this.byId<Row>(COLUMNS, tenantId, projectId, kind, id, q);
    return row && this.fromRow(row);
  }

  /** Resources of one kind by id, within a tenant and project, GET_MANY_IDS per statement: those found, by id. */
  async getMany(tenantId: string, projectId: string, kind: string, ids: readonly string[], q: Queryable = this.db) {
    const found = new Map<string, StoredResource>();
    for (const row of await this.byIds<Row>(COLUMNS, tenantId, projectId, kind, ids, q)) found.set(row.id, this.fromRow(row));
    return found;
  }

  /** Which of `ids` exist (one kind, within a tenant and project), reading the ids alone, GET_MANY_IDS per statement. */
  async existingIds(
    tenantId: string,
    projectId: string,
    kind: string,
    ids: readonly string[],
    q: Queryable = this.db,
  ): Promise<Set<string>> {
    return new Set((await this.byIds<{ id: string }>('id', tenantId, projectId, kind, ids, q)).map((r) => r.id));
  }

  private async byIds<T>(
    columns: string,
    tenantId: string,
    projectId: string,
    kind: string,
    ids: readonly string[],
    q: Queryable,
  ): Promise<T[]> {
    const out: T[] = [];
    const all = [...new Set(ids)];
    for (let start = 0; start < all.length; start += GET_MANY_IDS) {
      const list = padToBucket(all.slice(start, start + GET_MANY_IDS));
      const rows = await q.all<T>(
        `SELECT ${columns} FROM resources WHERE tenant_id = ? AND project_id = ? AND kind = ? AND id IN (${paramList(list.length)})`,
        [tenantId, projectId, kind, ...list],
      );
      for (const row of rows) out.push(row);
    }
    return out;
  }

  /**
   * A resource's stored `data` as JSON text, unparsed: for a caller that parses only part of a large one
   * (a discovered schema of 100,000 columns is 5 MB, and JSON.parse holds the event loop while it runs).
   */
  async getDataJson(tenantId: string, projectId: string, kind: string, id: string, q: Queryable = this.db): Promise<string | undefined> {
    return (await this.byId<{ data: string }>('data', tenantId, projectId, kind, id, q))?.data;
  }

  async getByName(tenantId: string, projectId: string, kind: string, name: string, q: Queryable = this.db) {
    const row = await q.get<Row>(`SELECT ${COLUMNS} FROM resources WHERE tenant_id = ? AND project_id = ? AND kind = ? AND name = ?`, [
      tenantId,
      projectId,
      kind,
      name,
    ]);
    return row && this.fromRow(row);
  }

  /** Inserts a resource; `json` is its data's JSON text when the caller has it already (built in slices). */
  async insert(r: Omit<StoredResource, 'seq'>, q: Queryable = this.db, json = JSON.stringify(r.data)): Promise<void> {
    await q.run(`${INSERT_RESOURCES} ${ROW_PLACEHOLDERS}`, this.rowValues(r, json));
    await this.afterInsert(r, q, json);
  }

  /**
   * Inserts several resources in a few statements of many rows each, where insert() costs a round
   * trip per resource: background work that makes many at once (the alerts of a freshness look).
   * Statements hold a power of two of rows (at most INSERT_ROWS), so their texts stay a handful,
   * each prepared once per connection on PostgreSQL.
   */
  async insertMany(rows: readonly Omit<StoredResource, 'seq'>[], q: Queryable = this.db): Promise<void> {
    const jsons = rows.map((r) => JSON.stringify(r.data));
    for (let start = 0; start < rows.length;) {
      let size = 1;
      while (size * 2 <= Math.min(rows.length - start, INSERT_ROWS)) size *= 2;
      const params: SqlValue[] = [];
      for (let i = start; i < start + size; i++) params.push(...this.rowValues(rows[i], jsons[i]));
      await q.run(`${INSERT_RESOURCES} ${valuesList(size, ROW_COLUMNS)}`, params);
      start += size;
    }
    const scheduled = rows.flatMap((r) => {
      const expression = scheduleOf(r.kind, r.data);
      return expression ? [{ r, expression }] : [];
    });
    await putNewSchedules(q, scheduled, this.clock.nowMs(), this.clock.timeScale);
    for (let i = 0; i < rows.length; i++) {
      await this.largeScopes.markIfLarge(q, rows[i], jsons[i]);
      await syncRefs(q, rows[i], true);
    }
  }

  /** A new row's values, in INSERT_RESOURCES' column order. */
  private rowValues(r: Omit<StoredResource, 'seq'>, json: string): SqlValue[] {
    const now = String(r.data.created_at ?? new Date().toISOString());
    return [r.id, r.tenantId, r.projectId, r.kind, r.parentId, r.name, json, this.sealed(r), now, now];
  }

  /** The rows that follow a new resource: its large-scope mark, schedule and references (each only when it has one). */
  private async afterInsert(r: Omit<StoredResource, 'seq'>, q: Queryable, json: string): Promise<void> {
    await this.largeScopes.markIfLarge(q, r, json);
    await this.syncSchedule(r, q, true);
    await syncRefs(q, r, true);
  }

  /**
   * A new resource through the API: inserted unless its kind already has one of that name in the
   * project (the `resources_identity` index; ON CONFLICT DO NOTHING, so a taken name is an answer,
   * not an error that aborts the transaction). Returns false when the name is taken. On PostgreSQL
   * the schedule row goes in the same statement (one round trip); its values are putSchedule's.
   */
  async create(r: Omit<StoredResource, 'seq'>, q: Queryable = this.db): Promise<boolean> {
    const json = JSON.stringify(r.data);
    const params = this.rowValues(r, json);
    const insert = `${INSERT_RESOURCES} ${ROW_PLACEHOLDERS} ON CONFLICT (tenant_id, project_id, kind, name) DO NOTHING`;
    const expression = scheduleOf(r.kind, r.data);
    // An expression that does not parse gets no row (putSchedule's rule); validation refuses those anyway.
    const schedule =
      this.db.dialect === 'postgres' && expression ? scheduleRow(r, expression, this.clock.nowMs(), this.clock.timeScale) : undefined;
    if (schedule) {
      const row = await q.get<{ resource_id: string }>(
        `WITH created AS (${insert} RETURNING id) INSERT INTO schedules (resource_id, tenant_id, project_id, kind, expression, tick, offset_ms, next_due_at) SELECT id, ?, ?, ?, ?, ?, ?, ? FROM created RETURNING resource_id`,
        [...params, ...schedule.slice(1)],
      );
      if (!row) return false;
      await this.largeScopes.markIfLarge(q, r, json);
      await syncRefs(q, r, true);
      return true;
    }
    const { changes } = await q.run(insert, params);
    if (changes === 0) return false;
    await this.afterInsert(r, q, json);
    return true;
  }

  /** Updates a resource; `json` is its data's JSON text when the caller has it already (built in slices). */
  async update(r: Omit<StoredResource, 'seq'>, q: Queryable = this.db, json = JSON.stringify(r.data)): Promise<void> {
    await q.run('UPDATE resources SET name = ?, data = ?, secrets = ?, updated_at = ? WHERE id = ?', [
      r.name,
      json,
      this.sealed(r),
      String(r.data.updated_at ?? new Date().toISOString()),
      r.id,
    ]);
    await this.largeScopes.markIfLarge(q, r, json);
    await this.syncSchedule(r, q, false);
    await syncRefs(q, r, false);
  }

  /**
   * Writes a resource whose computed fields alone changed (a run's status on its connector,
   * pipeline or dbt project). Its name, secrets, schedule and references are as stored, so they
   * are neither sealed again nor compared: update() read a dbt project's 10,000 source references
   * back at every run's start and end, holding every tenant's requests on SQLite.
   */
  async updateComputed(r: Omit<StoredResource, 'seq'>, q: Queryable = this.db): Promise<void> {
    const json = JSON.stringify(r.data);
    await q.run('UPDATE resources SET data = ? WHERE id = ?', [json, r.id]);
    await this.largeScopes.markIfLarge(q, r, json);
  }

  async delete(r: Pick<StoredResource, 'id' | 'kind'>, q: Queryable = this.db): Promise<void> {
    await q.run('DELETE FROM resources WHERE id = ?', [r.id]);
    if (SCHEDULED_KINDS.has(r.kind)) await removeSchedule(q, r.id);
    if (hasReferences(r.kind)) await removeRefs(q, r.id);
  }

  /** The first resource of the project that names this one by id (resource_refs), as kind, id and the field that names it. */
  async referrerOf(r: Pick<StoredResource, 'id' | 'tenantId' | 'projectId'>, q: Queryable = this.db) {
    const ref = await firstReferrer(q, r.tenantId, r.projectId, r.id);
    return ref && { kind: ref.referrer_kind, id: ref.referrer_id, path: ref.path };
  }

  /**
   * What a resource made and owns (runs, a discovered schema), deleted with it. The scope names the
   * project so the listing index (tenant, project, kind, parent) bounds the delete to the resource's
   * own children; without it, only the tenant's prefix of that index applied, every row of the tenant.
   */
  async deleteChildren(
    scope: { tenantId: string; projectId: string; parentId: string },
    kinds: string[],
    q: Queryable = this.db,
  ): Promise<void> {
    if (kinds.length === 0) return;
    const where = `tenant_id = ? AND project_id = ? AND kind IN (${paramList(kinds.length)}) AND parent_id = ?`;
    const params = [scope.tenantId, scope.projectId, ...kinds, scope.parentId];
    if (kinds.some((k) => SCHEDULED_KINDS.has(k))) {
      await q.run(`DELETE FROM schedules WHERE resource_id IN (SELECT id FROM resources WHERE ${where})`, params);
    }
    if (kinds.some(hasReferences)) {
      await q.run(`DELETE FROM resource_refs WHERE referrer_id IN (SELECT id FROM resources WHERE ${where})`, params);
    }
    await q.run(`DELETE FROM resources WHERE ${where}`, params);
  }

  /**
   * A page as stored JSON (like listPage) that also ends once its items hold `maxBytes` of JSON,
   * with at least one item; read `chunk` rows at a time, so no read holds more than a chunk. For
   * kinds whose items can be large (a run of a 10,000-table sync is about 2 MB: 100 made one answer
   * of 200 MB). `limit` is the page's own: its item count when it ended early.
   */
  async listJsonPageWithin(
    query: Omit<ListQuery, 'limit' | 'where'>,
    limit: number,
    maxBytes: number,
    chunk = 10,
    q: Queryable = this.db,
  ): Promise<{ page: JsonPage; limit: number }> {
    const items: string[] = [];
    let bytes = 0;
    let lastSeq = 0;
    const done = (more: boolean) => ({
      page: { count: items.length + (more ? 1 : 0), lastSeq, items: items.join(',') },
      limit: items.length,
    });
    for (let afterSeq = query.afterSeq ?? 0; ;) {
      const want = Math.min(chunk, limit + 1 - items.length);
      const rows = await this.listJson({ ...query, afterSeq, limit: want }, q);
      for (const row of rows) {
        if (items.length === limit || (items.length > 0 && bytes + row.data.length > maxBytes)) return done(true);
        items.push(row.data);
        bytes += row.data.length;
        lastSeq = row.seq;
      }
      if (rows.length < want) return done(false);
      afterSeq = lastSeq;
    }
  }

  /** The newest child of a kind under a parent (a resource's latest run): one row, through the listing index. */
  async newestChild(scope: ChildScope, q: Queryable = this.db): Promise<StoredResource | undefined> {
    const newest = scopeRange(this.db, scopeColumns(scope), {}, 'DESC');
    const row = await q.get<Row>(
      overRange(newest, `SELECT ${COLUMNS} FROM resources WHERE ${newest.sql} ORDER BY ${newest.order} LIMIT 1`),
      newest.params,
    );
    return row && this.fromRow(row);
  }

  /**
   * A page of a parent's children of one kind, newest first (before `beforeSeq` when given), as
   * their `seq` and the named top-level fields of `data` (text): through the listing index, with no
   * row past the page read.
   */
  async newestChildFields(
    scope: ChildScope,
    fields: string[],
    limit: number,
    beforeSeq?: number,
    q: Queryable = this.db,
  ): Promise<Record<string, string | number | null>[]> {
    const range = scopeRange(this.db, scopeColumns(scope), beforeSeq === undefined ? {} : { before: { value: beforeSeq } }, 'DESC');
    const columns = fields.map((f) => `${this.jsonField(f)} AS ${f}`).join(', ');
    return q.all(
      overRange(range, `SELECT seq, ${columns} FROM resources WHERE ${range.sql} ORDER BY ${range.order} LIMIT ${Math.floor(limit)}`),
      range.params,
    );
  }

  /**
   * Keeps the newest `keep` children of a kind under a parent (a resource's run history): the older
   * ones go, except those whose `data.status` is `spare` (a run still running). Two statements on
   * the listing index, find the cut and delete below it, so the cost does not grow with the history.
   */
  async pruneChildren(scope: ChildScope, keep: number, spare: string, q: Queryable = this.db): Promise<void> {
    const children = scopeColumns(scope);
    const newest = scopeRange(this.db, children, {}, 'DESC');
    const cut = await q.get<{ seq: number }>(
      planEachTime(`SELECT seq FROM resources WHERE ${newest.sql} ORDER BY ${newest.order} LIMIT 1 OFFSET ${keep}`),
      newest.params,
    );
    if (!cut) return;
    // Planned with its values: with no order to give, neither form has a safe generic plan (with
    // equalities it walked the primary key up to the cut, every tenant's rows; with a row-value
    // range it took resources_kind_seq, every run of the project). It runs once per run started.
    await q.run(
      planEachTime(
        `DELETE FROM resources WHERE ${children.map(([c]) => `${c} = ?`).join(' AND ')} AND seq <= ? AND ${this.jsonField('status')} <> ?`,
      ),
      [...children.map(([, v]) => v), Number(cut.seq), spare],
    );
  }

  /**
   * Deletes a project's contents before the project itself (a project delete's first part):
   * DELETE_BATCH resources at a time with their schedules and references, each batch a transaction
   * of its own under the project's lock (`lock`: false once the project is gone), a turn of the
   * event loop between them. Its API keys go first, so none is used meanwhile. On SQLite a
   * transaction's commit writes every page it changed while holding the event loop: one
   * transaction deleting 60,000 resources held every tenant's requests for about 420 ms, 200 ms
   * of it in the commit even with its statements batched. A delete stopped half-way leaves the
   * project there, partly emptied; deleting it again finishes.
   */
  async emptyProject(tenantId: string, projectId: string, lock: (q: Queryable) => Promise<boolean>): Promise<void> {
    this.hooks.projectContentsDeleted?.(tenantId, projectId);
    await this.db.tx(
      async (q) => (await lock(q)) && q.run('DELETE FROM api_key_hashes WHERE tenant_id = ? AND project_id = ?', [tenantId, projectId]),
    );
    for (let done = false; !done; await nextTurn()) {
      done = await this.db.tx(async (q) => {
        if (!(await lock(q))) return true;
        const ids = (
          await q.all<{ id: string }>(`SELECT id FROM resources WHERE tenant_id = ? AND project_id = ? LIMIT ${DELETE_BATCH}`, [
            tenantId,
            projectId,
          ])
        ).map((r) => r.id);
        if (!ids.length) return true;
        const list = paramList(ids.length);
        await q.run(`DELETE FROM schedules WHERE resource_id IN (${list})`, ids);
        await q.run(`DELETE FROM resource_refs WHERE referrer_id IN (${list})`, ids);
        await q.run(`DELETE FROM resources WHERE id IN (${list})`, ids);
        return ids.length < DELETE_BATCH;
      });
    }
  }

  /** Whether the scope holds a resource over LARGE_ITEM_BYTES, so its pages also end at a number of bytes (large-scopes.ts). */
  isLargeScope(scope: { tenantId: string; projectId: string; kind: string }): Promise<boolean> {
    return this.largeScopes.isMarked(this.db, scope);
  }

  /**
   * Everything inside a project, for cascading deletes, in the delete's transaction: what is left
   * after emptyProject (resources written meanwhile).
   */
  async deleteProjectContents(tenantId: string, projectId: string, q: Queryable = this.db): Promise<void> {
    // The project's API keys go below: whoever caches them hears it first (StoreHooks).
    this.hooks.projectContentsDeleted?.(tenantId, projectId);
    await q.run('DELETE FROM resources WHERE tenant_id = ? AND project_id = ?', [tenantId, projectId]);
    await q.run('DELETE FROM schedules WHERE tenant_id = ? AND project_id = ?', [tenantId, projectId]);
    await q.run('DELETE FROM resource_refs WHERE tenant_id = ? AND project_id = ?', [tenantId, projectId]);
    await q.run('DELETE FROM api_key_hashes WHERE tenant_id = ? AND project_id = ?', [tenantId, projectId]);
  }

  /**
   * Every resource of one kind in a scope, a page at a time (keyset order), for a reader that
   * yields to the event loop between pages instead of holding it for the whole scope.
   */
  async *pages(
    scope: Omit<ListQuery, 'limit' | 'afterSeq' | 'throughSeq'>,
    pageSize: number,
    q: Queryable = this.db,
  ): AsyncGenerator<StoredResource[]> {
    for (let afterSeq = 0; ;) {
      const page = await this.list({ ...scope, afterSeq, limit: pageSize }, q);
      if (page.length) yield page;
      if (page.length < pageSize) return;
      afterSeq = page[page.length - 1].seq;
    }
  }

  /** All resources of the given kinds in a project (reference checks; projects are small). */
  async allOfKinds(tenantId: string, projectId: string, kinds: string[], q: Queryable = this.db): Promise<StoredResource[]> {
    if (kinds.length === 0) return [];
    const rows = await q.all<Row>(
      `SELECT ${COLUMNS} FROM resources WHERE tenant_id = ? AND project_id = ? AND kind IN (${paramList(kinds.length)}) ORDER BY seq`,
      [tenantId, projectId, ...kinds],
    );
    return rows.map((r) => this.fromRow(r));
  }
}
