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

/** `?, ?, ?`: the placeholders of an `IN (...)` list of `count` values. */
export const paramList = (count: number): string => Array<string>(count).fill('?').join(', ');

/** `(?, ?), (?, ?)`: the placeholders of a multi-row `VALUES` list, `rows` rows of `columns` values. */
export const valuesList = (rows: number, columns: number): string =>
  Array<string>(rows)
    .fill(`(${paramList(columns)})`)
    .join(', ');

/**
 * Rows per statement of insertRows: with up to 31 columns, under SQLite's 32,766 parameters per
 * statement (PostgreSQL's limit is 65,535). One statement per row costs a round trip each
 * (about 1 ms on PostgreSQL here); one for all rows breaks the limit (a dbt project naming
 * connectors 10,000 times made one of 98,304 parameters and a 500).
 */
const INSERT_ROWS = 1_024;

/**
 * Inserts `rows` (each the column values of one row) in multi-row statements of at most
 * INSERT_ROWS rows, each padded by padToBucket: `statement(values)` wraps the VALUES list and must
 * make a repeated row harmless (`ON CONFLICT ... DO NOTHING`). Returns the rows changed.
 */
export async function insertRows(q: Queryable, rows: readonly SqlValue[][], statement: (values: string) => string): Promise<number> {
  let changes = 0;
  for (const [sql, params] of insertChunks(rows, statement)) changes += (await q.run(sql, params)).changes;
  return changes;
}

/** insertRows for a statement with `RETURNING`: the rows it returned, over all statements. */
export async function insertRowsReturning<T>(
  q: Queryable,
  rows: readonly SqlValue[][],
  statement: (values: string) => string,
): Promise<T[]> {
  const returned: T[] = [];
  for (const [sql, params] of insertChunks(rows, statement)) returned.push(...(await q.all<T>(sql, params)));
  return returned;
}

function* insertChunks(rows: readonly SqlValue[][], statement: (values: string) => string): Generator<[string, SqlValue[]]> {
  for (let start = 0; start < rows.length; start += INSERT_ROWS) {
    const chunk = padToBucket(rows.slice(start, start + INSERT_ROWS));
    yield [statement(valuesList(chunk.length, chunk[0].length)), chunk.flat()];
  }
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
