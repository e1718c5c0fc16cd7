/**
 * One query layer for SQLite and PostgreSQL. SQL is written once with `?` placeholders
 * in the subset both understand (ON CONFLICT, RETURNING); the PostgreSQL adapter
 * renumbers placeholders. Values are strings, numbers or null; JSON goes in TEXT columns.
 */
export type SqlValue = string | number | null;

/**
 * Marks a statement to be planned with its values on every call instead of prepared once per
 * connection (PostgreSQL; a comment to SQLite). For the few statements whose best plan depends on
 * the values so much that a generic plan, chosen without them, can be far worse: a scan window
 * with a large OFFSET, where a generic plan sorts the whole tenant instead of walking its index.
 */
export const planEachTime = (sql: string): string => `${PLAN_EACH_TIME}${sql}`;
export const PLAN_EACH_TIME = '/* planned each time */ ';

/**
 * A list for an SQL `IN (...)` or a multi-row `VALUES`, padded by repeating its last item to the
 * next power of two: statements are kept per distinct text (prepared once per connection on
 * PostgreSQL), so a list of any length makes one of a dozen texts instead of one per length.
 * Repeats are harmless in an `IN` list and in an `INSERT ... ON CONFLICT DO NOTHING`.
 */
export function padToBucket<T>(items: readonly T[]): T[] {
  if (items.length === 0) return [];
  let size = 1;
  while (size < items.length) size *= 2;
  return [...items, ...Array<T>(size - items.length).fill(items[items.length - 1])];
}

export interface Queryable {
  all<T = Record<string, unknown>>(sql: string, params?: SqlValue[]): Promise<T[]>;
  /** Rows as arrays of column values, in SELECT order: no object per row (hot reads of many rows). */
  rows(sql: string, params?: SqlValue[]): Promise<unknown[][]>;
  get<T = Record<string, unknown>>(sql: string, params?: SqlValue[]): Promise<T | undefined>;
  run(sql: string, params?: SqlValue[]): Promise<{ changes: number }>;
}

export interface Db extends Queryable {
  readonly dialect: 'sqlite' | 'postgres';
  /** One write statement with RETURNING, outside a transaction (it still waits for SQLite's write lock). */
  write<T = Record<string, unknown>>(sql: string, params?: SqlValue[]): Promise<T | undefined>;
  /** Runs fn in one transaction; everything in it commits or nothing does. */
  tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
  /** Runs fn holding a database-wide lock (migrations on several replicas). */
  exclusive<T>(fn: () => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export async function openDb(options: { databaseUrl?: string; sqlitePath: string }): Promise<Db> {
  if (options.databaseUrl) {
    const { openPostgres } = await import('./postgres.js');
    return openPostgres(options.databaseUrl);
  }
  const { openSqlite } = await import('./sqlite.js');
  return openSqlite(options.sqlitePath);
}
