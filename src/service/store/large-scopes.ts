import type { Db, Queryable, SqlValue } from './db.js';
import type { ScopeRange, SeqPosition } from './keyset.js';

/**
 * Pages of a list end at a number of bytes as well as of items. A resource's stored JSON can be
 * close to the request body limit (1 MiB), so a page of 100 could be 100 MB: read, joined and sent
 * in one request by any read-only key, while on SQLite the event loop of every tenant waited (a
 * page of 100 resources of 1 MB held it 170 ms).
 *
 * Measuring each row on every list would cost the common case (items of a few hundred bytes) a
 * second walk of the page: on SQLite that tripled the page read. So a scope (tenant, project,
 * kind) is marked once it holds a resource over LARGE_ITEM_BYTES (migration 12, and every write
 * after it), and only a marked scope's pages are cut by bytes. Unmarked, 100 items are at most
 * 100 x 64 KiB, under the page budget anyway. A mark is never removed: a scope that once held a
 * large resource keeps the slower, bounded read.
 */
export const LARGE_ITEM_BYTES = 64 * 1024;

/** Whether a resource's stored JSON text is over LARGE_ITEM_BYTES (UTF-8), counting bytes only when the length cannot tell. */
export function isLargeItem(json: string): boolean {
  if (json.length > LARGE_ITEM_BYTES) return true;
  return json.length * 3 > LARGE_ITEM_BYTES && Buffer.byteLength(json) > LARGE_ITEM_BYTES;
}

/** Marks the resource's scope when its JSON text is large; a no-op write when it is marked already. */
export async function markIfLarge(q: Queryable, r: { tenantId: string; projectId: string; kind: string }, json: string): Promise<void> {
  if (!isLargeItem(json)) return;
  await q.run('INSERT INTO large_scopes (tenant_id, project_id, kind) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [
    r.tenantId,
    r.projectId,
    r.kind,
  ]);
}

const MARKED = 'SELECT 1 FROM large_scopes WHERE tenant_id = ? AND project_id = ? AND kind = ?';

/** Whether the scope is marked (one primary-key probe). */
export async function isLargeScope(q: Queryable, s: { tenantId: string; projectId: string; kind: string }): Promise<boolean> {
  return !!(await q.get(MARKED, [s.tenantId, s.projectId, s.kind]));
}

/**
 * The `seq` just past the last of the first `limit` rows of `range` whose running total of bytes
 * stays within `maxBytes` (the first row always counts). The rows' lengths come from their record
 * headers (octet_length), so rows past the cut are never loaded.
 */
function cutSql(range: ScopeRange, limit: number, maxBytes: number): { sql: string; params: SqlValue[] } {
  const sizes = `SELECT seq, octet_length(data) AS size FROM resources WHERE ${range.sql} ORDER BY ${range.order} LIMIT ?`;
  const running = `SELECT seq, size, sum(size) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) AS upto FROM (${sizes}) s`;
  return {
    sql: `(SELECT max(seq) FROM (${running}) w WHERE upto <= ? OR upto = size) + 1`,
    params: [...range.params, limit, maxBytes],
  };
}

/**
 * Where a page of `range` must end (as the exclusive upper bound of its range), or undefined when
 * it need not. On SQLite the mark is probed first (in process, ~1 µs) and the cut is in the page's
 * statement only for a marked scope: a bound that holds subqueries made every page's read 60 %
 * slower there. On PostgreSQL both go into the one statement (one round trip, evaluated once).
 */
export async function pageBound(
  db: Pick<Db, 'dialect'>,
  q: Queryable,
  scope: { tenantId: string; projectId: string; kind: string },
  range: ScopeRange,
  limit: number,
  maxBytes: number,
  unbounded: number,
): Promise<SeqPosition | undefined> {
  const cut = cutSql(range, limit, maxBytes);
  if (db.dialect === 'sqlite') return (await isLargeScope(q, scope)) ? cut : undefined;
  return {
    sql: `CASE WHEN EXISTS (${MARKED}) THEN ${cut.sql} ELSE ${unbounded} END`,
    params: [scope.tenantId, scope.projectId, scope.kind, ...cut.params],
  };
}
