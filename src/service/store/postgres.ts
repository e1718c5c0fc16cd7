import pg from 'pg';
import type { Db, Queryable, SqlValue } from './db.js';

/** `?` placeholders to `$1, $2, ...` (our SQL never has a literal question mark). */
function renumber(sql: string): string {
  let n = 0;
  return sql.replace(/\?/g, () => `$${++n}`);
}

const cache = new Map<string, string>();
const toPg = (sql: string) => {
  let out = cache.get(sql);
  if (out === undefined) cache.set(sql, (out = renumber(sql)));
  return out;
};

// BIGINT columns (sequences, counters) come back as JS numbers: ours stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));

function queryable(client: pg.Pool | pg.PoolClient): Queryable {
  return {
    async all<T>(sql: string, params: SqlValue[] = []) {
      return (await client.query(toPg(sql), params)).rows as T[];
    },
    async get<T>(sql: string, params: SqlValue[] = []) {
      return (await client.query(toPg(sql), params)).rows[0] as T | undefined;
    },
    async run(sql: string, params: SqlValue[] = []) {
      return { changes: (await client.query(toPg(sql), params)).rowCount ?? 0 };
    },
  };
}

/** Any fixed number: the advisory lock that serialises migrations across replicas. */
const MIGRATION_LOCK = 4242_0001;

export async function openPostgres(url: string): Promise<Db> {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  // Fail at start-up, not on the first request, when the database is unreachable.
  (await pool.connect()).release();
  return {
    dialect: 'postgres',
    ...queryable(pool),
    write: (sql, params) => queryable(pool).get(sql, params),
    async tx(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(queryable(client));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    async exclusive(fn) {
      const client = await pool.connect();
      try {
        await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
        return await fn();
      } finally {
        await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
        client.release();
      }
    },
    close: () => pool.end(),
  };
}
