import type { Queryable, SqlValue } from './db.js';
import type { ScopeRange } from './keyset.js';

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

type Scope = { tenantId: string; projectId: string; kind: string };

/** How long an answer "not marked" is trusted: a scope marked by another replica is known here within this. */
export const UNMARKED_TTL_MS = 10_000;
/** Scopes whose answer is kept (least recently used go first). */
const CACHED_SCOPES = 10_000;

/**
 * The marks, and what this process knows of them. Marks never go, so "marked" is kept for good;
 * "not marked" is asked again after UNMARKED_TTL_MS, so the list hot path costs a map lookup, not a
 * statement (on PostgreSQL a round trip, or a bigger statement that PostgreSQL plans on every call).
 */
export class LargeScopes {
  private readonly known = new Map<string, { marked: boolean; at: number }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Marks the resource's scope when its JSON text is large (a no-op write when it is marked already). */
  async markIfLarge(q: Queryable, r: Scope, json: string): Promise<void> {
    if (!isLargeItem(json)) return;
    await q.run('INSERT INTO large_scopes (tenant_id, project_id, kind) VALUES (?, ?, ?) ON CONFLICT DO NOTHING', [
      r.tenantId,
      r.projectId,
      r.kind,
    ]);
    this.remember(r, true);
  }

  /** Whether the scope is marked: from memory, or one primary-key probe. */
  async isMarked(q: Queryable, s: Scope): Promise<boolean> {
    const key = keyOf(s);
    const hit = this.known.get(key);
    if (hit && (hit.marked || this.now() - hit.at < UNMARKED_TTL_MS)) return hit.marked;
    const marked = !!(await q.get('SELECT 1 AS marked FROM large_scopes WHERE tenant_id = ? AND project_id = ? AND kind = ?', [
      s.tenantId,
      s.projectId,
      s.kind,
    ]));
    this.remember(s, marked);
    return marked;
  }

  private remember(s: Scope, marked: boolean): void {
    const key = keyOf(s);
    this.known.delete(key);
    this.known.set(key, { marked, at: this.now() });
    if (this.known.size > CACHED_SCOPES) this.known.delete(this.known.keys().next().value!);
  }
}

const keyOf = (s: Scope) => `${s.tenantId}\0${s.projectId}\0${s.kind}`;

/** What a page's bytes are counted on: a table and the size of a row in it (an SQL expression, never NULL). */
export interface SizedRows {
  table: string;
  size: string;
}

/** Stored resources: their `data` (the JSON a list sends as stored). */
export const RESOURCE_ROWS: SizedRows = { table: 'resources', size: 'octet_length(data)' };

/**
 * The exclusive upper bound of a page of `range` that ends within `maxBytes`: just past the last of
 * the first `limit` rows whose running total of bytes stays within it (the first row always counts).
 * The rows' lengths come from their record headers (octet_length), so rows past the cut are never
 * loaded. `range` may carry more conditions than its scope's (a filter): they count as its rows do.
 */
export function byteBound(
  range: ScopeRange,
  limit: number,
  maxBytes: number,
  rows: SizedRows = RESOURCE_ROWS,
): { sql: string; params: SqlValue[] } {
  const sizes = `SELECT seq, ${rows.size} AS size FROM ${rows.table} WHERE ${range.sql} ORDER BY ${range.order} LIMIT ?`;
  const running = `SELECT seq, size, sum(size) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) AS upto FROM (${sizes}) s`;
  return {
    sql: `(SELECT max(seq) FROM (${running}) w WHERE upto <= ? OR upto = size) + 1`,
    params: [...range.params, limit, maxBytes],
  };
}
